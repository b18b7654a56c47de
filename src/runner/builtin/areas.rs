//! What an area is: a changed path's first folder (`root` for top-level
//! files), its page-safe slug and its page `Area-<slug>.md` (at the top of
//! the wiki: GitHub wikis are flat), how Home names it, and the one place a
//! job's pull requests have their paths grouped by area ([`group_by_area`]),
//! which the planner plans from and the reads before planning derive their
//! pages and areas from.
//!
//! Invariant: a slug is a safe page name whatever the path: lowercase letters
//! and digits (any script), `-` and `_`, never empty, never a device or
//! git-reserved name, at most 64 bytes, never read as a quarter page
//! (`-2026-q3` at its end gets `-area` after it); two spellings of one folder
//! (`Docs/`, `docs/`) share one slug and so one page.

use std::collections::BTreeMap;

use super::markdown::escape_markdown;
use super::markers::AREA_PREFIX;
use crate::forge::evidence::{EvidenceBundle, PullRequest};

/// The area of files at the repository root.
pub const ROOT_AREA: &str = "root";

/// The area of a changed path: its first segment, `root` for top-level files.
pub fn area_of(path: &str) -> String {
    match path.split_once('/') {
        Some((first, _)) if !first.is_empty() => first.to_owned(),
        _ => ROOT_AREA.to_owned(),
    }
}

const DEVICE_NAMES: [&str; 22] = [
    "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8",
    "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
];

/// A page-path-safe, case-folded name for an area: lowercase letters and
/// digits (any script), `-`, `_`; everything else becomes `-`; never empty,
/// never a device name or a git-reserved name, at most 64 bytes.
pub fn area_slug(area: &str) -> String {
    let mut slug = String::new();
    for ch in area.chars().flat_map(char::to_lowercase) {
        let keep = ch.is_alphanumeric() || ch == '-' || ch == '_';
        let next = if keep { ch } else { '-' };
        if next == '-' && slug.ends_with('-') {
            continue;
        }
        if slug.len() + next.len_utf8() > 64 {
            break;
        }
        slug.push(next);
    }
    let slug = slug.trim_matches('-').to_owned();
    let reserved = slug.is_empty()
        || DEVICE_NAMES.contains(&slug.as_str())
        || slug == "git"
        || slug.starts_with("git~");
    let slug = if reserved {
        format!("area-{slug}").trim_end_matches('-').to_owned()
    } else {
        slug
    };
    // `Area-x-2026-q3` would be read as a quarter page of `Area-x`.
    if super::archive::looks_like_archive(&slug) {
        format!("{slug}-area")
    } else {
        slug
    }
}

/// The page of an area slug.
pub fn area_page(slug: &str) -> String {
    format!("{AREA_PREFIX}{slug}.md")
}

/// The page name (without `.md`) of an area slug: the base of its quarter
/// pages and the target of links to it.
pub fn area_base(slug: &str) -> String {
    format!("{AREA_PREFIX}{slug}")
}

/// The slug of an area page path (`Area-src.md` → `src`), not of a quarter
/// page.
pub fn slug_of_page(path: &str) -> Option<&str> {
    let slug = path.strip_prefix(AREA_PREFIX)?.strip_suffix(".md")?;
    (!slug.is_empty() && !super::archive::looks_like_archive(slug)).then_some(slug)
}

/// How Home and the area's pages name an area: as in the tree (`.github`),
/// escaped; the slug when the name holds characters a link label on a
/// protected page may not (see `wiki::confine`).
pub fn area_label(area: &str, slug: &str) -> String {
    let label = escape_markdown(area);
    let plain = !label.trim().is_empty()
        && label.len() <= 200
        && label
            .chars()
            .all(|c| c.is_alphanumeric() || " -_./\\".contains(c));
    if plain { label } else { slug.to_owned() }
}

/// How an area is named in its page's text.
pub fn area_title(area: &str) -> String {
    if area == ROOT_AREA {
        "files at the repository root".to_owned()
    } else {
        format!("files under `{}/`", area.replace('`', "'"))
    }
}

