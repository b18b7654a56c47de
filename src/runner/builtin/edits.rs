//! The edits a plan makes to an existing page: a replacement at an anchor
//! or a marker line, or an append at the end.
//!
//! Invariant: an edit made here anchors on what the page holds exactly once
//! (an anchor, or the one line ending with a marker), or has empty old text
//! and appends; an anchor that is missing or doubled is never guessed at:
//! the block is appended instead.

use super::inputs::CurrentPage;
use super::plan::Replacement;

/// Counts the non-overlapping occurrences of `needle` in `haystack`.
pub(super) fn occurrences(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// The byte range of the one line of `content` that ends with `marker`
/// (newline included), when exactly one does.
pub(super) fn marker_line(content: &str, marker: &str) -> Option<std::ops::Range<usize>> {
    let mut found = None;
    let mut start = 0;
    for line in content.split_inclusive('\n') {
        if line.trim_end().ends_with(marker) {
            if found.is_some() {
                return None;
            }
            found = Some(start..start + line.len());
        }
        start += line.len();
    }
    found
}

/// The one replacement that appends `append` to `page` (after a newline
/// when its last line has none).
pub(super) fn append_replacement(page: &CurrentPage, append: &str) -> Replacement {
    let sep = if page.content.is_empty() || page.content.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    Replacement {
        old: String::new(),
        new: format!("{sep}{append}"),
    }
}

/// A replacement that inserts `block` right after `anchor` when the anchor
/// occurs exactly once, or appends `fallback(block)` at the end otherwise.
pub(super) fn insert_after_anchor(
    page: &CurrentPage,
    anchor: &str,
    block: &str,
    fallback: impl FnOnce(&str) -> String,
) -> Replacement {
    if occurrences(&page.content, anchor) == 1 {
        Replacement {
            old: anchor.to_owned(),
            new: format!("{anchor}{block}"),
        }
    } else {
        append_replacement(page, &fallback(block))
    }
}
