//! Group commit on PostgreSQL: the queue's writes of one process run on a
//! few writer tasks ([`writer_count`]), each of which takes the writes
//! waiting for it, runs them one after another in ONE transaction on one
//! pooled connection, and commits them with one COMMIT (one WAL flush for
//! the batch instead of one per write).
//!
//! Why: on PostgreSQL every commit waits for a WAL flush; batching divides
//! the flushes by the batch size. Why several writers: one writer runs the
//! statements of every worker one after another on one connection, so a
//! batch of four workers' completions and claims took as long as all their
//! round trips together (~5.7 ms, which capped four workers at ~700 jobs/s);
//! writers on their own connections run side by side, and the server
//! already flushes commits that arrive together in one WAL flush. Unlike
//! SQLite's writer (`group_commit.rs`) these do not stand in for a
//! database-wide write lock: they and other nodes write beside each other,
//! kept apart by row locks, `SKIP LOCKED` and advisory locks.
//!
//! Invariants:
//! - a caller hears `Ok` only after the COMMIT of the transaction that
//!   carried its write succeeded; when a COMMIT's outcome is unknown (the
//!   connection broke during it), every caller of that batch hears the
//!   failure, none hears `Ok`;
//! - in a batch of several, each write runs inside its own savepoint, so a
//!   write that answers `Err` (a refused transition, a lost lease, a
//!   constraint, a lock error) is rolled back alone and changes nothing,
//!   while the others of its batch still commit; a lone write needs none
//!   (its transaction is rolled back instead);
//! - a write that failed only because of another transaction's locks
//!   (deadlock, serialization failure, lock not available: a batch holds its
//!   row and advisory locks until its COMMIT, so two batches, of two writers
//!   or of two nodes, can wait for each other) is run again after its batch,
//!   alone in a transaction of its own, up to [`ALONE_TRIES`] times; a batch whose transaction failed before its COMMIT
//!   (nothing of it committed) runs every one of its writes again that way.
//!   So no write is applied twice or half, and none is answered worse than
//!   it would have been alone. Only a batch that could not begin because
//!   the pool found no connection within its acquire timeout (the database
//!   is unreachable) is answered at once, every write with that failure:
//!   running each alone would only wait as long again. Writes are therefore `Clone` (each run is a
//!   fresh copy of the closure);
//! - writes handed over together ([`PgGroupCommit::run_pair`]) run in one
//!   batch, in order, so the second sees what the first changed; when they
//!   must run again alone, they run one after the other, in that order;
//! - a batch never waits for more writes to arrive: it takes what is
//!   waiting, runs it and commits, so its locks are held only as long as its
//!   statements take;
//! - the writes run on the writer task (or a task of their own when run
//!   alone), not in the caller's future: a caller that goes away cannot cut
//!   a write in half.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::postgres::{PgConnection, PgPool};
use tokio::sync::{mpsc, oneshot};

use super::QueueError;
use super::group_commit::WriteFuture;

/// The most writes one transaction carries; more wait for the next commit.
/// Smaller than SQLite's: a PostgreSQL batch holds row locks other nodes may
/// be waiting for until it commits.
const MAX_BATCH: usize = 64;

/// Writes waiting for the writer tasks before senders wait for room.
const BACKLOG: usize = 1024;

/// The most writer tasks of one process.
const MAX_WRITERS: u32 = 8;

/// How many writer tasks a pool of `max_connections` gets: all but two of
/// its connections (left for reads, the leader campaign and `LISTEN`), at
/// least one and at most [`MAX_WRITERS`].
pub(super) fn writer_count(max_connections: u32) -> usize {
    max_connections.saturating_sub(2).clamp(1, MAX_WRITERS) as usize
}

/// How often a write that lost to another transaction's locks is run alone
/// before its caller hears the error.
pub(super) const ALONE_TRIES: usize = 3;

/// The savepoint each write of a batch runs in (one at a time, so one name).
macro_rules! savepoint {
    () => {
        "queue_write"
    };
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Writes handed over together: they run in one batch, in this order.
type Parcel = Vec<Box<dyn Pending>>;

/// How a write ran inside its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    /// It answered `Ok`; its changes stay.
    Kept,
    /// It answered `Err`; its changes are rolled back and its caller hears
    /// the error.
    Refused,
    /// It failed on another transaction's locks; rolled back, it runs again
    /// alone after the batch.
    LostToLocks,
}

