//! The local forge: verification of dispatches for sources that are plain git
//! repositories on this machine (`local_path`), by commit-graph walks with gix.
//!
//! Invariants (the same as GitHub's compare checks): the default branch is the
//! target of `HEAD`; `before` must be an ancestor of `after`, `after` must be
//! reachable from the branch's current tip (a force-push that dropped it is
//! refused), and the range holds at most [`MAX_RANGE_COMMITS`] commits. A pull
//! request is recognised only from a commit reachable from the tip whose subject
//! is `Merge pull request #N from ...` or `Title (#N)`. Walks are bounded.

pub mod contents; // files, heads, listings and a PR's patches at a commit (the writer's source reads)
mod manifest; // a commit's changed files against its first parent, renames detected
pub mod history; // the first-parent history from a commit back to a start (backfills)
pub mod citations; // cited source lines followed to a job tip, commit by commit (stale, moved, current)
mod followed; // what earlier follows found: each citation at the tip it was last followed to
pub mod range_bundle; // a job's evidence bundle: the range's commits and the pull requests their subjects name
pub mod recheck; // the job-start re-check: the range or merge commit still on the default branch
pub mod sample; // the demo's sample source repository, built with gix
mod source_repo; // opening a source for the runner's reads; commit ids checked, trees
mod tip_reach; // reachability from the default branch's tip, remembered per tip

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, PoisonError};

use gix::ObjectId;

use crate::ids::{PullNumber, Sha};

use super::{
    Ancestry, BranchTip, Lag, MAX_LAG_COUNTED, MAX_RANGE_COMMITS, Refusal, VerifiedPull,
    VerifiedRange, precheck_range,
};

/// A commit id as a [`Sha`]; refuses ids that are not SHA-1 (a SHA-256
/// repository), which the forges and the wiki trailers do not carry.
fn sha_of(id: ObjectId) -> Result<Sha, Refusal> {
    Sha::parse(&id.to_string()).map_err(|_| {
        Refusal::rejected(
            "unsupported_repository",
            format!("commit {id} is not a SHA-1 id; teammem serves SHA-1 repositories only"),
        )
    })
}

/// How many commits a reachability walk visits before giving up.
const WALK_LIMIT: usize = 200_000;

/// Repositories already opened, by path. Opening reads the config and probes
/// the object database, which costs more than a whole verification walk; a
/// kept handle still sees new commits and moved refs (gix re-reads refs on
/// every lookup and refreshes its pack list when an object is missing).
static OPENED: LazyLock<Mutex<HashMap<PathBuf, gix::ThreadSafeRepository>>> =
    LazyLock::new(Mutex::default);

/// The repository at `path`, opened once per process.
fn open(path: &Path) -> Result<gix::Repository, Refusal> {
    let mut opened = OPENED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(repo) = opened.get(path) {
        return Ok(repo.to_thread_local());
    }
    // Gone is not a passing fault: a dispatch retried later would meet the
    // same missing repository, so it is refused (409), not "ask again".
    if !path.exists() {
        return Err(Refusal::rejected(
            "source_repository_missing",
            format!(
                "the local source repository {} does not exist; fix local_path (teammem check-config names it)",
                path.display()
            ),
        ));
    }
    let repo = gix::ThreadSafeRepository::open(path).map_err(|e| {
        Refusal::unavailable(
            30,
            format!(
                "the local source repository {} cannot be opened: {e}",
                path.display()
            ),
        )
    })?;
    let local = repo.to_thread_local();
    opened.insert(path.to_path_buf(), repo);
    Ok(local)
}

/// (default branch short name, its tip), from one read of `HEAD`.
fn default_branch(repo: &gix::Repository) -> Result<(String, ObjectId), Refusal> {
    let detached = || {
        Refusal::rejected(
            "not_on_default_branch",
            "the source repository's HEAD is detached or unreadable; point HEAD at the default branch",
        )
    };
    let head = repo.head().map_err(|_| detached())?;
    let name = head
        .referent_name()
        .ok_or_else(detached)?
        .shorten()
        .to_string();
    let tip = match head.id() {
        Some(id) => id.detach(),
        // A symbolic branch ref (rare) still peels to its commit.
        None => repo
            .head_id()
            .map_err(|_| {
                Refusal::rejected(
                    "not_on_default_branch",
                    format!("the default branch {name} has no commits"),
                )
            })?
            .detach(),
    };
    Ok((name, tip))
}

fn commit_id(repo: &gix::Repository, field: &str, sha: &str) -> Result<ObjectId, Refusal> {
    let unknown = || {
        Refusal::rejected(
            "unknown_commit",
            format!("{field} {sha} is not a commit of the source repository"),
        )
    };
    let id = ObjectId::from_hex(sha.as_bytes()).map_err(|_| unknown())?;
    // The header says the kind without inflating the object.
    let header = repo.find_header(id).map_err(|_| unknown())?;
    if header.kind() != gix::object::Kind::Commit {
        return Err(unknown());
    }
    Ok(id)
}

