//! What the builtin agent's planner is given besides the evidence bundle: the
//! pages as one wiki snapshot showed them, the files of the areas it read at
//! the job's tip (with their purposes) and the dependency facts of the
//! manifests it read. Plain data; the driver fills it (`read.rs`,
//! `read_manifests.rs`), the planner only reads it.
//!
//! Invariant: everything here was read at one commit the job reconciles (the
//! wiki snapshot the plan starts from, the job's tip, or an evidence commit
//! and its parent); a part the agent could not read is absent, never
//! guessed, so the page keeps what it had.

use std::collections::BTreeMap;

use crate::facts::Lines;
use crate::ids::Sha;

/// One file of an area at the job's tip, with its purpose (the plain text
/// and the line it came from) if it states one; or a submodule, with the
/// commit it pins (and no purpose: its files are another repository's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AreaFile {
    pub path: String,
    pub purpose: Option<(String, Lines)>,
    /// The commit a submodule pins (full sha); `None` for a file.
    pub pinned: Option<String>,
}

/// An area's files at one commit, as the agent read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AreaFiles {
    pub commit: Sha,
    /// Sorted by path.
    pub files: Vec<AreaFile>,
    /// Files of the area that are not in `files`.
    pub omitted: usize,
    /// The area's listing was cut, so `omitted` is a lower bound.
    pub listing_cut: bool,
}

/// Area slug → its files; an area without an entry keeps its section as it is.
pub type Listings = BTreeMap<String, AreaFiles>;

/// A page as it is at the snapshot the plan starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentPage {
    /// Blob sha (the patch's `expected_sha`).
    pub sha: String,
    pub content: String,
}

/// The manifests at the job's tip, as the agent read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TipManifests {
    pub commit: Sha,
    /// Sorted by path.
    pub manifests: Vec<(String, crate::manifests::Manifest)>,
    /// Manifests found but not read (past the per-job bound).
    pub omitted: usize,
}

/// What the agent learned about dependencies for one job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DependencyFacts {
    /// The tip's manifests; `None` leaves `Dependencies.md` as it is.
    pub tip: Option<TipManifests>,
    /// Lowercase merge sha → (manifest path, its changes) for each manifest
    /// the PR touched whose before and after the agent could read.
    pub changes: BTreeMap<String, Vec<(String, Vec<crate::manifests::Change>)>>,
}
