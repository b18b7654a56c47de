//! Enqueue: idempotent by job identity and by delivery id, and coalescing of
//! contiguous ranges into a still-queued job.
//!
//! Invariant: each enqueue is one write of the queue's writer task (see
//! `group_commit.rs`), which holds the write lock from its first lookup to the
//! commit and runs writes one after another, so two concurrent enqueues of
//! the same identity or delivery can never both create a job; a range is only
//! merged into a job that is still `queued` (a running job's range is fixed).

use sqlx::Row;

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
        let (reply, answer) = tokio::sync::oneshot::channel();
        let request = Request {
            identity: identity_key(&job),
            job,
            delivery_id: delivery_id.map(str::to_string),
            now: self.now_ms(),
            max_attempts: i64::from(self.settings.max_attempts),
            reply,
        };
        // The first enqueue to find none waiting submits the write that will
        // take every enqueue waiting when the writer task runs it; the ones
        // that arrive meanwhile ride along.
        let first = {
            let mut waiting = self
                .enqueues
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            waiting.push(request);
            waiting.len() == 1
        };
        if first {
            self.writes.submit(
                super::group_commit::Undo::WithBatch,
                store_waiting(self.enqueues.clone()),
            );
        }
        let enqueued = answer.await.map_err(|_| {
            QueueError::CommitFailed("the queue's writer task has stopped".into())
        })??;
        let counter = match enqueued.disposition {
            Disposition::Created => &self.counters.enqueued,
            Disposition::Coalesced { .. } => &self.counters.coalesced,
            Disposition::Duplicate => &self.counters.duplicates,
        };
        Counters::bump(counter);
        Ok(enqueued)
    }
}

/// Enqueues that wait for the writer task, taken together by the next
/// merged write (see [`store_waiting`]).
#[derive(Debug, Default)]
pub(super) struct WaitingEnqueues(std::sync::Mutex<Vec<Request>>);

/// One validated enqueue and where its answer goes.
#[derive(Debug)]
pub(super) struct Request {
    job: NewJob,
    delivery_id: Option<String>,
    identity: String,
    now: i64,
    max_attempts: i64,
    reply: tokio::sync::oneshot::Sender<Result<Enqueued, QueueError>>,
}

