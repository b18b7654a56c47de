//! Group commit: every queue write of this process runs on one writer task,
//! which takes the writes waiting for it, runs them one after another inside
//! ONE `BEGIN IMMEDIATE` transaction and makes them durable with one commit.
//!
//! Why: each commit needs an fsync, and SQLite admits one writer at a time
//! anyway; a worker pool and concurrent dispatches that each committed on
//! their own paid one fsync per transition, queued behind each other.
//! Batching keeps the order and isolation of serial execution (the writes run
//! in arrival order on one connection, each seeing the ones before it) and
//! divides the fsyncs by the batch size.
//!
//! The fsync is not on the writer's path: the writer's connection commits
//! with `synchronous=NORMAL` (COMMIT writes the WAL frames, without waiting
//! for the disk), and the WAL syncer thread then fdatasyncs the WAL and only
//! after that answers the batch's callers. One sync covers every batch
//! committed before it, and while it runs the writer already executes and
//! commits the next batch, so a batch waits for the disk only once, in
//! parallel with the next one's statements. Measurements: bench/README.md.
//!
//! Invariants:
//! - a caller hears `Ok` only after a sync of the WAL that began after the
//!   commit of its write (the durability `synchronous=FULL` gives); when the
//!   commit or the sync fails, every write of the batch hears the failure;
//! - a committed write can be read by other connections up to one sync
//!   before it is durable. Nothing acts on it unseen: whatever acts on a job
//!   (a claim, a transition) is itself a write, whose answer waits for a
//!   later sync, which covers the job too (the WAL is one sequential file);
//! - the writer's connection is detached from the pool, so its
//!   `synchronous=NORMAL` never reaches another connection (they all commit
//!   with `synchronous=FULL`, see `db.rs`);
//! - each write of a batch runs inside its own savepoint (a lone write in the
//!   transaction itself), so a write that answers `Err` (a refused
//!   transition, a lost lease, a constraint) is rolled back alone and changes
//!   nothing, while the others in its batch still commit;
//! - the writes run on the writer task, not in the caller's future: a caller
//!   that goes away (an HTTP client hanging up) cannot cut another caller's
//!   write, or its own, in half;
//! - the writer's connection never checkpoints the WAL on its own
//!   (`wal_autocheckpoint = 0`): a checkpoint copies up to a thousand pages
//!   into the database file and fsyncs it, and on the writer's path every
//!   caller of that batch (and of the batches queued behind it) would wait
//!   for it. The checkpointer task does the copying instead, on another
//!   connection (SQLite lets a passive checkpoint run beside the writer),
//!   every [`CHECKPOINT_EVERY`] when something was committed;
//! - under any load the WAL starts over once it holds
//!   [`RESTART_WAL_AT_FRAMES`] pages and the checkpointer has run: SQLite
//!   starts it over only when a checkpoint has copied every frame, and a
//!   checkpoint beside a busy writer never catches up (the writer appends
//!   while it copies), so without this rule the WAL grows without bound under
//!   sustained load. When a checkpointer run finds the WAL that large, it
//!   first catches up (more runs while each leaves fewer frames behind), then
//!   the writer finishes the job between two batches, when nothing appends:
//!   its passive checkpoint copies the few frames left, and its next commit
//!   restarts the WAL.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::{Connection, Sqlite, SqliteConnection, SqlitePool};
use tokio::sync::{mpsc, oneshot};

use super::QueueError;

/// The most writes one transaction carries; more wait for the next commit.
const MAX_BATCH: usize = 128;

/// The WAL size (in frames, a page each) from which the writer finishes the
/// checkpointer's work so that the WAL starts over: SQLite's own
/// autocheckpoint size. A smaller WAL that the checkpointer could not finish
/// waits for a quieter moment. Under the ingest benchmark (1,000
/// dispatches/s, about 12,000 frames/s) every checkpointer run finds more,
/// so the writer finishes four checkpoints a second, each delaying one batch
/// by about 11 ms; finishing only from 8,192 frames (once a second, each
/// about 13 ms) measured no better at p99 and kept a 40 MiB WAL; finishing
/// at most once a second measured worse (p99 35-81 ms against 17-28 ms in
/// alternating runs, with a 55 MiB WAL: commits took longer, p99 10-18 ms
/// against 5-9 ms).
const RESTART_WAL_AT_FRAMES: i64 = 1000;

/// Writes waiting for the writer task before senders wait for room.
const BACKLOG: usize = 1024;

/// How often the checkpointer copies committed WAL pages into the database
/// file (when there were commits since its last run).
pub(super) const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// The savepoint each write runs in (writes run one at a time, so one name).
macro_rules! savepoint {
    () => {
        "queue_write"
    };
}

/// A boxed write future borrowing the batch's connection.
pub(super) type WriteFuture<'c, T> =
    Pin<Box<dyn Future<Output = Result<T, QueueError>> + Send + 'c>>;

/// `write` as it is: gives a write closure built outside a call of
/// `Queue::write` the higher-ranked type that call would have inferred.
pub(super) fn write_fn<T, F>(write: F) -> F
where
    F: for<'c> FnOnce(crate::db::Conn<'c>) -> WriteFuture<'c, T>,
{
    write
}

