//! Whose text a page holds: teammem's alone, or a person's too. A page is
//! teammem's when every change to it since it was created carried the owner
//! trailer (`Teammem-Job`); one change without it (a person's edit, an
//! operator's write) makes it a person's page, and teammem's later patches
//! of its marker lines do not make it teammem's again: the person's text is
//! still there.
//!
//! Invariants:
//! - a page whose history cannot be read to its creation or to a person's
//!   change is a person's (fail closed);
//! - a verdict is remembered per (path, blob): the pages a write of
//!   teammem's produces inherit the verdict of the page they change (a new
//!   page is teammem's), so a job asks the history only about pages no
//!   teammem write of this node produced, and its cost does not grow with
//!   the wiki's history;
//! - a verdict is never remembered by blob alone: copying a person's page to
//!   a new page does not make the person's page teammem's;
//! - remembered verdicts are shared with this node's other processes through
//!   `<mirrors>/<destination>.page-owners` (a `record_file.rs`); a person's
//!   verdict, once remembered, is never overridden.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;

use gix::ObjectId;

use super::error::WikiError;
use super::publish::DesiredPage;
use super::record_file::{CHECKSUM_BYTES, RecordFile};
use super::tree::{TreeIndex, commit_tree};

/// Verdicts remembered at most (about 60 bytes each).
pub const MAX_REMEMBERED_OWNERS: usize = 1 << 16;

/// Whose text a page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// Every change since the page was created was teammem's.
    Teammem,
    /// A change without the owner trailer: that commit, when it was found.
    Person(Option<ObjectId>),
}

/// The remembered owners of one wiki's page versions.
#[derive(Default)]
pub struct PageOwners {
    known: Mutex<HashMap<ObjectId, Owner>>,
    file: Option<RecordFile>,
}

/// One record's body: key, the person's commit (zeros: none found), verdict.
const BODY_BYTES: usize = 20 + 20 + 1;

/// The key of a page version: the hash of its path and blob id (a git blob
/// id of that text, so nobody can make two versions share one).
fn key(path: &str, blob: ObjectId) -> ObjectId {
    let text = format!("{path}\0{blob}");
    gix::objs::compute_hash(
        gix::hash::Kind::Sha1,
        gix::objs::Kind::Blob,
        text.as_bytes(),
    )
    .unwrap_or_else(|_| ObjectId::null(gix::hash::Kind::Sha1))
}

