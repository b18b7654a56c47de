//! Rust: the `//!` (or `/*! */`) inner doc before the first item, or the
//! file a `#![doc = include_str!("…")]` attribute names.
//!
//! Invariant: only an inner doc is read (an outer `///` documents an item,
//! not the file); an include is named as written, for `stated.rs` to
//! resolve inside the repository.

use super::doc_text::{block_comment, dedent};
use super::summary::{Found, summary};

/// The string literal of a `#![doc = include_str!("…")]` attribute (also
/// inside `cfg_attr`).
fn doc_include(line: &str) -> Option<&str> {
    if !line.starts_with("#![") || !line.contains("doc") {
        return None;
    }
    let after = line.split_once("include_str!(")?.1.trim_start();
    let literal = after.strip_prefix('"')?;
    let end = literal.find('"')?;
    let target = &literal[..end];
    (!target.contains('\\')).then_some(target)
}

/// A `//!` (or `/*! */`) inner doc before the first item, past regular
/// comments and `#![…]` attributes; or, when an attribute takes the crate's
/// doc from a file first, that file.
pub(super) fn rust(lines: &[&str]) -> Option<Found> {
    let mut doc: Vec<(usize, &str)> = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index].trim();
        if let Some(text) = line.strip_prefix("//!") {
            doc.push((index, text));
        } else if line.starts_with("/*!") {
            let (block, last) = block_comment(lines, index);
            doc.extend(block);
            doc.push((last, ""));
            index = last;
        } else if !doc.is_empty() {
            // The inner doc ended.
            break;
        } else if let Some(target) = doc_include(line) {
            return Some(Found::Include(target.to_owned(), index));
        } else if line.starts_with("/*") {
            index = block_comment(lines, index).1;
        } else if !(line.is_empty() || line.starts_with("//") || line.starts_with("#![")) {
            return None;
        }
        index += 1;
    }
    summary(&dedent(&doc)).map(Found::Summary)
}

#[cfg(test)]
mod tests {
    use crate::purpose::expect::{is, none, spans};

    #[test]
    fn rust_takes_the_first_line_of_the_inner_doc() {
        is(
            "src/facts.rs",
            "//! Evidence markers: how a statement says what it rests on.\n//!\n//! More.\n",
            "Evidence markers: how a statement says what it rests on.",
            1,
        );
        is(
            "src/lib.rs",
            "// SPDX-License-Identifier: MIT\n// Copyright 2026 Someone\n\n#![forbid(unsafe_code)]\n//!\n//! The crate.\nuse x;\n",
            "The crate.",
            6,
        );
        is(
            "a.rs",
            "/* Licensed under MIT */\n/*! Block inner doc.\n * Second sentence.\n */\n",
            "Block inner doc.",
            2,
        );
        is(
            "a.rs",
            "/*!\n * Starred second line.\n */\n",
            "Starred second line.",
            2,
        );
        none("a.rs", "/// An item doc, not the module's.\nfn f() {}\n");
        none("a.rs", "use std::fmt;\n//! too late\n");
        none("a.rs", "");
        none("a.rs", "//!\n//!\n");
        // A license paragraph in the doc itself is skipped.
        is(
            "a.rs",
            "//! Copyright 2020 X. All rights reserved.\n//!\n//! The parser.\n",
            "The parser.",
            3,
        );
    }

    #[test]
    fn rust_docs_skip_usage_boilerplate_and_headings() {
        // An example whose doc is only how to run it states no purpose.
        none(
            "examples/hello/src/main.rs",
            "//! Run with\n//!\n//! ```not_rust\n//! cargo run -p example-hello-world\n//! ```\n\nuse axum::Router;\n",
        );
        is(
            "examples/ws/src/main.rs",
            "//! Example websocket server.\n//!\n//! Run the server with\n//! ```not_rust\n//! cargo run -p example-websockets\n//! ```\n",
            "Example websocket server.",
            1,
        );
        none(
            "src/a.rs",
            "//! # Example\n//!\n//! ```rust\n//! let app = Router::new();\n//! ```\n",
        );
        is(
            "src/b.rs",
            "//! Example:\n//!\n//!     let x = 1;\n//!\n//! # Overview\n//!\n//! Handlers for [`Router`]s, see [the guide](https://x).\n",
            "Handlers for `Router`s, see the guide.",
            7,
        );
        is(
            "src/c.rs",
            "//! Run this example using:\n//!\n//! $ cargo run\n//!\n//! Serves static files.\n",
            "Serves static files.",
            5,
        );
        // The sentence goes on past the first line.
        spans(
            "src/extract/mod.rs",
            "//! Types and traits for extracting data from\n//! requests.\n//!\n//! # Example\n",
            "Types and traits for extracting data from requests.",
            1,
            2,
        );
    }
}