/// A write waiting for the writer task, with its type erased.
trait Pending: Send {
    /// Runs a fresh copy of the write on the batch's connection and keeps
    /// its answer.
    fn run<'c>(&'c mut self, conn: &'c mut PgConnection) -> BoxFuture<'c, Ran>;
    /// Sends the kept answer, given why the batch failed (`None`: it
    /// committed).
    fn answer(self: Box<Self>, failure: Option<&str>);
    /// Runs the write again alone, in transactions of its own, and answers.
    fn alone(self: Box<Self>, pool: PgPool, tally: Arc<Tally>) -> BoxFuture<'static, ()>;
}

struct Typed<T, F> {
    write: F,
    answer: Option<Result<T, QueueError>>,
    reply: oneshot::Sender<Result<T, QueueError>>,
}

impl<T, F> Pending for Typed<T, F>
where
    T: Send + 'static,
    F: for<'c> FnOnce(&'c mut PgConnection) -> WriteFuture<'c, T> + Clone + Send + 'static,
{
    fn run<'c>(&'c mut self, conn: &'c mut PgConnection) -> BoxFuture<'c, Ran> {
        Box::pin(async move {
            let answer = (self.write.clone())(conn).await;
            let ran = match &answer {
                Ok(_) => Ran::Kept,
                Err(error) if lost_to_locks(error) => Ran::LostToLocks,
                Err(_) => Ran::Refused,
            };
            self.answer = Some(answer);
            ran
        })
    }

    fn answer(self: Box<Self>, failure: Option<&str>) {
        let Typed { answer, reply, .. } = *self;
        let answer = match (answer, failure) {
            (Some(Err(refused)), _) => Err(refused),
            (_, Some(why)) => Err(QueueError::CommitFailed(why.to_string())),
            (Some(Ok(answer)), None) => Ok(answer),
            (None, None) => Err(QueueError::CommitFailed(
                "the write was not run in its batch".into(),
            )),
        };
        // The caller may have gone away; its write stands.
        let _ = reply.send(answer);
    }

    fn alone(self: Box<Self>, pool: PgPool, tally: Arc<Tally>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let Typed { write, reply, .. } = *self;
            let mut tries = 0;
            let answer = loop {
                tries += 1;
                match run_alone(&pool, write.clone()).await {
                    Err(error) if tries < ALONE_TRIES && lost_to_locks(&error) => continue,
                    answer => break answer,
                }
            };
            if answer.is_ok() {
                tally.commits.fetch_add(1, Ordering::Relaxed);
                tally.writes.fetch_add(1, Ordering::Relaxed);
            }
            let _ = reply.send(answer);
        })
    }
}

/// One write in a transaction of its own.
async fn run_alone<T, F>(pool: &PgPool, write: F) -> Result<T, QueueError>
where
    F: for<'c> FnOnce(&'c mut PgConnection) -> WriteFuture<'c, T>,
{
    let mut tx = pool.begin().await?;
    match write(&mut tx).await {
        Ok(answer) => {
            tx.commit()
                .await
                .map_err(|e| QueueError::CommitFailed(e.to_string()))?;
            Ok(answer)
        }
        Err(refused) => {
            // Dropping the transaction would roll back too; waiting for it
            // keeps the connection reusable.
            let _ = tx.rollback().await;
            Err(refused)
        }
    }
}

/// True when `error` is PostgreSQL giving up on a statement because of
/// another transaction's locks: deadlock detected (40P01), serialization
/// failure (40001), lock not available (55P03). Running it again later may
/// succeed.
pub(super) fn lost_to_locks(error: &QueueError) -> bool {
    match error {
        QueueError::Database(sqlx::Error::Database(refusal)) => {
            matches!(refusal.code().as_deref(), Some("40P01" | "40001" | "55P03"))
        }
        _ => false,
    }
}

/// What the writer has committed, for `/metrics` and the benchmark.
#[derive(Debug, Default)]
pub(super) struct Tally {
    commits: AtomicU64,
    writes: AtomicU64,
}

/// The sending side of the writer tasks, started on first use.
pub(super) struct PgGroupCommit {
    pool: PgPool,
    sender: std::sync::OnceLock<mpsc::Sender<Parcel>>,
    tally: Arc<Tally>,
}

