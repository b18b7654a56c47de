//! Plumbing shared by the queue's SQL: the job column list, the `jobs` row
//! ([`JobRow`]) and its one decoding into a [`Job`], and writing an audit
//! event.
//!
//! Invariants: one column list (`job_columns!`) is used by every statement
//! that returns jobs, so decoding never drifts from what the statements
//! select; a row becomes a [`Job`] only through [`JobRow::into_job`], which
//! builds its typed [`JobKind`] and [`RepoName`] once and refuses (naming the
//! job and the column) a row whose columns no kind has, the combinations the
//! schema's `CHECK` forbids, or whose source is not `owner/name`.

use crate::db::{Conn, on_conn};

use super::QueueError;
use super::model::{Job, JobKind, JobKindName, JobState, Origin};
use crate::ids::{PullNumber, RepoName, Sha};

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

impl JobRow {
    /// The job this row stores, checked: every column parsed, the kind built
    /// from its columns. `Err` is [`QueueError::MalformedJob`], naming the
    /// job and what is wrong.
    pub(crate) fn into_job(self) -> Result<Job, QueueError> {
        let id = self.id;
        let malformed = |reason: String| QueueError::MalformedJob { id, reason };
        let kind = self.kind().map_err(malformed)?;
        let source =
            RepoName::parse(&self.source).map_err(|e| malformed(format!("jobs.source: {e}")))?;
        let receipt = self
            .receipt
            .map(|text| serde_json::from_str(&text))
            .transpose()
            .map_err(|error| malformed(format!("jobs.receipt is not JSON: {error}")))?;
        let origin = Origin::parse(&self.origin).ok_or_else(|| {
            malformed(format!("jobs.origin holds unknown value {:?}", self.origin))
        })?;
        let state = self
            .state
            .parse()
            .map_err(|_| malformed(format!("jobs.state holds unknown value {:?}", self.state)))?;
        Ok(Job {
            id,
            source,
            destination: self.destination,
            origin,
            kind,
            state,
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

    /// The row's kind with its fields; `Err` names the column that is
    /// missing, set where the kind has no such field, or not a valid value.
    fn kind(&self) -> Result<JobKind, String> {
        let name = JobKindName::parse(&self.kind)
            .ok_or_else(|| format!("jobs.kind holds unknown value {:?}", self.kind))?;
        let sha = |text: &Option<String>, column: &str| {
            text.as_deref()
                .map(|text| Sha::parse(text).map_err(|e| format!("jobs.{column}: {e}")))
                .transpose()
        };
        let required = |value: Option<Sha>, column: &str| {
            value.ok_or_else(|| format!("a {name} job without {column}"))
        };
        let absent = |set: bool, column: &str| {
            if set {
                Err(format!("a {name} job with {column} set"))
            } else {
                Ok(())
            }
        };
        Ok(match name {
            JobKindName::Range => {
                absent(self.pull_number.is_some(), "pull_number")?;
                absent(self.merge_sha.is_some(), "merge_sha")?;
                JobKind::Range {
                    before: required(sha(&self.push_before, "push_before")?, "push_before")?,
                    after: required(sha(&self.push_after, "push_after")?, "push_after")?,
                    run_id: self.run_id,
                    run_attempt: self.run_attempt,
                }
            }
            JobKindName::PullRequest => {
                absent(self.push_before.is_some(), "push_before")?;
                absent(self.push_after.is_some(), "push_after")?;
                absent(self.run_id.is_some(), "run_id")?;
                absent(self.run_attempt.is_some(), "run_attempt")?;
                let number = self
                    .pull_number
                    .ok_or_else(|| format!("a {name} job without pull_number"))?;
                JobKind::PullRequest {
                    number: u64::try_from(number)
                        .map_err(|e| e.to_string())
                        .and_then(PullNumber::new)
                        .map_err(|e| format!("jobs.pull_number: {e}"))?,
                    merge_sha: required(sha(&self.merge_sha, "merge_sha")?, "merge_sha")?,
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn range_row() -> JobRow {
        JobRow {
            id: 7,
            source: "octo/app".into(),
            destination: "github:octo/app.wiki".into(),
            origin: "dispatch".into(),
            kind: "range".into(),
            push_before: Some("a".repeat(40)),
            push_after: Some("b".repeat(40)),
            run_id: Some(1),
            run_attempt: Some(1),
            pull_number: None,
            merge_sha: None,
            state: "queued".into(),
            attempts: 0,
            max_attempts: 8,
            run_after: 0,
            created_at: 0,
            updated_at: 0,
            started_at: None,
            finished_at: None,
            last_error: None,
            receipt: None,
            coalesced_count: 0,
            actor: "test".into(),
            lease_owner: None,
            lease_until: None,
        }
    }

    fn refusal(row: JobRow) -> String {
        match row.into_job() {
            Err(error @ QueueError::MalformedJob { id: 7, .. }) => error.to_string(),
            other => panic!("expected a malformed job 7, got {other:?}"),
        }
    }

    #[test]
    fn a_row_is_read_into_its_typed_kind() {
        let job = range_row().into_job().unwrap();
        assert_eq!(
            job.kind,
            JobKind::Range {
                before: Sha::parse(&"a".repeat(40)).unwrap(),
                after: Sha::parse(&"b".repeat(40)).unwrap(),
                run_id: Some(1),
                run_attempt: Some(1),
            }
        );
        let pull = JobRow {
            kind: "pull_request".into(),
            push_before: None,
            push_after: None,
            run_id: None,
            run_attempt: None,
            pull_number: Some(12),
            merge_sha: Some("c".repeat(40)),
            ..range_row()
        };
        assert_eq!(
            pull.into_job().unwrap().kind,
            JobKind::PullRequest {
                number: PullNumber::new(12).unwrap(),
                merge_sha: Sha::parse(&"c".repeat(40)).unwrap(),
            }
        );
    }

    #[test]
    fn columns_no_kind_has_are_refused_when_read_naming_the_job_and_column() {
        let missing = refusal(JobRow {
            push_after: None,
            ..range_row()
        });
        assert!(
            missing.contains("job 7") && missing.contains("a range job without push_after"),
            "{missing}"
        );
        let extra = refusal(JobRow {
            merge_sha: Some("c".repeat(40)),
            ..range_row()
        });
        assert!(extra.contains("a range job with merge_sha set"), "{extra}");
        let pull = refusal(JobRow {
            kind: "pull_request".into(),
            pull_number: Some(3),
            merge_sha: Some("c".repeat(40)),
            ..range_row()
        });
        assert!(
            pull.contains("a pull_request job with push_before set"),
            "{pull}"
        );
        let bad_sha = refusal(JobRow {
            push_before: Some("xyz".into()),
            ..range_row()
        });
        assert!(bad_sha.contains("jobs.push_before"), "{bad_sha}");
        let bad_source = refusal(JobRow {
            source: "octo".into(),
            ..range_row()
        });
        assert!(
            bad_source.contains("job 7")
                && bad_source.contains("jobs.source: expected owner/name, got \"octo\""),
            "{bad_source}"
        );
        let unknown = refusal(JobRow {
            kind: "sweep".into(),
            ..range_row()
        });
        assert!(
            unknown.contains("jobs.kind holds unknown value \"sweep\""),
            "{unknown}"
        );
    }
}
