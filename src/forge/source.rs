//! The forge façade: [`Forges`] is built once per process from the
//! configuration and holds the one GitHub client (and so the one installation
//! token cache); [`Forges::of`] gives a source's [`SourceForge`], which
//! answers every question callers ask of a forge — verify a range or a pull
//! request, the default branch's tip, ancestry, the job-start re-check, the
//! evidence bundle, a pull request's patches, files, file heads and directory
//! listings at a commit, the audience check and a job's wiki token
//! (`wiki_token.rs`) — whichever forge the source is on.
//!
//! Invariants:
//! - which forge answers a question of a source's code (verification, the
//!   tip, ancestry, the job-start re-check, evidence, history, a file at a
//!   commit) is decided here, once per question: outside `forge/` (and
//!   `config/`, which defines [`Forge`]) only the files listed in
//!   `tests/it/architecture.rs` match on [`Forge`], each to decide where a
//!   wiki lives or what only GitHub has;
//! - a process reads a source's files itself only when it can
//!   ([`SourceForge::reads_here`]: a local repository, or GitHub with the
//!   App's client); the job's writer, which holds no source credential, asks
//!   the job's broker for a GitHub source's instead;
//! - local git work (gix, blocking) never runs on an async worker thread: it
//!   goes through [`blocking`], and a task that dies is "ask again later",
//!   never a yes;
//! - a GitHub source without a GitHub client (a configuration built in code
//!   without `[github]`; a loaded configuration refuses that) is refused as
//!   unavailable, naming the missing section.

use std::path::PathBuf;
use std::sync::Arc;

use super::evidence::{
    ChangedFile, EvidenceBundle, FileHead, JobScope, PatchSet, PullRequest, SourceError,
    TreeListing,
};
use super::github::GitHubForge;
pub use super::github::SetupError;
use super::wiki_token::WikiToken;
use super::{Ancestry, BranchTip, Lag, Refusal, RunRef, VerifiedPull, VerifiedRange, local};
use crate::config::{Config, Forge, Source};
use crate::ids::{PullNumber, Scope, Sha};

/// Why a GitHub source cannot be asked without `[github]`.
const NO_GITHUB: &str =
    "this source lives on GitHub but the GitHub App is not configured; add a [github] section";

/// The forges of one process.
#[derive(Clone, Default)]
pub struct Forges {
    github: Option<Arc<GitHubForge>>,
}

impl std::fmt::Debug for Forges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forges")
            .field("github", &self.github.is_some())
            .finish()
    }
}

impl Forges {
    /// With `[github]`: loads the App key (Key Vault or file) and builds the
    /// process's GitHub client.
    pub async fn from_config(config: &Config) -> Result<Forges, SetupError> {
        let github = match &config.github {
            Some(gh) => Some(Arc::new(GitHubForge::from_config(gh).await?)),
            None => None,
        };
        Ok(Forges { github })
    }

    /// Forges around an existing GitHub client (tests, the demo).
    pub fn with_github(github: Option<Arc<GitHubForge>>) -> Forges {
        Forges { github }
    }

    /// The process's GitHub client, for questions that are GitHub's alone
    /// (installation tokens, token owners, audience).
    pub fn github(&self) -> Option<&Arc<GitHubForge>> {
        self.github.as_ref()
    }

    /// The forge `source` lives on.
    pub fn of<'a>(&'a self, source: &'a Source) -> SourceForge<'a> {
        let on = match &source.forge {
            Forge::Local { repo, .. } => On::Local(repo),
            Forge::GitHub => On::GitHub(self.github.as_ref()),
        };
        SourceForge { source, on }
    }
}

/// One source's forge.
#[derive(Clone, Copy)]
pub struct SourceForge<'a> {
    source: &'a Source,
    on: On<'a>,
}

