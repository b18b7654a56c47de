//! Evidence from a local-forge source (a plain git repository read with gix):
//! the job-start ancestry re-check, the commits and "pull requests" of a range,
//! changed-file manifests from tree diffs, and bounded file reads and
//! directory listings at a commit.
//!
//! Invariants:
//! - only commits of the authorized range are read: `before..after` (hidden
//!   `before`), or the one merge commit of a PR job; a file is read only at a
//!   commit the caller has checked is inside that range;
//! - a "pull request" is a commit of the range whose subject is `Merge pull
//!   request #N from ...` (title: the body's first line) or `Title (#N)`;
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

use super::manifest::{blob_bytes, manifest};
use crate::forge::merged_in;
use crate::forge::pull_subject::{PullSubject, parse_pull_subject};
use crate::ids::Scope;
use gix::ObjectId;
use gix::bstr::ByteSlice;

use crate::forge::evidence::{
    self, ArrivedThrough, ChangedFile, CommitInfo, EvidenceBundle, JobScope, MAX_BODY_BYTES,
    MAX_COMMITS, MAX_PULLS, MAX_TITLE_BYTES, PullRequest, SourceInfo,
};

/// How many commits a reachability walk visits before giving up.
const WALK_LIMIT: usize = 200_000;
/// How many commits before a range are searched for earlier merges of the
/// pull requests that entered through another branch.
const EARLIER_WALK_LIMIT: usize = 10_000;

/// Why reading the source failed (shared with the GitHub forge's evidence).
pub use crate::forge::evidence::SourceError;

pub(super) fn unavailable(what: &str, e: impl std::fmt::Display) -> SourceError {
    SourceError::Unavailable(format!("{what} failed in the local source repository: {e}"))
}

fn open(path: &Path) -> Result<gix::Repository, SourceError> {
    // Gone is not a passing fault: retrying cannot bring it back.
    if !path.exists() {
        return Err(SourceError::Invalid(format!(
            "the local source repository {} does not exist; fix local_path (teammem check-config names it), then retry the job",
            path.display()
        )));
    }
    gix::open(path).map_err(|e| {
        SourceError::Unavailable(format!(
            "the local source repository {} cannot be opened: {e}; check local_path",
            path.display()
        ))
    })
}

/// (default branch short name, tip).
fn default_branch(repo: &gix::Repository) -> Result<(String, ObjectId), SourceError> {
    let name = repo.head_name().ok().flatten().ok_or_else(|| {
        SourceError::Rejected(
            "the source repository's HEAD is detached or unreadable; point HEAD at the default branch"
                .into(),
        )
    })?;
    let branch = name.shorten().to_string();
    let tip = repo.head_id().map_err(|_| {
        SourceError::Rejected(format!("the default branch {branch} has no commits"))
    })?;
    Ok((branch, tip.detach()))
}

fn commit_id(repo: &gix::Repository, field: &str, sha: &str) -> Result<ObjectId, SourceError> {
    let unknown = || {
        SourceError::Rejected(format!(
            "{field} {sha} is not a commit of the source repository (force-pushed away?)"
        ))
    };
    if !evidence::is_full_sha(sha) {
        return Err(unknown());
    }
    let id = ObjectId::from_hex(sha.as_bytes()).map_err(|_| unknown())?;
    match repo.find_object(id) {
        Ok(object) if object.kind == gix::object::Kind::Commit => Ok(id),
        _ => Err(unknown()),
    }
}

/// Is `ancestor` reachable from `tip` (or equal to it)?
fn reaches(repo: &gix::Repository, tip: ObjectId, ancestor: ObjectId) -> Result<bool, SourceError> {
    if tip == ancestor {
        return Ok(true);
    }
    let walk = repo
        .rev_walk([tip])
        .all()
        .map_err(|e| unavailable("walking history", e))?;
    for (n, info) in walk.enumerate() {
        let info = info.map_err(|e| unavailable("walking history", e))?;
        if info.id == ancestor {
            return Ok(true);
        }
        if n >= WALK_LIMIT {
            return Err(SourceError::Invalid(format!(
                "the history walk passed {WALK_LIMIT} commits without an answer"
            )));
        }
    }
    Ok(false)
}

