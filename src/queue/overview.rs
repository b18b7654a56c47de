//! What the queue knows about every source at once, for the dashboard's
//! sources page: the cursor, the jobs in flight per wiki, the last job and
//! the last failure per source.
//!
//! Invariant: a fixed number of statements whatever the number of sources
//! (each reads an index: `jobs_state_id`, the primary key), so the page costs
//! the same with 200 sources as with 2; nothing here writes.

use std::collections::HashMap;

use super::model::{Job, SourceCursor};
use super::rows::{job_columns, job_from_row};
use super::{Queue, QueueError};
use crate::ids::Sha;

/// The queue's side of every source's freshness.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overview {
    /// By source.
    pub cursors: HashMap<String, SourceCursor>,
    /// Queued and running jobs by wiki destination: `(running, queued)`.
    pub in_flight: HashMap<String, (u64, u64)>,
    /// The newest job of each source.
    pub last_job: HashMap<String, Job>,
    /// The newest `failed` or `rejected` job of each source.
    pub last_failure: HashMap<String, Job>,
}

impl Queue {
    /// Every source's cursor, jobs in flight, last job and last failure.
    pub async fn overview(&self) -> Result<Overview, QueueError> {
        let mut conn = self.pool.acquire().await?;
        let cursors: Vec<(String, String, Option<i64>, i64)> =
            sqlx::query_as("SELECT source, sha, job_id, updated_at FROM source_cursors")
                .fetch_all(&mut *conn)
                .await?;
        let counts: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT destination, state, COUNT(*) FROM jobs \
             WHERE state IN ('queued', 'running') GROUP BY destination, state",
        )
        .fetch_all(&mut *conn)
        .await?;
        let last_jobs = sqlx::query(concat!(
            "SELECT ",
            job_columns!(),
            " FROM jobs WHERE id IN (SELECT MAX(id) FROM jobs GROUP BY source)"
        ))
        .fetch_all(&mut *conn)
        .await?;
        let last_failures = sqlx::query(concat!(
            "SELECT ",
            job_columns!(),
            " FROM jobs WHERE id IN (SELECT MAX(id) FROM jobs \
             WHERE state IN ('failed', 'rejected') GROUP BY source)"
        ))
        .fetch_all(&mut *conn)
        .await?;

        let mut overview = Overview::default();
        for (source, sha, job_id, updated_at) in cursors {
            let sha = Sha::parse(&sha).map_err(|e| {
                QueueError::Database(sqlx::Error::Decode(
                    format!("source_cursors.sha of {source}: {e}").into(),
                ))
            })?;
            overview.cursors.insert(
                source.clone(),
                SourceCursor {
                    source,
                    sha,
                    job_id,
                    updated_at,
                },
            );
        }
        for (destination, state, count) in counts {
            let entry = overview.in_flight.entry(destination).or_default();
            let count = u64::try_from(count).unwrap_or(0);
            if state == "running" {
                entry.0 += count;
            } else {
                entry.1 += count;
            }
        }
        for row in &last_jobs {
            let job = job_from_row(row)?;
            overview.last_job.insert(job.source.clone(), job);
        }
        for row in &last_failures {
            let job = job_from_row(row)?;
            overview.last_failure.insert(job.source.clone(), job);
        }
        Ok(overview)
    }
}
