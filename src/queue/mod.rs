//! The durable job queue: the only module with SQL about jobs.
//!
//! A [`Queue`] is a cheap, cloneable handle over the database (SQLite or
//! PostgreSQL, see [`crate::db::Pool`]), an injected [`Clock`] and in-process
//! counters. The job states and their transitions are documented on
//! [`JobState`] in `model.rs`. Both backends run the same statements and have
//! the same semantics; where their SQL differs, the statement picks by
//! [`crate::db::Dialect`] next to the other.
//!
//! Invariants kept by every function in this module, on either backend:
//! - every state change is one guarded statement (`... WHERE id = ? AND
//!   state = ... [AND lease_token = ?]`) whose `rows_affected` (or `RETURNING`
//!   row) is checked, run in one transaction together with the `job_events`
//!   row that records it (on SQLite a `BEGIN IMMEDIATE` batch of the writer
//!   task, see `group_commit.rs`; on PostgreSQL a savepoint in a batch of
//!   one of the node's writer tasks, see `pg_group_commit.rs`);
//! - worker writes (heartbeat, complete, fail, release) are fenced by the
//!   lease token handed out at claim, so a worker that lost its lease cannot
//!   change the job;
//! - at most one job per wiki destination is `running`, across every node
//!   sharing the database (the claim skips busy destinations; a partial
//!   unique index enforces it);
//! - bad input and refused transitions change nothing.

pub mod backfill;
mod claim;
mod clock;
pub mod copy;
mod cursors;
mod enqueue;
mod events;
mod group_commit;
mod lease;
mod model;
mod overview;
mod parts;
mod pg_group_commit;
mod read;
mod rescue;
mod retention;
mod retry_policy;
mod rows;
mod steer;
mod summary;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::db::{Conn, Pool, on_pool};
use serde::Serialize;

pub use clock::{Clock, ManualClock, SystemClock};
pub use enqueue::{Coalesce, identity_key};
pub use model::{
    Claimed, Completion, CursorMove, DEFAULT_PAGE_SIZE, Disposition, Enqueued, Job, JobEvent,
    JobFilter, JobKind, JobKindName, JobPage, JobState, KindColumns, Lease, MAX_PAGE_SIZE, NewJob,
    Origin, SourceCursor, UnknownState,
};
pub use overview::{Finished, Overview};
pub use parts::{MAX_PARTS, PartsEnqueued, part_identity};
pub use retry_policy::{BACKOFF_BASE, BACKOFF_CAP, backoff, nominal_backoff};
pub use steer::Steering;
pub use summary::{readable_utc, rfc3339_utc, short_sha};

/// The PostgreSQL notification channel on which a write that makes a job
/// claimable now (a new job, a retry, a release) announces it, in its own
/// transaction (so it is sent at commit); every node's workers listen (see
/// `cluster.rs`).
pub const JOBS_CHANNEL: &str = "teammem_jobs";

/// The shortest time a delivery id is remembered (replays within it are
/// answered with the original job).
pub const MIN_DELIVERY_RETENTION: Duration = Duration::from_secs(3 * 24 * 60 * 60);

/// Tunables of the queue, from `[queue]` in the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSettings {
    /// Attempts (claims) before a retryable failure becomes `failed`.
    pub max_attempts: u32,
    /// How long a claim or heartbeat keeps a job leased.
    pub lease: Duration,
    /// How long terminal jobs (with their events) are kept.
    pub retention: Duration,
    /// How long delivery ids are remembered; raised to
    /// [`MIN_DELIVERY_RETENTION`] if shorter.
    pub delivery_retention: Duration,
}

impl Default for QueueSettings {
    fn default() -> Self {
        Self {
            max_attempts: 8,
            lease: Duration::from_secs(60),
            retention: Duration::from_secs(30 * 24 * 60 * 60),
            delivery_retention: Duration::from_secs(7 * 24 * 60 * 60),
        }
    }
}

