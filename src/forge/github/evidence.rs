//! The evidence of one job from GitHub's REST API (DESIGN §6), in the same
//! bundle type the local forge produces: the job-start ancestry re-check, the
//! commits of the range (compare, paged), the merged pull requests whose merge
//! commit lies in the range, each one's file manifest (its patches kept apart
//! for the writer's evidence tools), the policy file at the verified sha, and
//! single source files at a commit of the evidence (for the job's broker,
//! `runner/broker.rs`).
//!
//! Merged pull requests are found two ways. The fast path costs no extra call:
//! merge and squash subjects (`Merge pull request #12 from ...`, `Title (#12)`)
//! on the range's first-parent chain name candidates, and `GET /pulls/N`
//! confirms each. A pull request merged with "Rebase and merge" leaves no such
//! subject (its `merge_commit_sha` is the last rebased commit), so when some
//! first-parent commit of the range is not a confirmed merge or squash commit
//! (a rebase merge, or a direct push), the closed pull requests into the
//! default branch are listed too, most recently updated first, [`PER_PAGE`] a
//! page: those merged with a merge commit in the range join the confirmed ones
//! (by number, once). Paging stops at a short page, at a page whose last pull
//! request was updated before the range's oldest commit (less
//! [`CLOCK_SKEW_SECS`]; a pull request is updated when it merges, and GitHub
//! dates the commits it makes at that moment), or after [`MAX_LISTED_PAGES`]
//! pages, which marks the bundle `pull_requests_truncated` because older
//! updates were not looked at.
//!
//! A pull request merged into another branch (a maintenance branch merged
//! back, a feature branch merged in) has its merge commit among the range's
//! commits but off the first-parent chain; compare lists those commits too.
//! Their subjects name candidates `GET /pulls/N` confirms, and each other
//! merged-in commit that no confirmed merge explains is asked about with
//! `GET /commits/{sha}/pulls`; a pull request is kept only when GitHub says
//! it merged with a merge commit in the range. These calls are bounded per
//! job ([`MAX_MERGED_IN_CALLS`]; past it the bundle is marked
//! `pull_requests_truncated`), and each such pull request names the
//! first-parent merge it arrived through (`forge/merged_in.rs`).
//!
//! Invariants:
//! - only the job's own range is read: compare `before...after`, and pull
//!   requests whose merge commit *as GitHub records it* is a commit of that
//!   range (a subject naming `#N` only makes `N` a candidate until
//!   `GET /pulls/N` confirms it; a listed pull request must be merged into the
//!   default branch with its `merge_commit_sha` among the range's commits);
//! - every list is bounded: at most [`MAX_COMMITS`] commits (a larger range
//!   fails the job saying so), [`MAX_PULLS`] pull requests, [`MAX_FILES`]
//!   files per pull request and [`MAX_LISTED_PAGES`] pages of the pull-request
//!   listing, each cut list flagged `*_truncated`; no endpoint is called per
//!   first-parent commit, and at most [`MAX_MERGED_IN_CALLS`] per job for
//!   merged-in ones;
//! - GitHub's answers are classified: rate limits, 5xx and timeouts are
//!   [`SourceError::Unavailable`] (retried here when GitHub's hint is at most
//!   [`MAX_INLINE_WAIT_SECS`], otherwise the job retries with backoff; a failed
//!   listing fails the attempt rather than leaving pull requests out); a 404
//!   for a commit of the range rejects the job; any other refusal fails it with
//!   GitHub's reason, because asking again will not change the answer.
//! - a source file's head is read through the contents API at most once per
//!   blob, head size and repository while the daemon remembers it
//!   (`blob_cache.rs`): the Git trees listing and the contents answer name each
//!   file's blob sha, so an unchanged file costs the next job no request.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use base64::Engine;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::ids::Scope;

use super::blob_cache::Head;
use super::{GitHubError, GitHubForge, Permissions};
use crate::config::Source;
use crate::forge::evidence::{
    self, ArrivedThrough, BUNDLE_VERSION, ChangedFile, CommitInfo, EvidenceBundle, FilePatch,
    FileStatus, JobScope, MAX_BODY_BYTES, MAX_COMMITS, MAX_FILES, MAX_PULLS, MAX_STORED_PATCH,
    MAX_TITLE_BYTES, PatchSet, PullRequest, SourceError, SourceInfo,
};
use crate::forge::local::evidence::parse_pull_subject;
use crate::forge::merged_in::{self, Entered, first_parent_chain};

/// At most this many calls per job ask GitHub about commits merged in
/// through another branch (a subject's `GET /pulls/N`, or a commit's
/// `GET /commits/{sha}/pulls`).
pub const MAX_MERGED_IN_CALLS: usize = 100;
/// Page size of compare, pull-request and file listings (GitHub's maximum).
pub const PER_PAGE: usize = 100;
/// At most this many pages of closed pull requests are listed per job.
pub const MAX_LISTED_PAGES: usize = 10;
/// How much earlier than the range's oldest commit a pull request's last
/// update may be and still be looked at (clocks of pushers and GitHub differ).
pub const CLOCK_SKEW_SECS: i64 = 3600;
/// Tries per call when GitHub asks for a short pause.
const MAX_TRIES: u32 = 3;
/// A `Retry-After` up to this long is waited out inside the job; a longer one
/// (or none, which the client reads as 30 s) hands the job back to the queue.
pub const MAX_INLINE_WAIT_SECS: u64 = 3;

#[derive(Deserialize)]
struct RepoInfo {
    default_branch: Option<String>,
}

/// `GET /repos/{o}/{r}/compare/{base}...{head}` (one page).
#[derive(Deserialize)]
struct Comparison {
    status: String,
    #[serde(default)]
    behind_by: u64,
    total_commits: u64,
    #[serde(default)]
    commits: Vec<ApiCommit>,
}

