//! The pages the builtin agent keeps and the teammem comments it keys them
//! with: page names, the anchor lines entries are inserted after, the
//! anchors that frame its sections, and the markers that end its lines.
//!
//! Page names: `Home.md`, `Changelog.md`, `Dependencies.md`, `Archive.md`,
//! `How-to-work-here.md` and `Area-<slug>.md` at the top of the wiki, and the quarter pages
//! (`super::archive`): every name unique case-insensitively, so each is one
//! page on GitHub's flat wiki and on the dashboard.
//!
//! Invariant: every anchor and marker here starts with the wiki's teammem
//! marker (`<!-- teammem:`), the one confinement guards, so a person's text
//! never looks like teammem's and teammem's lines are the ones an agent may
//! touch on a guarded page; untrusted text cannot forge one because
//! [`super::markdown`] escapes every `<` in it.

pub const HOME: &str = "Home.md";
pub const CHANGELOG: &str = "Changelog.md";
/// The page that lists the dependencies the manifests declare.
pub const DEPENDENCIES: &str = "Dependencies.md";
/// What every area page's name starts with (`Area-<slug>.md`, at the top of
/// the wiki: GitHub wikis are flat, a page is linked by its file name).
pub const AREA_PREFIX: &str = "Area-";
/// The archive index: every Changelog quarter page, linked from Home.
pub const ARCHIVE_INDEX: &str = "Archive.md";
/// The page that says how to build, test, lint and run the project.
pub const HOW_TO_WORK: &str = "How-to-work-here.md";
/// Its name as a link target.
pub const HOW_TO_WORK_BASE: &str = "How-to-work-here";

/// The anchor lines new entries are inserted after.
pub const CHANGELOG_ANCHOR: &str = "<!-- teammem:changelog -->\n";
pub const RECENT_ANCHOR: &str = "<!-- teammem:recent-changes -->\n";
pub const TOPICS_ANCHOR: &str = "<!-- teammem:topics -->\n";

/// The marker that keys an entry by its merge commit.
pub fn entry_marker(sha: &str) -> String {
    format!("<!-- teammem:{} -->", sha.to_ascii_lowercase())
}

/// Ends Home's link to an area page.
pub fn area_link_marker(slug: &str) -> String {
    format!("<!-- teammem:area:{slug} -->")
}

/// Ends Home's link to the Changelog.
pub const CHANGELOG_LINK_MARKER: &str = "<!-- teammem:changelog-link -->";
/// Ends Home's link to the Dependencies page.
pub const DEPENDENCIES_LINK_MARKER: &str = "<!-- teammem:dependencies-link -->";
/// Ends Home's link to the How-to-work-here page.
pub const HOW_TO_WORK_LINK_MARKER: &str = "<!-- teammem:how-to-work-link -->";
/// The anchor of Home's "For coding agents" list.
pub const AGENTS_ANCHOR: &str = "<!-- teammem:coding-agents -->\n";

/// The anchor entries are inserted after on an archive (quarter) page.
pub const ARCHIVE_ANCHOR: &str = "<!-- teammem:archive-entries -->\n";
/// Ends a current page's line linking the quarter pages of its entries.
pub const ARCHIVES_MARKER: &str = "<!-- teammem:archives -->";
/// Ends the line below which a current page holds entries recorded before
/// quarter pages existed (on no quarter page, so never dropped silently).
pub const BEFORE_ARCHIVES_MARKER: &str = "<!-- teammem:before-archives -->";
/// Ends Home's link to the archive index.
pub const ARCHIVE_LINK_MARKER: &str = "<!-- teammem:archive-link -->";
/// The anchor of Home's "Removed areas" list.
pub const REMOVED_AREAS_ANCHOR: &str = "<!-- teammem:removed-areas -->\n";
/// The first and last lines of the archive index's list.
pub const ARCHIVE_INDEX_ANCHOR: &str = "<!-- teammem:archive-index -->\n";
pub const ARCHIVE_INDEX_END: &str = "<!-- teammem:archive-index-end -->\n";

