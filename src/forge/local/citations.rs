//! Cited source lines followed from their commit to a job's tip in a local
//! source: commit by commit along the tip's first-parent chain, through each
//! commit's diff of the file (renames followed when git's rename detection
//! reports one), so a stale fact names the commit that changed it. A file
//! byte for byte as cited, or whose cited lines are byte for byte what they
//! were and where they were, is current without a walk; a citation this
//! process followed before goes on from the tip it was followed to
//! (`followed.rs`), and the chain is read only as deep as a question needs:
//! a job's cost does not grow with the age of its citations or the length
//! of the history.
//!
//! Invariants: only history reachable from the tip is read; a citation whose
//! commit is not in it, or whose file is binary or over the diff bound, is
//! `Unchecked` with the reason, never guessed stale or current.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use gix::ObjectId;
use gix::bstr::ByteSlice;

use crate::facts::Lines;
use crate::forge::evidence::SourceError;
use crate::ids::Sha;
use crate::staleness::{CitationState, Cited, Hunk, MAX_CITATIONS, Mapped, map_lines};

use super::followed;

/// How many first-parent commits back from the tip a citation is followed.
const CHAIN_LIMIT: usize = 10_000;
/// Blobs larger than this are not line-diffed.
const MAX_BLOB: usize = 1 << 20;
/// The decoded-object cache of one `follow` call.
const OBJECT_CACHE_BYTES: usize = 32 << 20;

fn unavailable(what: &str, e: impl std::fmt::Display) -> SourceError {
    SourceError::Unavailable(format!("{what} in the local source failed: {e}"))
}

/// Follows every citation in `cited` to `tip`.
pub fn follow(
    path: &Path,
    cited: &[Cited],
    tip: &Sha,
) -> Result<BTreeMap<Cited, CitationState>, SourceError> {
    let mut repo = gix::open(path).map_err(|e| unavailable("opening the repository", e))?;
    // Every citation walks the same chain: without a cache each one would
    // inflate the same trees again, and a job's cost would grow with history.
    repo.object_cache_size_if_unset(OBJECT_CACHE_BYTES);
    let tip_id = ObjectId::from_hex(tip.as_str().as_bytes())
        .map_err(|e| SourceError::Invalid(format!("tip {tip}: {e}")))?;
    let mut chain = Chain::new(&repo, tip_id).map_err(|e| unavailable("reading a commit", e))?;
    let known = followed::recall(path, &cited[..cited.len().min(MAX_CITATIONS)]);
    let mut states = BTreeMap::new();
    let mut found = Vec::new();
    let mut lookups = Lookups::default();
    for (n, citation) in cited.iter().enumerate() {
        let state = if n >= MAX_CITATIONS {
            CitationState::Unchecked {
                reason: format!(
                    "more than {MAX_CITATIONS} citations in the wiki; checked the first"
                ),
            }
        } else {
            let from_known = match known.get(citation) {
                Some(known) => from_known(&repo, &mut chain, &mut lookups, known),
                None => None,
            };
            let walked = match from_known {
                Some(walked) => Ok(walked),
                None => follow_one(&repo, &mut chain, &mut lookups, citation),
            };
            match walked {
                Ok(Walked::At { path, lines, blob }) => {
                    if let Some(blob) = blob {
                        found.push((
                            citation.clone(),
                            followed::Known {
                                tip: tip_id,
                                path: path.clone(),
                                lines,
                                blob,
                            },
                        ));
                    }
                    if path == citation.path && lines == citation.lines {
                        CitationState::Current
                    } else {
                        CitationState::Moved { path, lines }
                    }
                }
                Ok(Walked::Stale(stale)) => stale,
                Err(reason) => CitationState::Unchecked { reason },
            }
        };
        states.insert(citation.clone(), state);
    }
    followed::remember(path, found);
    Ok(states)
}

/// Where following a citation to the tip took it.
enum Walked {
    /// Its lines, intact, at `path`/`lines`, in the file's blob `blob`
    /// (`None` when nothing was read: no step from the cited commit).
    At {
        path: String,
        lines: Lines,
        blob: Option<ObjectId>,
    },
    /// [`CitationState::Stale`].
    Stale(CitationState),
}

