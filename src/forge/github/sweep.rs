//! The sweep's two questions to GitHub, under the verification deadline: where
//! does the default branch point now (`GET /repos/{r}` then `GET
//! /repos/{r}/git/ref/heads/{branch}`), and is a remembered commit still in
//! its history (compare `status`).
//!
//! Invariant: `Ancestry::Ancestor` only when GitHub said `ahead` or
//! `identical` for `commit...tip`; an answer the sweep cannot use is a
//! [`Refusal`], never a guess.

use serde::Deserialize;

use super::verify::refusal;
use super::{GitHubError, GitHubForge, Permissions};
use crate::forge::{Ancestry, BranchTip, Lag, Refusal};
use crate::ids::Sha;

/// `GET /repos/{r}/git/ref/heads/{branch}`, reduced to the commit it names.
#[derive(Debug, Deserialize)]
struct GitRef {
    object: GitRefObject,
}

#[derive(Debug, Deserialize)]
struct GitRefObject {
    sha: String,
    #[serde(rename = "type")]
    kind: String,
}

/// A branch name as one path segment of a URL (branch names may hold `/`,
/// which GitHub's ref endpoint takes as is, but not `%` or `#` unescaped).
fn ref_path(branch: &str) -> String {
    branch.replace('%', "%25").replace('#', "%23")
}

impl GitHubForge {
    /// The default branch of `repository` and the commit it points at.
    pub async fn default_branch_tip(&self, repository: &str) -> Result<BranchTip, Refusal> {
        self.within_deadline(async {
            let facts = self.repo_facts(repository).await?;
            let branch = facts.default_branch;
            let path = format!("/repos/{repository}/git/ref/heads/{}", ref_path(&branch));
            let answer: GitRef = self
                .get(repository, &Permissions::contents_read(), &path)
                .await
                .map_err(|e| {
                    refusal(e, |_| {
                        Refusal::rejected(
                            "not_on_default_branch",
                            format!("{repository} has no branch {branch} (an empty repository?)"),
                        )
                    })
                })?;
            let sha = Sha::parse(&answer.object.sha)
                .ok()
                .filter(|_| answer.object.kind == "commit")
                .ok_or_else(|| {
                    Refusal::unavailable(
                        60,
                        format!(
                            "GitHub answered {path} with a {} {:?}, not a commit sha",
                            answer.object.kind, answer.object.sha
                        ),
                    )
                })?;
            Ok(BranchTip { branch, sha })
        })
        .await
    }

    /// Whether `commit` is `tip` or one of its ancestors in `repository`. A
    /// commit GitHub no longer knows (force-pushed away and collected) is not
    /// an ancestor.
    pub async fn ancestry(
        &self,
        repository: &str,
        commit: &str,
        tip: &str,
    ) -> Result<Ancestry, Refusal> {
        self.within_deadline(async {
            match self.compare(repository, commit, tip).await {
                Ok(c) if c.status == "ahead" || c.status == "identical" => Ok(Ancestry::Ancestor),
                Ok(_) => Ok(Ancestry::NotAncestor),
                Err(Refusal::Rejected {
                    code: "unknown_commit",
                    ..
                }) => Ok(Ancestry::NotAncestor),
                Err(other) => Err(other),
            }
        })
        .await
    }
}

/// A compare answer read for its length and its oldest commit's date.
#[derive(Debug, Deserialize)]
struct LagComparison {
    status: String,
    #[serde(default)]
    ahead_by: u64,
    #[serde(default)]
    commits: Vec<LagCommit>,
}

#[derive(Debug, Deserialize)]
struct LagCommit {
    commit: LagCommitData,
}

#[derive(Debug, Deserialize)]
struct LagCommitData {
    committer: Option<LagPerson>,
}

#[derive(Debug, Deserialize)]
struct LagPerson {
    date: Option<String>,
}

impl GitHubForge {
    /// How far the default branch of `repository` has moved past `cursor`:
    /// its tip, then one compare page of one commit (`ahead_by` counts them,
    /// the first commit listed is the oldest).
    pub async fn lag(&self, repository: &str, cursor: &str) -> Result<Lag, Refusal> {
        let tip = self.default_branch_tip(repository).await?;
        if tip.sha == cursor {
            return Ok(Lag::UpToDate { tip: tip.sha });
        }
        self.within_deadline(async {
            let path = format!(
                "/repos/{repository}/compare/{cursor}...{}?per_page=1&page=1",
                tip.sha
            );
            let answer: Result<LagComparison, _> = self
                .get(repository, &Permissions::contents_read(), &path)
                .await;
            let c = match answer {
                Ok(c) => c,
                Err(GitHubError::NotFound(_)) => {
                    return Ok(Lag::Diverged {
                        tip: tip.sha.clone(),
                    });
                }
                Err(e) => {
                    return Err(refusal(e, |_| {
                        Refusal::unavailable(60, format!("GitHub could not compare {repository}"))
                    }));
                }
            };
            Ok(match c.status.as_str() {
                "identical" => Lag::UpToDate {
                    tip: tip.sha.clone(),
                },
                "ahead" => Lag::Behind {
                    tip: tip.sha.clone(),
                    commits: c.ahead_by,
                    counted_all: true,
                    since: c
                        .commits
                        .first()
                        .and_then(|first| first.commit.committer.as_ref()?.date.as_deref())
                        .and_then(|date| chrono::DateTime::parse_from_rfc3339(date).ok())
                        .map(|date| date.timestamp()),
                },
                _ => Lag::Diverged {
                    tip: tip.sha.clone(),
                },
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names_become_one_url_path() {
        assert_eq!(ref_path("main"), "main");
        assert_eq!(ref_path("release/2.0"), "release/2.0");
        assert_eq!(ref_path("fix#1%"), "fix%231%25");
    }
}
