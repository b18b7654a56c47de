//! The sweep for missed pushes: for every `sweep = true` source, compare the
//! default branch's tip with the source's cursor (the last reconciled commit)
//! and enqueue `cursor..tip` with origin `sweep` when a dispatch was lost.
//!
//! Per source and run, in this order:
//! - the forge cannot be asked → nothing changes; the next run asks again;
//! - no cursor yet → the tip becomes the cursor and nothing is enqueued (the
//!   source's earlier history is not the sweep's to replay);
//! - tip = cursor → nothing;
//! - a queued or running range job starts at the cursor → nothing (when it
//!   succeeds the cursor moves, and the next run looks at what is left);
//! - the cursor is not an ancestor of the tip (force-push) → a warning with
//!   what to do, nothing enqueued;
//! - the source's wiki crosses an audience (a private source mapped to a
//!   public wiki, DESIGN §9), asked of GitHub now → an error with what to do,
//!   nothing enqueued (the runner would refuse the job anyway; a sweep job
//!   that can only end `rejected` helps no one);
//! - otherwise `cursor..tip` is enqueued (or coalesced into a queued job
//!   ending at the cursor when the two together still fit one job; a range
//!   tried before is not tried again by itself), as contiguous jobs in order
//!   when it is larger than one job (`ingest/split.rs`).
//!
//! Invariant: the sweep writes nothing but through `queue/` (enqueue, cursor)
//! and reads sources only through `forge/`; it never fails the daemon: every
//! problem is logged and counted, and the next run starts afresh.

use std::sync::Arc;

use crate::config::{Config, Source};
use crate::forge::Forges;
use crate::forge::{Ancestry, Refusal};
use crate::ids::Sha;
use crate::ingest::split::{self, RangeEnqueued, SplitError};
use crate::queue::{Disposition, Enqueued, JobKind, JobState, NewJob, Origin, Queue};

/// The actor recorded on the jobs the sweep enqueues.
pub const ACTOR: &str = "sweep";

/// What one run of the sweep did for one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The source had no cursor: its tip is now the cursor.
    TrackingStarted { tip: Sha },
    /// The tip is the cursor.
    UpToDate,
    /// A new `sweep` job covers `cursor..tip`.
    Enqueued {
        job_id: i64,
        before: Sha,
        after: Sha,
    },
    /// `cursor..tip` was larger than one job's bound: new `sweep` jobs cover
    /// it in contiguous parts, oldest first (`ingest/split.rs`).
    Split {
        job_ids: Vec<i64>,
        before: Sha,
        after: Sha,
    },
    /// `cursor..tip` extended a queued job ending at the cursor.
    Coalesced { job_id: i64 },
    /// A queued or running job already reconciles the range from the cursor.
    InFlight { job_id: i64 },
    /// This very range was enqueued before and has finished without moving
    /// the cursor; it is not retried by the sweep.
    AlreadyTried { job_id: i64, state: JobState },
    /// The cursor is not in the tip's history (force-push): nothing enqueued.
    NotAncestor {
        cursor: Sha,
        branch: String,
        tip: Sha,
    },
    /// The source's wiki is across an audience boundary: nothing enqueued.
    AudienceMismatch { message: String },
    /// The forge could not answer; asked again at the next run.
    ForgeUnavailable { message: String },
    /// The queue could not be read or written; tried again at the next run.
    QueueFailed { message: String },
}

impl Outcome {
    /// The `outcome` label of `teammem_sweep_checks_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::TrackingStarted { .. } => "tracking_started",
            Outcome::UpToDate => "up_to_date",
            Outcome::Enqueued { .. } => "enqueued",
            Outcome::Split { .. } => "split",
            Outcome::Coalesced { .. } => "coalesced",
            Outcome::InFlight { .. } => "in_flight",
            Outcome::AlreadyTried { .. } => "already_tried",
            Outcome::NotAncestor { .. } => "not_ancestor",
            Outcome::AudienceMismatch { .. } => "audience_mismatch",
            Outcome::ForgeUnavailable { .. } => "forge_unavailable",
            Outcome::QueueFailed { .. } => "queue_failed",
        }
    }
}

/// The sweep over a configuration's sources.
#[derive(Clone)]
pub struct Sweep {
    config: Arc<Config>,
    queue: Queue,
    forges: Forges,
}

impl Sweep {
    /// `forges` are the daemon's (one GitHub client per process).
    pub fn new(config: Arc<Config>, queue: Queue, forges: Forges) -> Sweep {
        Sweep {
            config,
            queue,
            forges,
        }
    }

    /// Whether any source asks to be swept.
    pub fn has_sources(&self) -> bool {
        self.config.sources.iter().any(|source| source.sweep)
    }

    /// One run over every `sweep = true` source, one after another; each
    /// outcome is logged and counted.
    pub async fn run(&self) -> Vec<(String, Outcome)> {
        crate::metrics::SWEEP_RUNS.inc(&[]);
        let mut outcomes = Vec::new();
        for source in self.config.sources.iter().filter(|source| source.sweep) {
            let outcome = self.check(source).await;
            log(source, &outcome);
            crate::metrics::SWEEP_CHECKS.inc(&[outcome.label()]);
            outcomes.push((source.repository.to_string(), outcome));
        }
        outcomes
    }

