//! A range larger than one job stored as several contiguous jobs
//! ([`Queue::enqueue_parts`]), the sizing rule being `ingest/split.rs`'s.
//!
//! Invariant: the parts are stored in ONE write, every part or none, after
//! the same checks as an enqueue; the whole range's delivery id and identity
//! point at its first part, so two deliveries of one range never both store
//! parts (on PostgreSQL they meet at the advisory locks `enqueue.rs` takes, in
//! its order); a part whose identity already stands for a job is not stored
//! again; parts are never coalesced, and `claim.rs` runs them in order.

use serde::Serialize;

use super::enqueue::{identity_key, invalid, validate};
use super::model::{Disposition, Job, JobKind, NewJob};
use super::{Counters, Queue, QueueError};
use crate::db::{Conn, on_conn};
use crate::ids::Sha;

/// The most jobs one range is split into ([`Queue::enqueue_parts`]).
pub const MAX_PARTS: usize = 2_000;

/// A range stored as several contiguous jobs ([`Queue::enqueue_parts`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PartsEnqueued {
    /// Each part's job, oldest part first (a part whose identity already
    /// stood for a job: that job). With [`Disposition::Duplicate`], the one
    /// job the whole range's delivery id or identity points at.
    pub jobs: Vec<Job>,
    /// How many of `jobs` this enqueue created.
    pub created: usize,
    /// `Created` (even when some parts were known), or `Duplicate` when the
    /// whole range's delivery id or identity was known.
    pub disposition: Disposition,
}

/// The identity of one part `before..after` of the range job `whole`: the
/// range's own identity when it has no run (`range:<source>:<b>..<a>`, so a
/// part that already stands for a job is not stored twice), and the run's
/// identity with the part's commits otherwise
/// (`range:<source>:run:<id>:<attempt>:<b>..<a>`, so a re-run of the
/// workflow is new jobs, as an unsplit re-run is).
pub fn part_identity(whole: &NewJob, before: &Sha, after: &Sha) -> String {
    match &whole.kind {
        JobKind::Range {
            run_id: Some(_), ..
        } => format!("{}:{before}..{after}", identity_key(whole)),
        _ => format!("range:{}:{before}..{after}", whole.source),
    }
}

/// Rejects parts that are not `job`'s range cut into contiguous, non-empty
/// ranges in order.
fn validate_parts(job: &NewJob, parts: &[(Sha, Sha)]) -> Result<(), QueueError> {
    let JobKind::Range { before, after, .. } = &job.kind else {
        return Err(invalid("kind", "only a range job is split into parts"));
    };
    if parts.len() < 2 || parts.len() > MAX_PARTS {
        return Err(invalid(
            "parts",
            format!("2 to {MAX_PARTS} parts, got {}", parts.len()),
        ));
    }
    if &parts[0].0 != before || &parts[parts.len() - 1].1 != after {
        return Err(invalid(
            "parts",
            format!("the parts must run from {before} to {after}"),
        ));
    }
    for (i, (b, a)) in parts.iter().enumerate() {
        if b == a {
            return Err(invalid(
                "parts",
                format!("part {} is empty ({b}..{a})", i + 1),
            ));
        }
        if let Some((next, _)) = parts.get(i + 1)
            && next != a
        {
            return Err(invalid(
                "parts",
                format!(
                    "part {} ends at {a} but part {} starts at {next}",
                    i + 1,
                    i + 2
                ),
            ));
        }
    }
    Ok(())
}

impl Queue {
    /// Stores the range job `job` as one job per part of `parts` (its range
    /// cut into contiguous ranges, oldest first), in ONE write: every part
    /// or none. Each part is an ordinary queued range job with `job`'s
    /// origin, run and actor, and its own identity ([`part_identity`]; a
    /// part whose identity already stands for a job is not stored again);
    /// the whole range's identity and delivery id point at the first part,
    /// so a redelivery answers with it ([`Disposition::Duplicate`]). Parts
    /// are never coalesced into another job; `claim.rs` runs them in order.
    pub async fn enqueue_parts(
        &self,
        job: NewJob,
        delivery_id: Option<&str>,
        parts: Vec<(Sha, Sha)>,
    ) -> Result<PartsEnqueued, QueueError> {
        validate(&job, delivery_id)?;
        validate_parts(&job, &parts)?;
        let now = self.now_ms();
        let max_attempts = i64::from(self.settings.max_attempts);
        let delivery_id = delivery_id.map(str::to_string);
        let stored = self
            .write(move |mut conn: Conn<'_>| {
                let (job, delivery_id, parts) = (job.clone(), delivery_id.clone(), parts.clone());
                Box::pin(async move {
                    store_parts(
                        &mut conn,
                        &job,
                        delivery_id.as_deref(),
                        &parts,
                        now,
                        max_attempts,
                    )
                    .await
                })
            })
            .await?;
        match stored.disposition {
            Disposition::Duplicate => Counters::bump(&self.counters.duplicates),
            _ => {
                for _ in 0..stored.created {
                    Counters::bump(&self.counters.enqueued);
                }
            }
        }
        Ok(stored)
    }
}

