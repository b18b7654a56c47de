//! How a verified range enters the queue so that no job is too large for
//! one job's budget: a range of more than [`MAX_MERGES_PER_JOB`] first-parent
//! commits (or, where the forge counts them, more than
//! [`MAX_COMMITS_PER_JOB`] commits) is stored as several contiguous range
//! jobs, oldest first, cut as `teammem backfill` cuts history; a range that
//! fits may extend a queued job only when the two together still fit. The
//! dispatch route and the sweep both enqueue ranges through
//! [`enqueue_range`].
//!
//! Invariants:
//! - no range job this module stores, or extends, holds more than the bound
//!   (a single first-parent merge that brings more is a job of its own): the
//!   parts are stored in one write, every part or none, each an ordinary,
//!   atomic job (one wiki commit or none), claimed in order (`queue/claim.rs`);
//!   a queued job is extended only after the forge measured it together
//!   with the new range (`queue/enqueue.rs`, `Coalesce::IfStartsAt`);
//! - a range whose first-parent history the forge cannot list because it is
//!   not a first-parent range (its start reached only through a merged
//!   branch) or is longer than [`MAX_HISTORY`] is one job, as before (the
//!   runner's own bounds then apply); a forge that cannot answer now is an
//!   error for the caller to retry, never a guess at the size.

use crate::forge::history::{FirstParent, HistoryStart, MAX_HISTORY};
use crate::forge::{Refusal, SourceForge};
use crate::ids::Sha;
use crate::queue::{Coalesce, Enqueued, JobKind, NewJob, PartsEnqueued, Queue, QueueError};

/// The most first-parent commits (merged pull requests, mostly) in one job:
/// the bound a backfill's ranges are cut by too (defined once, in
/// `forge/history.rs`).
pub use crate::forge::history::MAX_MERGES_PER_RANGE as MAX_MERGES_PER_JOB;

/// The most commits one job brings in, where the forge counts them; shared
/// with a backfill's ranges like [`MAX_MERGES_PER_JOB`].
pub use crate::forge::history::MAX_COMMITS_PER_RANGE as MAX_COMMITS_PER_JOB;

/// What [`enqueue_range`] stored.
#[derive(Debug, Clone, PartialEq)]
pub enum RangeEnqueued {
    /// One job (new, coalesced into a queued one, or a duplicate).
    One(Box<Enqueued>),
    /// The range was larger than one job: its parts' jobs, oldest first.
    Parts(PartsEnqueued),
}

/// Why [`enqueue_range`] stored nothing.
#[derive(Debug)]
pub enum SplitError {
    /// The forge could not tell the range's size now; ask again later.
    Forge(Refusal),
    Queue(QueueError),
}

impl From<QueueError> for SplitError {
    fn from(e: QueueError) -> Self {
        SplitError::Queue(e)
    }
}

/// `history` (oldest first, as `first_parent_history` lists it) cut into
/// contiguous ranges oldest first, each of at most [`MAX_MERGES_PER_JOB`]
/// first-parent commits and (where counted) [`MAX_COMMITS_PER_JOB`] entered
/// commits; empty when the history is empty or starts at a root.
pub fn cut(history: &[FirstParent]) -> Vec<(Sha, Sha)> {
    let Some(start) = history.first().and_then(|first| first.parent.clone()) else {
        return Vec::new();
    };
    let mut ranges = Vec::new();
    let (mut from, mut count, mut entered) = (start, 0usize, 0u64);
    for (i, commit) in history.iter().enumerate() {
        let brings = commit.entered.unwrap_or(1);
        if count > 0 && (count >= MAX_MERGES_PER_JOB || entered + brings > MAX_COMMITS_PER_JOB) {
            let end = history[i - 1].sha.clone();
            ranges.push((from, end.clone()));
            (from, count, entered) = (end, 0, 0);
        }
        count += 1;
        entered += brings;
    }
    ranges.push((from, history[history.len() - 1].sha.clone()));
    ranges
}

/// Whether `history` fits one job.
fn fits(history: &[FirstParent]) -> bool {
    history.len() <= MAX_MERGES_PER_JOB
        && history.iter().map(|c| c.entered.unwrap_or(1)).sum::<u64>() <= MAX_COMMITS_PER_JOB
}

