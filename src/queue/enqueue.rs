//! Enqueue: idempotent by job identity and by delivery id, and coalescing of
//! contiguous ranges into a still-queued job.
//!
//! Invariant: each enqueue is one write of the queue's writer task (see
//! `group_commit.rs`), which holds the write lock from its first lookup to the
//! commit and runs writes one after another, so two concurrent enqueues of
//! the same identity or delivery can never both create a job; a range is only
//! merged into a job that is still `queued` (a running job's range is fixed).

use super::model::{Disposition, Enqueued, JobKind, JobState, NewJob};
use super::rows::job_columns;
use super::{Counters, Queue, QueueError};

/// The key under which a job is deduplicated:
/// - dispatched range: `range:<source>:run:<run_id>:<run_attempt>` (attempt
///   1 when absent, GitHub's first attempt);
/// - range without a run (local forge, sweep): `range:<source>:<before>..<after>`;
/// - pull request: `pr:<source>:<number>:<merge_sha>`.
pub fn identity_key(job: &NewJob) -> String {
    match &job.kind {
        JobKind::Range {
            run_id: Some(run_id),
            run_attempt,
            ..
        } => format!(
            "range:{}:run:{run_id}:{}",
            job.source,
            run_attempt.unwrap_or(1)
        ),
        JobKind::Range {
            before,
            after,
            run_id: None,
            ..
        } => format!("range:{}:{before}..{after}", job.source),
        JobKind::PullRequest { number, merge_sha } => {
            format!("pr:{}:{number}:{merge_sha}", job.source)
        }
    }
}

/// Longest delivery id accepted (a UUID is 36 characters).
const MAX_DELIVERY_ID_LEN: usize = 128;

fn invalid(field: &'static str, reason: impl Into<String>) -> QueueError {
    QueueError::InvalidInput {
        field,
        reason: reason.into(),
    }
}

fn check_sha(field: &'static str, sha: &str) -> Result<(), QueueError> {
    let well_formed =
        matches!(sha.len(), 40 | 64) && sha.bytes().all(|byte| byte.is_ascii_hexdigit());
    if !well_formed {
        return Err(invalid(
            field,
            format!("expected a full commit SHA (40 or 64 hex digits), got {sha:?}"),
        ));
    }
    if sha.bytes().all(|byte| byte == b'0') {
        return Err(invalid(field, "the all-zero SHA names no commit"));
    }
    Ok(())
}

fn check_text(field: &'static str, text: &str, max_len: usize) -> Result<(), QueueError> {
    if text.trim().is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if text.len() > max_len {
        return Err(invalid(
            field,
            format!("at most {max_len} bytes, got {}", text.len()),
        ));
    }
    if text.chars().any(char::is_control) {
        return Err(invalid(field, "must not contain control characters"));
    }
    Ok(())
}

/// Rejects a malformed job before anything is written.
fn validate(job: &NewJob, delivery_id: Option<&str>) -> Result<(), QueueError> {
    let mut halves = job.source.split('/');
    let owner_name_ok = matches!(
        (halves.next(), halves.next(), halves.next()),
        (Some(owner), Some(name), None) if !owner.is_empty() && !name.is_empty()
    ) && !job.source.chars().any(char::is_whitespace);
    if !owner_name_ok {
        return Err(invalid(
            "source",
            format!("expected owner/name, got {:?}", job.source),
        ));
    }
    check_text("source", &job.source, 200)?;
    check_text("destination", &job.destination, 200)?;
    check_text("actor", &job.actor, 200)?;
    if let Some(delivery_id) = delivery_id {
        check_text("delivery_id", delivery_id, MAX_DELIVERY_ID_LEN)?;
    }
    match &job.kind {
        JobKind::Range {
            before,
            after,
            run_id,
            run_attempt,
        } => {
            check_sha("push_before", before)?;
            check_sha("push_after", after)?;
            if before.eq_ignore_ascii_case(after) {
                return Err(invalid(
                    "push_after",
                    "equals push_before: an empty range has nothing to reconcile",
                ));
            }
            if let Some(run_id) = run_id
                && *run_id < 1
            {
                return Err(invalid("run_id", format!("must be positive, got {run_id}")));
            }
            match (run_id, run_attempt) {
                (None, Some(_)) => {
                    return Err(invalid("run_attempt", "given without run_id"));
                }
                (_, Some(attempt)) if *attempt < 1 => {
                    return Err(invalid(
                        "run_attempt",
                        format!("must be positive, got {attempt}"),
                    ));
                }
                _ => {}
            }
        }
        JobKind::PullRequest { number, merge_sha } => {
            if *number < 1 {
                return Err(invalid(
                    "pull_number",
                    format!("must be positive, got {number}"),
                ));
            }
            check_sha("merge_sha", merge_sha)?;
        }
    }
    Ok(())
}