/// What a finished write hands back to the writer task: whether to keep its
/// changes (and if not, why), and how to answer its caller once the
/// commit's fate is known.
struct Finished {
    keep: bool,
    refusal: Option<String>,
    answer: Answer,
}

/// How a write is undone when it answers `Err` inside a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Undo {
    /// In its own savepoint: it is undone alone (one more round trip).
    Alone,
    /// With its whole batch: every write of the batch fails. For writes that
    /// only fail when the database does (an enqueue), where that round trip
    /// per write is the cost that matters.
    WithBatch,
}

/// Makes every batch committed so far durable: an fdatasync of the WAL (see
/// [`sync_wal_of`]; the tests inject their own).
type SyncWal = Arc<dyn Fn() -> std::io::Result<()> + Send + Sync>;

/// A write waiting for the writer task.
struct Pending {
    undo: Undo,
    write: ErasedWrite,
}

/// Sends a write's result to its caller, given why its batch's commit
/// failed (`None`: it committed).
type Answer = Box<dyn FnOnce(Option<&str>) + Send>;

/// A write with its type erased. Given the batch's connection it runs and
/// returns [`Finished`]; given `Err(why)` (its batch failed before it ran)
/// it answers its caller with that failure at once.
type ErasedWrite = Box<
    dyn for<'c> FnOnce(
            Result<&'c mut SqliteConnection, &'c str>,
        ) -> Pin<Box<dyn Future<Output = Finished> + Send + 'c>>
        + Send,
>;

/// The sending side of the writer task, started on first use.
pub(super) struct GroupCommit {
    pool: SqlitePool,
    sender: std::sync::OnceLock<mpsc::Sender<Pending>>,
    tally: Arc<Tally>,
    /// How committed batches are made durable; `None`: [`sync_wal_of`] the
    /// pool's database.
    sync: Option<SyncWal>,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit")
            .field("tally", &self.tally)
            .finish_non_exhaustive()
    }
}

/// What the writer task has committed, for `/metrics` and the tests.
#[derive(Debug, Default)]
struct Tally {
    commits: AtomicU64,
    writes: AtomicU64,
    /// How many commits the last checkpoint covered (all of them were in
    /// the WAL when it started); the tests wait on it.
    checkpointed: tokio::sync::watch::Sender<u64>,
    /// Set by the checkpointer after a run over a WAL of at least
    /// `restart_wal_at` frames: the writer checkpoints what is left between
    /// its next two batches.
    finish_checkpoint: std::sync::atomic::AtomicBool,
    restart_wal_at: i64,
    /// Checkpoints the writer finished with every frame copied (the WAL
    /// restarts at the next commit); the tests wait on it.
    wal_restarts: tokio::sync::watch::Sender<u64>,
}

fn writer_gone() -> QueueError {
    QueueError::CommitFailed("the queue's writer task has stopped".into())
}

impl GroupCommit {
    pub(super) fn new(pool: SqlitePool) -> Self {
        Self::restarting_wal_at(pool, RESTART_WAL_AT_FRAMES)
    }

    /// A group commit whose writer finishes checkpoints once the WAL holds
    /// `frames` frames.
    fn restarting_wal_at(pool: SqlitePool, frames: i64) -> Self {
        Self {
            pool,
            sender: std::sync::OnceLock::new(),
            tally: Arc::new(Tally {
                restart_wal_at: frames,
                ..Tally::default()
            }),
            sync: None,
        }
    }

    /// A group commit that makes its batches durable with `sync`.
    #[cfg(test)]
    fn syncing_with(pool: SqlitePool, sync: SyncWal) -> Self {
        Self {
            sync: Some(sync),
            ..Self::new(pool)
        }
    }

    /// Transactions committed, and the writes they carried.
    pub(super) fn committed(&self) -> (u64, u64) {
        (
            self.tally.commits.load(Ordering::Relaxed),
            self.tally.writes.load(Ordering::Relaxed),
        )
    }

    /// How many commits the checkpointer has copied into the database file.
    #[cfg(test)]
    fn checkpointed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tally.checkpointed.subscribe()
    }

    /// How many checkpoints the writer finished with every frame copied.
    #[cfg(test)]
    fn wal_restarts(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tally.wal_restarts.subscribe()
    }

    /// Runs `write` in the next batch and returns its answer once the batch
    /// has committed. `write` runs on the writer task with the batch's
    /// connection, inside a transaction that already holds the write lock.
    pub(super) async fn run<T, F>(&self, undo: Undo, write: F) -> Result<T, QueueError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> WriteFuture<'c, T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel::<Result<T, QueueError>>();
        let erased: ErasedWrite = Box::new(move |conn| {
            Box::pin(async move {
                let result = match conn {
                    Ok(conn) => write(conn).await,
                    Err(why) => Err(QueueError::CommitFailed(why.to_string())),
                };
                Finished {
                    keep: result.is_ok(),
                    refusal: result.as_ref().err().map(ToString::to_string),
                    answer: Box::new(move |commit_failure: Option<&str>| {
                        let result = match (result, commit_failure) {
                            (Ok(_), Some(why)) => Err(QueueError::CommitFailed(why.to_string())),
                            (result, _) => result,
                        };
                        // The caller may have gone away; its write stands.
                        let _ = reply.send(result);
                    }),
                }
            })
        });
        let sender = self.sender.get_or_init(|| {
            let (sender, receiver) = mpsc::channel(BACKLOG);
            let sync = self.sync.clone().unwrap_or_else(|| {
                let database = self.pool.connect_options().get_filename().to_path_buf();
                Arc::new(move || sync_wal_of(&database))
            });
            let durable = start_wal_syncer(sync);
            tokio::spawn(writer_task(
                self.pool.clone(),
                self.tally.clone(),
                receiver,
                durable,
            ));
            tokio::spawn(checkpointer(self.pool.clone(), self.tally.clone()));
            sender
        });
        sender
            .send(Pending {
                undo,
                write: erased,
            })
            .await
            .map_err(|_| writer_gone())?;
        answer.await.map_err(|_| writer_gone())?
    }
}

