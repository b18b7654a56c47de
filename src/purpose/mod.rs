//! A source file's one-line purpose, as the file itself states it in its
//! first lines: a Rust `//!` inner doc (or the file a
//! `#![doc = include_str!("…")]` names), a Python module docstring, a Go
//! package comment, a JSDoc file header or leading JavaScript/TypeScript
//! comment, a shell script's leading `#` comment, a Markdown file's first
//! heading, an reStructuredText file's title. Pure text: the builtin agent
//! reads a file's head and cites what this finds.
//!
//! Invariants:
//! - only the first [`HEAD_BYTES`] of a file are looked at, and a file with a
//!   NUL byte there is binary and has no purpose;
//! - the purpose is the first sentence of the first meaningful paragraph, as
//!   one line of plain text of at most [`MAX_PURPOSE_CHARS`] characters (a
//!   longer sentence is cut between words and marked `…`, never inside a
//!   word), whitespace runs folded and control characters dropped, taken
//!   from the [`Lines`](crate::facts::Lines) returned and from nothing else;
//!   it is *not* escaped for Markdown (the caller does that: file text is
//!   untrusted);
//! - shebangs, encoding lines, editor and tool directives, license,
//!   copyright and SPDX paragraphs, field lists, headings inside a doc,
//!   badges, code (fenced, indented, doctests) and usage boilerplate ("Run
//!   with", "Example", "Usage") are never a purpose; a file that states none
//!   has none;
//! - a doc kept in another file is named, not read ([`Stated::Include`]):
//!   the path is resolved inside the repository (never above its root), and
//!   the caller reads that file and asks [`included_purpose`].
//!
//! One idea per file (reading order):
//! - `stated.rs`: the entry points, the head read, an include resolved;
//! - `language.rs`: which extractor a path gets;
//! - `summary.rs`: the first sentence of the first meaningful paragraph,
//!   bounded, the rule every language shares;
//! - `never_a_purpose.rs`: licenses, directives, boilerplate, badges, code;
//! - `doc_text.rs`: comment markers and indentation taken off;
//! - one file per language: `rust.rs`, `python.rs`, `go.rs`,
//!   `javascript.rs` (and TypeScript), `shell.rs`, `markdown.rs`, `rst.rs`.

mod doc_text;
mod go;
mod javascript;
mod language;
mod markdown;
mod never_a_purpose;
mod python;
mod rst;
mod rust;
mod shell;
mod stated;
mod summary;

#[cfg(test)]
mod coverage;
#[cfg(test)]
mod expect;

pub use stated::{HEAD_BYTES, Stated, included_purpose, purpose, stated};
pub use summary::MAX_PURPOSE_CHARS;
