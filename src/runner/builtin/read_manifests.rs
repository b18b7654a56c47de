//! What the builtin agent reads of the source's manifests ([`crate::manifests`])
//! through the writer child: those at the job's tip (for `Dependencies.md`)
//! and, for each pull request that touched one, its manifests at the merge
//! commit and the first parent (for the entry's dependency changes); and the
//! process's memory of commits found to have no manifests.
//!
//! Invariants: manifests are read only at evidence commits and their
//! parents, at most [`MAX_MANIFESTS`] at the tip and [`CHANGE_READS_PER_JOB`]
//! for the pull requests' changes; the root and folders are not listed again
//! for manifests when the range starts at a commit this process found
//! manifest-free and its first-parent path holds only PR merges that name no
//! manifest (the answer at the tip is then the same).

use std::collections::{BTreeMap, BTreeSet};

use super::dependencies::MAX_MANIFESTS;
use super::inputs::{DependencyFacts, TipManifests};
use super::read::{list_files, read_head, transient};
use crate::forge::evidence::{EvidenceBundle, FileStatus};
use crate::manifests::{self, Manifest};
use crate::runner::agent::AgentTask;
use crate::runner::writer::{CallError, WriterClient};
use crate::writer_contract::MAX_SOURCE_FILE;

/// At most this many manifest reads (both sides of each PR's manifests) per
/// job for the entries' dependency changes.
pub const CHANGE_READS_PER_JOB: usize = 40;
/// At most this many top-level folders are listed to find manifests.
const MANIFEST_FOLDERS: usize = 50;

/// A manifest at `commit`, parsed: `Ok(None)` when it is not there or cannot
/// be read as text. A file over the read limit is read in part (and `cut`).
async fn read_manifest(
    client: &WriterClient,
    task: &AgentTask<'_>,
    commit: &str,
    path: &str,
) -> Result<Option<Manifest>, CallError> {
    let Some((content, truncated)) = read_head(client, task, commit, path, MAX_SOURCE_FILE).await?
    else {
        return Ok(None);
    };
    let content = content.as_str();
    let content = if truncated {
        content.rfind('\n').map_or("", |end| &content[..=end])
    } else {
        content
    };
    Ok(manifests::parse(path, content).map(|mut m| {
        m.cut |= truncated;
        m
    }))
}

/// The source commits at which this process listed the root and top-level
/// folders completely and found no manifest, per repository (the newest
/// only). A commit names its tree, so the fact never goes out of date; it
/// lets the next range, which starts there, skip the listing.
static NO_MANIFESTS: std::sync::Mutex<BTreeMap<String, String>> =
    std::sync::Mutex::new(BTreeMap::new());

fn remember_manifests(repository: &str, tip: &crate::ids::Sha, none: bool) {
    let mut known = NO_MANIFESTS.lock().unwrap_or_else(|e| e.into_inner());
    let key = repository.to_ascii_lowercase();
    if none {
        // Bounded by the configured sources: one entry per repository.
        known.insert(key, tip.as_str().to_ascii_lowercase());
    } else {
        known.remove(&key);
    }
}

/// Whether the job's tip is known to have no manifests: its range starts at a
/// commit remembered to have none, and every commit on the first-parent path
/// from the tip back to that start is a recorded PR's merge with its whole
/// file list, none of which names a manifest (the caller checked that).
/// Adding or removing a manifest anywhere the search looks is such a file
/// change, so the answer at the tip is the start's.
fn no_manifests_known(repository: &str, bundle: &EvidenceBundle) -> bool {
    let crate::ids::Scope::Range { before, after } = &bundle.job.scope else {
        return false;
    };
    let known = NO_MANIFESTS.lock().unwrap_or_else(|e| e.into_inner());
    if known
        .get(&repository.to_ascii_lowercase())
        .map(String::as_str)
        != Some(before.as_str().to_ascii_lowercase().as_str())
    {
        return false;
    }
    drop(known);
    first_parent_path_is_pulls(bundle, before.as_str(), after.as_str())
}

/// Whether the first-parent path from `after` back to `before` runs only
/// through the bundle's PR merges, each with its whole file list.
fn first_parent_path_is_pulls(bundle: &EvidenceBundle, before: &str, after: &str) -> bool {
    if bundle.commits_truncated || bundle.pull_requests_truncated {
        return false;
    }
    let mut at = after.to_ascii_lowercase();
    let before = before.to_ascii_lowercase();
    // Each step moves to a distinct commit of the bundle, so this ends.
    for _ in 0..=bundle.commits.len() {
        if at == before {
            return true;
        }
        let pulled = bundle
            .pull_requests
            .iter()
            .any(|p| p.merge_sha.eq_ignore_ascii_case(&at) && !p.files_truncated);
        let Some(commit) = bundle
            .commits
            .iter()
            .find(|c| c.sha.eq_ignore_ascii_case(&at))
        else {
            return false;
        };
        let Some(parent) = commit.parents.first() else {
            return false;
        };
        if !pulled {
            return false;
        }
        at = parent.to_ascii_lowercase();
    }
    false
}

/// The manifest paths touched by the job's PRs.
fn touched_manifests(task: &AgentTask<'_>) -> BTreeSet<String> {
    task.bundle
        .changed_paths()
        .filter(|path| manifests::ecosystem_of(path).is_some())
        .map(str::to_owned)
        .collect()
}

