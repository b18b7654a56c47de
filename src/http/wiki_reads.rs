//! How the dashboard reads the wikis it shows: through one [`WikiStore`] for
//! every view (its open repositories and caches shared, not rebuilt per
//! request), asking each wiki's remote for its tip at most once per
//! [`TIP_FRESH_FOR`]; the views in between read the commit the last ask
//! found, which the mirror already holds.
//!
//! Invariant: however many people view a wiki, and however fast, the
//! dashboard fetches it at most once per [`TIP_FRESH_FOR`] once a view has
//! found its tip (views that start together before that may each ask), so
//! page views cannot become a stream of fetches against GitHub, nor hold the
//! mirror lock the jobs take. A page is at most that old when shown; the
//! page says which commit it shows.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::{Config, Source};
use crate::wiki::{Wiki, WikiStore};

/// How long a tip the dashboard fetched is read without asking again.
pub const TIP_FRESH_FOR: Duration = Duration::from_secs(10);

/// The dashboard's wiki store and the tips it found; one per process.
pub struct WikiReads {
    store: WikiStore,
    /// Destination id → when its tip was found, and the commit.
    tips: Mutex<HashMap<String, (Instant, String)>>,
}

impl std::fmt::Debug for WikiReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WikiReads").finish_non_exhaustive()
    }
}

impl WikiReads {
    /// Reads under `config`'s mirrors, each read bounded by the dashboard's
    /// forge timeout.
    pub fn new(config: &Config) -> WikiReads {
        WikiReads {
            store: crate::runner::fact_check::mirrors(config)
                .with_deadline(config.dashboard.forge_timeout),
            tips: Mutex::default(),
        }
    }

    /// A handle on `source`'s wiki (no credential: a private GitHub wiki the
    /// mirror does not hold yet cannot be read here), and the ref a view
    /// reads: the commit found less than [`TIP_FRESH_FOR`] ago, else `HEAD`.
    pub fn open(&self, config: &Config, source: &Source) -> Result<(Wiki, String), String> {
        let wiki = self.wiki(config, source)?;
        let key = source.destination();
        let tips = self.tips.lock().unwrap_or_else(|e| e.into_inner());
        let at = match tips.get(&key) {
            Some((found, commit)) if found.elapsed() < TIP_FRESH_FOR => commit.clone(),
            _ => "HEAD".to_owned(),
        };
        Ok((wiki, at))
    }

    /// Records the commit a read of `HEAD` of `source`'s wiki found.
    pub fn found_tip(&self, source: &Source, read_at: &str, commit: &str) {
        if read_at != "HEAD" || commit.is_empty() {
            return;
        }
        let mut tips = self.tips.lock().unwrap_or_else(|e| e.into_inner());
        tips.insert(source.destination(), (Instant::now(), commit.to_owned()));
    }

    /// A handle on `source`'s wiki for reads at a given commit (a job's
    /// diff), through the same store.
    pub fn wiki(&self, config: &Config, source: &Source) -> Result<Wiki, String> {
        crate::runner::fact_check::mirror_in(&self.store, config, source, None)
    }
}
