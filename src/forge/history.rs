//! The default branch's first-parent history, newest back to a start: what a
//! backfill cuts into ranges (`teammem backfill`). Each first-parent commit is
//! where one change landed (a squash or merge of a pull request, a merge of
//! another branch, or a direct commit); its `entered` count says how many
//! commits it brought, when the forge can tell cheaply.
//!
//! Invariants: the list is oldest first and each commit's `parent` is the
//! commit before it in the list (or, for the oldest, the commit the first
//! range starts at); a start that is not in the history, or a history longer
//! than the caller's limit, is a [`super::Refusal`], never a shortened list.
//! [`HistoryStart::Last`] counts merges ([`is_merge`]), the same on both
//! forges: the list starts at the N-th newest merge, and direct commits
//! after it ride along uncounted.

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
    /// From the `n`-th newest merge ([`is_merge`]) on: the last `n` merges
    /// and the direct commits among and after them (everything, when the
    /// history has fewer merges).
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

/// Whether a first-parent commit is a merge, as `--last N` counts them: it
/// has two or more parents, or its subject names a pull request (`Merge pull
/// request #N from …`, `Title (#N)`: a squash or rebase merge). A direct
/// commit is neither. (`bench/lib.sh`'s `first_parent_pushes` replays the
/// same merges.)
pub fn is_merge(parents: usize, subject: &str) -> bool {
    parents > 1 || super::pull_subject::parse_pull_subject(subject.trim_end_matches('\r')).is_some()
}

#[cfg(test)]
mod tests {
    use super::is_merge;

    #[test]
    fn merges_are_two_parents_or_a_subject_naming_a_pull_request() {
        assert!(is_merge(2, "Merge branch 'stable'"));
        assert!(is_merge(3, "Merge branches 'a' and 'b'"));
        assert!(is_merge(1, "Merge pull request #12 from octo/search"));
        assert!(is_merge(1, "Faster search (#13)"));
        assert!(is_merge(1, "Faster search (#13)\r"));
        assert!(!is_merge(1, "Fix a typo"));
        assert!(!is_merge(1, "Refs #7"));
        assert!(!is_merge(0, "Initial commit"));
    }
}
