//! What a worker does with a claimed job: keep the lease alive, finish it,
//! fail it, or give it back on shutdown.
//!
//! Invariant: each of these is one statement guarded by `id`, `state =
//! 'running'` and the caller's `lease_token`; when it matches no row the call
//! fails with `LeaseLost` and nothing changes, so a worker whose job was
//! rescued, cancelled or handed to someone else can never overwrite it.
//! A lease that has expired but not yet been rescued is still honoured: no
//! one else holds the job, and finishing it is better than redoing it.

use super::clock::duration_ms;
use super::model::{Completion, CursorMove, Job, JobState, Lease};
use super::retry_policy::backoff;
use super::rows::{JobRow, insert_event, job_columns};
use super::{Counters, Queue, QueueError};
use crate::db::{Conn, on_conn};

impl Queue {
    /// Extends the lease to `now + settings.lease`; returns the new deadline
    /// (unix ms). `LeaseLost` means: stop working on the job.
    pub async fn heartbeat(&self, lease: &Lease) -> Result<i64, QueueError> {
        let now = self.now_ms();
        let until = now.saturating_add(self.lease_ms());
        let lease = lease.clone();
        // No event goes with it: heartbeats are not transitions and would
        // flood the audit trail.
        self.write(move |mut conn: Conn<'_>| {
            Box::pin(async move {
                let updated = on_conn!(&mut conn, |c| {
                    sqlx::query(
                        "UPDATE jobs SET lease_until = $1, updated_at = $2 \
                     WHERE id = $3 AND state = 'running' AND lease_token = $4",
                    )
                    .bind(until)
                    .bind(now)
                    .bind(lease.job_id)
                    .bind(&lease.token)
                    .execute(c)
                    .await?
                    .rows_affected()
                });
                if updated != 1 {
                    return Err(QueueError::LeaseLost { id: lease.job_id });
                }
                Ok(until)
            })
        })
        .await
    }

    /// Finishes a running job in the terminal state the completion names and
    /// returns it. A range job that ends `succeeded`, `no_change` or `skipped`
    /// has reconciled its range, so its source's cursor may advance to its
    /// `after` in the same transaction: only where the queue can tell that is
    /// forward by itself ([`CursorMove::Unchecked`]; see
    /// [`Queue::complete_moving`] for the runner's decision).
    pub async fn complete(&self, lease: &Lease, completion: Completion) -> Result<Job, QueueError> {
        self.complete_moving(lease, completion, CursorMove::Unchecked)
            .await
    }

    /// [`Queue::complete`] with the runner's decision about the cursor (see
    /// [`CursorMove`]); the cursor never moves back whatever it says.
    pub async fn complete_moving(
        &self,
        lease: &Lease,
        completion: Completion,
        cursor: CursorMove,
    ) -> Result<Job, QueueError> {
        let (state, write) = self.completion_write(lease, completion, cursor);
        let job = self.write(write).await?;
        self.counters.bump_finished(state);
        Ok(job)
    }

    /// The write [`Queue::complete`] hands to the writer, and the state it
    /// ends the job in (count it with `bump_finished` once it committed).
    pub(super) fn completion_write(
        &self,
        lease: &Lease,
        completion: Completion,
        cursor: CursorMove,
    ) -> (
        JobState,
        impl for<'c> FnOnce(Conn<'c>) -> super::group_commit::WriteFuture<'c, Job>
        + Clone
        + Send
        + 'static,
    ) {
        let now = self.now_ms();
        let state = completion.state();
        let (receipt, last_error, detail) = match completion {
            Completion::Succeeded { receipt } | Completion::NoChange { receipt } => {
                (Some(receipt.to_string()), None, None)
            }
            Completion::Skipped { reason } => (
                Some(serde_json::json!({ "skipped": reason }).to_string()),
                None,
                Some(reason),
            ),
            Completion::Rejected { reason } => (None, Some(reason.clone()), Some(reason)),
        };
        let lease = lease.clone();
        let write = super::group_commit::write_fn(move |mut conn: Conn<'_>| {
            Box::pin(async move {
                let row: Option<JobRow> = on_conn!(&mut conn, |c| {
                    sqlx::query_as(concat!(
                        "UPDATE jobs SET state = $1, receipt = $2, last_error = $3, \
                         finished_at = $4, updated_at = $4, lease_token = NULL, lease_until = NULL \
                         WHERE id = $5 AND state = 'running' AND lease_token = $6 \
                         RETURNING ",
                        job_columns!()
                    ))
                    .bind(state.as_str())
                    .bind(receipt)
                    .bind(last_error)
                    .bind(now)
                    .bind(lease.job_id)
                    .bind(&lease.token)
                    .fetch_optional(c)
                    .await?
                });
                let Some(row) = row else {
                    return Err(QueueError::LeaseLost { id: lease.job_id });
                };
                let job = row.into_job()?;
                let actor = job.lease_owner.clone().unwrap_or_else(|| "worker".into());
                insert_event(
                    &mut conn,
                    job.id,
                    now,
                    &actor,
                    state.as_str(),
                    detail.as_deref(),
                )
                .await?;
                let reconciled = matches!(
                    state,
                    JobState::Succeeded | JobState::NoChange | JobState::Skipped
                );
                if reconciled && let Some((before, after)) = job.kind.range() {
                    let descends_from = match &cursor {
                        CursorMove::Stays => None,
                        CursorMove::Unchecked => Some(None),
                        CursorMove::Descends { from } => Some(Some(from.as_str())),
                    };
                    if let Some(descends_from) = descends_from {
                        super::cursors::advance_from_job(
                            &mut conn,
                            &job.source,
                            before,
                            after,
                            descends_from,
                            job.id,
                            now,
                        )
                        .await?;
                    }
                }
                Ok(job)
            })
        });
        (state, write)
    }

    /// Records a failed attempt. A retryable failure with attempts left goes
    /// back to `queued` after [`backoff`]; otherwise the job ends `failed`.
    /// Returns the state the job is now in.
    pub async fn fail(
        &self,
        lease: &Lease,
        reason: &str,
        retryable: bool,
    ) -> Result<JobState, QueueError> {
        self.fail_with_receipt(lease, reason, retryable, None).await
    }

    /// [`Queue::fail`], also storing the receipt the attempt produced (a
    /// `partial` or `needs_review` one), so the job shows what was written
    /// even when it did not succeed. `None` keeps the stored receipt.
    pub async fn fail_with_receipt(
        &self,
        lease: &Lease,
        reason: &str,
        retryable: bool,
        receipt: Option<serde_json::Value>,
    ) -> Result<JobState, QueueError> {
        let now = self.now_ms();
        let lease = lease.clone();
        let reason = reason.to_string();
        let receipt = receipt.map(|r| r.to_string());
        // Drawn here: the writer task's closure must not hold the
        // thread-local generator across an await.
        let jitter_seed: u64 = rand::random();
        let (state, retry) = self
            .write(move |mut conn: Conn<'_>| {
                Box::pin(async move {
                    let held: Option<(i64, i64, Option<String>)> = on_conn!(&mut conn, |c| {
                        sqlx::query_as(
                            "SELECT attempts, max_attempts, lease_owner FROM jobs \
                         WHERE id = $1 AND state = 'running' AND lease_token = $2",
                        )
                        .bind(lease.job_id)
                        .bind(&lease.token)
                        .fetch_optional(c)
                        .await?
                    });
                    let Some((attempts, max_attempts, owner)) = held else {
                        return Err(QueueError::LeaseLost { id: lease.job_id });
                    };
                    let actor = owner.unwrap_or_else(|| "worker".into());
                    let retry = retryable && attempts < max_attempts;
                    let (next, event, detail) = if retry {
                        let mut jitter =
                            <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(jitter_seed);
                        let delay =
                            backoff(u32::try_from(attempts).unwrap_or(u32::MAX), &mut jitter);
                        let run_after = now.saturating_add(duration_ms(delay));
                        let detail = format!(
                            "attempt {attempts} of {max_attempts} failed: {reason}; retry in {} s",
                            delay.as_secs()
                        );
                        (
                            (JobState::Queued, run_after, None),
                            "retry_scheduled",
                            detail,
                        )
                    } else {
                        let why = if retryable {
                            "attempts exhausted"
                        } else {
                            "not retryable"
                        };
                        let detail = format!(
                            "attempt {attempts} of {max_attempts} failed ({why}): {reason}"
                        );
                        ((JobState::Failed, now, Some(now)), "failed", detail)
                    };
                    let (state, run_after, finished_at) = next;
                    let updated = on_conn!(&mut conn, |c| {
                        sqlx::query(
                            "UPDATE jobs SET state = $1, run_after = $2, finished_at = $3, \
                         last_error = $4, updated_at = $5, lease_token = NULL, lease_until = NULL, \
                         receipt = COALESCE($8, receipt) \
                         WHERE id = $6 AND state = 'running' AND lease_token = $7",
                        )
                        .bind(state.as_str())
                        .bind(run_after)
                        .bind(finished_at)
                        .bind(&reason)
                        .bind(now)
                        .bind(lease.job_id)
                        .bind(&lease.token)
                        .bind(&receipt)
                        .execute(c)
                        .await?
                        .rows_affected()
                    });
                    if updated != 1 {
                        return Err(QueueError::LeaseLost { id: lease.job_id });
                    }
                    insert_event(&mut conn, lease.job_id, now, &actor, event, Some(&detail))
                        .await?;
                    Ok((state, retry))
                })
            })
            .await?;
        if retry {
            Counters::bump(&self.counters.retries_scheduled);
        } else {
            self.counters.bump_finished(JobState::Failed);
        }
        Ok(state)
    }

    /// Gives a running job back (graceful shutdown): it is `queued` again,
    /// claimable at once, and the attempt it used does not count.
    pub async fn release(&self, lease: &Lease) -> Result<(), QueueError> {
        let now = self.now_ms();
        let lease = lease.clone();
        self.write(move |mut conn: Conn<'_>| {
            Box::pin(async move {
                let owner: Option<Option<String>> = on_conn!(&mut conn, |c| {
sqlx::query_scalar(
                    "UPDATE jobs SET state = 'queued', attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END, \
                     run_after = $1, updated_at = $1, lease_token = NULL, lease_until = NULL \
                     WHERE id = $2 AND state = 'running' AND lease_token = $3 \
                     RETURNING lease_owner",
                )
                .bind(now)
                .bind(lease.job_id)
                .bind(&lease.token)
                .fetch_optional(c)
                .await?
});
                let Some(owner) = owner else {
                    return Err(QueueError::LeaseLost { id: lease.job_id });
                };
                let actor = owner.unwrap_or_else(|| "worker".into());
                insert_event(&mut conn,
                    lease.job_id,
                    now,
                    &actor,
                    "released",
                    Some("given back on shutdown; the attempt does not count"),
                )
                .await?;
                super::rows::notify_claimable(&mut conn).await
            })
        })
        .await?;
        Counters::bump(&self.counters.releases);
        Ok(())
    }
}
