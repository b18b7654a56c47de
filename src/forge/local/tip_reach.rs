//! Which commits are on the default branch: reachability from its tip,
//! remembered per repository so a burst of dispatches against one tip walks
//! the history once, not once per dispatch.
//!
//! Invariant: the memo of a repository only ever holds commits reachable from
//! the tip it was built for. A commit id names immutable history, so what was
//! reachable from that tip stays reachable whatever the refs do; the tip
//! moving (a merge, a force-push) starts a fresh memo for the new tip.
//!
//! Each miss walks from the tip again, at least twice as far as the walk
//! before, remembering what it passes: N queries cost O(N + history) commit
//! visits, not O(N × distance). The memo is bounded by [`MEMO_LIMIT`] ids;
//! commits deeper than that are still answered, by walking.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use gix::ObjectId;

/// Most commit ids one repository's memo holds (about 40 bytes each).
pub(super) const MEMO_LIMIT: usize = 100_000;

/// The first walk from a new tip visits at least this many commits.
const FIRST_WALK: usize = 1024;

/// What is known about reachability from one tip.
struct Memo {
    tip: ObjectId,
    /// Commits reachable from `tip` (all of them within the first `walked`
    /// commits of the walk, up to [`MEMO_LIMIT`]).
    reachable: HashSet<ObjectId>,
    /// How many commits the longest walk so far visited.
    walked: usize,
    /// The walk ran out of commits: anything not in `reachable` is not
    /// reachable (only when nothing was left out for the limit).
    complete: bool,
}

impl Memo {
    fn new(tip: ObjectId) -> Self {
        Memo {
            tip,
            reachable: HashSet::from([tip]),
            walked: 0,
            complete: false,
        }
    }
}

/// One memo per repository path, each behind its own lock so repositories do
/// not wait for each other's walks.
static MEMOS: LazyLock<Mutex<HashMap<PathBuf, Arc<Mutex<Memo>>>>> = LazyLock::new(Mutex::default);

/// How a walk ended without an answer.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum WalkFailure {
    /// More than `limit` commits were visited.
    TooLong { limit: usize },
    /// The object database could not be walked.
    Broken(String),
}

/// Whether `target` is `tip` or one of its ancestors in `repo` (the
/// repository at `path`), visiting at most `walk_limit` commits.
pub(super) fn reaches_from_tip(
    path: &Path,
    repo: &gix::Repository,
    tip: ObjectId,
    target: ObjectId,
    walk_limit: usize,
) -> Result<bool, WalkFailure> {
    let memo = MEMOS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(path.to_path_buf())
        .or_insert_with(|| Arc::new(Mutex::new(Memo::new(tip))))
        .clone();
    let mut memo = memo.lock().unwrap_or_else(PoisonError::into_inner);
    if memo.tip != tip {
        *memo = Memo::new(tip);
    }
    if memo.reachable.contains(&target) {
        return Ok(true);
    }
    if memo.complete {
        return Ok(false);
    }
    // Walk at least twice as far as before, so repeated misses stay cheap in
    // total; stop once the target is found and that far is reached.
    let goal = (memo.walked * 2).max(FIRST_WALK).min(walk_limit);
    let walk = repo
        .rev_walk([tip])
        .all()
        .map_err(|e| WalkFailure::Broken(e.to_string()))?;
    let mut found = false;
    let mut visited = 0usize;
    let mut left_out = false;
    for info in walk {
        let info = info.map_err(|e| WalkFailure::Broken(e.to_string()))?;
        visited += 1;
        if info.id == target {
            found = true;
        }
        if memo.reachable.len() < MEMO_LIMIT {
            memo.reachable.insert(info.id);
        } else if !memo.reachable.contains(&info.id) {
            left_out = true;
        }
        if found && visited >= goal {
            break;
        }
        if visited >= walk_limit && !found {
            memo.walked = memo.walked.max(visited);
            return Err(WalkFailure::TooLong { limit: walk_limit });
        }
    }
    if !found && !left_out {
        memo.complete = true;
    }
    memo.walked = memo.walked.max(visited);
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
            .args(args)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// A repository with a linear main of `n` commits and a side branch off
    /// its first commit; returns (dir, main's commits oldest first, side tip).
    fn repo(n: usize) -> (tempfile::TempDir, Vec<ObjectId>, ObjectId) {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main"]);
        let mut commits = Vec::new();
        for i in 0..n {
            git(
                dir.path(),
                &["commit", "-q", "--allow-empty", "-m", &format!("c{i}")],
            );
            commits.push(
                ObjectId::from_hex(git(dir.path(), &["rev-parse", "HEAD"]).as_bytes()).unwrap(),
            );
        }
        git(
            dir.path(),
            &["checkout", "-q", "-b", "side", &commits[0].to_string()],
        );
        git(dir.path(), &["commit", "-q", "--allow-empty", "-m", "side"]);
        let side = ObjectId::from_hex(git(dir.path(), &["rev-parse", "HEAD"]).as_bytes()).unwrap();
        git(dir.path(), &["checkout", "-q", "main"]);
        (dir, commits, side)
    }

    #[test]
    fn answers_match_the_history_and_a_new_tip_starts_afresh() {
        let (dir, commits, side) = repo(40);
        let repo = gix::open(dir.path()).unwrap();
        let tip = *commits.last().unwrap();
        for commit in commits.iter().rev() {
            assert_eq!(
                reaches_from_tip(dir.path(), &repo, tip, *commit, 1000),
                Ok(true)
            );
        }
        assert_eq!(
            reaches_from_tip(dir.path(), &repo, tip, side, 1000),
            Ok(false)
        );
        // An older tip: the newer commits are not its ancestors, although the
        // memo of the newer tip held them.
        let old_tip = commits[10];
        assert_eq!(
            reaches_from_tip(dir.path(), &repo, old_tip, commits[20], 1000),
            Ok(false)
        );
        assert_eq!(
            reaches_from_tip(dir.path(), &repo, old_tip, commits[3], 1000),
            Ok(true)
        );
        assert_eq!(
            reaches_from_tip(dir.path(), &repo, side, commits[0], 1000),
            Ok(true)
        );
        assert_eq!(
            reaches_from_tip(dir.path(), &repo, side, commits[1], 1000),
            Ok(false)
        );
    }

    #[test]
    fn the_walk_limit_holds_for_a_commit_not_yet_remembered() {
        let (dir, commits, side) = repo(30);
        let repo = gix::open(dir.path()).unwrap();
        let tip = *commits.last().unwrap();
        assert_eq!(
            reaches_from_tip(dir.path(), &repo, tip, commits[0], 10),
            Err(WalkFailure::TooLong { limit: 10 })
        );
        assert_eq!(
            reaches_from_tip(dir.path(), &repo, tip, side, 10),
            Err(WalkFailure::TooLong { limit: 10 })
        );
        // Close to the tip is answered within the limit.
        assert_eq!(
            reaches_from_tip(dir.path(), &repo, tip, commits[25], 10),
            Ok(true)
        );
    }
}
