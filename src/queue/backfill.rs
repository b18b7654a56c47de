//! Backfills (`teammem backfill`): a source's earlier history as range jobs
//! of the ordinary queue, oldest first, with their progress and their
//! cancellation. The CLI plans the ranges with the forge; this file stores
//! them.
//!
//! Invariants:
//! - one backfill is one write: its row, its jobs, their identities, events
//!   and positions commit together or not at all; a range whose identity
//!   (`range:<source>:<before>..<after>`) already stands for a job is not
//!   enqueued again (a cancelled one is queued again, in its new place), so
//!   running the same backfill twice enqueues nothing the second time, and a
//!   backfill that enqueues nothing leaves no row;
//! - a backfill's ranges are claimed in order: `claim.rs` skips a range while
//!   an earlier range of its backfill is queued or running; they are never
//!   coalesced with other ranges (`enqueue.rs`), so cancelling a backfill
//!   never cancels a dispatch's range;
//! - they are ordinary jobs otherwise: one running job per wiki, the same
//!   leases, retries and cursor rule (an old range never lowers the cursor).

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::JobState;
use super::rows::{insert_event, notify_claimable};
use super::{Queue, QueueError};
use crate::db::{Conn, on_conn, on_pool};
use crate::ids::Sha;

/// The actor recorded on a backfill's jobs and events.
pub const BACKFILL_ACTOR: &str = "backfill";

/// The most ranges one backfill enqueues.
pub const MAX_BACKFILL_RANGES: usize = 2_000;

/// A backfill to store: its source and wiki, what was asked, and its ranges
/// oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewBackfill {
    pub source: String,
    pub destination: String,
    /// What was asked, shown by `--status` (e.g. `--last 500`).
    pub spec: String,
    /// Who asked (recorded on the backfill; the jobs' actor is `backfill`).
    pub actor: String,
    pub ranges: Vec<(Sha, Sha)>,
}

/// What storing a backfill did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackfillStored {
    /// `None` when every range was already taken care of (nothing stored).
    pub backfill_id: Option<i64>,
    /// New jobs, oldest range first.
    pub enqueued: Vec<i64>,
    /// Cancelled jobs of the same ranges, queued again.
    pub requeued: Vec<i64>,
    /// Ranges already queued, running or finished (not cancelled).
    pub already: usize,
}

/// One backfill and how far it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackfillStatus {
    pub id: i64,
    pub source: String,
    pub spec: String,
    pub first_sha: String,
    pub last_sha: String,
    pub actor: String,
    pub created_at: i64,
    /// Ranges it enqueued.
    pub ranges: u64,
    /// Its ranges' jobs by state (pruned jobs are not counted).
    pub states: BTreeMap<JobState, u64>,
}

impl BackfillStatus {
    /// Ranges that reconciled their history.
    pub fn done(&self) -> u64 {
        [JobState::Succeeded, JobState::NoChange, JobState::Skipped]
            .iter()
            .filter_map(|state| self.states.get(state))
            .sum()
    }

    /// Ranges still queued or running.
    pub fn in_flight(&self) -> u64 {
        [JobState::Queued, JobState::Running]
            .iter()
            .filter_map(|state| self.states.get(state))
            .sum()
    }
}

fn invalid(field: &'static str, reason: impl Into<String>) -> QueueError {
    QueueError::InvalidInput {
        field,
        reason: reason.into(),
    }
}

fn validate(new: &NewBackfill) -> Result<(), QueueError> {
    if new.ranges.is_empty() {
        return Err(invalid("ranges", "a backfill needs at least one range"));
    }
    if new.ranges.len() > MAX_BACKFILL_RANGES {
        return Err(invalid(
            "ranges",
            format!(
                "at most {MAX_BACKFILL_RANGES} ranges, got {}",
                new.ranges.len()
            ),
        ));
    }
    for (before, after) in &new.ranges {
        if before == after {
            return Err(invalid("ranges", format!("empty range {before}..{after}")));
        }
    }
    for (field, text) in [
        ("source", &new.source),
        ("destination", &new.destination),
        ("spec", &new.spec),
        ("actor", &new.actor),
    ] {
        if text.trim().is_empty() || text.len() > 200 || text.chars().any(char::is_control) {
            return Err(invalid(
                field,
                "must be 1 to 200 bytes without control characters",
            ));
        }
    }
    Ok(())
}