/// A commit object as compare and `GET /commits/{sha}` give it.
#[derive(Deserialize)]
struct ApiCommit {
    sha: String,
    commit: GitData,
    #[serde(default)]
    parents: Vec<ShaRef>,
}

#[derive(Deserialize)]
struct GitData {
    author: Option<GitPerson>,
    committer: Option<GitPerson>,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
struct GitPerson {
    #[serde(default)]
    name: String,
    date: Option<String>,
}

#[derive(Deserialize)]
struct ShaRef {
    sha: String,
}

#[derive(Deserialize)]
struct Login {
    login: String,
}

#[derive(Deserialize)]
struct Label {
    name: String,
}

/// `GET /repos/{o}/{r}/pulls/{n}` (API version 2022-11-28 still carries
/// `merge_commit_sha`).
#[derive(Deserialize)]
struct ApiPull {
    number: u64,
    title: Option<String>,
    body: Option<String>,
    user: Option<Login>,
    #[serde(default)]
    labels: Vec<Label>,
    merged_at: Option<String>,
    merge_commit_sha: Option<String>,
    changed_files: Option<u64>,
}

/// One entry of `GET /repos/{o}/{r}/pulls?state=closed` (the fields the
/// listing decides on; details come from `GET /pulls/{n}` like the others).
#[derive(Deserialize)]
struct ListedPull {
    number: u64,
    updated_at: Option<String>,
    merged_at: Option<String>,
    merge_commit_sha: Option<String>,
    base: Option<BaseRef>,
}

#[derive(Deserialize)]
struct BaseRef {
    #[serde(rename = "ref")]
    name: String,
}

/// One entry of `GET /repos/{o}/{r}/pulls/{n}/files`.
#[derive(Deserialize)]
struct ApiFile {
    filename: String,
    status: String,
    #[serde(default)]
    additions: u64,
    #[serde(default)]
    deletions: u64,
    patch: Option<String>,
    /// The path before a rename.
    #[serde(default)]
    previous_filename: Option<String>,
}

/// `GET /repos/{o}/{r}/contents/{path}?ref=` for a file.
#[derive(Deserialize)]
pub(super) struct Contents {
    #[serde(rename = "type")]
    kind: String,
    size: u64,
    /// The blob's sha (what [`GitHubForge::read_head_at`] remembers).
    #[serde(default)]
    pub(super) sha: Option<String>,
    encoding: Option<String>,
    content: Option<String>,
}

/// What a failed call means for the job; `not_found` words a 404.
/// What [`GitHubForge::walk_pages`] does after a page.
enum Page {
    More,
    Done,
}

impl Page {
    /// `Done` after a page shorter than asked for (GitHub's last page).
    fn after(got: usize, asked: usize) -> Page {
        if got < asked { Page::Done } else { Page::More }
    }
}

pub(super) fn failure(error: GitHubError, not_found: impl FnOnce() -> SourceError) -> SourceError {
    match error {
        GitHubError::NotFound(_) => not_found(),
        GitHubError::Unavailable { message, .. } => SourceError::Unavailable(message),
        GitHubError::Denied(message) | GitHubError::Unexpected(message) => {
            SourceError::Invalid(message)
        }
    }
}

fn unknown_commit(repository: &str, field: &str, sha: &str) -> SourceError {
    SourceError::Rejected(format!(
        "{field} {sha} is not a commit of {repository} (force-pushed away?)"
    ))
}

fn status_of(github: &str) -> FileStatus {
    match github {
        "added" | "copied" => FileStatus::Added,
        "removed" => FileStatus::Removed,
        "renamed" => FileStatus::Renamed,
        _ => FileStatus::Modified,
    }
}

/// Percent-encodes a repository path for a URL, keeping `/` between segments.
pub(super) fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn commit_info(commit: &ApiCommit) -> CommitInfo {
    let subject = commit.commit.message.lines().next().unwrap_or_default();
    let author = commit
        .commit
        .author
        .as_ref()
        .map(|a| a.name.trim())
        .unwrap_or_default();
    let committed_at = commit
        .commit
        .committer
        .as_ref()
        .or(commit.commit.author.as_ref())
        .and_then(|p| p.date.clone())
        .unwrap_or_default();
    CommitInfo {
        sha: commit.sha.to_ascii_lowercase(),
        parents: commit
            .parents
            .iter()
            .map(|p| p.sha.to_ascii_lowercase())
            .collect(),
        author: evidence::bound(author, MAX_TITLE_BYTES).0,
        committed_at,
        subject: evidence::bound(subject, MAX_TITLE_BYTES).0,
    }
}

impl GitHubForge {
    /// `get`, waiting out short pauses GitHub asks for (up to [`MAX_TRIES`] tries).
    pub(super) async fn get_patiently<T: DeserializeOwned>(
        &self,
        repository: &str,
        perms: &Permissions,
        path: &str,
    ) -> Result<T, GitHubError> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.get(repository, perms, path).await {
                Err(GitHubError::Unavailable { retry_after, .. })
                    if tries < MAX_TRIES && retry_after <= MAX_INLINE_WAIT_SECS =>
                {
                    tokio::time::sleep(Duration::from_secs(retry_after)).await;
                }
                other => return other,
            }
        }
    }

    /// Walks a paged listing: `path` with `per_page` and `page` (from 1 up to
    /// `max_pages`) appended, each page handed to `each` with its number
    /// until `each` answers [`Page::Done`]. `Ok(true)`: the page cap ended
    /// the walk (the listing may be cut). A 404 becomes `not_found()`.
    async fn walk_pages<T: DeserializeOwned>(
        &self,
        repository: &str,
        perms: &Permissions,
        path: &str,
        (per_page, max_pages): (usize, usize),
        not_found: impl Fn() -> SourceError,
        mut each: impl FnMut(usize, T) -> Result<Page, SourceError>,
    ) -> Result<bool, SourceError> {
        let separator = if path.contains('?') { '&' } else { '?' };
        for page in 1..=max_pages {
            let url = format!("{path}{separator}per_page={per_page}&page={page}");
            let batch: T = self
                .get_patiently(repository, perms, &url)
                .await
                .map_err(|e| failure(e, &not_found))?;
            if let Page::Done = each(page, batch)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The source's current default branch.
    pub async fn default_branch(&self, repository: &str) -> Result<String, SourceError> {
        let repo: RepoInfo = self
            .get_patiently(
                repository,
                &Permissions::metadata_read(),
                &format!("/repos/{repository}"),
            )
            .await
            .map_err(|e| {
                failure(e, || {
                    SourceError::Invalid(format!(
                        "{repository} was not found or the App is no longer installed on it; install the App on {repository} and retry the job"
                    ))
                })
            })?;
        repo.default_branch.ok_or_else(|| {
            SourceError::Rejected(format!(
                "{repository} has no default branch (an empty repository?)"
            ))
        })
    }

    /// One compare page (`per_page` commits from `page`).
    async fn compare_page(
        &self,
        repository: &str,
        base: &str,
        head: &str,
        per_page: usize,
        page: usize,
        field: &str,
    ) -> Result<Comparison, SourceError> {
        let path =
            format!("/repos/{repository}/compare/{base}...{head}?per_page={per_page}&page={page}");
        self.get_patiently(repository, &Permissions::contents_read(), &path)
            .await
            .map_err(|e| failure(e, || unknown_commit(repository, field, base)))
    }

    /// `sha` is still in the current default branch.
    async fn still_on(&self, repository: &str, sha: &str, branch: &str) -> Result<(), SourceError> {
        let c = self
            .compare_page(repository, sha, branch, 1, 1, "commit")
            .await?;
        if c.status == "ahead" || c.status == "identical" {
            Ok(())
        } else {
            Err(SourceError::Rejected(format!(
                "{sha} is no longer on {branch} of {repository} (force-pushed since the dispatch was verified)"
            )))
        }
    }

    /// Re-checks at job start what ingest verified: `before...after` is a
    /// fast-forward and `after` is still on the default branch. Returns the
    /// default branch.
    pub async fn recheck_range(
        &self,
        source: &Source,
        before: &str,
        after: &str,
    ) -> Result<String, SourceError> {
        let r = &source.repository;
        let branch = self.default_branch(r).await?;
        let c = self
            .compare_page(r, before, after, 1, 1, "push_before")
            .await?;
        if c.status != "ahead" || c.behind_by != 0 {
            return Err(SourceError::Rejected(format!(
                "push_before {before} is no longer an ancestor of push_after {after} ({before}...{after} is {:?})",
                c.status
            )));
        }
        self.still_on(r, after, &branch).await?;
        Ok(branch)
    }

    /// Re-checks that a PR job's merge commit is still on the default branch.
    pub async fn recheck_commit(&self, source: &Source, sha: &str) -> Result<String, SourceError> {
        let r = &source.repository;
        let branch = self.default_branch(r).await?;
        self.still_on(r, sha, &branch).await?;
        Ok(branch)
    }

    /// The bundle of a job and the patches of its pull requests.
    pub async fn collect_evidence(
        &self,
        source: &Source,
        scope: &JobScope,
        default_branch: &str,
    ) -> Result<(EvidenceBundle, PatchSet), SourceError> {
        let r = &source.repository;
        let mut patches = PatchSet::default();
        let mut pull_requests = Vec::new();
        let mut pull_requests_truncated = false;
        let commits: Vec<CommitInfo> = match &scope.scope {
            Scope::Range { before, after } => {
                let commits = self.range_commits(r, before, after).await?;
                let found = self.range_pulls(r, default_branch, &commits, after).await?;
                pull_requests_truncated = found.truncated;
                for (pull, files) in found.pulls {
                    patches.pulls.insert(pull.number, files);
                    pull_requests.push(pull);
                }
                commits
            }
            Scope::PullRequest { number, merge_sha } => {
                let Some((pull, files)) = self.merged_pull(r, number.get(), merge_sha).await?
                else {
                    return Err(SourceError::Rejected(format!(
                        "pull request #{number} of {r} is not merged with merge commit {merge_sha} (any more)"
                    )));
                };
                patches.pulls.insert(pull.number, files);
                pull_requests.push(pull);
                let path = format!("/repos/{r}/commits/{merge_sha}");
                let commit: ApiCommit = self
                    .get_patiently(r, &Permissions::contents_read(), &path)
                    .await
                    .map_err(|e| failure(e, || unknown_commit(r, "merge_sha", merge_sha)))?;
                vec![commit_info(&commit)]
            }
        };
        let bundle = EvidenceBundle {
            version: BUNDLE_VERSION,
            source: SourceInfo {
                repository: r.to_string(),
                forge: "github".into(),
                default_branch: default_branch.to_owned(),
            },
            job: scope.clone(),
            commits,
            commits_truncated: false,
            pull_requests,
            pull_requests_truncated,
            stale_facts: Vec::new(),
            marker_rewrites: Default::default(),
        };
        bundle.validate().map_err(SourceError::Invalid)?;
        Ok((bundle, patches))
    }

    /// The merged pull requests of a range, in the order their merge commits
    /// entered the default branch, each merged-in one saying through which
    /// first-parent merge it arrived; see the module docs.
    async fn range_pulls(
        &self,
        repository: &str,
        default_branch: &str,
        commits: &[CommitInfo],
        after: &str,
    ) -> Result<RangePulls, SourceError> {
        let entered = merged_in::entered(commits, after);
        let mut found = self
            .found_pulls(repository, default_branch, commits, &entered, after)
            .await?;
        let position: HashMap<&str, usize> = entered
            .iter()
            .enumerate()
            .map(|(i, e)| (e.commit.sha.as_str(), i))
            .collect();
        found
            .pulls
            .sort_by_key(|(p, _)| position.get(p.merge_sha.as_str()).copied());
        for (pull, _) in &mut found.pulls {
            let carrier = position
                .get(pull.merge_sha.as_str())
                .and_then(|i| entered[*i].through);
            pull.arrived_through = carrier.map(|c| ArrivedThrough {
                merge_sha: c.sha.to_ascii_lowercase(),
                subject: c.subject.clone(),
            });
        }
        Ok(found)
    }

    /// The subject-confirmed pull requests of the first-parent chain, those
    /// merged in through another branch, and (when a first-parent commit is
    /// left unexplained) the listed ones; unordered.
    async fn found_pulls(
        &self,
        repository: &str,
        default_branch: &str,
        commits: &[CommitInfo],
        entered: &[Entered<'_>],
        after: &str,
    ) -> Result<RangePulls, SourceError> {
        let mut found = RangePulls::default();
        let mut named = HashSet::new();
        let mut explained = HashSet::new();
        let chain = first_parent_chain(commits, after);
        for commit in &chain {
            let Some(kind) = parse_pull_subject(&commit.subject) else {
                continue;
            };
            if !named.insert(kind.number()) {
                continue;
            }
            if found.pulls.len() == MAX_PULLS {
                found.truncated = true;
                return Ok(found);
            }
            if let Some(pull) = self
                .merged_pull(repository, kind.number(), &commit.sha)
                .await?
            {
                explained.insert(commit.sha.as_str());
                found.pulls.push(pull);
            }
        }
        self.merged_in_pulls(repository, commits, entered, &mut found, &mut named)
            .await?;
        if found.truncated || chain.iter().all(|c| explained.contains(c.sha.as_str())) {
            return Ok(found);
        }

        let position: HashMap<&str, usize> = commits
            .iter()
            .enumerate()
            .map(|(i, c)| (c.sha.as_str(), i))
            .collect();
        let (mut listed, cut) = self
            .listed_merged_pulls(
                repository,
                default_branch,
                &position,
                oldest_commit(commits),
            )
            .await?;
        listed.retain(|(number, _)| !found.pulls.iter().any(|(p, _)| p.number == *number));
        listed.sort_by_key(|(_, sha)| position.get(sha.as_str()).copied());
        for (number, sha) in listed {
            if found.pulls.len() == MAX_PULLS {
                found.truncated = true;
                break;
            }
            if let Some(pull) = self.merged_pull(repository, number, &sha).await? {
                found.pulls.push(pull);
            }
        }
        if cut {
            tracing::warn!(
                repository,
                pages = MAX_LISTED_PAGES,
                "listed {MAX_LISTED_PAGES} pages of closed pull requests without reaching the range's start; the bundle is marked pull_requests_truncated"
            );
            found.truncated = true;
        }
        Ok(found)
    }

    /// The pull requests merged into another branch that the range merged
    /// in (commits off its first-parent chain), added to `found` by number
    /// once. A subject naming `#N` makes a candidate that `GET /pulls/N`
    /// confirms; every other merged-in commit not already explained (a
    /// confirmed merge's own branch) is asked about with
    /// `GET /commits/{sha}/pulls`, keeping merged pull requests whose merge
    /// commit is in the range. At most [`MAX_MERGED_IN_CALLS`] such calls per
    /// job; past it the bundle is marked `pull_requests_truncated` and a
    /// warning says so.
    async fn merged_in_pulls(
        &self,
        repository: &str,
        commits: &[CommitInfo],
        entered: &[Entered<'_>],
        found: &mut RangePulls,
        named: &mut HashSet<u64>,
    ) -> Result<(), SourceError> {
        let merged: Vec<&CommitInfo> = entered
            .iter()
            .filter(|e| e.through.is_some())
            .map(|e| e.commit)
            .collect();
        if merged.is_empty() || found.truncated {
            return Ok(());
        }
        let graph = RangeGraph::new(commits);
        let mut explained: HashSet<usize> = HashSet::new();
        for (pull, _) in &found.pulls {
            graph.explain(&pull.merge_sha, &mut explained);
        }
        let mut calls = 0;
        let mut tried = HashSet::new();
        let mut cut = false;
        // Subjects first: one call confirms a merge or squash commit.
        for commit in &merged {
            let Some(kind) = parse_pull_subject(&commit.subject) else {
                continue;
            };
            let number = kind.number();
            if graph.is_explained(&commit.sha, &explained)
                || named.contains(&number)
                || !tried.insert(number)
            {
                continue;
            }
            if calls == MAX_MERGED_IN_CALLS {
                cut = true;
                break;
            }
            calls += 1;
            if let Some(pull) = self.merged_pull(repository, number, &commit.sha).await? {
                if found.pulls.len() == MAX_PULLS {
                    found.truncated = true;
                    return Ok(());
                }
                named.insert(number);
                graph.explain(&commit.sha, &mut explained);
                found.pulls.push(pull);
            }
        }
        // Then what GitHub associates with each commit still unexplained.
        for commit in &merged {
            if cut {
                break;
            }
            if graph.is_explained(&commit.sha, &explained) {
                continue;
            }
            if calls == MAX_MERGED_IN_CALLS {
                cut = true;
                break;
            }
            calls += 1;
            let path = format!(
                "/repos/{repository}/commits/{}/pulls?per_page={PER_PAGE}",
                commit.sha
            );
            let associated: Vec<ListedPull> = match self
                .get_patiently(repository, &Permissions::pull_requests_read(), &path)
                .await
            {
                Ok(list) => list,
                Err(GitHubError::NotFound(e) | GitHubError::Unexpected(e)) => {
                    tracing::info!(
                        repository,
                        commit = commit.sha.as_str(),
                        "the pull requests of merged-in commit {} could not be listed ({e}); it is left out of the evidence",
                        commit.sha
                    );
                    continue;
                }
                Err(e) => return Err(failure(e, || SourceError::Invalid(String::new()))),
            };
            for pull in associated {
                let sha = pull
                    .merge_commit_sha
                    .as_deref()
                    .map(str::to_ascii_lowercase)
                    .filter(|sha| graph.contains(sha));
                let (Some(_), Some(sha)) = (&pull.merged_at, sha) else {
                    continue;
                };
                if named.contains(&pull.number) {
                    continue;
                }
                if let Some(found_pull) = self.merged_pull(repository, pull.number, &sha).await? {
                    if found.pulls.len() == MAX_PULLS {
                        found.truncated = true;
                        return Ok(());
                    }
                    named.insert(pull.number);
                    graph.explain(&sha, &mut explained);
                    found.pulls.push(found_pull);
                }
            }
            if let Some(i) = graph.index(&commit.sha) {
                explained.insert(i);
            }
        }
        if cut {
            tracing::warn!(
                repository,
                calls = MAX_MERGED_IN_CALLS,
                "asked GitHub about {MAX_MERGED_IN_CALLS} commits merged in through other branches and stopped; the bundle is marked pull_requests_truncated"
            );
            found.truncated = true;
        }
        Ok(())
    }

    /// Pages `GET /pulls?state=closed&base={branch}&sort=updated&direction=desc`
    /// and keeps `(number, merge sha)` of the pull requests merged into
    /// `branch` with a merge commit among `in_range`. Stops at a short page,
    /// at a page ending before `not_before`, or after [`MAX_LISTED_PAGES`]
    /// pages (then `true`: the listing was cut).
    async fn listed_merged_pulls(
        &self,
        repository: &str,
        branch: &str,
        in_range: &HashMap<&str, usize>,
        not_before: Option<DateTime<Utc>>,
    ) -> Result<(Vec<(u64, String)>, bool), SourceError> {
        let mut kept = Vec::new();
        let path = format!(
            "/repos/{repository}/pulls?state=closed&base={}&sort=updated&direction=desc",
            encode_path(branch)
        );
        let not_found = || {
            SourceError::Invalid(format!(
                "GitHub answered 404 for the pull requests of {repository}; check that the App may read pull requests there"
            ))
        };
        let cut = self
            .walk_pages(
                repository,
                &Permissions::pull_requests_read(),
                &path,
                (PER_PAGE, MAX_LISTED_PAGES),
                not_found,
                |_, batch: Vec<ListedPull>| {
                    for pull in &batch {
                        let into_branch = pull.base.as_ref().is_some_and(|b| b.name == branch);
                        let sha = pull
                            .merge_commit_sha
                            .as_deref()
                            .map(str::to_ascii_lowercase)
                            .filter(|sha| in_range.contains_key(sha.as_str()));
                        if let (true, Some(_), Some(sha)) = (into_branch, &pull.merged_at, sha) {
                            kept.push((pull.number, sha));
                        }
                    }
                    let older_than_range = match (not_before, batch.last()) {
                        (Some(limit), Some(last)) => last
                            .updated_at
                            .as_deref()
                            .and_then(parse_time)
                            .is_some_and(|updated| updated < limit),
                        _ => false,
                    };
                    Ok(if older_than_range {
                        Page::Done
                    } else {
                        Page::after(batch.len(), PER_PAGE)
                    })
                },
            )
            .await?;
        Ok((kept, cut))
    }

    /// Every commit of `before...after`, oldest first, paging through compare.
    async fn range_commits(
        &self,
        repository: &str,
        before: &str,
        after: &str,
    ) -> Result<Vec<CommitInfo>, SourceError> {
        let mut commits: Vec<CommitInfo> = Vec::new();
        let mut seen = HashSet::new();
        let mut total = 0;
        let path = format!("/repos/{repository}/compare/{before}...{after}");
        let not_found = || unknown_commit(repository, "push_before", before);
        let pages = (PER_PAGE, MAX_COMMITS.div_ceil(PER_PAGE));
        let each = |page: usize, c: Comparison| {
            if page == 1 {
                if c.status != "ahead" || c.behind_by != 0 {
                    return Err(SourceError::Rejected(format!(
                        "push_before {before} is no longer an ancestor of push_after {after}"
                    )));
                }
                total = usize::try_from(c.total_commits).unwrap_or(usize::MAX);
                if total > MAX_COMMITS {
                    return Err(SourceError::Invalid(format!(
                        "the range {before}..{after} holds {total} commits, more than {MAX_COMMITS}; request its pull requests one by one (teammem request) or dispatch smaller ranges"
                    )));
                }
            }
            let got = c.commits.len();
            for commit in &c.commits {
                if seen.insert(commit.sha.to_ascii_lowercase()) {
                    commits.push(commit_info(commit));
                }
            }
            Ok(if commits.len() >= total {
                Page::Done
            } else {
                Page::after(got, PER_PAGE)
            })
        };
        let perms = Permissions::contents_read();
        self.walk_pages(repository, &perms, &path, pages, not_found, each)
            .await?;
        if commits.len() < total {
            return Err(SourceError::Unavailable(format!(
                "GitHub listed {} of the {total} commits of {before}..{after}; the job will ask again",
                commits.len()
            )));
        }
        Ok(commits)
    }

    /// Pull request `number` if GitHub says it was merged with `merge_sha`,
    /// with its manifest and patches; `None` when it was not (a subject that
    /// only names the number).
    async fn merged_pull(
        &self,
        repository: &str,
        number: u64,
        merge_sha: &str,
    ) -> Result<Option<(PullRequest, Vec<FilePatch>)>, SourceError> {
        let path = format!("/repos/{repository}/pulls/{number}");
        let pull: ApiPull = match self
            .get_patiently(repository, &Permissions::pull_requests_read(), &path)
            .await
        {
            Ok(pull) => pull,
            Err(GitHubError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(failure(e, || SourceError::Invalid(String::new()))),
        };
        let merged_here = pull
            .merge_commit_sha
            .as_deref()
            .is_some_and(|sha| sha.eq_ignore_ascii_case(merge_sha));
        let Some(merged_at) = pull.merged_at.clone().filter(|_| merged_here) else {
            return Ok(None);
        };
        let mut api_files: Vec<ApiFile> = Vec::new();
        let path = format!("/repos/{repository}/pulls/{number}/files");
        let not_found = || {
            SourceError::Invalid(format!(
                "GitHub answered 404 for the files of pull request #{number} of {repository}; check that the App may read pull requests there"
            ))
        };
        let pages = (PER_PAGE, MAX_FILES.div_ceil(PER_PAGE));
        self.walk_pages(
            repository,
            &Permissions::pull_requests_read(),
            &path,
            pages,
            not_found,
            |_, batch: Vec<ApiFile>| {
                let got = batch.len();
                api_files.extend(batch);
                Ok(Page::after(got, PER_PAGE))
            },
        )
        .await?;
        let listed = api_files.len();
        api_files.truncate(MAX_FILES);
        let files_truncated = pull
            .changed_files
            .map(|n| n > api_files.len() as u64)
            .unwrap_or(listed > MAX_FILES);
        api_files.sort_by(|a, b| a.filename.cmp(&b.filename));
        let mut files = Vec::with_capacity(api_files.len());
        let mut file_patches = Vec::with_capacity(api_files.len());
        for file in api_files {
            let (patch, patch_truncated) = match &file.patch {
                Some(p) => {
                    let (p, cut) = evidence::bound(p, MAX_STORED_PATCH);
                    (Some(p), cut)
                }
                None => (None, false),
            };
            file_patches.push(FilePatch {
                path: file.filename.clone(),
                patch,
                patch_truncated,
            });
            let status = status_of(&file.status);
            files.push(ChangedFile {
                path: file.filename,
                status,
                additions: file.additions,
                deletions: file.deletions,
                previous_path: file
                    .previous_filename
                    .filter(|_| status == FileStatus::Renamed),
            });
        }
        let (title, _) =
            evidence::bound(pull.title.as_deref().unwrap_or_default(), MAX_TITLE_BYTES);
        let (body, body_truncated) = evidence::bound(
            pull.body.as_deref().unwrap_or_default().trim(),
            MAX_BODY_BYTES,
        );
        let pull = PullRequest {
            number: pull.number,
            title,
            body,
            body_truncated,
            author: pull.user.map(|u| u.login).unwrap_or_default(),
            labels: pull.labels.into_iter().map(|l| l.name).collect(),
            merged_at,
            merge_sha: merge_sha.to_ascii_lowercase(),
            files,
            files_truncated,
            arrived_through: None,
        };
        Ok(Some((pull, file_patches)))
    }

    /// The source's policy file at `sha`: `Ok(None)` when there is none there,
    /// [`SourceError::Invalid`] when it is larger than `max` bytes or not UTF-8.
    pub async fn read_policy(
        &self,
        source: &Source,
        sha: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<String>, SourceError> {
        self.read_file_at(source, sha, path, max).await
    }

    /// One file of the source at commit `sha` (the contents API at that ref,
    /// with the daemon's `contents: read` token): `Ok(None)` when `path` is
    /// not a file there (absent, a directory, a symlink or a submodule),
    /// [`SourceError::Invalid`] when it is larger than `max` bytes or not UTF-8.
    /// The caller decides which commits may be read (a job's evidence).
    pub async fn read_file_at(
        &self,
        source: &Source,
        sha: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<String>, SourceError> {
        let Some(bytes) = self.contents_at(source, sha, path, max as u64).await? else {
            return Ok(None);
        };
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| SourceError::Invalid(format!("{path} at {sha} is not UTF-8 text")))
    }

    /// The first `max` bytes of one file at commit `sha`, like
    /// [`GitHubForge::read_file_at`] but for a file of any size the contents
    /// API serves (up to 1 MiB; larger ones are [`SourceError::Invalid`]).
    /// A path whose blob at `sha` is known (from [`GitHubForge::list_tree_at`]
    /// or an earlier read) and whose head of `max` bytes was read before, in
    /// this repository, is answered from memory without a request.
    pub async fn read_head_at(
        &self,
        source: &Source,
        sha: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<evidence::FileHead>, SourceError> {
        let r = source.repository.as_str();
        let key_path = path.trim_start_matches('/');
        let known = self.blobs.blob_at(r, sha, key_path);
        if let Some(head) = known.and_then(|blob| self.blobs.head(r, &blob, max)) {
            return head_answer(head, path, sha).map(Some);
        }
        let Some(contents) = self.contents_entry(source, sha, path).await? else {
            return Ok(None);
        };
        let head = if contents.size > CONTENTS_API_LIMIT {
            Head::TooLarge(contents.size)
        } else {
            let bytes = decode_contents(&contents, path, sha, CONTENTS_API_LIMIT)?;
            evidence::FileHead::of(&bytes, max).map_or(Head::NotText, Head::Text)
        };
        if let Some(blob) = contents.sha.as_deref().filter(|b| evidence::is_full_sha(b)) {
            self.blobs.remember_path(r, sha, key_path, blob);
            self.blobs.remember_head(r, blob, max, head.clone());
        }
        head_answer(head, path, sha).map(Some)
    }

    /// The bytes of one file at `sha` through the contents API, refused when
    /// larger than `max`.
    async fn contents_at(
        &self,
        source: &Source,
        sha: &str,
        path: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>, SourceError> {
        match self.contents_entry(source, sha, path).await? {
            Some(contents) => decode_contents(&contents, path, sha, max).map(Some),
            None => Ok(None),
        }
    }

    /// The contents API's answer for `path` at `sha` when it is a file
    /// (`None`: absent, a directory, a symlink or a submodule).
    pub(super) async fn contents_entry(
        &self,
        source: &Source,
        sha: &str,
        path: &str,
    ) -> Result<Option<Contents>, SourceError> {
        let r = &source.repository;
        let url = format!(
            "/repos/{r}/contents/{}?ref={sha}",
            encode_path(path.trim_start_matches('/'))
        );
        // A directory answers with a list of its entries, a file with an object.
        let answer: serde_json::Value = match self
            .get_patiently(r, &Permissions::contents_read(), &url)
            .await
        {
            Ok(answer) => answer,
            Err(GitHubError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(failure(e, || SourceError::Invalid(String::new()))),
        };
        if !answer.is_object() {
            return Ok(None);
        }
        let contents: Contents = serde_json::from_value(answer).map_err(|e| {
            SourceError::Invalid(format!(
                "GitHub's answer for {path} at {sha} has an unexpected shape: {e}"
            ))
        })?;
        Ok((contents.kind == "file").then_some(contents))
    }

    /// The files under `directory` (`""`: the root) at commit `sha`, as
    /// [`crate::forge::local::evidence::list_tree_at`] lists them, through the
    /// Git trees API (one call per directory level, `recursive=1` on the
    /// last): `Ok(None)` when `directory` is not a directory there. The
    /// caller decides which commits may be read.
    pub async fn list_tree_at(
        &self,
        source: &Source,
        sha: &str,
        directory: &str,
        recursive: bool,
    ) -> Result<Option<evidence::TreeListing>, SourceError> {
        use evidence::{EntryKind, TreeEntry, TreeListing};
        let r = &source.repository;
        let directory =
            evidence::clean_source_path(directory, true).map_err(SourceError::Invalid)?;
        let perms = Permissions::contents_read();
        let unknown = || unknown_commit(r.as_str(), "commit", sha);
        let mut tree = sha.to_owned();
        let segments: Vec<&str> = if directory.is_empty() {
            Vec::new()
        } else {
            directory.split('/').collect()
        };
        for segment in &segments {
            let url = format!("/repos/{r}/git/trees/{tree}");
            let level: GitTree = self
                .get_patiently(r, &perms, &url)
                .await
                .map_err(|e| failure(e, unknown))?;
            match level
                .tree
                .into_iter()
                .find(|e| e.path == *segment && e.kind == "tree")
            {
                Some(entry) if evidence::is_full_sha(&entry.sha) => tree = entry.sha,
                _ => return Ok(None),
            }
        }
        let url = format!(
            "/repos/{r}/git/trees/{tree}{}",
            if recursive { "?recursive=1" } else { "" }
        );
        let answer: GitTree = match self.get_patiently(r, &perms, &url).await {
            Ok(answer) => answer,
            Err(GitHubError::NotFound(_)) if !segments.is_empty() => return Ok(None),
            Err(e) => return Err(failure(e, unknown)),
        };
        // Each regular file's blob sha rides along, for `read_head_at`.
        let mut entries: Vec<(TreeEntry, Option<String>)> = answer
            .tree
            .into_iter()
            .filter_map(|e| {
                let kind = match e.kind.as_str() {
                    "blob" => EntryKind::File,
                    "tree" if !recursive => EntryKind::Directory,
                    _ => return None,
                };
                let regular = matches!(e.mode.as_str(), "100644" | "100755");
                let blob = (kind == EntryKind::File && regular && evidence::is_full_sha(&e.sha))
                    .then_some(e.sha);
                let path = if directory.is_empty() {
                    e.path
                } else {
                    format!("{directory}/{}", e.path)
                };
                Some((TreeEntry { path, kind }, blob))
            })
            .collect();
        entries.sort_by(|a, b| a.0.path.cmp(&b.0.path));
        let mut listing = TreeListing {
            entries: Vec::new(),
            truncated: answer.truncated,
        };
        let mut bytes = 0;
        for (entry, blob) in entries {
            // Only what the listing keeps is remembered (it is bounded).
            let path = blob.as_ref().map(|_| entry.path.clone());
            if !listing.push(entry, &mut bytes) {
                break;
            }
            if let (Some(path), Some(blob)) = (path, blob) {
                self.blobs.remember_path(r, sha, &path, &blob);
            }
        }
        Ok(Some(listing))
    }
}

/// The largest file the contents API serves with its content.
const CONTENTS_API_LIMIT: u64 = 1024 * 1024;

fn too_large(path: &str, sha: &str, size: u64, max: u64) -> SourceError {
    SourceError::Invalid(format!(
        "{path} at {sha} is {size} bytes, more than the {max}-byte limit"
    ))
}

/// The bytes of a contents-API file answer, refused when larger than `max`.
fn decode_contents(
    contents: &Contents,
    path: &str,
    sha: &str,
    max: u64,
) -> Result<Vec<u8>, SourceError> {
    if contents.size > max {
        return Err(too_large(path, sha, contents.size, max));
    }
    if contents.encoding.as_deref() != Some("base64") {
        return Err(SourceError::Invalid(format!(
            "GitHub gave {path} at {sha} in an encoding other than base64"
        )));
    }
    let encoded: String = contents
        .content
        .as_deref()
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| {
            SourceError::Invalid(format!("GitHub's copy of {path} is not valid base64"))
        })?;
    if bytes.len() as u64 > max {
        return Err(too_large(path, sha, bytes.len() as u64, max));
    }
    Ok(bytes)
}

/// What [`GitHubForge::read_head_at`] answers for a head, read or remembered.
fn head_answer(head: Head, path: &str, sha: &str) -> Result<evidence::FileHead, SourceError> {
    match head {
        Head::Text(head) => Ok(head),
        Head::NotText => Err(SourceError::Invalid(format!(
            "{path} at {sha} is not UTF-8 text"
        ))),
        Head::TooLarge(size) => Err(too_large(path, sha, size, CONTENTS_API_LIMIT)),
    }
}

/// One level of the Git trees API's answer.
#[derive(Deserialize)]
struct GitTree {
    tree: Vec<GitTreeEntry>,
    #[serde(default)]
    truncated: bool,
}

#[derive(Deserialize)]
struct GitTreeEntry {
    path: String,
    #[serde(default)]
    mode: String,
    #[serde(rename = "type")]
    kind: String,
    sha: String,
}

/// The pull requests a range's evidence found, with their patches.
#[derive(Default)]
struct RangePulls {
    pulls: Vec<(PullRequest, Vec<FilePatch>)>,
    /// More were merged in the range than [`MAX_PULLS`], or the listing was cut.
    truncated: bool,
}

fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The earliest committer date of the range, less [`CLOCK_SKEW_SECS`]: no pull
/// request merged in the range was last updated before it. `None` when a
/// commit's date is unreadable (then only the page cap ends the listing).
fn oldest_commit(commits: &[CommitInfo]) -> Option<DateTime<Utc>> {
    let mut oldest: Option<DateTime<Utc>> = None;
    for commit in commits {
        let at = parse_time(&commit.committed_at)?;
        oldest = Some(oldest.map_or(at, |o| o.min(at)));
    }
    oldest.map(|o| o - chrono::Duration::seconds(CLOCK_SKEW_SECS))
}

/// A range's commit graph, for explaining merged-in commits: a confirmed
/// pull request's merge commit explains itself and the commits its merge
/// brought in (reachable from its second and later parents, not from its
/// first), which are that pull request's own and need no question.
struct RangeGraph<'a> {
    commits: &'a [CommitInfo],
    index: HashMap<String, usize>,
}

impl<'a> RangeGraph<'a> {
    fn new(commits: &'a [CommitInfo]) -> RangeGraph<'a> {
        let index = commits
            .iter()
            .enumerate()
            .map(|(i, c)| (c.sha.to_ascii_lowercase(), i))
            .collect();
        RangeGraph { commits, index }
    }

    fn index(&self, sha: &str) -> Option<usize> {
        self.index.get(&sha.to_ascii_lowercase()).copied()
    }

    fn contains(&self, sha: &str) -> bool {
        self.index(sha).is_some()
    }

    fn is_explained(&self, sha: &str, explained: &HashSet<usize>) -> bool {
        self.index(sha).is_some_and(|i| explained.contains(&i))
    }

    /// The range's commits reachable from `starts` (inside the range only).
    fn reach(&self, starts: &[String], stop: &HashSet<usize>) -> HashSet<usize> {
        let mut seen = HashSet::new();
        let mut pending: Vec<usize> = starts.iter().filter_map(|s| self.index(s)).collect();
        while let Some(at) = pending.pop() {
            if stop.contains(&at) || !seen.insert(at) {
                continue;
            }
            pending.extend(
                self.commits[at]
                    .parents
                    .iter()
                    .filter_map(|p| self.index(p)),
            );
        }
        seen
    }

    /// Marks `merge_sha` and what its merge brought in as explained.
    fn explain(&self, merge_sha: &str, explained: &mut HashSet<usize>) {
        let Some(at) = self.index(merge_sha) else {
            return;
        };
        explained.insert(at);
        let parents = &self.commits[at].parents;
        if parents.len() < 2 {
            return;
        }
        let first = self.reach(&parents[..1], &HashSet::new());
        explained.extend(self.reach(&parents[1..], &first));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(sha: &str, parents: &[&str], subject: &str) -> CommitInfo {
        CommitInfo {
            sha: sha.into(),
            parents: parents.iter().map(|p| p.to_string()).collect(),
            author: String::new(),
            committed_at: String::new(),
            subject: subject.into(),
        }
    }

    #[test]
    fn the_first_parent_chain_skips_merged_branches_and_stops_at_the_range() {
        // before=o; a (branch), m = merge(o, a), s (squash) on top.
        let commits = vec![
            commit("a", &["o"], "Work on the branch (#9)"),
            commit("m", &["o", "a"], "Merge pull request #12 from x/y"),
            commit("s", &["m"], "Docs (#13)"),
        ];
        let chain: Vec<&str> = first_parent_chain(&commits, "s")
            .iter()
            .map(|c| c.sha.as_str())
            .collect();
        assert_eq!(chain, ["m", "s"]);
        assert!(first_parent_chain(&commits, "unknown").is_empty());
    }

    #[test]
    fn the_listing_looks_back_to_the_oldest_commit_less_the_clock_skew() {
        let dated = |sha: &str, at: &str| CommitInfo {
            committed_at: at.into(),
            ..commit(sha, &[], "")
        };
        // GitHub writes `Z`; other offsets are read too.
        let commits = vec![
            dated("a", "2026-03-01T12:00:00Z"),
            dated("b", "2026-03-01T13:30:00+02:00"),
        ];
        let limit = oldest_commit(&commits).unwrap();
        assert_eq!(limit.to_rfc3339(), "2026-03-01T10:30:00+00:00");
        // An unreadable date: no time limit, only the page cap.
        let commits = vec![dated("a", "2026-03-01T12:00:00Z"), dated("b", "")];
        assert_eq!(oldest_commit(&commits), None);
    }

    #[test]
    fn file_statuses_map_to_the_bundle_words() {
        assert_eq!(status_of("added"), FileStatus::Added);
        assert_eq!(status_of("copied"), FileStatus::Added);
        assert_eq!(status_of("removed"), FileStatus::Removed);
        assert_eq!(status_of("renamed"), FileStatus::Renamed);
        assert_eq!(status_of("changed"), FileStatus::Modified);
    }

    #[test]
    fn paths_are_percent_encoded_but_keep_their_slashes() {
        assert_eq!(
            encode_path(".github/team memory.md"),
            ".github/team%20memory.md"
        );
        assert_eq!(encode_path("a/ü?#"), "a/%C3%BC%3F%23");
    }
}