/// What the job's dependency facts are: the tip's manifests (when a PR
/// touched one or the page does not exist yet) and each PR's changes to the
/// manifests it touched, read at its merge commit and its first parent (for
/// the range's first PR, the range's base). Reads that fail for a lasting
/// cause leave the part out (the page keeps its text, the entry names no
/// changes).
pub async fn read_dependencies(
    client: &WriterClient,
    task: &AgentTask<'_>,
    page_exists: bool,
    at_tip: bool,
) -> Result<DependencyFacts, CallError> {
    let touched = touched_manifests(task);
    let mut facts = DependencyFacts::default();
    let known_empty =
        !page_exists && touched.is_empty() && no_manifests_known(task.repository, task.bundle);
    if at_tip && (!touched.is_empty() || !page_exists) && !known_empty {
        let tip = task.bundle.job.tip().clone();
        let mut found: BTreeSet<String> = touched.clone();
        let listed = match list_files(client, task, "", false).await {
            Ok(root) => Some(root),
            Err(e) if !transient(&e) => None,
            Err(e) => return Err(e),
        };
        if let Some((root, root_cut)) = listed {
            let mut folders = 0;
            // Whether the search saw everything it looks at: only then may
            // "no manifests" be remembered for the next job.
            let mut complete = !root_cut;
            for (path, directory) in root {
                if !directory {
                    if manifests::ecosystem_of(&path).is_some() {
                        found.insert(path);
                    }
                    continue;
                }
                if folders == MANIFEST_FOLDERS {
                    complete = false;
                    continue;
                }
                folders += 1;
                match list_files(client, task, &path, false).await {
                    Ok((files, cut)) => {
                        complete &= !cut;
                        found.extend(
                            files
                                .into_iter()
                                .filter(|(p, d)| !d && manifests::ecosystem_of(p).is_some())
                                .map(|(p, _)| p),
                        );
                    }
                    Err(e) if !transient(&e) => complete = false,
                    Err(e) => return Err(e),
                }
            }
            remember_manifests(task.repository, &tip, complete && found.is_empty());
            let mut read = Vec::new();
            let mut omitted = 0;
            for path in &found {
                if read.len() == MAX_MANIFESTS {
                    omitted += 1;
                    continue;
                }
                match read_manifest(client, task, tip.as_str(), path).await {
                    Ok(Some(manifest)) => read.push((path.clone(), manifest)),
                    Ok(None) => {}
                    Err(e) if !transient(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            facts.tip = Some(TipManifests {
                commit: tip,
                manifests: read,
                omitted,
            });
        }
    }
    let mut reads = CHANGE_READS_PER_JOB;
    for pull in &task.bundle.pull_requests {
        let parent = task
            .bundle
            .commits
            .iter()
            .find(|c| c.sha.eq_ignore_ascii_case(&pull.merge_sha))
            .and_then(|c| c.parents.first())
            .filter(|p| task.bundle.readable_commit(p));
        let Some(parent) = parent else {
            continue;
        };
        let mut changes = Vec::new();
        for file in &pull.files {
            if manifests::ecosystem_of(&file.path).is_none() || reads < 2 {
                continue;
            }
            reads -= 2;
            let side = |commit: String, absent: bool| {
                let path = file.path.clone();
                async move {
                    if absent {
                        return Ok(None);
                    }
                    read_manifest(client, task, &commit, &path).await
                }
            };
            let new = side(
                pull.merge_sha.to_string(),
                file.status == FileStatus::Removed,
            )
            .await;
            let old = side(parent.to_string(), file.status == FileStatus::Added).await;
            match (old, new) {
                (Ok(old), Ok(new)) => changes.push((
                    file.path.clone(),
                    manifests::diff(old.as_ref(), new.as_ref()),
                )),
                (Err(e), _) | (_, Err(e)) if transient(&e) => return Err(e),
                _ => {}
            }
        }
        if !changes.is_empty() {
            facts
                .changes
                .insert(pull.merge_sha.to_ascii_lowercase(), changes);
        }
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::builtin::samples::{range, sha};

    #[test]
    fn manifests_are_known_absent_only_from_a_remembered_start_through_pull_merges() {
        let repository = "unit/no-manifests";
        let start = crate::ids::Sha::parse(&sha('0')).unwrap();
        let plain = range(repository, ["a/x.txt", "b/y.txt"]);
        // Nothing remembered yet: list.
        assert!(!no_manifests_known(repository, &plain));
        remember_manifests(repository, &start, true);
        assert!(no_manifests_known(repository, &plain));
        // Another repository's memory does not count.
        assert!(!no_manifests_known(
            "unit/other",
            &range("unit/other", ["a", "b"])
        ));
        // A commit on the path that is no PR merge (a direct push): list.
        let mut pushed = plain.clone();
        pushed.pull_requests.remove(0);
        assert!(!no_manifests_known(repository, &pushed));
        // A PR whose file list was cut: list.
        let mut cut = plain.clone();
        cut.pull_requests[1].files_truncated = true;
        assert!(!no_manifests_known(repository, &cut));
        // A range that starts elsewhere: list.
        let mut elsewhere = plain.clone();
        elsewhere.job.scope = crate::ids::Scope::Range {
            before: crate::ids::Sha::parse(&sha('a')).unwrap(),
            after: crate::ids::Sha::parse(&sha('b')).unwrap(),
        };
        assert!(!no_manifests_known(repository, &elsewhere));
        // Found manifests (or an incomplete search) forget the start.
        remember_manifests(repository, &start, false);
        assert!(!no_manifests_known(repository, &plain));
        // (A PR that touches a manifest is the caller's check: touched_manifests.)
        let touching = range(repository, ["a/x.txt", "b/Cargo.toml"]);
        let task = AgentTask {
            repository,
            job_id: 1,
            bundle: &touching,
            policy: None,
            before_write: None,
        };
        assert_eq!(
            touched_manifests(&task),
            BTreeSet::from(["b/Cargo.toml".to_owned()])
        );
    }
}