/// Is `ancestor` reachable from `tip` (or equal to it)?
fn reaches(repo: &gix::Repository, tip: ObjectId, ancestor: ObjectId) -> Result<bool, Refusal> {
    if tip == ancestor {
        return Ok(true);
    }
    let walk = repo.rev_walk([tip]).all().map_err(walk_error)?;
    for (n, info) in walk.enumerate() {
        let info = info.map_err(walk_error)?;
        if info.id == ancestor {
            return Ok(true);
        }
        if n >= WALK_LIMIT {
            return Err(Refusal::rejected(
                "range_too_large",
                format!("history walk exceeded {WALK_LIMIT} commits"),
            ));
        }
    }
    Ok(false)
}

/// Whether `commit` is `tip` or one of its ancestors, answered from the
/// memo of the tip when an earlier verification already walked that far.
fn on_default_branch(
    path: &Path,
    repo: &gix::Repository,
    tip: ObjectId,
    commit: ObjectId,
) -> Result<bool, Refusal> {
    tip_reach::reaches_from_tip(path, repo, tip, commit, WALK_LIMIT).map_err(
        |failure| match failure {
            tip_reach::WalkFailure::TooLong { limit } => Refusal::rejected(
                "range_too_large",
                format!("history walk exceeded {limit} commits"),
            ),
            tip_reach::WalkFailure::Broken(e) => walk_error(e),
        },
    )
}

fn walk_error(e: impl std::fmt::Display) -> Refusal {
    Refusal::unavailable(30, format!("walking the source repository failed: {e}"))
}

/// The number of commits in `before..after`, `None` when `before` is not an
/// ancestor of `after`; refused past [`MAX_RANGE_COMMITS`].
///
/// One walk answers both: it yields the commits reachable from `after` but
/// not from `before`, and `before` is an ancestor of `after` exactly when one
/// of them has `before` as a parent (the commit just above `before` on a path
/// down from `after` is such a commit, and any such commit puts `before` in
/// `after`'s history).
fn count_range(
    repo: &gix::Repository,
    before: ObjectId,
    after: ObjectId,
) -> Result<Option<u64>, Refusal> {
    let too_large = || {
        Refusal::rejected(
            "range_too_large",
            format!(
                "the range holds more than {MAX_RANGE_COMMITS} commits; dispatch smaller ranges"
            ),
        )
    };
    let mut commits = 0u64;
    let mut ancestor = false;
    // Without the commit-graph: this walk runs for every dispatch and is
    // short, and opening the graph maps its file and unmaps it after the
    // walk. Each unmap takes the process's memory-map lock for writing, and
    // at 1,000 dispatches/s the runtime's threads queued behind those
    // unmaps for up to 80 ms (measured with sched_switch tracing).
    let walk = repo
        .rev_walk([after])
        .with_hidden([before])
        .use_commit_graph(false)
        .all()
        .map_err(walk_error)?;
    for info in walk {
        let info = info.map_err(walk_error)?;
        commits += 1;
        ancestor = ancestor || info.parent_ids.contains(&before);
        if commits > MAX_RANGE_COMMITS {
            // Too long either way; which refusal depends on the ancestry.
            return if ancestor || reaches(repo, after, before)? {
                Err(too_large())
            } else {
                Ok(None)
            };
        }
    }
    Ok(ancestor.then_some(commits))
}

/// Verifies `before..after` on the repository at `path`.
pub fn verify_range(path: &Path, before: &str, after: &str) -> Result<VerifiedRange, Refusal> {
    precheck_range(before, after)?;
    let repo = open(path)?;
    let before_id = commit_id(&repo, "push_before", before)?;
    let after_id = commit_id(&repo, "push_after", after)?;
    let (branch, tip) = default_branch(&repo)?;

    let commits = count_range(&repo, before_id, after_id)?.ok_or_else(|| {
        Refusal::rejected(
            "not_fast_forward",
            format!("push_before {before} is not an ancestor of push_after {after}"),
        )
    })?;
    if !on_default_branch(path, &repo, tip, after_id)? {
        return Err(Refusal::rejected(
            "not_on_default_branch",
            format!(
                "push_after {after} is not on the current {branch} (force-pushed away, or never merged)"
            ),
        ));
    }
    Ok(VerifiedRange {
        default_branch: branch,
        commits,
        repository_id: None,
        run: None,
    })
}

/// The default branch of the repository at `path` and its current tip.
pub fn default_branch_tip(path: &Path) -> Result<BranchTip, Refusal> {
    let repo = open(path)?;
    let (branch, tip) = default_branch(&repo)?;
    Ok(BranchTip {
        branch,
        sha: sha_of(tip)?,
    })
}

/// Whether `commit` is `tip` or one of its ancestors in the repository at
/// `path`. A commit the repository does not hold (garbage-collected after a
/// force-push) is not an ancestor.
pub fn ancestry(path: &Path, commit: &str, tip: &str) -> Result<Ancestry, Refusal> {
    let repo = open(path)?;
    let Ok(remembered) = commit_id(&repo, "the cursor", commit) else {
        return Ok(Ancestry::NotAncestor);
    };
    let tip = commit_id(&repo, "the tip", tip)?;
    Ok(if on_default_branch(path, &repo, tip, remembered)? {
        Ancestry::Ancestor
    } else {
        Ancestry::NotAncestor
    })
}

