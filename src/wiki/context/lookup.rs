//! Area pages past the search index's scan budget, found by name. The
//! context index reads the pages the search index read, in path order until
//! `MAX_SEARCH_SCAN_BYTES`; on a larger wiki an asked path whose area page
//! comes later would be `unknown`. An area page is named after its folder
//! (`Area-SLUG.md`, its quarters `Area-SLUG-YYYY-qN.md`, as the builtin agent
//! names them), so for such a path the pages named after each of its folders
//! are read by name from the commit's tree, whatever the scan read.
//!
//! Invariants: only when a path is unknown to the scanned pages; reads at
//! most [`MAX_PAGES`] pages and [`MAX_BYTES`] bytes, only pages the scan did
//! not read; pure over the commit (deterministic), so the index built is
//! kept by commit and slugs ([`CACHE_SIZE`] of them, process-wide: a
//! commit id names its pages' content in any wiki).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use gix::ObjectId;

use super::index::ContextIndex;
use crate::wiki::WikiError;
use crate::wiki::tree::{self, IndexCache};

/// Most pages one lookup reads.
pub const MAX_PAGES: usize = 24;
/// Most bytes one lookup reads.
pub const MAX_BYTES: u64 = 2 * 1024 * 1024;
const AREA_PREFIX: &str = "Area-";
/// Lookups kept, most recent first.
pub const CACHE_SIZE: usize = 8;

type Found = Option<Arc<ContextIndex>>;
/// A commit and the slugs looked up at it.
type Key = (ObjectId, BTreeSet<String>);
static CACHE: Mutex<Vec<(Key, Found)>> = Mutex::new(Vec::new());

/// The slug of a folder's area page: lower case, every run of characters
/// other than letters, digits, `-` and `_` one `-`, trimmed of `-`.
pub fn slug(folder: &str) -> String {
    let mut slug = String::new();
    for ch in folder.chars().flat_map(char::to_lowercase) {
        let next = if ch.is_alphanumeric() || ch == '-' || ch == '_' {
            ch
        } else {
            '-'
        };
        if next == '-' && slug.ends_with('-') {
            continue;
        }
        slug.push(next);
    }
    slug.trim_matches('-').to_owned()
}

/// The slugs a path's area pages may be named by: each of its folders and
/// the path itself (a folder asked), outermost first.
pub fn slugs(path: &str) -> Vec<String> {
    let path = path.trim_end_matches('/');
    let mut slugs: Vec<String> = path
        .match_indices('/')
        .map(|(at, _)| slug(&path[..at]))
        .chain([slug(path)])
        .filter(|s| !s.is_empty())
        .collect();
    slugs.dedup();
    slugs
}

/// `2026-q3` (any case).
fn is_quarter(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 7
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5].eq_ignore_ascii_case(&b'q')
        && (b'1'..=b'4').contains(&b[6])
}

/// Whether `page` is the area page of `slug` or one of its quarter pages.
pub fn is_area_page_of(page: &str, slug: &str) -> bool {
    let Some(name) = page
        .strip_prefix(AREA_PREFIX)
        .and_then(|p| p.strip_suffix(".md"))
    else {
        return false;
    };
    let name = name.to_lowercase();
    name == slug
        || name
            .strip_prefix(slug)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(is_quarter)
}

/// The context index of the area pages of `missing` paths that the scan
/// (`scanned`, of `commit`) did not read, or `None` when there are none;
/// built once per commit and slugs.
pub fn beyond_scan(
    repo: &gix::Repository,
    cache: &IndexCache,
    commit: ObjectId,
    scanned: &BTreeSet<String>,
    missing: &[String],
) -> Result<Found, WikiError> {
    let slugs: BTreeSet<String> = missing.iter().flat_map(|p| slugs(p)).collect();
    if slugs.is_empty() {
        return Ok(None);
    }
    let key = (commit, slugs);
    {
        let mut kept = CACHE.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = kept.iter().position(|(k, _)| *k == key) {
            let entry = kept.remove(at);
            let found = entry.1.clone();
            kept.insert(0, entry);
            return Ok(found);
        }
    }
    let found = build(repo, cache, commit, scanned, &key.1)?.map(Arc::new);
    let mut kept = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    kept.retain(|(k, _)| *k != key);
    kept.insert(0, (key, found.clone()));
    kept.truncate(CACHE_SIZE);
    Ok(found)
}

/// Reads the pages named after `slugs` that the scan did not read.
fn build(
    repo: &gix::Repository,
    cache: &IndexCache,
    commit: ObjectId,
    scanned: &BTreeSet<String>,
    slugs: &BTreeSet<String>,
) -> Result<Option<ContextIndex>, WikiError> {
    let tree = cache.get_or_build(repo, tree::commit_tree(repo, commit)?)?;
    let (mut pages, mut bytes) = (Vec::new(), 0u64);
    let area_pages = tree
        .pages
        .range(AREA_PREFIX.to_owned()..)
        .take_while(|(path, _)| path.starts_with(AREA_PREFIX));
    for (path, page) in area_pages {
        if pages.len() == MAX_PAGES {
            break;
        }
        if scanned.contains(path) || !slugs.iter().any(|s| is_area_page_of(path, s)) {
            continue;
        }
        let size = repo
            .find_header(page.blob)
            .map_err(|err| WikiError::internal("reading a page header", err))?
            .size();
        if bytes + size > MAX_BYTES {
            break;
        }
        bytes += size;
        let text = String::from_utf8_lossy(&tree::read_blob(repo, page.blob)?).into_owned();
        pages.push((path.clone(), text));
    }
    if pages.is_empty() {
        return Ok(None);
    }
    Ok(Some(ContextIndex::build(
        pages.iter().map(|(p, t)| (p.as_str(), t.as_str())),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_the_area_pages_of_its_folders() {
        assert_eq!(slugs("svc0042/mod_04.py"), ["svc0042", "svc0042-mod_04-py"]);
        assert_eq!(slugs("src/Queue Stuff/"), ["src", "src-queue-stuff"]);
        assert_eq!(slugs("README.md"), ["readme-md"]);
        assert!(is_area_page_of("Area-svc0042.md", "svc0042"));
        assert!(is_area_page_of("Area-SVC0042-2026-Q1.md", "svc0042"));
        assert!(!is_area_page_of("Area-svc00420.md", "svc0042"));
        assert!(!is_area_page_of("Area-svc0042-notes.md", "svc0042"));
        assert!(!is_area_page_of("Changelog.md", "svc0042"));
        assert!(!is_area_page_of("Area-svc0042-2026-Q5.md", "svc0042"));
    }
}
