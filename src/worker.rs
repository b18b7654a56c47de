//! The worker pool: claims jobs from the queue and runs them through a [`JobHandler`].
//!
//! Invariants:
//! - a worker runs at most one job at a time and heartbeats its lease while
//!   the handler runs; a lost lease (the job was cancelled or rescued) drops
//!   the handler's future at once, which kills anything it spawned with
//!   `kill_on_drop`;
//! - a worker claims its next job together with the last one's completion
//!   (`Queue::complete_and_claim`, usually one commit), and gives that job
//!   back unstarted when shutdown has begun;
//! - every outcome goes back through the queue's fenced calls, so a stale worker
//!   can never overwrite a newer attempt; an outcome the database could not
//!   take (it was unreachable) is tried again, with growing pauses, for as
//!   long as the lease may still hold, and a try whose answer was lost can
//!   only be followed by a refused one, never by a second write;
//! - on shutdown no new job is claimed; a running job gets the grace period to
//!   finish and is otherwise released back to `queued` without counting the attempt;
//! - with [`PoolSettings::job_nice`] set, jobs run on a runtime of their own
//!   whose threads (and every process they spawn: writer children, agent CLIs)
//!   run at a lower CPU priority, so background reconciliation never delays the
//!   front door (dispatch ingest, the API, `/mcp`) on a busy machine.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::ids::Sha;
use crate::metrics;
use crate::queue::{Claimed, Completion, CursorMove, Job, Queue, QueueError};

/// Why a handler could not finish a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFailure {
    pub reason: String,
    /// A retryable failure goes back to the queue with backoff until
    /// `max_attempts`; a permanent one fails the job at once.
    pub retryable: bool,
    /// The receipt of an attempt that wrote something before it failed
    /// (`partial`, `needs_review`); stored on the job.
    pub receipt: Option<serde_json::Value>,
}

impl JobFailure {
    /// A failure without a receipt, retried when `retryable`.
    pub fn new(reason: impl Into<String>, retryable: bool) -> Self {
        JobFailure {
            reason: reason.into(),
            retryable,
            receipt: None,
        }
    }

    /// A failure the queue retries with backoff (until `max_attempts`).
    pub fn retryable(reason: impl Into<String>) -> Self {
        Self::new(reason, true)
    }

    /// A failure that fails the job at once.
    pub fn permanent(reason: impl Into<String>) -> Self {
        Self::new(reason, false)
    }
}

pub type JobFuture<'a> = Pin<Box<dyn Future<Output = Result<Completion, JobFailure>> + Send + 'a>>;

/// What the workers call to run one claimed job.
pub trait JobHandler: Send + Sync + 'static {
    fn run<'a>(&'a self, job: &'a Job) -> JobFuture<'a>;

    /// [`Self::run`], for a range job whose source's cursor named `cursor`
    /// when the job started (`None`: no cursor yet, or it could not be
    /// read): a handler that describes the source's tip learns from it
    /// whether the job's range is the newest reconciled. The default
    /// ignores it.
    fn run_from<'a>(&'a self, job: &'a Job, cursor: Option<Sha>) -> JobFuture<'a> {
        let _ = cursor;
        self.run(job)
    }

    /// Finishes what dropped jobs left behind (a runner revokes their wiki
    /// tokens); the pool awaits it on shutdown, after the last job ended.
    fn drain(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async {})
    }

    /// Why jobs cannot run as configured (for `/readyz` and the start-up
    /// log); empty when they can.
    fn problems(&self) -> Vec<String> {
        Vec::new()
    }

    /// How the jobs' agents are isolated (`/readyz`), when the agent is an
    /// external process: the sandbox's mechanisms in force.
    fn agent_isolation(&self) -> Option<String> {
        None
    }

    /// How a range job that reconciled its range moves its source's cursor,
    /// which names `cursor` now (`None`: no cursor yet): a handler that can
    /// ask the forge says whether the job's `after` descends from it. The
    /// default asks nobody, and the queue then moves the cursor only where it
    /// can tell on its own that this is forward.
    fn cursor_move<'a>(&'a self, _job: &'a Job, _cursor: Option<&'a Sha>) -> CursorFuture<'a> {
        Box::pin(async { CursorMove::Unchecked })
    }
}

/// What [`JobHandler::cursor_move`] returns.
pub type CursorFuture<'a> = Pin<Box<dyn Future<Output = CursorMove> + Send + 'a>>;

