//! The builtin agent's planner: from an evidence bundle, the current pages
//! and what the agent read, the edits of one run (a [`Plan`], whose types
//! are in `plan.rs`), deterministic, no network, pure. This file holds the
//! entry points ([`plan`] to [`plan_all`]), which hand the run to one
//! function per page family:
//! `Changelog.md` and its quarter pages (`super::changelog`), the area
//! pages and theirs (`super::area_pages`), `Dependencies.md`
//! (`super::dependencies`), `How-to-work-here.md` (`super::how_to_work`),
//! `Archive.md` (`super::archive_index`) and `Home.md` (`super::home`); and
//! [`apply`], a plan applied in memory as the writer would.
//!
//! Invariants:
//! - a plan groups its pull requests' paths by area once
//!   (`super::areas::by_area`), and every page family plans from that one
//!   grouping;
//! - every entry cites the PR number, title, author and the full merge-commit
//!   SHA, and ends with the marker `<!-- teammem:<sha> -->`; an entry whose
//!   marker is already on its current page or one of its quarter pages
//!   (`super::recorded`) is never written again, so replaying a range plans
//!   nothing (and `Dependencies.md` and `How-to-work-here.md` change only
//!   with new entries);
//! - every new entry goes on its current page and on its quarter page
//!   (`super::page_family`), so a current page may drop its oldest lines
//!   without losing any (every recorded pull request stays on the Changelog
//!   page of its quarter, linked from `Archive.md`, which Home links: two
//!   links from Home);
//! - existing pages are only patched at exact anchors (`super::edits`); new
//!   pages are written whole; every planned page fits
//!   [`super::budget::PAGE_BUDGET`];
//! - Home lists its topics in one order (Changelog, Dependencies, How to
//!   work here, Archive, areas by slug, then "Removed areas"), each area
//!   named as in the tree.

use std::collections::BTreeMap;

use super::archive::page_name;
use super::archive_index::plan_archive_index;
use super::area_pages::{AreaEntries, area_entries, is_gone, plan_area_pages, removed_paths};
use super::areas::{ByArea, area_base, area_label, area_page, direct_areas, group_by_area};
use super::budget::apply_replacements;
use super::changelog::plan_changelog;
use super::dependencies::plan_dependencies;
use super::home::{Topics, plan_home};
use super::how_to_work::{HowTo, plan_how_to};
use super::inputs::{CurrentPage, DependencyFacts, Listings};
use super::markers::{CHANGELOG, DEPENDENCIES, HOW_TO_WORK};
use super::plan::{Plan, PullPlan};
use super::recorded::Recorded;
use crate::forge::evidence::{EvidenceBundle, PullRequest};

/// Plans the edits for `bundle` against `pages` (the current contents of the
/// pages it may touch; absent = the page does not exist), leaving every
/// "What is here" section as it is.
pub fn plan(bundle: &EvidenceBundle, pages: &BTreeMap<String, CurrentPage>) -> Plan {
    plan_with(bundle, pages, &Listings::new())
}

/// [`plan`], with the "What is here" section of each area page that gets an
/// entry re-derived from `listings` (areas it does not name keep theirs).
pub fn plan_with(
    bundle: &EvidenceBundle,
    pages: &BTreeMap<String, CurrentPage>,
    listings: &Listings,
) -> Plan {
    plan_full(bundle, pages, listings, &DependencyFacts::default())
}

/// [`plan_with`], with each entry naming its PR's dependency changes and
/// `Dependencies.md` re-derived from `deps` (when it holds the tip's manifests).
pub fn plan_full(
    bundle: &EvidenceBundle,
    pages: &BTreeMap<String, CurrentPage>,
    listings: &Listings,
    deps: &DependencyFacts,
) -> Plan {
    plan_all(bundle, pages, listings, deps, None)
}