/// The tip's first-parent chain, newest first, read only as deep as a
/// question needs: most citations were followed to a recent tip, and the
/// chain back to the first commit grows with history.
struct Chain {
    ids: Vec<ObjectId>,
    at: HashMap<ObjectId, usize>,
    /// The next commit down the chain, `None` at its root or past
    /// [`CHAIN_LIMIT`].
    next: Option<ObjectId>,
}

impl Chain {
    fn new(repo: &gix::Repository, tip: ObjectId) -> Result<Chain, String> {
        let mut chain = Chain {
            ids: Vec::new(),
            at: HashMap::new(),
            next: Some(tip),
        };
        chain.extend(repo)?;
        Ok(chain)
    }

    fn tip(&self) -> ObjectId {
        self.ids[0]
    }

    /// Reads one more commit of the chain; false at its end.
    fn extend(&mut self, repo: &gix::Repository) -> Result<bool, String> {
        let Some(id) = self.next.take() else {
            return Ok(false);
        };
        let commit = repo
            .find_commit(id)
            .map_err(|e| format!("reading the commit {id}: {e}"))?;
        self.at.insert(id, self.ids.len());
        self.ids.push(id);
        if self.ids.len() < CHAIN_LIMIT {
            self.next = commit.parent_ids().next().map(|p| p.detach());
        }
        Ok(true)
    }

    /// `commit`'s place on the chain (0 is the tip), if it is on it.
    fn position(
        &mut self,
        repo: &gix::Repository,
        commit: ObjectId,
    ) -> Result<Option<usize>, String> {
        while !self.at.contains_key(&commit) {
            if !self.extend(repo)? {
                break;
            }
        }
        Ok(self.at.get(&commit).copied())
    }

    /// The (parent, child) steps from the commit at `at` to the tip, oldest
    /// first.
    fn steps_from(&self, at: usize) -> Vec<(ObjectId, ObjectId)> {
        self.ids[..=at]
            .windows(2)
            .rev()
            .map(|w| (w[1], w[0]))
            .collect()
    }
}

/// A citation followed on from the tip an earlier job followed it to, when
/// that tip is on this tip's chain; `None` to follow it from its commit.
fn from_known(
    repo: &gix::Repository,
    chain: &mut Chain,
    lookups: &mut Lookups,
    known: &followed::Known,
) -> Option<Walked> {
    let tip = chain.tip();
    let at_known = |known: &followed::Known| Walked::At {
        path: known.path.clone(),
        lines: known.lines,
        blob: Some(known.blob),
    };
    if known.tip == tip {
        return Some(at_known(known));
    }
    let at = chain.position(repo, known.tip).ok()??;
    let now = lookups.entry(repo, tip, &known.path).ok()?;
    // The file is what it was at that tip, or its lines are byte for byte
    // what and where they were: the same answer, without a walk.
    if now == Some(known.blob) {
        return Some(at_known(known));
    }
    if let Some(now) = now
        && let (Ok(old), Ok(new)) = (
            blob(repo, known.blob, &known.path),
            blob(repo, now, &known.path),
        )
        && let Some(before) = line_span(&old, known.lines)
        && line_span(&new, known.lines) == Some(before)
    {
        return Some(Walked::At {
            path: known.path.clone(),
            lines: known.lines,
            blob: Some(now),
        });
    }
    walk(repo, &chain.steps_from(at), known.path.clone(), known.lines).ok()
}