/// The cursor decision for a finished job: only a range job that reconciled
/// its range may move the cursor, and the handler judges its `after` against
/// the cursor stored now. A cursor the queue cannot read leaves the decision
/// to the queue's own guard.
async fn cursor_move(
    handler: &dyn JobHandler,
    queue: &Queue,
    job: &Job,
    completion: &Completion,
) -> CursorMove {
    if job.kind.range().is_none() || !completion.reconciles() {
        return CursorMove::Unchecked;
    }
    match queue.cursor(&job.source).await {
        Ok(cursor) => {
            handler
                .cursor_move(job, cursor.as_ref().map(|cursor| &cursor.sha))
                .await
        }
        Err(error) => {
            tracing::warn!(%error, "reading the source's cursor failed; it moves only where the queue can tell that is forward");
            CursorMove::Unchecked
        }
    }
}

/// The handler of a build that has no job runner: it fails every job at once
/// with a reason an operator can read, instead of pretending to succeed.
pub struct NoRunner;

impl JobHandler for NoRunner {
    fn run<'a>(&'a self, _job: &'a Job) -> JobFuture<'a> {
        Box::pin(async {
            Err(JobFailure::permanent(
                "this teammem build has no job runner; upgrade teammem and retry the job",
            ))
        })
    }
}

/// Settings of the pool, from `[queue]`.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub workers: usize,
    pub lease: Duration,
    pub job_timeout: Duration,
    pub shutdown_grace: Duration,
    /// How long an idle worker waits before looking again when nobody woke it
    /// (jobs whose backoff ran out need no wake-up call).
    pub idle_poll: Duration,
    /// `Some(n)`: run jobs on their own runtime, its threads `n` steps nicer
    /// than the daemon (`[queue] job_nice`); `None`: on the caller's runtime.
    pub job_nice: Option<i32>,
    /// The node the workers run on (`server.node_id`): each worker's name,
    /// recorded as the lease owner and on every event it writes, is
    /// `<node>/worker-<n>`, so each attempt says which node ran it.
    pub node: String,
}

/// The runtime jobs run on when they are kept apart from the front door. It is
/// shut down without blocking, so it may be dropped inside async code.
struct JobRuntime(Option<tokio::runtime::Runtime>);

impl JobRuntime {
    /// A multi-thread runtime of `threads` threads named `teammem-job`, each
    /// lowering its own priority by `nice` as it starts.
    fn start(threads: usize, nice: i32) -> std::io::Result<JobRuntime> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("teammem-job")
            .enable_all()
            .on_thread_start(move || lower_thread_priority(nice))
            .build()?;
        Ok(JobRuntime(Some(runtime)))
    }

    fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.0.as_ref().map(tokio::runtime::Runtime::handle)
    }
}

impl Drop for JobRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// Makes the calling thread `nice` steps nicer. On Linux the nice value is a
/// property of each thread (and is inherited by the processes it spawns), so
/// this touches only the job runtime's threads.
fn lower_thread_priority(nice: i32) {
    if nice <= 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // SAFETY: plain system calls on the calling thread, no memory is shared.
        let changed = unsafe {
            *libc::__errno_location() = 0;
            let now = libc::getpriority(libc::PRIO_PROCESS, 0);
            *libc::__errno_location() == 0
                && libc::setpriority(libc::PRIO_PROCESS, 0, now.saturating_add(nice).min(19)) == 0
        };
        if !changed {
            tracing::warn!(
                nice,
                "cannot lower the CPU priority of a job thread; jobs run at the daemon's priority"
            );
        }
    }
}

/// A running pool. `wake` nudges idle workers after an enqueue.
pub struct WorkerPool {
    tasks: JoinSet<()>,
    handler: Arc<dyn JobHandler>,
    /// Declared after `tasks`, so it outlives them when the pool is dropped.
    runtime: Option<JobRuntime>,
    stop: watch::Sender<bool>,
    pub wake: Arc<Notify>,
    pub alive: Arc<AtomicUsize>,
}

