//! The evidence bundle of one job from a local-forge source (a plain git
//! repository read with gix): the commits and "pull requests" of a range, or
//! the one merge commit of a PR job, with changed-file manifests from tree
//! diffs (`manifest.rs`).
//!
//! Invariants:
//! - only commits of the authorized range are read: `before..after` (hidden
//!   `before`), or the one merge commit of a PR job;
//! - a "pull request" is a commit of the range whose subject is `Merge pull
//!   request #N from ...` (title: the body's first line) or `Title (#N)`
//!   (`forge/pull_subject.rs`);
//!   its manifest is the diff against its first parent (`manifest.rs`). One on the range's
//!   first-parent chain entered the default branch itself; one elsewhere
//!   (merged into a maintenance or feature branch that was then merged in)
//!   arrived through a first-parent merge, which the bundle names
//!   (`arrived_through`, see `forge/merged_in.rs`);
//! - a pull request number is recorded once per range: the first-parent
//!   commit naming it wins over a merged-in one, an older over a newer, and a
//!   merged-in one is left out when a subject before the range (at most
//!   [`EARLIER_WALK_LIMIT`] commits back) already names it (a cherry-pick or
//!   backport); each left-out commit is logged;
//! - repository text is decoded lossily and bounded; it is returned as data.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use gix::ObjectId;
use gix::bstr::ByteSlice;

use super::manifest::{changed_paths, manifest};
use super::source_repo::{commit_id, default_branch, open, unavailable};
use crate::forge::evidence::{
    self, ArrivedThrough, CommitInfo, EvidenceBundle, ForgeKind, JobScope, MAX_BODY_BYTES,
    MAX_COMMITS, MAX_PULLS, MAX_TITLE_BYTES, PullRequest, SourceError, SourceInfo,
};
use crate::forge::merged_in;
use crate::forge::pull_subject::{PullSubject, parse_pull_subject};
use crate::ids::{PullNumber, RepoName, Scope, Sha};

/// How many commits before a range are searched for earlier merges of the
/// pull requests that entered through another branch.
const EARLIER_WALK_LIMIT: usize = 10_000;

/// Splits a commit message into (subject, rest after the blank line).
fn split_message(message: &str) -> (&str, &str) {
    let message = message.trim_start_matches('\n');
    match message.split_once('\n') {
        Some((subject, rest)) => (
            subject.trim_end_matches('\r'),
            rest.trim_start_matches(['\r', '\n']),
        ),
        None => (message, ""),
    }
}

/// Title and body of a recognised PR commit.
fn title_and_body(kind: PullSubject, subject: &str, rest: &str) -> (String, String) {
    match kind {
        PullSubject::Merge(_) => {
            let (title, body) = match rest.split_once('\n') {
                Some((title, body)) => (title.trim(), body.trim()),
                None => (rest.trim(), ""),
            };
            if title.is_empty() {
                // No title line: keep what the subject says after "from".
                let from = subject.split_once(" from ").map(|(_, b)| b).unwrap_or("");
                (from.trim().to_owned(), body.to_owned())
            } else {
                (title.to_owned(), body.to_owned())
            }
        }
        PullSubject::Squash(n) => {
            let suffix = format!("(#{n})");
            let title = subject.trim_end().strip_suffix(&suffix).unwrap_or(subject);
            (title.trim().to_owned(), rest.trim().to_owned())
        }
    }
}

fn rfc3339(seconds: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp(seconds, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| seconds.to_string())
}

fn author_name(commit: &gix::Commit<'_>) -> String {
    commit
        .author()
        .map(|a| a.name.to_str_lossy().trim().to_owned())
        .unwrap_or_default()
}