impl Queue {
    /// Stores a backfill: every range whose identity is new becomes a queued
    /// range job (origin `manual`, actor `backfill`), in order; a cancelled
    /// job of the same range is queued again; the others are counted as
    /// already taken care of. One write.
    pub async fn enqueue_backfill(&self, new: NewBackfill) -> Result<BackfillStored, QueueError> {
        validate(&new)?;
        let now = self.now_ms();
        let max_attempts = i64::from(self.settings.max_attempts);
        let stored = self
            .write(move |mut conn: Conn<'_>| {
                let new = new.clone();
                Box::pin(async move { store(&mut conn, &new, now, max_attempts).await })
            })
            .await?;
        let counted = stored.enqueued.len() + stored.requeued.len();
        for _ in 0..counted {
            super::Counters::bump(&self.counters.enqueued);
        }
        Ok(stored)
    }

    /// Every backfill of `source` (all sources with `None`), oldest first,
    /// with its ranges' states.
    pub async fn backfills(&self, source: Option<&str>) -> Result<Vec<BackfillStatus>, QueueError> {
        type Row = (
            i64,
            String,
            String,
            String,
            String,
            String,
            i64,
            i64,
            Option<String>,
            i64,
        );
        let rows: Vec<Row> = on_pool!(&self.pool, |pool| {
            sqlx::query_as(
                "SELECT b.id, b.source, b.spec, b.first_sha, b.last_sha, b.actor, b.created_at, \
                        b.ranges, j.state, COUNT(j.id) \
                 FROM backfills AS b \
                 LEFT JOIN backfill_ranges AS r ON r.backfill_id = b.id \
                 LEFT JOIN jobs AS j ON j.id = r.job_id \
                 GROUP BY b.id, b.source, b.spec, b.first_sha, b.last_sha, b.actor, \
                          b.created_at, b.ranges, j.state \
                 ORDER BY b.id",
            )
            .fetch_all(pool)
            .await?
        });
        let wanted = source;
        let mut out: Vec<BackfillStatus> = Vec::new();
        for (id, source, spec, first_sha, last_sha, actor, created_at, ranges, state, count) in rows
        {
            // Few rows: a backfill is one per adoption, not per push.
            if wanted.is_some_and(|wanted| !wanted.eq_ignore_ascii_case(&source)) {
                continue;
            }
            if out.last().is_none_or(|last| last.id != id) {
                out.push(BackfillStatus {
                    id,
                    source,
                    spec,
                    first_sha,
                    last_sha,
                    actor,
                    created_at,
                    ranges: u64::try_from(ranges).unwrap_or(0),
                    states: BTreeMap::new(),
                });
            }
            if let (Some(state), Some(status)) = (state, out.last_mut()) {
                let state = super::rows::parse_state(&state)?;
                *status.states.entry(state).or_default() += u64::try_from(count).unwrap_or(0);
            }
        }
        Ok(out)
    }

    /// Every range job of `source` (any origin, any state), oldest first:
    /// `(id, before, after, state)`; a backfill plans around them.
    pub async fn range_jobs(
        &self,
        source: &str,
    ) -> Result<Vec<(i64, Sha, Sha, JobState)>, QueueError> {
        let rows: Vec<(i64, String, String, String)> = on_pool!(&self.pool, |pool| {
            sqlx::query_as(
                "SELECT id, push_before, push_after, state FROM jobs \
                 WHERE source = $1 AND kind = 'range' ORDER BY id",
            )
            .bind(source)
            .fetch_all(pool)
            .await?
        });
        rows.into_iter()
            .map(|(id, before, after, state)| {
                let sha = |text: &str| {
                    Sha::parse(text).map_err(|e| {
                        QueueError::Database(sqlx::Error::Decode(
                            format!("jobs.push_before/after of job {id}: {e}").into(),
                        ))
                    })
                };
                Ok((
                    id,
                    sha(&before)?,
                    sha(&after)?,
                    super::rows::parse_state(&state)?,
                ))
            })
            .collect()
    }

    /// Cancels every queued range of `source`'s backfills for `actor`;
    /// returns the jobs cancelled. A running range finishes (it holds the
    /// wiki's one lease; cancel it by id to stop it).
    pub async fn cancel_backfills(
        &self,
        source: &str,
        actor: &str,
    ) -> Result<Vec<i64>, QueueError> {
        let now = self.now_ms();
        let (source, actor) = (source.to_string(), actor.to_string());
        let cancelled = self
            .write(move |mut conn: Conn<'_>| {
                let (source, actor) = (source.clone(), actor.clone());
                Box::pin(async move {
                    let ids: Vec<i64> = on_conn!(&mut conn, |c| {
                        sqlx::query_scalar(
                            "UPDATE jobs SET state = 'cancelled', finished_at = $1, updated_at = $1 \
                             WHERE state = 'queued' AND source = $2 \
                               AND id IN (SELECT job_id FROM backfill_ranges) \
                             RETURNING id",
                        )
                        .bind(now)
                        .bind(&source)
                        .fetch_all(c)
                        .await?
                    });
                    for id in &ids {
                        insert_event(
                            &mut conn,
                            *id,
                            now,
                            &actor,
                            "cancelled",
                            Some("was queued; its backfill was cancelled"),
                        )
                        .await?;
                    }
                    Ok(ids)
                })
            })
            .await?;
        for _ in &cancelled {
            self.counters.bump_finished(JobState::Cancelled);
        }
        Ok(cancelled)
    }
}

