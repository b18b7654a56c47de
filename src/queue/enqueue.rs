//! Enqueue: idempotent by job identity and by delivery id, and coalescing of
//! contiguous ranges into a still-queued job (bounded when the caller
//! measured it).
//!
//! Invariant: two concurrent enqueues of the same identity or delivery can
//! never both create a job. On SQLite each enqueue is one write of the
//! queue's writer task (see `group_commit.rs`), which holds the write lock
//! from its first lookup to the commit and runs writes one after another; on
//! PostgreSQL enqueues that could meet wait for each other on advisory locks
//! (see `store_postgres`); a range is only
//! merged into a job that is still `queued` (a running job's range is fixed),
//! and never into a backfill's range (`backfill.rs`: cancelling a backfill
//! must not cancel a dispatch's range). A caller that bounds its jobs
//! (`ingest/split.rs`) extends only the queued job it measured
//! ([`Coalesce::IfStartsAt`]), so a coalesced job never exceeds that bound;
//! a range split into parts is `parts.rs`'s.

use sqlx::Row;

use super::model::{Disposition, Enqueued, Job, JobKind, JobState, NewJob};
use super::rows::{JobRow, job_columns};
use super::{Counters, Queue, QueueError};
use crate::db::{Conn, on_pool};
use crate::ids::Sha;

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

pub(super) fn invalid(field: &'static str, reason: impl Into<String>) -> QueueError {
    QueueError::InvalidInput {
        field,
        reason: reason.into(),
    }
}

