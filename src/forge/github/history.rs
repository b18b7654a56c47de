//! The GitHub forge's first-parent history (see `forge/history.rs`): the
//! commit listing from the end (`GET /repos/{r}/commits?sha=`, newest first,
//! 100 a page), followed by first parents through the listed commits.
//!
//! Invariant: the walk reads at most [`MAX_PAGES`] pages and refuses beyond;
//! a first parent GitHub does not list is a refusal, never a shortened
//! history. What a merge brought in is not counted here (`entered: None`);
//! the merges `--last N` counts are, from each listed commit's parents and
//! message (`is_merge`, as the local forge counts them).

use std::collections::HashMap;

use serde::Deserialize;

use super::verify::refusal;
use super::{GitHubForge, Permissions};
use crate::forge::Refusal;
use crate::forge::history::{FirstParent, HistoryStart, is_merge};
use crate::ids::Sha;

/// The most listing pages one history reads (100 commits each).
const MAX_PAGES: usize = 300;

#[derive(Debug, Deserialize)]
struct Listed {
    sha: String,
    commit: ListedCommit,
    #[serde(default)]
    parents: Vec<ListedParent>,
}

#[derive(Debug, Deserialize)]
struct ListedCommit {
    committer: Option<ListedPerson>,
    #[serde(default)]
    message: String,
}

#[derive(Debug, Deserialize)]
struct ListedPerson {
    date: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ListedParent {
    sha: String,
}

impl GitHubForge {
    /// The first-parent history of `repository` ending at `end`, oldest first.
    pub async fn first_parent_history(
        &self,
        repository: &str,
        end: &Sha,
        start: &HistoryStart,
        limit: usize,
    ) -> Result<Vec<FirstParent>, Refusal> {
        let mut known: HashMap<String, Listed> = HashMap::new();
        let mut page = 0;
        let mut exhausted = false;
        let mut next = Some(end.to_string());
        let mut out = Vec::new();
        let mut merges = 0;
        while let Some(sha) = next.take() {
            if let HistoryStart::After(after) = start
                && after.as_str() == sha
            {
                break;
            }
            while !known.contains_key(&sha) && !exhausted {
                page += 1;
                if page > MAX_PAGES {
                    return Err(Refusal::rejected(
                        "history_too_long",
                        format!(
                            "the history to backfill needs more than {MAX_PAGES} pages of GitHub's commit listing; name a later start"
                        ),
                    ));
                }
                let path =
                    format!("/repos/{repository}/commits?sha={end}&per_page=100&page={page}");
                let listed: Vec<Listed> = self
                    .get(repository, &Permissions::contents_read(), &path)
                    .await
                    .map_err(|e| {
                        refusal(e, |m| {
                            Refusal::rejected(
                                "unknown_commit",
                                format!("GitHub does not know {end}: {m}"),
                            )
                        })
                    })?;
                exhausted = listed.len() < 100;
                for commit in listed {
                    known.insert(commit.sha.to_ascii_lowercase(), commit);
                }
            }
            let Some(commit) = known.remove(&sha) else {
                if matches!(start, HistoryStart::After(_)) || !exhausted {
                    return Err(Refusal::rejected(
                        "not_in_history",
                        format!(
                            "GitHub did not list {sha} in the history of {end}; name a commit of the default branch itself"
                        ),
                    ));
                }
                break;
            };
            let time = commit
                .commit
                .committer
                .and_then(|c| c.date)
                .and_then(|d| chrono::DateTime::parse_from_rfc3339(&d).ok())
                .map_or(0, |d| d.timestamp());
            if let HistoryStart::Since(since) = start
                && time < *since
            {
                break;
            }
            if out.len() == limit {
                return Err(Refusal::rejected(
                    "history_too_long",
                    format!(
                        "the history to backfill has more than {limit} first-parent commits; name a later start"
                    ),
                ));
            }
            let parse = |s: &str| {
                Sha::parse(s).map_err(|e| {
                    Refusal::unavailable(
                        60,
                        format!("GitHub listed a commit id that is not a SHA-1: {e}"),
                    )
                })
            };
            let parent = commit.parents.first().map(|p| parse(&p.sha)).transpose()?;
            let subject = commit.commit.message.lines().next().unwrap_or_default();
            if is_merge(commit.parents.len(), subject) {
                merges += 1;
            }
            out.push(FirstParent {
                sha: parse(&commit.sha)?,
                parent: parent.clone(),
                time,
                entered: None,
            });
            if matches!(start, HistoryStart::Last(n) if merges >= *n) {
                break;
            }
            next = parent.map(|p| p.to_string());
            if next.is_none() && matches!(start, HistoryStart::After(_)) {
                return Err(Refusal::rejected(
                    "not_in_history",
                    format!(
                        "the start is not on the first-parent history of the default branch up to {end}; name a commit of the default branch itself"
                    ),
                ));
            }
        }
        out.reverse();
        Ok(out)
    }
}