/// [`plan_full`], with `How-to-work-here.md` re-derived from `how` (when the
/// agent read the tip's files for it).
pub fn plan_all(
    bundle: &EvidenceBundle,
    pages: &BTreeMap<String, CurrentPage>,
    listings: &Listings,
    deps: &DependencyFacts,
    how: Option<&HowTo>,
) -> Plan {
    let grouped = group_by_area(bundle);
    let recorded = Recorded::new(pages);
    let mut out = Plan {
        pulls: pull_plans(&grouped, &recorded),
        ..Plan::default()
    };
    let changelog_links = plan_changelog(&mut out, &grouped, pages, deps, &recorded);
    let mut areas = area_entries(&grouped, deps, &recorded);
    // The areas the range changed outside any pull request, where they have
    // a page: their "What is here" follows the tip too.
    let direct = direct_areas(bundle);
    for (slug, area) in &direct {
        if pages.contains_key(&area_page(slug)) {
            areas.entry(slug.clone()).or_insert_with(|| AreaEntries {
                area: area.clone(),
                ..AreaEntries::default()
            });
        }
    }
    let removed = removed_paths(bundle);
    plan_area_pages(
        &mut out,
        &areas,
        pages,
        listings,
        (&grouped, &removed),
        &direct,
    );
    // Dependencies.md and How-to-work-here.md change only with new entries
    // or with files changed outside any pull request: a job that records
    // nothing and saw nothing else change (a replay) changes nothing.
    let records = !out.is_empty() || !bundle.direct_changes.is_empty();
    let dependencies_page = if !records {
        pages.contains_key(DEPENDENCIES)
    } else {
        plan_dependencies(&mut out, pages, deps)
    };
    let how_to_page = if records {
        plan_how_to(&mut out, pages, how)
    } else {
        pages.contains_key(HOW_TO_WORK)
    };
    let archive_index = plan_archive_index(&mut out, pages, &changelog_links);
    let topics = Topics {
        any_pulls: !bundle.pull_requests.is_empty(),
        dependencies_page,
        how_to_page,
        archive_index,
        areas: areas
            .iter()
            .map(|(slug, a)| (slug.clone(), area_label(&a.area, slug)))
            .collect(),
        gone: areas
            .keys()
            .filter(|slug| {
                listings
                    .get(*slug)
                    .is_some_and(|files| is_gone(slug, files))
            })
            .cloned()
            .collect(),
    };
    plan_home(&mut out, pages, &topics);
    out
}

