//! `get_context`'s answer from one commit's context index: for each asked
//! path its purpose, the facts that cite it, the pull requests that touched
//! it (newest first), who knows its area and, for a manifest, what it
//! declares; for a question, the passages search ranks best. Every item is
//! ranked by relevance to the paths and the question and the answer is cut
//! to a token budget ([`super::brief`]: the newest few pull requests whole,
//! the older named one line each), saying what it left out and which pages
//! hold more.
//!
//! Invariants: deterministic (the same index, paths, query and budget give
//! the same answer, byte for byte: scores are integers, ties broken by a
//! total order); the items returned never cost more than the budget by the
//! documented estimate ([`estimate_tokens`]); an item left out is counted by
//! kind and its page named in `read_more`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::brief;
use super::index::{ContextIndex, FactKind, FactRecord, is_under};
use super::item::{
    Citation, Detail, Format, Item, LeftOut, MAX_PEOPLE, Person, Ranked, about_every_path,
    estimate_tokens,
};
use super::{lines, text};
use crate::wiki::query;

/// Most passages a question adds.
const MAX_PASSAGES: usize = 12;

/// What the answer says about each asked path.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PathSummary {
    pub path: String,
    /// `file`, `directory`, or `unknown` (nothing on the wiki names it).
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub area: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub area_page: Option<String>,
}

/// The budget and what it bought: `used` counts the whole answer in the
/// form it is sent in (its items, paths, what was left out, and the fields
/// the caller adds), by [`estimate_tokens`], and is at most `max` whenever
/// the paths alone fit.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Tokens {
    pub max: usize,
    pub used: usize,
}

/// `get_context`'s result (the tool adds `as_of`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ContextAnswer {
    /// The wiki commit answered from.
    #[serde(rename = "ref")]
    pub commit: String,
    pub paths: Vec<PathSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Best first.
    pub items: Vec<Ranked>,
    pub tokens: Tokens,
    pub left_out: LeftOut,
    /// The wiki was larger than the index budget: pages past it are not
    /// read (not sent when it was not).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Evidence markers on the wiki that do not parse (not used).
    #[serde(skip_serializing_if = "is_zero")]
    pub unreadable_markers: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A search hit as the answer uses it (from the search index).
pub struct Passage {
    pub page: String,
    pub line: usize,
    pub heading: Option<String>,
    pub text: String,
    /// The merge sha when the line is a pull-request entry.
    pub entry: Option<String>,
}

/// What the tool asked, checked.
pub struct Request<'a> {
    pub paths: &'a [String],
    pub query: Option<&'a str>,
    pub max_tokens: usize,
    pub detail: Detail,
    /// The form the answer is sent in, which its budget counts.
    pub format: Format,
    /// JSON bytes the caller adds to the answer (`as_of`, the repositories
    /// it names), counted in the budget.
    pub caller_bytes: usize,
}

fn citation(fact: &FactRecord) -> Citation {
    Citation {
        path: fact.path.clone(),
        cited_commit: fact.cited_commit.clone(),
        lines: fact.lines.clone(),
        status: if fact.changed_in.is_some() {
            "stale"
        } else {
            "current"
        },
        changed_in: fact.changed_in.clone(),
        deleted: fact.deleted,
    }
}

fn fact_item(fact: &FactRecord) -> Item {
    match fact.kind {
        FactKind::Purpose => Item::Purpose {
            text: lines::split_item(&fact.text).map_or_else(|| fact.text.clone(), |(_, p)| p),
            page: fact.page.clone(),
            line: fact.line,
            citation: citation(fact),
        },
        FactKind::Dependency => {
            let (name, requirement) =
                lines::split_item(&fact.text).unwrap_or_else(|| (fact.text.clone(), String::new()));
            Item::Dependency {
                manifest: fact.path.clone(),
                name,
                requirement,
                page: fact.page.clone(),
                line: fact.line,
                citation: citation(fact),
            }
        }
        FactKind::HowTo => Item::HowTo {
            topic: fact.group.clone().unwrap_or_default(),
            text: fact.text.clone(),
            page: fact.page.clone(),
            line: fact.line,
            citation: citation(fact),
            more_of_topic: 0,
        },
        FactKind::Fact => Item::Fact {
            text: fact.text.clone(),
            page: fact.page.clone(),
            line: fact.line,
            citation: citation(fact),
        },
    }
}

