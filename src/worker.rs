//! The worker pool: claims jobs from the queue and runs them through a [`JobHandler`].
//!
//! Invariants:
//! - a worker holds at most one lease at a time and heartbeats it while the
//!   handler runs; a lost lease (the job was cancelled or rescued) drops the
//!   handler's future at once, which kills anything it spawned with
//!   `kill_on_drop`;
//! - every outcome goes back through the queue's fenced calls, so a stale worker
//!   can never overwrite a newer attempt;
//! - on shutdown no new job is claimed; a running job gets the grace period to
//!   finish and is otherwise released back to `queued` without counting the attempt.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::metrics;
use crate::queue::{Claimed, Completion, Job, Queue, QueueError};

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

pub type JobFuture<'a> = Pin<Box<dyn Future<Output = Result<Completion, JobFailure>> + Send + 'a>>;

/// What the workers call to run one claimed job.
pub trait JobHandler: Send + Sync + 'static {
    fn run<'a>(&'a self, job: &'a Job) -> JobFuture<'a>;
}

/// The handler of a build that has no job runner: it fails every job at once
/// with a reason an operator can read, instead of pretending to succeed.
pub struct NoRunner;

impl JobHandler for NoRunner {
    fn run<'a>(&'a self, _job: &'a Job) -> JobFuture<'a> {
        Box::pin(async {
            Err(JobFailure {
                reason: "this teammem build has no job runner; upgrade teammem and retry the job"
                    .into(),
                retryable: false,
                receipt: None,
            })
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
}

/// A running pool. `wake` nudges idle workers after an enqueue.
pub struct Pool {
    tasks: JoinSet<()>,
    stop: watch::Sender<bool>,
    pub wake: Arc<Notify>,
    pub alive: Arc<AtomicUsize>,
}

impl Pool {
    pub fn start(queue: Queue, handler: Arc<dyn JobHandler>, settings: PoolSettings) -> Pool {
        let (stop, stop_rx) = watch::channel(false);
        let wake = Arc::new(Notify::new());
        let alive = Arc::new(AtomicUsize::new(0));
        let mut tasks = JoinSet::new();
        for n in 0..settings.workers {
            let worker = Worker {
                name: format!("worker-{n}"),
                queue: queue.clone(),
                handler: handler.clone(),
                settings: settings.clone(),
                wake: wake.clone(),
                stop: stop_rx.clone(),
            };
            alive.fetch_add(1, Ordering::SeqCst);
            let alive = alive.clone();
            tasks.spawn(async move {
                worker.run().await;
                alive.fetch_sub(1, Ordering::SeqCst);
            });
        }
        Pool {
            tasks,
            stop,
            wake,
            alive,
        }
    }

    /// Stops claiming and waits for every worker to finish or release its job.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
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
        while !*self.stop.borrow() {
            match self.queue.claim(&self.name).await {
                Ok(Some(claimed)) => {
                    let span = tracing::info_span!("job", id = claimed.job.id, source = %claimed.job.source);
                    self.run_job(claimed).instrument(span).await
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

    async fn run_job(&mut self, claimed: Claimed) {
        let Claimed { job, lease } = claimed;
        let started = std::time::Instant::now();
        let kind = job.kind.as_str();
        tracing::info!(worker = %self.name, attempt = job.attempts, "job started");

        let mut work = self.handler.run(&job);
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
                            return;
                        }
                        Err(e) => tracing::error!(error = %e, "heartbeat failed"),
                    }
                }
                _ = &mut deadline => {
                    break Some(Err(JobFailure {
                        reason: format!(
                            "the job did not finish within {} s (queue.job_timeout_seconds)",
                            self.settings.job_timeout.as_secs()
                        ),
                        retryable: true,
                        receipt: None,
                    }));
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

        let result = match outcome {
            None => {
                tracing::warn!("shutdown grace period over; releasing the job");
                metrics::JOBS_FINISHED.inc(&[kind, "released"]);
                self.queue.release(&lease).await.map(|_| ())
            }
            Some(Ok(completion)) => {
                let state = completion.state();
                let r = self.queue.complete(&lease, completion).await;
                if r.is_ok() {
                    metrics::JOBS_FINISHED.inc(&[kind, state.as_str()]);
                    tracing::info!(state = state.as_str(), "job finished");
                }
                r.map(|_| ())
            }
            Some(Err(failure)) => {
                let r = self
                    .queue
                    .fail_with_receipt(
                        &lease,
                        &failure.reason,
                        failure.retryable,
                        failure.receipt.clone(),
                    )
                    .await;
                if let Ok(state) = &r {
                    metrics::JOBS_FINISHED.inc(&[kind, state.as_str()]);
                    tracing::warn!(state = state.as_str(), reason = %failure.reason, "job attempt failed");
                }
                r.map(|_| ())
            }
        };
        match result {
            Ok(()) => {}
            Err(QueueError::LeaseLost { .. }) => {
                tracing::warn!("the job's lease was lost before its outcome was recorded")
            }
            Err(e) => tracing::error!(error = %e, "recording the job's outcome failed"),
        }
    }
}