/// The write that stores every enqueue waiting when the writer task runs
/// it, in arrival order, and answers each once the batch's commit is known.
///
/// `store` refuses nothing: every check that can fail ran before the
/// enqueue waited, so it fails only with the database, and then fails its
/// whole batch (`Undo::WithBatch`): every enqueue of it hears why.
fn store_waiting(waiting: std::sync::Arc<WaitingEnqueues>) -> super::group_commit::ErasedWrite {
    use super::group_commit::Finished;
    Box::new(move |conn| {
        Box::pin(async move {
            let requests = std::mem::take(
                &mut *waiting
                    .0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            let carried = requests.len() as u64;
            let stored = match conn {
                Ok(conn) => store(conn, &requests).await,
                Err(why) => Err(QueueError::CommitFailed(why.to_string())),
            };
            match stored {
                Ok(enqueued) => Finished {
                    keep: true,
                    refusal: None,
                    carried,
                    answer: Box::new(move |commit_failure: Option<&str>| {
                        for (request, enqueued) in requests.into_iter().zip(enqueued) {
                            let result = match commit_failure {
                                None => Ok(enqueued),
                                Some(why) => Err(QueueError::CommitFailed(why.to_string())),
                            };
                            // A caller that went away: its job stands.
                            let _ = request.reply.send(result);
                        }
                    }),
                },
                Err(error) => {
                    let why = error.to_string();
                    Finished {
                        keep: false,
                        refusal: Some(why.clone()),
                        carried,
                        answer: Box::new(move |_| {
                            for request in requests {
                                let _ = request
                                    .reply
                                    .send(Err(QueueError::CommitFailed(why.clone())));
                            }
                        }),
                    }
                }
            }
        })
    })
}

/// Sizes of the scripts an enqueue batch is cut into (largest first): a few
/// fixed sizes keep the prepared scripts few and cached.
const SCRIPT_SIZES: [usize; 5] = [16, 8, 4, 2, 1];

/// Creates the one-row table in which each enqueue of a script keeps what
/// its lookup found, then `target`, the job a new or coalesced enqueue
/// writes its identity, delivery and event rows for. It is temporary (this
/// connection's) and lives in the writer's transaction: a failed batch rolls
/// it back with everything else.
const SCRIPT_HEAD: &str = "CREATE TEMP TABLE IF NOT EXISTS enqueue_probe \
     (by_delivery INTEGER, by_identity INTEGER, extendable INTEGER, target INTEGER)";

/// One enqueue, as statements of a script; see [`bind_request`] for its
/// parameters in order.
const ENQUEUE_STATEMENTS: &str = concat!(
    "; DELETE FROM temp.enqueue_probe",
    // The lookup. `push_after = NULL` matches nothing, so a pull request
    // never extends a job.
    "; INSERT INTO temp.enqueue_probe (by_delivery, by_identity, extendable) SELECT \
       (SELECT job_id FROM deliveries WHERE delivery_id = ?), \
       (SELECT job_id FROM job_identities WHERE identity = ?), \
       (SELECT id FROM jobs WHERE state = 'queued' AND kind = 'range' \
        AND source = ? AND destination = ? AND push_after = ? ORDER BY id LIMIT 1)",
    // A known identity under a new delivery id: remember the delivery.
    "; INSERT INTO deliveries (delivery_id, job_id, received_at) \
       SELECT ?, by_identity, ? FROM temp.enqueue_probe \
       WHERE by_delivery IS NULL AND by_identity IS NOT NULL AND ? IS NOT NULL",
    // A range that extends a queued job. The lookup ran under the write
    // lock this transaction holds, so the job is still queued; should the
    // UPDATE match nothing anyway, `target` stays NULL, the final SELECT
    // finds no job and the write fails.
    "; UPDATE jobs SET push_after = ?, coalesced_count = coalesced_count + 1, updated_at = ? \
       WHERE id = (SELECT extendable FROM temp.enqueue_probe \
                   WHERE by_delivery IS NULL AND by_identity IS NULL) \
         AND state = 'queued'",
    // `changes()` is the row count of the statement before.
    "; UPDATE temp.enqueue_probe SET target = extendable \
       WHERE by_delivery IS NULL AND by_identity IS NULL AND extendable IS NOT NULL \
         AND changes() = 1",
    // Otherwise a new job.
    "; INSERT INTO jobs (source, destination, origin, kind, push_before, push_after, \
       run_id, run_attempt, pull_number, merge_sha, state, attempts, max_attempts, \
       run_after, created_at, updated_at, actor) \
       SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ? FROM temp.enqueue_probe \
       WHERE by_delivery IS NULL AND by_identity IS NULL AND extendable IS NULL",
    "; UPDATE temp.enqueue_probe SET target = last_insert_rowid() \
       WHERE by_delivery IS NULL AND by_identity IS NULL AND extendable IS NULL \
         AND changes() = 1",
    // The rows of a new or coalesced enqueue.
    "; INSERT INTO job_identities (identity, job_id, created_at) \
       SELECT ?, target, ? FROM temp.enqueue_probe WHERE target IS NOT NULL",
    "; INSERT INTO deliveries (delivery_id, job_id, received_at) \
       SELECT ?, target, ? FROM temp.enqueue_probe WHERE target IS NOT NULL AND ? IS NOT NULL",
    "; INSERT INTO job_events (job_id, at, actor, event, detail) \
       SELECT target, ?, ?, \
              CASE WHEN extendable IS NULL THEN 'enqueued' ELSE 'coalesced' END, \
              CASE WHEN extendable IS NULL THEN ? ELSE ? END \
       FROM temp.enqueue_probe WHERE target IS NOT NULL",
    // The answer, one row: the job that stands for this enqueue, and how.
    "; SELECT ",
    job_columns!(),
    ", (SELECT CASE WHEN by_delivery IS NOT NULL OR by_identity IS NOT NULL THEN 'duplicate' \
                    WHEN extendable IS NOT NULL THEN 'coalesced' ELSE 'created' END \
         FROM temp.enqueue_probe) AS disposition \
       FROM jobs WHERE id = (SELECT COALESCE(by_delivery, by_identity, target) \
                             FROM temp.enqueue_probe)",
);

/// The scripts for [`SCRIPT_SIZES`] enqueues, in that order.
static SCRIPTS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
    SCRIPT_SIZES
        .iter()
        .map(|&n| format!("{SCRIPT_HEAD}{}", ENQUEUE_STATEMENTS.repeat(n)))
        .collect()
});

