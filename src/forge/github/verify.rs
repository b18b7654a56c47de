//! Verification steps 1–4 of DESIGN §4 against GitHub, under one deadline:
//! the repository, the run attempt, the compare ancestry checks and, for manual
//! requests, the pull request. Also the wiki audience rules of DESIGN §9.
//!
//! Invariant: `Ok` only when every check passed on answers GitHub gave within
//! the deadline; otherwise a [`Refusal`] naming the failed check, or
//! `Unavailable` when GitHub could not be asked.

use serde::Deserialize;

use super::{GitHubError, GitHubForge, Permissions};
use crate::config::Source;
use crate::forge::{
    MAX_RANGE_COMMITS, Refusal, RunRef, VerifiedPull, VerifiedRange, VerifiedRun, precheck_range,
};
use crate::ids::{PullNumber, Sha};

/// Step 2's payload, `GET /repos/{o}/{r}/actions/runs/{id}/attempts/{n}`: octocrab's
/// `Run` lacks `path` and `run_attempt`, so only what is checked is read here.
#[derive(Debug, Deserialize)]
struct RunAttempt {
    id: u64,
    #[serde(default)]
    run_attempt: Option<u64>,
    event: String,
    path: String,
    head_branch: Option<String>,
    head_sha: String,
    repository: RunRepository,
}

#[derive(Debug, Deserialize)]
struct RunRepository {
    id: u64,
}

/// The compare answer, reduced to the ancestry fields (octocrab's
/// `CommitComparison` insists on every commit object of the answer).
#[derive(Debug, Deserialize)]
pub(super) struct Comparison {
    pub(super) status: String,
    #[serde(default)]
    behind_by: u64,
    total_commits: u64,
}

/// What step 1 established.
pub(super) struct RepoFacts {
    id: u64,
    pub(super) default_branch: String,
    pub(super) visibility: String,
}

/// Which workflow and event a run must show.
struct RunExpectation<'a> {
    workflow: &'a str,
    event: &'a str,
    head_sha: Option<&'a str>,
}

pub(super) fn refusal(e: GitHubError, not_found: impl FnOnce(String) -> Refusal) -> Refusal {
    match e {
        GitHubError::NotFound(m) => not_found(m),
        GitHubError::Unavailable {
            retry_after,
            message,
        } => Refusal::unavailable(retry_after, message),
        GitHubError::Denied(m) => Refusal::rejected("forge_denied", m),
        GitHubError::Unexpected(m) => Refusal::unavailable(60, m),
    }
}

impl GitHubForge {
    pub(super) async fn within_deadline<T>(
        &self,
        fut: impl Future<Output = Result<T, Refusal>>,
    ) -> Result<T, Refusal> {
        match tokio::time::timeout(self.verify_timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(Refusal::unavailable(
                30,
                format!(
                    "verification with GitHub did not finish within {} s; retry later",
                    self.verify_timeout.as_secs()
                ),
            )),
        }
    }

    /// Step 1 for `repository`.
    pub(super) async fn repo_facts(&self, repository: &str) -> Result<RepoFacts, Refusal> {
        let repo: octocrab::models::Repository = self
            .get(
                repository,
                &Permissions::metadata_read(),
                &format!("/repos/{repository}"),
            )
            .await
            .map_err(|e| {
                refusal(e, |_| {
                    Refusal::rejected(
                        "not_installed",
                        format!("{repository} was not found or the App is not installed on it; install the App on {repository}"),
                    )
                })
            })?;
        let default_branch = repo.default_branch.ok_or_else(|| {
            Refusal::rejected(
                "not_on_default_branch",
                format!("{repository} has no default branch (an empty repository?)"),
            )
        })?;
        let visibility = repo.visibility.unwrap_or_else(|| {
            if repo.private == Some(false) {
                "public".into()
            } else {
                "private".into()
            }
        });
        Ok(RepoFacts {
            id: repo.id.0,
            default_branch,
            visibility,
        })
    }

    /// Step 2.
    async fn check_run(
        &self,
        source: &Source,
        repo: &RepoFacts,
        run: RunRef,
        expect: RunExpectation<'_>,
    ) -> Result<VerifiedRun, Refusal> {
        let r = &source.repository;
        let path = format!(
            "/repos/{r}/actions/runs/{}/attempts/{}",
            run.id, run.attempt
        );
        let attempt: RunAttempt = self
            .get(r, &Permissions::actions_read(), &path)
            .await
            .map_err(|e| {
                refusal(e, |_| {
                    Refusal::rejected(
                        "run_not_found",
                        format!(
                            "run {} attempt {} does not exist in {r}",
                            run.id, run.attempt
                        ),
                    )
                })
            })?;
        let mismatch = |what: String| Refusal::rejected("run_mismatch", what);
        if attempt.id != run.id || attempt.run_attempt.is_some_and(|a| a != run.attempt) {
            return Err(mismatch(format!(
                "GitHub answered for another run than {} attempt {}",
                run.id, run.attempt
            )));
        }
        if attempt.repository.id != repo.id {
            return Err(mismatch(format!(
                "run {} belongs to another repository (id {}), not {r} (id {})",
                run.id, attempt.repository.id, repo.id
            )));
        }
        if attempt.event != expect.event {
            return Err(mismatch(format!(
                "run {} was triggered by {:?}, expected {:?}",
                run.id, attempt.event, expect.event
            )));
        }
        let run_path = attempt.path.split('@').next().unwrap_or_default();
        if run_path != expect.workflow {
            return Err(mismatch(format!(
                "run {} ran workflow {run_path:?}, expected {:?}",
                run.id, expect.workflow
            )));
        }
        if attempt.head_branch.as_deref() != Some(repo.default_branch.as_str()) {
            return Err(mismatch(format!(
                "run {} ran on branch {:?}, not the default branch {:?}",
                run.id,
                attempt.head_branch.unwrap_or_default(),
                repo.default_branch
            )));
        }
        if let Some(sha) = expect.head_sha
            && !attempt.head_sha.eq_ignore_ascii_case(sha)
        {
            return Err(mismatch(format!(
                "run {} ran at {}, but push_after is {sha}",
                run.id, attempt.head_sha
            )));
        }
        Ok(VerifiedRun {
            id: run.id,
            attempt: run.attempt,
            head_sha: attempt.head_sha.to_ascii_lowercase(),
        })
    }