/// Ends Home's link to a removed area's page.
pub fn removed_link_marker(slug: &str) -> String {
    format!("<!-- teammem:removed:{slug} -->")
}

/// Marks the note that says older entries were trimmed.
pub const TRIMMED_MARKER: &str = "<!-- teammem:trimmed -->";

/// Ends the first line of an area page's "What is here" section.
pub const WHAT_IS_HERE_ANCHOR: &str = "<!-- teammem:what-is-here -->";
/// The last line of the section.
pub const WHAT_IS_HERE_END: &str = "<!-- teammem:what-is-here-end -->";
/// Ends the line of a file that states no purpose.
pub const FILE_MARKER: &str = "<!-- teammem:file -->";
/// Ends the line of a submodule (its pinned commit is on the line).
pub const SUBMODULE_MARKER: &str = "<!-- teammem:submodule -->";

/// Ends the first line of an area page's "Who knows this area" section.
pub const WHO_KNOWS_ANCHOR: &str = "<!-- teammem:who-knows -->";
/// The last line of the section.
pub const WHO_KNOWS_END: &str = "<!-- teammem:who-knows-end -->";
/// Starts the marker that ends an author's line: the count, then the name
/// in lowercase hex (so no name can end or forge the marker).
pub const AUTHOR_MARKER: &str = "<!-- teammem:author ";

/// Ends the first line of the Dependencies page's section.
pub const DEPENDENCIES_ANCHOR: &str = "<!-- teammem:dependencies -->";
/// The last line of the section.
pub const DEPENDENCIES_END: &str = "<!-- teammem:dependencies-end -->";
/// Ends a line of the section that cites nothing (a manifest's heading).
pub const MANIFEST_MARKER: &str = "<!-- teammem:manifest -->";

/// Ends the first line of the How-to-work-here page's section.
pub const HOW_TO_ANCHOR: &str = "<!-- teammem:how-to-work -->";
/// The last line of the section.
pub const HOW_TO_END: &str = "<!-- teammem:how-to-work-end -->";
/// Ends a topic's heading in the section ("### Test").
pub const HOW_TO_TOPIC_MARKER: &str = "<!-- teammem:how-to-topic -->";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_markers_are_the_ones_confinement_protects() {
        let marker = crate::wiki::confine::MARKER;
        assert!(entry_marker(&"a".repeat(40)).starts_with(marker));
        assert!(TOPICS_ANCHOR.starts_with(marker));
        for fixed in [
            CHANGELOG_ANCHOR,
            RECENT_ANCHOR,
            CHANGELOG_LINK_MARKER,
            DEPENDENCIES_LINK_MARKER,
            TRIMMED_MARKER,
            ARCHIVE_ANCHOR,
            ARCHIVES_MARKER,
            BEFORE_ARCHIVES_MARKER,
            ARCHIVE_LINK_MARKER,
            REMOVED_AREAS_ANCHOR,
            ARCHIVE_INDEX_ANCHOR,
            ARCHIVE_INDEX_END,
            WHAT_IS_HERE_ANCHOR,
            WHAT_IS_HERE_END,
            FILE_MARKER,
            SUBMODULE_MARKER,
            WHO_KNOWS_ANCHOR,
            WHO_KNOWS_END,
            AUTHOR_MARKER,
            DEPENDENCIES_ANCHOR,
            DEPENDENCIES_END,
            MANIFEST_MARKER,
            HOW_TO_WORK_LINK_MARKER,
            AGENTS_ANCHOR,
            HOW_TO_ANCHOR,
            HOW_TO_END,
            HOW_TO_TOPIC_MARKER,
        ] {
            assert!(fixed.starts_with(marker), "{fixed}");
        }
        assert!(area_link_marker("src").starts_with(marker));
        assert!(removed_link_marker("src").starts_with(marker));
    }
}
