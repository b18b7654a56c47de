//! The rescuer: running jobs whose lease expired (their worker crashed, hung
//! or lost the database) go back to the queue.
//!
//! Invariant: the expired attempt counts, so a job that kills its worker every
//! time ends `failed` after `max_attempts` instead of looping forever; each
//! requeue is guarded by the expired job's own lease token, so a heartbeat
//! that lands first wins and the job is left alone.

use super::clock::duration_ms;
use super::model::JobState;
use super::retry_policy::backoff;
use super::rows::insert_event;
use super::{Queue, QueueError};
use crate::db::{Conn, on_conn};

/// Actor recorded on the events the rescuer writes.
pub const RESCUER: &str = "rescuer";

impl Queue {
    /// Requeues (after [`backoff`]) or fails every running job whose lease
    /// expired; returns how many jobs it moved. Each moved job gets the one
    /// WARN line of its state change, once the move is committed.
    pub async fn rescue_expired(&self) -> Result<u64, QueueError> {
        let now = self.now_ms();
        // Drawn here: the write runs on the writer task and must not hold
        // the thread-local generator across an await.
        let jitter_seed: u64 = rand::random();
        let rescued = self
            .write(move |mut conn: Conn<'_>| {
                Box::pin(async move {
                    let mut jitter =
                        <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(jitter_seed);
                    let expired: Vec<(i64, String, i64, i64, Option<String>)> = on_conn!(&mut conn, |c| {
sqlx::query_as(
                        "SELECT id, lease_token, attempts, max_attempts, lease_owner FROM jobs \
                         WHERE state = 'running' AND lease_until <= $1 ORDER BY id",
                    )
                    .bind(now)
                    .fetch_all(c)
                    .await?
});
                    let mut rescued = Vec::new();
                    for (id, token, attempts, max_attempts, owner) in expired {
                        let owner = owner.unwrap_or_else(|| "unknown worker".into());
                        let exhausted = attempts >= max_attempts;
                        let (state, run_after, finished_at, detail) = if exhausted {
                            let detail = format!(
                                "lease of {owner} expired on attempt {attempts} of {max_attempts}; no attempts left"
                            );
                            (JobState::Failed, now, Some(now), detail)
                        } else {
                            let delay =
                                backoff(u32::try_from(attempts).unwrap_or(u32::MAX), &mut jitter);
                            let detail = format!(
                                "lease of {owner} expired on attempt {attempts} of {max_attempts}; retry in {} s",
                                delay.as_secs()
                            );
                            (
                                JobState::Queued,
                                now.saturating_add(duration_ms(delay)),
                                None,
                                detail,
                            )
                        };
                        let updated = on_conn!(&mut conn, |c| {
sqlx::query(
                            "UPDATE jobs SET state = $1, run_after = $2, finished_at = $3, \
                             last_error = $4, updated_at = $5, lease_token = NULL, lease_until = NULL \
                             WHERE id = $6 AND state = 'running' AND lease_token = $7",
                        )
                        .bind(state.as_str())
                        .bind(run_after)
                        .bind(finished_at)
                        .bind("lease expired: the worker stopped heartbeating")
                        .bind(now)
                        .bind(id)
                        .bind(&token)
                        .execute(c)
                        .await?
                        .rows_affected()
});
                        if updated != 1 {
                            continue;
                        }
                        let event = if exhausted { "failed" } else { "lease_expired" };
                        insert_event(&mut conn, id, now, RESCUER, event, Some(&detail)).await?;
                        rescued.push((id, state, detail));
                    }
                    Ok(rescued)
                })
            })
            .await?;
        for (job, state, detail) in &rescued {
            tracing::warn!(job, %state, "{detail}");
        }
        let moved = rescued.len() as u64;
        let failed = rescued
            .iter()
            .filter(|(_, state, _)| *state == JobState::Failed)
            .count() as u64;
        self.counters
            .rescues
            .fetch_add(moved, std::sync::atomic::Ordering::Relaxed);
        self.counters
            .failed
            .fetch_add(failed, std::sync::atomic::Ordering::Relaxed);
        Ok(moved)
    }
}