/// The words of an item that a question can match.
fn item_text(item: &Item) -> String {
    match item {
        Item::Purpose { text, citation, .. } | Item::Fact { text, citation, .. } => {
            format!("{} {text}", citation.path)
        }
        Item::Change {
            title,
            why,
            author,
            files,
            dependencies,
            ..
        } => format!(
            "{title} {why} {author} {} {}",
            files.join(" "),
            dependencies.as_deref().unwrap_or_default()
        ),
        Item::People { area, authors, .. } => {
            let names: Vec<&str> = authors.iter().map(|a| a.name.as_str()).collect();
            format!("who knows {area} {}", names.join(" "))
        }
        Item::Dependency {
            manifest,
            name,
            requirement,
            ..
        } => format!("dependency {manifest} {name} {requirement}"),
        Item::HowTo { topic, text, .. } => format!("how to {topic} {text}"),
        Item::EarlierChanges { changes, .. } => changes.join(" "),
        Item::Passage { text, heading, .. } => {
            format!("{} {text}", heading.as_deref().unwrap_or_default())
        }
    }
}

/// Distinct query terms found in `text`.
fn matched(terms: &BTreeSet<String>, text: &str) -> u32 {
    let found: BTreeSet<String> = query::text_terms(text).into_iter().collect();
    terms.intersection(&found).count() as u32
}

/// Normalizes an asked path: no `./`, no trailing `/`.
pub fn normalize(path: &str) -> String {
    path.trim_start_matches("./")
        .trim_end_matches('/')
        .to_owned()
}

/// How an indexed path relates to an asked one: exact, or inside it.
fn relates(indexed: &str, asked: &str) -> Option<bool> {
    if indexed == asked {
        Some(true)
    } else if is_under(indexed, asked) {
        Some(false)
    } else {
        None
    }
}