/// Takes whatever writes are waiting (at least one), commits them as one
/// batch, repeats; ends when every `Queue` handle is gone.
///
/// The task keeps one pooled connection for its batches: its page cache
/// stays warm from one batch to the next (another connection would re-read
/// every page the last commit touched), and no batch waits for the pool. A
/// batch that fails gives its connection back closed; the next batch takes
/// a fresh one. When the pool closes, the connection goes back at once.
async fn writer_task(
    pool: SqlitePool,
    tally: Arc<Tally>,
    mut receiver: mpsc::Receiver<Pending>,
    durable: WalSyncer,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut kept: Option<SqliteConnection> = None;
    loop {
        // An idle writer closes its connection when the pool closes (daemon
        // shutdown), and takes no further writes.
        let received = if kept.is_some() {
            tokio::select! {
                received = receiver.recv_many(&mut batch, MAX_BATCH) => received,
                () = pool.close_event() => {
                    if let Some(conn) = kept.take() {
                        let _ = conn.close().await;
                    }
                    continue;
                }
            }
        } else {
            receiver.recv_many(&mut batch, MAX_BATCH).await
        };
        if received == 0 {
            break;
        }
        let writes = std::mem::take(&mut batch);
        let count = writes.len() as u64;
        // The connection is detached: closing the pool does not wait for
        // it, so a write can arrive after the close. It must not run.
        if pool.is_closed()
            && let Some(conn) = kept.take()
        {
            let _ = conn.close().await;
        }
        let mut conn = match kept.take() {
            Some(conn) => conn,
            None => match writer_connection(&pool).await {
                Ok(conn) => conn,
                Err(error) => {
                    let why = error.to_string();
                    tracing::error!(%error, "queue batch not committed: no database connection");
                    for pending in writes {
                        let finished = (pending.write)(Err(&why)).await;
                        (finished.answer)(Some(&why));
                    }
                    continue;
                }
            },
        };
        let started = std::time::Instant::now();
        match commit_batch(&mut conn, writes).await {
            BatchOutcome::Committed(answers) => {
                crate::metrics::QUEUE_COMMIT_DURATION.observe(&[], started.elapsed());
                tally.commits.fetch_add(1, Ordering::Relaxed);
                tally.writes.fetch_add(count, Ordering::Relaxed);
                durable.answer_after_sync(answers);
                if tally.finish_checkpoint.swap(false, Ordering::Relaxed) {
                    finish_checkpoint(&mut conn, &tally).await;
                }
                kept = Some(conn);
            }
            BatchOutcome::Refused => kept = Some(conn),
            BatchOutcome::Failed => {
                // Whatever state the connection is in, it is not reused.
                let _ = conn.close().await;
            }
        }
    }
}

/// The writer's connection: taken from the pool and detached from it (it
/// never goes back), with automatic checkpoints off (the checkpointer runs
/// them beside it) and `synchronous=NORMAL` (its commits do not wait for
/// the disk; the WAL syncer makes them durable before anyone hears of them).
async fn writer_connection(pool: &SqlitePool) -> Result<SqliteConnection, sqlx::Error> {
    let mut conn = pool.acquire().await?.detach();
    sqlx::raw_sql("PRAGMA wal_autocheckpoint = 0; PRAGMA synchronous = NORMAL")
        .execute(&mut conn)
        .await?;
    Ok(conn)
}

/// Hands committed batches to the WAL syncer thread, which answers their
/// callers once the WAL is synced.
struct WalSyncer {
    committed: std::sync::mpsc::Sender<Vec<Answer>>,
}

impl WalSyncer {
    /// Answers `answers` (a committed batch) after the next WAL sync.
    fn answer_after_sync(&self, answers: Vec<Answer>) {
        if let Err(std::sync::mpsc::SendError(answers)) = self.committed.send(answers) {
            // Only when the syncer thread died: nothing confirms the batch.
            let why = "the queue's WAL syncer has stopped, so the commit is not confirmed durable";
            answers.into_iter().for_each(|answer| answer(Some(why)));
        }
    }
}

