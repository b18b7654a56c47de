//! What the queue knows about every source at once, for the dashboard's
//! sources page: the cursor, the jobs in flight per wiki, the last job and
//! the last failure per source.
//!
//! Invariant: a fixed number of statements whatever the number of sources
//! (each reads an index: `jobs_state_id`, the primary key), so the page costs
//! the same with 200 sources as with 2; nothing here writes.

use std::collections::HashMap;

use super::model::{Job, SourceCursor};
use super::rows::{JobRow, job_columns};
use super::{Queue, QueueError};
use crate::db::on_pool;
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

/// A job that finished: when, how, and how long its last attempt ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    pub at: i64,
    pub state: super::model::JobState,
    /// `finished_at - started_at` of its last attempt (`None` when it never ran).
    pub ran_ms: Option<i64>,
}

impl Queue {
    /// The jobs that finished at or after `since` (unix ms), oldest first,
    /// of the sources `allowed` names (`None`: all).
    pub async fn finished_since(
        &self,
        since: i64,
        allowed: Option<&[String]>,
    ) -> Result<Vec<Finished>, QueueError> {
        let rows: Vec<(String, i64, String, Option<i64>)> = on_pool!(&self.pool, |pool| {
            sqlx::query_as(
                "SELECT source, finished_at, state, started_at FROM jobs \
                 WHERE finished_at IS NOT NULL AND finished_at >= $1 ORDER BY finished_at",
            )
            .bind(since)
            .fetch_all(pool)
            .await?
        });
        rows.into_iter()
            .filter(|(source, ..)| {
                allowed.is_none_or(|allowed| allowed.iter().any(|a| a.eq_ignore_ascii_case(source)))
            })
            .map(|(_, at, state, started)| {
                Ok(Finished {
                    at,
                    state: super::rows::parse_state(&state)?,
                    ran_ms: started.map(|started| (at - started).max(0)),
                })
            })
            .collect()
    }

    /// Every source's cursor, jobs in flight, last job and last failure.
    pub async fn overview(&self) -> Result<Overview, QueueError> {
        let (cursors, counts, last_jobs, last_failures) = on_pool!(&self.pool, |pool| {
            let mut conn = pool.acquire().await?;
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
            let last_jobs: Vec<JobRow> = sqlx::query_as(concat!(
                "SELECT ",
                job_columns!(),
                " FROM jobs WHERE id IN (SELECT MAX(id) FROM jobs GROUP BY source)"
            ))
            .fetch_all(&mut *conn)
            .await?;
            let last_failures: Vec<JobRow> = sqlx::query_as(concat!(
                "SELECT ",
                job_columns!(),
                " FROM jobs WHERE id IN (SELECT MAX(id) FROM jobs \
                 WHERE state IN ('failed', 'rejected') GROUP BY source)"
            ))
            .fetch_all(&mut *conn)
            .await?;
            (cursors, counts, last_jobs, last_failures)
        });

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
        for row in last_jobs {
            let job = row.into_job()?;
            overview.last_job.insert(job.source.to_string(), job);
        }
        for row in last_failures {
            let job = row.into_job()?;
            overview.last_failure.insert(job.source.to_string(), job);
        }
        Ok(overview)
    }
}