fn follow_one(
    repo: &gix::Repository,
    chain: &mut Chain,
    lookups: &mut Lookups,
    cited: &Cited,
) -> Result<Walked, String> {
    let commit = ObjectId::from_hex(cited.commit.as_str().as_bytes()).map_err(|e| e.to_string())?;
    let tip = chain.tip();
    // Steps oldest first: (parent, child) pairs from the cited commit to the tip.
    let steps: Vec<(ObjectId, ObjectId)> = match chain.position(repo, commit)? {
        Some(at) => chain.steps_from(at),
        None => {
            // Cited on a side branch that was merged since: one step to the tip.
            if !reaches(repo, tip, commit)? {
                return Err(format!(
                    "commit {} is not in the history of the default branch's tip",
                    cited.commit
                ));
            }
            vec![(commit, tip)]
        }
    };
    if let Some(cited_id) = lookups.entry(repo, commit, &cited.path)?
        && let Some(tip_id) = lookups.entry(repo, tip, &cited.path)?
    {
        let at_tip = || Walked::At {
            path: cited.path.clone(),
            lines: cited.lines,
            blob: Some(tip_id),
        };
        // The common case, and the one that would otherwise cost a walk over
        // all history since the citation: the file is byte for byte what was
        // cited, so the cited lines read as they did (an edit and its revert
        // included).
        if cited_id == tip_id {
            return Ok(at_tip());
        }
        // The next most common: the file changed elsewhere, and the cited
        // lines are byte for byte what they were, where they were. Also
        // without a walk: a citation kept for months (a purpose line under
        // "What is here") would otherwise cost a walk over every commit
        // since it was made, every job.
        if let (Ok(old), Ok(new)) = (
            blob(repo, cited_id, &cited.path),
            blob(repo, tip_id, &cited.path),
        ) && let Some(before) = line_span(&old, cited.lines)
            && line_span(&new, cited.lines) == Some(before)
        {
            return Ok(at_tip());
        }
    }
    walk(repo, &steps, cited.path.clone(), cited.lines)
}

/// Follows `lines` of `path` through `steps`, commit by commit.
fn walk(
    repo: &gix::Repository,
    steps: &[(ObjectId, ObjectId)],
    mut path: String,
    mut lines: Lines,
) -> Result<Walked, String> {
    let mut blob_id = None;
    for &(parent, child) in steps {
        let old_tree = tree(repo, parent)?;
        let new_tree = tree(repo, child)?;
        let Some(old_id) = entry(&old_tree, &path) else {
            return Err(format!("{path} is not a file at {parent}"));
        };
        let new_id = match entry(&new_tree, &path) {
            Some(id) => id,
            None => match renamed(repo, &old_tree, &new_tree, &path)? {
                Some((to, id)) => {
                    path = to;
                    id
                }
                None => {
                    return Ok(Walked::Stale(CitationState::Stale {
                        changed_in: sha(child)?,
                        deleted: true,
                    }));
                }
            },
        };
        blob_id = Some(new_id);
        if old_id == new_id {
            continue;
        }
        let (old, new) = (blob(repo, old_id, &path)?, blob(repo, new_id, &path)?);
        match map_lines(lines, &hunks(&old, &new)) {
            Mapped::At(moved) => lines = moved,
            Mapped::Changed => {
                return Ok(Walked::Stale(CitationState::Stale {
                    changed_in: sha(child)?,
                    deleted: false,
                }));
            }
        }
    }
    Ok(Walked::At {
        path,
        lines,
        blob: blob_id,
    })
}

/// Lines `lines` of `text` (counted from 1, each with its newline), or
/// `None` when the text has fewer lines.
fn line_span(text: &[u8], lines: Lines) -> Option<&[u8]> {
    let (start, end) = (lines.start() as usize, lines.end() as usize);
    let mut at = 0;
    let mut from = None;
    for number in 1..=end {
        if number == start {
            from = Some(at);
        }
        if at >= text.len() {
            return None;
        }
        at = match text[at..].iter().position(|&b| b == b'\n') {
            Some(newline) => at + newline + 1,
            None => text.len(),
        };
    }
    from.map(|from| &text[from..at])
}

/// The file entries one `follow` call looked up, by commit and path: every
/// citation asks for the tip's entry of its file, and citations made at one
/// job share their commit.
#[derive(Default)]
struct Lookups {
    trees: HashMap<ObjectId, ObjectId>,
    entries: HashMap<(ObjectId, String), Option<ObjectId>>,
}