impl Queue {
    /// Stores a verified job, or answers with the job that already stands for
    /// it:
    /// - a known `delivery_id` or job identity ([`identity_key`]) returns the
    ///   existing job as [`Disposition::Duplicate`] (a new delivery id is
    ///   remembered for it);
    /// - a range whose `before` equals the `after` of a still-queued range job
    ///   of the same source and destination extends that job
    ///   ([`Disposition::Coalesced`]); both identities and deliveries point at it;
    /// - otherwise a new `queued` job ([`Disposition::Created`]).
    pub async fn enqueue(
        &self,
        job: NewJob,
        delivery_id: Option<&str>,
    ) -> Result<Enqueued, QueueError> {
        validate(&job, delivery_id)?;
        let now = self.now_ms();
        let identity = identity_key(&job);
        let max_attempts = i64::from(self.settings.max_attempts);
        let delivery_id = delivery_id.map(str::to_string);
        // `store` refuses nothing: every check that can fail ran above, so
        // it fails only with the database, and needs no savepoint.
        let enqueued = self
            .write_undone_with_batch(move |conn| {
                Box::pin(async move {
                    store(
                        conn,
                        job,
                        delivery_id.as_deref(),
                        identity,
                        now,
                        max_attempts,
                    )
                    .await
                })
            })
            .await?;
        let counter = match enqueued.disposition {
            Disposition::Created => &self.counters.enqueued,
            Disposition::Coalesced { .. } => &self.counters.coalesced,
            Disposition::Duplicate => &self.counters.duplicates,
        };
        Counters::bump(counter);
        Ok(enqueued)
    }
}

