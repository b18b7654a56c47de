//! The runner's check of every evidence marker in a wiki against the source,
//! once per job, before the agent starts: which facts went stale (and in
//! which commit), which only moved, and the marker rewrites the writer folds
//! into the job's one commit.
//!
//! Invariants: the check reads the wiki from teammem's own mirror and the
//! source from the job's forge, never through the agent; it can only add
//! information to a job, never fail it (a wiki or forge that cannot answer
//! leaves every marker as written, and says so in the log).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::config::{Config, Forge, Source};
use crate::forge::SourceForge;
use crate::ids::Sha;
use crate::staleness::{self, FactUpdates, PageRead};
use crate::wiki::{Destination, EvidencePage, Remote, Secret, Wiki, WikiStore};

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
/// `tip`. Empty when the wiki has no markers or cannot be read. Pages are
/// taken as parsed by the wiki's memo of them (`Wiki::evidence_scan`); only
/// those holding a citation that moved or went stale are read again, to
/// rewrite their markers.
pub async fn check(wiki: &Wiki, forge: &SourceForge<'_>, tip: &Sha, job_id: i64) -> FactUpdates {
    let not_checked = |reason: &str| {
        tracing::warn!(job_id, %reason, "the wiki's evidence markers were not checked");
        FactUpdates::default()
    };
    let (wiki_sha, pages) = match scan_marked_pages(wiki).await {
        Ok(Some(scan)) => scan,
        Ok(None) => return FactUpdates::default(),
        Err(reason) => return not_checked(&reason),
    };
    if pages.is_empty() {
        return FactUpdates::default();
    }
    let cited = staleness::citations_of(pages.iter().map(|page| &*page.evidence));
    let states = if cited.is_empty() {
        BTreeMap::new()
    } else {
        match forge.follow_citations(cited, tip).await {
            Ok(states) => states,
            Err(e) => return not_checked(&e.to_string()),
        }
    };
    let judged: Vec<&EvidencePage> = pages
        .iter()
        .filter(|page| page.path != staleness::STALE_PAGE)
        .collect();
    let to_rewrite: Vec<String> = judged
        .iter()
        .filter(|page| page.evidence.needs_text(&states))
        .map(|page| page.path.clone())
        .collect();
    let texts: HashMap<String, String> = if to_rewrite.is_empty() {
        HashMap::new()
    } else {
        match wiki.page_texts(&wiki_sha, to_rewrite).await {
            Ok(texts) => texts.into_iter().collect(),
            Err(e) => return not_checked(&e.to_string()),
        }
    };
    let updates = staleness::updates_of(
        judged.iter().map(|page| {
            let read = match texts.get(&page.path) {
                Some(text) => PageRead::Text(text),
                None => PageRead::Parsed(&page.evidence),
            };
            (page.path.as_str(), read)
        }),
        &states,
        tip,
    );
    tracing::debug!(
        job_id,
        citations = states.len(),
        pages_reread = texts.len(),
        stale = updates.stale.len(),
        moved = updates.moved,
        unchecked = updates.unchecked.len(),
        "checked the wiki's evidence markers"
    );
    updates
}

/// The wiki's tip and its pages holding evidence markers; `None` for a wiki
/// without commits.
async fn scan_marked_pages(wiki: &Wiki) -> Result<Option<(String, Vec<EvidencePage>)>, String> {
    let snapshot = wiki.snapshot().await.map_err(|e| e.to_string())?;
    let Some(sha) = snapshot.sha else {
        return Ok(None);
    };
    let (pages, cut) = wiki.evidence_scan(&sha).await.map_err(|e| e.to_string())?;
    if cut {
        tracing::warn!(
            "the wiki is larger than one marker scan reads; later pages were not checked"
        );
    }
    Ok(Some((sha, pages)))
}