impl Lookups {
    fn entry(
        &mut self,
        repo: &gix::Repository,
        commit: ObjectId,
        path: &str,
    ) -> Result<Option<ObjectId>, String> {
        if let Some(known) = self.entries.get(&(commit, path.to_owned())) {
            return Ok(*known);
        }
        let tree_id = match self.trees.get(&commit) {
            Some(id) => *id,
            None => {
                let id = tree(repo, commit)?.id;
                self.trees.insert(commit, id);
                id
            }
        };
        let tree = repo
            .find_tree(tree_id)
            .map_err(|e| format!("reading the tree {tree_id}: {e}"))?;
        let found = entry(&tree, path);
        self.entries.insert((commit, path.to_owned()), found);
        Ok(found)
    }
}

fn sha(id: ObjectId) -> Result<Sha, String> {
    Sha::parse(&id.to_string())
}

fn tree(repo: &gix::Repository, id: ObjectId) -> Result<gix::Tree<'_>, String> {
    repo.find_commit(id)
        .and_then(|c| c.tree())
        .map_err(|e| format!("reading the tree of {id}: {e}"))
}

fn entry(tree: &gix::Tree<'_>, path: &str) -> Option<ObjectId> {
    tree.lookup_entry_by_path(path)
        .ok()
        .flatten()
        .filter(|e| e.mode().is_blob())
        .map(|e| e.object_id())
}

fn renamed(
    repo: &gix::Repository,
    old: &gix::Tree<'_>,
    new: &gix::Tree<'_>,
    path: &str,
) -> Result<Option<(String, ObjectId)>, String> {
    use gix::object::tree::diff::ChangeDetached as Change;
    let options = gix::diff::Options::default().with_rewrites(Some(gix::diff::Rewrites::default()));
    let changes = repo
        .diff_tree_to_tree(old, new, options)
        .map_err(|e| format!("diffing trees: {e}"))?;
    Ok(changes.into_iter().find_map(|change| match change {
        Change::Rewrite {
            source_location,
            location,
            id,
            copy: false,
            ..
        } if source_location.as_bstr() == path.as_bytes().as_bstr() => {
            Some((location.to_str_lossy().into_owned(), id))
        }
        _ => None,
    }))
}

fn blob(repo: &gix::Repository, id: ObjectId, path: &str) -> Result<Vec<u8>, String> {
    let object = repo
        .find_object(id)
        .map_err(|e| format!("reading {path}: {e}"))?;
    if object.data.len() > MAX_BLOB || object.data.contains(&0) {
        return Err(format!("{path} is binary or larger than {MAX_BLOB} bytes"));
    }
    Ok(object.data.clone())
}

fn hunks(old: &[u8], new: &[u8]) -> Vec<Hunk> {
    use gix::diff::blob::{Algorithm, Diff, InternedInput};
    let input = InternedInput::new(old, new);
    let diff = Diff::compute(Algorithm::Histogram, &input);
    diff.hunks()
        .map(|hunk| Hunk {
            before: hunk.before.clone(),
            after: hunk.after.clone(),
        })
        .collect()
}