/// Everything a queue operation can fail with. Messages say what was wrong
/// and what to do.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("job {id} not found; list jobs to see which ids exist")]
    NotFound { id: i64 },
    #[error("cannot {action} job {id}: it is {from}; {}", transition_hint(action))]
    InvalidTransition {
        id: i64,
        from: JobState,
        action: &'static str,
    },
    #[error(
        "the lease on job {id} is no longer held (the job was rescued, cancelled or finished); stop working on it"
    )]
    LeaseLost { id: i64 },
    #[error("{field}: {reason}")]
    InvalidInput { field: &'static str, reason: String },
    /// A stored row that is not a job: its columns do not form a kind (a
    /// combination the schema's `CHECK` forbids) or hold a value no job has.
    #[error(
        "job {id} in the database is malformed: {reason}; teammem never writes such a row: fix or delete it by hand (the jobs table of the queue database)"
    )]
    MalformedJob { id: i64, reason: String },
    #[error("queue database error: {0}; check that the database is reachable and retry")]
    Database(#[from] sqlx::Error),
    #[error("queue write not committed: {0}; check that the database is reachable and retry")]
    CommitFailed(String),
}

/// True when `error` is the database refusing a write that would break the
/// unique index (or constraint) `constraint`.
fn violates(error: &QueueError, constraint: &str) -> bool {
    match error {
        QueueError::Database(sqlx::Error::Database(refusal)) => {
            refusal.is_unique_violation() && refusal.constraint() == Some(constraint)
        }
        _ => false,
    }
}

impl QueueError {
    /// True when the database could not be reached (see
    /// [`crate::db::is_unavailable`]) or a write's commit did not complete:
    /// retrying the same call later is safe (enqueues are idempotent) and may
    /// succeed.
    pub fn is_unavailable(&self) -> bool {
        match self {
            QueueError::Database(error) => crate::db::is_unavailable(error),
            QueueError::CommitFailed(_) => true,
            _ => false,
        }
    }
}

fn transition_hint(action: &str) -> &'static str {
    match action {
        "cancel" => "only queued or running jobs can be cancelled",
        "retry" => "only failed, cancelled or rejected jobs can be retried",
        _ => "that transition is not allowed from this state",
    }
}

/// In-process counters since start, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    pub enqueued: u64,
    pub coalesced: u64,
    pub duplicates: u64,
    pub claims: u64,
    pub rescues: u64,
    pub retries_scheduled: u64,
    pub releases: u64,
    pub succeeded: u64,
    pub no_change: u64,
    pub skipped: u64,
    pub rejected: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub retried: u64,
    /// Transactions the writer tasks committed (each carries one or more
    /// writes, see `group_commit.rs` and `pg_group_commit.rs`).
    pub commits: u64,
    /// Writes those transactions carried, refused ones included.
    pub writes: u64,
}

#[derive(Debug, Default)]
struct Counters {
    enqueued: AtomicU64,
    coalesced: AtomicU64,
    duplicates: AtomicU64,
    claims: AtomicU64,
    rescues: AtomicU64,
    retries_scheduled: AtomicU64,
    releases: AtomicU64,
    succeeded: AtomicU64,
    no_change: AtomicU64,
    skipped: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    cancelled: AtomicU64,
    retried: AtomicU64,
}

impl Counters {
    fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn bump_finished(&self, state: JobState) {
        let counter = match state {
            JobState::Succeeded => &self.succeeded,
            JobState::NoChange => &self.no_change,
            JobState::Skipped => &self.skipped,
            JobState::Rejected => &self.rejected,
            JobState::Failed => &self.failed,
            JobState::Cancelled => &self.cancelled,
            JobState::Queued | JobState::Running => return,
        };
        Self::bump(counter);
    }

