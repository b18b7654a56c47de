//! Source cursors: the last reconciled commit per source, read by the
//! scheduler's sweep to find pushes whose dispatch was lost.
//!
//! Invariant: a cursor moves when a range job of its source finishes having
//! reconciled its range (`succeeded`, `no_change`, `skipped`), in the same
//! transaction as that completion (see `lease.rs`), and then only forward
//! ([`advance_from_job`]: no cursor yet, the range starts at the cursor, or
//! the runner found the job's `after` descends from the cursor that is still
//! stored); or when an operator or the sweep sets (or an operator forgets) it
//! explicitly. The sweep asks [`Queue::range_job_from`]
//! before enqueuing, so a range already queued or running from the cursor is
//! never enqueued twice.

use super::model::{Job, SourceCursor};
use super::rows::{JobRow, job_columns};
use super::{Queue, QueueError};
use crate::db::{Conn, on_conn, on_pool};
use crate::ids::Sha;

/// Writes the cursor of `source` (creating it on first use).
pub(crate) async fn store_cursor(
    conn: &mut Conn<'_>,
    source: &str,
    sha: &str,
    job_id: Option<i64>,
    now: i64,
) -> Result<(), QueueError> {
    on_conn!(conn, |c| {
        sqlx::query(
            "INSERT INTO source_cursors (source, sha, job_id, updated_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (source) DO UPDATE SET sha = excluded.sha, job_id = excluded.job_id, \
         updated_at = excluded.updated_at",
        )
        .bind(source)
        .bind(sha)
        .bind(job_id)
        .bind(now)
        .execute(c)
        .await?
        .rows_affected()
    });
    Ok(())
}

/// Moves the cursor of `source` to a reconciled range job's `after`, only
/// forward: when the source has no cursor, when the cursor is the range's
/// `before`, or when it is `descends_from` (a commit the runner found `after`
/// descends from). One statement: the check and the write cannot be split by
/// another writer. Returns whether the cursor moved.
pub(crate) async fn advance_from_job(
    conn: &mut Conn<'_>,
    source: &str,
    before: &str,
    after: &str,
    descends_from: Option<&str>,
    job_id: i64,
    now: i64,
) -> Result<bool, QueueError> {
    let moved = on_conn!(conn, |c| {
        sqlx::query(
            "INSERT INTO source_cursors (source, sha, job_id, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (source) DO UPDATE SET sha = excluded.sha, job_id = excluded.job_id, \
             updated_at = excluded.updated_at \
             WHERE source_cursors.sha <> excluded.sha \
               AND (source_cursors.sha = $5 OR source_cursors.sha = $6)",
        )
        .bind(source)
        .bind(after)
        .bind(job_id)
        .bind(now)
        .bind(before)
        .bind(descends_from)
        .execute(c)
        .await?
        .rows_affected()
    });
    Ok(moved == 1)
}

impl Queue {
    /// The cursor of `source`, `None` before its first reconciled range.
    pub async fn cursor(&self, source: &str) -> Result<Option<SourceCursor>, QueueError> {
        let row: Option<(String, String, Option<i64>, i64)> = on_pool!(&self.pool, |pool| {
            sqlx::query_as(
                "SELECT source, sha, job_id, updated_at FROM source_cursors WHERE source = $1",
            )
            .bind(source)
            .fetch_optional(pool)
            .await?
        });
        row.map(|(source, sha, job_id, updated_at)| {
            let sha = Sha::parse(&sha).map_err(|e| {
                QueueError::Database(sqlx::Error::Decode(
                    format!("source_cursors.sha of {source}: {e}").into(),
                ))
            })?;
            Ok(SourceCursor {
                source,
                sha,
                job_id,
                updated_at,
            })
        })
        .transpose()
    }

