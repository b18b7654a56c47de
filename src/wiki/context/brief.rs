//! How `get_context`'s ranked items are cut to the token budget, with the older
//! pull requests in brief. A whole change item costs about 90 tokens as JSON,
//! 70 as text (title, why, merge commit, files, page), and a file people change
//! often was touched by dozens of pull requests, on a real history by a hundred
//! and more: whole, only about twenty fit in the default 2,000 tokens. So the
//! newest [`WHOLE_CHANGES`] changes that touched the asked paths stay whole
//! (fewer, down to none, when naming every one of them needs their room), and
//! the rest are named one line each, `#NUMBER TITLE` (about 10 tokens), in one
//! `earlier_changes` item packed at [`BRIEF_RELEVANCE`] (and listed just after
//! the whole changes), which names the pages holding their whole entries.
//! Budget left once everything is packed adds author and date to the lines
//! (`#NUMBER TITLE (AUTHOR, DATE)`), newest first, and stops there: at
//! [`Detail::Full`] it goes on a tier at a time, each tier on every line before
//! the next, with the why (` — WHY`) and then the whole item: the entry
//! is number, title, why, author and date, so all of those come before the
//! merge commit and files, and naming every pull request comes before any of
//! them.
//!
//! Invariants: the items returned cost at most the budget by
//! [`estimate_tokens`] in the form the answer is sent in (the brief list is
//! packed by a bound, the paths and pages of every candidate, and checked at
//! its exact cost at the end); every change that touched an asked path is a
//! whole item, a line of `earlier_changes`, or counted in `left_out` with its
//! page in `read_more`; brief lines are newest first (date, then number);
//! deterministic; the items come best first ([`order`]).

use std::cmp::Ordering;
use std::collections::HashMap;

use super::item::{
    Detail, Format, Item, LeftOut, MAX_READ_MORE, Ranked, about_every_path, estimate_tokens,
};
use super::{lines, text};

/// Changes that touched the asked paths kept whole, newest first, before
/// the rest go brief; fewer when a line would be left out for them.
pub const WHOLE_CHANGES: usize = 3;
/// Where the brief list ranks: under every fact, purpose, the newest
/// changes, who knows the area and the test command, over the build
/// command (48), a manifest's dependencies (45) and the weakest passages.
pub const BRIEF_RELEVANCE: u32 = 50;
/// Most pages the brief list names.
const MAX_BRIEF_PAGES: usize = 4;
/// Most bytes of the why a brief line carries.
pub const BRIEF_WHY_BYTES: usize = 240;

/// Best first: relevance, then kind, then changes newest first, then
/// identity (a total order).
pub fn order(a: &Ranked, b: &Ranked) -> Ordering {
    b.relevance
        .cmp(&a.relevance)
        .then_with(|| a.item.kind().cmp(b.item.kind()))
        .then_with(|| newest_first(a, b))
        .then_with(|| a.item.key().cmp(&b.item.key()))
}

/// Bytes an item adds to the answer in `format` (its separator included).
fn bytes(item: &Ranked, format: Format) -> usize {
    match format {
        Format::Json => serde_json::to_string(item).map_or(0, |s| s.len()) + 1,
        Format::Text => serde_json::to_value(item).map_or(0, |v| text::item_bytes(&v)),
    }
}

/// Tokens an item costs in `format`.
fn cost(item: &Ranked, format: Format) -> usize {
    estimate_tokens(bytes(item, format))
}

/// The cost of each candidate, measured once per answer: packing tries
/// several times (fewer whole changes, less room for what was left out),
/// and rendering an item is most of a warm answer's time.
struct Costs {
    format: Format,
    /// [`Item::key`] → tokens.
    known: HashMap<String, usize>,
}

impl Costs {
    fn of_candidates(ranked: &[Ranked], format: Format) -> Costs {
        let known = ranked
            .iter()
            .map(|item| (item.item.key(), cost(item, format)))
            .collect();
        Costs { format, known }
    }

    /// Tokens `item` costs (measured now when it is not a candidate).
    fn of(&self, item: &Ranked) -> usize {
        match self.known.get(&item.item.key()) {
            Some(tokens) => *tokens,
            None => cost(item, self.format),
        }
    }
}

/// A change that an asked path led to (not only the question).
fn touched_a_path(item: &Ranked) -> bool {
    matches!(item.item, Item::Change { .. }) && !item.about.is_empty()
}