/// The area of an entry of the source's root listing: a folder is its own
/// area, a file belongs to the root's.
pub fn area_of_entry(path: &str, directory: bool) -> String {
    if directory {
        path.to_owned()
    } else {
        ROOT_AREA.to_owned()
    }
}

/// A pull request's changed paths grouped by area: slug → (the area as first
/// seen, its paths in the pull request's order).
pub type ByArea<'a> = BTreeMap<String, (String, Vec<&'a str>)>;

/// Each pull request of a bundle, in merge order, with its changed paths
/// grouped by area.
pub type Grouped<'a> = Vec<(&'a PullRequest, ByArea<'a>)>;

/// The one grouping by area of `bundle`'s pull requests: each one's changed
/// paths by area, in merge order.
pub fn group_by_area(bundle: &EvidenceBundle) -> Grouped<'_> {
    bundle
        .pull_requests
        .iter()
        .map(|pull| (pull, by_area(pull)))
        .collect()
}

/// The areas of the files the range changed outside any pull request
/// (`bundle.direct_changes`): slug → the area as first seen. They get no
/// entry; their pages' "What is here" follows the tip all the same.
pub fn direct_areas(bundle: &EvidenceBundle) -> BTreeMap<String, String> {
    let mut areas = BTreeMap::new();
    for path in &bundle.direct_changes {
        let area = area_of(path);
        areas.entry(area_slug(&area)).or_insert(area);
    }
    areas
}

/// Groups `pull`'s changed paths by area; a file renamed from another area
/// is in both (its old path in the old one).
fn by_area(pull: &PullRequest) -> ByArea<'_> {
    let mut grouped = ByArea::new();
    for file in &pull.files {
        let new_area = area_of(&file.path);
        let old = file
            .previous_path
            .as_deref()
            .filter(|old| area_slug(&area_of(old)) != area_slug(&new_area));
        for path in std::iter::once(file.path.as_str()).chain(old) {
            let area = area_of(path);
            grouped
                .entry(area_slug(&area))
                .or_insert_with(|| (area, Vec::new()))
                .1
                .push(path);
        }
    }
    grouped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::builtin::planner::plan;
    use crate::runner::builtin::samples::*;

    #[test]
    fn areas_map_to_safe_case_folded_pages() {
        assert_eq!(area_of("src/lib.rs"), "src");
        assert_eq!(area_of("README.md"), ROOT_AREA);
        assert_eq!(area_of("/abs"), ROOT_AREA);
        assert_eq!(area_slug("Docs"), "docs");
        assert_eq!(area_slug(".github"), "github");
        assert_eq!(area_slug("a:b<c>"), "a-b-c");
        assert_eq!(area_slug("CON"), "area-con");
        assert_eq!(area_slug(".git"), "area-git");
        assert_eq!(area_slug("..."), "area");
        assert_eq!(area_slug("-x-"), "x");
        assert!(area_slug(&"x".repeat(300)).len() <= 64);
        assert_eq!(area_slug("release-2026-Q3"), "release-2026-q3-area");
        assert_eq!(area_page("src"), "Area-src.md");
        assert_eq!(slug_of_page("Area-src.md"), Some("src"));
        assert_eq!(slug_of_page("Area-src-2026-Q3.md"), None);
        assert_eq!(slug_of_page("Changelog.md"), None);
        // Home names an area as the tree does.
        assert_eq!(area_label(".github", "github"), ".github");
        assert_eq!(area_label("my_dir", "my_dir"), "my_dir");
        assert_eq!(area_label("c++", "c"), "c");
        assert_eq!(area_label("[x](y)", "x-y"), "x-y");
        // Two spellings of one area share one page.
        let b = bundle(vec![pull(1, "A", 'a', &["Docs/a", "docs/b"])]);
        let p = plan(&b, &home());
        assert_eq!(
            p.writes.iter().filter(|w| w.path == "Area-docs.md").count(),
            1
        );
    }
}