/// Builds the answer; `passages` are the search hits for the query, best first.
/// A path `index` does not know is answered from `beyond` (the area pages
/// past the scan budget, [`super::lookup`]) when given.
pub fn answer_with(
    index: &ContextIndex,
    beyond: Option<&ContextIndex>,
    commit: String,
    request: &Request<'_>,
    passages: Vec<Passage>,
    truncated: bool,
) -> ContextAnswer {
    let primary = index;
    let asked: Vec<String> = request.paths.iter().map(|p| normalize(p)).collect();
    let terms: BTreeSet<String> = request
        .query
        .map(|q| {
            query::analyze(q)
                .terms
                .into_iter()
                .filter(|t| !t.starts_with(query::PATH_PREFIX))
                .collect()
        })
        .unwrap_or_default();
    // Paths the question names count as asked, after the asked ones.
    let mut all_paths = asked.clone();
    if let Some(q) = request.query {
        for named in query::path_words(q) {
            let named = normalize(&named);
            let known = index
                .by_path
                .keys()
                .chain(index.entry_paths.keys())
                .find(|p| p.eq_ignore_ascii_case(&named))
                .cloned();
            if let Some(known) = known
                && !all_paths.contains(&known)
            {
                all_paths.push(known);
            }
        }
    }

    let mut candidates: BTreeMap<String, Ranked> = BTreeMap::new();
    let mut add = |base: u32, about: &str, item: Item| {
        let relevance = base + 12 * matched(&terms, &item_text(&item));
        let key = item.key();
        let entry = candidates.entry(key).or_insert_with(|| Ranked {
            relevance: 0,
            about: Vec::new(),
            about_every_path: false,
            item,
        });
        entry.relevance = entry.relevance.max(relevance);
        if !about.is_empty() && !entry.about.iter().any(|a| a == about) {
            entry.about.push(about.to_owned());
        }
    };

    let mut summaries = Vec::new();
    for path in &all_paths {
        let index = match beyond {
            Some(beyond) if !primary.knows(path) => beyond,
            _ => primary,
        };
        let file = index.by_path.contains_key(path)
            || index.entry_paths.contains_key(path)
            || index.areas.iter().any(|a| a.files.contains(path));
        let kind = if file {
            "file"
        } else if index.knows(path) {
            "directory"
        } else {
            "unknown"
        };
        let area = index.area_of(path);
        summaries.push(PathSummary {
            path: path.clone(),
            kind,
            area: area.map(|a| a.name.clone()),
            area_page: area.map(|a| a.page.clone()),
        });
        // Facts citing it (a directory: everything under it, ranked lower).
        for (cited, facts) in index.by_path.range(path.clone()..) {
            let Some(exact) = relates(cited, path) else {
                if !cited.starts_with(path.as_str()) {
                    break;
                }
                continue;
            };
            let near = if exact { 0 } else { 15 };
            for &at in facts {
                let fact = &index.facts[at];
                let base = match (fact.kind, fact.changed_in.is_some()) {
                    (FactKind::Purpose, _) => 100,
                    (_, true) => 90,
                    (FactKind::Fact | FactKind::HowTo, false) => 70,
                    (FactKind::Dependency, false) => 45,
                };
                add(base - near, path, fact_item(fact));
            }
        }
        // Pull requests that touched it, newest first.
        let mut touching: Vec<usize> = index
            .entry_paths
            .iter()
            .filter(|(p, _)| relates(p, path).is_some())
            .flat_map(|(_, list)| list.iter().copied())
            .collect();
        touching.sort_unstable();
        touching.dedup();
        touching.sort_by(|&a, &b| {
            let (a, b) = (&index.entries[a].entry, &index.entries[b].entry);
            b.date.cmp(&a.date).then(b.number.cmp(&a.number))
        });
        for (rank, &at) in touching.iter().enumerate() {
            let record = &index.entries[at];
            let exact = record.entry.paths.iter().any(|p| p == path);
            let base = 85u32.saturating_sub(rank.min(40) as u32) - if exact { 0 } else { 10 };
            add(base, path, change_item(record));
        }
        if let Some(area) = area
            && !area.authors.is_empty()
        {
            add(60, path, people_item(area));
        }
    }
    // How to test and build the project applies to every path. The test
    // command ranks just under the five newest changes: one short line every
    // change needs, it must not be cut for a file's older pull requests
    // (bench/context.sh: with 58 it was cut from 25 of 50 tasks). The build
    // and release commands rank under the older pull requests' names: on a
    // real history (bench/context.sh, REPLAY) they cost as much as ten of
    // them, and a change is tested before it is released.
    // Brief, each is said once: the topic's first current fact in the
    // page's order (CI's step before the files that repeat it), the others
    // counted on it: encode/httpx's page names six ways to run its tests,
    // which took over a quarter of every answer (bench/context.sh, REPLAY).
    if !all_paths.is_empty() {
        for (topic, base) in [("Test", 81), ("Build", 48)] {
            let facts: Vec<&FactRecord> = index
                .facts
                .iter()
                .filter(|f| f.kind == FactKind::HowTo && f.group.as_deref() == Some(topic))
                .collect();
            let first = facts
                .iter()
                .position(|f| f.changed_in.is_none())
                .unwrap_or(0);
            let said = match request.detail {
                Detail::Full => &facts[..],
                Detail::Brief => facts.get(first..=first).unwrap_or_default(),
            };
            let untold = facts.len() - said.len();
            for fact in said {
                let mut item = fact_item(fact);
                if let Item::HowTo { more_of_topic, .. } = &mut item {
                    *more_of_topic = untold;
                }
                add(
                    base + if fact.changed_in.is_some() { 4 } else { 0 },
                    "",
                    item,
                );
            }
        }
    }
    // The question's best passages.
    let top = passages.len();
    for (rank, passage) in passages.into_iter().take(MAX_PASSAGES).enumerate() {
        let base = 50 - (rank.min(top) as u32) * 2;
        if let Some(sha) = &passage.entry
            && let Some(&at) = index.by_sha.get(sha)
        {
            add(base, "", change_item(&index.entries[at]));
            continue;
        }
        // A line of "Who knows this area": the area's people.
        if let Some(area) = index.areas.iter().find(|a| {
            a.page == passage.page
                && a.authors_line > 0
                && passage.line > a.authors_line
                && passage.line <= a.authors_line + a.authors.len()
        }) {
            add(base, "", people_item(area));
            continue;
        }
        let facts: Vec<&FactRecord> = index
            .facts
            .iter()
            .filter(|f| f.page == passage.page && f.line == passage.line)
            .collect();
        if !facts.is_empty() {
            for fact in facts {
                add(base, "", fact_item(fact));
            }
            continue;
        }
        add(
            base,
            "",
            Item::Passage {
                page: passage.page,
                line: passage.line,
                heading: passage.heading,
                text: lines::bounded(&passage.text, lines::MAX_FIELD_BYTES),
            },
        );
    }

    let mut ranked: Vec<Ranked> = candidates.into_values().collect();
    for item in &mut ranked {
        item.about_every_path = about_every_path(&item.about, all_paths.len());
    }
    ranked.sort_by(brief::order);
    let shell = ContextAnswer {
        commit,
        paths: summaries,
        query: request.query.map(str::to_owned),
        items: Vec::new(),
        tokens: Tokens {
            max: request.max_tokens,
            used: request.max_tokens,
        },
        left_out: LeftOut::default(),
        truncated,
        unreadable_markers: index.unreadable,
    };
    cut(shell, ranked, request)
}

