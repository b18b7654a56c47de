//! Source cursors: the last reconciled commit per source, read by the
//! scheduler's sweep to find pushes whose dispatch was lost.
//!
//! Invariant: a cursor moves when a range job of its source finishes having
//! reconciled its range (`succeeded`, `no_change`, `skipped`), in the same
//! transaction as that completion (see `lease.rs`), or when an operator or
//! the sweep sets it explicitly.

use super::model::SourceCursor;
use super::{Queue, QueueError};

/// Writes the cursor of `source` (creating it on first use).
pub(crate) async fn store_cursor(
    conn: &mut sqlx::SqliteConnection,
    source: &str,
    sha: &str,
    job_id: Option<i64>,
    now: i64,
) -> Result<(), QueueError> {
    sqlx::query(
        "INSERT INTO source_cursors (source, sha, job_id, updated_at) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (source) DO UPDATE SET sha = excluded.sha, job_id = excluded.job_id, \
         updated_at = excluded.updated_at",
    )
    .bind(source)
    .bind(sha)
    .bind(job_id)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

impl Queue {
    /// The cursor of `source`, `None` before its first reconciled range.
    pub async fn cursor(&self, source: &str) -> Result<Option<SourceCursor>, QueueError> {
        let row: Option<(String, String, Option<i64>, i64)> = sqlx::query_as(
            "SELECT source, sha, job_id, updated_at FROM source_cursors WHERE source = ?1",
        )
        .bind(source)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(source, sha, job_id, updated_at)| SourceCursor {
            source,
            sha,
            job_id,
            updated_at,
        }))
    }

    /// Sets the cursor of `source` to `sha` by hand (bootstrap of a new
    /// source, or the sweep after checking ancestry).
    pub async fn advance_cursor(&self, source: &str, sha: &str) -> Result<(), QueueError> {
        let now = self.now_ms();
        let (source, sha) = (source.to_string(), sha.to_string());
        self.write(move |conn| {
            Box::pin(async move { store_cursor(conn, &source, &sha, None, now).await })
        })
        .await
    }
}
