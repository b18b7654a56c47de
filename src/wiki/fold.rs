//! A page as an agent reads it cheaply: its text with every teammem comment
//! (`<!-- teammem:… -->`: evidence markers, section anchors, entry and
//! author markers) folded out, and its evidence markers as structured
//! citations (`get_wiki_page`'s default `format`).
//!
//! Invariants:
//! - folding keeps the page's lines: line N of the folded text is line N of
//!   the raw page with its teammem comments (and the blanks before them)
//!   removed, so a citation's `line`, a search hit's `line` and a
//!   `get_context` item's `line` all point at the same line in both formats;
//! - citations come from the one marker grammar ([`crate::facts::facts`]);
//!   a marker that does not parse is folded out and counted, never guessed
//!   at;
//! - `re-anchored` is said only of a citation the page's previous version
//!   cited elsewhere on the same statement, where the move is one the runner
//!   makes ([`crate::staleness::check_rewrite`]); anything else is `current`
//!   or `stale` as its marker says;
//! - folding and re-anchoring take time near-linear in the pages' sizes: the
//!   previous version's citations are indexed once by statement, so a page
//!   that repeats one statement thousands of times costs a lookup per
//!   citation, not a comparison per pair.

use serde::Serialize;

use crate::facts::{Citation, Found, Marker};

/// What opens a teammem comment.
const OPEN: &str = "<!-- teammem:";
const CLOSE: &str = "-->";

/// Where a re-anchored citation pointed before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Anchor {
    pub path: String,
    pub commit: String,
    pub lines: String,
}

/// One evidence marker as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PageCitation {
    /// 1-based line of the page (folded or raw: the same) the fact is on.
    pub line: usize,
    /// The cited source file (absent for a pull-request citation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The source commit cited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The cited lines, e.g. `L10-L24`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<String>,
    /// The pull request cited (`#pr-N` markers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<u64>,
    /// `current`, `re-anchored` (the page's last change moved the citation to
    /// where the lines are now, see `from`) or `stale` (see `changed_in`).
    pub status: &'static str,
    /// The source commit that changed (or deleted) the cited lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_in: Option<String>,
    /// The cited file no longer exists at `changed_in`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
    /// For `re-anchored`: what the previous version of the page cited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<Anchor>,
}

/// A page's text folded, and its citations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folded {
    pub text: String,
    pub citations: Vec<PageCitation>,
    /// Text that starts like an evidence marker but does not parse.
    pub unreadable_markers: usize,
}

/// `content` with every teammem comment removed, line by line (an
/// unterminated one runs to the end of its line), and the whitespace left
/// before a removed comment trimmed. Line endings and line count are kept.
pub fn fold_text(content: &str) -> String {
    let mut out = String::with_capacity(content.len());
    for line in content.split_inclusive('\n') {
        let (body, ending) = split_ending(line);
        if !body.contains(OPEN) {
            out.push_str(line);
            continue;
        }
        let mut kept = String::with_capacity(body.len());
        let mut rest = body;
        let mut removed_last = false;
        while let Some(at) = rest.find(OPEN) {
            kept.push_str(&rest[..at]);
            let after = &rest[at + OPEN.len()..];
            rest = match after.find(CLOSE) {
                Some(end) => &after[end + CLOSE.len()..],
                None => "",
            };
            removed_last = rest.trim().is_empty();
        }
        kept.push_str(rest);
        let kept = if removed_last {
            kept.trim_end()
        } else {
            kept.as_str()
        };
        out.push_str(kept);
        out.push_str(ending);
    }
    out
}

fn split_ending(line: &str) -> (&str, &str) {
    let body = line.trim_end_matches(['\n', '\r']);
    (body, &line[body.len()..])
}

