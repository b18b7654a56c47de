//! The evidence bundle of one job from GitHub's REST API (DESIGN §6), the
//! same bundle type the local forge produces: the commits of the range
//! (compare, paged), the merged pull requests whose merge commit lies in the
//! range (found by `merged_pulls.rs`), each one's file manifest (its patches
//! kept apart for the writer's evidence tools), or the one merged pull
//! request of a PR job.
//!
//! Invariants:
//! - only the job's own range is read: compare `before...after`, and pull
//!   requests whose merge commit *as GitHub records it* is a commit of that
//!   range (a subject naming `#N` only makes `N` a candidate until
//!   `GET /pulls/N` confirms it);
//! - every list is bounded: at most [`MAX_COMMITS`] commits (a larger range
//!   fails the job saying so), [`MAX_PULLS`](crate::forge::evidence::MAX_PULLS) pull requests and [`MAX_FILES`]
//!   files per pull request, each cut list flagged `*_truncated`; no
//!   endpoint is called per first-parent commit;
//! - GitHub's answers are classified: rate limits, 5xx and timeouts are
//!   [`SourceError::Unavailable`] (retried in `api.rs` when GitHub's hint is
//!   short, otherwise the job retries with backoff; a failed listing fails
//!   the attempt rather than leaving pull requests out); a 404 for a commit
//!   of the range rejects the job; any other refusal fails it with GitHub's
//!   reason, because asking again will not change the answer.

use std::collections::HashSet;

use serde::Deserialize;

use super::api::{PER_PAGE, Page, failure, unknown_commit};
use super::{GitHubError, GitHubForge, Permissions};
use crate::config::Source;
use crate::forge::evidence::{
    self, BUNDLE_VERSION, ChangedFile, CommitInfo, EvidenceBundle, FilePatch, FileStatus,
    ForgeKind, JobScope, MAX_BODY_BYTES, MAX_COMMITS, MAX_FILES, MAX_STORED_PATCH, MAX_TITLE_BYTES,
    PatchSet, PullRequest, SourceError, SourceInfo,
};
use crate::ids::{PullNumber, Scope, Sha};

/// `GET /repos/{o}/{r}/compare/{base}...{head}` (one page).
#[derive(Deserialize)]
pub(super) struct Comparison {
    pub(super) status: String,
    #[serde(default)]
    pub(super) behind_by: u64,
    total_commits: u64,
    #[serde(default)]
    commits: Vec<ApiCommit>,
    /// The range's changed files (GitHub lists at most 300).
    #[serde(default)]
    files: Vec<ComparedFile>,
}

/// The most files GitHub's compare lists.
const COMPARE_MAX_FILES: usize = 300;

/// A file of a compare: only its paths matter here.
#[derive(Deserialize)]
pub(super) struct ComparedFile {
    filename: String,
    #[serde(default)]
    previous_filename: Option<String>,
}