    fn snapshot(&self) -> QueueStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        QueueStats {
            enqueued: read(&self.enqueued),
            coalesced: read(&self.coalesced),
            duplicates: read(&self.duplicates),
            claims: read(&self.claims),
            rescues: read(&self.rescues),
            retries_scheduled: read(&self.retries_scheduled),
            releases: read(&self.releases),
            succeeded: read(&self.succeeded),
            no_change: read(&self.no_change),
            skipped: read(&self.skipped),
            rejected: read(&self.rejected),
            failed: read(&self.failed),
            cancelled: read(&self.cancelled),
            retried: read(&self.retried),
            commits: 0,
            writes: 0,
        }
    }
}

/// Handle to the job queue. Clone it freely: clones share the pool, clock
/// and counters.
#[derive(Debug, Clone)]
pub struct Queue {
    pool: Pool,
    clock: Arc<dyn Clock>,
    settings: QueueSettings,
    counters: Arc<Counters>,
    writes: Writes,
}

/// How a backend runs the queue's writes.
#[derive(Debug, Clone)]
enum Writes {
    /// Every write of this process goes through one writer task that
    /// commits waiting writes together (see `group_commit.rs`). SQLite
    /// admits one writer at a time anyway; this replaces its busy-handler
    /// polling with a FIFO and pays one fsync per batch, not per write.
    /// Other processes (the CLI) still meet the busy timeout.
    Grouped(Arc<group_commit::GroupCommit>),
    /// Every write of this process goes through a few writer tasks, each
    /// running the writes waiting for it in one transaction, a savepoint
    /// each, and committing them together (see `pg_group_commit.rs`): one
    /// WAL flush per batch. Writers
    /// on other nodes are kept apart by row locks and the guards of each
    /// statement, by `FOR UPDATE SKIP LOCKED` in the claim, and by advisory
    /// locks where a write must first look something up (enqueue); a write
    /// that loses to their locks runs again alone.
    Postgres(Arc<pg_group_commit::PgGroupCommit>),
}

impl QueueSettings {
    /// The settings `[queue]` asks for (deliveries are remembered for three
    /// days, or as long as jobs when that is longer).
    pub fn of(config: &crate::config::Config) -> QueueSettings {
        QueueSettings {
            max_attempts: config.queue.max_attempts,
            lease: config.queue.lease,
            retention: config.queue.retention,
            delivery_retention: Duration::from_secs(3 * 86_400).max(config.queue.retention),
        }
    }
}

impl Queue {
    /// A queue over a migrated pool of either backend (see `db::migrate`).
    pub fn new(pool: impl Into<Pool>, clock: Arc<dyn Clock>, settings: QueueSettings) -> Self {
        let pool = pool.into();
        let settings = QueueSettings {
            max_attempts: settings.max_attempts.max(1),
            delivery_retention: settings.delivery_retention.max(MIN_DELIVERY_RETENTION),
            ..settings
        };
        let writes = match &pool {
            Pool::Sqlite(sqlite) => {
                Writes::Grouped(Arc::new(group_commit::GroupCommit::new(sqlite.clone())))
            }
            Pool::Postgres(postgres) => Writes::Postgres(Arc::new(
                pg_group_commit::PgGroupCommit::new(postgres.clone()),
            )),
        };
        Self {
            writes,
            pool,
            clock,
            settings,
            counters: Arc::new(Counters::default()),
        }
    }

    /// The queue of a configuration (`[queue]`), on a migrated pool, with the
    /// system clock.
    pub fn from_config(config: &crate::config::Config, pool: impl Into<Pool>) -> Self {
        Queue::new(pool, Arc::new(SystemClock), QueueSettings::of(config))
    }

    /// The settings in force (after clamping).
    pub fn settings(&self) -> QueueSettings {
        self.settings
    }

    /// The pool, for `db::ping` and readiness checks.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The queue's clock, in unix milliseconds.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Counters since this process started.
    pub fn stats(&self) -> QueueStats {
        let (commits, writes) = match &self.writes {
            Writes::Grouped(group) => group.committed(),
            Writes::Postgres(group) => group.committed(),
        };
        QueueStats {
            commits,
            writes,
            ..self.counters.snapshot()
        }
    }