impl std::fmt::Debug for PgGroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgGroupCommit")
            .field("tally", &self.tally)
            .finish_non_exhaustive()
    }
}

fn writer_gone() -> QueueError {
    QueueError::CommitFailed("the queue's writer task has stopped".into())
}

impl PgGroupCommit {
    pub(super) fn new(pool: PgPool) -> Self {
        Self {
            pool,
            sender: std::sync::OnceLock::new(),
            tally: Arc::new(Tally::default()),
        }
    }

    /// Transactions committed, and the writes they carried.
    pub(super) fn committed(&self) -> (u64, u64) {
        (
            self.tally.commits.load(Ordering::Relaxed),
            self.tally.writes.load(Ordering::Relaxed),
        )
    }

    /// Runs `write` in the next batch and returns its answer once the batch
    /// has committed (or, after a lock conflict, once it committed alone).
    pub(super) async fn run<T, F>(&self, write: F) -> Result<T, QueueError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut PgConnection) -> WriteFuture<'c, T> + Clone + Send + 'static,
    {
        let (pending, answer) = pending(write);
        self.send(vec![pending]).await?;
        answer.await.map_err(|_| writer_gone())?
    }

    /// Runs `first` and then `second` in one batch (so usually one commit,
    /// `second` seeing what `first` changed) and returns both answers, each
    /// its own: a refused `first` does not stop `second`.
    pub(super) async fn run_pair<A, F, B, G>(
        &self,
        first: F,
        second: G,
    ) -> (Result<A, QueueError>, Result<B, QueueError>)
    where
        A: Send + 'static,
        F: for<'c> FnOnce(&'c mut PgConnection) -> WriteFuture<'c, A> + Clone + Send + 'static,
        B: Send + 'static,
        G: for<'c> FnOnce(&'c mut PgConnection) -> WriteFuture<'c, B> + Clone + Send + 'static,
    {
        let (first, first_answer) = pending(first);
        let (second, second_answer) = pending(second);
        if let Err(gone) = self.send(vec![first, second]).await {
            return (Err(gone), Err(writer_gone()));
        }
        (
            first_answer.await.unwrap_or_else(|_| Err(writer_gone())),
            second_answer.await.unwrap_or_else(|_| Err(writer_gone())),
        )
    }

    /// Hands `parcel` to the writer tasks, starting them on first use.
    async fn send(&self, parcel: Parcel) -> Result<(), QueueError> {
        let sender = self.sender.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(BACKLOG);
            let receiver = Arc::new(tokio::sync::Mutex::new(receiver));
            for _ in 0..writer_count(self.pool.options().get_max_connections()) {
                tokio::spawn(writer_task(
                    self.pool.clone(),
                    self.tally.clone(),
                    receiver.clone(),
                ));
            }
            sender
        });
        sender.send(parcel).await.map_err(|_| writer_gone())
    }
}

/// `write` as a pending write, and where its answer will arrive.
fn pending<T, F>(write: F) -> (Box<dyn Pending>, oneshot::Receiver<Result<T, QueueError>>)
where
    T: Send + 'static,
    F: for<'c> FnOnce(&'c mut PgConnection) -> WriteFuture<'c, T> + Clone + Send + 'static,
{
    let (reply, answer) = oneshot::channel();
    let pending: Box<dyn Pending> = Box::new(Typed {
        write,
        answer: None,
        reply,
    });
    (pending, answer)
}

/// Takes whatever writes are waiting (at least one), runs them as one
/// batch, repeats; ends when every `Queue` handle is gone. The writer tasks
/// share one receiver: whichever is free takes the next writes (holding the
/// lock only while it takes them, never while its batch runs).
async fn writer_task(
    pool: PgPool,
    tally: Arc<Tally>,
    receiver: Arc<tokio::sync::Mutex<mpsc::Receiver<Parcel>>>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        let taken = receiver.lock().await.recv_many(&mut batch, MAX_BATCH).await;
        if taken == 0 {
            break;
        }
        let writes = std::mem::take(&mut batch);
        run_batch(&pool, &tally, writes).await;
    }
}