/// A commit object as compare and `GET /commits/{sha}` give it.
#[derive(Deserialize)]
pub(super) struct ApiCommit {
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

fn status_of(github: &str) -> FileStatus {
    match github {
        "added" | "copied" => FileStatus::Added,
        "removed" => FileStatus::Removed,
        "renamed" => FileStatus::Renamed,
        _ => FileStatus::Modified,
    }
}

/// A commit GitHub listed, its ids checked (an answer that is not a full
/// commit id is an invalid source, not a bundle that fails later).
pub(super) fn commit_info(commit: &ApiCommit) -> Result<CommitInfo, SourceError> {
    let sha = |text: &str| {
        Sha::parse(text).map_err(|e| SourceError::Invalid(format!("GitHub listed a commit: {e}")))
    };
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
    Ok(CommitInfo {
        sha: sha(&commit.sha)?,
        parents: commit
            .parents
            .iter()
            .map(|p| sha(&p.sha))
            .collect::<Result<_, _>>()?,
        author: evidence::bound(author, MAX_TITLE_BYTES).0,
        committed_at,
        subject: evidence::bound(subject, MAX_TITLE_BYTES).0,
    })
}

impl GitHubForge {
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
        let mut range_files = std::collections::BTreeMap::new();
        let commits: Vec<CommitInfo> = match &scope.scope {
            Scope::Range { before, after } => {
                let commits = self
                    .range_commits(r, before, after, &mut range_files)
                    .await?;
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
                vec![commit_info(&commit)?]
            }
        };
        // What the range changed that no pull request did (a compare names
        // at most 300 files: a longer one is cut, and says so).
        let listed_all = range_files.len() < COMPARE_MAX_FILES;
        let range_paths = range_files
            .into_iter()
            .flat_map(|(path, previous)| std::iter::once(path).chain(previous));
        let (direct_changes, cut) = evidence::direct_changes(range_paths, &pull_requests);
        let direct_changes_truncated = cut || !listed_all;
        let bundle = EvidenceBundle {
            version: BUNDLE_VERSION,
            source: SourceInfo {
                repository: r.clone(),
                forge: ForgeKind::Github,
                default_branch: default_branch.to_owned(),
            },
            job: scope.clone(),
            commits,
            commits_truncated: false,
            pull_requests,
            pull_requests_truncated,
            stale_facts: Vec::new(),
            marker_rewrites: Default::default(),
            direct_changes,
            direct_changes_truncated,
            tip_is_newest: true,
        };
        bundle.validate().map_err(SourceError::Invalid)?;
        Ok((bundle, patches))
    }

    /// Every commit of `before...after`, oldest first, paging through compare.
    async fn range_commits(
        &self,
        repository: &str,
        before: &str,
        after: &str,
        files: &mut std::collections::BTreeMap<String, Option<String>>,
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
            for file in c.files {
                files.insert(file.filename, file.previous_filename);
            }
            let got = c.commits.len();
            for commit in &c.commits {
                if seen.insert(commit.sha.to_ascii_lowercase()) {
                    commits.push(commit_info(commit)?);
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

    /// The files of pull request `number` (merged with `merge_sha`), each with
    /// its patch as the bundle keeps it, read again from GitHub: a local
    /// source's patches, for a GitHub source in a process that has the App.
    pub async fn pull_patches(
        &self,
        source: &Source,
        number: u64,
        merge_sha: &str,
    ) -> Result<Vec<(ChangedFile, Option<String>)>, SourceError> {
        let r = &source.repository;
        let Some((pull, patches)) = self.merged_pull(r, number, merge_sha).await? else {
            return Err(SourceError::Rejected(format!(
                "pull request #{number} of {r} is not merged with merge commit {merge_sha} (any more)"
            )));
        };
        // `merged_pull` lists files and patches in the same order.
        Ok(pull
            .files
            .into_iter()
            .zip(patches.into_iter().map(|p| p.patch))
            .collect())
    }

    /// Pull request `number` if GitHub says it was merged with `merge_sha`,
    /// with its manifest and patches; `None` when it was not (a subject that
    /// only names the number).
    pub(super) async fn merged_pull(
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
            number: PullNumber::new(pull.number).map_err(SourceError::Invalid)?,
            title,
            body,
            body_truncated,
            author: pull.user.map(|u| u.login).unwrap_or_default(),
            labels: pull.labels.into_iter().map(|l| l.name).collect(),
            merged_at,
            merge_sha: Sha::parse(merge_sha).map_err(SourceError::Invalid)?,
            files,
            files_truncated,
            arrived_through: None,
        };
        Ok(Some((pull, file_patches)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_statuses_map_to_the_bundle_words() {
        assert_eq!(status_of("added"), FileStatus::Added);
        assert_eq!(status_of("copied"), FileStatus::Added);
        assert_eq!(status_of("removed"), FileStatus::Removed);
        assert_eq!(status_of("renamed"), FileStatus::Renamed);
        assert_eq!(status_of("changed"), FileStatus::Modified);
    }
}
