//! The job-start re-check of a local source: what ingest verified still
//! holds when the job runs (`before` an ancestor of `after`, the newest
//! commit or the pull request's merge commit still on the default branch),
//! by commit-graph walks.
//!
//! Invariant: a re-check never says yes on a guess: a commit the repository
//! does not hold, or one no longer reachable from the default branch's tip,
//! rejects the job; a walk past [`WALK_LIMIT`] commits is an error, never a yes.

use std::path::Path;

use gix::ObjectId;

use super::source_repo::{commit_id, default_branch, open, unavailable};
use crate::forge::evidence::SourceError;

/// How many commits a reachability walk visits before giving up.
const WALK_LIMIT: usize = 200_000;

/// Is `ancestor` reachable from `tip` (or equal to it)?
fn reaches(repo: &gix::Repository, tip: ObjectId, ancestor: ObjectId) -> Result<bool, SourceError> {
    if tip == ancestor {
        return Ok(true);
    }
    let walk = repo
        .rev_walk([tip])
        .all()
        .map_err(|e| unavailable("walking history", e))?;
    for (n, info) in walk.enumerate() {
        let info = info.map_err(|e| unavailable("walking history", e))?;
        if info.id == ancestor {
            return Ok(true);
        }
        if n >= WALK_LIMIT {
            return Err(SourceError::Invalid(format!(
                "the history walk passed {WALK_LIMIT} commits without an answer"
            )));
        }
    }
    Ok(false)
}

/// Re-checks at job start what ingest verified: `before` is an ancestor of
/// `after` and `after` is still on the current default branch. Returns the
/// default branch's name.
pub fn recheck_range(path: &Path, before: &str, after: &str) -> Result<String, SourceError> {
    let repo = open(path)?;
    let before_id = commit_id(&repo, "push_before", before)?;
    let after_id = commit_id(&repo, "push_after", after)?;
    let (branch, tip) = default_branch(&repo)?;
    if !reaches(&repo, after_id, before_id)? {
        return Err(SourceError::Rejected(format!(
            "push_before {before} is no longer an ancestor of push_after {after}"
        )));
    }
    if !reaches(&repo, tip, after_id)? {
        return Err(SourceError::Rejected(format!(
            "push_after {after} is no longer on {branch} (force-pushed since the dispatch was verified)"
        )));
    }
    Ok(branch)
}

/// Re-checks that a PR job's merge commit is still on the default branch.
pub fn recheck_commit(path: &Path, sha: &str) -> Result<String, SourceError> {
    let repo = open(path)?;
    let id = commit_id(&repo, "merge_sha", sha)?;
    let (branch, tip) = default_branch(&repo)?;
    if !reaches(&repo, tip, id)? {
        return Err(SourceError::Rejected(format!(
            "merge commit {sha} is no longer on {branch} (force-pushed since the request was verified)"
        )));
    }
    Ok(branch)
}
