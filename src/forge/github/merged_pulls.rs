//! Which pull requests a range of a GitHub source merged, for its evidence
//! bundle (`range_bundle.rs`), in the order their merge commits entered the
//! default branch.
//!
//! They are found two ways. The fast path costs no extra call: merge and
//! squash subjects (`Merge pull request #12 from ...`, `Title (#12)`, read by
//! `forge/pull_subject.rs`) on the range's first-parent chain name
//! candidates, and `GET /pulls/N`
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
//! - a pull request is kept only when GitHub says it merged with a merge
//!   commit among the range's commits (a listed one must also be merged into
//!   the default branch); a subject naming `#N` only makes `N` a candidate;
//! - each number is recorded once, and at most [`MAX_PULLS`] in all;
//! - the listing reads at most [`MAX_LISTED_PAGES`] pages and the merged-in
//!   questions at most [`MAX_MERGED_IN_CALLS`] calls per job; either cut
//!   marks the bundle `pull_requests_truncated` and logs a warning; no
//!   endpoint is called per first-parent commit.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::api::{PER_PAGE, Page, encode_path, failure};
use super::{GitHubError, GitHubForge, Permissions};
use crate::forge::evidence::{
    ArrivedThrough, CommitInfo, FilePatch, MAX_PULLS, PullRequest, SourceError,
};
use crate::forge::merged_in::{self, Entered, first_parent_chain};
use crate::forge::pull_subject::parse_pull_subject;
use crate::ids::Sha;

/// At most this many calls per job ask GitHub about commits merged in
/// through another branch (a subject's `GET /pulls/N`, or a commit's
/// `GET /commits/{sha}/pulls`).
pub const MAX_MERGED_IN_CALLS: usize = 100;
/// At most this many pages of closed pull requests are listed per job.
pub const MAX_LISTED_PAGES: usize = 10;
/// How much earlier than the range's oldest commit a pull request's last
/// update may be and still be looked at (clocks of pushers and GitHub differ).
pub const CLOCK_SKEW_SECS: i64 = 3600;

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

impl GitHubForge {
    /// The merged pull requests of a range, in the order their merge commits
    /// entered the default branch, each merged-in one saying through which
    /// first-parent merge it arrived; see the module docs.
    pub(super) async fn range_pulls(
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
                merge_sha: c.sha.clone(),
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
        listed.retain(|(number, _)| !found.pulls.iter().any(|(p, _)| p.number.get() == *number));
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
}

/// The pull requests a range's evidence found, with their patches.
#[derive(Default)]
pub(super) struct RangePulls {
    pub(super) pulls: Vec<(PullRequest, Vec<FilePatch>)>,
    /// More were merged in the range than [`MAX_PULLS`], or the listing was cut.
    pub(super) truncated: bool,
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
    fn reach(&self, starts: &[Sha], stop: &HashSet<usize>) -> HashSet<usize> {
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
            sha: Sha::fake(sha),
            parents: parents.iter().map(|p| Sha::fake(p)).collect(),
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
        let chain: Vec<String> = first_parent_chain(&commits, Sha::fake("s").as_str())
            .iter()
            .map(|c| c.sha.fake_name())
            .collect();
        assert_eq!(chain, ["m", "s"]);
        assert!(first_parent_chain(&commits, Sha::fake("unknown").as_str()).is_empty());
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
}
