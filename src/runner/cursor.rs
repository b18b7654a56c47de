//! The runner's half of "the reconciled commit never moves back": after a
//! range job reconciled `before..after`, whether its `after` is newer than the
//! source's cursor, asked of the job's forge (local git or GitHub's compare).
//! The queue stores the answer with the job's completion, in one statement
//! that also re-checks the cursor is still the commit judged here
//! (`queue/cursors.rs`).
//!
//! Invariant: [`CursorMove::Descends`] only when the forge said the cursor is
//! `after` or one of its ancestors, and [`CursorMove::Stays`] only when it said
//! it is not; a forge that cannot answer leaves the decision to the queue's
//! own guard ([`CursorMove::Unchecked`]), which moves the cursor only where
//! that is forward without asking (no cursor yet, or the range starts at it).
//! So a retried old range, an old backfill range or a sweep never lowers the
//! cursor; a pull-request job never reaches here (the worker asks only for
//! range jobs).

use super::Runner;
use crate::forge::Ancestry;
use crate::ids::Sha;
use crate::queue::{CursorMove, Job};

/// How `job` (a range job that reconciled its range) moves a cursor that
/// names `cursor` now.
pub(super) async fn decide(runner: &Runner, job: &Job, cursor: Option<&Sha>) -> CursorMove {
    let (Some(cursor), Some((before, after))) = (cursor, job.kind.range()) else {
        // No cursor yet: the queue sets it to this job's `after`.
        return CursorMove::Unchecked;
    };
    if after == cursor {
        return CursorMove::Stays;
    }
    if before == cursor {
        // The range was verified to descend from its start.
        return CursorMove::Descends {
            from: cursor.clone(),
        };
    }
    let Some(source) = runner.config.source(&job.source) else {
        return CursorMove::Unchecked;
    };
    match runner.forges.of(source).ancestry(cursor, after).await {
        Ok(Ancestry::Ancestor) => CursorMove::Descends {
            from: cursor.clone(),
        },
        Ok(Ancestry::NotAncestor) => {
            tracing::info!(%cursor, %after, "the job's range is not newer than the source's cursor; the cursor stays");
            CursorMove::Stays
        }
        Err(refusal) => {
            tracing::warn!(%cursor, %after, ?refusal, "cannot tell whether the job is newer than the cursor; it moves only where the queue can tell on its own");
            CursorMove::Unchecked
        }
    }
}

/// Whether `job`'s tip is the newest commit reconciled for its source or
/// newer, judged against the cursor it started with: what describes the tip
/// (an area's "What is here", Dependencies, How to work here) may follow it
/// only then. A pull-request job's tip never is (its merge commit may be
/// old); a range whose `after` the forge says is behind the cursor is not
/// (a retried old range, a backfill range); one it cannot judge is.
pub(super) async fn tip_is_newest(runner: &Runner, job: &Job, cursor: Option<&Sha>) -> bool {
    let Some((_, after)) = job.kind.range() else {
        return false;
    };
    if cursor == Some(after) {
        return true;
    }
    !matches!(decide(runner, job, cursor).await, CursorMove::Stays)
}
