//! Claim: hands the next due job to a worker, with a fresh lease.
//!
//! Invariant: the choice and the state change are ONE `UPDATE ... WHERE id =
//! (SELECT ...) RETURNING` statement, so no job is handed out twice, and it
//! skips every destination that already has a running job, so a wiki never
//! has two writers. On PostgreSQL the choice is `FOR UPDATE SKIP LOCKED`:
//! nodes claiming at once take different jobs instead of waiting for each
//! other, and two claims for one destination that neither could see (both
//! uncommitted) meet at the partial unique index; the one that loses
//! retries. A running job whose lease has expired still blocks its
//! destination until the rescuer requeues it: its worker may still be alive
//! and writing, and handing the wiki to a second worker before then would
//! break the one-writer rule (the partial unique index
//! `jobs_one_running_per_destination` enforces the same in the database).

use super::model::{Claimed, JobState, Lease};
use super::rows::{JobRow, insert_event, job_columns};
use super::{Counters, Queue, QueueError};
use crate::db::{Conn, on_conn, on_pool};

/// A queued job `candidate` that is due (`run_after <= $1`, the claim's
/// `now`) and whose destination has nothing running; a backfill's range also
/// waits while an earlier range of its backfill is queued or running (in
/// backoff, say), so a backfill's ranges run in order (`backfill.rs`); and a
/// range waits while a queued range of its wiki that is not a backfill's
/// ends where it starts, so the parts of a split range run in order
/// (`enqueue.rs` `enqueue_parts`, `ingest/split.rs`). Verified ranges run
/// forward in history, so these waits never form a cycle.
macro_rules! claimable_condition {
    () => {
        "candidate.state = 'queued' AND candidate.run_after <= $1 \
         AND NOT EXISTS (SELECT 1 FROM jobs AS busy \
                         WHERE busy.state = 'running' \
                           AND busy.destination = candidate.destination) \
         AND NOT EXISTS (SELECT 1 FROM jobs AS earlier \
                         WHERE earlier.state = 'queued' AND earlier.kind = 'range' \
                           AND earlier.source = candidate.source \
                           AND earlier.push_after = candidate.push_before \
                           AND earlier.destination = candidate.destination \
                           AND NOT EXISTS (SELECT 1 FROM backfill_ranges AS theirs \
                                           WHERE theirs.job_id = earlier.id)) \
         AND NOT EXISTS (SELECT 1 FROM backfill_ranges AS mine \
                         JOIN backfill_ranges AS earlier \
                           ON earlier.backfill_id = mine.backfill_id \
                          AND earlier.position < mine.position \
                         JOIN jobs AS waiting ON waiting.id = earlier.job_id \
                         WHERE mine.job_id = candidate.id \
                           AND waiting.state IN ('queued', 'running'))"
    };
}

/// The claim reads candidates in claim order from the partial index of
/// queued jobs. Without this the planner (which has no statistics) picks the
/// `(state, id)` index and sorts every queued job on every claim, which made
/// claims cost O(queued jobs); `INDEXED BY` also fails loudly should the index
/// ever stop matching the query.
macro_rules! claimable_index {
    () => {
        "INDEXED BY jobs_claimable"
    };
}

