//! The job-start re-check of a GitHub source: what ingest verified (the
//! range is a fast-forward, its newest commit or the pull request's merge
//! commit is on the default branch) still holds when the job runs, asked
//! of compare; and the source's current default branch.
//!
//! Invariant: a re-check never says yes on a guess: a commit GitHub does not
//! know, or one no longer on the default branch, rejects the job; a GitHub
//! that cannot answer is "ask again later".

use serde::Deserialize;

use super::api::{failure, unknown_commit};
use super::range_bundle::Comparison;
use super::{GitHubForge, Permissions};
use crate::config::Source;
use crate::forge::evidence::SourceError;

#[derive(Deserialize)]
struct RepoInfo {
    default_branch: Option<String>,
}

impl GitHubForge {
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
}