#[derive(Clone, Copy)]
enum On<'a> {
    Local(&'a PathBuf),
    GitHub(Option<&'a Arc<GitHubForge>>),
}

impl<'a> SourceForge<'a> {
    pub fn source(&self) -> &'a Source {
        self.source
    }

    /// Whether dispatches of this source name the workflow run that pushed
    /// (GitHub's are verified against it).
    pub fn has_runs(&self) -> bool {
        matches!(self.on, On::GitHub(_))
    }

    /// The GitHub client, when the source is on GitHub.
    pub fn github(&self) -> Option<&'a Arc<GitHubForge>> {
        match self.on {
            On::GitHub(client) => client,
            On::Local(_) => None,
        }
    }

    fn github_or_refuse(
        client: Option<&'a Arc<GitHubForge>>,
    ) -> Result<&'a Arc<GitHubForge>, Refusal> {
        client.ok_or_else(|| Refusal::unavailable(60, NO_GITHUB))
    }

    /// Dispatch verification of a pushed range. GitHub also checks the run
    /// (`run` is required there); a local source has no runs.
    pub async fn verify_range(
        &self,
        run: Option<RunRef>,
        before: &str,
        after: &str,
    ) -> Result<VerifiedRange, Refusal> {
        match self.on {
            On::Local(repo) => {
                let (repo, before, after) = (repo.clone(), before.to_owned(), after.to_owned());
                blocking(move || local::verify_range(&repo, &before, &after)).await
            }
            On::GitHub(client) => {
                let run = run.ok_or_else(|| {
                    Refusal::rejected(
                        "run_missing",
                        "a GitHub source's range needs the workflow run that pushed it (source_run_id)",
                    )
                })?;
                Self::github_or_refuse(client)?
                    .verify_range(self.source, run, before, after)
                    .await
            }
        }
    }

    /// Verification of one merged pull request (`run` is the dispatching
    /// workflow run, when there is one).
    pub async fn verify_pull(
        &self,
        run: Option<RunRef>,
        number: PullNumber,
    ) -> Result<VerifiedPull, Refusal> {
        match self.on {
            On::Local(repo) => {
                let repo = repo.clone();
                blocking(move || local::verify_pull(&repo, number)).await
            }
            On::GitHub(client) => {
                Self::github_or_refuse(client)?
                    .verify_pull(self.source, run, number)
                    .await
            }
        }
    }

    /// The default branch and the commit it points at now.
    pub async fn tip(&self) -> Result<BranchTip, Refusal> {
        match self.on {
            On::Local(repo) => {
                let repo = repo.clone();
                blocking(move || local::default_branch_tip(&repo)).await
            }
            On::GitHub(client) => {
                Self::github_or_refuse(client)?
                    .default_branch_tip(&self.source.repository)
                    .await
            }
        }
    }

    /// How far the default branch has moved past `cursor`.
    pub async fn lag(&self, cursor: &Sha) -> Result<Lag, Refusal> {
        match self.on {
            On::Local(repo) => {
                let (repo, cursor) = (repo.clone(), cursor.to_string());
                blocking(move || local::lag(&repo, &cursor)).await
            }
            On::GitHub(client) => {
                Self::github_or_refuse(client)?
                    .lag(&self.source.repository, cursor)
                    .await
            }
        }
    }

    /// Whether `commit` is `tip` or one of its ancestors.
    pub async fn ancestry(&self, commit: &str, tip: &str) -> Result<Ancestry, Refusal> {
        match self.on {
            On::Local(repo) => {
                let (repo, commit, tip) = (repo.clone(), commit.to_owned(), tip.to_owned());
                blocking(move || local::ancestry(&repo, &commit, &tip)).await
            }
            On::GitHub(client) => {
                Self::github_or_refuse(client)?
                    .ancestry(&self.source.repository, commit, tip)
                    .await
            }
        }
    }

    /// The default branch's first-parent history ending at `end`, oldest
    /// first, from `start`, refused past `limit` commits (backfills).
    pub async fn first_parent_history(
        &self,
        end: &Sha,
        start: &super::history::HistoryStart,
        limit: usize,
    ) -> Result<Vec<super::history::FirstParent>, Refusal> {
        match self.on {
            On::Local(repo) => {
                let (repo, end, start) = (repo.clone(), end.to_string(), start.clone());
                blocking(move || local::history::first_parent_history(&repo, &end, &start, limit))
                    .await
            }
            On::GitHub(client) => {
                Self::github_or_refuse(client)?
                    .first_parent_history(&self.source.repository, end, start, limit)
                    .await
            }
        }
    }

    /// At job start, what ingest verified still holds; returns the default
    /// branch.
    pub async fn recheck(&self, scope: &JobScope) -> Result<String, SourceError> {
        match self.on {
            On::Local(repo) => {
                let (repo, scope) = (repo.clone(), scope.clone());
                blocking_source(move || match &scope.scope {
                    Scope::Range { before, after } => {
                        local::recheck::recheck_range(&repo, before, after)
                    }
                    Scope::PullRequest { merge_sha, .. } => {
                        local::recheck::recheck_commit(&repo, merge_sha)
                    }
                })
                .await
            }
            On::GitHub(client) => {
                let client = client.ok_or_else(|| SourceError::Unavailable(NO_GITHUB.into()))?;
                match &scope.scope {
                    Scope::Range { before, after } => {
                        client.recheck_range(self.source, before, after).await
                    }
                    Scope::PullRequest { merge_sha, .. } => {
                        client.recheck_commit(self.source, merge_sha).await
                    }
                }
            }
        }
    }

    /// The job's evidence bundle, and on GitHub the patches that came with
    /// the file manifests (a local source's patches are read on demand).
    pub async fn collect_evidence(
        &self,
        scope: &JobScope,
        default_branch: &str,
    ) -> Result<(EvidenceBundle, Option<PatchSet>), SourceError> {
        match self.on {
            On::Local(repo) => {
                let (repo, scope) = (repo.clone(), scope.clone());
                let name = self.source.repository.clone();
                blocking_source(move || local::range_bundle::collect(&repo, &name, &scope))
                    .await
                    .map(|bundle| (bundle, None))
            }
            On::GitHub(client) => {
                let client = client.ok_or_else(|| SourceError::Unavailable(NO_GITHUB.into()))?;
                client
                    .collect_evidence(self.source, scope, default_branch)
                    .await
                    .map(|(bundle, patches)| (bundle, Some(patches)))
            }
        }
    }

    /// One file at commit `sha`: `Ok(None)` when `path` is not a file there,
    /// [`SourceError::Invalid`] when it is larger than `max` bytes or not
    /// UTF-8. The caller decides which commits may be read.
    pub async fn read_file(
        &self,
        sha: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<String>, SourceError> {
        match self.on {
            On::Local(repo) => {
                let (repo, sha, path) = (repo.clone(), sha.to_owned(), path.to_owned());
                blocking_source(move || local::contents::read_file_at(&repo, &sha, &path, max))
                    .await
            }
            On::GitHub(client) => {
                let client = client.ok_or_else(|| SourceError::Unavailable(NO_GITHUB.into()))?;
                client.read_file_at(self.source, sha, path, max).await
            }
        }
    }
}