fn reaches(repo: &gix::Repository, tip: ObjectId, ancestor: ObjectId) -> Result<bool, String> {
    let walk = repo
        .rev_walk([tip])
        .all()
        .map_err(|e| format!("walking history: {e}"))?;
    for (n, info) in walk.enumerate() {
        let info = info.map_err(|e| format!("walking history: {e}"))?;
        if info.id == ancestor {
            return Ok(true);
        }
        if n >= CHAIN_LIMIT * 4 {
            return Err("the history walk passed its bound without an answer".to_owned());
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "a")
            .env("GIT_AUTHOR_EMAIL", "a@example.com")
            .env("GIT_COMMITTER_NAME", "a")
            .env("GIT_COMMITTER_EMAIL", "a@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    fn commit(dir: &Path, text: &str) -> Sha {
        std::fs::write(dir.join("f.rs"), text).unwrap();
        git(dir, &["add", "f.rs"]);
        git(dir, &["commit", "-q", "-m", "c"]);
        Sha::parse(&git(dir, &["rev-parse", "HEAD"])).unwrap()
    }

    #[test]
    fn line_span_counts_from_one_and_needs_every_line() {
        let lines = |a, b| Lines::new(a, b).unwrap();
        assert_eq!(line_span(b"a\nb\nc", lines(1, 1)), Some(&b"a\n"[..]));
        assert_eq!(line_span(b"a\nb\nc", lines(2, 3)), Some(&b"b\nc"[..]));
        assert_eq!(line_span(b"a\nb\n", lines(3, 3)), None);
        assert_eq!(line_span(b"", lines(1, 1)), None);
    }

    #[test]
    fn cited_lines_as_they_were_where_they_were_are_current_without_a_walk() {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main"]);
        let body = "//! The purpose.\n//! More.\nfn a() {}\nfn b() {}\nfn c() {}\n";
        let cited_at = commit(dir.path(), body);
        let citation = Cited {
            path: "f.rs".into(),
            commit: cited_at.clone(),
            lines: Lines::new(1, 2).unwrap(),
        };
        let state = |tip: &Sha| {
            follow(dir.path(), std::slice::from_ref(&citation), tip).unwrap()[&citation].clone()
        };
        // Changed below the cited lines, many times.
        let mut tip = cited_at.clone();
        for n in 0..30 {
            tip = commit(dir.path(), &format!("{body}fn d{n}() {{}}\n"));
        }
        assert_eq!(state(&tip), CitationState::Current);
        // The cited lines changed: stale at that commit.
        let changed = commit(dir.path(), &body.replace("More.", "Other."));
        assert_eq!(
            state(&changed),
            CitationState::Stale {
                changed_in: changed.clone(),
                deleted: false
            }
        );
        // Restored byte for byte: the text cited is the text at the tip.
        let restored = commit(dir.path(), &format!("{body}fn e() {{}}\n"));
        assert_eq!(state(&restored), CitationState::Current);
        // A line inserted above: the walk re-anchors them (cited after the
        // edit and its revert, which the walk would meet first).
        let citation = Cited {
            commit: restored,
            ..citation.clone()
        };
        let moved = commit(dir.path(), &format!("//! Header.\n{body}"));
        assert_eq!(
            follow(dir.path(), std::slice::from_ref(&citation), &moved).unwrap()[&citation],
            CitationState::Moved {
                path: "f.rs".into(),
                lines: Lines::new(2, 3).unwrap()
            }
        );
    }

    #[test]
    fn a_citation_followed_before_goes_on_from_where_it_was_and_an_older_tip_starts_afresh() {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main"]);
        let body = "//! The purpose.\n//! More.\nfn a() {}\n";
        let citation = Cited {
            path: "f.rs".into(),
            commit: commit(dir.path(), body),
            lines: Lines::new(1, 2).unwrap(),
        };
        let state = |tip: &Sha| {
            follow(dir.path(), std::slice::from_ref(&citation), tip).unwrap()[&citation].clone()
        };
        let moved = |start, end| CitationState::Moved {
            path: "f.rs".into(),
            lines: Lines::new(start, end).unwrap(),
        };
        let one_down = commit(dir.path(), &format!("//! Header.\n{body}"));
        assert_eq!(state(&one_down), moved(2, 3));
        let remembered = followed::recall(dir.path(), std::slice::from_ref(&citation));
        assert_eq!(
            remembered[&citation].tip.to_string(),
            one_down.as_str(),
            "the follow is remembered at its tip"
        );
        let two_down = commit(dir.path(), &format!("//! Header.\n//! Two.\n{body}"));
        assert_eq!(state(&two_down), moved(3, 4));
        // Asked again at the older tip (a retry): not from the newer one.
        assert_eq!(state(&one_down), moved(2, 3));
        let changed = commit(
            dir.path(),
            &format!("//! Header.\n//! Two.\n{}", body.replace("More.", "Other.")),
        );
        assert_eq!(
            state(&changed),
            CitationState::Stale {
                changed_in: changed.clone(),
                deleted: false
            }
        );
    }
}
