//! The runner's check of every evidence marker in a wiki against the source,
//! once per job, before the agent starts: which facts went stale (and in
//! which commit), which only moved, and the marker rewrites the writer folds
//! into the job's one commit.
//!
//! Invariants: the check reads the wiki from teammem's own mirror and the
//! source from the job's forge, never through the agent; it can only add
//! information to a job, never fail it (a wiki or forge that cannot answer
//! leaves every marker as written, and says so in the log).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::{Config, Forge, Source};
use crate::forge::SourceForge;
use crate::ids::Sha;
use crate::staleness::{self, FactUpdates};
use crate::wiki::{Destination, Remote, Secret, Wiki, WikiStore};

/// teammem's mirror of `source`'s wiki, reading with `token` when given.
pub fn mirror_of(
    config: &Config,
    source: &Source,
    token: Option<Secret>,
    deadline: Duration,
) -> Result<Wiki, String> {
    mirror_in(
        &mirrors(config).with_deadline(deadline),
        config,
        source,
        token,
    )
}

/// [`mirror_of`] through `store` (made by [`mirrors`]), whose handles (open
/// repositories, search and stale-fact caches) outlive the call.
pub fn mirror_in(
    store: &WikiStore,
    config: &Config,
    source: &Source,
    token: Option<Secret>,
) -> Result<Wiki, String> {
    let remote = match &source.forge {
        Forge::Local { wiki, .. } => Remote::LocalBare { path: wiki.clone() },
        Forge::GitHub => {
            let github = config
                .github
                .as_ref()
                .ok_or("the configuration has no [github] section")?;
            Remote::Http {
                url: format!("{}/{}.wiki.git", github.git_url, source.wiki_repository),
                token,
            }
        }
    };
    let destination = Destination {
        id: source.destination(),
        remote,
    };
    store.wiki(&destination).map_err(|e| e.to_string())
}

/// Whether this node holds a copy of `source`'s wiki to read without asking
/// the remote: a local wiki always does; a GitHub wiki once its mirror
/// exists (the first job, or a read through the dashboard, creates it).
/// Unlike [`mirror_of`], it never creates a mirror.
pub fn mirror_exists(config: &Config, source: &Source) -> bool {
    match &source.forge {
        Forge::Local { .. } => true,
        Forge::GitHub => mirrors(config)
            .mirror_path(&source.destination())
            .join("HEAD")
            .exists(),
    }
}

/// The store of this node's wiki mirrors, under `data_dir`.
pub fn mirrors(config: &Config) -> WikiStore {
    WikiStore::new(config.server.data_dir.join("mirrors"))
}

/// Every marker of the wiki's current pages judged against the source at
/// `tip`. Empty when the wiki has no markers or cannot be read.
pub async fn check(wiki: &Wiki, forge: &SourceForge<'_>, tip: &Sha, job_id: i64) -> FactUpdates {
    let pages = match read_marked_pages(wiki).await {
        Ok(pages) => pages,
        Err(reason) => {
            tracing::warn!(job_id, %reason, "the wiki's evidence markers were not checked");
            return FactUpdates::default();
        }
    };
    if pages.is_empty() {
        return FactUpdates::default();
    }
    let cited = staleness::citations(pages.iter().map(|(_, text)| text.as_str()));
    let states = if cited.is_empty() {
        BTreeMap::new()
    } else {
        match forge.follow_citations(cited, tip).await {
            Ok(states) => states,
            Err(e) => {
                tracing::warn!(job_id, reason = %e, "the wiki's evidence markers were not checked");
                return FactUpdates::default();
            }
        }
    };
    let updates = staleness::updates(
        pages
            .iter()
            .filter(|(path, _)| path != staleness::STALE_PAGE)
            .map(|(path, text)| (path.as_str(), text.as_str())),
        &states,
        tip,
    );
    tracing::debug!(
        job_id,
        citations = states.len(),
        stale = updates.stale.len(),
        moved = updates.moved,
        unchecked = updates.unchecked.len(),
        "checked the wiki's evidence markers"
    );
    updates
}

async fn read_marked_pages(wiki: &Wiki) -> Result<Vec<(String, String)>, String> {
    let snapshot = wiki.snapshot().await.map_err(|e| e.to_string())?;
    let Some(sha) = snapshot.sha else {
        return Ok(Vec::new());
    };
    let (pages, cut) = wiki.evidence_pages(&sha).await.map_err(|e| e.to_string())?;
    if cut {
        tracing::warn!(
            "the wiki is larger than one marker scan reads; later pages were not checked"
        );
    }
    Ok(pages)
}