impl SourceForge<'_> {
    /// Whether this process can read the source's files itself: a local
    /// repository always, a GitHub source only with the App's client (the
    /// daemon). The job's writer holds no source credential, so it reads a
    /// GitHub source through the job's broker, which asks the daemon's.
    pub fn reads_here(&self) -> bool {
        match self.on {
            On::Local(_) => true,
            On::GitHub(client) => client.is_some(),
        }
    }

    /// Whether the source → wiki mapping keeps memory within one audience,
    /// asked right before a job's wiki token is minted. Only a wiki that
    /// takes a token has an audience to cross: a local source, or a GitHub
    /// source in a process without the App's client, is `Ok`.
    pub async fn check_audience(&self) -> Result<(), Refusal> {
        match self.on {
            On::GitHub(Some(client)) => client.check_audience(self.source).await,
            On::GitHub(None) | On::Local(_) => Ok(()),
        }
    }

    /// A write token for the source's wiki, for one job that may run for
    /// `lasting`: `Ok(None)` when the wiki takes no token (a local wiki, or
    /// a GitHub source in a process without the App's client).
    pub async fn mint_wiki_token(
        &self,
        lasting: std::time::Duration,
    ) -> Result<Option<WikiToken>, Refusal> {
        match self.on {
            On::GitHub(Some(client)) => {
                WikiToken::mint(client, &self.source.wiki_repository.to_string(), lasting)
                    .await
                    .map(Some)
            }
            On::GitHub(None) | On::Local(_) => Ok(None),
        }
    }

    /// Whether reading the source's files needs a credential (a GitHub
    /// source: the App's installation token). The job's writer holds none,
    /// so the job's broker reads these sources for it, and only these.
    pub fn reads_need_a_credential(&self) -> bool {
        matches!(self.on, On::GitHub(_))
    }

    /// The changed files of merged pull request `pull`, each with its
    /// unified-diff patch (`None` for a binary file). The caller decides
    /// which pull requests may be read (a job's evidence).
    pub async fn pull_patches(
        &self,
        pull: &PullRequest,
    ) -> Result<Vec<(ChangedFile, Option<String>)>, SourceError> {
        match self.on {
            On::Local(repo) => {
                let (repo, merge_sha) = (repo.clone(), pull.merge_sha.clone());
                blocking_source(move || local::contents::file_patches(&repo, &merge_sha)).await
            }
            On::GitHub(client) => {
                let client = client.ok_or_else(|| SourceError::Unavailable(NO_GITHUB.into()))?;
                client
                    .pull_patches(self.source, pull.number.get(), &pull.merge_sha)
                    .await
            }
        }
    }

    /// The first `max` bytes of one file at commit `sha` as UTF-8 text:
    /// `Ok(None)` when `path` is not a file there, [`SourceError::Invalid`]
    /// when those bytes are not text or the file is too large to read.
    pub async fn read_head(
        &self,
        sha: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<FileHead>, SourceError> {
        match self.on {
            On::Local(repo) => {
                let (repo, sha, path) = (repo.clone(), sha.to_owned(), path.to_owned());
                blocking_source(move || local::contents::read_head_at(&repo, &sha, &path, max))
                    .await
            }
            On::GitHub(client) => {
                let client = client.ok_or_else(|| SourceError::Unavailable(NO_GITHUB.into()))?;
                client.read_head_at(self.source, sha, path, max).await
            }
        }
    }

    /// The heads of `paths` at commit `sha`, one result per path as
    /// [`SourceForge::read_head`] reads each (a path that is not a file is
    /// `Ok(None)` and does not stop the others); the outer error is the
    /// commit's. A local source opens its repository once for all of them.
    pub async fn read_heads(
        &self,
        sha: &str,
        paths: Vec<String>,
        max: usize,
    ) -> Result<Vec<Result<Option<FileHead>, SourceError>>, SourceError> {
        match self.on {
            On::Local(repo) => {
                let (repo, sha) = (repo.clone(), sha.to_owned());
                blocking_source(move || local::contents::read_heads_at(&repo, &sha, &paths, max))
                    .await
            }
            On::GitHub(_) => {
                let mut heads = Vec::with_capacity(paths.len());
                for path in &paths {
                    heads.push(self.read_head(sha, path, max).await);
                }
                Ok(heads)
            }
        }
    }

    /// The files under `directory` (`""`: the root) at commit `sha`: with
    /// `recursive` every file below it, without its files and
    /// subdirectories; sorted and bounded. `Ok(None)` when `directory` is not
    /// a directory there.
    pub async fn list_tree(
        &self,
        sha: &str,
        directory: &str,
        recursive: bool,
    ) -> Result<Option<TreeListing>, SourceError> {
        match self.on {
            On::Local(repo) => {
                let (repo, sha, directory) = (repo.clone(), sha.to_owned(), directory.to_owned());
                blocking_source(move || {
                    local::contents::list_tree_at(&repo, &sha, &directory, recursive)
                })
                .await
            }
            On::GitHub(client) => {
                let client = client.ok_or_else(|| SourceError::Unavailable(NO_GITHUB.into()))?;
                client
                    .list_tree_at(self.source, sha, directory, recursive)
                    .await
            }
        }
    }

    /// Each cited range followed from its commit to `tip`.
    pub async fn follow_citations(
        &self,
        cited: Vec<crate::staleness::Cited>,
        tip: &crate::ids::Sha,
    ) -> Result<
        std::collections::BTreeMap<crate::staleness::Cited, crate::staleness::CitationState>,
        SourceError,
    > {
        match self.on {
            On::Local(repo) => {
                let (repo, tip) = (repo.clone(), tip.clone());
                blocking_source(move || local::citations::follow(&repo, &cited, &tip)).await
            }
            On::GitHub(client) => {
                let client = client.ok_or_else(|| SourceError::Unavailable(NO_GITHUB.into()))?;
                client.follow_citations(self.source, cited, tip).await
            }
        }
    }
}

/// Runs a gix walk off the async threads; a task that dies is "ask again later".
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Refusal> + Send + 'static,
) -> Result<T, Refusal> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
        Err(Refusal::unavailable(
            5,
            format!("the forge check stopped: {e}"),
        ))
    })
}

/// [`blocking`] for evidence reads.
pub async fn blocking_source<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, SourceError> + Send + 'static,
) -> Result<T, SourceError> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
        Err(SourceError::Unavailable(format!(
            "a source-reading task stopped unexpectedly: {e}"
        )))
    })
}