/// Most times [`cut`] packs again for what `left_out` turned out to cost.
const MAX_REPACKS: usize = 8;

/// `shell` (the answer without items) with `ranked` packed into it, the
/// whole answer within the budget: the frame is measured as it stands,
/// then what was left out grows it, so each time the answer comes out over
/// the budget it is packed again with that much less room.
fn cut(shell: ContextAnswer, ranked: Vec<Ranked>, request: &Request<'_>) -> ContextAnswer {
    let whole = |answer: &ContextAnswer| {
        let bytes = match request.format {
            Format::Json => serde_json::to_string(answer).map_or(0, |s| s.len()),
            Format::Text => serde_json::to_value(answer).map_or(0, |v| text::result_bytes(&v)),
        };
        estimate_tokens(bytes + request.caller_bytes)
    };
    let frame = whole(&shell);
    let mut short = 0;
    let mut repacks = 0;
    loop {
        let (items, _, left_out) = brief::pack(
            ranked.clone(),
            brief::Budget {
                max_tokens: request.max_tokens,
                frame: frame + short,
                detail: request.detail,
                paths: shell.paths.len(),
                format: request.format,
            },
        );
        let mut answer = ContextAnswer {
            items,
            left_out,
            ..shell.clone()
        };
        let mut used = whole(&answer);
        repacks += 1;
        if repacks == MAX_REPACKS {
            // Not seen to happen: the least relevant go until it fits.
            while used > request.max_tokens
                && let Some(last) = answer.items.pop()
            {
                answer.left_out.items += 1;
                *answer.left_out.by_kind.entry(last.item.kind()).or_default() += 1;
                used = whole(&answer);
            }
        }
        if used <= request.max_tokens || answer.items.is_empty() || repacks == MAX_REPACKS {
            // `used` was measured with `max` in its place: as many digits or more.
            answer.tokens.used = used;
            return answer;
        }
        short += used - request.max_tokens;
    }
}

/// An area's people, the most active first (ties as the page lists them),
/// at most [`MAX_PEOPLE`]; the rest counted.
fn people_item(area: &super::index::AreaRecord) -> Item {
    let mut authors: Vec<Person> = area
        .authors
        .iter()
        .map(|(name, count)| Person {
            name: name.clone(),
            pull_requests: *count,
        })
        .collect();
    authors.sort_by_key(|a| std::cmp::Reverse(a.pull_requests));
    let more_authors = authors.len().saturating_sub(MAX_PEOPLE);
    authors.truncate(MAX_PEOPLE);
    Item::People {
        area: area.name.clone(),
        page: area.page.clone(),
        authors,
        more_authors,
    }
}

/// The page an entry is read on, of the pages holding it (in
/// [`super::index::page_rank`] order): its area's (or that page's quarter
/// archive), which says what else changed there, else the first.
fn entry_page(pages: &[(String, usize)]) -> String {
    pages
        .iter()
        .find(|(page, _)| page.starts_with("Area-"))
        .or(pages.first())
        .map_or_else(|| "Changelog.md".to_owned(), |(page, _)| page.clone())
}