    /// The sweep of one source (not logged or counted: [`Sweep::run`] does that).
    pub async fn check(&self, source: &Source) -> Outcome {
        let forge = self.forges.of(source);
        let tip = match forge.tip().await {
            Ok(tip) => tip,
            Err(refusal) => return forge_unavailable(refusal),
        };
        let repository = &source.repository;
        let cursor = match self.queue.cursor(repository).await {
            Ok(Some(cursor)) => cursor.sha,
            Ok(None) => {
                return match self.queue.advance_cursor(repository, &tip.sha).await {
                    Ok(()) => Outcome::TrackingStarted { tip: tip.sha },
                    Err(e) => queue_failed(e),
                };
            }
            Err(e) => return queue_failed(e),
        };
        if cursor == tip.sha {
            return Outcome::UpToDate;
        }
        match self.queue.range_job_from(repository, &cursor).await {
            Ok(Some(job)) => return Outcome::InFlight { job_id: job.id },
            Ok(None) => {}
            Err(e) => return queue_failed(e),
        }
        match forge.ancestry(&cursor, &tip.sha).await {
            Ok(Ancestry::Ancestor) => {}
            Ok(Ancestry::NotAncestor) => {
                return Outcome::NotAncestor {
                    cursor,
                    branch: tip.branch,
                    tip: tip.sha,
                };
            }
            Err(refusal) => return forge_unavailable(refusal),
        }
        match forge.check_audience().await {
            Ok(()) => {}
            Err(Refusal::Rejected { code, message }) => {
                return Outcome::AudienceMismatch {
                    message: format!("{code}: {message}"),
                };
            }
            Err(refusal) => return forge_unavailable(refusal),
        }
        let job = NewJob {
            source: repository.clone(),
            destination: source.destination(),
            origin: Origin::Sweep,
            kind: JobKind::Range {
                before: cursor.clone(),
                after: tip.sha.clone(),
                run_id: None,
                run_attempt: None,
            },
            actor: ACTOR.into(),
        };
        let enqueued = match split::enqueue_range(&self.queue, &forge, job, None, None).await {
            Ok(RangeEnqueued::One(enqueued)) => *enqueued,
            Ok(RangeEnqueued::Parts(parts)) if parts.disposition == Disposition::Created => {
                return Outcome::Split {
                    job_ids: parts.jobs.iter().map(|job| job.id).collect(),
                    before: cursor,
                    after: tip.sha,
                };
            }
            Ok(RangeEnqueued::Parts(mut parts)) => Enqueued {
                job: parts.jobs.remove(0),
                disposition: parts.disposition,
            },
            Err(SplitError::Forge(refusal)) => return forge_unavailable(refusal),
            Err(SplitError::Queue(e)) => return queue_failed(e),
        };
        let job = enqueued.job;
        match enqueued.disposition {
            Disposition::Created => Outcome::Enqueued {
                job_id: job.id,
                before: cursor,
                after: tip.sha,
            },
            Disposition::Coalesced { into } => Outcome::Coalesced { job_id: into },
            Disposition::Duplicate if matches!(job.state, JobState::Queued | JobState::Running) => {
                Outcome::InFlight { job_id: job.id }
            }
            Disposition::Duplicate => Outcome::AlreadyTried {
                job_id: job.id,
                state: job.state,
            },
        }
    }
}

fn forge_unavailable(refusal: Refusal) -> Outcome {
    let message = match refusal {
        Refusal::Rejected { code, message } => format!("{code}: {message}"),
        Refusal::Unavailable { message, .. } => message,
    };
    Outcome::ForgeUnavailable { message }
}

fn queue_failed(error: crate::queue::QueueError) -> Outcome {
    Outcome::QueueFailed {
        message: error.to_string(),
    }
}

/// One line per source and run; warnings say what an operator can do.
fn log(source: &Source, outcome: &Outcome) {
    let source = source.repository.as_str();
    match outcome {
        Outcome::TrackingStarted { tip } => tracing::info!(
            source,
            %tip,
            "sweep: no cursor yet; tracking starts at the default branch's tip (earlier pushes are not replayed)"
        ),
        Outcome::UpToDate => tracing::debug!(source, "sweep: up to date"),
        Outcome::Enqueued {
            job_id,
            before,
            after,
        } => tracing::info!(
            source,
            job_id,
            %before,
            %after,
            "sweep: enqueued a range no dispatch announced"
        ),
        Outcome::Split {
            job_ids,
            before,
            after,
        } => tracing::info!(
            source,
            jobs = ?job_ids,
            %before,
            %after,
            "sweep: enqueued a range no dispatch announced, as {} jobs in order (it was larger than one job)",
            job_ids.len()
        ),
        Outcome::Coalesced { job_id } => tracing::info!(
            source,
            job_id,
            "sweep: extended a queued range job to the default branch's tip"
        ),
        Outcome::InFlight { job_id } => tracing::debug!(
            source,
            job_id,
            "sweep: a queued or running job already reconciles the range from the cursor"
        ),
        Outcome::AlreadyTried { job_id, state } => tracing::warn!(
            source,
            job_id,
            %state,
            "sweep: the missed range was enqueued before as job {job_id}, which ended {state} without moving the cursor; see why with `teammem jobs show {job_id}` and retry it with `teammem jobs retry {job_id}`"
        ),
        Outcome::NotAncestor {
            cursor,
            branch,
            tip,
        } => tracing::warn!(
            source,
            %cursor,
            %branch,
            %tip,
            "sweep: the cursor {cursor} is not in the history of {branch} at {tip} (was {branch} force-pushed?); nothing was enqueued. Reconcile the pull requests merged since with `teammem request --pr N`, then restart tracking from the current tip with `teammem sweep reset --repository {source}`"
        ),
        Outcome::AudienceMismatch { message } => {
            tracing::error!(source, "sweep: nothing enqueued: {message}")
        }
        Outcome::ForgeUnavailable { message } => tracing::warn!(
            source,
            "sweep: cannot read the source's default branch: {message}; the next sweep asks again"
        ),
        Outcome::QueueFailed { message } => {
            tracing::error!(source, "sweep: {message}; the next sweep tries again")
        }
    }
}
