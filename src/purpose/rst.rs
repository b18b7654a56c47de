//! reStructuredText: the document's title, the first text line under an
//! adornment (`===` below it, or above and below it).
//!
//! Invariant: directives, comments, targets and field lists (with the
//! lines indented under them) are never the title.

use crate::pull_text::is_underline;

use super::doc_text::indent;
use super::summary::{Summary, past_indented_body, title};

/// An reStructuredText document's title: the first text line under an
/// adornment (`===` below it, or above and below it), past directives,
/// comments, targets and field lists.
pub(super) fn rst(lines: &[&str]) -> Option<Summary> {
    let doc: Vec<(usize, &str)> = lines.iter().copied().enumerate().collect();
    let adornment = |line: &str| {
        let line = line.trim_end();
        is_underline(line) && !line.starts_with(' ') && !line.contains(' ')
    };
    let mut i = 0;
    while i < doc.len() {
        let line = doc[i].1.trim_end();
        if line.trim().is_empty() || indent(line) > 0 {
            i += 1;
        } else if line.starts_with("..") {
            i = past_indented_body(&doc, i);
        } else if adornment(line) {
            // An overline: the title is the next line, under a matching
            // underline.
            if let (Some(text), Some(under)) = (lines.get(i + 1), lines.get(i + 2))
                && !text.trim().is_empty()
                && under.trim_end() == line
            {
                return title(text.trim(), i + 1);
            }
            i += 1;
        } else if lines.get(i + 1).is_some_and(|next| adornment(next)) {
            return title(line.trim(), i);
        } else {
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::purpose::expect::{is, none};

    #[test]
    fn rst_files_take_their_title() {
        is(
            "docs/quickstart.rst",
            "Quickstart\n==========\n\nEager to get started?\n",
            "Quickstart",
            1,
        );
        is(
            "docs/api.rst",
            ".. currentmodule:: flask\n\n.. _api:\n\nAPI\n---\n",
            "API",
            5,
        );
        is(
            "docs/index.rst",
            ":orphan:\n\n.. image:: _static/logo.png\n    :align: center\n\n=====================\nWelcome to Flask\n=====================\n",
            "Welcome to Flask",
            7,
        );
        is(
            "docs/x.rst",
            ".. comment\n   spanning lines\n\n   and a blank\n\nReal Title\n~~~~~~~~~~\n",
            "Real Title",
            6,
        );
        none("docs/changes.rst", ".. include:: ../CHANGES.rst\n");
        none("docs/plain.rst", "Just a paragraph.\n");
    }
}
