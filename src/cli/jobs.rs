//! `jobs list|show|cancel|retry` and `sweep reset`: the job queue and the
//! sweep cursor, read and steered offline from the daemon's database.
//!
//! Invariant: these commands never decide which steering is allowed; the
//! queue does (`crate::queue::steer`), the same rule the HTTP API uses.

use clap::Subcommand;

use super::{ConfigArg, Failure, OrFail, open_db, open_queue, print_json, source_names};

use crate::queue::{JobFilter, JobState, Steering, rfc3339_utc};

#[derive(Debug, Subcommand)]
pub(super) enum JobsCommand {
    /// List jobs, newest first
    List {
        #[command(flatten)]
        config: ConfigArg,
        #[arg(long)]
        repository: Option<String>,
        #[arg(long)]
        state: Option<String>,
        /// At most this many jobs (1 to 100)
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// The page after another: the cursor a previous list printed last
        #[arg(long)]
        cursor: Option<String>,
        /// One JSON object: {jobs, next_cursor}
        #[arg(long)]
        json: bool,
    },
    /// Show one job with its events and receipt
    Show {
        #[command(flatten)]
        config: ConfigArg,
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Cancel a queued or running job
    Cancel {
        #[command(flatten)]
        config: ConfigArg,
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Queue a failed, cancelled or rejected job again
    Retry {
        #[command(flatten)]
        config: ConfigArg,
        id: i64,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum SweepCommand {
    /// Forget a source's cursor (after a force-push): the next sweep starts
    /// tracking at the tip of its default branch and enqueues nothing for it
    Reset {
        #[command(flatten)]
        config: ConfigArg,
        /// The source repository (owner/name)
        #[arg(long)]
        repository: String,
    },
}

pub(super) async fn run_sweep(command: SweepCommand) -> Result<(), Failure> {
    match command {
        SweepCommand::Reset { config, repository } => {
            let (config, pool) = open_db(&config.config).await?;
            let Some(source) = config
                .sources
                .iter()
                .find(|s| s.repository.eq_ignore_ascii_case(&repository))
            else {
                return Err(Failure::usage(format!(
                    "--repository: {repository} is not a configured source; configured: {}",
                    source_names(&config)
                )));
            };
            let queue = crate::queue::Queue::from_config(&config, pool);
            let forgotten = queue.forget_cursor(&source.repository).await.or_runtime()?;
            match forgotten {
                Some(sha) => crate::outln!(
                    "forgot the cursor of {} (it was {sha}); the next sweep starts tracking at the tip of its default branch",
                    source.repository
                ),
                None => crate::outln!(
                    "{} has no cursor; the next sweep starts tracking at the tip of its default branch",
                    source.repository
                ),
            }
            if !source.sweep {
                crate::outln!(
                    "note: {} has sweep = false; the sweep does not look at it",
                    source.repository
                );
            }
            Ok(())
        }
    }
}

pub(super) async fn run_jobs(command: JobsCommand) -> Result<(), Failure> {
    match command {
        JobsCommand::List {
            config,
            repository,
            state,
            limit,
            cursor,
            json,
        } => {
            let queue = open_queue(&config.config).await?;
            let state = match state {
                None => None,
                Some(s) => Some(s.parse::<JobState>().or_usage()?),
            };
            if !(1..=100).contains(&limit) {
                return Err(Failure::usage(format!(
                    "--limit: expected 1 to 100, got {limit}"
                )));
            }
            let page = queue
                .list(&JobFilter {
                    repository,
                    state,
                    limit,
                    cursor,
                    ..JobFilter::default()
                })
                .await
                .map_err(|e| match e {
                    crate::queue::QueueError::InvalidInput { reason, .. } => {
                        Failure::usage(format!(
                            "--cursor: {reason}; pass the cursor a previous `jobs list` printed"
                        ))
                    }
                    e => Failure::runtime(e.to_string()),
                })?;
            if json {
                print_json(
                    &serde_json::json!({"jobs": page.jobs, "next_cursor": page.next_cursor}),
                );
            } else if page.jobs.is_empty() {
                crate::outln!("no jobs");
            } else {
                crate::outln!(
                    "{:>6}  {:<10}  {:<24}  {:<30}  {:>8}",
                    "ID",
                    "STATE",
                    "SOURCE",
                    "WHAT",
                    "ATTEMPTS"
                );
                for job in &page.jobs {
                    crate::outln!(
                        "{:>6}  {:<10}  {:<24}  {:<30}  {:>8}",
                        job.id,
                        job.state.as_str(),
                        job.source,
                        job.summary(),
                        job.attempts
                    );
                }
                if let Some(next) = &page.next_cursor {
                    crate::outln!("older jobs: add --cursor {next}");
                }
            }
            Ok(())
        }
        JobsCommand::Show { config, id, json } => {
            let queue = open_queue(&config.config).await?;
            let job = queue.get(id).await.or_runtime()?;
            let events = queue.events(id).await.or_runtime()?;
            if json {
                print_json(&serde_json::json!({"job": job, "events": events}));
            } else {
                crate::outln!("job {}: {}", job.id, job.state.as_str());
                crate::outln!("  source      {}", job.source);
                crate::outln!("  destination {}", job.destination);
                crate::outln!("  what        {}", job.summary());
                crate::outln!("  origin      {}", job.origin.as_str());
                crate::outln!("  attempts    {}/{}", job.attempts, job.max_attempts);
                if let Some(e) = &job.last_error {
                    crate::outln!("  last error  {e}");
                }
                if let Some(r) = &job.receipt {
                    crate::outln!(
                        "  receipt     {}",
                        serde_json::to_string(r).unwrap_or_default()
                    );
                }
                crate::outln!("  events:");
                for e in events {
                    crate::outln!(
                        "    {}  {:<10} {:<16} {}",
                        rfc3339_utc(e.at),
                        e.actor,
                        e.event,
                        e.detail.as_deref().unwrap_or("")
                    );
                }
            }
            Ok(())
        }
        JobsCommand::Cancel { config, id, json } => {
            steer(&config, id, json, Steering::Cancel).await
        }
        JobsCommand::Retry { config, id, json } => steer(&config, id, json, Steering::Retry).await,
    }
}

/// `jobs cancel|retry`: the queue decides whether the job's state allows it.
async fn steer(config: &ConfigArg, id: i64, json: bool, steering: Steering) -> Result<(), Failure> {
    let queue = open_queue(&config.config).await?;
    let job = queue.steer(id, "cli", steering).await.or_runtime()?;
    if json {
        print_json(&job);
    } else {
        crate::outln!("job {} is now {}", job.id, job.state.as_str());
    }
    Ok(())
}
