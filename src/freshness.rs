//! How fresh each source's memory is: the commit its wiki is reconciled to
//! (the cursor), how far the default branch has moved past it, the jobs in
//! flight for its wiki, its last job and failure, and the stale facts on its
//! wiki, with the sources that need an operator first.
//!
//! Invariants: a page never waits on a forge longer than
//! `dashboard.forge_timeout_seconds`: lag lookups run as their own tasks, an
//! answer not back in time is shown as unknown (or as its last known value)
//! and lands in the cache when it comes; one lookup per source is in flight
//! at a time, and an answer is reused for [`LAG_TTL`] while the cursor stays.
//! Stale facts are counted the same way, and never over the network: on this
//! node's copy of the wiki (a local wiki, or the mirror jobs fetch into) at
//! the tip that copy holds, one count per wiki in flight, recounted only when
//! that tip moves.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::config::{Config, Forge, Source};
use crate::forge::{Forges, Lag, Refusal};
use crate::ids::Sha;
use crate::queue::{Job, JobState, Queue, QueueError, SourceCursor};
use crate::runner::fact_check::{mirror_exists, mirror_in, mirrors};
use crate::wiki::WikiStore;

/// How long a lag answer is reused (while the cursor has not moved).
pub const LAG_TTL: Duration = Duration::from_secs(60);

/// What is known of a source's lag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LagAnswer {
    Known(Lag),
    /// Not known, and why (the forge's refusal, a timeout, no cursor yet).
    Unknown(String),
}

/// What is known of the stale facts on a source's wiki.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FactsAnswer {
    /// Counted on this node's copy of the wiki at `commit` (`None`: the wiki
    /// has no commits, so no facts); with `truncated` the pages were larger
    /// than one scan reads and there are at least `stale`.
    Counted {
        commit: Option<String>,
        stale: usize,
        truncated: bool,
    },
    /// Not known, and why (no copy of the wiki here yet, still counting).
    Unknown(String),
}

impl FactsAnswer {
    /// The stale facts known to exist (none when unknown).
    pub fn stale(&self) -> usize {
        match self {
            FactsAnswer::Counted { stale, .. } => *stale,
            FactsAnswer::Unknown(_) => 0,
        }
    }
}

/// Why a GitHub wiki's stale facts cannot be counted yet.
const NO_COPY: &str =
    "teammem holds no copy of this wiki yet: the first job for this source fetches it";

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
    /// Up to date, but facts on the wiki cite source lines that changed.
    StaleFacts,
    UpToDate,
}