/// The transactional part of [`Queue::enqueue`], on the writer's connection.
///
/// Two round trips for any outcome: one lookup that answers all
/// three questions (known delivery? known identity? a queued range this one
/// extends?), then one multi-statement write. The writer task runs every
/// write of the process one after another, so round trips to SQLite's thread
/// are what bounds ingest throughput.
///
/// The multi-statement queries use anonymous `?` parameters only, bound in
/// the order they appear: sqlx hands each statement the next arguments in
/// turn. (Numbered `?N` parameters look shareable across statements, but
/// sqlx fills the numbers a statement skips with the next arguments and
/// stops binding when it runs out, which silently binds NULL.)
async fn store(
    conn: &mut sqlx::SqliteConnection,
    job: NewJob,
    delivery_id: Option<&str>,
    identity: String,
    now: i64,
    max_attempts: i64,
) -> Result<Enqueued, QueueError> {
    let (before, after) = match &job.kind {
        JobKind::Range { before, after, .. } => (Some(before.as_str()), Some(after.as_str())),
        JobKind::PullRequest { .. } => (None, None),
    };
    // `push_after = NULL` matches nothing, so a pull request never extends.
    let (by_delivery, by_identity, extendable): (Option<i64>, Option<i64>, Option<i64>) =
        sqlx::query_as(
            "SELECT (SELECT job_id FROM deliveries WHERE delivery_id = ?1), \
                    (SELECT job_id FROM job_identities WHERE identity = ?2), \
                    (SELECT id FROM jobs WHERE state = 'queued' AND kind = 'range' \
                     AND source = ?3 AND destination = ?4 AND push_after = ?5 \
                     ORDER BY id LIMIT 1)",
        )
        .bind(delivery_id)
        .bind(&identity)
        .bind(&job.source)
        .bind(&job.destination)
        .bind(before)
        .fetch_one(&mut *conn)
        .await?;

    if let Some(job_id) = by_delivery {
        return duplicate(conn, job_id, None, now).await;
    }
    if let Some(job_id) = by_identity {
        return duplicate(conn, job_id, delivery_id, now).await;
    }
    if let (Some(target), Some(after)) = (extendable, after) {
        let detail = format!("range extended to ..{after} by {identity}");
        // The lookup ran under the write lock this transaction holds, so the
        // job is still queued; should the UPDATE match nothing anyway, the
        // write fails and its savepoint undoes the rows after it.
        let rows = sqlx::query(concat!(
            "UPDATE jobs SET push_after = ?, coalesced_count = coalesced_count + 1, \
             updated_at = ? WHERE id = ? AND state = 'queued' RETURNING ",
            job_columns!(),
            "; INSERT INTO job_identities (identity, job_id, created_at) VALUES (?, ?, ?)",
            "; INSERT INTO deliveries (delivery_id, job_id, received_at) \
             SELECT ?, ?, ? WHERE ? IS NOT NULL",
            "; INSERT INTO job_events (job_id, at, actor, event, detail) \
             VALUES (?, ?, ?, 'coalesced', ?)",
        ))
        // jobs
        .bind(after)
        .bind(now)
        .bind(target)
        // job_identities
        .bind(&identity)
        .bind(target)
        .bind(now)
        // deliveries
        .bind(delivery_id)
        .bind(target)
        .bind(now)
        .bind(delivery_id)
        // job_events
        .bind(target)
        .bind(now)
        .bind(&job.actor)
        .bind(&detail)
        .fetch_all(&mut *conn)
        .await?;
        let row = rows.first().ok_or(QueueError::NotFound { id: target })?;
        return Ok(Enqueued {
            disposition: Disposition::Coalesced { into: target },
            job: super::rows::job_from_row(row)?,
        });
    }

    let (run_id, run_attempt, pull_number, merge_sha) = match &job.kind {
        JobKind::Range {
            run_id,
            run_attempt,
            ..
        } => (*run_id, *run_attempt, None, None),
        JobKind::PullRequest { number, merge_sha } => {
            (None, None, Some(*number), Some(merge_sha.as_str()))
        }
    };
    let detail = format!("{} job from {} as {identity}", job.kind.name(), job.origin);
    // `last_insert_rowid()` is the new job's id only until the identity row
    // is inserted; the rows after it find the job through its identity.
    let rows = sqlx::query(concat!(
        "INSERT INTO jobs (source, destination, origin, kind, push_before, push_after, \
         run_id, run_attempt, pull_number, merge_sha, state, attempts, max_attempts, \
         run_after, created_at, updated_at, actor) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?) RETURNING ",
        job_columns!(),
        "; INSERT INTO job_identities (identity, job_id, created_at) \
         VALUES (?, last_insert_rowid(), ?)",
        "; INSERT INTO deliveries (delivery_id, job_id, received_at) \
         SELECT ?, job_id, ? FROM job_identities WHERE identity = ? AND ? IS NOT NULL",
        "; INSERT INTO job_events (job_id, at, actor, event, detail) \
         SELECT job_id, ?, ?, 'enqueued', ? FROM job_identities WHERE identity = ?",
    ))
    // jobs
    .bind(&job.source)
    .bind(&job.destination)
    .bind(job.origin.as_str())
    .bind(job.kind.name().as_str())
    .bind(before)
    .bind(after)
    .bind(run_id)
    .bind(run_attempt)
    .bind(pull_number)
    .bind(merge_sha)
    .bind(JobState::Queued.as_str())
    .bind(max_attempts)
    .bind(now)
    .bind(now)
    .bind(now)
    .bind(&job.actor)
    // job_identities
    .bind(&identity)
    .bind(now)
    // deliveries
    .bind(delivery_id)
    .bind(now)
    .bind(&identity)
    .bind(delivery_id)
    // job_events
    .bind(now)
    .bind(&job.actor)
    .bind(&detail)
    .bind(&identity)
    .fetch_all(&mut *conn)
    .await?;
    let row = rows.first().ok_or_else(|| {
        QueueError::Database(sqlx::Error::Protocol(
            "INSERT INTO jobs returned no row".into(),
        ))
    })?;
    Ok(Enqueued {
        job: super::rows::job_from_row(row)?,
        disposition: Disposition::Created,
    })
}