/// What a claim sets on the job it takes (the same on both backends), up to
/// the subquery that picks the job.
macro_rules! claim_update {
    () => {
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, \
         lease_owner = $2, lease_token = $3, lease_until = $1 + $4, \
         started_at = $1, updated_at = $1 \
         WHERE id = (SELECT candidate.id FROM jobs AS candidate "
    };
}

/// The claim statement on SQLite: the candidate is read from the claimable
/// index under the write lock the writer task holds.
const SQLITE_CLAIM: &str = concat!(
    claim_update!(),
    claimable_index!(),
    " WHERE ",
    claimable_condition!(),
    " ORDER BY candidate.run_after, candidate.id LIMIT 1) \
       AND state = 'queued' \
     RETURNING ",
    job_columns!()
);

/// The claim statement on PostgreSQL: a candidate another transaction has
/// locked (being claimed, coalesced into or cancelled) is skipped, not waited
/// for.
const POSTGRES_CLAIM: &str = concat!(
    claim_update!(),
    "WHERE ",
    claimable_condition!(),
    " ORDER BY candidate.run_after, candidate.id LIMIT 1 FOR UPDATE SKIP LOCKED) \
       AND state = 'queued' \
     RETURNING ",
    job_columns!()
);

/// How often a PostgreSQL claim that lost a destination to another node's
/// simultaneous claim looks for another job before answering "nothing".
const CLAIM_TRIES: usize = 8;

/// A fresh, unguessable lease token.
fn new_lease_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

impl Queue {
    /// Claims the due job (`run_after <= now`, oldest `run_after` then lowest
    /// id first) of a destination with nothing running, for `worker`. The
    /// attempt counter goes up by one and the lease lasts `settings.lease`;
    /// keep it alive with `heartbeat`. `None` when nothing is claimable.
    pub async fn claim(&self, worker: &str) -> Result<Option<Claimed>, QueueError> {
        let now = self.now_ms();
        // Idle workers poll; answering "nothing to do" from a plain read
        // keeps them off SQLite's write lock, which they would otherwise
        // take on every poll and starve the writers that have work.
        let claimable: bool = on_pool!(&self.pool, |pool, dialect| {
            sqlx::query_scalar(dialect.pick(
                concat!(
                    "SELECT EXISTS (SELECT 1 FROM jobs AS candidate ",
                    claimable_index!(),
                    " WHERE ",
                    claimable_condition!(),
                    ")"
                ),
                concat!(
                    "SELECT EXISTS (SELECT 1 FROM jobs AS candidate WHERE ",
                    claimable_condition!(),
                    ")"
                ),
            ))
            .bind(now)
            .fetch_one(pool)
            .await?
        });
        if !claimable {
            return Ok(None);
        }
        self.claim_now(now, worker).await
    }

    /// Completes a running job (as [`Queue::complete`]) and claims the next
    /// claimable job for `worker` (as [`Queue::claim`], without its read-only
    /// pre-check: a worker that just finished a job expects more). The claim
    /// runs after the completion, so it may take the destination the
    /// completion freed. Each answer is its own: a refused completion does
    /// not stop the claim. Both writes are handed to the writer together, in
    /// that order, and usually share one commit (on PostgreSQL always one
    /// batch, see `PgGroupCommit::run_pair`).
    pub async fn complete_and_claim(
        &self,
        lease: &Lease,
        completion: super::Completion,
        worker: &str,
    ) -> (
        Result<super::Job, QueueError>,
        Result<Option<Claimed>, QueueError>,
    ) {
        self.complete_and_claim_moving(lease, completion, super::CursorMove::Unchecked, worker)
            .await
    }

    /// [`Queue::complete_and_claim`] with the runner's decision about the
    /// cursor (see [`Queue::complete_moving`]).
    pub async fn complete_and_claim_moving(
        &self,
        lease: &Lease,
        completion: super::Completion,
        cursor: super::CursorMove,
        worker: &str,
    ) -> (
        Result<super::Job, QueueError>,
        Result<Option<Claimed>, QueueError>,
    ) {
        let now = self.now_ms();
        let token = new_lease_token();
        let (state, completion) = self.completion_write(lease, completion, cursor);
        let (completed, claimed) = self
            .write_pair(completion, self.claim_write(now, worker, &token))
            .await;
        if completed.is_ok() {
            self.counters.bump_finished(state);
        }
        let claimed = match claimed {
            Ok(job) => Ok(job.map(|job| self.claimed(job, token))),
            // Another node's claim took that destination: try again alone.
            Err(error) if super::violates(&error, "jobs_one_running_per_destination") => {
                self.claim_now(self.now_ms(), worker).await
            }
            Err(error) => Err(error),
        };
        (completed, claimed)
    }

    /// The claim statement (with its retries when another node's claim of
    /// the same destination wins), at `now`.
    async fn claim_now(&self, now: i64, worker: &str) -> Result<Option<Claimed>, QueueError> {
        let token = new_lease_token();
        let mut tries = 0;
        let job = loop {
            tries += 1;
            match self.claim_once(now, worker, &token).await {
                Err(error)
                    if tries < CLAIM_TRIES
                        && super::violates(&error, "jobs_one_running_per_destination") =>
                {
                    continue;
                }
                Err(error) if super::violates(&error, "jobs_one_running_per_destination") => {
                    break None;
                }
                answer => break answer?,
            }
        };
        Ok(job.map(|job| self.claimed(job, token)))
    }

    /// A job the claim statement handed out under `token`, counted.
    fn claimed(&self, job: super::Job, token: String) -> Claimed {
        Counters::bump(&self.counters.claims);
        let lease = Lease {
            job_id: job.id,
            token,
        };
        Claimed { job, lease }
    }

    /// One claim statement with its event, in one write.
    async fn claim_once(
        &self,
        now: i64,
        worker: &str,
        token: &str,
    ) -> Result<Option<super::Job>, QueueError> {
        self.write(self.claim_write(now, worker, token)).await
    }

    /// The write of [`Queue::claim_once`].
    fn claim_write(
        &self,
        now: i64,
        worker: &str,
        token: &str,
    ) -> impl for<'c> FnOnce(Conn<'c>) -> super::group_commit::WriteFuture<'c, Option<super::Job>>
    + Clone
    + Send
    + 'static {
        let lease_ms = self.lease_ms();
        let worker = worker.to_string();
        let lease_token = token.to_string();
        super::group_commit::write_fn(move |mut conn: Conn<'_>| {
            Box::pin(async move {
                let row: Option<JobRow> = on_conn!(&mut conn, |c, dialect| {
                    sqlx::query_as(dialect.pick(SQLITE_CLAIM, POSTGRES_CLAIM))
                        .bind(now)
                        .bind(&worker)
                        .bind(&lease_token)
                        .bind(lease_ms)
                        .fetch_optional(c)
                        .await?
                });
                let Some(row) = row else {
                    // Someone else took the last claimable job first.
                    return Ok(None);
                };
                let job = row.into_job()?;
                debug_assert_eq!(job.state, JobState::Running);
                let detail = format!("attempt {} of {}", job.attempts, job.max_attempts);
                insert_event(&mut conn, job.id, now, &worker, "claimed", Some(&detail)).await?;
                Ok(Some(job))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    /// The plans of both claim statements walk `jobs_claimable` in claim
    /// order: no full sort of the queued jobs per claim.
    #[tokio::test]
    async fn claims_read_the_claimable_index_in_order_without_sorting() {
        let dir = tempfile::tempdir().expect("temp dir");
        let pool = crate::db::open_with(&dir.path().join("data"), 1)
            .await
            .expect("open");
        crate::db::migrate(&pool).await.expect("migrate");
        let statements = [
            concat!(
                "SELECT candidate.id FROM jobs AS candidate ",
                claimable_index!(),
                " WHERE ",
                claimable_condition!(),
                " ORDER BY candidate.run_after, candidate.id LIMIT 1"
            ),
            concat!(
                "SELECT EXISTS (SELECT 1 FROM jobs AS candidate ",
                claimable_index!(),
                " WHERE ",
                claimable_condition!(),
                ")"
            ),
        ];
        for statement in statements {
            let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "EXPLAIN QUERY PLAN {statement}"
            )))
            .bind(0_i64)
            .fetch_all(&pool)
            .await
            .expect("plan");
            let plan: Vec<String> = plan.into_iter().map(|row| row.3).collect();
            assert!(
                plan.iter()
                    .any(|step| step.contains("USING INDEX jobs_claimable")),
                "{plan:?}"
            );
            assert!(
                !plan.iter().any(|step| step.contains("TEMP B-TREE")),
                "{plan:?}"
            );
        }
    }
}
