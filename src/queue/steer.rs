//! Maintainer steering: cancel a job, retry a finished one.
//!
//! Invariant: the allowed source states are checked and changed inside one
//! write of the queue's writer task (holding the write lock), by an UPDATE guarded by the state that was
//! read, so a refused request (unknown id, wrong state) writes nothing, not
//! even an event. Cancelling a running job clears its lease token, so the
//! worker's next heartbeat or completion gets `LeaseLost`.

use super::model::{Job, JobState};
use super::rows::{insert_event, job_columns, job_from_row};
use super::{Counters, Queue, QueueError};

impl Queue {
    /// Cancels a queued or running job. A terminal job answers
    /// `InvalidTransition`, an unknown id `NotFound`.
    pub async fn cancel(&self, id: i64, actor: &str) -> Result<Job, QueueError> {
        let now = self.now_ms();
        let actor = actor.to_string();
        let job = self
            .write(move |conn| {
                Box::pin(async move {
                    let (from, owner) = current_state(&mut *conn, id).await?;
                    if !from.can_cancel() {
                        return Err(QueueError::InvalidTransition {
                            id,
                            from,
                            action: "cancel",
                        });
                    }
                    let row = sqlx::query(concat!(
                        "UPDATE jobs SET state = 'cancelled', finished_at = ?1, updated_at = ?1, \
                     lease_token = NULL, lease_until = NULL \
                     WHERE id = ?2 AND state = ?3 \
                     RETURNING ",
                        job_columns!()
                    ))
                    .bind(now)
                    .bind(id)
                    .bind(from.as_str())
                    .fetch_optional(&mut *conn)
                    .await?;
                    // The write lock has been held since the read, so the guard matches.
                    let Some(row) = row else {
                        return Err(QueueError::NotFound { id });
                    };
                    let job = job_from_row(&row)?;
                    let detail = match (from, owner) {
                        (JobState::Running, Some(owner)) => {
                            format!("was running; lease of {owner} voided")
                        }
                        _ => format!("was {from}"),
                    };
                    insert_event(&mut *conn, id, now, &actor, "cancelled", Some(&detail)).await?;
                    Ok(job)
                })
            })
            .await?;
        self.counters.bump_finished(JobState::Cancelled);
        Ok(job)
    }

    /// Queues a failed, cancelled or rejected job again, claimable at once,
    /// with its attempts reset. Any other state answers `InvalidTransition`,
    /// an unknown id `NotFound`.
    pub async fn retry(&self, id: i64, actor: &str) -> Result<Job, QueueError> {
        let now = self.now_ms();
        let actor = actor.to_string();
        let job = self
            .write(move |conn| {
                Box::pin(async move {                let (from, _) = current_state(&mut *conn, id).await?;
                if !from.can_retry() {
                    return Err(QueueError::InvalidTransition {
                        id,
                        from,
                        action: "retry",
                    });
                }
                let row = sqlx::query(concat!(
                    "UPDATE jobs SET state = 'queued', attempts = 0, run_after = ?1, updated_at = ?1, \
                     finished_at = NULL, receipt = NULL \
                     WHERE id = ?2 AND state = ?3 \
                     RETURNING ",
                    job_columns!()
                ))
                .bind(now)
                .bind(id)
                .bind(from.as_str())
                .fetch_optional(&mut *conn)
                .await?;
                let Some(row) = row else {
                    return Err(QueueError::NotFound { id });
                };
                let job = job_from_row(&row)?;
                let detail = format!("was {from}; attempts reset");
                insert_event(&mut *conn, id, now, &actor, "retried", Some(&detail)).await?;
                Ok(job)
                })
            })
            .await?;
        Counters::bump(&self.counters.retried);
        Ok(job)
    }
}

/// The state and lease owner of job `id`, or `NotFound`.
async fn current_state(
    conn: &mut sqlx::SqliteConnection,
    id: i64,
) -> Result<(JobState, Option<String>), QueueError> {
    let row: Option<(String, Option<String>)> =
        sqlx::query_as("SELECT state, lease_owner FROM jobs WHERE id = ?1")
            .bind(id)
            .fetch_optional(conn)
            .await?;
    let (state, owner) = row.ok_or(QueueError::NotFound { id })?;
    Ok((super::rows::parse_state(&state)?, owner))
}