/// The page folded ([`fold_text`]) with its citations in page order.
pub fn fold(content: &str) -> Folded {
    let mut citations = Vec::new();
    let mut unreadable_markers = 0;
    for found in crate::facts::facts(content) {
        match found {
            Found::Fact(fact) => citations.push(citation(fact.line + 1, &fact.marker)),
            Found::Unreadable { .. } => unreadable_markers += 1,
        }
    }
    Folded {
        text: fold_text(content),
        citations,
        unreadable_markers,
    }
}

fn citation(line: usize, marker: &Marker) -> PageCitation {
    let (path, commit, lines, pull_request) = match &marker.citation {
        Citation::Source {
            path,
            commit,
            lines,
        } => (
            Some(path.clone()),
            Some(commit.to_string()),
            Some(lines.to_string()),
            None,
        ),
        Citation::Pull(number) => (None, None, None, Some(number.get())),
    };
    PageCitation {
        line,
        path,
        commit,
        lines,
        pull_request,
        status: if marker.is_stale() {
            "stale"
        } else {
            "current"
        },
        changed_in: marker.stale.as_ref().map(|s| s.changed_in.to_string()),
        deleted: marker.stale.as_ref().is_some_and(|s| s.deleted),
        from: None,
    }
}

/// Marks as `re-anchored` each current source citation of `folded` (read
/// from `content`) whose statement the page's previous version
/// (`previous`) carried with another citation that the runner could have
/// moved to this one. Statements are matched by their text without
/// markers; the citation it moved from is the first on that statement in
/// the previous version spanning as many lines.
pub fn mark_reanchored(folded: &mut Folded, content: &str, previous: &str) {
    use std::collections::HashMap;
    let mut before: HashMap<String, Before> = HashMap::new();
    for found in crate::facts::facts(previous) {
        if let Found::Fact(fact) = found
            && !fact.marker.is_stale()
            && let Citation::Source { lines, .. } = &fact.marker.citation
        {
            let statement = before.entry(fact.text).or_default();
            statement
                .first_of_span
                .entry(span(*lines))
                .or_insert_with(|| fact.marker.clone());
            statement.cited.insert(fact.marker);
        }
    }
    if before.is_empty() {
        return;
    }
    let now = crate::facts::facts(content)
        .into_iter()
        .filter_map(|found| match found {
            Found::Fact(fact) => Some((fact.text, fact.marker)),
            Found::Unreadable { .. } => None,
        });
    for (cited, (text, marker)) in folded.citations.iter_mut().zip(now) {
        let Citation::Source { commit, lines, .. } = &marker.citation else {
            continue;
        };
        if marker.is_stale() {
            continue;
        }
        let Some(statement) = before.get(&text) else {
            continue;
        };
        if statement.cited.contains(&marker) {
            continue;
        }
        // A move keeps the number of lines (`check_rewrite`), so only the
        // first old citation of this span can be the one moved; the rule
        // itself still decides.
        let Some(old) = statement.first_of_span.get(&span(*lines)) else {
            continue;
        };
        let rewrite = crate::staleness::MarkerRewrite {
            old: old.to_string(),
            new: marker.to_string(),
        };
        if crate::staleness::check_rewrite(&rewrite, Some(commit)).is_err() {
            continue;
        }
        if let Citation::Source {
            path,
            commit,
            lines,
        } = &old.citation
        {
            cited.status = "re-anchored";
            cited.from = Some(Anchor {
                path: path.clone(),
                commit: commit.to_string(),
                lines: lines.to_string(),
            });
        }
    }
}

/// The current source citations one statement carried in a page's previous
/// version.
#[derive(Default)]
struct Before {
    /// All of them (a citation still there did not move).
    cited: std::collections::HashSet<Marker>,
    /// The first of each span ([`span`]), the one a move is compared with.
    first_of_span: std::collections::HashMap<u32, Marker>,
}

