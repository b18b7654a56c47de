//! What a plan reads before it plans: the pages it may touch, the quarter
//! pages where its entries may already be, and the areas whose files it
//! lists (those it will record on).
//!
//! Invariant: these name every page a plan for the same bundle may read or
//! write, derived from the bundle alone (and, for the areas to record, the
//! pages read) through the one grouping by area the planner plans from
//! (`areas::group_by_area`), so the driver reads each once, before planning,
//! and the plan never needs a page it was not given.

use std::collections::{BTreeMap, BTreeSet};

use super::archive::{Period, archive_base, page_name, parse_archive};
use super::areas::{area_base, area_page, direct_areas, group_by_area};
use super::inputs::CurrentPage;
use super::markers::{ARCHIVE_INDEX, CHANGELOG, DEPENDENCIES, HOME, HOW_TO_WORK};
use super::recorded::Recorded;
use crate::forge::evidence::EvidenceBundle;

/// The slugs of the areas whose pages a plan for `bundle` against `pages`
/// writes or patches: those of a pull request's paths whose page (or its
/// quarter pages) does not carry its entry yet, and those with a page that
/// the range changed outside any pull request. (The driver reads these
/// areas' files before it plans.)
pub fn areas_to_record(
    bundle: &EvidenceBundle,
    pages: &BTreeMap<String, CurrentPage>,
) -> BTreeSet<String> {
    let recorded = Recorded::new(pages);
    let mut slugs: BTreeSet<String> = group_by_area(bundle)
        .into_iter()
        .flat_map(|(pull, areas)| {
            areas
                .into_keys()
                .filter(|slug| !recorded.has(&area_base(slug), &pull.merge_sha))
                .collect::<Vec<_>>()
        })
        .collect();
    // An area changed outside any pull request has its section refreshed
    // where it has a page.
    slugs.extend(
        direct_areas(bundle)
            .into_keys()
            .filter(|slug| pages.contains_key(&area_page(slug))),
    );
    slugs
}

/// The pages a plan for `bundle` may read besides the quarter pages: Home,
/// Changelog, Dependencies, How to work here, Archive and the area pages.
pub fn pages_of_interest(bundle: &EvidenceBundle) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = [
        HOME.to_owned(),
        CHANGELOG.to_owned(),
        DEPENDENCIES.to_owned(),
        HOW_TO_WORK.to_owned(),
        ARCHIVE_INDEX.to_owned(),
    ]
    .into();
    for (_, areas) in group_by_area(bundle) {
        out.extend(areas.keys().map(|slug| area_page(slug)));
    }
    out.extend(direct_areas(bundle).keys().map(|slug| area_page(slug)));
    out
}

/// The quarters whose pages a plan for `bundle` reads, by page family
/// (a current page's name): the quarter of each pull request's merge date,
/// for the Changelog and each area it touches (so an entry is found wherever
/// it went, and new ones go after the newest part).
pub fn quarters_of_interest(bundle: &EvidenceBundle) -> BTreeSet<(String, Period)> {
    let mut wanted = BTreeSet::new();
    for (pull, areas) in group_by_area(bundle) {
        let period = Period::of(&pull.merged_at);
        wanted.insert((page_name(CHANGELOG).to_owned(), period));
        for slug in areas.keys() {
            wanted.insert((area_base(slug), period));
        }
    }
    wanted
}

/// The quarter pages among `existing` (a complete listing) a plan for
/// `bundle` reads: every part of each of [`quarters_of_interest`].
pub fn archives_of_interest(
    bundle: &EvidenceBundle,
    existing: &BTreeSet<String>,
) -> BTreeSet<String> {
    let wanted = quarters_of_interest(bundle);
    existing
        .iter()
        .filter(|path| {
            archive_base(path).is_some_and(|base| {
                parse_archive(base, path)
                    .is_some_and(|(period, _)| wanted.contains(&(base.to_owned(), period)))
            })
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::builtin::planner::{apply, plan};
    use crate::runner::builtin::samples::*;

    #[test]
    fn pages_of_interest_name_every_touched_area() {
        let b = bundle(vec![pull(1, "A", 'a', &["x/y", "z"])]);
        let set: Vec<String> = pages_of_interest(&b).into_iter().collect();
        assert_eq!(
            set,
            vec![
                "Archive.md",
                "Area-root.md",
                "Area-x.md",
                CHANGELOG,
                DEPENDENCIES,
                HOME,
                HOW_TO_WORK
            ]
        );
    }

    #[test]
    fn the_areas_to_record_are_the_area_pages_the_plan_touches() {
        let slugs = |names: &[&str]| -> BTreeSet<String> {
            names.iter().map(|n| (*n).to_owned()).collect()
        };
        let first = bundle(vec![
            pull(12, "One", 'a', &["src/a.rs", "README.md"]),
            pull(13, "Two", 'b', &["docs/x.md", "Docs/y.md"]),
        ]);
        let planned = plan(&first, &home());
        assert_eq!(areas_to_record(&first, &home()), area_slugs(&planned));
        assert_eq!(
            areas_to_record(&first, &home()),
            slugs(&["docs", "root", "src"])
        );
        let pages = as_current(apply(&home(), &planned));
        assert!(areas_to_record(&first, &pages).is_empty());
        let second = bundle(vec![
            pull(12, "One", 'a', &["src/a.rs", "README.md"]),
            pull(14, "Three", 'c', &["src/b.rs"]),
        ]);
        assert_eq!(areas_to_record(&second, &pages), slugs(&["src"]));
        assert_eq!(
            areas_to_record(&second, &pages),
            area_slugs(&plan(&second, &pages))
        );
    }
}