    pub(super) async fn compare(
        &self,
        repository: &str,
        base: &str,
        head: &str,
    ) -> Result<Comparison, Refusal> {
        let path = format!("/repos/{repository}/compare/{base}...{head}");
        self.get(repository, &Permissions::contents_read(), &path)
            .await
            .map_err(|e| {
                refusal(e, |_| {
                    Refusal::rejected(
                        "unknown_commit",
                        format!(
                            "{repository} has no commits {base} and {head} with a common history"
                        ),
                    )
                })
            })
    }

    /// `sha` is still in the current default branch (step 3's second compare).
    async fn check_on_default_branch(
        &self,
        repository: &str,
        sha: &str,
        branch: &str,
        field: &str,
    ) -> Result<(), Refusal> {
        let c = self.compare(repository, sha, branch).await?;
        if c.status == "ahead" || c.status == "identical" {
            Ok(())
        } else {
            Err(Refusal::rejected(
                "not_on_default_branch",
                format!(
                    "{field} {sha} is not in the current {branch} of {repository} (force-pushed away?)"
                ),
            ))
        }
    }

    /// Steps 1–3 for a `range` dispatch. `run` is required for GitHub sources.
    pub async fn verify_range(
        &self,
        source: &Source,
        run: RunRef,
        before: &str,
        after: &str,
    ) -> Result<VerifiedRange, Refusal> {
        precheck_range(before, after)?;
        self.within_deadline(async {
            let r = &source.repository;
            let repo = self.repo_facts(r).await?;
            self.check_audience_with(source, &repo).await?;
            let verified_run = self
                .check_run(
                    source,
                    &repo,
                    run,
                    RunExpectation {
                        workflow: &source.dispatch_workflow,
                        event: "push",
                        head_sha: Some(after),
                    },
                )
                .await?;
            let c = self.compare(r, before, after).await?;
            if c.status != "ahead" || c.behind_by != 0 {
                return Err(Refusal::rejected(
                    "not_fast_forward",
                    format!("{before}...{after} is {:?} (behind by {}), not a fast-forward", c.status, c.behind_by),
                ));
            }
            if c.total_commits > MAX_RANGE_COMMITS {
                return Err(Refusal::rejected(
                    "range_too_large",
                    format!(
                        "the range holds {} commits, more than {MAX_RANGE_COMMITS}; dispatch smaller ranges",
                        c.total_commits
                    ),
                ));
            }
            self.check_on_default_branch(r, after, &repo.default_branch, "push_after")
                .await?;
            Ok(VerifiedRange {
                default_branch: repo.default_branch,
                commits: c.total_commits,
                repository_id: Some(repo.id),
                run: Some(verified_run),
            })
        })
        .await
    }

    /// Steps 1, 2 (request workflow, `workflow_dispatch`) and 4 for a
    /// `pull_request` dispatch.
    pub async fn verify_pull(
        &self,
        source: &Source,
        run: Option<RunRef>,
        number: PullNumber,
    ) -> Result<VerifiedPull, Refusal> {
        self.within_deadline(async {
            let r = &source.repository;
            let repo = self.repo_facts(r).await?;
            self.check_audience_with(source, &repo).await?;
            let verified_run = match run {
                Some(run) => Some(
                    self.check_run(
                        source,
                        &repo,
                        run,
                        RunExpectation {
                            workflow: &source.request_workflow,
                            event: "workflow_dispatch",
                            head_sha: None,
                        },
                    )
                    .await?,
                ),
                None => None,
            };
            let path = format!("/repos/{r}/pulls/{number}");
            let pr: octocrab::models::pulls::PullRequest = self
                .get(r, &Permissions::pull_requests_read(), &path)
                .await
                .map_err(|e| {
                    refusal(e, |_| {
                        Refusal::rejected(
                            "pull_not_found",
                            format!("{r} has no pull request #{number}"),
                        )
                    })
                })?;
            let merged = pr.merged_at.is_some() || pr.merged == Some(true);
            if !merged {
                return Err(Refusal::rejected(
                    "pull_not_merged",
                    format!("pull request #{number} of {r} is not merged; only merged pull requests can be reconciled"),
                ));
            }
            if pr.base.ref_field != repo.default_branch {
                return Err(Refusal::rejected(
                    "not_on_default_branch",
                    format!(
                        "pull request #{number} was merged into {:?}, not the default branch {:?}",
                        pr.base.ref_field, repo.default_branch
                    ),
                ));
            }
            let merge_sha = pr
                .merge_commit_sha
                .and_then(|s| Sha::parse(&s).ok())
                .ok_or_else(|| {
                    Refusal::rejected(
                        "pull_not_merged",
                        format!("pull request #{number} has no merge commit"),
                    )
                })?;
            self.check_on_default_branch(r, &merge_sha, &repo.default_branch, "the merge commit")
                .await?;
            Ok(VerifiedPull {
                number,
                merge_sha,
                default_branch: repo.default_branch,
                repository_id: Some(repo.id),
                run: verified_run,
            })
        })
        .await
    }
}