/// Collects the bundle of a job on the local forge.
pub fn collect(
    path: &Path,
    repository: &RepoName,
    scope: &JobScope,
) -> Result<EvidenceBundle, SourceError> {
    let repo = open(path)?;
    let (branch, _) = default_branch(&repo)?;
    let commit_ids: Vec<ObjectId> = match &scope.scope {
        Scope::Range { before, after } => {
            let before_id = commit_id(&repo, "push_before", before)?;
            let after_id = commit_id(&repo, "push_after", after)?;
            let mut all = Vec::new();
            let walk = repo
                .rev_walk([after_id])
                .with_hidden([before_id])
                .all()
                .map_err(|e| unavailable("walking the range", e))?;
            for info in walk {
                let info = info.map_err(|e| unavailable("walking the range", e))?;
                all.push(info.id);
                if all.len() > MAX_COMMITS {
                    return Err(SourceError::Invalid(format!(
                        "the range {before}..{after} holds more than {MAX_COMMITS} commits; dispatch smaller ranges"
                    )));
                }
            }
            all.reverse();
            all
        }
        Scope::PullRequest { merge_sha, .. } => vec![commit_id(&repo, "merge_sha", merge_sha)?],
    };

    // Each commit read once: its facts, and the message of those whose
    // subject names a pull request (the candidates).
    let mut commits = Vec::with_capacity(commit_ids.len());
    let mut named: HashMap<String, (PullSubject, String)> = HashMap::new();
    for id in &commit_ids {
        let commit = repo
            .find_commit(*id)
            .map_err(|e| unavailable("reading a commit", e))?;
        let message = commit.message_raw_sloppy().to_str_lossy().into_owned();
        let (subject, _) = split_message(&message);
        if let Some(kind) = parse_pull_subject(subject) {
            named.insert(id.to_string(), (kind, message.clone()));
        }
        let sha = |id: &gix::oid| Sha::parse(&id.to_string()).map_err(SourceError::Invalid);
        commits.push(CommitInfo {
            sha: sha(id)?,
            parents: commit
                .parent_ids()
                .map(|p| sha(p.as_ref()))
                .collect::<Result<_, _>>()?,
            author: evidence::bound(&author_name(&commit), MAX_TITLE_BYTES).0,
            committed_at: rfc3339(commit.time().map(|t| t.seconds).unwrap_or(0)),
            subject: evidence::bound(subject, MAX_TITLE_BYTES).0,
        });
    }
    // In the order the commits entered the default branch; a merged-in one
    // says through which first-parent merge.
    let entered = merged_in::entered(&commits, scope.tip().as_str());
    let number_of = |sha: &str| named.get(sha).map(|(kind, _)| kind.number());
    let on_chain: HashSet<u64> = entered
        .iter()
        .filter(|e| e.through.is_none())
        .filter_map(|e| number_of(&e.commit.sha))
        .collect();
    let wanted: HashSet<u64> = entered
        .iter()
        .filter(|e| e.through.is_some())
        .filter_map(|e| number_of(&e.commit.sha))
        .filter(|n| !on_chain.contains(n))
        .collect();
    let earlier = match &scope.scope {
        Scope::Range { before, .. } if !wanted.is_empty() => {
            let before_id = commit_id(&repo, "push_before", before)?;
            earlier_pull_numbers(&repo, repository, before_id, &wanted)?
        }
        _ => HashSet::new(),
    };

    let mut pull_requests = Vec::new();
    let mut pull_requests_truncated = false;
    let mut recorded: HashSet<u64> = HashSet::new();
    for entry in &entered {
        let Some((kind, message)) = named.get(entry.commit.sha.as_str()) else {
            continue;
        };
        let number = kind.number();
        let sha = entry.commit.sha.as_str();
        if let Scope::PullRequest { number: wanted, .. } = &scope.scope
            && number != wanted.get()
        {
            return Err(SourceError::Rejected(format!(
                "commit {sha} does not merge pull request #{wanted} (its subject names #{number})"
            )));
        }
        let skip = if entry.through.is_some() && on_chain.contains(&number) {
            Some("the range's first-parent chain merges it too")
        } else if entry.through.is_some() && earlier.contains(&number) {
            Some("a commit before the range already names it (a cherry-pick or backport)")
        } else if recorded.contains(&number) {
            Some("an earlier commit of the range already names it")
        } else {
            None
        };
        if let Some(reason) = skip {
            tracing::info!(
                repository = repository.as_str(),
                pull = number,
                commit = sha,
                "pull request #{number} left out of the evidence at {sha}: {reason}"
            );
            continue;
        }
        if pull_requests.len() == MAX_PULLS {
            pull_requests_truncated = true;
            break;
        }
        recorded.insert(number);
        let id = ObjectId::from_hex(sha.as_bytes()).map_err(|e| unavailable("reading an id", e))?;
        let (subject, rest) = split_message(message);
        let (title, body) = title_and_body(*kind, subject, rest);
        let commit = repo
            .find_commit(id)
            .map_err(|e| unavailable("reading a commit", e))?;
        let parents: Vec<ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
        let author = match (kind, parents.get(1)) {
            // A merge commit is made by whoever merged; the PR's author wrote its head.
            (PullSubject::Merge(_), Some(head)) => repo
                .find_commit(*head)
                .map(|c| author_name(&c))
                .unwrap_or_else(|_| author_name(&commit)),
            _ => author_name(&commit),
        };
        let (files, files_truncated) = manifest(&repo, parents.first().copied(), id)?;
        let (title, _) = evidence::bound(&title, MAX_TITLE_BYTES);
        let (body, body_truncated) = evidence::bound(&body, MAX_BODY_BYTES);
        pull_requests.push(PullRequest {
            number: PullNumber::new(number).map_err(SourceError::Invalid)?,
            title,
            body,
            body_truncated,
            author: evidence::bound(&author, MAX_TITLE_BYTES).0,
            labels: Vec::new(),
            merged_at: rfc3339(commit.time().map(|t| t.seconds).unwrap_or(0)),
            merge_sha: Sha::parse(sha).map_err(SourceError::Invalid)?,
            files,
            files_truncated,
            arrived_through: entry.through.map(|carrier| ArrivedThrough {
                merge_sha: carrier.sha.clone(),
                subject: carrier.subject.clone(),
            }),
        });
    }
    if let Scope::PullRequest { number, merge_sha } = &scope.scope
        && pull_requests.is_empty()
    {
        return Err(SourceError::Rejected(format!(
            "commit {merge_sha} does not look like the merge of pull request #{number}"
        )));
    }

    // What the range changed that no pull request did: the pages describing
    // the tip follow it too.
    let (direct_changes, direct_changes_truncated) = match &scope.scope {
        Scope::Range { before, after } => evidence::direct_changes(
            changed_paths(
                &repo,
                commit_id(&repo, "push_before", before)?,
                commit_id(&repo, "push_after", after)?,
            )?,
            &pull_requests,
        ),
        Scope::PullRequest { .. } => (Vec::new(), false),
    };
    let bundle = EvidenceBundle {
        version: evidence::BUNDLE_VERSION,
        source: SourceInfo {
            repository: repository.clone(),
            forge: ForgeKind::Local,
            default_branch: branch,
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
    Ok(bundle)
}

/// The numbers among `wanted` that a commit subject before the range
/// (reachable from `before`) already names, looking at most
/// [`EARLIER_WALK_LIMIT`] commits back (and saying so when that cuts the
/// look): a pull request merged into a maintenance branch as a cherry-pick
/// or backport of one the default branch already holds is not new.
fn earlier_pull_numbers(
    repo: &gix::Repository,
    repository: &str,
    before: ObjectId,
    wanted: &HashSet<u64>,
) -> Result<HashSet<u64>, SourceError> {
    let mut found = HashSet::new();
    let walk = repo
        .rev_walk([before])
        .all()
        .map_err(|e| unavailable("walking the history before the range", e))?;
    for (n, info) in walk.enumerate() {
        if found.len() == wanted.len() {
            return Ok(found);
        }
        if n == EARLIER_WALK_LIMIT {
            tracing::warn!(
                repository,
                limit = EARLIER_WALK_LIMIT,
                "looked {EARLIER_WALK_LIMIT} commits back for earlier merges of the pull requests merged in through another branch and stopped; one merged earlier than that may be recorded again"
            );
            return Ok(found);
        }
        let info = info.map_err(|e| unavailable("walking the history before the range", e))?;
        let commit = repo
            .find_commit(info.id)
            .map_err(|e| unavailable("reading a commit", e))?;
        let message = commit.message_raw_sloppy();
        let subject = message.lines().next().unwrap_or_default().to_str_lossy();
        if let Some(kind) = parse_pull_subject(subject.trim_end_matches('\r'))
            && wanted.contains(&kind.number())
        {
            found.insert(kind.number());
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_come_from_the_merge_body_or_the_squash_subject() {
        let (subject, rest) =
            split_message("Merge pull request #3 from o/b\n\nFaster search\n\nDetails here\n");
        let kind = parse_pull_subject(subject).unwrap();
        assert_eq!(
            title_and_body(kind, subject, rest),
            ("Faster search".into(), "Details here".into())
        );
        let (subject, rest) = split_message("Ünïcode *title* (#4)\n\n* a\n* b");
        let kind = parse_pull_subject(subject).unwrap();
        assert_eq!(
            title_and_body(kind, subject, rest),
            ("Ünïcode *title*".into(), "* a\n* b".into())
        );
        let (subject, rest) = split_message("Merge pull request #5 from o/topic");
        let kind = parse_pull_subject(subject).unwrap();
        assert_eq!(title_and_body(kind, subject, rest).0, "o/topic");
    }
}
