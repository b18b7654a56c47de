//! The dependencies a package manifest declares (`Cargo.toml`,
//! `package.json`, `pyproject.toml`, `go.mod`, `requirements*.txt`), each
//! with its version requirement as written, its kind and the line it is
//! declared on, and the difference between two versions of one manifest.
//! Cargo's `optional = true` and `[target.X.*]` tables, and PEP 735's
//! `[dependency-groups]` (whose `{include-group = …}` entries are not
//! dependencies), are read too. Pure text: the builtin agent reads the files
//! and cites what this finds.
//!
//! Invariants:
//! - only the first [`MAX_MANIFEST_BYTES`] of a manifest are read and at most
//!   [`MAX_ENTRIES`] dependencies are kept; a manifest cut either way says so
//!   (`cut`);
//! - every dependency's line is the 1-based line its name is declared on in
//!   the text given, so an evidence marker can cite it;
//! - names and requirements are plain text bounded to [`MAX_TEXT_CHARS`]
//!   characters, *not* escaped for Markdown (the caller does that: manifest
//!   text is untrusted); text that is not one of the shapes read here is
//!   skipped, never guessed at.
//!
//! One idea per file (reading order):
//! - `dependency.rs`: what a manifest declares (ecosystem, kind, dependency);
//! - `parse.rs`: which manifest a path is, and the bounds every format shares;
//! - one file per format: `cargo.rs`, `pyproject.rs`, `requirements.rs`
//!   (and PEP 508 strings), `go_mod.rs`, `package_json.rs`; `toml.rs` is the
//!   line-based TOML reading the first two share;
//! - `diff.rs`: what changed between two versions of one manifest.

mod cargo;
mod dependency;
mod diff;
mod go_mod;
mod package_json;
mod parse;
mod pyproject;
mod requirements;
mod toml;

#[cfg(test)]
mod expect;

pub use dependency::{Dependency, Ecosystem, Kind, Manifest};
pub use diff::{Change, diff};
pub use parse::{MAX_ENTRIES, MAX_MANIFEST_BYTES, MAX_TEXT_CHARS, ecosystem_of, parse};