/// Starts the thread that syncs the WAL and then answers the batches
/// committed before the sync began. It ends once the writer task is gone.
fn start_wal_syncer(sync: SyncWal) -> WalSyncer {
    let (committed, batches) = std::sync::mpsc::channel::<Vec<Answer>>();
    let run = move || {
        while let Ok(mut answers) = batches.recv() {
            // Every batch committed so far: one sync covers them all.
            while let Ok(more) = batches.try_recv() {
                answers.extend(more);
            }
            let started = std::time::Instant::now();
            let synced = sync();
            crate::metrics::QUEUE_SYNC_DURATION.observe(&[], started.elapsed());
            let failure = synced.err().map(|error| {
                tracing::error!(%error, "queue commits not confirmed durable: syncing the WAL failed");
                format!(
                    "syncing the queue's WAL failed ({error}), so the commit may not survive a crash"
                )
            });
            answers
                .into_iter()
                .for_each(|answer| answer(failure.as_deref()));
        }
    };
    // Should the OS refuse a thread, `run` (and with it the receiving end) is
    // dropped, and every commit is answered as not confirmed durable.
    if let Err(error) = std::thread::Builder::new()
        .name("teammem-wal-sync".into())
        .spawn(run)
    {
        tracing::error!(%error, "no thread for the queue's WAL syncer; no write can be confirmed");
    }
    WalSyncer { committed }
}

/// fdatasync of the WAL beside `database` (its `-wal` file), which makes
/// every commit written to it durable. Opened afresh for each sync: SQLite
/// deletes the WAL when its last connection closes and creates a new file
/// later, and a kept descriptor would sync the deleted one. Without a WAL
/// file, its last connection checkpointed everything into the database file
/// (with an fsync) before deleting it; that file is synced again to be sure.
fn sync_wal_of(database: &Path) -> std::io::Result<()> {
    let mut wal = database.as_os_str().to_owned();
    wal.push("-wal");
    match std::fs::File::open(PathBuf::from(wal)) {
        Ok(file) => file.sync_data(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::File::open(database)?.sync_all()
        }
        Err(error) => Err(error),
    }
}

/// The writer's share of a checkpoint, run between two batches: copies the
/// frames committed since the checkpointer's last run, so that (unless a
/// reader still uses an older snapshot) every frame is in the database file
/// and the next commit restarts the WAL from its beginning. Passive: it
/// never waits for readers. A failure is logged; the next run retries.
async fn finish_checkpoint(conn: &mut SqliteConnection, tally: &Tally) {
    match passive_checkpoint(conn, "writer").await {
        Ok((frames, copied)) if frames == copied => {
            tally.wal_restarts.send_modify(|n| *n += 1);
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "WAL checkpoint failed; the next one retries"),
    }
}

/// One passive checkpoint, timed in [`QUEUE_CHECKPOINT_DURATION`] under
/// `connection`: how many frames the WAL held (counted from its last
/// restart) and how many of them are now in the database file.
///
/// [`QUEUE_CHECKPOINT_DURATION`]: crate::metrics::QUEUE_CHECKPOINT_DURATION
async fn passive_checkpoint<'e, E>(
    executor: E,
    connection: &'static str,
) -> Result<(i64, i64), sqlx::Error>
where
    E: sqlx::Executor<'e, Database = Sqlite>,
{
    let started = std::time::Instant::now();
    // One row: (busy, frames in the WAL, frames copied).
    let result: Result<(i64, i64, i64), sqlx::Error> =
        sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(executor)
            .await;
    crate::metrics::QUEUE_CHECKPOINT_DURATION.observe(&[connection], started.elapsed());
    result.map(|(_, frames, copied)| (frames, copied))
}

/// Copies committed WAL pages into the database file every
/// [`CHECKPOINT_EVERY`] when the writer committed something since the last
/// run, on a connection of its own; ends when the pool closes.
///
/// A passive checkpoint never waits for the writer or for readers: it copies
/// what it can and the next run continues. (The WAL file is reused from its
/// start once everything in it was copied, as with SQLite's own automatic
/// checkpoints.)
async fn checkpointer(pool: SqlitePool, tally: Arc<Tally>) {
    let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut copied_up_to = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = pool.close_event() => break,
        }
        let commits = tally.commits.load(Ordering::Relaxed);
        if commits == copied_up_to {
            continue;
        }
        match passive_checkpoint(&pool, "checkpointer").await {
            // A WAL this long has not started over for a while, and a
            // writer that appended while this run copied keeps it from
            // doing so.
            Ok((frames, copied)) => {
                copied_up_to = commits;
                if frames >= tally.restart_wal_at {
                    catch_up(&pool, frames - copied).await;
                    tally.finish_checkpoint.store(true, Ordering::Relaxed);
                }
                tally.checkpointed.send_replace(commits);
            }
            Err(error) if pool.is_closed() => {
                tracing::debug!(%error, "checkpoint skipped: the database is closing");
                break;
            }
            Err(error) => {
                tracing::warn!(%error, "WAL checkpoint failed; the next one retries")
            }
        }
    }
}

/// Runs further passive checkpoints while each leaves fewer frames behind
/// than the one before (at most [`CATCH_UP_RUNS`]): each copies only what the
/// writer appended during the last, so the writer's finishing checkpoint
/// after them, which delays a batch, has few frames left to copy (its p50
/// fell from 5.7–5.9 ms to 2.4–3.0 ms at 1,000 dispatches/s).
async fn catch_up(pool: &SqlitePool, mut left: i64) {
    for _ in 0..CATCH_UP_RUNS {
        match passive_checkpoint(pool, "checkpointer").await {
            Ok((frames, copied)) if frames - copied < left => left = frames - copied,
            _ => break,
        }
    }
}