/// The transactional part of [`Queue::enqueue`] for a batch of enqueues, on
/// the writer's connection, in arrival order.
///
/// One round trip to SQLite's thread per script of up to 16 enqueues, for
/// any outcome: each enqueue's statements look it up once (known delivery?
/// known identity? a queued range this one extends?), keep the answers in
/// the one-row probe table, and every statement after that acts only in the
/// case it is for, guarded by those answers. The statements of one script
/// run one after another, so each enqueue sees the ones before it exactly as
/// separate writes would (a repeated identity in one batch is a duplicate, a
/// contiguous range extends the job created just before it). The writer task
/// runs every write of the process one after another, so round trips to
/// SQLite's thread are what bounds ingest throughput: at 1,000 dispatches/s
/// the writer was busy almost all the time with two per enqueue.
///
/// The scripts use anonymous `?` parameters only, bound in the order they
/// appear: sqlx hands each statement the next arguments in turn. (Numbered
/// `?N` parameters look shareable across statements, but sqlx fills the
/// numbers a statement skips with the next arguments and stops binding when
/// it runs out, which silently binds NULL.)
async fn store(
    conn: &mut sqlx::SqliteConnection,
    requests: &[Request],
) -> Result<Vec<Enqueued>, QueueError> {
    let mut answers = Vec::with_capacity(requests.len());
    let mut rest = requests;
    while !rest.is_empty() {
        let (size, script) = SCRIPT_SIZES
            .iter()
            .zip(SCRIPTS.iter())
            .find(|(size, _)| **size <= rest.len())
            .expect("SCRIPT_SIZES ends with 1");
        let (chunk, after) = rest.split_at(*size);
        let mut query = sqlx::query(script.as_str());
        for request in chunk {
            query = bind_request(query, request);
        }
        let rows = query.fetch_all(&mut *conn).await?;
        if rows.len() != chunk.len() {
            return Err(QueueError::Database(sqlx::Error::Protocol(format!(
                "{} enqueues answered with {} jobs: one found no job to extend",
                chunk.len(),
                rows.len()
            ))));
        }
        for row in &rows {
            let job = super::rows::job_from_row(row)?;
            let disposition = match row.try_get::<&str, _>("disposition")? {
                "duplicate" => Disposition::Duplicate,
                "coalesced" => Disposition::Coalesced { into: job.id },
                _ => Disposition::Created,
            };
            answers.push(Enqueued { job, disposition });
        }
        rest = after;
    }
    Ok(answers)
}

/// Binds one enqueue's parameters, in the order of [`ENQUEUE_STATEMENTS`].
fn bind_request<'q>(
    query: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>,
    request: &'q Request,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    let Request {
        job,
        delivery_id,
        identity,
        now,
        max_attempts,
        ..
    } = request;
    let delivery_id = delivery_id.as_deref();
    let (before, after) = match &job.kind {
        JobKind::Range { before, after, .. } => (Some(before.as_str()), Some(after.as_str())),
        JobKind::PullRequest { .. } => (None, None),
    };
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
    let created_detail = format!("{} job from {} as {identity}", job.kind.name(), job.origin);
    let coalesced_detail = after.map(|after| format!("range extended to ..{after} by {identity}"));
    query
        // the lookup
        .bind(delivery_id)
        .bind(identity.as_str())
        .bind(job.source.as_str())
        .bind(job.destination.as_str())
        .bind(before)
        // a known identity's new delivery
        .bind(delivery_id)
        .bind(*now)
        .bind(delivery_id)
        // coalescing
        .bind(after)
        .bind(*now)
        // a new job
        .bind(job.source.as_str())
        .bind(job.destination.as_str())
        .bind(job.origin.as_str())
        .bind(job.kind.name().as_str().to_string())
        .bind(before)
        .bind(after)
        .bind(run_id)
        .bind(run_attempt)
        .bind(pull_number)
        .bind(merge_sha)
        .bind(JobState::Queued.as_str())
        .bind(*max_attempts)
        .bind(*now)
        .bind(*now)
        .bind(*now)
        .bind(job.actor.as_str())
        // job_identities
        .bind(identity.as_str())
        .bind(*now)
        // deliveries
        .bind(delivery_id)
        .bind(*now)
        .bind(delivery_id)
        // job_events
        .bind(*now)
        .bind(job.actor.as_str())
        .bind(created_detail)
        .bind(coalesced_detail)
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