impl WorkerPool {
    pub fn start(queue: Queue, handler: Arc<dyn JobHandler>, settings: PoolSettings) -> WorkerPool {
        let (stop, stop_rx) = watch::channel(false);
        let wake = Arc::new(Notify::new());
        let alive = Arc::new(AtomicUsize::new(0));
        let mut tasks = JoinSet::new();
        let runtime = settings.job_nice.and_then(|nice| {
            JobRuntime::start(settings.workers, nice)
                .inspect_err(|error| {
                    tracing::error!(%error, "cannot start the job runtime; jobs run on the daemon's own threads")
                })
                .ok()
        });
        for n in 0..settings.workers {
            let worker = Worker {
                name: format!("{}/worker-{n}", settings.node),
                queue: queue.clone(),
                handler: handler.clone(),
                settings: settings.clone(),
                wake: wake.clone(),
                stop: stop_rx.clone(),
            };
            alive.fetch_add(1, Ordering::SeqCst);
            let alive = alive.clone();
            let work = async move {
                worker.run().await;
                alive.fetch_sub(1, Ordering::SeqCst);
            };
            match runtime.as_ref().and_then(JobRuntime::handle) {
                Some(handle) => tasks.spawn_on(work, handle),
                None => tasks.spawn(work),
            };
        }
        WorkerPool {
            tasks,
            handler,
            runtime,
            stop,
            wake,
            alive,
        }
    }

    /// Stops claiming and waits for every worker to finish or release its job.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
        self.handler.drain().await;
        drop(self.runtime.take());
    }
}

struct Worker {
    name: String,
    queue: Queue,
    handler: Arc<dyn JobHandler>,
    settings: PoolSettings,
    wake: Arc<Notify>,
    stop: watch::Receiver<bool>,
}