impl Attention {
    pub fn as_str(self) -> &'static str {
        match self {
            Attention::Failing => "failing",
            Attention::Stalled => "stalled",
            Attention::Unknown => "unknown",
            Attention::CatchingUp => "catching up",
            Attention::StaleFacts => "stale facts",
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
    pub facts: FactsAnswer,
    pub attention: Attention,
}

struct Cached {
    cursor: Sha,
    at: Instant,
    answer: LagAnswer,
}

/// The lag and stale-fact caches of one process.
#[derive(Default)]
pub struct Freshness {
    cache: Mutex<HashMap<String, Cached>>,
    in_flight: Mutex<HashSet<String>>,
    /// Wiki destination → its last count.
    facts: Mutex<HashMap<String, FactsAnswer>>,
    /// Wiki destinations being counted.
    counting: Mutex<HashSet<String>>,
    /// The wiki handles the counts read through, kept open between requests
    /// (a tip check is then one ref read, and each wiki's caches survive).
    wikis: std::sync::OnceLock<Arc<WikiStore>>,
}

impl Freshness {
    /// Every configured source `visible` lets through, most urgent first
    /// (then the most stale facts, then by name).
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
        let mut lookups = self.look_up_lags(&sources, &overview.cursors, forges);
        let mut shared_config: Option<Arc<Config>> = None;
        for source in &sources {
            let destination = source.destination();
            if !self.start_count(&destination) {
                continue;
            }
            let config = shared_config
                .get_or_insert_with(|| Arc::new(config.clone()))
                .clone();
            let (this, source) = (self.clone(), (*source).clone());
            let wikis = self
                .wikis
                .get_or_init(|| Arc::new(mirrors(&config)))
                .clone();
            lookups.push(tokio::spawn(async move {
                let known = this.counted(&destination);
                let answer = count_facts(&wikis, &config, &source, known).await;
                this.store_count(&destination, answer);
            }));
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
                let facts = self.counted(&destination).unwrap_or_else(|| {
                    FactsAnswer::Unknown(
                        "still counting; the count is shown once it is done".into(),
                    )
                });
                let attention = attention(&lag, running + queued, last_job.as_ref(), facts.stale());
                SourceRow {
                    repository,
                    destination,
                    cursor,
                    lag,
                    running,
                    queued,
                    last_job,
                    last_failure,
                    facts,
                    attention,
                }
            })
            .collect();
        rows.sort_by_cached_key(|row| {
            (
                row.attention,
                std::cmp::Reverse(row.facts.stale()),
                row.repository.to_ascii_lowercase(),
            )
        });
        Ok(rows)
    }

    /// Starts a lag lookup for each of `sources` with a cursor whose cached
    /// answer is missing or old (one in flight per source).
    fn look_up_lags(
        self: &Arc<Self>,
        sources: &[&Source],
        cursors: &HashMap<String, SourceCursor>,
        forges: &Forges,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut lookups = Vec::new();
        for source in sources {
            if let Some(cursor) = cursors.get(source.repository.as_str())
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
        lookups
    }

    /// Each configured source's lag behind its default branch, as the sources
    /// page shows it (the same lookups and cache, waiting for the forge at
    /// most `dashboard.forge_timeout_seconds`), for `teammem_source_lag`:
    /// commits on the branch past the cursor (the newest reconciled commit,
    /// which never moves back); `None` while it is not known (no cursor yet,
    /// no answer yet, a refusal) or the cursor is not in the branch's history.
    pub async fn lags(
        self: &Arc<Self>,
        config: &Config,
        queue: &Queue,
        forges: &Forges,
    ) -> Result<Vec<(String, Option<u64>)>, QueueError> {
        let cursors = queue.overview().await?.cursors;
        let sources: Vec<&Source> = config.sources.iter().collect();
        let lookups = self.look_up_lags(&sources, &cursors, forges);
        let _ = tokio::time::timeout(config.dashboard.forge_timeout, async {
            for lookup in lookups {
                let _ = lookup.await;
            }
        })
        .await;
        Ok(sources
            .iter()
            .map(|source| {
                let repository = source.repository.to_string();
                let commits = cursors
                    .get(&repository)
                    .and_then(|cursor| self.cached(&repository, &cursor.sha))
                    .and_then(|answer| match answer {
                        LagAnswer::Known(Lag::UpToDate { .. }) => Some(0),
                        LagAnswer::Known(Lag::Behind { commits, .. }) => Some(commits),
                        LagAnswer::Known(Lag::Diverged { .. }) | LagAnswer::Unknown(_) => None,
                    });
                (repository, commits)
            })
            .collect())
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

    /// Marks a count of `destination` in flight; `false` when one already is.
    fn start_count(&self, destination: &str) -> bool {
        self.counting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(destination.to_owned())
    }

    /// The last count of `destination`'s stale facts, whichever commit it was.
    fn counted(&self, destination: &str) -> Option<FactsAnswer> {
        self.facts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(destination)
            .cloned()
    }

    fn store_count(&self, destination: &str, answer: FactsAnswer) {
        self.facts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(destination.to_owned(), answer);
        self.counting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(destination);
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

fn attention(lag: &LagAnswer, in_flight: u64, last_job: Option<&Job>, stale: usize) -> Attention {
    if last_job.is_some_and(|job| matches!(job.state, JobState::Failed | JobState::Rejected)) {
        return Attention::Failing;
    }
    match lag {
        LagAnswer::Known(Lag::UpToDate { .. }) if stale > 0 => Attention::StaleFacts,
        LagAnswer::Known(Lag::UpToDate { .. }) => Attention::UpToDate,
        LagAnswer::Known(Lag::Behind { .. }) if in_flight > 0 => Attention::CatchingUp,
        LagAnswer::Known(Lag::Behind { .. } | Lag::Diverged { .. }) => Attention::Stalled,
        LagAnswer::Unknown(_) => Attention::Unknown,
    }
}

/// The stale facts on `source`'s wiki at the tip this node's copy holds;
/// `known` (the last count) is kept when that tip has not moved. Reads only
/// the local copy: never a fetch, never a mirror created.
async fn count_facts(
    wikis: &WikiStore,
    config: &Config,
    source: &Source,
    known: Option<FactsAnswer>,
) -> FactsAnswer {
    if !mirror_exists(config, source) {
        return FactsAnswer::Unknown(NO_COPY.into());
    }
    let wiki = match mirror_in(wikis, config, source, None) {
        Ok(wiki) => wiki,
        Err(why) => return FactsAnswer::Unknown(why),
    };
    let tip = match wiki.local_tip().await {
        Ok(Some(tip)) => tip,
        Ok(None) if matches!(source.forge, Forge::Local { .. }) => {
            return FactsAnswer::Counted {
                commit: None,
                stale: 0,
                truncated: false,
            };
        }
        Ok(None) => return FactsAnswer::Unknown(NO_COPY.into()),
        Err(e) => return FactsAnswer::Unknown(e.to_string()),
    };
    if let Some(known) = known
        && matches!(&known, FactsAnswer::Counted { commit: Some(at), .. } if *at == tip)
    {
        return known;
    }
    match wiki.stale_facts(&tip).await {
        Ok(count) => FactsAnswer::Counted {
            commit: Some(tip),
            stale: count.stale,
            truncated: count.truncated,
        },
        Err(e) => FactsAnswer::Unknown(e.to_string()),
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
        assert_eq!(attention(&behind, 0, None, 0), Attention::Stalled);
        assert_eq!(attention(&behind, 1, None, 0), Attention::CatchingUp);
        assert_eq!(attention(&up, 0, None, 0), Attention::UpToDate);
        assert_eq!(
            attention(&LagAnswer::Unknown("x".into()), 0, None, 0),
            Attention::Unknown
        );
        // Stale facts need attention once the lag needs none.
        assert_eq!(attention(&up, 0, None, 2), Attention::StaleFacts);
        assert_eq!(attention(&behind, 0, None, 2), Attention::Stalled);
        assert_eq!(attention(&behind, 1, None, 2), Attention::CatchingUp);
        let mut order = [
            Attention::UpToDate,
            Attention::StaleFacts,
            Attention::CatchingUp,
            Attention::Unknown,
            Attention::Stalled,
            Attention::Failing,
        ];
        order.sort();
        assert_eq!(order[0], Attention::Failing);
        assert_eq!(order[3], Attention::CatchingUp);
        assert_eq!(order[4], Attention::StaleFacts);
        assert_eq!(order[5], Attention::UpToDate);
    }
}
