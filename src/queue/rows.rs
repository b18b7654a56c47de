//! Plumbing shared by the queue's SQL: the job column list, decoding a row
//! into a [`Job`], and writing an audit event.
//!
//! Invariant: one column list (`job_columns!`) is used by every statement that
//! returns jobs, so decoding never drifts from what the statements select.

use crate::db::{Conn, on_conn};

use super::QueueError;
use super::model::{Job, JobKindName, JobState, Origin};
use crate::ids::{PullNumber, Sha};

/// The columns of `jobs` that make a [`Job`], in [`JobRow::into_job`]'s order. A
/// macro so it can be spliced into `concat!` and keep every query a
/// `&'static str`.
macro_rules! job_columns {
    () => {
        "id, source, destination, origin, kind, push_before, push_after, run_id, run_attempt, \
         pull_number, merge_sha, state, attempts, max_attempts, run_after, created_at, \
         updated_at, started_at, finished_at, last_error, receipt, coalesced_count, actor, \
         lease_owner, lease_until"
    };
}
pub(crate) use job_columns;

fn corrupt(what: String) -> QueueError {
    QueueError::Database(sqlx::Error::Decode(what.into()))
}

pub(crate) fn parse_state(text: &str) -> Result<JobState, QueueError> {
    text.parse()
        .map_err(|_| corrupt(format!("jobs.state holds unknown value {text:?}")))
}

/// A `jobs` row as stored, decoded the same way on both backends (every
/// integer column is 64-bit there); [`JobRow::into_job`] checks it.
#[derive(sqlx::FromRow)]
pub(crate) struct JobRow {
    id: i64,
    source: String,
    destination: String,
    origin: String,
    kind: String,
    push_before: Option<String>,
    push_after: Option<String>,
    run_id: Option<i64>,
    run_attempt: Option<i64>,
    pull_number: Option<i64>,
    merge_sha: Option<String>,
    state: String,
    attempts: i64,
    max_attempts: i64,
    run_after: i64,
    created_at: i64,
    updated_at: i64,
    started_at: Option<i64>,
    finished_at: Option<i64>,
    last_error: Option<String>,
    receipt: Option<String>,
    coalesced_count: i64,
    actor: String,
    lease_owner: Option<String>,
    lease_until: Option<i64>,
}

/// A stored commit id column, checked (`None` when NULL).
fn sha_column(text: Option<String>, column: &str) -> Result<Option<Sha>, QueueError> {
    text.map(|text| Sha::parse(&text).map_err(|e| corrupt(format!("jobs.{column}: {e}"))))
        .transpose()
}

impl JobRow {
    pub(crate) fn into_job(self) -> Result<Job, QueueError> {
        let receipt = self
            .receipt
            .map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|error| corrupt(format!("jobs.receipt is not JSON: {error}")))?;
        let origin = &self.origin;
        let kind = &self.kind;
        Ok(Job {
            id: self.id,
            origin: Origin::parse(origin)
                .ok_or_else(|| corrupt(format!("jobs.origin holds unknown value {origin:?}")))?,
            kind: JobKindName::parse(kind)
                .ok_or_else(|| corrupt(format!("jobs.kind holds unknown value {kind:?}")))?,
            source: self.source,
            destination: self.destination,
            push_before: sha_column(self.push_before, "push_before")?,
            push_after: sha_column(self.push_after, "push_after")?,
            run_id: self.run_id,
            run_attempt: self.run_attempt,
            pull_number: self
                .pull_number
                .map(|n| {
                    u64::try_from(n)
                        .map_err(|e| e.to_string())
                        .and_then(PullNumber::new)
                        .map_err(|e| corrupt(format!("jobs.pull_number: {e}")))
                })
                .transpose()?,
            merge_sha: sha_column(self.merge_sha, "merge_sha")?,
            state: parse_state(&self.state)?,
            attempts: self.attempts,
            max_attempts: self.max_attempts,
            run_after: self.run_after,
            created_at: self.created_at,
            updated_at: self.updated_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            last_error: self.last_error,
            receipt,
            coalesced_count: self.coalesced_count,
            actor: self.actor,
            lease_owner: self.lease_owner,
            lease_until: self.lease_until,
        })
    }
}

/// Decodes rows selected with [`job_columns!`] into checked jobs.
pub(crate) fn jobs_of(rows: Vec<JobRow>) -> Result<Vec<Job>, QueueError> {
    rows.into_iter().map(JobRow::into_job).collect()
}

/// The job with this id, if any, read on `conn` (inside the caller's
/// transaction when it has one).
pub(crate) async fn fetch_job(conn: &mut Conn<'_>, id: i64) -> Result<Option<Job>, QueueError> {
    let row: Option<JobRow> = on_conn!(conn, |c| {
        sqlx::query_as(concat!(
            "SELECT ",
            job_columns!(),
            " FROM jobs WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(c)
        .await?
    });
    row.map(JobRow::into_job).transpose()
}

/// Announces on [`super::JOBS_CHANNEL`] that a job became claimable, sent
/// when the caller's transaction commits (PostgreSQL; on SQLite the only
/// node's workers are woken in process).
pub(crate) async fn notify_claimable(conn: &mut Conn<'_>) -> Result<(), QueueError> {
    if let Conn::Postgres(conn) = conn {
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(super::JOBS_CHANNEL)
            .execute(&mut **conn)
            .await?;
    }
    Ok(())
}

/// Appends one audit event. Callers run it in the transaction of the change
/// it records, so the trail and the state never disagree.
pub(crate) async fn insert_event(
    conn: &mut Conn<'_>,
    job_id: i64,
    at: i64,
    actor: &str,
    event: &str,
    detail: Option<&str>,
) -> Result<(), QueueError> {
    on_conn!(conn, |c| {
        sqlx::query(
            "INSERT INTO job_events (job_id, at, actor, event, detail) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(job_id)
        .bind(at)
        .bind(actor)
        .bind(event)
        .bind(detail)
        .execute(c)
        .await?;
    });
    Ok(())
}