impl Worker {
    async fn run(mut self) {
        tracing::debug!(worker = %self.name, "worker started");
        // The job claimed together with the last one's completion.
        let mut next: Option<Claimed> = None;
        loop {
            if *self.stop.borrow() {
                if let Some(claimed) = next.take() {
                    // Claimed as the stop came: it never started.
                    if let Err(e) = self.queue.release(&claimed.lease).await {
                        tracing::error!(worker = %self.name, error = %e, "releasing an unstarted job failed");
                    }
                }
                break;
            }
            let claimed = match next.take() {
                Some(claimed) => Ok(Some(claimed)),
                None => self.queue.claim(&self.name).await,
            };
            match claimed {
                Ok(Some(claimed)) => {
                    let span = tracing::info_span!("job", id = claimed.job.id, source = %claimed.job.source);
                    next = self.run_job(claimed).instrument(span).await;
                }
                Ok(None) => {
                    tokio::select! {
                        _ = self.wake.notified() => {}
                        _ = tokio::time::sleep(self.settings.idle_poll) => {}
                        _ = self.stop.changed() => {}
                    }
                }
                Err(e) => {
                    tracing::error!(worker = %self.name, error = %e, "claim failed");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = self.stop.changed() => {}
                    }
                }
            }
        }
        tracing::debug!(worker = %self.name, "worker stopped");
    }

    /// Runs one job and records its outcome; returns the next job when one
    /// was claimed together with a successful completion.
    async fn run_job(&mut self, claimed: Claimed) -> Option<Claimed> {
        let Claimed { job, lease } = claimed;
        let started = std::time::Instant::now();
        let kind = job.kind.name().as_str();
        tracing::info!(state = %job.state, worker = %self.name, attempt = job.attempts, "job started");

        // The cursor decision is part of the work: it asks the forge while
        // the lease is kept alive.
        let (handler, queue) = (&*self.handler, &self.queue);
        let job_ref = &job;
        let mut work = Box::pin(async move {
            let completion = match job_ref.kind.range() {
                Some(_) => {
                    let cursor = match queue.cursor(&job_ref.source).await {
                        Ok(cursor) => cursor.map(|cursor| cursor.sha),
                        Err(error) => {
                            tracing::warn!(%error, "reading the source's cursor failed; the job runs as if its range were the newest");
                            None
                        }
                    };
                    handler.run_from(job_ref, cursor).await?
                }
                None => handler.run(job_ref).await?,
            };
            let cursor = cursor_move(handler, queue, job_ref, &completion).await;
            Ok::<_, JobFailure>((completion, cursor))
        });
        let mut heartbeat = tokio::time::interval(self.settings.lease / 3);
        heartbeat.tick().await; // the first tick is immediate; the claim just set the lease
        let deadline = tokio::time::sleep(self.settings.job_timeout);
        tokio::pin!(deadline);
        let mut grace: Option<Pin<Box<tokio::time::Sleep>>> = if *self.stop.borrow() {
            Some(Box::pin(tokio::time::sleep(self.settings.shutdown_grace)))
        } else {
            None
        };

        let outcome = loop {
            tokio::select! {
                result = &mut work => break Some(result),
                _ = heartbeat.tick() => {
                    match self.queue.heartbeat(&lease).await {
                        Ok(_) => {}
                        Err(QueueError::LeaseLost { .. }) => {
                            tracing::warn!("lease lost (cancelled or rescued); abandoning the job");
                            return None;
                        }
                        Err(e) => tracing::error!(error = %e, "heartbeat failed"),
                    }
                }
                _ = &mut deadline => {
                    break Some(Err(JobFailure::retryable(format!(
                            "the job did not finish within {} s (queue.job_timeout_seconds)",
                            self.settings.job_timeout.as_secs()
                        ))));
                }
                _ = self.stop.changed(), if grace.is_none() => {
                    grace = Some(Box::pin(tokio::time::sleep(self.settings.shutdown_grace)));
                }
                _ = async { grace.as_mut().expect("guarded").await }, if grace.is_some() => {
                    break None;
                }
            }
        };
        drop(work);
        metrics::JOB_DURATION.observe(&[kind], started.elapsed());
        let outcome = match outcome {
            None => {
                tracing::warn!("shutdown grace period over; releasing the job");
                Outcome::Release
            }
            Some(Ok((completion, cursor))) => Outcome::Complete(completion, cursor),
            Some(Err(failure)) => Outcome::Fail(failure),
        };

        let mut next = None;
        let mut result = match &outcome {
            Outcome::Complete(completion, cursor) if !*self.stop.borrow() => {
                // The next claim shares the completion's commit.
                let (r, claimed) = self
                    .queue
                    .complete_and_claim_moving(
                        &lease,
                        completion.clone(),
                        cursor.clone(),
                        &self.name,
                    )
                    .await;
                match claimed {
                    Ok(claimed) => next = claimed,
                    Err(e) => tracing::error!(worker = %self.name, error = %e, "claim failed"),
                }
                if r.is_ok() {
                    outcome.recorded(kind);
                }
                r.map(|_| ())
            }
            _ => self.record(&lease, &outcome, kind).await,
        };
        // The job's work is done (its wiki may already hold the change): an
        // outcome lost to a database outage would leave the job running
        // until its lease expires and the rescuer runs it again, without the
        // receipt of what it did. So try again while the lease may still
        // hold and the node is not shutting down.
        let give_up = tokio::time::Instant::now() + self.settings.lease;
        let mut pause = RECORD_AGAIN_AFTER;
        let mut retried = false;
        while let Err(e) = &result
            && e.is_unavailable()
            && tokio::time::Instant::now() < give_up
            && !*self.stop.borrow()
        {
            if !retried {
                tracing::warn!(error = %e, "the database is unavailable; recording the job's outcome again until it is back");
            }
            metrics::OUTCOME_RETRIES.inc(&[kind]);
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = self.stop.changed() => {}
            }
            pause = (pause * 2).min(RECORD_AGAIN_AT_MOST);
            retried = true;
            result = self.record(&lease, &outcome, kind).await;
        }
        match result {
            Ok(()) => {}
            Err(QueueError::LeaseLost { .. }) if retried => tracing::warn!(
                "the job's outcome was recorded by an earlier try whose answer was lost, or its lease was lost"
            ),
            Err(QueueError::LeaseLost { .. }) => {
                tracing::warn!("the job's lease was lost before its outcome was recorded")
            }
            Err(e) => tracing::error!(error = %e, "recording the job's outcome failed"),
        }
        next
    }

    /// Records `outcome` of the job under `lease` once.
    async fn record(
        &self,
        lease: &crate::queue::Lease,
        outcome: &Outcome,
        kind: &'static str,
    ) -> Result<(), QueueError> {
        let result = match outcome {
            Outcome::Release => self.queue.release(lease).await,
            Outcome::Complete(completion, cursor) => self
                .queue
                .complete_moving(lease, completion.clone(), cursor.clone())
                .await
                .map(|_| ()),
            Outcome::Fail(failure) => {
                let r = self
                    .queue
                    .fail_with_receipt(
                        lease,
                        &failure.reason,
                        failure.retryable,
                        failure.receipt.clone(),
                    )
                    .await;
                if let Ok(state) = &r {
                    metrics::JOBS_FINISHED.inc(&[kind, state.as_str()]);
                    tracing::warn!(state = state.as_str(), reason = %failure.reason, "job attempt failed");
                }
                return r.map(|_| ());
            }
        };
        if result.is_ok() {
            outcome.recorded(kind);
        }
        result
    }
}

/// The first pause before a worker tries again to record an outcome the
/// unavailable database did not take; it doubles up to
/// [`RECORD_AGAIN_AT_MOST`].
const RECORD_AGAIN_AFTER: Duration = Duration::from_millis(500);

/// The longest pause between two tries to record an outcome.
const RECORD_AGAIN_AT_MOST: Duration = Duration::from_secs(5);

