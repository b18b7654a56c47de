//! Retention: old terminal jobs leave the database together with their audit
//! trail, identities and deliveries; old delivery ids are forgotten.
//!
//! Invariant: only terminal jobs whose `finished_at` is older than
//! `settings.retention` are removed, never queued or running ones; deletion
//! goes in batches, each its own short transaction, so workers are not
//! blocked behind one long write.

use super::clock::duration_ms;
use super::{Queue, QueueError};

/// Jobs removed per transaction.
const PRUNE_BATCH: i64 = 500;

impl Queue {
    /// Removes terminal jobs finished more than `settings.retention` ago (with
    /// their events, identities and deliveries) and delivery ids older than
    /// `settings.delivery_retention`. Returns the number of jobs removed.
    pub async fn prune(&self) -> Result<u64, QueueError> {
        let now = self.now_ms();
        let job_cutoff = now.saturating_sub(duration_ms(self.settings.retention));
        let delivery_cutoff = now.saturating_sub(duration_ms(self.settings.delivery_retention));
        let mut removed = 0u64;
        loop {
            let (deleted, full_batch) = self
                .write(move |conn| {
                    Box::pin(async move {
                        let ids: Vec<i64> = sqlx::query_scalar(
                            "SELECT id FROM jobs \
                             WHERE state NOT IN ('queued', 'running') AND finished_at <= $1 \
                             ORDER BY id LIMIT $2",
                        )
                        .bind(job_cutoff)
                        .bind(PRUNE_BATCH)
                        .fetch_all(&mut *conn)
                        .await?;
                        if ids.is_empty() {
                            return Ok((0, false));
                        }
                        let ids_json = serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into());
                        for statement in [
                            "DELETE FROM job_events WHERE job_id IN (SELECT value FROM json_each($1))",
                            "DELETE FROM job_identities WHERE job_id IN (SELECT value FROM json_each($1))",
                            "DELETE FROM deliveries WHERE job_id IN (SELECT value FROM json_each($1))",
                        ] {
                            sqlx::query(statement)
                                .bind(&ids_json)
                                .execute(&mut *conn)
                                .await?;
                        }
                        // Guarded again by state: the write lock is held, but
                        // the guard documents (and enforces) that only
                        // terminal rows go.
                        let deleted = sqlx::query(
                            "DELETE FROM jobs WHERE id IN (SELECT value FROM json_each($1)) \
                             AND state NOT IN ('queued', 'running')",
                        )
                        .bind(&ids_json)
                        .execute(&mut *conn)
                        .await?;
                        Ok((deleted.rows_affected(), (ids.len() as i64) == PRUNE_BATCH))
                    })
                })
                .await?;
            removed += deleted;
            if !full_batch {
                break;
            }
        }
        self.write(move |conn| {
            Box::pin(async move {
                sqlx::query("DELETE FROM deliveries WHERE received_at <= $1")
                    .bind(delivery_cutoff)
                    .execute(conn)
                    .await?;
                Ok(())
            })
        })
        .await?;
        Ok(removed)
    }
}
