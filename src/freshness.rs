//! How fresh each source's memory is: the commit its wiki is reconciled to
//! (the cursor), how far the default branch has moved past it, the jobs in
//! flight for its wiki, and its last job and failure, with the sources that
//! need an operator first.
//!
//! Invariants: a page never waits on a forge longer than
//! `dashboard.forge_timeout_seconds`: lag lookups run as their own tasks, an
//! answer not back in time is shown as unknown (or as its last known value)
//! and lands in the cache when it comes; one lookup per source is in flight
//! at a time, and an answer is reused for [`LAG_TTL`] while the cursor stays.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::config::{Config, Source};
use crate::forge::{Forges, Lag, Refusal};
use crate::ids::Sha;
use crate::queue::{Job, JobState, Queue, QueueError, SourceCursor};

/// How long a lag answer is reused (while the cursor has not moved).
pub const LAG_TTL: Duration = Duration::from_secs(60);

/// What is known of a source's lag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LagAnswer {
    Known(Lag),
    /// Not known, and why (the forge's refusal, a timeout, no cursor yet).
    Unknown(String),
}

/// What needs an operator, most urgent first (the sources page's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Attention {
    /// The last job failed or was rejected.
    Failing,
    /// Behind (or diverged) with nothing queued or running to catch up.
    Stalled,
    /// The lag could not be established.
    Unknown,
    /// Behind, with jobs in flight.
    CatchingUp,
    UpToDate,
}

impl Attention {
    pub fn as_str(self) -> &'static str {
        match self {
            Attention::Failing => "failing",
            Attention::Stalled => "stalled",
            Attention::Unknown => "unknown",
            Attention::CatchingUp => "catching up",
            Attention::UpToDate => "up to date",
        }
    }
}

/// One source's row.
#[derive(Debug, Clone)]
pub struct SourceRow {
    pub repository: String,
    pub destination: String,
    pub cursor: Option<SourceCursor>,
    pub lag: LagAnswer,
    pub running: u64,
    pub queued: u64,
    pub last_job: Option<Job>,
    pub last_failure: Option<Job>,
    pub attention: Attention,
}

struct Cached {
    cursor: Sha,
    at: Instant,
    answer: LagAnswer,
}

/// The lag cache of one process.
#[derive(Default)]
pub struct Freshness {
    cache: Mutex<HashMap<String, Cached>>,
    in_flight: Mutex<HashSet<String>>,
}

