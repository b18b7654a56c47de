//! Test helpers: what the extractor should find in a file, and from which
//! lines (test builds only).
//!
//! Invariant: every check goes through the public [`purpose`] entry point,
//! as the builtin agent calls it.

use super::purpose;

pub(super) fn found(path: &str, text: &str) -> Option<(String, u32, u32)> {
    purpose(path, text.as_bytes()).map(|(t, lines)| (t, lines.start(), lines.end()))
}

/// The purpose `want`, from line `line` alone.
pub(super) fn is(path: &str, text: &str, want: &str, line: u32) {
    spans(path, text, want, line, line);
}

/// The purpose `want`, from lines `first` to `last`.
pub(super) fn spans(path: &str, text: &str, want: &str, first: u32, last: u32) {
    assert_eq!(
        found(path, text),
        Some((want.to_owned(), first, last)),
        "{path}: {text:?}"
    );
}

pub(super) fn none(path: &str, text: &str) {
    assert_eq!(found(path, text), None, "{path}: {text:?}");
}