/// How much of a change its brief line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// `#NUMBER TITLE`.
    Named,
    /// `#NUMBER TITLE (AUTHOR, DATE)`.
    Dated,
    /// `#NUMBER TITLE (AUTHOR, DATE) — WHY` (at most [`BRIEF_WHY_BYTES`] of
    /// it), when it has one.
    WithWhy,
}

/// A change in brief, as much as `tier` says.
pub fn line(item: &Item, tier: Tier) -> String {
    let Item::Change {
        number,
        title,
        author,
        date,
        why,
        ..
    } = item
    else {
        return item.key();
    };
    let mut line = if tier == Tier::Named {
        format!("#{number} {title}")
    } else if date.is_empty() {
        format!("#{number} {title} ({author})")
    } else {
        format!("#{number} {title} ({author}, {date})")
    };
    if tier == Tier::WithWhy && !why.is_empty() {
        line.push_str(" — ");
        line.push_str(&lines::bounded(why, BRIEF_WHY_BYTES));
    }
    line
}

/// Bytes a brief line adds to the list in `format` (its separator
/// included).
fn row_bytes(change: &Ranked, tier: Tier, format: Format) -> usize {
    let line = line(&change.item, tier);
    match format {
        Format::Json => serde_json::to_string(&line).map_or(0, |s| s.len()) + 1,
        Format::Text => text::line_bytes(&line),
    }
}

/// Newest first: date, then number.
fn newest_first(a: &Ranked, b: &Ranked) -> Ordering {
    let when = |r: &Ranked| match &r.item {
        Item::Change { date, number, .. } => (date.clone(), *number),
        _ => (String::new(), 0),
    };
    when(b).cmp(&when(a))
}

/// The `earlier_changes` item naming `changes` (newest first), the first
/// `grown[0]` of them with author and date, the first `grown[1]` with their
/// why too; without lines when not `lined` (its frame, to bound its cost).
/// `paths` is how many paths were asked.
fn brief_item(changes: &[Ranked], grown: [usize; 2], lined: bool, paths: usize) -> Ranked {
    let mut about: Vec<String> = Vec::new();
    let mut pages: Vec<String> = Vec::new();
    for change in changes {
        for path in &change.about {
            if !about.contains(path) {
                about.push(path.clone());
            }
        }
        if let Item::Change { page, .. } = &change.item
            && pages.len() < MAX_BRIEF_PAGES
            && !pages.contains(page)
        {
            pages.push(page.clone());
        }
    }
    Ranked {
        relevance: BRIEF_RELEVANCE,
        about_every_path: about_every_path(&about, paths),
        about,
        item: Item::EarlierChanges {
            changes: changes
                .iter()
                .take(if lined { changes.len() } else { 0 })
                .enumerate()
                .map(|(at, c)| line(&c.item, tier_at(at, grown)))
                .collect(),
            pages,
        },
    }
}

/// Bytes bounding the `earlier_changes` item without lines for any prefix
/// of `changes`: it names the paths and pages of every one, and `about` as
/// sent unless each of them is about every asked path (together they may
/// be while a prefix is not, and then it sends `about`).
fn frame_bound(changes: &[Ranked], paths: usize, format: Format) -> usize {
    let mut frame = brief_item(changes, [0, 0], false, paths);
    frame.about_every_path &= changes.iter().all(|c| c.about_every_path);
    bytes(&frame, format)
}

/// The tier of the line at `at`, the first `grown[0]` lines dated and the
/// first `grown[1]` with their why.
fn tier_at(at: usize, grown: [usize; 2]) -> Tier {
    if at < grown[1] {
        Tier::WithWhy
    } else if at < grown[0] {
        Tier::Dated
    } else {
        Tier::Named
    }
}

/// The answer being filled.
struct Packer<'a> {
    max: usize,
    used: usize,
    items: Vec<Ranked>,
    left_out: LeftOut,
    /// Changes an asked path led to that were left out.
    path_changes_left: usize,
    /// How many paths were asked.
    paths: usize,
    format: Format,
    costs: &'a Costs,
}

