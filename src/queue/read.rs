//! Reading jobs: one by id, or a filtered page, newest first.
//!
//! Invariant: paging is keyset paging on the job id (never OFFSET), so a page
//! boundary stays stable while jobs are added; the cursor is opaque to callers
//! and checked when it comes back.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::model::{Job, JobFilter, JobPage, MAX_PAGE_SIZE};
use super::rows::{JobRow, fetch_job, job_columns, jobs_of};
use super::{Queue, QueueError};
use crate::db::{Conn, on_pool};

const CURSOR_PREFIX: &str = "before:";

fn encode_cursor(last_id: i64) -> String {
    URL_SAFE_NO_PAD.encode(format!("{CURSOR_PREFIX}{last_id}"))
}

fn decode_cursor(cursor: &str) -> Result<i64, QueueError> {
    let bad = || QueueError::InvalidInput {
        field: "cursor",
        reason: "not a cursor this server handed out; start again without one".into(),
    };
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| bad())?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    text.strip_prefix(CURSOR_PREFIX)
        .and_then(|id| id.parse::<i64>().ok())
        .filter(|id| *id > 0)
        .ok_or_else(bad)
}

impl Queue {
    /// The job with this id, or `NotFound`.
    pub async fn get(&self, id: i64) -> Result<Job, QueueError> {
        let job = on_pool!(&self.pool, |pool| {
            let mut conn = pool.acquire().await?;
            fetch_job(&mut Conn::from(&mut *conn), id).await?
        });
        job.ok_or(QueueError::NotFound { id })
    }

    /// A page of jobs matching `filter`, newest first.
    pub async fn list(&self, filter: &JobFilter) -> Result<JobPage, QueueError> {
        if filter.limit == 0 || filter.limit > MAX_PAGE_SIZE {
            return Err(QueueError::InvalidInput {
                field: "limit",
                reason: format!(
                    "must be between 1 and {MAX_PAGE_SIZE}, got {}",
                    filter.limit
                ),
            });
        }
        let before_id = filter.cursor.as_deref().map(decode_cursor).transpose()?;
        let allowed = filter
            .allowed_repositories
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|error| QueueError::InvalidInput {
                field: "allowed_repositories",
                reason: error.to_string(),
            })?;
        // One row more than asked tells whether another page exists.
        let rows: Vec<JobRow> = on_pool!(&self.pool, |pool, dialect| {
            sqlx::query_as(dialect.pick(
                concat!(
                    "SELECT ",
                    job_columns!(),
                    " FROM jobs \
                     WHERE ($1 IS NULL OR source = $1) \
                       AND ($2 IS NULL OR source IN (SELECT value FROM json_each($2))) \
                       AND ($3 IS NULL OR state = $3) \
                       AND ($4 IS NULL OR id < $4) \
                     ORDER BY id DESC LIMIT $5"
                ),
                concat!(
                    "SELECT ",
                    job_columns!(),
                    " FROM jobs \
                     WHERE ($1::text IS NULL OR source = $1) \
                       AND ($2::text IS NULL OR source IN \
                            (SELECT json_array_elements_text($2::json))) \
                       AND ($3::text IS NULL OR state = $3) \
                       AND ($4::bigint IS NULL OR id < $4) \
                     ORDER BY id DESC LIMIT $5"
                ),
            ))
            .bind(filter.repository.as_deref())
            .bind(&allowed)
            .bind(filter.state.map(|state| state.as_str()))
            .bind(before_id)
            .bind(i64::from(filter.limit) + 1)
            .fetch_all(pool)
            .await?
        });
        let mut jobs = jobs_of(rows)?;
        let more = jobs.len() > filter.limit as usize;
        jobs.truncate(filter.limit as usize);
        let next_cursor = if more {
            jobs.last().map(|job| encode_cursor(job.id))
        } else {
            None
        };
        Ok(JobPage { jobs, next_cursor })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_and_rejects_garbage() {
        assert_eq!(decode_cursor(&encode_cursor(42)).unwrap(), 42);
        for bad in [
            "",
            "!!",
            "YmVmb3JlOg",
            "before:1",
            &URL_SAFE_NO_PAD.encode("before:-3"),
        ] {
            let message = decode_cursor(bad).unwrap_err().to_string();
            assert!(message.starts_with("cursor: "), "{message}");
        }
    }
}