/// How a batch's transaction ended.
enum Ended {
    /// Committed (or, for a lone refused write, rolled back): answer each
    /// write from what it ran.
    Answered,
    /// Failed before COMMIT, or refused by the server at COMMIT: nothing of
    /// it is committed, so every write runs again alone.
    NothingCommitted(String),
    /// No connection to begin it on (the database is unreachable): nothing
    /// of it ran, and every caller hears so at once.
    Unreachable(String),
    /// The COMMIT's outcome is unknown: every caller hears the failure.
    Unknown(String),
}

/// Runs and commits one batch, then answers its callers (and starts the
/// writes to run again alone).
async fn run_batch(pool: &PgPool, tally: &Arc<Tally>, mut parcels: Vec<Parcel>) {
    let count: usize = parcels.iter().map(Vec::len).sum();
    let alone = count == 1;
    let mut ran = Vec::with_capacity(count);
    let started = std::time::Instant::now();
    let ended = async {
        // The first write's savepoint travels with the BEGIN: one round trip.
        let begun = if alone {
            pool.begin().await
        } else {
            pool.begin_with(concat!("BEGIN; SAVEPOINT ", savepoint!()))
                .await
        };
        let mut tx = match begun {
            Ok(tx) => tx,
            // The pool waited its whole acquire timeout: running each write
            // alone would only wait that long again, once per write.
            Err(error @ sqlx::Error::PoolTimedOut) => return Ended::Unreachable(error.to_string()),
            Err(error) => return Ended::NothingCommitted(error.to_string()),
        };
        for (index, write) in parcels.iter_mut().flatten().enumerate() {
            if !alone && index > 0 {
                let statement = concat!(
                    "RELEASE SAVEPOINT ",
                    savepoint!(),
                    "; SAVEPOINT ",
                    savepoint!()
                );
                if let Err(error) = sqlx::raw_sql(statement).execute(&mut *tx).await {
                    return Ended::NothingCommitted(error.to_string());
                }
            }
            let outcome = write.run(&mut tx).await;
            ran.push(outcome);
            if outcome != Ran::Kept {
                if alone {
                    let _ = tx.rollback().await;
                    return Ended::Answered;
                }
                let undo = concat!("ROLLBACK TO SAVEPOINT ", savepoint!());
                if let Err(error) = sqlx::raw_sql(undo).execute(&mut *tx).await {
                    return Ended::NothingCommitted(error.to_string());
                }
            }
        }
        match tx.commit().await {
            Ok(()) => {
                tally.commits.fetch_add(1, Ordering::Relaxed);
                tally.writes.fetch_add(count as u64, Ordering::Relaxed);
                Ended::Answered
            }
            // The server answered the COMMIT with an error: it rolled back.
            Err(error @ sqlx::Error::Database(_)) => Ended::NothingCommitted(error.to_string()),
            Err(error) => Ended::Unknown(error.to_string()),
        }
    }
    .await;
    crate::metrics::QUEUE_COMMIT_DURATION.observe(&[], started.elapsed());
    match ended {
        Ended::Answered => {
            let mut ran = ran.into_iter();
            for parcel in parcels {
                let mut again = Vec::new();
                for write in parcel {
                    if ran.next() == Some(Ran::LostToLocks) {
                        again.push(write);
                    } else {
                        write.answer(None);
                    }
                }
                run_alone_in_order(pool, tally, again);
            }
        }
        Ended::NothingCommitted(why) => {
            tracing::warn!(error = %why, writes = count, "queue batch not committed; running its writes one by one");
            for parcel in parcels {
                run_alone_in_order(pool, tally, parcel);
            }
        }
        Ended::Unreachable(why) => {
            tracing::warn!(error = %why, writes = count, "queue database unreachable; its writes were not run");
            let why = format!("nothing was written: {why}");
            for write in parcels.into_iter().flatten() {
                write.answer(Some(&why));
            }
        }
        Ended::Unknown(why) => {
            tracing::error!(error = %why, "queue batch's commit did not complete");
            for write in parcels.into_iter().flatten() {
                write.answer(Some(&why));
            }
        }
    }
}

/// Runs `writes` (of one parcel) again alone, one after the other in their
/// order, on a task of their own.
fn run_alone_in_order(pool: &PgPool, tally: &Arc<Tally>, writes: Vec<Box<dyn Pending>>) {
    if writes.is_empty() {
        return;
    }
    let (pool, tally) = (pool.clone(), tally.clone());
    tokio::spawn(async move {
        for write in writes {
            write.alone(pool.clone(), tally.clone()).await;
        }
    });
}