/// The job that already stands for a known identity or delivery; a new
/// `delivery_id` is remembered for it in the same round trip.
async fn duplicate(
    conn: &mut sqlx::SqliteConnection,
    job_id: i64,
    delivery_id: Option<&str>,
    now: i64,
) -> Result<Enqueued, QueueError> {
    let rows = sqlx::query(concat!(
        "INSERT INTO deliveries (delivery_id, job_id, received_at) \
         SELECT ?, ?, ? WHERE ? IS NOT NULL; SELECT ",
        job_columns!(),
        " FROM jobs WHERE id = ?"
    ))
    .bind(delivery_id)
    .bind(job_id)
    .bind(now)
    .bind(delivery_id)
    .bind(job_id)
    .fetch_all(&mut *conn)
    .await?;
    let row = rows.first().ok_or(QueueError::NotFound { id: job_id })?;
    Ok(Enqueued {
        job: super::rows::job_from_row(row)?,
        disposition: Disposition::Duplicate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::model::Origin;

    fn sha(digit: char) -> String {
        std::iter::repeat_n(digit, 40).collect()
    }

    fn range(run: Option<(i64, i64)>) -> NewJob {
        NewJob {
            source: "octo/app".into(),
            destination: "octo/app".into(),
            origin: Origin::Dispatch,
            kind: JobKind::Range {
                before: sha('a'),
                after: sha('b'),
                run_id: run.map(|r| r.0),
                run_attempt: run.map(|r| r.1),
            },
            actor: "dispatch".into(),
        }
    }

    #[test]
    fn identity_keys_follow_the_documented_shapes() {
        assert_eq!(
            identity_key(&range(Some((12, 2)))),
            "range:octo/app:run:12:2"
        );
        assert_eq!(
            identity_key(&range(None)),
            format!("range:octo/app:{}..{}", sha('a'), sha('b'))
        );
        let pr = NewJob {
            kind: JobKind::PullRequest {
                number: 7,
                merge_sha: sha('c'),
            },
            ..range(None)
        };
        assert_eq!(identity_key(&pr), format!("pr:octo/app:7:{}", sha('c')));
    }

    #[test]
    fn validation_names_the_field() {
        let cases: Vec<(NewJob, &str)> = vec![
            (
                NewJob {
                    source: "octo".into(),
                    ..range(None)
                },
                "source: expected owner/name",
            ),
            (
                NewJob {
                    kind: JobKind::Range {
                        before: sha('a'),
                        after: sha('a'),
                        run_id: None,
                        run_attempt: None,
                    },
                    ..range(None)
                },
                "push_after: equals push_before",
            ),
            (
                NewJob {
                    kind: JobKind::Range {
                        before: "abc".into(),
                        after: sha('b'),
                        run_id: None,
                        run_attempt: None,
                    },
                    ..range(None)
                },
                "push_before: expected a full commit SHA",
            ),
            (
                NewJob {
                    kind: JobKind::Range {
                        before: sha('0'),
                        after: sha('b'),
                        run_id: None,
                        run_attempt: None,
                    },
                    ..range(None)
                },
                "push_before: the all-zero SHA",
            ),
            (
                NewJob {
                    kind: JobKind::PullRequest {
                        number: 0,
                        merge_sha: sha('c'),
                    },
                    ..range(None)
                },
                "pull_number: must be positive",
            ),
            (
                NewJob {
                    destination: " ".into(),
                    ..range(None)
                },
                "destination: must not be empty",
            ),
        ];
        for (job, expected) in cases {
            let message = validate(&job, None).unwrap_err().to_string();
            assert!(message.starts_with(expected), "{message:?} vs {expected:?}");
            assert!(!message.ends_with('.'));
        }
        assert!(validate(&range(Some((1, 1))), Some("")).is_err());
        validate(&range(Some((1, 1))), Some("d-1")).unwrap();
    }
}