fn change_item(record: &super::index::EntryRecord) -> Item {
    let entry = &record.entry;
    Item::Change {
        number: entry.number,
        title: entry.title.clone(),
        why: entry.why.clone(),
        author: entry.author.clone(),
        date: entry.date.clone(),
        merge_commit: entry.merge_commit.clone(),
        files: entry.paths.iter().take(20).cloned().collect(),
        more_files: entry.more_paths + entry.paths.len().saturating_sub(20),
        dependencies: entry.dependencies.clone(),
        arrived_through: entry.arrived_through.clone(),
        page: entry_page(&record.pages),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(
        index: &ContextIndex,
        commit: String,
        request: &Request<'_>,
        passages: Vec<Passage>,
        truncated: bool,
    ) -> ContextAnswer {
        answer_with(index, None, commit, request, passages, truncated)
    }

    /// `index`'s answer for one path, without a question.
    fn ask_path(
        index: &ContextIndex,
        path: &str,
        max_tokens: usize,
        detail: Detail,
    ) -> ContextAnswer {
        ask_path_as(index, path, max_tokens, detail, Format::Json)
    }

    /// [`ask_path`] for an answer sent in `format`.
    fn ask_path_as(
        index: &ContextIndex,
        path: &str,
        max_tokens: usize,
        detail: Detail,
        format: Format,
    ) -> ContextAnswer {
        let paths = [path.to_owned()];
        let request = Request {
            paths: &paths,
            query: None,
            max_tokens,
            detail,
            format,
            caller_bytes: 0,
        };
        answer(index, "f".repeat(40), &request, Vec::new(), false)
    }

    #[test]
    fn how_to_test_and_build_apply_to_every_path_and_the_rest_to_what_they_cite() {
        let tip = "f".repeat(40);
        let page = format!(
            "# How to work here\n\n## Commands\n\nAs the files say. <!-- teammem:how-to-work -->\n### Build <!-- teammem:how-to-topic -->\n- `make build` — Makefile target <!-- teammem:evidence Makefile@{tip}#L1-L2 -->\n### Test <!-- teammem:how-to-topic -->\n- `cargo test` — CI: workflow ci.yml, job test <!-- teammem:evidence .github/workflows/ci.yml@{tip}#L9 stale={} -->\n### Lint and format <!-- teammem:how-to-topic -->\n- `cargo clippy` — CI: workflow ci.yml, job lint <!-- teammem:evidence .github/workflows/ci.yml@{tip}#L5 -->\n<!-- teammem:how-to-work-end -->\n",
            "e".repeat(40)
        );
        let index = ContextIndex::build([("How-to-work-here.md", page.as_str())]);
        let kinds: Vec<(FactKind, Option<&str>)> = index
            .facts
            .iter()
            .map(|f| (f.kind, f.group.as_deref()))
            .collect();
        assert_eq!(
            kinds,
            [
                (FactKind::HowTo, Some("Build")),
                (FactKind::HowTo, Some("Test")),
                (FactKind::HowTo, Some("Lint and format")),
            ]
        );
        let ask = |path: &str| ask_path(&index, path, 2_000, Detail::Brief);
        // Any path: the test and build commands (the stale one says so), not lint.
        let any = ask("src/lib.rs");
        let shown: Vec<(&str, &str)> = any
            .items
            .iter()
            .filter_map(|r| match &r.item {
                Item::HowTo {
                    topic, citation, ..
                } => Some((topic.as_str(), citation.status)),
                _ => None,
            })
            .collect();
        assert_eq!(shown, [("Test", "stale"), ("Build", "current")]);
        // The workflow itself: every line citing it, lint included.
        let ci = ask(".github/workflows/ci.yml");
        assert!(
            ci.items.iter().any(
                |r| matches!(&r.item, Item::HowTo { topic, .. } if topic == "Lint and format")
                    && r.about == [".github/workflows/ci.yml"]
            ),
            "{:?}",
            ci.items
        );
    }

    /// Brief, a topic is said once: its first current fact in the page's
    /// order, counting the others; full detail gives them all.
    #[test]
    fn brief_gives_one_test_command_the_first_current_one() {
        let tip = "f".repeat(40);
        let page = format!(
            "# How to work here\n\nAs the files say. <!-- teammem:how-to-work -->\n### Test <!-- teammem:how-to-topic -->\n- `scripts/test` — CI: workflow ci.yml <!-- teammem:evidence .github/workflows/ci.yml@{tip}#L9 stale={} -->\n- `scripts/check` — CI: workflow ci.yml <!-- teammem:evidence .github/workflows/ci.yml@{tip}#L12 -->\n- `pytest tests/` — CONTRIBUTING.md <!-- teammem:evidence CONTRIBUTING.md@{tip}#L40 -->\n<!-- teammem:how-to-work-end -->\n",
            "e".repeat(40)
        );
        let index = ContextIndex::build([("How-to-work-here.md", page.as_str())]);
        let ask = |detail: Detail| {
            ask_path(&index, "src/lib.rs", 2_000, detail)
                .items
                .into_iter()
                .filter_map(|r| match r.item {
                    Item::HowTo {
                        text,
                        more_of_topic,
                        ..
                    } => Some((text, more_of_topic)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ask(Detail::Brief),
            [("- scripts/check — CI: workflow ci.yml".to_owned(), 2)]
        );
        let full = ask(Detail::Full);
        assert_eq!(full.len(), 3, "{full:?}");
        assert!(full.iter().all(|(_, more)| *more == 0), "{full:?}");
    }

    /// An api/routes.py touched by pull requests #1..=#count (#n merged on
    /// day n), and a How-to-work-here page with the test command.
    fn long_history(count: u64) -> ContextIndex {
        let tip = "f".repeat(40);
        let how_to = format!(
            "# How to work here\n\nAs the files say. <!-- teammem:how-to-work -->\n### Test <!-- teammem:how-to-topic -->\n- `make test` — Makefile target <!-- teammem:evidence Makefile@{tip}#L1-L2 -->\n<!-- teammem:how-to-work-end -->\n"
        );
        let mut area = String::from("# Area: api\n\n");
        for n in 1..=count {
            let sha = format!("{n:040x}");
            area.push_str(&format!(
                "- #{n} Tune the batch size, step {n} (by Alice, 2026-{:02}-{:02}) — Under load the batch size of api/routes.py was wrong; the new value keeps exports within budget. — merge commit `{sha}` — api/routes.py <!-- teammem:{sha} -->\n",
                1 + (n - 1) / 28,
                1 + (n - 1) % 28
            ));
        }
        ContextIndex::build([
            ("Area-api.md", area.as_str()),
            ("How-to-work-here.md", how_to.as_str()),
        ])
    }

    fn ask_routes(index: &ContextIndex, max_tokens: usize) -> ContextAnswer {
        ask_routes_in(index, max_tokens, Detail::Brief)
    }

    fn ask_routes_in(index: &ContextIndex, max_tokens: usize, detail: Detail) -> ContextAnswer {
        ask_path(index, "api/routes.py", max_tokens, detail)
    }

    /// The pull requests an answer names whole and in brief (`#n` of each
    /// line), in the answer's order.
    fn named(answer: &ContextAnswer) -> (Vec<u64>, Vec<u64>) {
        let mut whole = Vec::new();
        let mut brief = Vec::new();
        for ranked in &answer.items {
            match &ranked.item {
                Item::Change { number, .. } => whole.push(*number),
                Item::EarlierChanges { changes, .. } => brief.extend(
                    changes
                        .iter()
                        .map(|line| line[1..line.find(' ').unwrap()].parse::<u64>().unwrap()),
                ),
                _ => {}
            }
        }
        (whole, brief)
    }

    #[test]
    fn every_pull_request_is_named_within_the_budget_the_newest_whole() {
        let index = long_history(40);
        let answer = ask_routes(&index, 2_000);
        assert!(answer.tokens.used <= 2_000, "{:?}", answer.tokens);
        assert_eq!(answer.left_out.items, 0, "{:?}", answer.left_out);
        let (whole, brief) = named(&answer);
        // The newest whole, at least the few kept before any go brief; the
        // older ones in brief, newest first; all 40 named once.
        assert!(whole.len() >= brief::WHOLE_CHANGES, "{whole:?}");
        assert!(
            !brief.is_empty(),
            "40 whole entries do not fit in 2,000 tokens"
        );
        let expected: Vec<u64> = (1..=40).rev().collect();
        assert_eq!([whole.clone(), brief.clone()].concat(), expected);
        let lines = answer
            .items
            .iter()
            .find_map(|r| match &r.item {
                Item::EarlierChanges { changes, pages } => Some((changes, pages, &r.about)),
                _ => None,
            })
            .unwrap();
        let oldest = brief.last().copied().unwrap();
        assert!(
            lines.0.last().unwrap().starts_with(&format!(
                "#{oldest} Tune the batch size, step {oldest} (Alice, 2026-01-01)"
            )),
            "{:?}",
            lines.0
        );
        // A brief answer dates every line and stops: the budget is a
        // ceiling. At full detail the budget left adds the why to the
        // newest lines first.
        let why = " — Under load the batch size of api/routes.py was wrong; the new value keeps exports within budget.";
        assert!(lines.0.iter().all(|l| l.ends_with(')')), "{:?}", lines.0);
        assert!(answer.tokens.used < 1_000, "{:?}", answer.tokens);
        let full = ask_routes_in(&index, 2_000, Detail::Full);
        assert!(full.tokens.used > answer.tokens.used, "{:?}", full.tokens);
        let full_lines = full
            .items
            .iter()
            .find_map(|r| match &r.item {
                Item::EarlierChanges { changes, .. } => Some(changes.clone()),
                _ => None,
            })
            .unwrap();
        let with_why: Vec<bool> = full_lines.iter().map(|l| l.ends_with(why)).collect();
        assert!(with_why[0], "{full_lines:?}");
        assert!(with_why.windows(2).all(|w| w[0] || !w[1]), "{full_lines:?}");
        assert_eq!(lines.1, &["Area-api.md"]);
        assert_eq!(lines.2, &["api/routes.py"]);
        // The test command is kept, ranked with the newest changes.
        let test = answer
            .items
            .iter()
            .position(|r| matches!(&r.item, Item::HowTo { topic, .. } if topic == "Test"))
            .expect("the test command is kept");
        assert!(
            answer.items[..test]
                .iter()
                .all(|r| matches!(r.item, Item::Change { .. })),
            "only the newest changes rank above it: {:?}",
            answer.items
        );
        // The brief list ranks last here: after every whole change.
        assert!(matches!(
            answer.items.last().unwrap().item,
            Item::EarlierChanges { .. }
        ));
    }

    #[test]
    fn people_name_the_most_active_few_and_count_the_rest() {
        let mut who = String::new();
        for (n, name) in ["Ann", "Bo", "Cy", "Di", "Ed", "Flo", "Gus", "Hal"]
            .iter()
            .enumerate()
        {
            let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
            let count = n + 1;
            who.push_str(&format!(
                "- {name} — {count} pull requests <!-- teammem:author {count} {hex} -->\n"
            ));
        }
        let sha = "a".repeat(40);
        let page = format!(
            "# Area: api\n\nPull requests that changed files under `api/` (kept by teammem).\n\n## Who knows this area\n\nAuthors. <!-- teammem:who-knows -->\n{who}<!-- teammem:who-knows-end -->\n\n## Recent changes\n\n- #2 Add the API (by Bob, 2026-01-05) — Why. — merge commit `{sha}` — api/routes.py <!-- teammem:{sha} -->\n"
        );
        let index = ContextIndex::build([("Area-api.md", page.as_str())]);
        let answer = ask_routes(&index, 2_000);
        let (authors, more) = answer
            .items
            .iter()
            .find_map(|r| match &r.item {
                Item::People {
                    authors,
                    more_authors,
                    ..
                } => Some((authors.clone(), *more_authors)),
                _ => None,
            })
            .expect("the area's people");
        let names: Vec<&str> = authors.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["Hal", "Gus", "Flo", "Ed", "Di"]);
        assert_eq!(more, 3);
    }

    #[test]
    fn spare_budget_grows_the_newest_lines_a_tier_at_a_time_at_full_detail() {
        let index = long_history(60);
        let mut seen_named_only = false;
        for max_tokens in (600..=4_000).step_by(100) {
            let brief = ask_routes(&index, max_tokens);
            assert!(
                !serde_json::to_string(&brief)
                    .unwrap()
                    .contains(" — Under load"),
                "a brief answer carries no older change's why at {max_tokens}"
            );
            let answer = ask_routes_in(&index, max_tokens, Detail::Full);
            let Some(lines) = answer.items.iter().find_map(|r| match &r.item {
                Item::EarlierChanges { changes, .. } => Some(changes.clone()),
                _ => None,
            }) else {
                continue;
            };
            // Each line is one tier: name, then author and date, then why.
            let tier = |line: &String| {
                if line.contains(" — Under load") {
                    2
                } else if line.ends_with(')') {
                    1
                } else {
                    0
                }
            };
            let tiers: Vec<u8> = lines.iter().map(tier).collect();
            // Newest first, tiers never rise towards the older lines, and
            // no line has its why while another is not yet dated.
            assert!(tiers.windows(2).all(|w| w[0] >= w[1]), "{lines:?}");
            if tiers.contains(&2) {
                assert!(
                    !tiers.contains(&0),
                    "why before every line dated: {lines:?}"
                );
            }
            for line in &lines {
                let n: u64 = line[1..line.find(' ').unwrap()].parse().unwrap();
                assert!(
                    line.starts_with(&format!("#{n} Tune the batch size, step {n}")),
                    "{line}"
                );
            }
            seen_named_only |= tiers.contains(&0);
        }
        assert!(seen_named_only, "some budget names lines only");
    }

    #[test]
    fn a_history_too_long_for_the_budget_names_the_newest_and_counts_the_rest() {
        let index = long_history(200);
        for (max_tokens, format) in (100..=2_000)
            .step_by(50)
            .chain([16_000])
            .flat_map(|n| [(n, Format::Json), (n, Format::Text)])
        {
            let answer = ask_path_as(&index, "api/routes.py", max_tokens, Detail::Brief, format);
            assert!(answer.tokens.used <= max_tokens, "{:?}", answer.tokens);
            // `used` is the whole answer's cost in its form, measured with
            // `max` in its place (as many digits or more).
            let value = serde_json::to_value(&answer).unwrap();
            let whole = estimate_tokens(match format {
                Format::Json => value.to_string().len(),
                Format::Text => text::result_bytes(&value),
            });
            if format == Format::Text {
                let sent = text::render(&value, 0);
                assert!(
                    sent["tokens"]["used"].as_u64().unwrap() <= max_tokens as u64,
                    "{sent}"
                );
                // As text, the same budget names at least what JSON does.
                let as_json = ask_routes(&index, max_tokens);
                let count = |a: &ContextAnswer| named(a).0.len() + named(a).1.len();
                assert!(count(&answer) >= count(&as_json), "at {max_tokens}");
            }
            assert!(
                whole <= answer.tokens.used && answer.tokens.used <= whole + 1,
                "{whole} against {:?} at {max_tokens}",
                answer.tokens
            );
            let (whole, brief) = named(&answer);
            let left = answer.left_out.by_kind.get("change").copied().unwrap_or(0);
            assert_eq!(whole.len() + brief.len() + left, 200, "at {max_tokens}");
            // Newest first and contiguous: whatever is named is the newest.
            let expected: Vec<u64> = (1..=200).rev().take(whole.len() + brief.len()).collect();
            let whole_kept = whole.len();
            assert_eq!([whole, brief.clone()].concat(), expected, "at {max_tokens}");
            if left > 0 {
                // Names before whole items: none whole while one is left out.
                assert!(whole_kept == 0, "{whole_kept} whole at {max_tokens}");
                assert!(
                    answer
                        .left_out
                        .read_more
                        .contains(&"Area-api.md".to_owned()),
                    "{:?}",
                    answer.left_out
                );
            }
            if max_tokens == 2_000 {
                // About 10 tokens a line, by number and title alone, and no
                // whole item taking their room: all 200 are named (80 when
                // every line carried author and date and three were whole).
                assert_eq!(left, 0, "{:?}", answer.left_out);
                assert!(brief.len() > 190, "{} in brief", brief.len());
            }
        }
        // The largest budget holds them all.
        assert_eq!(ask_routes(&index, 16_000).left_out.items, 0);
    }
}