    /// Sets the cursor of `source` to `sha` by hand (bootstrap of a new
    /// source, or the sweep after checking ancestry).
    pub async fn advance_cursor(&self, source: &str, sha: &Sha) -> Result<(), QueueError> {
        let now = self.now_ms();
        let (source, sha) = (source.to_string(), sha.to_string());
        self.write(move |mut conn: Conn<'_>| {
            Box::pin(async move { store_cursor(&mut conn, &source, &sha, None, now).await })
        })
        .await
    }
    /// Forgets the cursor of `source` (an operator after a force-push): the
    /// next sweep starts tracking at the default branch's tip. Returns the
    /// commit the cursor named, `None` when there was none.
    pub async fn forget_cursor(&self, source: &str) -> Result<Option<String>, QueueError> {
        let source = source.to_string();
        self.write(move |mut conn: Conn<'_>| {
            Box::pin(async move {
                let forgotten: Option<String> = on_conn!(&mut conn, |c| {
                    sqlx::query_scalar("DELETE FROM source_cursors WHERE source = $1 RETURNING sha")
                        .bind(&source)
                        .fetch_optional(c)
                        .await?
                });
                Ok(forgotten)
            })
        })
        .await
    }

    /// The oldest queued or running range job of `source` that starts at
    /// `before` (SHA compared case-insensitively), if any. Such a job moves
    /// the cursor from `before` when it succeeds, so the range from `before`
    /// is already taken care of: the sweep enqueues nothing while it exists
    /// (a duplicate could run alongside a running job, which coalescing never
    /// touches).
    pub async fn range_job_from(
        &self,
        source: &str,
        before: &str,
    ) -> Result<Option<Job>, QueueError> {
        // Stored commit ids are lowercase (`Sha` normalises them).
        let before = before.to_ascii_lowercase();
        let row: Option<JobRow> = on_pool!(&self.pool, |pool| {
            sqlx::query_as(concat!(
                "SELECT ",
                job_columns!(),
                " FROM jobs WHERE source = $1 AND kind = 'range' \
                 AND state IN ('queued', 'running') AND push_before = $2 \
                 ORDER BY id LIMIT 1"
            ))
            .bind(source)
            .bind(&before)
            .fetch_optional(pool)
            .await?
        });
        row.map(JobRow::into_job).transpose()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::ids::Sha;
    use crate::queue::{Completion, JobKind, ManualClock, NewJob, Origin, Queue, QueueSettings};

    fn sha(n: u64) -> Sha {
        Sha::parse(&format!("{n:040x}")).unwrap()
    }

    fn range(source: &str, before: u64, after: u64) -> NewJob {
        NewJob {
            source: crate::ids::RepoName::parse(source).unwrap(),
            destination: format!("local:/wikis/{source}"),
            origin: Origin::Dispatch,
            kind: JobKind::Range {
                before: sha(before),
                after: sha(after),
                run_id: None,
                run_attempt: None,
            },
            actor: "test".into(),
        }
    }

    /// Queued and running range jobs from the cursor are found (whatever the
    /// SHA's case); finished ones, other sources, other starts and pull
    /// request jobs are not.
    #[tokio::test]
    async fn finds_only_queued_or_running_ranges_from_the_cursor() {
        let dir = tempfile::tempdir().expect("temp dir");
        let pool = crate::db::open_with(&dir.path().join("data"), 2)
            .await
            .expect("open");
        crate::db::migrate(&pool).await.expect("migrate");
        let queue = Queue::new(
            pool,
            Arc::new(ManualClock::default()),
            QueueSettings::default(),
        );
        assert_eq!(
            queue.range_job_from("octo/app", &sha(1)).await.unwrap(),
            None
        );

        let queued = queue
            .enqueue(range("octo/app", 1, 2), None)
            .await
            .unwrap()
            .job;
        let found = queue
            .range_job_from("octo/app", &sha(1).to_uppercase())
            .await;
        assert_eq!(found.unwrap().map(|job| job.id), Some(queued.id));
        assert_eq!(
            queue.range_job_from("octo/app", &sha(2)).await.unwrap(),
            None
        );
        assert_eq!(
            queue.range_job_from("octo/other", &sha(1)).await.unwrap(),
            None
        );
        let pull = NewJob {
            kind: JobKind::PullRequest {
                number: crate::ids::PullNumber::new(7).unwrap(),
                merge_sha: sha(9),
            },
            ..range("octo/app", 0, 0)
        };
        queue.enqueue(pull, None).await.unwrap();
        assert_eq!(
            queue.range_job_from("octo/app", &sha(9)).await.unwrap(),
            None
        );

        let claimed = queue
            .claim("worker")
            .await
            .unwrap()
            .expect("a job to claim");
        assert_eq!(claimed.job.id, queued.id);
        let running = queue.range_job_from("octo/app", &sha(1)).await.unwrap();
        assert_eq!(running.map(|job| job.id), Some(queued.id));

        queue
            .complete(
                &claimed.lease,
                Completion::Succeeded {
                    receipt: serde_json::json!({"status": "updated"}),
                },
            )
            .await
            .unwrap();
        assert_eq!(
            queue.range_job_from("octo/app", &sha(1)).await.unwrap(),
            None
        );
        assert_eq!(queue.cursor("octo/app").await.unwrap().unwrap().sha, sha(2));
        assert_eq!(
            queue.forget_cursor("octo/app").await.unwrap(),
            Some(sha(2).to_string())
        );
        assert_eq!(queue.cursor("octo/app").await.unwrap(), None);
        assert_eq!(queue.forget_cursor("octo/app").await.unwrap(), None);
    }
}
