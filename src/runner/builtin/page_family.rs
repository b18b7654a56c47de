//! A page family: a current page (the Changelog, an `Area-<slug>` page) and
//! its quarter pages (`super::archive`), and how one job's new entries are
//! placed on them: each on its quarter page, the newest on the current page
//! after its anchor, with the current page's archives line in step.
//!
//! Invariants:
//! - every new entry goes on its current page's quarter page of its merge
//!   date (the newest part while it has room, then a new part) and, within
//!   [`CURRENT_ENTRIES_PER_JOB`], on the current page, so a current page may
//!   drop its oldest lines without losing any;
//! - a current page links every quarter page of its family on its one
//!   archives line; a page that had entries before quarter pages existed
//!   says so once, above those entries.

use std::collections::BTreeMap;

use super::archive::{
    ArchiveHeader, ArchiveLinks, Period, archive_page, linked_archives, new_archive_page,
    parse_archive, parts, placement,
};
use super::edits::{insert_after_anchor, marker_line, occurrences};
use super::entries::entry_lines;
use super::inputs::CurrentPage;
use super::markers::{ARCHIVE_ANCHOR, ARCHIVES_MARKER, BEFORE_ARCHIVES_MARKER};
use super::plan::{NewPage, Plan, PlannedPatch, Replacement};
use crate::forge::evidence::PullRequest;

/// At most this many bytes of one job's new entries go on a current page
/// (its newest ones): every entry goes on its quarter page, and a job that
/// records many at once (a backfill, a long coalesced range) would
/// otherwise pay for a page of them twice.
pub const CURRENT_ENTRIES_PER_JOB: usize = 16 * 1024;

/// New entry lines of one page family: in page order (newest first), and
/// by quarter (each newest first).
#[derive(Default)]
pub(super) struct NewEntries {
    lines: Vec<String>,
    by_period: BTreeMap<Period, Vec<String>>,
}

