//! Plumbing shared by the queue's SQL: the job column list, decoding a row
//! into a [`Job`], and writing an audit event.
//!
//! Invariant: one column list (`job_columns!`) is used by every statement that
//! returns jobs, so decoding never drifts from what the statements select.

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use super::QueueError;
use super::model::{Job, JobKindName, JobState, Origin};
use crate::ids::{PullNumber, Sha};

/// The columns of `jobs` that make a [`Job`], in [`job_from_row`]'s order. A
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

/// A stored commit id column, checked (`None` when NULL).
fn sha_column(row: &SqliteRow, column: &str) -> Result<Option<Sha>, QueueError> {
    let text: Option<String> = row.try_get(column)?;
    text.map(|text| Sha::parse(&text).map_err(|e| corrupt(format!("jobs.{column}: {e}"))))
        .transpose()
}

pub(crate) fn job_from_row(row: &SqliteRow) -> Result<Job, QueueError> {
    let origin: String = row.try_get("origin")?;
    let kind: String = row.try_get("kind")?;
    let state: String = row.try_get("state")?;
    let receipt: Option<String> = row.try_get("receipt")?;
    let receipt = receipt
        .map(|text| serde_json::from_str(&text))
        .transpose()
        .map_err(|error| corrupt(format!("jobs.receipt is not JSON: {error}")))?;
    Ok(Job {
        id: row.try_get("id")?,
        source: row.try_get("source")?,
        destination: row.try_get("destination")?,
        origin: Origin::parse(&origin)
            .ok_or_else(|| corrupt(format!("jobs.origin holds unknown value {origin:?}")))?,
        kind: JobKindName::parse(&kind)
            .ok_or_else(|| corrupt(format!("jobs.kind holds unknown value {kind:?}")))?,
        push_before: sha_column(row, "push_before")?,
        push_after: sha_column(row, "push_after")?,
        run_id: row.try_get("run_id")?,
        run_attempt: row.try_get("run_attempt")?,
        pull_number: row
            .try_get::<Option<i64>, _>("pull_number")?
            .map(|n| {
                u64::try_from(n)
                    .map_err(|e| e.to_string())
                    .and_then(PullNumber::new)
                    .map_err(|e| corrupt(format!("jobs.pull_number: {e}")))
            })
            .transpose()?,
        merge_sha: sha_column(row, "merge_sha")?,
        state: parse_state(&state)?,
        attempts: row.try_get("attempts")?,
        max_attempts: row.try_get("max_attempts")?,
        run_after: row.try_get("run_after")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        last_error: row.try_get("last_error")?,
        receipt,
        coalesced_count: row.try_get("coalesced_count")?,
        actor: row.try_get("actor")?,
        lease_owner: row.try_get("lease_owner")?,
        lease_until: row.try_get("lease_until")?,
    })
}

/// The job with this id, if any, read on `conn` (inside the caller's
/// transaction when it has one).
pub(crate) async fn fetch_job(
    conn: &mut SqliteConnection,
    id: i64,
) -> Result<Option<Job>, QueueError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        job_columns!(),
        " FROM jobs WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(job_from_row).transpose()
}

/// Appends one audit event. Callers run it in the transaction of the change
/// it records, so the trail and the state never disagree.
pub(crate) async fn insert_event(
    conn: &mut SqliteConnection,
    job_id: i64,
    at: i64,
    actor: &str,
    event: &str,
    detail: Option<&str>,
) -> Result<(), QueueError> {
    sqlx::query(
        "INSERT INTO job_events (job_id, at, actor, event, detail) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(job_id)
    .bind(at)
    .bind(actor)
    .bind(event)
    .bind(detail)
    .execute(conn)
    .await?;
    Ok(())
}