/// The most extra checkpointer runs before the writer finishes a checkpoint.
const CATCH_UP_RUNS: usize = 3;

/// How a batch ended.
enum BatchOutcome {
    /// Committed; its callers are answered after the WAL sync.
    Committed(Vec<Answer>),
    /// A lone write answered `Err`; its transaction was rolled back.
    Refused,
    /// The database failed the batch: nothing of it is durable.
    Failed,
}

/// Runs and commits one batch on `conn`.
async fn commit_batch(conn: &mut SqliteConnection, writes: Vec<Pending>) -> BatchOutcome {
    let mut answers = Vec::with_capacity(writes.len());
    let mut waiting = writes.into_iter();
    // A lone write needs no savepoint: refusing it rolls back the whole
    // transaction. In a batch, each `Undo::Alone` write opens one (releasing
    // the previous one in the same round trip; an `Undo::WithBatch` write
    // runs inside whatever is open); COMMIT releases the last.
    let alone = waiting.len() == 1;
    let outcome: Result<bool, String> = async {
        let mut tx = conn
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(|e| e.to_string())?;
        let mut open = false;
        for Pending { undo, write } in waiting.by_ref() {
            if !alone && undo == Undo::Alone {
                let statement = if open {
                    concat!("RELEASE ", savepoint!(), "; SAVEPOINT ", savepoint!())
                } else {
                    concat!("SAVEPOINT ", savepoint!())
                };
                sqlx::raw_sql(statement)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| e.to_string())?;
                open = true;
            }
            let finished = write(Ok(&mut *tx)).await;
            let keep = finished.keep;
            let refusal = finished.refusal.clone();
            answers.push(finished);
            if !keep {
                if alone {
                    tx.rollback().await.map_err(|e| e.to_string())?;
                    return Ok(false);
                }
                if undo == Undo::WithBatch {
                    // Dropping the transaction rolls the whole batch back.
                    return Err(format!(
                        "another write of its batch failed ({})",
                        refusal.unwrap_or_default()
                    ));
                }
                sqlx::raw_sql(concat!("ROLLBACK TO ", savepoint!()))
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        tx.commit().await.map_err(|e| e.to_string())?;
        Ok(true)
    }
    .await;
    match outcome {
        Ok(true) => BatchOutcome::Committed(
            answers
                .into_iter()
                .map(|finished| finished.answer)
                .collect(),
        ),
        Ok(false) => {
            answers
                .into_iter()
                .for_each(|finished| (finished.answer)(None));
            BatchOutcome::Refused
        }
        Err(why) => {
            // Nothing of the batch is durable: the transaction rolled back
            // when it was dropped. Every write hears why, including those
            // that never ran (a write that failed hears its own error).
            tracing::error!(error = %why, "queue batch not committed");
            answers
                .into_iter()
                .for_each(|finished| (finished.answer)(Some(&why)));
            for Pending { write, .. } in waiting {
                let finished = write(Err(&why)).await;
                (finished.answer)(Some(&why));
            }
            BatchOutcome::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group commit over a fresh database with one table, `notes`, and a
    /// deferred foreign key that only fails at COMMIT.
    async fn setup() -> (GroupCommit, SqlitePool, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("temp dir");
        let pool = crate::db::open_with(&dir.path().join("data"), 4)
            .await
            .expect("open database");
        for statement in [
            "CREATE TABLE parents (id INTEGER PRIMARY KEY)",
            "CREATE TABLE notes (text TEXT NOT NULL, \
             parent INTEGER REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)",
        ] {
            sqlx::query(statement)
                .execute(&pool)
                .await
                .expect("create table");
        }
        (GroupCommit::new(pool.clone()), pool, dir)
    }

    fn note(
        text: &'static str,
        parent: Option<i64>,
        then_fail: bool,
    ) -> impl for<'c> FnOnce(&'c mut SqliteConnection) -> WriteFuture<'c, ()> + Send + 'static {
        move |conn| {
            Box::pin(async move {
                sqlx::query("INSERT INTO notes (text, parent) VALUES ($1, $2)")
                    .bind(text)
                    .bind(parent)
                    .execute(conn)
                    .await?;
                if then_fail {
                    return Err(QueueError::InvalidInput {
                        field: "note",
                        reason: format!("{text} refused after writing"),
                    });
                }
                Ok(())
            })
        }
    }

    async fn notes(pool: &SqlitePool) -> Vec<String> {
        sqlx::query_scalar("SELECT text FROM notes ORDER BY rowid")
            .fetch_all(pool)
            .await
            .expect("read notes")
    }

    // The tests run on tokio's current-thread runtime: the three writes are
    // all queued before the writer task first runs, so they form one batch.

    #[tokio::test]
    async fn a_refused_write_is_undone_alone_and_its_batch_commits_once() {
        let (writes, pool, _dir) = setup().await;
        let (first, refused, last) = tokio::join!(
            writes.run(Undo::Alone, note("first", None, false)),
            writes.run(Undo::Alone, note("refused", None, true)),
            writes.run(Undo::Alone, note("last", None, false)),
        );
        first.expect("first committed");
        last.expect("last committed");
        let refused = refused.expect_err("the refused write answers its own error");
        assert!(
            refused.to_string().contains("refused after writing"),
            "{refused}"
        );
        assert_eq!(notes(&pool).await, ["first", "last"]);
        assert_eq!(writes.committed(), (1, 3), "one commit carried all three");
    }

    /// A pragma's value on the writer's connection.
    async fn writer_pragma(writes: &GroupCommit, pragma: &'static str) -> i64 {
        writes
            .run(Undo::Alone, move |conn| {
                Box::pin(async move {
                    Ok(
                        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("PRAGMA {pragma}")))
                            .fetch_one(conn)
                            .await?,
                    )
                })
            })
            .await
            .expect("read the writer's pragma")
    }

    /// The writer's connection never checkpoints; the checkpointer copies
    /// what it committed into the database file itself.
    #[tokio::test]
    async fn the_checkpointer_not_the_writer_copies_commits_into_the_database_file() {
        let (writes, pool, dir) = setup().await;
        let mut checkpointed = writes.checkpointed();
        assert_eq!(
            writer_pragma(&writes, "wal_autocheckpoint").await,
            0,
            "the writer does not checkpoint"
        );
        // The writer's commits leave the fsync to the WAL syncer, and that
        // setting stays on its detached connection: the pool's commit with FULL.
        let synchronous = writer_pragma(&writes, "synchronous").await;
        assert_eq!(synchronous, 1, "the writer commits with synchronous=NORMAL");
        let mut pooled = Vec::new();
        for _ in 0..4 {
            pooled.push(pool.acquire().await.expect("every pooled connection"));
        }
        for conn in &mut pooled {
            let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
                .fetch_one(&mut **conn)
                .await
                .expect("read a pooled connection's pragma");
            assert_eq!(
                synchronous, 2,
                "pooled connections commit with synchronous=FULL"
            );
        }
        drop(pooled);
        for text in ["one", "two", "three"] {
            writes
                .run(Undo::Alone, note(text, None, false))
                .await
                .expect("note committed");
        }
        let (committed, _) = writes.committed();
        let ran = checkpointed.wait_for(|covered| *covered >= committed);
        tokio::time::timeout(std::time::Duration::from_secs(30), ran)
            .await
            .expect("the checkpointer runs within 30 s")
            .expect("the checkpointer is alive");

        // A copy of the database file alone (no WAL beside it) holds only what
        // was checkpointed.
        let copy = tempfile::tempdir().expect("temp dir");
        let copied = copy.path().join("data");
        crate::db::prepare_data_dir(&copied).unwrap();
        std::fs::copy(
            crate::db::database_path(&dir.path().join("data")),
            crate::db::database_path(&copied),
        )
        .expect("copy the database file");
        let checkpointed = crate::db::open_with(&copied, 1)
            .await
            .expect("open the copy");
        assert_eq!(notes(&checkpointed).await, ["one", "two", "three"]);
    }

    /// The WAL header's checkpoint sequence number: SQLite adds one each
    /// time the WAL starts over from its beginning.
    fn wal_restart_count(dir: &std::path::Path) -> u32 {
        let mut wal = crate::db::database_path(dir).into_os_string();
        wal.push("-wal");
        let header = std::fs::read(&wal).expect("read the WAL");
        u32::from_be_bytes(header[12..16].try_into().expect("a WAL header"))
    }

    /// Under writes that never pause, the checkpointer alone never copies
    /// every frame (the writer appends while it copies), so the WAL would
    /// only grow; the writer finishes each checkpoint between two batches
    /// and the WAL starts over.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_starts_over_while_writes_never_pause() {
        let (_, pool, dir) = setup().await;
        // Any WAL the checkpointer leaves unfinished is large enough here.
        let writes = Arc::new(GroupCommit::restarting_wal_at(pool, 1));
        let mut restarts = writes.wal_restarts();
        writes
            .run(Undo::Alone, note("first", None, false))
            .await
            .expect("first note");
        let before = wal_restart_count(&dir.path().join("data"));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut writers = Vec::new();
        for _ in 0..4 {
            let (writes, stop) = (writes.clone(), stop.clone());
            writers.push(tokio::spawn(async move {
                let mut written = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    writes
                        .run(Undo::Alone, |conn| {
                            Box::pin(async move {
                                sqlx::query("INSERT INTO notes (text) VALUES ($1)")
                                    .bind("x".repeat(4096))
                                    .execute(conn)
                                    .await?;
                                Ok(())
                            })
                        })
                        .await
                        .expect("note committed");
                    written += 1;
                }
                written
            }));
        }
        let finished = restarts.wait_for(|n| *n >= 2);
        tokio::time::timeout(std::time::Duration::from_secs(60), finished)
            .await
            .expect("the writer finishes two checkpoints within 60 s")
            .expect("the writer is alive");
        stop.store(true, Ordering::Relaxed);
        let mut written = 0;
        for writer in writers {
            written += writer.await.expect("writer loop");
        }
        // The restart shows in the header once the next commit writes it.
        writes
            .run(Undo::Alone, note("last", None, false))
            .await
            .expect("last note");
        let after = wal_restart_count(&dir.path().join("data"));
        assert!(
            after >= before + 2,
            "the WAL started over {} times while {written} writes kept coming",
            after - before
        );
    }

    #[tokio::test]
    async fn a_lone_refused_write_rolls_back_its_transaction() {
        let (writes, pool, _dir) = setup().await;
        writes
            .run(Undo::Alone, note("refused", None, true))
            .await
            .expect_err("refused");
        assert!(notes(&pool).await.is_empty());
        assert_eq!(writes.committed(), (0, 0));
        writes
            .run(Undo::Alone, note("next", None, false))
            .await
            .expect("next");
        assert_eq!(notes(&pool).await, ["next"]);
        assert_eq!(writes.committed(), (1, 1));
    }

    #[tokio::test]
    async fn a_failed_commit_fails_every_write_of_the_batch_and_keeps_none() {
        let (writes, pool, _dir) = setup().await;
        // "orphan" names a parent that does not exist: the deferred foreign
        // key lets the statement pass and fails the COMMIT.
        let (innocent, orphan) = tokio::join!(
            writes.run(Undo::Alone, note("innocent", None, false)),
            writes.run(Undo::Alone, note("orphan", Some(7), false)),
        );
        for answer in [innocent, orphan] {
            let error = answer.expect_err("nothing was committed");
            assert!(
                matches!(error, QueueError::CommitFailed(_)),
                "unexpected error: {error}"
            );
            assert!(error.to_string().contains("retry"), "{error}");
        }
        assert!(notes(&pool).await.is_empty());
        assert_eq!(writes.committed(), (0, 0));
        // The writer goes on: the next batch commits.
        writes
            .run(Undo::Alone, note("after", None, false))
            .await
            .expect("next batch");
        assert_eq!(notes(&pool).await, ["after"]);
    }

    #[tokio::test]
    async fn a_caller_that_goes_away_does_not_cut_its_write() {
        let (writes, pool, _dir) = setup().await;
        let writes = Arc::new(writes);
        let abandoned = {
            let writes = writes.clone();
            tokio::spawn(async move {
                writes
                    .run(Undo::Alone, note("abandoned", None, false))
                    .await
            })
        };
        // Let the spawned caller hand its write over, then drop the caller.
        tokio::task::yield_now().await;
        abandoned.abort();
        writes
            .run(Undo::Alone, note("next", None, false))
            .await
            .expect("next write");
        assert_eq!(notes(&pool).await, ["abandoned", "next"]);
    }

    #[tokio::test]
    async fn closing_the_pool_closes_the_writers_connection_and_ends_its_writes() {
        let (writes, pool, _dir) = setup().await;
        writes
            .run(Undo::Alone, note("kept", None, false))
            .await
            .expect("write");
        // The writer now idles holding its (detached) connection; closing the
        // pool must not wait for it (the daemon closes the pool at shutdown),
        // and no write runs on that connection afterwards.
        tokio::time::timeout(std::time::Duration::from_secs(30), pool.close())
            .await
            .expect("pool.close() returned while the writer idles");
        let error = writes
            .run(Undo::Alone, note("late", None, false))
            .await
            .expect_err("a closed pool takes no writes");
        assert!(!error.to_string().is_empty());
    }

    #[tokio::test]
    async fn a_write_undone_with_its_batch_fails_the_whole_batch_and_keeps_none() {
        let (writes, pool, _dir) = setup().await;
        let (guarded, failing, other) = tokio::join!(
            writes.run(Undo::Alone, note("guarded", None, false)),
            writes.run(Undo::WithBatch, note("failing", None, true)),
            writes.run(Undo::WithBatch, note("other", None, false)),
        );
        let failing = failing.expect_err("the failing write hears its own error");
        assert!(!matches!(failing, QueueError::CommitFailed(_)), "{failing}");
        for error in [guarded.expect_err("guarded"), other.expect_err("other")] {
            assert!(
                error
                    .to_string()
                    .contains("another write of its batch failed"),
                "{error}"
            );
        }
        assert!(notes(&pool).await.is_empty());
        // Without a failure, both kinds commit together, and a refused
        // savepointed write is still undone alone among them.
        let (kept, refused, also_kept) = tokio::join!(
            writes.run(Undo::WithBatch, note("kept", None, false)),
            writes.run(Undo::Alone, note("refused", None, true)),
            writes.run(Undo::WithBatch, note("also kept", None, false)),
        );
        kept.expect("kept");
        refused.expect_err("refused");
        also_kept.expect("also kept");
        assert_eq!(notes(&pool).await, ["kept", "also kept"]);
    }

    /// A note whose write tells `ran` once it has run in its batch.
    fn signalled_note(
        text: &'static str,
        ran: tokio::sync::mpsc::UnboundedSender<()>,
    ) -> impl for<'c> FnOnce(&'c mut SqliteConnection) -> WriteFuture<'c, ()> + Send + 'static {
        move |conn| {
            Box::pin(async move {
                note(text, None, false)(conn).await?;
                let _ = ran.send(());
                Ok(())
            })
        }
    }

    /// The fsync is off the writer's path: while the WAL sync after one
    /// batch is held, the writer commits the next ones, and no caller of a
    /// batch the held sync covers has its answer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_writer_commits_the_next_batch_while_the_wal_sync_runs() {
        let (_, pool, _dir) = setup().await;
        let (began, mut sync_began) = tokio::sync::mpsc::unbounded_channel::<()>();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let released = std::sync::Mutex::new(released);
        let syncs = Arc::new(AtomicU64::new(0));
        let counted = syncs.clone();
        // The first sync holds until the test releases it.
        let writes = Arc::new(GroupCommit::syncing_with(
            pool.clone(),
            Arc::new(move || {
                if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                    let _ = began.send(());
                    let _ = released.lock().expect("release lock").recv();
                }
                Ok(())
            }),
        ));
        let write = |text: &'static str, ran: tokio::sync::mpsc::UnboundedSender<()>| {
            let writes = writes.clone();
            tokio::spawn(async move { writes.run(Undo::Alone, signalled_note(text, ran)).await })
        };
        let within = |what: &'static str| {
            move |waited: Result<Option<()>, tokio::time::error::Elapsed>| {
                waited
                    .unwrap_or_else(|_| panic!("{what} within 30 s"))
                    .unwrap_or_else(|| panic!("{what}: the sender is alive"))
            }
        };
        let patience = std::time::Duration::from_secs(30);
        let (ran, mut first_ran) = tokio::sync::mpsc::unbounded_channel();
        let first = write("first", ran);
        within("the first write runs")(tokio::time::timeout(patience, first_ran.recv()).await);
        within("the first sync begins")(tokio::time::timeout(patience, sync_began.recv()).await);
        // `third` is sent once `second` has run, so it runs in the batch
        // after `second`'s: when it has run, that batch has committed.
        let (ran, mut second_ran) = tokio::sync::mpsc::unbounded_channel();
        let second = write("second", ran);
        within("the second write runs while the first sync is held")(
            tokio::time::timeout(patience, second_ran.recv()).await,
        );
        let (ran, mut third_ran) = tokio::sync::mpsc::unbounded_channel();
        let third = write("third", ran);
        within("the third write runs while the first sync is held")(
            tokio::time::timeout(patience, third_ran.recv()).await,
        );
        assert_eq!(
            notes(&pool).await[..2],
            ["first", "second"],
            "the second batch committed while the first sync was held"
        );
        assert_eq!(
            syncs.load(Ordering::SeqCst),
            1,
            "the first sync is still held"
        );
        assert!(
            !first.is_finished(),
            "no answer before the sync that covers it"
        );
        release.send(()).expect("the held sync is waiting");
        for answer in [first, second, third] {
            answer.await.expect("caller").expect("committed and synced");
        }
        assert_eq!(notes(&pool).await, ["first", "second", "third"]);
        let syncs = syncs.load(Ordering::SeqCst);
        assert!(
            (2..=3).contains(&syncs),
            "the batches after the held sync took {syncs} syncs in all"
        );
    }

    /// A write is confirmed by the sync after its commit: when that sync
    /// fails, its caller hears so, although readers already see the write.
    #[tokio::test]
    async fn a_failed_wal_sync_fails_the_writes_it_was_to_confirm() {
        let (_, pool, _dir) = setup().await;
        let failing = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let fails = failing.clone();
        let writes = GroupCommit::syncing_with(
            pool.clone(),
            Arc::new(move || {
                if fails.load(Ordering::SeqCst) {
                    Err(std::io::Error::other("the disk is gone"))
                } else {
                    Ok(())
                }
            }),
        );
        let error = writes
            .run(Undo::Alone, note("unconfirmed", None, false))
            .await
            .expect_err("not confirmed durable");
        assert!(matches!(error, QueueError::CommitFailed(_)), "{error}");
        let message = error.to_string();
        assert!(
            message.contains("syncing the queue's WAL failed (the disk is gone)")
                && message.contains("retry"),
            "{message}"
        );
        assert_eq!(notes(&pool).await, ["unconfirmed"]);
        failing.store(false, Ordering::SeqCst);
        writes
            .run(Undo::Alone, note("confirmed", None, false))
            .await
            .expect("confirmed once the sync succeeds");
    }

    /// The real sync: the WAL while it exists, else the database file (its
    /// last connection checkpointed into it and removed the WAL), else an
    /// error.
    #[tokio::test]
    async fn the_wal_sync_syncs_the_wal_or_else_the_database_file() {
        let (writes, _pool, dir) = setup().await;
        writes
            .run(Undo::Alone, note("one", None, false))
            .await
            .expect("committed through the real sync");
        let database = crate::db::database_path(&dir.path().join("data"));
        let mut wal = database.clone().into_os_string();
        wal.push("-wal");
        assert!(std::path::Path::new(&wal).exists(), "the WAL is there");
        sync_wal_of(&database).expect("sync the WAL");
        let without_wal = dir.path().join("checkpointed.db");
        std::fs::write(&without_wal, b"pages").expect("a database file alone");
        sync_wal_of(&without_wal).expect("sync the database file");
        let error = sync_wal_of(&dir.path().join("missing.db")).expect_err("nothing to sync");
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    }
}