/// Enqueues the range job `job` (any other kind goes to
/// [`Queue::enqueue`] as is): as one job when it fits, as contiguous parts
/// when it does not. `commits`, when the caller knows it (ingest's
/// verification counted the range), spares the forge's history walk for a
/// range too small to need one.
pub async fn enqueue_range(
    queue: &Queue,
    forge: &SourceForge<'_>,
    job: NewJob,
    delivery_id: Option<&str>,
    commits: Option<u64>,
) -> Result<RangeEnqueued, SplitError> {
    let JobKind::Range { before, after, .. } = &job.kind else {
        return Ok(RangeEnqueued::One(Box::new(
            queue.enqueue(job, delivery_id).await?,
        )));
    };
    let small = commits.is_some_and(|n| n <= MAX_MERGES_PER_JOB as u64);
    if !small {
        match forge
            .first_parent_history(after, &HistoryStart::After(before.clone()), MAX_HISTORY)
            .await
        {
            Ok(history) => {
                let parts = cut(&history);
                if parts.len() > 1
                    && parts.first().is_some_and(|p| &p.0 == before)
                    && parts.last().is_some_and(|p| &p.1 == after)
                {
                    let stored = queue.enqueue_parts(job, delivery_id, parts).await?;
                    return Ok(RangeEnqueued::Parts(stored));
                }
            }
            Err(refusal @ Refusal::Unavailable { .. }) => return Err(SplitError::Forge(refusal)),
            Err(Refusal::Rejected { code, message }) => {
                tracing::warn!(
                    source = %job.source,
                    %before,
                    %after,
                    code,
                    "the range's first-parent history could not be listed ({message}); it is one job"
                );
                let stored = queue
                    .enqueue_bounded(job, delivery_id, Coalesce::Never)
                    .await?;
                return Ok(RangeEnqueued::One(Box::new(stored)));
            }
        }
    }
    let coalesce = coalescing(queue, forge, &job, after).await?;
    Ok(RangeEnqueued::One(Box::new(
        queue.enqueue_bounded(job, delivery_id, coalesce).await?,
    )))
}

/// May `job` (which fits one job) extend the queued job it would extend?
/// Only when the forge says the two together fit; when it cannot say now,
/// no (a job of its own costs nothing but a second commit).
async fn coalescing(
    queue: &Queue,
    forge: &SourceForge<'_>,
    job: &NewJob,
    after: &Sha,
) -> Result<Coalesce, SplitError> {
    let Some(candidate) = queue.coalesce_candidate(job).await? else {
        return Ok(Coalesce::Never);
    };
    let Some((start, _)) = candidate.kind.range() else {
        return Ok(Coalesce::Never);
    };
    // One commit past the bound is enough to know it does not fit.
    let limit = MAX_MERGES_PER_JOB + 1;
    match forge
        .first_parent_history(after, &HistoryStart::After(start.clone()), limit)
        .await
    {
        Ok(history)
            if fits(&history) && history.first().and_then(|c| c.parent.as_ref()) == Some(start) =>
        {
            Ok(Coalesce::IfStartsAt(start.clone()))
        }
        _ => Ok(Coalesce::Never),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(n: u64) -> Sha {
        Sha::parse(&format!("{n:040x}")).unwrap()
    }

    /// First-parent commits 1..=n (commit 1's parent is 0), each bringing
    /// the commits `entered` names (1 otherwise; `None` for commit 0 entries).
    fn chain(n: u64, entered: &[(u64, u64)]) -> Vec<FirstParent> {
        (1..=n)
            .map(|i| FirstParent {
                sha: sha(i),
                parent: Some(sha(i - 1)),
                time: i as i64,
                entered: Some(
                    entered
                        .iter()
                        .find(|(at, _)| *at == i)
                        .map_or(1, |(_, e)| *e),
                ),
            })
            .collect()
    }

    #[test]
    fn a_long_range_is_cut_into_contiguous_parts_of_at_most_25_merges() {
        assert_eq!(
            cut(&chain(80, &[])),
            vec![
                (sha(0), sha(25)),
                (sha(25), sha(50)),
                (sha(50), sha(75)),
                (sha(75), sha(80))
            ]
        );
        assert_eq!(cut(&chain(25, &[])), vec![(sha(0), sha(25))]);
        assert_eq!(cut(&chain(1, &[])), vec![(sha(0), sha(1))]);
        assert!(cut(&[]).is_empty());
        assert!(fits(&chain(25, &[])) && !fits(&chain(26, &[])));
    }

    #[test]
    fn a_part_brings_at_most_200_commits_and_a_bigger_merge_stands_alone() {
        assert_eq!(
            cut(&chain(6, &[(2, 150), (3, 60), (5, 500)])),
            vec![
                (sha(0), sha(2)),
                (sha(2), sha(4)),
                (sha(4), sha(5)),
                (sha(5), sha(6))
            ]
        );
        assert!(!fits(&chain(3, &[(2, 199)])));
        // Unknown counts (GitHub) count as one commit each.
        let mut unknown = chain(30, &[]);
        unknown.iter_mut().for_each(|c| c.entered = None);
        assert_eq!(cut(&unknown), vec![(sha(0), sha(25)), (sha(25), sha(30))]);
    }
}
