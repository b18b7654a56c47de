//! Reading a job's audit trail.
//!
//! Invariant: `job_events` is append-only (a trigger refuses UPDATE); rows
//! are written by the transitions themselves, in their transactions, and
//! removed only by retention together with their job.

use super::model::JobEvent;
use super::{Queue, QueueError};
use crate::db::on_pool;

/// A `job_events` row: id, job id, time, actor, event, detail.
type EventRow = (i64, i64, i64, String, String, Option<String>);

impl Queue {
    /// Every event of job `id`, oldest first. `NotFound` for an unknown id
    /// (including one already pruned).
    pub async fn events(&self, id: i64) -> Result<Vec<JobEvent>, QueueError> {
        let (exists, rows): (bool, Vec<EventRow>) = on_pool!(&self.pool, |pool| {
            let mut conn = pool.acquire().await?;
            let exists = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1)")
                .bind(id)
                .fetch_one(&mut *conn)
                .await?;
            let rows = sqlx::query_as(
                "SELECT id, job_id, at, actor, event, detail FROM job_events \
                     WHERE job_id = $1 ORDER BY id",
            )
            .bind(id)
            .fetch_all(&mut *conn)
            .await?;
            (exists, rows)
        });
        if !exists {
            return Err(QueueError::NotFound { id });
        }
        Ok(rows
            .into_iter()
            .map(|(id, job_id, at, actor, event, detail)| JobEvent {
                id,
                job_id,
                at,
                actor,
                event,
                detail,
            })
            .collect())
    }
}
