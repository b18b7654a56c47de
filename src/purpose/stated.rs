//! The entry points: what a file's head states ([`stated`], [`purpose`]) and
//! what a doc kept in another file states ([`included_purpose`]).
//!
//! Invariants: only the first [`HEAD_BYTES`] of a file are looked at, and a
//! file with a NUL byte there is binary and has no purpose; an included
//! doc's path is resolved inside the repository (never absolute, never
//! above its root) and named, not read.

use crate::facts::Lines;

use super::go::go;
use super::javascript::script;
use super::language::{Language, language};
use super::markdown::markdown;
use super::python::python;
use super::rst::rst;
use super::rust::rust;
use super::shell::shell;
use super::summary::{Found, summary};

/// How much of a file the extractor reads.
pub const HEAD_BYTES: usize = 4096;

/// What a file's head says about its purpose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stated {
    /// The purpose, and the lines it came from.
    Purpose(String, Lines),
    /// The file's doc is the text of another file of the repository (Rust's
    /// `#![doc = include_str!("../README.md")]`): its path, resolved from
    /// this file's directory, and the line that names it. The caller reads
    /// that file's head and asks [`included_purpose`].
    Include { path: String, line: Lines },
}

/// The text of a file's head: `None` for a binary one.
fn head_text(bytes: &[u8]) -> Option<&str> {
    let head = &bytes[..bytes.len().min(HEAD_BYTES)];
    if head.contains(&0) {
        return None;
    }
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        // A head cut inside a character, or a file that is not UTF-8 further
        // on: what decodes before that point.
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).ok()?,
    };
    Some(text.strip_prefix('\u{FEFF}').unwrap_or(text))
}

fn split_lines(text: &str) -> Vec<&str> {
    text.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

/// What the file at `path` states about its purpose from its first bytes;
/// `None` when it states none, is not a language known here, or is binary.
pub fn stated(path: &str, bytes: &[u8]) -> Option<Stated> {
    let text = head_text(bytes)?;
    let lines = split_lines(text);
    let found = match language(path, text)? {
        Language::Rust => rust(&lines)?,
        Language::Python => Found::Summary(python(&lines)?),
        Language::Go => Found::Summary(go(&lines)?),
        Language::Script => Found::Summary(script(&lines)?),
        Language::Shell => Found::Summary(shell(&lines)?),
        Language::Markdown => Found::Summary(markdown(&lines)?),
        Language::Rst => Found::Summary(rst(&lines)?),
    };
    let line = |index: usize| u32::try_from(index + 1).ok();
    match found {
        Found::Summary(s) => Some(Stated::Purpose(
            s.text,
            Lines::new(line(s.first)?, line(s.last)?).ok()?,
        )),
        Found::Include(target, at) => Some(Stated::Include {
            path: resolve(path, &target)?,
            line: Lines::new(line(at)?, line(at)?).ok()?,
        }),
    }
}

/// The purpose of the file at `path` from its first bytes, with the lines it
/// came from; `None` when the file states none here (also when its doc is
/// another file's: see [`stated`]).
pub fn purpose(path: &str, bytes: &[u8]) -> Option<(String, Lines)> {
    match stated(path, bytes)? {
        Stated::Purpose(text, lines) => Some((text, lines)),
        Stated::Include { .. } => None,
    }
}

/// The purpose an included doc (a crate's `README.md`, read from its first
/// bytes) states: the first sentence of its first meaningful paragraph,
/// past its title, badges, HTML and code.
pub fn included_purpose(bytes: &[u8]) -> Option<String> {
    let text = head_text(bytes)?;
    let lines = split_lines(text);
    let mut start = 0;
    if lines.first().is_some_and(|l| l.trim_end() == "---") {
        // Front matter.
        start = 2 + lines
            .iter()
            .skip(1)
            .position(|l| matches!(l.trim_end(), "---" | "..."))?;
    }
    let doc: Vec<(usize, &str)> = lines.iter().copied().enumerate().skip(start).collect();
    summary(&doc).map(|s| s.text)
}

/// `target` (as an `include_str!` in the file at `from` names it) as a path
/// of the repository; `None` for an absolute path or one above the root.
fn resolve(from: &str, target: &str) -> Option<String> {
    if target.is_empty() || target.starts_with('/') || target.contains('\\') {
        return None;
    }
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            name => parts.push(name),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use crate::facts::Lines;
    use crate::purpose::expect::{is, none};
    use crate::purpose::{HEAD_BYTES, Stated, included_purpose, purpose, stated};

    #[test]
    fn unknown_binary_and_empty_files_have_no_purpose() {
        none("logo.png", "\u{89}PNG");
        none("data.json", "{\"a\": 1}");
        none("a.py", "\"\"\"Binary\0\"\"\"");
        none("a.rs", "");
        none("Cargo.toml", "# A comment in toml.\n");
        // Not UTF-8 after the purpose: what decodes is used.
        let mut bytes = b"//! Still found.\n".to_vec();
        bytes.extend_from_slice(&[0xff, 0xfe]);
        assert_eq!(
            purpose("a.rs", &bytes).map(|(t, _)| t),
            Some("Still found.".into())
        );
        // Only the head is read.
        let mut late = "\n".repeat(HEAD_BYTES);
        late.push_str("//! Too far down.\n");
        none("a.rs", &late);
    }

    #[test]
    fn a_crate_doc_from_a_file_is_named_for_the_caller() {
        let lib = "#![cfg_attr(docsrs, feature(doc_auto_cfg))]\n#![doc = include_str!(\"../README.md\")]\n#![warn(missing_docs)]\n";
        assert_eq!(
            stated("axum-extra/src/lib.rs", lib.as_bytes()),
            Some(Stated::Include {
                path: "axum-extra/README.md".into(),
                line: Lines::new(2, 2).unwrap(),
            })
        );
        assert_eq!(purpose("axum-extra/src/lib.rs", lib.as_bytes()), None);
        assert_eq!(
            stated(
                "src/lib.rs",
                b"#![cfg_attr(feature = \"docs\", doc = include_str!(\"docs/lib.md\"))]\n"
            ),
            Some(Stated::Include {
                path: "src/docs/lib.md".into(),
                line: Lines::new(1, 1).unwrap(),
            })
        );
        // Never above the repository's root, never absolute.
        assert_eq!(
            stated("src/lib.rs", b"#![doc = include_str!(\"../../x.md\")]\n"),
            None
        );
        assert_eq!(
            stated("lib.rs", b"#![doc = include_str!(\"/etc/passwd\")]\n"),
            None
        );
        // A `//!` doc written first wins.
        is(
            "src/lib.rs",
            "//! The crate.\n#![doc = include_str!(\"../README.md\")]\n",
            "The crate.",
            1,
        );
        let readme = "# axum-extra\n\n[![Build status](https://github.com/tokio-rs/axum/actions/workflows/CI.yml/badge.svg?branch=main)](https://github.com/tokio-rs/axum/actions)\n[![Crates.io](https://img.shields.io/crates/v/axum-extra)](https://crates.io/crates/axum-extra)\n\n<div align=\"center\">\n\nExtra utilities for [`axum`]. More below.\n\n[`axum`]: https://crates.io/crates/axum\n";
        assert_eq!(
            included_purpose(readme.as_bytes()).as_deref(),
            Some("Extra utilities for `axum`.")
        );
        assert_eq!(included_purpose(b"# Title only\n"), None);
        assert_eq!(included_purpose(b"\0binary"), None);
    }
}