impl PageOwners {
    /// Owners shared through `file` with this node's other processes.
    pub fn persisted(file: PathBuf) -> Self {
        PageOwners {
            known: Mutex::default(),
            file: Some(RecordFile::new(
                file,
                BODY_BYTES + CHECKSUM_BYTES,
                MAX_REMEMBERED_OWNERS,
            )),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectId, Owner>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn load(&self) {
        let Some(bodies) = self.file.as_ref().and_then(RecordFile::read_once) else {
            return;
        };
        let mut known = self.lock();
        for body in bodies {
            if let Some((key, owner)) = decode(&body) {
                insert(&mut known, key, owner);
            }
        }
    }

    fn recall(&self, path: &str, blob: ObjectId) -> Option<Owner> {
        self.load();
        self.lock().get(&key(path, blob)).copied()
    }

    /// Remembers that `path` at `blob` is `owner`'s (a person's verdict is
    /// never overridden).
    pub fn remember(&self, path: &str, blob: ObjectId, owner: Owner) {
        self.load();
        let key = key(path, blob);
        {
            let mut known = self.lock();
            if known.get(&key) == Some(&owner) || matches!(known.get(&key), Some(Owner::Person(_)))
            {
                return;
            }
            if known.len() >= MAX_REMEMBERED_OWNERS {
                known.clear();
            }
            insert(&mut known, key, owner);
        }
        if let Some(file) = &self.file {
            file.append(&encode(key, owner));
        }
    }

    /// The pages a write of teammem's produces inherit the owner of the
    /// pages they change (a new page is teammem's), so the next job need not
    /// walk the history to learn whose they are. Pages whose owner was not
    /// looked at (protected ones, those only the runner's rewrites changed)
    /// are left to the walk.
    pub fn remember_written(
        &self,
        base_index: &TreeIndex,
        desired: &[DesiredPage],
        owners: &BTreeMap<String, Owner>,
    ) {
        for page in desired {
            let owner = match base_index.pages.get(&page.path) {
                None => Owner::Teammem,
                Some(existing) if existing.blob == page.blob => continue,
                Some(_) => match owners.get(&page.path) {
                    Some(owner) => *owner,
                    None => continue,
                },
            };
            self.remember(&page.path, page.blob, owner);
        }
    }

    /// The owner of each of `pages` (path, blob at `tip`), from what is
    /// remembered, else from the wiki's history (one walk for all of them,
    /// newest first, back to each page's creation or a person's change).
    pub fn owners(
        &self,
        repo: &gix::Repository,
        tip: ObjectId,
        pages: &[(&str, ObjectId)],
        trailer: &str,
    ) -> Result<BTreeMap<String, Owner>, WikiError> {
        let mut found = BTreeMap::new();
        let mut pending = Vec::new();
        for &(path, blob) in pages {
            match self.recall(path, blob) {
                Some(owner) => {
                    found.insert(path.to_owned(), owner);
                }
                None => pending.push((path, blob)),
            }
        }
        if pending.is_empty() {
            return Ok(found);
        }
        let walked = walk(self, repo, tip, pending.iter().map(|(p, _)| *p), trailer)?;
        for (path, blob) in pending {
            // A page the walk did not settle is a person's.
            let owner = walked.get(path).copied().unwrap_or(Owner::Person(None));
            self.remember(path, blob, owner);
            found.insert(path.to_owned(), owner);
        }
        Ok(found)
    }
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

fn insert(known: &mut HashMap<ObjectId, Owner>, key: ObjectId, owner: Owner) {
    if !matches!(known.get(&key), Some(Owner::Person(_))) {
        known.insert(key, owner);
    }
}

/// Walks the history from `tip` (newest first, every parent) and settles
/// each of `paths` at the first change that says whose it is: a version
/// remembered, a change without the trailer (a person's), or teammem's
/// creation of the page.
fn walk<'a>(
    owners: &PageOwners,
    repo: &gix::Repository,
    tip: ObjectId,
    paths: impl Iterator<Item = &'a str>,
    trailer: &str,
) -> Result<BTreeMap<&'a str, Owner>, WikiError> {
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
    let mut pending: Vec<&str> = paths.collect();
    let mut settled = BTreeMap::new();
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
        let mut ours = None;
        let mut still = Vec::with_capacity(pending.len());
        for path in pending {
            let here = entry_of(here_tree, path)?;
            let mut before = Vec::with_capacity(parent_trees.len());
            for parent in &parent_trees {
                before.push(entry_of(*parent, path)?);
            }
            if before.contains(&here) {
                // Not changed here (on a merge: it came from a parent).
                still.push(path);
                continue;
            }
            if let Some(blob) = here
                && let Some(owner) = owners.recall(path, blob)
            {
                settled.insert(path, owner);
                continue;
            }
            let ours = *ours.get_or_insert_with(|| {
                repo.find_commit(info.id)
                    .map(|commit| has_trailer(&commit.message_raw_sloppy().to_string(), trailer))
                    .unwrap_or(false)
            });
            if !ours {
                settled.insert(path, Owner::Person(Some(info.id)));
            } else if before.iter().all(Option::is_none) {
                // Created by teammem (or re-created after a deletion).
                settled.insert(path, Owner::Teammem);
            } else {
                // Teammem changed it: whose it is depends on what it changed.
                still.push(path);
            }
        }
        pending = still;
    }
    Ok(settled)
}

fn encode(key: ObjectId, owner: Owner) -> [u8; BODY_BYTES] {
    let mut body = [0u8; BODY_BYTES];
    body[..20].copy_from_slice(key.as_bytes());
    if let Owner::Person(commit) = owner {
        if let Some(commit) = commit {
            body[20..40].copy_from_slice(commit.as_bytes());
        }
        body[40] = 1;
    }
    body
}

fn decode(body: &[u8]) -> Option<(ObjectId, Owner)> {
    if body.len() != BODY_BYTES || body[40] > 1 {
        return None;
    }
    let key = ObjectId::try_from(&body[..20]).ok()?;
    let owner = if body[40] == 0 {
        Owner::Teammem
    } else {
        let commit = ObjectId::try_from(&body[20..40]).ok()?;
        Owner::Person((!commit.is_null()).then_some(commit))
    };
    Some((key, owner))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn verdicts_round_trip_and_a_persons_is_never_overridden() {
        let blob = ObjectId::from_hex(SHA.as_bytes()).unwrap();
        for owner in [
            Owner::Teammem,
            Owner::Person(None),
            Owner::Person(Some(blob)),
        ] {
            let body = encode(key("A.md", blob), owner);
            assert_eq!(decode(&body), Some((key("A.md", blob), owner)));
        }
        assert_ne!(key("A.md", blob), key("B.md", blob));

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("w.page-owners");
        let owners = PageOwners::persisted(file.clone());
        owners.remember("A.md", blob, Owner::Person(Some(blob)));
        owners.remember("A.md", blob, Owner::Teammem);
        owners.remember("B.md", blob, Owner::Teammem);
        // Another process reads the same verdicts.
        let other = PageOwners::persisted(file);
        assert_eq!(other.recall("A.md", blob), Some(Owner::Person(Some(blob))));
        assert_eq!(other.recall("B.md", blob), Some(Owner::Teammem));
        assert_eq!(other.recall("C.md", blob), None);
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
