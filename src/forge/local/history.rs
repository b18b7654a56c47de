//! The local forge's first-parent history (see `forge/history.rs`): a walk of
//! first parents with gix from the named end, counting what each merge
//! brought in (bounded), and the merges `--last N` counts (`is_merge`).
//!
//! Invariant: the walk stops at the start it was given, at a root, or
//! refuses once it would pass `limit` commits; it never guesses a start.

use std::path::Path;

use gix::ObjectId;
use gix::bstr::ByteSlice;

use super::{commit_id, open, sha_of, walk_error};
use crate::forge::Refusal;
use crate::forge::history::{FirstParent, HistoryStart, is_merge};

/// The most commits counted for one merge's `entered` (beyond: unknown).
const MAX_ENTERED_COUNTED: u64 = 10_000;

/// The first-parent history of the repository at `path` ending at `end`,
/// oldest first.
pub fn first_parent_history(
    path: &Path,
    end: &str,
    start: &HistoryStart,
    limit: usize,
) -> Result<Vec<FirstParent>, Refusal> {
    let repo = open(path)?;
    let mut id = commit_id(&repo, "the end of the history", end)?;
    let after = match start {
        HistoryStart::After(sha) => Some(commit_id(&repo, "the start", sha)?),
        _ => None,
    };
    let mut out = Vec::new();
    let mut merges = 0;
    loop {
        if Some(id) == after {
            break;
        }
        let commit = repo.find_commit(id).map_err(walk_error)?;
        let parents: Vec<ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
        let time = commit.time().map(|t| t.seconds).unwrap_or(0);
        if let HistoryStart::Since(since) = start
            && time < *since
        {
            break;
        }
        if out.len() == limit {
            return Err(Refusal::rejected(
                "history_too_long",
                format!(
                    "the history to backfill has more than {limit} first-parent commits; name a later start"
                ),
            ));
        }
        let message = commit.message_raw_sloppy();
        let subject = message.lines().next().unwrap_or_default().to_str_lossy();
        if is_merge(parents.len(), &subject) {
            merges += 1;
        }
        let entered = match parents.as_slice() {
            [first, merged @ ..] if !merged.is_empty() => count_entered(&repo, *first, merged)?,
            _ => Some(1),
        };
        out.push(FirstParent {
            sha: sha_of(id)?,
            parent: parents.first().copied().map(sha_of).transpose()?,
            time,
            entered,
        });
        if matches!(start, HistoryStart::Last(n) if merges >= *n) {
            break;
        }
        match parents.first() {
            Some(parent) => id = *parent,
            None if after.is_some() => {
                return Err(Refusal::rejected(
                    "not_in_history",
                    format!(
                        "the start is not on the first-parent history of the default branch up to {end}; name a commit of the default branch itself"
                    ),
                ));
            }
            None => break,
        }
    }
    out.reverse();
    Ok(out)
}

/// 1 + the commits reachable from `merged` and not from `first`, up to
/// [`MAX_ENTERED_COUNTED`] (`None` beyond).
fn count_entered(
    repo: &gix::Repository,
    first: ObjectId,
    merged: &[ObjectId],
) -> Result<Option<u64>, Refusal> {
    let walk = repo
        .rev_walk(merged.iter().copied())
        .with_hidden([first])
        .all()
        .map_err(walk_error)?;
    let mut count = 1;
    for info in walk {
        info.map_err(walk_error)?;
        count += 1;
        if count > MAX_ENTERED_COUNTED {
            return Ok(None);
        }
    }
    Ok(Some(count))
}