impl Packer<'_> {
    /// Keeps `item` if it fits; says whether it did.
    fn keep(&mut self, item: &mut Option<Ranked>) -> bool {
        let Some(cost) = item.as_ref().map(|item| self.costs.of(item)) else {
            return false;
        };
        if self.used + cost > self.max {
            return false;
        }
        self.used += cost;
        self.items.extend(item.take());
        true
    }

    fn leave_out(&mut self, item: &Ranked) {
        self.path_changes_left += usize::from(touched_a_path(item));
        self.left_out.items += 1;
        *self.left_out.by_kind.entry(item.item.kind()).or_default() += 1;
        let page = item.item.page().to_owned();
        if self.left_out.read_more.len() < MAX_READ_MORE && !self.left_out.read_more.contains(&page)
        {
            self.left_out.read_more.push(page);
        }
    }

    /// Names as many of `brief` as fit, newest first, and spends their
    /// bound; returns them (the rest are left out) and the bytes the list is
    /// bounded by (0 when none fit).
    fn brief(&mut self, mut brief: Vec<Ranked>) -> (Vec<Ranked>, usize) {
        brief.sort_by(newest_first);
        let mut list = frame_bound(&brief, self.paths, self.format);
        let mut named = Vec::new();
        let mut rest = brief.into_iter();
        for change in rest.by_ref() {
            let row = row_bytes(&change, Tier::Named, self.format);
            if self.used + estimate_tokens(list + row) > self.max {
                self.leave_out(&change);
                break;
            }
            list += row;
            named.push(change);
        }
        for change in rest {
            self.leave_out(&change);
        }
        if named.is_empty() {
            return (named, 0);
        }
        self.used += estimate_tokens(list);
        (named, list)
    }
}

/// How an answer is packed: its budget, the tokens its frame spends
/// already, how much of the older changes it says, how many paths were
/// asked, and the form it is sent in (what its costs count).
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub max_tokens: usize,
    pub frame: usize,
    pub detail: Detail,
    pub paths: usize,
    pub format: Format,
}

/// Cuts `ranked` (best first, see [`order`]) to the `budget`: returns the
/// items best first, the tokens they and the frame cost, and what was left
/// out.
pub fn pack(ranked: Vec<Ranked>, budget: Budget) -> (Vec<Ranked>, usize, LeftOut) {
    // Naming every change a path led to comes before keeping the newest
    // whole: when a line is left out, fewer stay whole, down to none.
    let costs = Costs::of_candidates(&ranked, budget.format);
    let mut keep_whole = WHOLE_CHANGES;
    loop {
        let packer = pack_keeping(ranked.clone(), budget, keep_whole, &costs);
        if packer.path_changes_left == 0 || keep_whole == 0 {
            return (packer.items, packer.used, packer.left_out);
        }
        keep_whole -= 1;
    }
}