impl Freshness {
    /// Every configured source `visible` lets through, most urgent first
    /// (then by name).
    pub async fn sources(
        self: &Arc<Self>,
        config: &Config,
        queue: &Queue,
        forges: &Forges,
        visible: impl Fn(&str) -> bool,
    ) -> Result<Vec<SourceRow>, QueueError> {
        let mut overview = queue.overview().await?;
        let sources: Vec<&Source> = config
            .sources
            .iter()
            .filter(|s| visible(&s.repository))
            .collect();
        let mut lookups = Vec::new();
        for source in &sources {
            if let Some(cursor) = overview.cursors.get(source.repository.as_str())
                && self.stale(&source.repository, &cursor.sha)
                && self.start(&source.repository)
            {
                let (this, forges, source, cursor) = (
                    self.clone(),
                    forges.clone(),
                    (*source).clone(),
                    cursor.sha.clone(),
                );
                lookups.push(tokio::spawn(async move {
                    let answer = match forges.of(&source).lag(&cursor).await {
                        Ok(lag) => LagAnswer::Known(lag),
                        Err(Refusal::Rejected { message, .. })
                        | Err(Refusal::Unavailable { message, .. }) => LagAnswer::Unknown(message),
                    };
                    this.store(&source.repository, cursor, answer);
                }));
            }
        }
        let timeout = config.dashboard.forge_timeout;
        let _ = tokio::time::timeout(timeout, async {
            for lookup in &mut lookups {
                let _ = lookup.await;
            }
        })
        .await;

        let mut rows: Vec<SourceRow> = sources
            .into_iter()
            .map(|source| {
                let repository = source.repository.to_string();
                let destination = source.destination();
                let cursor = overview.cursors.remove(&repository);
                let lag = match &cursor {
                    None => LagAnswer::Unknown(
                        "no reconciled commit yet: the first finished range job sets it".into(),
                    ),
                    Some(cursor) => self.cached(&repository, &cursor.sha).unwrap_or_else(|| {
                        LagAnswer::Unknown(format!(
                            "the forge did not answer within {} s; the answer is shown once it comes",
                            timeout.as_secs()
                        ))
                    }),
                };
                let (running, queued) = overview
                    .in_flight
                    .get(&destination)
                    .copied()
                    .unwrap_or_default();
                let last_job = overview.last_job.remove(&repository);
                let last_failure = overview.last_failure.remove(&repository);
                let attention = attention(&lag, running + queued, last_job.as_ref());
                SourceRow {
                    repository,
                    destination,
                    cursor,
                    lag,
                    running,
                    queued,
                    last_job,
                    last_failure,
                    attention,
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            (a.attention, &a.repository.to_ascii_lowercase())
                .cmp(&(b.attention, &b.repository.to_ascii_lowercase()))
        });
        Ok(rows)
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// No answer for this cursor, or one older than [`LAG_TTL`].
    fn stale(&self, repository: &str, cursor: &Sha) -> bool {
        self.lock_cache()
            .get(repository)
            .is_none_or(|c| c.cursor != *cursor || c.at.elapsed() > LAG_TTL)
    }

    /// The answer for this cursor, however old.
    fn cached(&self, repository: &str, cursor: &Sha) -> Option<LagAnswer> {
        self.lock_cache()
            .get(repository)
            .filter(|c| c.cursor == *cursor)
            .map(|c| c.answer.clone())
    }

    /// Marks a lookup of `repository` in flight; `false` when one already is.
    fn start(&self, repository: &str) -> bool {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(repository.to_owned())
    }

    fn store(&self, repository: &str, cursor: Sha, answer: LagAnswer) {
        self.lock_cache().insert(
            repository.to_owned(),
            Cached {
                cursor,
                at: Instant::now(),
                answer,
            },
        );
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(repository);
    }
}

fn attention(lag: &LagAnswer, in_flight: u64, last_job: Option<&Job>) -> Attention {
    if last_job.is_some_and(|job| matches!(job.state, JobState::Failed | JobState::Rejected)) {
        return Attention::Failing;
    }
    match lag {
        LagAnswer::Known(Lag::UpToDate { .. }) => Attention::UpToDate,
        LagAnswer::Known(Lag::Behind { .. }) if in_flight > 0 => Attention::CatchingUp,
        LagAnswer::Known(Lag::Behind { .. } | Lag::Diverged { .. }) => Attention::Stalled,
        LagAnswer::Unknown(_) => Attention::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(c: char) -> Sha {
        Sha::parse(&c.to_string().repeat(40)).unwrap()
    }

    #[test]
    fn the_most_urgent_come_first() {
        let behind = LagAnswer::Known(Lag::Behind {
            tip: sha('b'),
            commits: 3,
            counted_all: true,
            since: None,
        });
        let up = LagAnswer::Known(Lag::UpToDate { tip: sha('a') });
        assert_eq!(attention(&behind, 0, None), Attention::Stalled);
        assert_eq!(attention(&behind, 1, None), Attention::CatchingUp);
        assert_eq!(attention(&up, 0, None), Attention::UpToDate);
        assert_eq!(
            attention(&LagAnswer::Unknown("x".into()), 0, None),
            Attention::Unknown
        );
        let mut order = [
            Attention::UpToDate,
            Attention::CatchingUp,
            Attention::Unknown,
            Attention::Stalled,
            Attention::Failing,
        ];
        order.sort();
        assert_eq!(order[0], Attention::Failing);
        assert_eq!(order[4], Attention::UpToDate);
    }
}