    /// The number of jobs in each state (every state present, zeros included).
    pub async fn counts_by_state(&self) -> Result<BTreeMap<JobState, u64>, QueueError> {
        let rows: Vec<(String, i64)> = on_pool!(&self.pool, |pool| {
            sqlx::query_as("SELECT state, COUNT(*) FROM jobs GROUP BY state")
                .fetch_all(pool)
                .await?
        });
        let mut counts: BTreeMap<JobState, u64> =
            JobState::ALL.into_iter().map(|state| (state, 0)).collect();
        for (state, count) in rows {
            let state = rows::parse_state(&state)?;
            counts.insert(state, u64::try_from(count).unwrap_or(0));
        }
        Ok(counts)
    }

    /// Runs `write` in one transaction and answers once it is durable: on
    /// SQLite in the writer task's next batch, holding SQLite's write lock
    /// (see `group_commit.rs`); on PostgreSQL in the next batch of one of the
    /// node's writer tasks (see `pg_group_commit.rs`, which may run it again alone, hence
    /// `Clone`). An `Err` from `write` rolls back its changes only.
    async fn write<T, F>(&self, write: F) -> Result<T, QueueError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(Conn<'c>) -> group_commit::WriteFuture<'c, T> + Clone + Send + 'static,
    {
        self.write_with(group_commit::Undo::Alone, write).await
    }

    /// [`Queue::write`] for a write that fails only when the database does:
    /// on SQLite it runs without a savepoint of its own, and its failure
    /// fails its whole batch (every caller hears it, nothing of the batch is
    /// kept).
    async fn write_undone_with_batch<T, F>(&self, write: F) -> Result<T, QueueError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(Conn<'c>) -> group_commit::WriteFuture<'c, T> + Clone + Send + 'static,
    {
        self.write_with(group_commit::Undo::WithBatch, write).await
    }

    /// Runs `first` and then `second` as [`Queue::write`] does, handed to the
    /// writer together so that they usually share one commit (on PostgreSQL
    /// one batch, `second` seeing what `first` changed); each answer is its
    /// own.
    async fn write_pair<A, F, B, G>(
        &self,
        first: F,
        second: G,
    ) -> (Result<A, QueueError>, Result<B, QueueError>)
    where
        A: Send + 'static,
        F: for<'c> FnOnce(Conn<'c>) -> group_commit::WriteFuture<'c, A> + Clone + Send + 'static,
        B: Send + 'static,
        G: for<'c> FnOnce(Conn<'c>) -> group_commit::WriteFuture<'c, B> + Clone + Send + 'static,
    {
        match &self.writes {
            Writes::Postgres(group) => {
                group
                    .run_pair(
                        move |conn: &mut sqlx::PgConnection| first(Conn::Postgres(conn)),
                        move |conn: &mut sqlx::PgConnection| second(Conn::Postgres(conn)),
                    )
                    .await
            }
            // `join!` polls `first` first: it reaches the one writer first.
            Writes::Grouped(_) => tokio::join!(self.write(first), self.write(second)),
        }
    }

    async fn write_with<T, F>(&self, undo: group_commit::Undo, write: F) -> Result<T, QueueError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(Conn<'c>) -> group_commit::WriteFuture<'c, T> + Clone + Send + 'static,
    {
        match &self.writes {
            Writes::Grouped(group) => {
                group
                    .run(undo, move |conn: &mut sqlx::SqliteConnection| {
                        write(Conn::Sqlite(conn))
                    })
                    .await
            }
            Writes::Postgres(group) => {
                group
                    .run(move |conn: &mut sqlx::PgConnection| write(Conn::Postgres(conn)))
                    .await
            }
        }
    }

    fn lease_ms(&self) -> i64 {
        clock::duration_ms(self.settings.lease)
    }
}
