//! Retention: old terminal jobs leave the database together with their audit
//! trail, identities and deliveries; old delivery ids are forgotten.
//!
//! Invariant: only terminal jobs whose `finished_at` is older than
//! `settings.retention` are removed, never queued or running ones; deletion
//! goes in batches, each its own short transaction, so workers are not
//! blocked behind one long write.

use super::clock::duration_ms;
use super::{Queue, QueueError};
use crate::db::{Conn, on_conn};

/// The job ids of the JSON array bound as `$1`, as a subquery.
macro_rules! ids_in_json {
    (sqlite) => {
        "SELECT value FROM json_each($1)"
    };
    (postgres) => {
        "SELECT value::bigint FROM json_array_elements_text($1::json)"
    };
}

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
                .write(move |mut conn: Conn<'_>| {
                    Box::pin(async move {
                        // On PostgreSQL the chosen rows are locked: a retry of
                        // one of them waits for this batch, then finds it gone;
                        // one a retry already holds is left for the next run.
                        let ids: Vec<i64> = on_conn!(&mut conn, |c, dialect| {
                            sqlx::query_scalar(dialect.pick(
                                "SELECT id FROM jobs \
                             WHERE state NOT IN ('queued', 'running') AND finished_at <= $1 \
                             ORDER BY id LIMIT $2",
                                "SELECT id FROM jobs \
                             WHERE state NOT IN ('queued', 'running') AND finished_at <= $1 \
                             ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED",
                            ))
                            .bind(job_cutoff)
                            .bind(PRUNE_BATCH)
                            .fetch_all(c)
                            .await?
                        });
                        if ids.is_empty() {
                            return Ok((0, false));
                        }
                        let ids_json = serde_json::to_string(&ids).unwrap_or_else(|_| "[]".into());
                        for statement in [
                            concat!(
                                "DELETE FROM job_events WHERE job_id IN (",
                                ids_in_json!(sqlite),
                                ")"
                            ),
                            concat!(
                                "DELETE FROM job_identities WHERE job_id IN (",
                                ids_in_json!(sqlite),
                                ")"
                            ),
                            concat!(
                                "DELETE FROM deliveries WHERE job_id IN (",
                                ids_in_json!(sqlite),
                                ")"
                            ),
                        ]
                        .into_iter()
                        .zip([
                            concat!(
                                "DELETE FROM job_events WHERE job_id IN (",
                                ids_in_json!(postgres),
                                ")"
                            ),
                            concat!(
                                "DELETE FROM job_identities WHERE job_id IN (",
                                ids_in_json!(postgres),
                                ")"
                            ),
                            concat!(
                                "DELETE FROM deliveries WHERE job_id IN (",
                                ids_in_json!(postgres),
                                ")"
                            ),
                        ]) {
                            on_conn!(&mut conn, |c, dialect| {
                                sqlx::query(dialect.pick(statement.0, statement.1))
                                    .bind(&ids_json)
                                    .execute(c)
                                    .await?
                                    .rows_affected()
                            });
                        }
                        // Guarded again by state: the write lock is held, but
                        // the guard documents (and enforces) that only
                        // terminal rows go.
                        let deleted = on_conn!(&mut conn, |c, dialect| {
                            sqlx::query(dialect.pick(
                                concat!(
                                    "DELETE FROM jobs WHERE id IN (",
                                    ids_in_json!(sqlite),
                                    ") \
                             AND state NOT IN ('queued', 'running')"
                                ),
                                concat!(
                                    "DELETE FROM jobs WHERE id IN (",
                                    ids_in_json!(postgres),
                                    ") \
                             AND state NOT IN ('queued', 'running')"
                                ),
                            ))
                            .bind(&ids_json)
                            .execute(c)
                            .await?
                            .rows_affected()
                        });
                        Ok((deleted, (ids.len() as i64) == PRUNE_BATCH))
                    })
                })
                .await?;
            removed += deleted;
            if !full_batch {
                break;
            }
        }
        self.write(move |mut conn: Conn<'_>| {
            Box::pin(async move {
                on_conn!(&mut conn, |c| {
                    sqlx::query("DELETE FROM deliveries WHERE received_at <= $1")
                        .bind(delivery_cutoff)
                        .execute(c)
                        .await?
                        .rows_affected()
                });
                Ok(())
            })
        })
        .await?;
        Ok(removed)
    }
}