/// Re-checks at job start what ingest verified: `before` is an ancestor of
/// `after` and `after` is still on the current default branch. Returns the
/// default branch's name.
pub fn recheck_range(path: &Path, before: &str, after: &str) -> Result<String, SourceError> {
    let repo = open(path)?;
    let before_id = commit_id(&repo, "push_before", before)?;
    let after_id = commit_id(&repo, "push_after", after)?;
    let (branch, tip) = default_branch(&repo)?;
    if !reaches(&repo, after_id, before_id)? {
        return Err(SourceError::Rejected(format!(
            "push_before {before} is no longer an ancestor of push_after {after}"
        )));
    }
    if !reaches(&repo, tip, after_id)? {
        return Err(SourceError::Rejected(format!(
            "push_after {after} is no longer on {branch} (force-pushed since the dispatch was verified)"
        )));
    }
    Ok(branch)
}

/// Re-checks that a PR job's merge commit is still on the default branch.
pub fn recheck_commit(path: &Path, sha: &str) -> Result<String, SourceError> {
    let repo = open(path)?;
    let id = commit_id(&repo, "merge_sha", sha)?;
    let (branch, tip) = default_branch(&repo)?;
    if !reaches(&repo, tip, id)? {
        return Err(SourceError::Rejected(format!(
            "merge commit {sha} is no longer on {branch} (force-pushed since the request was verified)"
        )));
    }
    Ok(branch)
}

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
    repository: &str,
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
        commits.push(CommitInfo {
            sha: id.to_string(),
            parents: commit.parent_ids().map(|p| p.to_string()).collect(),
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
        let Some((kind, message)) = named.get(&entry.commit.sha) else {
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
                repository,
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
            number,
            title,
            body,
            body_truncated,
            author: evidence::bound(&author, MAX_TITLE_BYTES).0,
            labels: Vec::new(),
            merged_at: rfc3339(commit.time().map(|t| t.seconds).unwrap_or(0)),
            merge_sha: sha.to_owned(),
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

    let bundle = EvidenceBundle {
        version: evidence::BUNDLE_VERSION,
        source: SourceInfo {
            repository: repository.to_owned(),
            forge: "local".into(),
            default_branch: branch,
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

pub(super) fn tree_of(
    repo: &gix::Repository,
    commit: Option<ObjectId>,
) -> Result<gix::Tree<'_>, SourceError> {
    match commit {
        None => Ok(repo.empty_tree()),
        Some(id) => repo
            .find_commit(id)
            .and_then(|c| c.tree())
            .map_err(|e| unavailable("reading a tree", e)),
    }
}

/// One file's patch (unified diff) for `list_pull_request_files`.
pub fn file_patches(
    path: &Path,
    merge_sha: &str,
) -> Result<Vec<(ChangedFile, Option<String>)>, SourceError> {
    use gix::diff::blob::{Algorithm, Diff, InternedInput};
    let repo = open(path)?;
    let id = commit_id(&repo, "merge_sha", merge_sha)?;
    let commit = repo
        .find_commit(id)
        .map_err(|e| unavailable("reading a commit", e))?;
    let parent = commit.parent_ids().next().map(|p| p.detach());
    let (files, _) = manifest(&repo, parent, id)?;
    let old_tree = tree_of(&repo, parent)?;
    let new_tree = tree_of(&repo, Some(id))?;
    let mut out = Vec::with_capacity(files.len());
    for file in files {
        let read = |tree: &gix::Tree<'_>, path: &str| -> Vec<u8> {
            tree.lookup_entry_by_path(path)
                .ok()
                .flatten()
                .and_then(|e| blob_bytes(&repo, e.object_id()))
                .unwrap_or_default()
        };
        let before = file.previous_path.as_deref().unwrap_or(&file.path);
        let (old, new) = (read(&old_tree, before), read(&new_tree, &file.path));
        let patch = if old.contains(&0) || new.contains(&0) {
            None
        } else {
            let old_text = String::from_utf8_lossy(&old);
            let new_text = String::from_utf8_lossy(&new);
            let input = InternedInput::new(old_text.as_ref(), new_text.as_ref());
            let diff = Diff::compute(Algorithm::Histogram, &input);
            Some(unified(&input, &diff))
        };
        out.push((file, patch));
    }
    Ok(out)
}

/// A minimal unified diff (3 lines of context) of one file's hunks.
fn unified(input: &gix::diff::blob::InternedInput<&str>, diff: &gix::diff::blob::Diff) -> String {
    let before: Vec<&str> = input.before.iter().map(|t| input.interner[*t]).collect();
    let after: Vec<&str> = input.after.iter().map(|t| input.interner[*t]).collect();
    let mut out = String::new();
    for hunk in diff.hunks() {
        let ctx = 3u32;
        let b_start = hunk.before.start.saturating_sub(ctx);
        let b_end = (hunk.before.end + ctx).min(before.len() as u32);
        let a_start = hunk.after.start.saturating_sub(ctx);
        let a_end = (hunk.after.end + ctx).min(after.len() as u32);
        out.push_str(&format!(
            "@@ -{},{} +{},{} @@\n",
            b_start + 1,
            b_end - b_start,
            a_start + 1,
            a_end - a_start
        ));
        for line in &before[b_start as usize..hunk.before.start as usize] {
            push_line(&mut out, ' ', line);
        }
        for line in &before[hunk.before.start as usize..hunk.before.end as usize] {
            push_line(&mut out, '-', line);
        }
        for line in &after[hunk.after.start as usize..hunk.after.end as usize] {
            push_line(&mut out, '+', line);
        }
        for line in &before[hunk.before.end as usize..(b_end as usize).min(before.len())] {
            push_line(&mut out, ' ', line);
        }
    }
    out
}

fn push_line(out: &mut String, sign: char, line: &str) {
    out.push(sign);
    out.push_str(line.strip_suffix('\n').unwrap_or(line));
    out.push('\n');
}

/// Reads `file` at `commit` (which the caller has checked is inside the job's
/// range): `Ok(None)` when the path is not a file there, an error when it is
/// larger than `max` bytes or not UTF-8.
pub fn read_file_at(
    path: &Path,
    commit: &str,
    file: &str,
    max: usize,
) -> Result<Option<String>, SourceError> {
    let repo = open(path)?;
    let id = commit_id(&repo, "commit", commit)?;
    let tree = tree_of(&repo, Some(id))?;
    let clean = file.trim_start_matches('/');
    if clean.is_empty()
        || clean
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err(SourceError::Invalid(format!(
            "path {file:?} is not a repository-relative file path; use a/b/c.ext"
        )));
    }
    let Some(entry) = tree
        .lookup_entry_by_path(clean)
        .map_err(|e| unavailable("looking up a path", e))?
    else {
        return Ok(None);
    };
    if !entry.mode().is_blob() {
        return Ok(None);
    }
    let object = repo
        .find_object(entry.object_id())
        .map_err(|e| unavailable("reading a blob", e))?;
    if object.data.len() > max {
        return Err(SourceError::Invalid(format!(
            "{file} at {commit} is {} bytes, more than the {max}-byte limit",
            object.data.len()
        )));
    }
    String::from_utf8(object.data.clone())
        .map(Some)
        .map_err(|_| SourceError::Invalid(format!("{file} at {commit} is not UTF-8 text")))
}

/// A blob larger than this is not read even for its head.
const MAX_HEAD_BLOB: u64 = 16 << 20;
/// A recursive listing visits at most this many tree entries.
const MAX_TREE_VISITS: usize = 200_000;

/// The files under `directory` (`""`: the root) at `commit` (which the caller
/// has checked is inside the job's range): with `recursive`, every file below
/// it; without, its files and subdirectories. Sorted by path and bounded
/// ([`TreeListing`](crate::forge::evidence::TreeListing)); `Ok(None)` when `directory` is not a directory there.
/// Submodules are not listed.
pub fn list_tree_at(
    path: &Path,
    commit: &str,
    directory: &str,
    recursive: bool,
) -> Result<Option<evidence::TreeListing>, SourceError> {
    use evidence::{EntryKind, TreeEntry, TreeListing};
    let repo = open(path)?;
    let id = commit_id(&repo, "commit", commit)?;
    let directory = evidence::clean_source_path(directory, true).map_err(SourceError::Invalid)?;
    let root = tree_of(&repo, Some(id))?;
    let start = if directory.is_empty() {
        root
    } else {
        match root
            .lookup_entry_by_path(&directory)
            .map_err(|e| unavailable("looking up a path", e))?
        {
            Some(entry) if entry.mode().is_tree() => repo
                .find_tree(entry.object_id())
                .map_err(|e| unavailable("reading a tree", e))?,
            _ => return Ok(None),
        }
    };
    let prefix = |name: &str| {
        if directory.is_empty() {
            name.to_owned()
        } else {
            format!("{directory}/{name}")
        }
    };
    let mut listing = TreeListing::default();
    let mut bytes = 0;
    let mut visits = 0;
    // Depth first, each tree's entries in git's order; sorted at the end.
    let mut pending: Vec<(String, gix::Tree<'_>)> = vec![(String::new(), start)];
    'walk: while let Some((below, tree)) = pending.pop() {
        let mut subtrees = Vec::new();
        for entry in tree.iter() {
            let entry = entry.map_err(|e| unavailable("reading a tree", e))?;
            visits += 1;
            if visits > MAX_TREE_VISITS {
                listing.truncated = true;
                break 'walk;
            }
            let name = entry.filename().to_str_lossy();
            let relative = if below.is_empty() {
                name.into_owned()
            } else {
                format!("{below}/{name}")
            };
            let mode = entry.mode();
            let kind = if mode.is_tree() {
                if recursive {
                    subtrees.push((relative, entry.object_id()));
                    continue;
                }
                EntryKind::Directory
            } else if mode.is_blob_or_symlink() {
                EntryKind::File
            } else {
                continue;
            };
            let entry = TreeEntry {
                path: prefix(&relative),
                kind,
            };
            if !listing.push(entry, &mut bytes) {
                break 'walk;
            }
        }
        for (relative, id) in subtrees.into_iter().rev() {
            let tree = repo
                .find_tree(id)
                .map_err(|e| unavailable("reading a tree", e))?;
            pending.push((relative, tree));
        }
    }
    Ok(Some(listing.sorted()))
}

/// The first `max` bytes of `file` at `commit` (which the caller has checked
/// is inside the job's range) as UTF-8 text: `Ok(None)` when the path is not
/// a file there, [`SourceError::Invalid`] when those bytes are not UTF-8 or
/// the blob is too large to read at all.
pub fn read_head_at(
    path: &Path,
    commit: &str,
    file: &str,
    max: usize,
) -> Result<Option<evidence::FileHead>, SourceError> {
    let repo = open(path)?;
    let id = commit_id(&repo, "commit", commit)?;
    let tree = tree_of(&repo, Some(id))?;
    head_in(&repo, &tree, commit, file, max)
}

/// The heads of `files` at `commit`, as [`read_head_at`] reads each, with the
/// repository and tree opened once: the outer error is the commit's, each
/// inner result one path's (a path that is not there is `Ok(None)` and does
/// not stop the others).
pub fn read_heads_at(
    path: &Path,
    commit: &str,
    files: &[String],
    max: usize,
) -> Result<Vec<Result<Option<evidence::FileHead>, SourceError>>, SourceError> {
    let repo = open(path)?;
    let id = commit_id(&repo, "commit", commit)?;
    let tree = tree_of(&repo, Some(id))?;
    Ok(files
        .iter()
        .map(|file| head_in(&repo, &tree, commit, file, max))
        .collect())
}

/// One file's head in `tree` (the tree of `commit`).
fn head_in(
    repo: &gix::Repository,
    tree: &gix::Tree<'_>,
    commit: &str,
    file: &str,
    max: usize,
) -> Result<Option<evidence::FileHead>, SourceError> {
    let clean = evidence::clean_source_path(file, false).map_err(SourceError::Invalid)?;
    let Some(entry) = tree
        .lookup_entry_by_path(&clean)
        .map_err(|e| unavailable("looking up a path", e))?
    else {
        return Ok(None);
    };
    if !entry.mode().is_blob() {
        return Ok(None);
    }
    let size = repo
        .find_header(entry.object_id())
        .map_err(|e| unavailable("reading a blob", e))?
        .size();
    if size > MAX_HEAD_BLOB {
        return Err(SourceError::Invalid(format!(
            "{clean} at {commit} is {size} bytes, more than the {MAX_HEAD_BLOB}-byte limit for reading its head"
        )));
    }
    let object = repo
        .find_object(entry.object_id())
        .map_err(|e| unavailable("reading a blob", e))?;
    evidence::FileHead::of(&object.data, max)
        .map(Some)
        .ok_or_else(|| SourceError::Invalid(format!("{clean} at {commit} is not UTF-8 text")))
}

#[cfg(test)]
mod tests {
    use super::super::manifest::line_counts;
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

    #[test]
    fn line_counts_ignore_binary() {
        assert_eq!(line_counts(b"a\nb\n", b"a\nc\nd\n"), (2, 1));
        assert_eq!(line_counts(b"a\0", b"b"), (0, 0));
    }
}
