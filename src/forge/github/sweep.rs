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
use super::{GitHubForge, Permissions};
use crate::forge::{Ancestry, BranchTip, Refusal};
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
