//! Maintainer steering: cancel a job, retry a finished one. The one place
//! that decides which steering a job's state allows; the CLI and the HTTP API
//! both call [`Queue::steer`].
//!
//! Invariant: the allowed source states are checked and changed inside one
//! write of the queue's writer task (holding the write lock), by an UPDATE
//! guarded by the state that was read, so a refused request (unknown id, wrong
//! state) writes nothing, not even an event. Cancelling a running job clears
//! its lease token, so the worker's next heartbeat or completion gets
//! `LeaseLost`.

use super::model::{Job, JobState};
use super::rows::{JobRow, insert_event, job_columns};
use super::{Counters, Queue, QueueError};
use crate::db::{Conn, on_conn};

/// What a maintainer asks of one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steering {
    /// Stop a queued or running job; it ends `cancelled`.
    Cancel,
    /// Queue a failed, cancelled or rejected job again, claimable at once,
    /// with its attempts reset.
    Retry,
}

/// The UPDATE a cancel makes, guarded by the state read before it.
const CANCEL_SQL: &str = concat!(
    "UPDATE jobs SET state = 'cancelled', finished_at = $1, updated_at = $1, \
     lease_token = NULL, lease_until = NULL \
     WHERE id = $2 AND state = $3 \
     RETURNING ",
    job_columns!()
);

/// The UPDATE a retry makes, guarded by the state read before it.
const RETRY_SQL: &str = concat!(
    "UPDATE jobs SET state = 'queued', attempts = 0, run_after = $1, updated_at = $1, \
     finished_at = NULL, receipt = NULL \
     WHERE id = $2 AND state = $3 \
     RETURNING ",
    job_columns!()
);

impl Steering {
    /// The word in an `InvalidTransition` refusal.
    pub fn action(self) -> &'static str {
        match self {
            Steering::Cancel => "cancel",
            Steering::Retry => "retry",
        }
    }

    /// The daemon's one INFO line for a steering it committed on `job` (the
    /// job as the steering left it): one line per job state change. The CLI,
    /// working offline, prints the job instead.
    pub fn log_committed(self, job: &Job, actor: &str) {
        let what = match self {
            Steering::Cancel => "job cancelled",
            Steering::Retry => "job queued again by a retry",
        };
        tracing::info!(job = job.id, state = %job.state, actor, "{what}");
    }

    fn allowed_from(self, from: JobState) -> bool {
        match self {
            Steering::Cancel => from.can_cancel(),
            Steering::Retry => from.can_retry(),
        }
    }

    fn update_sql(self) -> &'static str {
        match self {
            Steering::Cancel => CANCEL_SQL,
            Steering::Retry => RETRY_SQL,
        }
    }

    /// The event recorded on the job, and its detail.
    fn event(self, from: JobState, lease_owner: Option<&str>) -> (&'static str, String) {
        match (self, from, lease_owner) {
            (Steering::Cancel, JobState::Running, Some(owner)) => {
                ("cancelled", format!("was running; lease of {owner} voided"))
            }
            (Steering::Cancel, _, _) => ("cancelled", format!("was {from}")),
            (Steering::Retry, _, _) => ("retried", format!("was {from}; attempts reset")),
        }
    }
}

impl Queue {
    /// Cancels or retries job `id` for `actor`. A state the steering does not
    /// apply to answers `InvalidTransition`, an unknown id `NotFound`.
    pub async fn steer(&self, id: i64, actor: &str, steering: Steering) -> Result<Job, QueueError> {
        let now = self.now_ms();
        let actor = actor.to_string();
        let job = self
            .write(move |mut conn: Conn<'_>| {
                Box::pin(async move { steer_in(&mut conn, id, now, actor, steering).await })
            })
            .await?;
        match steering {
            Steering::Cancel => self.counters.bump_finished(JobState::Cancelled),
            Steering::Retry => Counters::bump(&self.counters.retried),
        }
        Ok(job)
    }

    /// Cancels a queued or running job ([`Steering::Cancel`]).
    pub async fn cancel(&self, id: i64, actor: &str) -> Result<Job, QueueError> {
        self.steer(id, actor, Steering::Cancel).await
    }

    /// Queues a failed, cancelled or rejected job again ([`Steering::Retry`]).
    pub async fn retry(&self, id: i64, actor: &str) -> Result<Job, QueueError> {
        self.steer(id, actor, Steering::Retry).await
    }
}

/// The steering's read, guarded UPDATE and event, inside one write.
async fn steer_in(
    conn: &mut Conn<'_>,
    id: i64,
    now: i64,
    actor: String,
    steering: Steering,
) -> Result<Job, QueueError> {
    let (from, owner) = current_state(conn, id).await?;
    if !steering.allowed_from(from) {
        return Err(QueueError::InvalidTransition {
            id,
            from,
            action: steering.action(),
        });
    }
    let row: Option<JobRow> = on_conn!(conn, |c| {
        sqlx::query_as(steering.update_sql())
            .bind(now)
            .bind(id)
            .bind(from.as_str())
            .fetch_optional(c)
            .await?
    });
    // The job has been locked since the read (SQLite's write lock, or the
    // row lock of `FOR UPDATE`), so the guard matches.
    let Some(row) = row else {
        return Err(QueueError::NotFound { id });
    };
    let job = row.into_job()?;
    let (event, detail) = steering.event(from, owner.as_deref());
    insert_event(conn, id, now, &actor, event, Some(&detail)).await?;
    if steering == Steering::Retry {
        super::rows::notify_claimable(conn).await?;
    }
    Ok(job)
}

/// The state and lease owner of job `id`, or `NotFound`.
async fn current_state(
    conn: &mut Conn<'_>,
    id: i64,
) -> Result<(JobState, Option<String>), QueueError> {
    let row: Option<(String, Option<String>)> = on_conn!(conn, |c, dialect| {
        sqlx::query_as(dialect.pick(
            "SELECT state, lease_owner FROM jobs WHERE id = $1",
            "SELECT state, lease_owner FROM jobs WHERE id = $1 FOR UPDATE",
        ))
        .bind(id)
        .fetch_optional(c)
        .await?
    });
    let (state, owner) = row.ok_or(QueueError::NotFound { id })?;
    Ok((super::rows::parse_state(&state)?, owner))
}