/// How far the default branch of the repository at `path` has moved past
/// `cursor`: a walk of `cursor..tip`, counted up to [`MAX_LAG_COUNTED`].
pub fn lag(path: &Path, cursor: &str) -> Result<Lag, Refusal> {
    let repo = open(path)?;
    let (_, tip_id) = default_branch(&repo)?;
    let tip = sha_of(tip_id)?;
    let Ok(remembered) = commit_id(&repo, "the cursor", cursor) else {
        return Ok(Lag::Diverged { tip });
    };
    if remembered == tip_id {
        return Ok(Lag::UpToDate { tip });
    }
    if !on_default_branch(path, &repo, tip_id, remembered)? {
        return Ok(Lag::Diverged { tip });
    }
    let walk = repo
        .rev_walk([tip_id])
        .with_hidden([remembered])
        .all()
        .map_err(walk_error)?;
    let (mut commits, mut since) = (0_u64, None::<i64>);
    for info in walk {
        let info = info.map_err(walk_error)?;
        if commits == MAX_LAG_COUNTED {
            return Ok(Lag::Behind {
                tip,
                commits,
                counted_all: false,
                since,
            });
        }
        commits += 1;
        let time = info.commit_time.unwrap_or_else(|| {
            repo.find_commit(info.id)
                .ok()
                .and_then(|c| c.time().ok())
                .map_or(0, |t| t.seconds)
        });
        since = Some(since.map_or(time, |s| s.min(time)));
    }
    Ok(Lag::Behind {
        tip,
        commits,
        counted_all: true,
        since,
    })
}

/// The PR number a commit subject names: `Merge pull request #12 from ...` or
/// `Title (#12)`.
pub fn pull_number_of_subject(subject: &str) -> Option<u64> {
    let digits = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok().filter(|n| *n > 0)
    };
    if let Some(rest) = subject.strip_prefix("Merge pull request #") {
        let (n, tail) = rest.split_once(' ')?;
        return if tail.starts_with("from ") {
            digits(n)
        } else {
            None
        };
    }
    let inner = subject.trim_end().strip_suffix(')')?;
    let (head, n) = inner.rsplit_once("(#")?;
    if head.is_empty() || !head.ends_with(' ') {
        return None;
    }
    digits(n)
}

/// How many commits past the newest one naming a pull request are searched
/// for an older one naming it too.
const OLDER_NAMING_LIMIT: usize = 10_000;

/// Finds the merge commit of PR `number` among the commits reachable from the
/// default branch's tip. When several subjects name it (the merge and a
/// later follow-up `Tweak (#N)`, or a cherry-pick onto a maintenance branch),
/// the one the walk meets last (an ancestor of the others when they are
/// related), looking at most [`OLDER_NAMING_LIMIT`] commits past the first:
/// the one a range's evidence records, so a request and a range agree.
pub fn verify_pull(path: &Path, number: PullNumber) -> Result<VerifiedPull, Refusal> {
    let repo = open(path)?;
    let (branch, tip) = default_branch(&repo)?;
    let walk = repo.rev_walk([tip]).all().map_err(walk_error)?;
    let mut found: Option<(usize, ObjectId)> = None;
    for (n, info) in walk.enumerate() {
        let info = info.map_err(walk_error)?;
        let past_first = found.is_some_and(|(first, _)| n - first >= OLDER_NAMING_LIMIT);
        if n >= WALK_LIMIT || past_first {
            break;
        }
        let commit = repo.find_commit(info.id).map_err(walk_error)?;
        let message = commit.message_raw_sloppy();
        let subject =
            String::from_utf8_lossy(message.split(|b| *b == b'\n').next().unwrap_or_default());
        if pull_number_of_subject(&subject) == Some(number.get()) {
            found = Some((found.map_or(n, |(first, _)| first), info.id));
        }
    }
    if let Some((_, id)) = found {
        return Ok(VerifiedPull {
            number,
            merge_sha: sha_of(id)?,
            default_branch: branch,
            repository_id: None,
            run: None,
        });
    }
    Err(Refusal::rejected(
        "pull_not_merged",
        format!(
            "no commit on {branch} merges pull request #{number}; only merged pull requests can be reconciled"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_subjects() {
        assert_eq!(
            pull_number_of_subject("Merge pull request #12 from octo/feature"),
            Some(12)
        );
        assert_eq!(pull_number_of_subject("Add the thing (#7)"), Some(7));
        assert_eq!(pull_number_of_subject("Merge pull request #12"), None);
        assert_eq!(pull_number_of_subject("(#7)"), None);
        assert_eq!(pull_number_of_subject("Fix (#x)"), None);
        assert_eq!(pull_number_of_subject("Fix (#0)"), None);
        assert_eq!(pull_number_of_subject("Refs #7"), None);
    }
}