impl NewEntries {
    pub(super) fn push(&mut self, pull: &PullRequest, line: String) {
        self.lines.push(line.clone());
        self.by_period
            .entry(Period::of(&pull.merged_at))
            .or_default()
            .push(line);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The entries the current page gets: the newest, within
    /// [`CURRENT_ENTRIES_PER_JOB`] (at least one).
    pub(super) fn current(&self) -> String {
        let mut out = String::new();
        for line in &self.lines {
            if !out.is_empty() && out.len() + line.len() > CURRENT_ENTRIES_PER_JOB {
                break;
            }
            out.push_str(line);
        }
        out
    }
}

/// The quarter pages of `base` after the plan: those its current page links,
/// those `pages` holds, and those the plan writes.
pub(super) fn links_of(
    pages: &BTreeMap<String, CurrentPage>,
    base: &str,
    current: &str,
) -> ArchiveLinks {
    let mut links = pages
        .get(current)
        .map(|page| linked_archives(&page.content, base))
        .unwrap_or_default();
    links.extend(pages.keys().filter_map(|path| parse_archive(base, path)));
    links
}

/// Writes `entries` to their quarter pages of `base` (the newest part of each
/// quarter while it has room, then new parts); returns every quarter page of
/// `base` after the plan.
pub(super) fn plan_archives(
    out: &mut Plan,
    pages: &BTreeMap<String, CurrentPage>,
    (base, current): (&str, &str),
    header: &ArchiveHeader<'_>,
    entries: &NewEntries,
) -> ArchiveLinks {
    let mut links = links_of(pages, base, current);
    for (period, lines) in &entries.by_period {
        let newest = parts(pages.keys(), base, *period).last().map(|&part| {
            (
                part,
                pages[&archive_page(base, *period, part)].content.len(),
            )
        });
        let header_bytes = new_archive_page(header, *period, 2, "").len();
        for (part, lines, new) in placement(newest, header_bytes, lines) {
            let path = archive_page(base, *period, part);
            let block: String = lines.concat();
            links.insert((*period, part));
            if new {
                out.writes.push(NewPage {
                    content: new_archive_page(header, *period, part, &block),
                    path,
                });
            } else {
                let page = &pages[&path];
                let r = insert_after_anchor(page, ARCHIVE_ANCHOR, &block, |b| {
                    format!("\n{ARCHIVE_ANCHOR}{b}")
                });
                out.patches.insert(
                    path,
                    PlannedPatch {
                        expected_sha: page.sha.clone(),
                        replacements: vec![r],
                    },
                );
            }
        }
    }
    links
}

/// The line a current page says it holds entries recorded before quarter
/// pages existed below.
fn before_archives_line() -> String {
    format!(
        "_Entries below were recorded before quarter pages existed; they are on this page and in its history only._ {BEFORE_ARCHIVES_MARKER}\n"
    )
}

/// The replacements that put `entries` after `anchor` on an existing current
/// page and keep its archives line in step, and what to append when the page
/// lacks the anchor (`heading` titles it). A page that had entries but no
/// archives line gets one, and its old entries are marked as recorded before
/// quarter pages existed.
pub(super) fn entry_replacements(
    page: &CurrentPage,
    anchor: &str,
    entries: &str,
    archives: &str,
    heading: &str,
) -> (Vec<Replacement>, String) {
    let content = &page.content;
    let mut replacements = Vec::new();
    let mut append = String::new();
    let anchored = occurrences(content, anchor) == 1;
    match marker_line(content, ARCHIVES_MARKER) {
        Some(line) => {
            if content[line.clone()] != *archives {
                replacements.push(Replacement {
                    old: content[line].to_owned(),
                    new: archives.to_owned(),
                });
            }
            if anchored {
                replacements.push(Replacement {
                    old: anchor.to_owned(),
                    new: format!("{anchor}{entries}"),
                });
            } else {
                append.push_str(&format!("\n{heading}{anchor}{entries}"));
            }
        }
        None if anchored => {
            // Entries already on quarter pages (the page links one of them:
            // a person mangled its archives line) are not "before" them.
            let linked = archives
                .split("](")
                .skip(1)
                .filter_map(|piece| piece.split(')').next())
                .any(|target| content.contains(&format!("]({target})")));
            let before = if entry_lines(content).is_empty() || linked {
                String::new()
            } else {
                before_archives_line()
            };
            replacements.push(Replacement {
                old: anchor.to_owned(),
                new: format!("{archives}\n{anchor}{entries}{before}"),
            });
        }
        None => append.push_str(&format!("\n{heading}{archives}\n{anchor}{entries}")),
    }
    (replacements, append)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::builtin::archive::page_name;
    use crate::runner::builtin::budget::PAGE_BUDGET;
    use crate::runner::builtin::interest::areas_to_record;
    use crate::runner::builtin::markers::{
        ARCHIVE_INDEX, CHANGELOG, CHANGELOG_ANCHOR, HOME, entry_marker,
    };
    use crate::runner::builtin::plan::Plan;
    use crate::runner::builtin::planner::{apply, plan};
    use crate::runner::builtin::samples::*;

    #[test]
    fn a_long_history_keeps_every_entry_on_one_quarter_page_and_each_job_small() {
        // 1,200 pull requests over nine months, 4 per job, all in one area:
        // the current pages fill up, the quarter pages take everything.
        let mut pages = as_current(apply(&home(), &Plan::default()));
        let mut all = Vec::new();
        for job in 0..300u64 {
            let pulls: Vec<PullRequest> = (0..4)
                .map(|i| {
                    let n = job * 4 + i + 1;
                    let month = (n * 9 / 1200) % 12 + 1;
                    let year = 2024 + n * 9 / 1200 / 12;
                    dated(n, &format!("{year}-{month:02}-15"), &["src/lib.rs"])
                })
                .collect();
            all.extend(pulls.clone());
            let p = plan(&bundle(pulls), &pages);
            let after = apply(&pages, &p);
            // The job costs what it adds (each entry twice, on the current
            // and the quarter page) plus what it drops, never a page's size.
            let cost: u64 = after
                .iter()
                .map(|(path, text)| {
                    crate::wiki::confine::changed_bytes(
                        pages.get(path).map(|p| p.content.as_bytes()),
                        text.as_bytes(),
                    )
                })
                .sum();
            assert!(cost < 16 * 1024, "job {job} changes {cost} bytes");
            for (path, text) in &after {
                assert!(text.len() <= PAGE_BUDGET, "{path}: {}", text.len());
            }
            pages = as_current(after);
        }
        // Every pull request is on exactly one Changelog quarter page and one
        // of the area's, the one of its merge date, and each quarter page is
        // linked from the archive index (the Changelog's) or the area page.
        let index = &pages[ARCHIVE_INDEX].content;
        let area = &pages["Area-src.md"].content;
        for p in &all {
            let marker = entry_marker(&p.merge_sha);
            let period = Period::of(&p.merged_at);
            for (base, linked_from) in [("Changelog", index), ("Area-src", area)] {
                let holding: Vec<&String> = pages
                    .iter()
                    .filter(|(path, page)| {
                        parse_archive(base, path).is_some() && page.content.contains(&marker)
                    })
                    .map(|(path, _)| path)
                    .collect();
                assert_eq!(holding.len(), 1, "#{} on {holding:?}", p.number);
                assert_eq!(parse_archive(base, holding[0]).unwrap().0, period);
                assert!(
                    linked_from.contains(&format!("({})", page_name(holding[0]))),
                    "{} is not linked",
                    holding[0]
                );
            }
        }
        // Busy quarters were split into parts; the current pages hold the newest.
        assert!(
            pages.keys().any(|k| k.ends_with("-2.md")),
            "{:?}",
            pages.keys()
        );
        assert!(
            pages[CHANGELOG]
                .content
                .contains(&entry_marker(&format!("{:040x}", 1200)))
        );
        assert!(!pages[CHANGELOG].content.contains(TRIMMED_NOTE_MARKER));
        // Home reaches them: Home → Archive → quarter page.
        assert!(
            pages[HOME]
                .content
                .contains("- [Archive](Archive) <!-- teammem:archive-link -->")
        );
        // Replaying an old job finds its entries on their quarter pages.
        let old = bundle(all[..4].to_vec());
        assert!(plan(&old, &pages).is_empty());
        assert!(areas_to_record(&old, &pages).is_empty());
    }

    const TRIMMED_NOTE_MARKER: &str = "<!-- teammem:trimmed -->";

    #[test]
    fn a_changelog_from_before_quarter_pages_keeps_its_old_entries_marked() {
        let mut pages = home();
        let old_entry =
            crate::runner::builtin::entries::changelog_entry(&dated(1, "2025-01-02", &[]));
        pages.insert(
            CHANGELOG.into(),
            CurrentPage {
                sha: "c".repeat(40),
                content: format!("# Changelog\n\n{CHANGELOG_ANCHOR}{old_entry}"),
            },
        );
        let p = plan(&bundle(vec![dated(2, "2026-01-02", &["a.txt"])]), &pages);
        let after = apply(&pages, &p);
        let log = &after[CHANGELOG];
        let archives = log.find(ARCHIVES_MARKER).unwrap();
        let new = log.find("#2 ").unwrap();
        let before = log.find(BEFORE_ARCHIVES_MARKER).unwrap();
        let old = log.find("#1 ").unwrap();
        assert!(archives < new && new < before && before < old, "{log}");
        assert!(
            plan(
                &bundle(vec![dated(2, "2026-01-02", &["a.txt"])]),
                &as_current(after)
            )
            .is_empty()
        );
    }

    #[test]
    fn a_job_of_many_entries_puts_only_its_newest_on_the_current_pages() {
        let pulls: Vec<PullRequest> = (1..=200)
            .map(|n| dated(n, "2026-02-01", &["src/a.rs"]))
            .collect();
        let after = apply(&home(), &plan(&bundle(pulls.clone()), &home()));
        for (page, base) in [(CHANGELOG, "Changelog"), ("Area-src.md", "Area-src")] {
            let shown = entry_lines(&after[page]);
            let bytes: usize = shown.iter().map(|r| r.len()).sum();
            assert!(bytes <= CURRENT_ENTRIES_PER_JOB, "{page}: {bytes}");
            assert!(after[page].contains(&entry_marker(&pulls[199].merge_sha)));
            assert!(!after[page].contains(&entry_marker(&pulls[0].merge_sha)));
            for p in &pulls {
                let on = after
                    .iter()
                    .filter(|(path, text)| {
                        parse_archive(base, path).is_some()
                            && text.contains(&entry_marker(&p.merge_sha))
                    })
                    .count();
                assert_eq!(on, 1, "#{} on {page}'s quarter pages", p.number);
            }
        }
    }
}
