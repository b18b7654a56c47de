//! Confinement of a write: what a caller bound by [`WriteRules`] may change.
//!
//! Invariant: under rules that name an owner trailer, no write ever removes or
//! alters text of a *guarded* page outside the lines that carry a teammem
//! marker (`<!-- teammem:... -->`), and no write's changes exceed the byte
//! budget. A guarded page is one that exists at the base and is either
//! protected (e.g. `Home.md`) or was last changed by a commit without the
//! owner trailer (a person's edit). Guarded pages are never replaced whole;
//! they can be appended to, and lines carrying a marker can be replaced (which
//! is how teammem inserts entries after its anchors). Every refusal happens
//! before anything is sent, so the wiki's tip is unchanged.
//!
//! Protected pages that do not exist yet may be created: a new wiki needs its
//! `Home.md`, and there is no person's text to protect.

use std::collections::{BTreeMap, BTreeSet};

use gix::ObjectId;

use super::error::{ErrorKind, WikiError};
use super::patch::Replacement;
use super::paths::collision_key;
use super::publish::DesiredPage;
use super::tree::{TreeIndex, commit_tree, read_blob};

/// What marks a line as teammem's own (every anchor, entry and link line the
/// builtin agent writes carries it).
pub const MARKER: &str = "<!-- teammem:";

/// The rules one write is held to. The default binds nothing (the operator).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteRules {
    /// Pages that may only be patched in marker lines or appended to.
    pub protected: Vec<String>,
    /// The trailer key of the caller's own commits (`Teammem-Job`); when set,
    /// a page whose last commit lacks it is guarded like a protected page.
    /// `None` switches every page rule off.
    pub owner_trailer: Option<String>,
    /// The most bytes the caller may change in all (`None`: no limit).
    pub max_changed_bytes: Option<u64>,
    /// Bytes the caller's earlier writes already changed.
    pub already_changed: u64,
    /// The runner's own changes, folded into the same commit after the
    /// caller's change is checked (never counted against its budget).
    pub amend: Option<std::sync::Arc<Amend>>,
}

/// What the runner adds to a job's commit: rewritten evidence markers, and
/// `Stale.md` re-derived from the pages as the commit leaves them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Amend {
    /// Page path → marker rewrites.
    pub rewrites: std::collections::BTreeMap<String, Vec<crate::staleness::MarkerRewrite>>,
    /// Keep `Stale.md` in step with the pages.
    pub stale_page: bool,
}

/// The change measure of one page: bytes removed plus bytes added outside the
/// longest common prefix and suffix of the old and new content. A new page
/// counts its whole size. It is never less than the bytes a line diff shows
/// changed within the page, and it costs one pass over both texts.
pub fn changed_bytes(old: Option<&[u8]>, new: &[u8]) -> u64 {
    let Some(old) = old else {
        return new.len() as u64;
    };
    let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let room = old.len().min(new.len()) - prefix;
    let suffix = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    let common = prefix + suffix;
    (old.len() - common + new.len() - common) as u64
}

/// The index of the first replacement that touches a line without a teammem
/// marker (an empty `old`, an append, touches none).
pub fn first_unmarked_replacement(original: &str, replacements: &[Replacement]) -> Option<usize> {
    // Line ranges [start, end) including the newline, with their marker flag.
    let mut lines = Vec::new();
    let mut start = 0;
    for line in original.split_inclusive('\n') {
        lines.push((start, start + line.len(), line.contains(MARKER)));
        start += line.len();
    }
    replacements.iter().position(|replacement| {
        if replacement.old.is_empty() {
            return false;
        }
        // The patch engine has already checked that `old` occurs exactly once.
        let Some(from) = original.find(&replacement.old) else {
            return true;
        };
        let to = from + replacement.old.len();
        lines
            .iter()
            .any(|&(start, end, marked)| from < end && to > start && !marked)
    })
}

/// Whether a commit message ends with a trailer block naming `key`. The
/// subject alone is never a trailer block.
pub fn has_trailer(message: &str, key: &str) -> bool {
    let message = message.trim_end();
    let Some((_, last)) = message.rsplit_once("\n\n") else {
        return false;
    };
    last.lines().any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case(key) && !value.trim().is_empty()
        })
    })
}

/// What the write asks for a page, as far as the rules care.
pub(crate) enum Requested<'a> {
    Replace,
    Patch(&'a [Replacement]),
}

