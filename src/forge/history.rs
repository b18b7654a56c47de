//! The default branch's first-parent history, newest back to a start: what a
//! backfill cuts into ranges (`teammem backfill`). Each first-parent commit is
//! where one change landed (a squash or merge of a pull request, a merge of
//! another branch); its `entered` count says how many commits it brought, when
//! the forge can tell cheaply.
//!
//! Invariants: the list is oldest first and each commit's `parent` is the
//! commit before it in the list (or, for the oldest, the commit the first
//! range starts at); a start that is not in the history, or a history longer
//! than the caller's limit, is a [`super::Refusal`], never a shortened list.

use crate::ids::Sha;

/// The most first-parent commits one backfill walks.
pub const MAX_HISTORY: usize = 10_000;

/// The most first-parent commits (merged pull requests, mostly) in one range
/// job: the one bound a backfill's ranges (`cli/backfill.rs`) and a split
/// dispatch's parts (`ingest/split.rs`) are cut by.
pub const MAX_MERGES_PER_RANGE: usize = 25;

/// The most commits one range job brings in, where the forge counts them
/// ([`FirstParent::entered`]); shared like [`MAX_MERGES_PER_RANGE`].
pub const MAX_COMMITS_PER_RANGE: u64 = 200;

/// Where a first-parent history starts (it ends at a commit the caller names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryStart {
    /// The newest `n` first-parent commits.
    Last(usize),
    /// Every first-parent commit after this one (which must be on the chain).
    After(Sha),
    /// Every first-parent commit committed at or after this unix time
    /// (seconds); the walk stops at the first older one.
    Since(i64),
}

/// One commit of the first-parent chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstParent {
    pub sha: Sha,
    /// Its first parent; `None` for a root commit.
    pub parent: Option<Sha>,
    /// Committer time, unix seconds.
    pub time: i64,
    /// The commits it brought to the branch (itself and, for a merge, those
    /// reachable only through its other parents); `None` when unknown.
    pub entered: Option<u64>,
}