/// The transactional part of [`Queue::enqueue_backfill`].
async fn store(
    conn: &mut Conn<'_>,
    new: &NewBackfill,
    now: i64,
    max_attempts: i64,
) -> Result<BackfillStored, QueueError> {
    if let Conn::Postgres(c) = conn {
        // The lock ordinary enqueues of this source take: identities are
        // looked up and created without another enqueue in between.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(format!("teammem source {}", new.source))
            .execute(&mut **c)
            .await?;
    }
    let (first, last) = (&new.ranges[0].0, &new.ranges[new.ranges.len() - 1].1);
    let backfill_id: i64 = on_conn!(conn, |c| {
        sqlx::query_scalar(
            "INSERT INTO backfills (source, spec, first_sha, last_sha, ranges, actor, created_at) \
             VALUES ($1, $2, $3, $4, 0, $5, $6) RETURNING id",
        )
        .bind(&new.source)
        .bind(&new.spec)
        .bind(first.as_str())
        .bind(last.as_str())
        .bind(&new.actor)
        .bind(now)
        .fetch_one(c)
        .await?
    });
    let total = new.ranges.len();
    let mut stored = BackfillStored {
        backfill_id: None,
        enqueued: Vec::new(),
        requeued: Vec::new(),
        already: 0,
    };
    for (index, (before, after)) in new.ranges.iter().enumerate() {
        let identity = format!("range:{}:{before}..{after}", new.source);
        let position = i64::try_from(index).unwrap_or(i64::MAX);
        let existing: Option<(i64, String)> = on_conn!(conn, |c| {
            sqlx::query_as(
                "SELECT j.id, j.state FROM job_identities AS i JOIN jobs AS j ON j.id = i.job_id \
                 WHERE i.identity = $1",
            )
            .bind(&identity)
            .fetch_optional(c)
            .await?
        });
        let detail = format!(
            "range {} of {total} of backfill {backfill_id} ({})",
            index + 1,
            new.spec
        );
        let job_id = match existing {
            Some((id, state)) if state == JobState::Cancelled.as_str() => {
                on_conn!(conn, |c| {
                    sqlx::query(
                        "UPDATE jobs SET state = 'queued', attempts = 0, run_after = $1, \
                         updated_at = $1, finished_at = NULL, receipt = NULL \
                         WHERE id = $2 AND state = 'cancelled'",
                    )
                    .bind(now)
                    .bind(id)
                    .execute(c)
                    .await?
                    .rows_affected()
                });
                insert_event(
                    conn,
                    id,
                    now,
                    BACKFILL_ACTOR,
                    "retried",
                    Some(&format!("was cancelled; queued again as {detail}")),
                )
                .await?;
                stored.requeued.push(id);
                id
            }
            Some(_) => {
                stored.already += 1;
                continue;
            }
            None => {
                let id: i64 = on_conn!(conn, |c| {
                    sqlx::query_scalar(
                        "INSERT INTO jobs (source, destination, origin, kind, push_before, \
                         push_after, state, attempts, max_attempts, run_after, created_at, \
                         updated_at, actor) \
                         VALUES ($1, $2, 'manual', 'range', $3, $4, 'queued', 0, $5, $6, $6, $6, $7) \
                         RETURNING id",
                    )
                    .bind(&new.source)
                    .bind(&new.destination)
                    .bind(before.as_str())
                    .bind(after.as_str())
                    .bind(max_attempts)
                    .bind(now)
                    .bind(BACKFILL_ACTOR)
                    .fetch_one(c)
                    .await?
                });
                on_conn!(conn, |c| {
                    sqlx::query(
                        "INSERT INTO job_identities (identity, job_id, created_at) VALUES ($1, $2, $3)",
                    )
                    .bind(&identity)
                    .bind(id)
                    .bind(now)
                    .execute(c)
                    .await?
            .rows_affected()
                });
                insert_event(
                    conn,
                    id,
                    now,
                    BACKFILL_ACTOR,
                    "enqueued",
                    Some(&format!("range job from manual as {identity}: {detail}")),
                )
                .await?;
                stored.enqueued.push(id);
                id
            }
        };
        on_conn!(conn, |c| {
            sqlx::query(
                "INSERT INTO backfill_ranges (job_id, backfill_id, position) VALUES ($1, $2, $3) \
                 ON CONFLICT (job_id) DO UPDATE SET backfill_id = excluded.backfill_id, \
                 position = excluded.position",
            )
            .bind(job_id)
            .bind(backfill_id)
            .bind(position)
            .execute(c)
            .await?
            .rows_affected()
        });
    }
    let ranges = stored.enqueued.len() + stored.requeued.len();
    if ranges == 0 {
        // Nothing new: the backfill leaves no trace.
        on_conn!(conn, |c| {
            sqlx::query("DELETE FROM backfills WHERE id = $1")
                .bind(backfill_id)
                .execute(c)
                .await?
                .rows_affected()
        });
        return Ok(stored);
    }
    on_conn!(conn, |c| {
        sqlx::query("UPDATE backfills SET ranges = $1 WHERE id = $2")
            .bind(i64::try_from(ranges).unwrap_or(i64::MAX))
            .bind(backfill_id)
            .execute(c)
            .await?
            .rows_affected()
    });
    notify_claimable(conn).await?;
    stored.backfill_id = Some(backfill_id);
    Ok(stored)
}