/// What the plan does for each pull request, in merge order: the pages that
/// carry its entry, and whether all of them already do.
fn pull_plans(grouped: &[(&PullRequest, ByArea<'_>)], recorded: &Recorded) -> Vec<PullPlan> {
    grouped
        .iter()
        .map(|(pull, areas)| {
            let mut touched = vec![CHANGELOG.to_owned()];
            let mut all_recorded = recorded.has(page_name(CHANGELOG), &pull.merge_sha);
            for slug in areas.keys() {
                all_recorded &= recorded.has(&area_base(slug), &pull.merge_sha);
                touched.push(area_page(slug));
            }
            PullPlan {
                number: pull.number,
                merge_sha: pull.merge_sha.clone(),
                pages: touched,
                already_recorded: all_recorded,
            }
        })
        .collect()
}

/// Applies a plan to the pages in memory, as the writer would (for tests and
/// for checking a plan before sending it): the pages after the edit.
pub fn apply(pages: &BTreeMap<String, CurrentPage>, plan: &Plan) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = pages
        .iter()
        .map(|(k, v)| (k.clone(), v.content.clone()))
        .collect();
    for write in &plan.writes {
        out.insert(write.path.clone(), write.content.clone());
    }
    for (path, patch) in &plan.patches {
        let text = out.get(path).cloned().unwrap_or_default();
        let result = apply_replacements(&text, &patch.replacements)
            .unwrap_or_else(|why| panic!("the writer would refuse the patch of {path}: {why}"));
        out.insert(path.clone(), result);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::builtin::markers::{ARCHIVE_INDEX, HOME, entry_marker};
    use crate::runner::builtin::samples::*;

    #[test]
    fn a_first_run_writes_new_pages_and_patches_home() {
        let b = bundle(vec![
            pull(12, "Faster search", 'a', &["src/search.rs", "README.md"]),
            pull(13, "Docs", 'b', &["docs/guide.md"]),
        ]);
        let plan = plan(&b, &home());
        let written: Vec<&str> = plan.writes.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(
            written,
            vec![
                "Changelog-2026-Q4.md",
                CHANGELOG,
                "Area-docs-2026-Q4.md",
                "Area-docs.md",
                "Area-root-2026-Q4.md",
                "Area-root.md",
                "Area-src-2026-Q4.md",
                "Area-src.md",
                ARCHIVE_INDEX,
            ]
        );
        assert_eq!(plan.patches.keys().collect::<Vec<_>>(), vec![HOME]);
        let pages = apply(&home(), &plan);
        let changelog = &pages[CHANGELOG];
        // Newest first, full shas, authors, markers.
        let i13 = changelog.find("#13").unwrap();
        let i12 = changelog.find("#12").unwrap();
        assert!(i13 < i12, "{changelog}");
        assert!(changelog.contains(&"a".repeat(40)));
        assert!(changelog.contains(&entry_marker(&"b".repeat(40))));
        assert!(changelog.contains("by Zoë"));
        assert!(pages["Area-src.md"].contains("## Recent changes"));
        assert!(pages["Area-src.md"].contains("src/search.rs"));
        assert!(!pages["Area-src.md"].contains("#13"));
        let home = &pages[HOME];
        assert!(home.starts_with("# Welcome\n"));
        // One order: Changelog, Archive, then the areas by slug.
        assert!(
            home.ends_with(
                "<!-- teammem:topics -->\n- [Changelog](Changelog) <!-- teammem:changelog-link -->\n- [Archive](Archive) <!-- teammem:archive-link -->\n- [docs](Area-docs) <!-- teammem:area:docs -->\n- [root](Area-root) <!-- teammem:area:root -->\n- [src](Area-src) <!-- teammem:area:src -->\n"
            ),
            "{home}"
        );
        // Every entry is on its quarter page too, which the pages link.
        assert!(pages["Changelog-2026-Q4.md"].contains(&entry_marker(&"b".repeat(40))));
        assert!(changelog.contains("[2026 Q4](Changelog-2026-Q4) <!-- teammem:archives -->"));
        assert!(pages["Area-src-2026-Q4.md"].contains("#12 Faster search"));
        assert!(pages[ARCHIVE_INDEX].contains(
            "- [Changelog, 2026 Q4](Changelog-2026-Q4) <!-- teammem:archive:Changelog-2026-Q4 -->"
        ));
        assert_eq!(plan.pulls.len(), 2);
        assert!(plan.pulls.iter().all(|p| !p.already_recorded));
        assert_eq!(
            plan.pulls[0].pages,
            vec![CHANGELOG, "Area-root.md", "Area-src.md"]
        );
    }

    #[test]
    fn replaying_a_range_plans_nothing() {
        let b = bundle(vec![pull(12, "Faster search", 'a', &["src/a.rs"])]);
        let after = as_current(apply(&home(), &plan(&b, &home())));
        let again = plan(&b, &after);
        assert!(again.is_empty(), "{again:?}");
        assert!(again.pulls.iter().all(|p| p.already_recorded));
    }

    #[test]
    fn a_later_range_patches_after_the_anchors_and_keeps_old_entries() {
        let first = bundle(vec![pull(12, "One", 'a', &["src/a.rs"])]);
        let pages = as_current(apply(&home(), &plan(&first, &home())));
        let second = bundle(vec![
            pull(12, "One", 'a', &["src/a.rs"]),
            pull(14, "Two", 'c', &["src/b.rs"]),
        ]);
        let p = plan(&second, &pages);
        assert!(p.writes.is_empty(), "{:?}", p.writes);
        let keys: Vec<&String> = p.patches.keys().collect();
        assert_eq!(
            keys,
            vec![
                "Area-src-2026-Q4.md",
                "Area-src.md",
                "Changelog-2026-Q4.md",
                CHANGELOG,
            ]
        );
        // The changelog and the quarter pages get their entries; the area
        // page its entries and its author count (Zoë again), each at an
        // exact anchor.
        for (path, patch) in &p.patches {
            let want = if path == "Area-src.md" { 2 } else { 1 };
            assert_eq!(patch.replacements.len(), want, "{path}");
            assert!(patch.replacements.iter().all(|r| !r.old.is_empty()));
        }
        let after = apply(&pages, &p);
        let log = &after[CHANGELOG];
        assert_eq!(log.matches(&entry_marker(&"a".repeat(40))).count(), 1);
        assert!(log.find("#14").unwrap() < log.find("#12").unwrap());
        assert!(plan(&second, &as_current(after)).is_empty());
    }

    #[test]
    fn a_range_without_pull_requests_plans_nothing() {
        assert!(plan(&bundle(vec![]), &home()).is_empty());
    }
}
