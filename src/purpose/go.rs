//! Go: the package comment, the comment lines right above the `package`
//! clause.
//!
//! Invariant: a comment a blank line or code separates from the `package`
//! clause is not the package comment.

use super::doc_text::{block_comment, dedent};
use super::summary::{Summary, summary};

/// The package comment: the comment lines right above the `package` clause.
pub(super) fn go(lines: &[&str]) -> Option<Summary> {
    let mut block: Vec<(usize, &str)> = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index].trim();
        if let Some(text) = line.strip_prefix("//") {
            block.push((index, text));
        } else if line.starts_with("/*") {
            let (comment, last) = block_comment(lines, index);
            block = comment;
            index = last;
        } else if line.is_empty() {
            block.clear();
        } else if line.starts_with("package ") || line == "package" {
            return summary(&dedent(&block));
        } else {
            return None;
        }
        index += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::purpose::expect::{is, none, spans};

    #[test]
    fn go_takes_the_package_comment_first_sentence() {
        is(
            "cmd/x/main.go",
            "// Copyright 2024 The Authors. All rights reserved.\n// Use of this source code is governed by a BSD license.\n\n//go:build linux\n\n// Package main runs the server. It reads flags.\n// More text.\npackage main\n",
            "Package main runs the server.",
            6,
        );
        spans(
            "a.go",
            "/*\nPackage store keeps to-dos\nin SQLite. It is safe.\n*/\npackage store\n",
            "Package store keeps to-dos in SQLite.",
            2,
            3,
        );
        // A comment separated from the clause by a blank line is not its doc.
        none("a.go", "// Just a header.\n\npackage x\n");
        none("a.go", "package x\n\n// Later.\n");
    }
}