/// Checks `desired` (pages that differ from the base) against `rules`; returns
/// the bytes the write changes.
pub(crate) fn enforce(
    repo: &gix::Repository,
    base: ObjectId,
    base_index: &TreeIndex,
    desired: &[(&DesiredPage, Requested<'_>)],
    rules: &WriteRules,
) -> Result<u64, WikiError> {
    let protected: BTreeSet<String> = rules.protected.iter().map(|p| collision_key(p)).collect();
    let mut changed = 0u64;
    // Existing pages the owner check must look at: path -> the request.
    let mut ownership: BTreeMap<&str, &Requested<'_>> = BTreeMap::new();
    let mut originals: BTreeMap<&str, String> = BTreeMap::new();
    for (page, requested) in desired {
        let existing = base_index.pages.get(&page.path);
        let original = existing.map(|e| read_blob(repo, e.blob)).transpose()?;
        changed += changed_bytes(original.as_deref(), &page.content);
        let (Some(original), Some(_)) = (original, &rules.owner_trailer) else {
            continue;
        };
        let original = String::from_utf8_lossy(&original).into_owned();
        if protected.contains(&collision_key(&page.path)) {
            check_guarded(&page.path, &original, requested, Guard::Protected)?;
        } else {
            ownership.insert(page.path.as_str(), requested);
            originals.insert(page.path.as_str(), original);
        }
    }
    if let Some(max) = rules.max_changed_bytes
        && rules.already_changed.saturating_add(changed) > max
    {
        return Err(WikiError::limit_exceeded(format!(
            "this write would change {changed} bytes of the wiki and this job has already changed {}; a job may change at most {max} bytes (agent.max_changed_bytes): patch what changed instead of rewriting pages, or leave the rest to a later job",
            rules.already_changed
        )));
    }
    if let Some(key) = &rules.owner_trailer
        && !ownership.is_empty()
    {
        let paths: Vec<&str> = ownership.keys().copied().collect();
        let last = last_touching_commits(repo, base, &paths)?;
        for (path, requested) in ownership {
            // Fail closed: a page whose last commit cannot be found is a person's.
            let commit = last.get(path).copied();
            let ours = match commit {
                Some(commit) => has_trailer(
                    &repo
                        .find_commit(commit)
                        .map_err(|err| WikiError::internal("reading a commit", err))?
                        .message_raw_sloppy()
                        .to_string(),
                    key,
                ),
                None => false,
            };
            if !ours {
                check_guarded(
                    path,
                    &originals[path],
                    requested,
                    Guard::HumanWritten(commit),
                )?;
            }
        }
    }
    Ok(changed)
}

enum Guard {
    Protected,
    /// The page's last commit, when it could be found.
    HumanWritten(Option<ObjectId>),
}

fn check_guarded(
    path: &str,
    original: &str,
    requested: &Requested<'_>,
    guard: Guard,
) -> Result<(), WikiError> {
    let why = match guard {
        Guard::Protected => format!("{path} is protected"),
        Guard::HumanWritten(Some(commit)) => format!(
            "{path} was last changed by a person (commit {}, which has no Teammem-Job trailer), and teammem never overwrites human-written text",
            &commit.to_string()[..12]
        ),
        Guard::HumanWritten(None) => format!(
            "{path} was last changed by a person (no teammem commit of it was found), and teammem never overwrites human-written text"
        ),
    };
    match requested {
        Requested::Replace => Err(WikiError::not_applied(
            ErrorKind::PermissionDenied,
            format!(
                "{why}: it cannot be replaced whole; patch it with patch_wiki_pages instead, replacing only lines that carry a {MARKER}...--> marker (e.g. insert after teammem's anchor line) or appending with an empty old"
            ),
        )),
        Requested::Patch(replacements) => {
            match first_unmarked_replacement(original, replacements) {
                None => Ok(()),
                Some(index) => Err(WikiError::not_applied(
                    ErrorKind::PermissionDenied,
                    format!(
                        "{why}: replacement {index} of its patch changes text outside teammem's marker lines; replace only lines that carry a {MARKER}...--> marker (e.g. insert after teammem's anchor line) or append with an empty old"
                    ),
                )),
            }
        }
    }
}

/// The newest commit reachable from `tip` that changed each of `paths`
/// (against every parent, as `list_wiki_history` counts it); a path no
/// commit introduced is left out.
fn last_touching_commits(
    repo: &gix::Repository,
    tip: ObjectId,
    paths: &[&str],
) -> Result<BTreeMap<String, ObjectId>, WikiError> {
    let walk_error =
        |err: &dyn std::fmt::Display| WikiError::internal("walking the wiki history", err);
    let entry_of = |tree: ObjectId, path: &str| -> Result<Option<ObjectId>, WikiError> {
        let tree = repo
            .find_tree(tree)
            .map_err(|err| WikiError::internal("reading a tree", err))?;
        let entry = tree
            .lookup_entry_by_path(path)
            .map_err(|err| WikiError::internal("looking up a path", err))?;
        Ok(entry.map(|entry| entry.object_id()))
    };
    let walk = repo
        .rev_walk([tip])
        .sorting(gix::revision::walk::Sorting::ByCommitTime(
            Default::default(),
        ))
        .all()
        .map_err(|err| walk_error(&err))?;
    let mut pending: Vec<&str> = paths.to_vec();
    let mut found = BTreeMap::new();
    for info in walk {
        if pending.is_empty() {
            break;
        }
        let info = info.map_err(|err| walk_error(&err))?;
        let here_tree = commit_tree(repo, info.id)?;
        let parent_trees = info
            .parent_ids
            .iter()
            .map(|parent| commit_tree(repo, *parent))
            .collect::<Result<Vec<_>, _>>()?;
        let mut still = Vec::with_capacity(pending.len());
        for path in pending {
            let here = entry_of(here_tree, path)?;
            let mut touched = true;
            for parent in &parent_trees {
                if entry_of(*parent, path)? == here {
                    touched = false;
                    break;
                }
            }
            if touched && (here.is_some() || !parent_trees.is_empty()) {
                found.insert(path.to_owned(), info.id);
            } else {
                still.push(path);
            }
        }
        pending = still;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(old: &str, new: &str) -> Replacement {
        Replacement {
            old: old.into(),
            new: new.into(),
        }
    }

    #[test]
    fn changed_bytes_counts_what_lies_between_the_common_ends() {
        assert_eq!(changed_bytes(None, b"12345"), 5);
        assert_eq!(changed_bytes(Some(b"abc"), b"abc"), 0);
        assert_eq!(changed_bytes(Some(b"abXc"), b"abc"), 1);
        assert_eq!(changed_bytes(Some(b"abc"), b"abYYc"), 2);
        assert_eq!(changed_bytes(Some(b"old text"), b"new text"), 6);
        // Prefix and suffix never overlap: "aa" -> "aaa" is one byte added.
        assert_eq!(changed_bytes(Some(b"aa"), b"aaa"), 1);
        assert_eq!(changed_bytes(Some(b"whole"), b""), 5);
    }

    #[test]
    fn only_marker_lines_may_be_replaced_and_appends_are_free() {
        let page =
            "# Home\nhuman text\n<!-- teammem:topics -->\n- [A](A) <!-- teammem:area:a -->\n";
        // Inserting after the anchor, with or without its newline.
        assert_eq!(
            first_unmarked_replacement(page, &[r("<!-- teammem:topics -->\n", "x")]),
            None
        );
        assert_eq!(
            first_unmarked_replacement(page, &[r("teammem:topics", "x")]),
            None
        );
        assert_eq!(
            first_unmarked_replacement(
                page,
                &[r(
                    "<!-- teammem:topics -->\n- [A](A) <!-- teammem:area:a -->\n",
                    ""
                )]
            ),
            None
        );
        assert_eq!(first_unmarked_replacement(page, &[r("", "more\n")]), None);
        // Anything touching a person's line is refused, even partly.
        assert_eq!(
            first_unmarked_replacement(page, &[r("", "x"), r("human", "robot")]),
            Some(1)
        );
        assert_eq!(
            first_unmarked_replacement(page, &[r("text\n<!-- teammem:topics -->", "x")]),
            Some(0)
        );
        assert_eq!(
            first_unmarked_replacement(page, &[r(page, "replaced whole")]),
            Some(0)
        );
    }

    #[test]
    fn trailers_are_read_from_the_last_paragraph_only() {
        let key = "Teammem-Job";
        assert!(has_trailer(
            "Record PR #7\n\nTeammem-Job: 42\nTeammem-Source: o/r\n",
            key
        ));
        assert!(
            !has_trailer("Teammem-Job: 42\n", key),
            "a subject is no trailer"
        );
        assert!(!has_trailer(
            "Edit\n\nTeammem-Job: 42\n\nSigned-off-by: someone\n",
            key
        ));
        assert!(!has_trailer("Edit\n\nTeammem-Job:\n", key));
        assert!(!has_trailer("Edit\n\nTeammem-Source: o/r\n", key));
    }
}