fn check_sha(field: &'static str, sha: &Sha) -> Result<(), QueueError> {
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
pub(super) fn validate(job: &NewJob, delivery_id: Option<&str>) -> Result<(), QueueError> {
    // The source is a `RepoName`, `owner/name` by construction.
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
            if before == after {
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
        JobKind::PullRequest { merge_sha, .. } => check_sha("merge_sha", merge_sha)?,
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
        self.enqueue_bounded(job, delivery_id, Coalesce::Any).await
    }

    /// [`Queue::enqueue`] with the coalescing `coalesce` allows: a caller
    /// that bounds a job's size (`ingest/split.rs`) measures the queued job
    /// it would extend ([`Queue::coalesce_candidate`]) together with the new
    /// range and allows only that job ([`Coalesce::IfStartsAt`]), or none.
    pub async fn enqueue_bounded(
        &self,
        job: NewJob,
        delivery_id: Option<&str>,
        coalesce: Coalesce,
    ) -> Result<Enqueued, QueueError> {
        validate(&job, delivery_id)?;
        let now = self.now_ms();
        let identity = identity_key(&job);
        let max_attempts = i64::from(self.settings.max_attempts);
        let delivery_id = delivery_id.map(str::to_string);
        // `store` refuses nothing: every check that can fail ran above, so
        // it fails only with the database, and needs no savepoint.
        let enqueued = self
            .write_undone_with_batch(move |conn: Conn<'_>| {
                Box::pin(async move {
                    store(
                        conn,
                        job,
                        delivery_id.as_deref(),
                        identity,
                        now,
                        max_attempts,
                        coalesce,
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

/// Which queued range job an enqueued range may extend (coalescing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Coalesce {
    /// Any still-queued range job of the source and wiki that ends where
    /// this range starts (what [`Queue::enqueue`] does).
    Any,
    /// None: the range becomes a job of its own (or a duplicate).
    Never,
    /// Only such a job that starts at this commit: the caller measured that
    /// job's range with this one and found the whole within its bound. A job
    /// extended by someone else since no longer ends where this range starts,
    /// and one that starts elsewhere is not this one, so the bound holds.
    IfStartsAt(Sha),
}

impl Coalesce {
    fn allowed(&self) -> bool {
        !matches!(self, Coalesce::Never)
    }

    fn start(&self) -> Option<&str> {
        match self {
            Coalesce::IfStartsAt(sha) => Some(sha.as_str()),
            _ => None,
        }
    }
}

impl Queue {
    /// The still-queued range job that [`Queue::enqueue`] would extend with
    /// `job` (same source and wiki, ending where `job` starts, not a
    /// backfill's), if any.
    pub async fn coalesce_candidate(&self, job: &NewJob) -> Result<Option<Job>, QueueError> {
        let JobKind::Range { before, .. } = &job.kind else {
            return Ok(None);
        };
        let row: Option<JobRow> = on_pool!(&self.pool, |pool| {
            sqlx::query_as(concat!(
                "SELECT ",
                job_columns!(),
                " FROM jobs WHERE state = 'queued' AND kind = 'range' \
                 AND source = $1 AND destination = $2 AND push_after = $3 \
                 AND NOT EXISTS (SELECT 1 FROM backfill_ranges \
                                 WHERE backfill_ranges.job_id = jobs.id) \
                 ORDER BY id LIMIT 1"
            ))
            .bind(job.source.as_str())
            .bind(&job.destination)
            .bind(before.as_str())
            .fetch_optional(pool)
            .await?
        });
        row.map(JobRow::into_job).transpose()
    }
}

/// The transactional part of [`Queue::enqueue`], on the write's connection.
async fn store(
    conn: Conn<'_>,
    job: NewJob,
    delivery_id: Option<&str>,
    identity: String,
    now: i64,
    max_attempts: i64,
    coalesce: Coalesce,
) -> Result<Enqueued, QueueError> {
    let new = Stored::of(&job, &identity, delivery_id, now, max_attempts, &coalesce);
    match conn {
        Conn::Sqlite(conn) => store_sqlite(conn, &new).await,
        Conn::Postgres(conn) => store_postgres(conn, &new).await,
    }
}

/// What one enqueue stores: the job, its identity, delivery id, time and
/// attempt budget, the column values its kind gives, and the details of its
/// events.
struct Stored<'a> {
    job: &'a NewJob,
    identity: &'a str,
    delivery_id: Option<&'a str>,
    now: i64,
    max_attempts: i64,
    before: Option<&'a str>,
    after: Option<&'a str>,
    run_id: Option<i64>,
    run_attempt: Option<i64>,
    pull_number: Option<i64>,
    merge_sha: Option<&'a str>,
    created_detail: String,
    coalesced_detail: Option<String>,
    coalesce: &'a Coalesce,
}

impl<'a> Stored<'a> {
    fn of(
        job: &'a NewJob,
        identity: &'a str,
        delivery_id: Option<&'a str>,
        now: i64,
        max_attempts: i64,
        coalesce: &'a Coalesce,
    ) -> Stored<'a> {
        let columns = job.kind.columns();
        let (before, after) = (
            columns.push_before.map(Sha::as_str),
            columns.push_after.map(Sha::as_str),
        );
        let (run_id, run_attempt) = (columns.run_id, columns.run_attempt);
        let pull_number = columns.pull_number.map(|n| n.get() as i64);
        let merge_sha = columns.merge_sha.map(Sha::as_str);
        Stored {
            job,
            identity,
            delivery_id,
            now,
            max_attempts,
            before,
            after,
            run_id,
            run_attempt,
            pull_number,
            merge_sha,
            created_detail: format!("{} job from {} as {identity}", job.kind.name(), job.origin),
            coalesced_detail: after
                .map(|after| format!("range extended to ..{after} by {identity}")),
            coalesce,
        }
    }
}

/// [`store`] on SQLite.
///
/// One round trip to SQLite's thread for any outcome: a single
/// multi-statement script looks the job up once (known delivery? known
/// identity? a queued range this one extends?), keeps the answers in a
/// one-row temporary table, and every statement after that acts only in the
/// case it is for, guarded by those answers. The writer task runs every
/// write of the process one after another, and each round trip is a hop
/// between threads; one per enqueue is the fewest without merging enqueues
/// (which was measured and gained nothing; see git history of bench/README.md).
///
/// The script numbers its parameters `$1`, `$2`, … in the order they appear,
/// each used once, and binds them in that order: sqlx-sqlite reads `$N` as
/// the Nth argument of the whole script.
async fn store_sqlite(
    conn: &mut sqlx::SqliteConnection,
    new: &Stored<'_>,
) -> Result<Enqueued, QueueError> {
    let &Stored {
        job,
        identity,
        delivery_id,
        now,
        max_attempts,
        ..
    } = new;
    let Stored {
        before,
        after,
        run_id,
        run_attempt,
        pull_number,
        merge_sha,
        created_detail,
        coalesced_detail,
        ..
    } = new;
    // `probe`: what the lookup found, then `target`, the job a new or
    // coalesced enqueue writes its identity, delivery and event rows for.
    // The probe row lives in the writer's transaction: a failed batch rolls
    // it back with everything else.
    let rows = sqlx::query(concat!(
        "CREATE TEMP TABLE IF NOT EXISTS enqueue_probe \
         (by_delivery INTEGER, by_identity INTEGER, extendable INTEGER, target INTEGER)",
        "; DELETE FROM temp.enqueue_probe",
        // The lookup. `push_after = NULL` matches nothing, so a pull request
        // never extends a job.
        "; INSERT INTO temp.enqueue_probe (by_delivery, by_identity, extendable) SELECT \
           (SELECT job_id FROM deliveries WHERE delivery_id = $1), \
           (SELECT job_id FROM job_identities WHERE identity = $2), \
           (SELECT id FROM jobs WHERE state = 'queued' AND kind = 'range' \
            AND source = $3 AND destination = $4 AND push_after = $5 \
            AND $6 = 1 AND (push_before = $7 OR $8 IS NULL) \
            AND NOT EXISTS (SELECT 1 FROM backfill_ranges WHERE backfill_ranges.job_id = jobs.id) \
            ORDER BY id LIMIT 1)",
        // A known identity under a new delivery id: remember the delivery.
        "; INSERT INTO deliveries (delivery_id, job_id, received_at) \
           SELECT $9, by_identity, $10 FROM temp.enqueue_probe \
           WHERE by_delivery IS NULL AND by_identity IS NOT NULL AND $11 IS NOT NULL",
        // A range that extends a queued job. The lookup ran under the write
        // lock this transaction holds, so the job is still queued; should
        // the UPDATE match nothing anyway, `target` stays NULL and the final
        // SELECT finds no job, which fails the write.
        "; UPDATE jobs SET push_after = $12, coalesced_count = coalesced_count + 1, updated_at = $13 \
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
           SELECT $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, 0, $25, $26, $27, $28, $29 FROM temp.enqueue_probe \
           WHERE by_delivery IS NULL AND by_identity IS NULL AND extendable IS NULL",
        "; UPDATE temp.enqueue_probe SET target = last_insert_rowid() \
           WHERE by_delivery IS NULL AND by_identity IS NULL AND extendable IS NULL \
             AND changes() = 1",
        // The rows of a new or coalesced enqueue.
        "; INSERT INTO job_identities (identity, job_id, created_at) \
           SELECT $30, target, $31 FROM temp.enqueue_probe WHERE target IS NOT NULL",
        "; INSERT INTO deliveries (delivery_id, job_id, received_at) \
           SELECT $32, target, $33 FROM temp.enqueue_probe WHERE target IS NOT NULL AND $34 IS NOT NULL",
        "; INSERT INTO job_events (job_id, at, actor, event, detail) \
           SELECT target, $35, $36, \
                  CASE WHEN extendable IS NULL THEN 'enqueued' ELSE 'coalesced' END, \
                  CASE WHEN extendable IS NULL THEN $37 ELSE $38 END \
           FROM temp.enqueue_probe WHERE target IS NOT NULL",
        // The answer: the job that stands for this enqueue, and how.
        "; SELECT ",
        job_columns!(),
        ", (SELECT CASE WHEN by_delivery IS NOT NULL OR by_identity IS NOT NULL THEN 'duplicate' \
                        WHEN extendable IS NOT NULL THEN 'coalesced' ELSE 'created' END \
             FROM temp.enqueue_probe) AS disposition \
           FROM jobs WHERE id = (SELECT COALESCE(by_delivery, by_identity, target) \
                                 FROM temp.enqueue_probe)",
    ))
    // the lookup
    .bind(delivery_id)
    .bind(identity)
    .bind(job.source.as_str())
    .bind(&job.destination)
    .bind(before)
    .bind(i64::from(new.coalesce.allowed()))
    .bind(new.coalesce.start())
    .bind(new.coalesce.start())
    // a known identity's new delivery
    .bind(delivery_id)
    .bind(now)
    .bind(delivery_id)
    // coalescing
    .bind(after)
    .bind(now)
    // a new job
    .bind(job.source.as_str())
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
    .bind(identity)
    .bind(now)
    // deliveries
    .bind(delivery_id)
    .bind(now)
    .bind(delivery_id)
    // job_events
    .bind(now)
    .bind(&job.actor)
    .bind(created_detail)
    .bind(coalesced_detail)
    .fetch_all(&mut *conn)
    .await?;
    let row = rows.first().ok_or_else(|| {
        QueueError::Database(sqlx::Error::Protocol(
            "the enqueue found no job to extend or to answer with".into(),
        ))
    })?;
    let job = <JobRow as sqlx::FromRow<_>>::from_row(row)?.into_job()?;
    let disposition = match row.try_get::<&str, _>("disposition")? {
        "duplicate" => Disposition::Duplicate,
        "coalesced" => Disposition::Coalesced { into: job.id },
        "created" => Disposition::Created,
        other => {
            return Err(QueueError::Database(sqlx::Error::Protocol(format!(
                "the enqueue answered with an unknown disposition {other:?}"
            ))));
        }
    };
    Ok(Enqueued { job, disposition })
}

/// [`store`] on PostgreSQL: the same lookup and the same rows as on SQLite,
/// one statement at a time.
///
/// Enqueues that could find or create the same rows wait for each other on
/// transaction-scoped advisory locks: one per delivery id, then one per
/// source (identities and coalescing never cross sources), always taken in
/// that order, so two enqueues never wait for each other in a cycle. Claims
/// take no such lock: a queued job found to extend may be claimed before the
/// extension locks it, and then the range becomes a job of its own.
async fn store_postgres(
    conn: &mut sqlx::PgConnection,
    new: &Stored<'_>,
) -> Result<Enqueued, QueueError> {
    let &Stored {
        job,
        identity,
        delivery_id,
        now,
        ..
    } = new;
    const LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))";
    if let Some(delivery_id) = delivery_id {
        sqlx::query(LOCK)
            .bind(format!("teammem delivery {delivery_id}"))
            .execute(&mut *conn)
            .await?;
    }
    sqlx::query(LOCK)
        .bind(format!("teammem source {}", job.source))
        .execute(&mut *conn)
        .await?;
    let (by_delivery, by_identity, extendable): (Option<i64>, Option<i64>, Option<i64>) =
        sqlx::query_as(
            "SELECT (SELECT job_id FROM deliveries WHERE delivery_id = $1), \
                    (SELECT job_id FROM job_identities WHERE identity = $2), \
                    (SELECT id FROM jobs WHERE state = 'queued' AND kind = 'range' \
                     AND source = $3 AND destination = $4 AND push_after = $5 \
                     AND $6 AND (push_before = $7 OR $7::text IS NULL) \
                     AND NOT EXISTS (SELECT 1 FROM backfill_ranges \
                                     WHERE backfill_ranges.job_id = jobs.id) \
                     ORDER BY id LIMIT 1)",
        )
        .bind(delivery_id)
        .bind(identity)
        .bind(job.source.as_str())
        .bind(&job.destination)
        .bind(new.before)
        .bind(new.coalesce.allowed())
        .bind(new.coalesce.start())
        .fetch_one(&mut *conn)
        .await?;
    if let Some(existing) = by_delivery.or(by_identity) {
        if by_delivery.is_none()
            && let Some(delivery_id) = delivery_id
        {
            sqlx::query(
                "INSERT INTO deliveries (delivery_id, job_id, received_at) VALUES ($1, $2, $3)",
            )
            .bind(delivery_id)
            .bind(existing)
            .bind(now)
            .execute(&mut *conn)
            .await?;
        }
        return answer_with(conn, existing, Disposition::Duplicate).await;
    }
    let mut coalesced_into = None;
    if let Some(extendable) = extendable {
        let extended = sqlx::query(
            "UPDATE jobs SET push_after = $1, coalesced_count = coalesced_count + 1, \
             updated_at = $2 WHERE id = $3 AND state = 'queued'",
        )
        .bind(new.after)
        .bind(now)
        .bind(extendable)
        .execute(&mut *conn)
        .await?;
        if extended.rows_affected() == 1 {
            coalesced_into = Some(extendable);
        }
    }
    let Some(target) = coalesced_into else {
        return create_postgres(conn, new).await;
    };
    sqlx::query("INSERT INTO job_identities (identity, job_id, created_at) VALUES ($1, $2, $3)")
        .bind(identity)
        .bind(target)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    if let Some(delivery_id) = delivery_id {
        sqlx::query(
            "INSERT INTO deliveries (delivery_id, job_id, received_at) VALUES ($1, $2, $3)",
        )
        .bind(delivery_id)
        .bind(target)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    }
    super::rows::insert_event(
        &mut Conn::Postgres(conn),
        target,
        now,
        &job.actor,
        "coalesced",
        new.coalesced_detail.as_deref(),
    )
    .await?;
    answer_with(conn, target, Disposition::Coalesced { into: target }).await
}

/// A new job on PostgreSQL in ONE statement: the job, its identity, its
/// delivery id, its `enqueued` event and the wake-up notification, as the
/// created path of [`store_sqlite`]'s script (one round trip instead of
/// six: a sequential enqueue waits for every one of them).
async fn create_postgres(
    conn: &mut sqlx::PgConnection,
    new: &Stored<'_>,
) -> Result<Enqueued, QueueError> {
    let &Stored {
        job,
        identity,
        delivery_id,
        now,
        max_attempts,
        ..
    } = new;
    let row: JobRow = sqlx::query_as(concat!(
        "WITH job AS (\
           INSERT INTO jobs (source, destination, origin, kind, push_before, push_after, \
           run_id, run_attempt, pull_number, merge_sha, state, attempts, max_attempts, \
           run_after, created_at, updated_at, actor) \
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'queued', 0, $11, $12, $12, $12, $13) \
           RETURNING ",
        job_columns!(),
        "), identity AS (\
           INSERT INTO job_identities (identity, job_id, created_at) \
           SELECT $14, id, $12 FROM job\
         ), delivery AS (\
           INSERT INTO deliveries (delivery_id, job_id, received_at) \
           SELECT $15, id, $12 FROM job WHERE $15::text IS NOT NULL\
         ), event AS (\
           INSERT INTO job_events (job_id, at, actor, event, detail) \
           SELECT id, $12, $13, 'enqueued', $16 FROM job\
         ) \
         SELECT job.*, pg_notify($17, '') IS NULL AS notified FROM job"
    ))
    .bind(job.source.as_str())
    .bind(&job.destination)
    .bind(job.origin.as_str())
    .bind(job.kind.name().as_str())
    .bind(new.before)
    .bind(new.after)
    .bind(new.run_id)
    .bind(new.run_attempt)
    .bind(new.pull_number)
    .bind(new.merge_sha)
    .bind(max_attempts)
    .bind(now)
    .bind(&job.actor)
    .bind(identity)
    .bind(delivery_id)
    .bind(new.created_detail.as_str())
    .bind(super::JOBS_CHANNEL)
    .fetch_one(&mut *conn)
    .await?;
    Ok(Enqueued {
        job: row.into_job()?,
        disposition: Disposition::Created,
    })
}

/// The stored job `id` as the answer of an enqueue.
async fn answer_with(
    conn: &mut sqlx::PgConnection,
    id: i64,
    disposition: Disposition,
) -> Result<Enqueued, QueueError> {
    let job = super::rows::fetch_job(&mut Conn::Postgres(conn), id)
        .await?
        .ok_or_else(|| {
            QueueError::Database(sqlx::Error::Protocol(format!(
                "the enqueue lost job {id} inside its own transaction"
            )))
        })?;
    Ok(Enqueued { job, disposition })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::model::Origin;

    fn sha(digit: char) -> Sha {
        Sha::parse(&std::iter::repeat_n(digit, 40).collect::<String>()).unwrap()
    }

    fn range(run: Option<(i64, i64)>) -> NewJob {
        NewJob {
            source: crate::ids::RepoName::parse("octo/app").unwrap(),
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
                number: crate::ids::PullNumber::new(7).unwrap(),
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