/// The transactional part of [`Queue::enqueue_parts`].
async fn store_parts(
    conn: &mut Conn<'_>,
    job: &NewJob,
    delivery_id: Option<&str>,
    parts: &[(Sha, Sha)],
    now: i64,
    max_attempts: i64,
) -> Result<PartsEnqueued, QueueError> {
    if let Conn::Postgres(c) = conn {
        // The locks `store_postgres` takes, in its order.
        const LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";
        if let Some(delivery_id) = delivery_id {
            sqlx::query(LOCK)
                .bind(format!("teammem delivery {delivery_id}"))
                .execute(&mut **c)
                .await?;
        }
        sqlx::query(LOCK)
            .bind(format!("teammem source {}", job.source))
            .execute(&mut **c)
            .await?;
    }
    let identity = identity_key(job);
    let (by_delivery, by_identity): (Option<i64>, Option<i64>) = on_conn!(conn, |c| {
        sqlx::query_as(
            "SELECT (SELECT job_id FROM deliveries WHERE delivery_id = $1), \
                    (SELECT job_id FROM job_identities WHERE identity = $2)",
        )
        .bind(delivery_id)
        .bind(&identity)
        .fetch_one(c)
        .await?
    });
    if let Some(existing) = by_delivery.or(by_identity) {
        if by_delivery.is_none() {
            insert_delivery(conn, delivery_id, existing, now).await?;
        }
        let job = super::rows::fetch_job(conn, existing)
            .await?
            .ok_or_else(|| {
                QueueError::Database(sqlx::Error::Protocol(format!(
                    "the enqueue lost job {existing} inside its own transaction"
                )))
            })?;
        return Ok(PartsEnqueued {
            jobs: vec![job],
            created: 0,
            disposition: Disposition::Duplicate,
        });
    }
    let columns = job.kind.columns();
    let (run_id, run_attempt) = (columns.run_id, columns.run_attempt);
    let total = parts.len();
    let mut ids = Vec::with_capacity(total);
    let mut created = 0;
    for (index, (before, after)) in parts.iter().enumerate() {
        let part = part_identity(job, before, after);
        let known: Option<i64> = on_conn!(conn, |c| {
            sqlx::query_scalar("SELECT job_id FROM job_identities WHERE identity = $1")
                .bind(&part)
                .fetch_optional(c)
                .await?
        });
        if let Some(known) = known {
            ids.push(known);
            continue;
        }
        let id: i64 = on_conn!(conn, |c| {
            sqlx::query_scalar(
                "INSERT INTO jobs (source, destination, origin, kind, push_before, push_after, \
                 run_id, run_attempt, state, attempts, max_attempts, run_after, created_at, \
                 updated_at, actor) \
                 VALUES ($1, $2, $3, 'range', $4, $5, $6, $7, 'queued', 0, $8, $9, $9, $9, $10) \
                 RETURNING id",
            )
            .bind(job.source.as_str())
            .bind(&job.destination)
            .bind(job.origin.as_str())
            .bind(before.as_str())
            .bind(after.as_str())
            .bind(run_id)
            .bind(run_attempt)
            .bind(max_attempts)
            .bind(now)
            .bind(&job.actor)
            .fetch_one(c)
            .await?
        });
        insert_identity(conn, &part, id, now).await?;
        let detail = format!(
            "range job from {} as {part}: part {} of {total} of {identity}, split so that no job exceeds its bound",
            job.origin,
            index + 1
        );
        super::rows::insert_event(conn, id, now, &job.actor, "enqueued", Some(&detail)).await?;
        ids.push(id);
        created += 1;
    }
    insert_identity(conn, &identity, ids[0], now).await?;
    insert_delivery(conn, delivery_id, ids[0], now).await?;
    super::rows::notify_claimable(conn).await?;
    let mut jobs = Vec::with_capacity(ids.len());
    for id in ids {
        jobs.push(super::rows::fetch_job(conn, id).await?.ok_or_else(|| {
            QueueError::Database(sqlx::Error::Protocol(format!(
                "the enqueue lost job {id} inside its own transaction"
            )))
        })?);
    }
    Ok(PartsEnqueued {
        jobs,
        created,
        disposition: Disposition::Created,
    })
}

async fn insert_identity(
    conn: &mut Conn<'_>,
    identity: &str,
    job_id: i64,
    now: i64,
) -> Result<(), QueueError> {
    on_conn!(conn, |c| {
        sqlx::query("INSERT INTO job_identities (identity, job_id, created_at) VALUES ($1, $2, $3)")
            .bind(identity)
            .bind(job_id)
            .bind(now)
            .execute(c)
            .await?
            .rows_affected()
    });
    Ok(())
}

async fn insert_delivery(
    conn: &mut Conn<'_>,
    delivery_id: Option<&str>,
    job_id: i64,
    now: i64,
) -> Result<(), QueueError> {
    let Some(delivery_id) = delivery_id else {
        return Ok(());
    };
    on_conn!(conn, |c| {
        sqlx::query("INSERT INTO deliveries (delivery_id, job_id, received_at) VALUES ($1, $2, $3)")
            .bind(delivery_id)
            .bind(job_id)
            .bind(now)
            .execute(c)
            .await?
            .rows_affected()
    });
    Ok(())
}
