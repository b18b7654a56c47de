//! The order in which a range's commits entered the default branch, and
//! through which merge, pure: both forges use it to find the pull requests
//! that reached the default branch through a merged branch (a maintenance
//! branch merged back, a long-lived feature branch merged in), whose merge or
//! squash commits are not first-parent commits of the default branch.
//!
//! Invariants:
//! - every commit of the range that is reachable from `after` within the
//!   range appears exactly once: a first-parent commit `F` of the range
//!   (oldest first) is preceded by the commits that entered with it, the
//!   commits reachable from its second and later parents (an octopus merge
//!   has several) and not from its first parent, each marked `through: F`;
//! - within one merge's group, parents come before children (a post-order
//!   walk, first parents first), so a merged branch's own history keeps its
//!   order;
//! - the walk visits each commit once: it is linear in the range, which the
//!   caller has bounded ([`crate::forge::evidence::MAX_COMMITS`]).

use std::collections::HashMap;

use super::evidence::CommitInfo;

/// One commit of the range and how it entered the default branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entered<'a> {
    pub commit: &'a CommitInfo,
    /// `None` for a first-parent commit of the default branch; otherwise the
    /// first-parent merge commit that brought this commit in.
    pub through: Option<&'a CommitInfo>,
}

/// The range's first-parent chain from `after` (oldest first): the commits
/// that entered the default branch itself, where merges and squashes land.
/// `commits` is the whole range; the chain stops where it leaves it.
pub fn first_parent_chain<'a>(commits: &'a [CommitInfo], after: &str) -> Vec<&'a CommitInfo> {
    let by_sha: HashMap<String, &CommitInfo> = commits
        .iter()
        .map(|c| (c.sha.to_ascii_lowercase(), c))
        .collect();
    let mut chain = Vec::new();
    let mut current = after.to_ascii_lowercase();
    while let Some(commit) = by_sha.get(current.as_str()) {
        chain.push(*commit);
        // A malformed graph (a cycle) cannot make this run forever.
        if chain.len() > commits.len() {
            break;
        }
        match commit.parents.first() {
            Some(parent) => current = parent.to_ascii_lowercase(),
            None => break,
        }
    }
    chain.reverse();
    chain
}

/// Every commit of `commits` (the range `before..after`, any order) in the
/// order it entered the default branch: see the module docs. Commits not
/// reachable from `after` inside the range are left out.
pub fn entered<'a>(commits: &'a [CommitInfo], after: &str) -> Vec<Entered<'a>> {
    let index: HashMap<String, usize> = commits
        .iter()
        .enumerate()
        .map(|(i, c)| (c.sha.to_ascii_lowercase(), i))
        .collect();
    let chain = first_parent_chain(commits, after);
    let mut placed = vec![false; commits.len()];
    for commit in &chain {
        placed[index[&commit.sha.to_ascii_lowercase()]] = true;
    }
    let mut out = Vec::with_capacity(commits.len());
    for carrier in chain {
        // Post-order from the merged parents: (commit, next parent to look at).
        let mut stack: Vec<(usize, usize)> = Vec::new();
        for parent in carrier.parents.iter().skip(1) {
            let Some(&start) = index.get(&parent.to_ascii_lowercase()) else {
                continue;
            };
            if placed[start] {
                continue;
            }
            placed[start] = true;
            stack.push((start, 0));
            while let Some((at, next)) = stack.last_mut() {
                let commit = &commits[*at];
                if let Some(parent) = commit.parents.get(*next) {
                    *next += 1;
                    if let Some(&p) = index.get(&parent.to_ascii_lowercase())
                        && !placed[p]
                    {
                        placed[p] = true;
                        stack.push((p, 0));
                    }
                } else {
                    out.push(Entered {
                        commit,
                        through: Some(carrier),
                    });
                    stack.pop();
                }
            }
        }
        out.push(Entered {
            commit: carrier,
            through: None,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Sha;

    fn commit(sha: &str, parents: &[&str]) -> CommitInfo {
        CommitInfo {
            sha: Sha::fake(sha),
            parents: parents.iter().map(|p| Sha::fake(p)).collect(),
            author: String::new(),
            committed_at: String::new(),
            subject: sha.into(),
        }
    }

    fn order(commits: &[CommitInfo], after: &str) -> Vec<(String, Option<String>)> {
        entered(commits, Sha::fake(after).as_str())
            .iter()
            .map(|e| {
                (
                    e.commit.sha.fake_name(),
                    e.through.map(|t| t.sha.fake_name()),
                )
            })
            .collect()
    }

    fn pairs(expected: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        expected
            .iter()
            .map(|(s, t)| (s.to_string(), t.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn a_maintenance_branch_merged_back_twice_enters_through_each_merge() {
        // before = o. stable: s1 -> s2 (merge of s1 and h) -> s3; main: a,
        // m1 = merge(a, s2), b, m2 = merge(b, s3). Listed newest first to
        // show the input order does not matter.
        let commits = vec![
            commit("m2", &["b", "s3"]),
            commit("b", &["m1"]),
            commit("s3", &["s2"]),
            commit("m1", &["a", "s2"]),
            commit("a", &["o"]),
            commit("s2", &["s1", "h"]),
            commit("h", &["o"]),
            commit("s1", &["o"]),
        ];
        assert_eq!(
            order(&commits, "m2"),
            pairs(&[
                ("a", None),
                ("s1", Some("m1")),
                ("h", Some("m1")),
                ("s2", Some("m1")),
                ("m1", None),
                ("b", None),
                ("s3", Some("m2")),
                ("m2", None),
            ])
        );
        let chain: Vec<String> = first_parent_chain(&commits, Sha::fake("m2").as_str())
            .iter()
            .map(|c| c.sha.fake_name())
            .collect();
        assert_eq!(chain, ["a", "m1", "b", "m2"]);
    }

    #[test]
    fn octopus_merges_and_synced_branches_place_each_commit_once() {
        // o2 merges x and y into main; y had merged main's a (already in).
        let commits = vec![
            commit("a", &["o"]),
            commit("x", &["o"]),
            commit("y0", &["o"]),
            commit("y", &["y0", "a"]),
            commit("o2", &["a", "x", "y"]),
        ];
        assert_eq!(
            order(&commits, "o2"),
            pairs(&[
                ("a", None),
                ("x", Some("o2")),
                ("y0", Some("o2")),
                ("y", Some("o2")),
                ("o2", None),
            ])
        );
        // An unknown tip: nothing entered; a commit outside the range is
        // never followed.
        assert!(entered(&commits, Sha::fake("zz").as_str()).is_empty());
        assert_eq!(order(&commits, "x"), pairs(&[("x", None)]));
    }
}