/// How many lines past its first a range covers: what a move keeps.
fn span(lines: crate::facts::Lines) -> u32 {
    lines.end() - lines.start()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_keeps_lines_and_citations_name_them() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let page = format!(
            "# T\n\nThe files. <!-- teammem:what-is-here -->\n- x.rs — X. <!-- teammem:evidence x.rs@{a}#L2-L4 -->\r\n<!-- teammem:what-is-here-end -->\nOld <!-- teammem:evidence y.rs@{a}#L1 stale={b} deleted --> and more\nA <!-- teammem:evidence #pr-7 --> <!-- teammem:evidence nope -->\nHalf <!-- teammem:evidence z.rs\nplain <!-- a person's comment -->\n"
        );
        let folded = fold(&page);
        assert_eq!(
            folded.text,
            "# T\n\nThe files.\n- x.rs — X.\r\n\nOld  and more\nA\nHalf\nplain <!-- a person's comment -->\n"
        );
        assert_eq!(folded.text.lines().count(), page.lines().count());
        assert_eq!(folded.unreadable_markers, 2);
        let shown: Vec<(usize, &str, Option<&str>)> = folded
            .citations
            .iter()
            .map(|c| (c.line, c.status, c.path.as_deref()))
            .collect();
        assert_eq!(
            shown,
            [
                (4, "current", Some("x.rs")),
                (6, "stale", Some("y.rs")),
                (7, "current", None)
            ]
        );
        assert_eq!(folded.citations[1].changed_in.as_deref(), Some(b.as_str()));
        assert!(folded.citations[1].deleted);
        assert_eq!(folded.citations[2].pull_request, Some(7));
        assert_eq!(folded.citations[0].lines.as_deref(), Some("L2-L4"));
    }

    /// The all-pairs comparison `mark_reanchored` made before it indexed the
    /// previous version: each citation against every old one on its
    /// statement, through `check_rewrite`.
    fn reanchored_pairwise(content: &str, previous: &str) -> Vec<Option<Anchor>> {
        let mut before: std::collections::HashMap<String, Vec<String>> = Default::default();
        for found in crate::facts::facts(previous) {
            if let Found::Fact(fact) = found
                && !fact.marker.is_stale()
                && matches!(fact.marker.citation, Citation::Source { .. })
            {
                before
                    .entry(fact.text)
                    .or_default()
                    .push(fact.marker.to_string());
            }
        }
        let mut out = Vec::new();
        for found in crate::facts::facts(content) {
            let Found::Fact(fact) = found else { continue };
            let new = fact.marker.to_string();
            let moved = match (&fact.marker.citation, before.get(&fact.text)) {
                (Citation::Source { commit, .. }, Some(olds))
                    if !fact.marker.is_stale() && !olds.contains(&new) =>
                {
                    olds.iter().find(|old| {
                        crate::staleness::check_rewrite(
                            &crate::staleness::MarkerRewrite {
                                old: (*old).clone(),
                                new: new.clone(),
                            },
                            Some(commit),
                        )
                        .is_ok()
                    })
                }
                _ => None,
            };
            out.push(moved.map(
                |old| match crate::facts::parse_marker(old).unwrap().citation {
                    Citation::Source {
                        path,
                        commit,
                        lines,
                    } => Anchor {
                        path,
                        commit: commit.to_string(),
                        lines: lines.to_string(),
                    },
                    Citation::Pull(_) => unreachable!(),
                },
            ));
        }
        out
    }

    #[test]
    fn re_anchoring_answers_as_the_pairwise_comparison_did() {
        let (a, b, tip) = ("a".repeat(40), "b".repeat(40), "c".repeat(40));
        let before = format!(
            "S <!-- teammem:evidence x.rs@{a}#L1 --> <!-- teammem:evidence x.rs@{a}#L5-L6 -->\n\
             S <!-- teammem:evidence y.rs@{a}#L2 -->\n\
             S <!-- teammem:evidence z.rs@{a}#L3-L4 stale={b} -->\n\
             T <!-- teammem:evidence #pr-3 --> <!-- teammem:evidence t.rs@{a}#L1-L3 -->\n\
             U <!-- teammem:evidence u.rs@{a}#L1 -->\n"
        );
        let after = format!(
            "S <!-- teammem:evidence x.rs@{tip}#L9 --> <!-- teammem:evidence x.rs@{tip}#L7-L8 -->\n\
             S <!-- teammem:evidence y.rs@{a}#L2 --> <!-- teammem:evidence w.rs@{tip}#L3-L4 -->\n\
             S <!-- teammem:evidence v.rs@{b}#L4 --> <!-- teammem:evidence y.rs@{tip}#L4 stale={b} -->\n\
             T <!-- teammem:evidence #pr-4 --> <!-- teammem:evidence t.rs@{tip}#L2-L4 -->\n\
             U <!-- teammem:evidence u.rs@{a}#L1 --> <!-- teammem:evidence u.rs@{tip}#L1 -->\n\
             V <!-- teammem:evidence u.rs@{tip}#L1 -->\n"
        );
        let mut folded = fold(&after);
        mark_reanchored(&mut folded, &after, &before);
        let from: Vec<Option<Anchor>> = folded.citations.iter().map(|c| c.from.clone()).collect();
        assert_eq!(from, reanchored_pairwise(&after, &before));
        let moved = from.iter().filter(|f| f.is_some()).count();
        assert_eq!(moved, 6, "{from:?}");
        assert_eq!(
            from[0].as_ref().map(|f| f.lines.as_str()),
            Some("L1"),
            "the first old citation of the span"
        );
        for cited in &folded.citations {
            assert_eq!(cited.status == "re-anchored", cited.from.is_some());
        }
    }

    #[test]
    fn a_page_repeating_one_statement_is_compared_in_near_linear_time() {
        // 3,200 lines of one statement: each citation was compared with
        // every old one through `check_rewrite` (13 s in a release build).
        let (a, b) = ("a".repeat(40), "b".repeat(40));
        let page =
            |cited: &str| format!("x <!-- teammem:evidence a.rs@{cited} -->\n").repeat(3_200);
        let before = page(&format!("{a}#L1"));
        let started = std::time::Instant::now();
        for (after, status) in [
            (page(&format!("{b}#L1-L2")), "current"),
            (page(&format!("{b}#L2")), "re-anchored"),
        ] {
            let mut folded = fold(&after);
            mark_reanchored(&mut folded, &after, &before);
            assert_eq!(folded.citations.len(), 3_200);
            assert!(
                folded.citations.iter().all(|c| c.status == status),
                "{status}"
            );
        }
        let elapsed = started.elapsed();
        assert!(elapsed.as_secs_f64() < 1.0, "{elapsed:?}");
    }

    #[test]
    fn a_citation_the_last_change_moved_is_re_anchored() {
        let (a, tip) = ("a".repeat(40), "c".repeat(40));
        let before = format!(
            "Moved. <!-- teammem:evidence x.rs@{a}#L2-L4 -->\nKept. <!-- teammem:evidence k.rs@{a}#L1 -->\nGrown. <!-- teammem:evidence g.rs@{a}#L1 -->\n"
        );
        let after = format!(
            "Moved. <!-- teammem:evidence x.rs@{tip}#L12-L14 -->\nKept. <!-- teammem:evidence k.rs@{a}#L1 -->\nGrown. <!-- teammem:evidence g.rs@{tip}#L1-L9 -->\nNew. <!-- teammem:evidence n.rs@{tip}#L1 -->\n"
        );
        let mut folded = fold(&after);
        mark_reanchored(&mut folded, &after, &before);
        let statuses: Vec<&str> = folded.citations.iter().map(|c| c.status).collect();
        assert_eq!(statuses, ["re-anchored", "current", "current", "current"]);
        assert_eq!(
            folded.citations[0].from,
            Some(Anchor {
                path: "x.rs".into(),
                commit: a,
                lines: "L2-L4".into()
            })
        );
    }
}
