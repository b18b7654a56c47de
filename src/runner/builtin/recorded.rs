//! What is already recorded: the merge shas each page family (a current
//! page and its quarter pages) carries, read once from the pages a plan is
//! given.
//!
//! Invariant: a pull request counts as recorded on a family when its entry
//! marker is on the current page or on any of its quarter pages, whichever
//! it is on; a sha is compared in lower case, as markers write it. The
//! planner writes an entry only where this says it is missing, so a replay
//! plans nothing.

use std::collections::{BTreeMap, HashSet};

use super::archive::{archive_base, page_name};
use super::areas::slug_of_page;
use super::entries::entry_shas;
use super::inputs::CurrentPage;
use super::markers::CHANGELOG;

/// The merge shas each page family (a current page's name) already carries,
/// on its current page or any of its quarter pages.
pub(super) struct Recorded(BTreeMap<String, HashSet<String>>);

impl Recorded {
    pub(super) fn new(pages: &BTreeMap<String, CurrentPage>) -> Recorded {
        let mut families: BTreeMap<String, HashSet<String>> = BTreeMap::new();
        for (path, page) in pages {
            let base = if path == CHANGELOG || slug_of_page(path).is_some() {
                page_name(path)
            } else if let Some(base) = archive_base(path) {
                base
            } else {
                continue;
            };
            families
                .entry(base.to_owned())
                .or_default()
                .extend(entry_shas(&page.content).map(str::to_owned));
        }
        Recorded(families)
    }

    pub(super) fn has(&self, base: &str, sha: &str) -> bool {
        self.0
            .get(base)
            .is_some_and(|shas| shas.contains(&sha.to_ascii_lowercase()))
    }
}