/// How a job's run ended, as the worker records it.
enum Outcome {
    /// The shutdown grace period ran out: the job goes back to the queue
    /// without counting the attempt.
    Release,
    /// The handler finished the job (and said how the cursor moves).
    Complete(Completion, CursorMove),
    /// The handler could not finish it.
    Fail(JobFailure),
}

impl Outcome {
    /// Counts and logs a release or completion the queue has recorded
    /// (a failure's state comes from the queue, see [`Worker::record`]).
    fn recorded(&self, kind: &'static str) {
        match self {
            Outcome::Release => metrics::JOBS_FINISHED.inc(&[kind, "released"]),
            Outcome::Complete(completion, _) => {
                let state = completion.state();
                metrics::JOBS_FINISHED.inc(&[kind, state.as_str()]);
                tracing::info!(%state, "job finished");
            }
            Outcome::Fail(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::{JobKind, ManualClock, NewJob, Origin, QueueSettings};

    /// The nice value of the calling thread.
    fn thread_nice() -> i32 {
        // SAFETY: a plain system call about the calling thread.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    /// Reports where it ran: its thread's name and nice value, and the nice
    /// value of a process it started (field 19 of `/proc/self/stat`).
    struct Probe(tokio::sync::mpsc::UnboundedSender<(String, i32, i32)>);

    impl JobHandler for Probe {
        fn run<'a>(&'a self, _job: &'a Job) -> JobFuture<'a> {
            Box::pin(async move {
                let child = tokio::process::Command::new("cat")
                    .arg("/proc/self/stat")
                    .output()
                    .await
                    .expect("run cat");
                let stat = String::from_utf8(child.stdout).expect("utf-8 stat");
                // Fields after the parenthesised command name; nice is field 19.
                let after_name = stat.rsplit_once(')').expect("stat format").1;
                let child_nice = after_name.split_whitespace().nth(16).expect("field 19");
                let thread = std::thread::current().name().unwrap_or("").to_owned();
                let _ = self
                    .0
                    .send((thread, thread_nice(), child_nice.parse().expect("a number")));
                Ok(Completion::Skipped {
                    reason: "probe".into(),
                })
            })
        }
    }

    fn settings(job_nice: Option<i32>) -> PoolSettings {
        PoolSettings {
            workers: 1,
            lease: Duration::from_secs(60),
            job_timeout: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(1),
            idle_poll: Duration::from_millis(50),
            job_nice,
            node: "test-node".into(),
        }
    }

    async fn run_one_job(job_nice: Option<i32>) -> (String, i32, i32) {
        let dir = tempfile::tempdir().expect("temp dir");
        let pool = crate::db::open_with(&dir.path().join("data"), 2)
            .await
            .expect("open");
        crate::db::migrate(&pool).await.expect("migrate");
        let queue = Queue::new(
            pool,
            Arc::new(ManualClock::default()),
            QueueSettings::default(),
        );
        queue
            .enqueue(
                NewJob {
                    source: crate::ids::RepoName::parse("octo/app").unwrap(),
                    destination: "local:/wikis/octo/app".into(),
                    origin: Origin::Dispatch,
                    kind: JobKind::Range {
                        before: crate::ids::Sha::parse(&format!("{:040x}", 1)).unwrap(),
                        after: crate::ids::Sha::parse(&format!("{:040x}", 2)).unwrap(),
                        run_id: None,
                        run_attempt: None,
                    },
                    actor: "test".into(),
                },
                None,
            )
            .await
            .expect("enqueue");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let pool = WorkerPool::start(queue, Arc::new(Probe(tx)), settings(job_nice));
        let seen = rx.recv().await.expect("the job ran");
        pool.shutdown().await;
        seen
    }

    #[tokio::test]
    async fn jobs_run_on_nicer_threads_and_their_processes_inherit_it() {
        let daemon = thread_nice();
        let (thread, nice, child) = run_one_job(Some(7)).await;
        assert_eq!(thread, "teammem-job");
        assert_eq!(nice, (daemon + 7).min(19));
        assert_eq!(
            child, nice,
            "a process a job starts runs at the job's priority"
        );
        // The daemon's own thread is untouched.
        assert_eq!(thread_nice(), daemon);
    }

    #[tokio::test]
    async fn without_job_nice_jobs_run_on_the_callers_runtime() {
        let daemon = thread_nice();
        let (thread, nice, child) = run_one_job(None).await;
        assert_ne!(thread, "teammem-job");
        assert_eq!((nice, child), (daemon, daemon));
    }
}
