//! Enqueue: idempotent by job identity and by delivery id, and coalescing of
//! contiguous ranges into a still-queued job.
//!
//! Invariant: each enqueue is one write of the queue's writer task (see
//! `group_commit.rs`), which holds the write lock from its first lookup to the
//! commit and runs writes one after another, so two concurrent enqueues of
//! the same identity or delivery can never both create a job; a range is only
//! merged into a job that is still `queued` (a running job's range is fixed).

use super::model::{Disposition, Enqueued, JobKind, JobState, NewJob};
use super::rows::{fetch_job, insert_event, job_columns};
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
        let enqueued = self
            .write(move |conn| {
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
async fn store(
    conn: &mut sqlx::SqliteConnection,
    job: NewJob,
    delivery_id: Option<&str>,
    identity: String,
    now: i64,
    max_attempts: i64,
) -> Result<Enqueued, QueueError> {
    if let Some(delivery_id) = delivery_id {
        let known: Option<i64> =
            sqlx::query_scalar("SELECT job_id FROM deliveries WHERE delivery_id = ?1")
                .bind(delivery_id)
                .fetch_optional(&mut *conn)
                .await?;
        if let Some(job_id) = known {
            return duplicate(conn, job_id).await;
        }
    }

    let known: Option<i64> =
        sqlx::query_scalar("SELECT job_id FROM job_identities WHERE identity = ?1")
            .bind(&identity)
            .fetch_optional(&mut *conn)
            .await?;
    if let Some(job_id) = known {
        remember_delivery(&mut *conn, delivery_id, job_id, now).await?;
        return duplicate(conn, job_id).await;
    }

    if let JobKind::Range { before, after, .. } = &job.kind {
        let extended = sqlx::query(concat!(
            "UPDATE jobs SET push_after = ?1, coalesced_count = coalesced_count + 1, \
             updated_at = ?2 \
             WHERE id = (SELECT id FROM jobs WHERE state = 'queued' AND kind = 'range' \
                         AND source = ?3 AND destination = ?4 AND push_after = ?5 \
                         ORDER BY id LIMIT 1) \
               AND state = 'queued' \
             RETURNING ",
            job_columns!()
        ))
        .bind(after)
        .bind(now)
        .bind(&job.source)
        .bind(&job.destination)
        .bind(before)
        .fetch_optional(&mut *conn)
        .await?;
        if let Some(row) = extended {
            let target = super::rows::job_from_row(&row)?;
            remember_identity(&mut *conn, &identity, target.id, now).await?;
            remember_delivery(&mut *conn, delivery_id, target.id, now).await?;
            let detail = format!("range extended to ..{after} by {identity}");
            insert_event(
                &mut *conn,
                target.id,
                now,
                &job.actor,
                "coalesced",
                Some(&detail),
            )
            .await?;
            return Ok(Enqueued {
                disposition: Disposition::Coalesced { into: target.id },
                job: target,
            });
        }
    }

    let (push_before, push_after, run_id, run_attempt, pull_number, merge_sha) = match &job.kind {
        JobKind::Range {
            before,
            after,
            run_id,
            run_attempt,
        } => (
            Some(before.as_str()),
            Some(after.as_str()),
            *run_id,
            *run_attempt,
            None,
            None,
        ),
        JobKind::PullRequest { number, merge_sha } => (
            None,
            None,
            None,
            None,
            Some(*number),
            Some(merge_sha.as_str()),
        ),
    };
    let row = sqlx::query(concat!(
        "INSERT INTO jobs (source, destination, origin, kind, push_before, push_after, \
         run_id, run_attempt, pull_number, merge_sha, state, attempts, max_attempts, \
         run_after, created_at, updated_at, actor) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 0, ?12, ?13, ?13, ?13, ?14) \
         RETURNING ",
        job_columns!()
    ))
    .bind(&job.source)
    .bind(&job.destination)
    .bind(job.origin.as_str())
    .bind(job.kind.name().as_str())
    .bind(push_before)
    .bind(push_after)
    .bind(run_id)
    .bind(run_attempt)
    .bind(pull_number)
    .bind(merge_sha)
    .bind(JobState::Queued.as_str())
    .bind(max_attempts)
    .bind(now)
    .bind(&job.actor)
    .fetch_one(&mut *conn)
    .await?;
    let created = super::rows::job_from_row(&row)?;
    remember_identity(&mut *conn, &identity, created.id, now).await?;
    remember_delivery(&mut *conn, delivery_id, created.id, now).await?;
    let detail = format!("{} job from {} as {identity}", job.kind.name(), job.origin);
    insert_event(
        &mut *conn,
        created.id,
        now,
        &job.actor,
        "enqueued",
        Some(&detail),
    )
    .await?;
    Ok(Enqueued {
        job: created,
        disposition: Disposition::Created,
    })
}

/// The job that already stands for a known identity or delivery.
async fn duplicate(conn: &mut sqlx::SqliteConnection, job_id: i64) -> Result<Enqueued, QueueError> {
    let job = fetch_job(conn, job_id)
        .await?
        .ok_or(QueueError::NotFound { id: job_id })?;
    Ok(Enqueued {
        job,
        disposition: Disposition::Duplicate,
    })
}

async fn remember_identity(
    conn: &mut sqlx::SqliteConnection,
    identity: &str,
    job_id: i64,
    now: i64,
) -> Result<(), QueueError> {
    sqlx::query("INSERT INTO job_identities (identity, job_id, created_at) VALUES (?1, ?2, ?3)")
        .bind(identity)
        .bind(job_id)
        .bind(now)
        .execute(conn)
        .await?;
    Ok(())
}

async fn remember_delivery(
    conn: &mut sqlx::SqliteConnection,
    delivery_id: Option<&str>,
    job_id: i64,
    now: i64,
) -> Result<(), QueueError> {
    if let Some(delivery_id) = delivery_id {
        sqlx::query(
            "INSERT INTO deliveries (delivery_id, job_id, received_at) VALUES (?1, ?2, ?3)",
        )
        .bind(delivery_id)
        .bind(job_id)
        .bind(now)
        .execute(conn)
        .await?;
    }
    Ok(())
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
