//! `Changelog.md`: every merged pull request the builtin agent records,
//! newest first, each entry also on the Changelog's quarter page
//! (`super::page_family`).
//!
//! Invariant: the Changelog gets exactly the entries it and its quarter
//! pages lack, in merge order reversed (newest on top), after its anchor; a
//! Changelog without the anchor gets a new anchored list appended, never a
//! rewrite of a person's text.

use std::collections::BTreeMap;

use super::archive::{ArchiveHeader, ArchiveLinks, archives_line, page_name};
use super::areas::ByArea;
use super::budget::{trim_new_page, trim_patch};
use super::dependencies::dependency_note;
use super::edits::append_replacement;
use super::entries::changelog_entry_with;
use super::inputs::{CurrentPage, DependencyFacts};
use super::markers::{CHANGELOG, CHANGELOG_ANCHOR};
use super::page_family::{NewEntries, entry_replacements, links_of, plan_archives};
use super::plan::{NewPage, Plan, PlannedPatch};
use super::recorded::Recorded;
use crate::forge::evidence::PullRequest;

fn changelog_header() -> ArchiveHeader<'static> {
    ArchiveHeader {
        title: "Changelog",
        what: "Merged pull requests",
        current: ("Changelog", "Changelog"),
    }
}

/// `Changelog.md`: the entries it lacks, newest first, after its anchor (or
/// a new page), each also on its quarter page; returns the Changelog's
/// quarter pages after the plan.
pub(super) fn plan_changelog(
    out: &mut Plan,
    grouped: &[(&PullRequest, ByArea<'_>)],
    pages: &BTreeMap<String, CurrentPage>,
    deps: &DependencyFacts,
    recorded: &Recorded,
) -> ArchiveLinks {
    let base = page_name(CHANGELOG);
    // Newest first on every page: walk the PRs in reverse merge order.
    let mut entries = NewEntries::default();
    for (pull, _) in grouped.iter().rev() {
        if !recorded.has(base, &pull.merge_sha) {
            let line = changelog_entry_with(pull, &dependency_note(deps, pull, None));
            entries.push(pull, line);
        }
    }
    if entries.is_empty() {
        return links_of(pages, base, CHANGELOG);
    }
    let current = entries.current();
    let links = plan_archives(out, pages, (base, CHANGELOG), &changelog_header(), &entries);
    let archives = archives_line(base, &links);
    match pages.get(CHANGELOG) {
        None => out.writes.push(NewPage {
            path: CHANGELOG.into(),
            content: trim_new_page(new_changelog(&archives, &current)),
        }),
        Some(page) => {
            let (mut replacements, append) =
                entry_replacements(page, CHANGELOG_ANCHOR, &current, &archives, "");
            if !append.is_empty() {
                replacements.push(append_replacement(page, &append));
            }
            let mut patch = PlannedPatch {
                expected_sha: page.sha.clone(),
                replacements,
            };
            trim_patch(page, &mut patch);
            out.patches.insert(CHANGELOG.into(), patch);
        }
    }
    links
}

pub fn new_changelog(archives: &str, entries: &str) -> String {
    format!(
        "# Changelog\n\nMerged pull requests, newest first (kept by teammem).\n\n{archives}\n{CHANGELOG_ANCHOR}{entries}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::builtin::planner::{apply, plan};
    use crate::runner::builtin::samples::*;

    #[test]
    fn a_page_without_its_anchor_gets_an_appended_section() {
        let mut pages = home();
        pages.insert(
            CHANGELOG.into(),
            CurrentPage {
                sha: "c".repeat(40),
                content: "# Changelog\nhand-written".into(),
            },
        );
        let b = bundle(vec![pull(1, "X", 'd', &["a.txt"])]);
        let p = plan(&b, &pages);
        let r = &p.patches[CHANGELOG].replacements[0];
        assert!(r.old.is_empty());
        assert!(r.new.starts_with('\n'));
        let after = apply(&pages, &p);
        assert!(after[CHANGELOG].starts_with("# Changelog\nhand-written\n"));
        assert!(plan(&b, &as_current(after)).is_empty());
    }
}