/// [`pack`] with the newest `keep_whole` changes a path led to whole first.
fn pack_keeping(
    ranked: Vec<Ranked>,
    budget: Budget,
    keep_whole: usize,
    costs: &Costs,
) -> Packer<'_> {
    let Budget { detail, format, .. } = budget;
    let mut packer = Packer {
        max: budget.max_tokens,
        used: budget.frame,
        items: Vec::new(),
        left_out: LeftOut::default(),
        path_changes_left: 0,
        paths: budget.paths,
        format,
        costs,
    };
    // The newest few changes a path led to stay whole; the rest go brief.
    let (mut whole, mut brief, mut rest) = (0, Vec::new(), Vec::new());
    for item in ranked {
        if touched_a_path(&item) {
            if whole == keep_whole {
                brief.push(item);
                continue;
            }
            whole += 1;
        }
        rest.push(item);
    }
    let mut listed: Option<(Vec<Ranked>, usize)> = None;
    // Once one of them does not fit whole, the older ones go brief too.
    let mut spilled = false;
    for item in rest {
        if listed.is_none() && item.relevance < BRIEF_RELEVANCE {
            listed = Some(packer.brief(std::mem::take(&mut brief)));
        }
        let path_change = touched_a_path(&item);
        if path_change && spilled && listed.is_none() {
            brief.push(item);
            continue;
        }
        let mut item = Some(item);
        if packer.keep(&mut item) {
            continue;
        }
        match item {
            Some(item) if path_change && listed.is_none() => {
                spilled = true;
                brief.push(item);
            }
            Some(item) => packer.leave_out(&item),
            None => {}
        }
    }
    let (mut named, mut list) = listed.unwrap_or_else(|| packer.brief(brief));
    // What is left of the budget grows the lines a tier at a time, newest
    // first: author and date on every line; at full detail then the why,
    // then, once every line has it, turns them whole, newest first.
    let mut grown = [0usize; 2];
    for (step, from, to) in [
        (0, Tier::Named, Tier::Dated),
        (1, Tier::Dated, Tier::WithWhy),
    ] {
        if step == 1 && (grown[0] < named.len() || detail == Detail::Brief) {
            break;
        }
        while let Some(change) = named.get(grown[step]) {
            let bigger = list + row_bytes(change, to, format) - row_bytes(change, from, format);
            let used = packer.used - estimate_tokens(list) + estimate_tokens(bigger);
            if used > packer.max {
                break;
            }
            packer.used = used;
            list = bigger;
            grown[step] += 1;
        }
    }
    let mut promoted = 0;
    while detail == Detail::Full
        && grown[1] == named.len()
        && let Some(change) = named.get(promoted)
    {
        // The list without this line, or no list when it was the last.
        let rest = if promoted + 1 == named.len() {
            0
        } else {
            list - row_bytes(change, Tier::WithWhy, format)
        };
        let used = packer.used - estimate_tokens(list) + estimate_tokens(rest) + costs.of(change);
        if used > packer.max {
            break;
        }
        packer.used = used;
        list = rest;
        promoted += 1;
    }
    let mut brief_list: Vec<Ranked> = named.split_off(promoted);
    let mut grown = grown.map(|n| n - promoted);
    packer.items.extend(named);
    // The list's exact cost in place of its bound: the lines left after
    // promotion may name other pages, so the oldest go if it is over.
    packer.used -= estimate_tokens(list);
    // Listed after the whole changes the paths led to, as its lines are older.
    let after = packer
        .items
        .iter()
        .filter(|item| touched_a_path(item))
        .map(|item| item.relevance)
        .min()
        .unwrap_or(BRIEF_RELEVANCE)
        .min(BRIEF_RELEVANCE);
    while !brief_list.is_empty() {
        let mut item = brief_item(&brief_list, grown, true, packer.paths);
        item.relevance = after;
        if packer.used + cost(&item, format) <= packer.max {
            packer.used += cost(&item, format);
            packer.items.push(item);
            break;
        }
        if let Some(oldest) = brief_list.pop() {
            packer.leave_out(&oldest);
        }
        grown = grown.map(|n| n.min(brief_list.len()));
    }
    packer.items.sort_by(order);
    packer
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(number: u64, path: &str, page: &str) -> Ranked {
        Ranked {
            relevance: 80,
            about: vec![path.to_owned()],
            about_every_path: false,
            item: Item::Change {
                number,
                title: format!("Change {number}"),
                why: String::new(),
                author: "Erin".into(),
                date: format!("2026-01-{number:02}"),
                merge_commit: format!("{number:040}"),
                files: vec![path.to_owned()],
                more_files: 0,
                dependencies: None,
                arrived_through: None,
                page: page.to_owned(),
            },
        }
    }

    /// The bound the brief list is packed by holds for every prefix of it:
    /// the newest lines may be about one of two asked paths, and then their
    /// list sends `about`, which the list of all of them, about both, does
    /// not. When every line is about every path, it is exact.
    #[test]
    fn the_list_bound_holds_for_every_prefix() {
        let changes = vec![
            change(4, "billing/tax.py", "Area-billing.md"),
            change(3, "billing/tax.py", "Area-billing.md"),
            change(2, "api/routes.py", "Area-api.md"),
            change(1, "api/routes.py", "Area-api.md"),
        ];
        for format in [Format::Text, Format::Json] {
            let bound = frame_bound(&changes, 2, format);
            for end in 1..=changes.len() {
                let prefix = bytes(&brief_item(&changes[..end], [0, 0], false, 2), format);
                assert!(
                    prefix <= bound,
                    "{format:?}, {end} lines: {prefix} > {bound}"
                );
            }
        }
        // One path asked: every line is about it, and the bound is exact.
        let one: Vec<Ranked> = changes[..2]
            .iter()
            .cloned()
            .map(|mut c| {
                c.about_every_path = true;
                c
            })
            .collect();
        for format in [Format::Text, Format::Json] {
            let exact = bytes(&brief_item(&one, [0, 0], false, 1), format);
            assert_eq!(frame_bound(&one, 1, format), exact, "{format:?}");
        }
    }
}
