//! Reading wiki trees and commits out of a local repository (a mirror or a
//! local bare remote): the validated page index of a tree, page lookups, the
//! tree-to-tree change list that both diffs and publish packs are built from.
//! Only entries named `*.md` are pages; a tree with any such entry the page
//! rules reject is refused as a whole, while other files (images, attachments)
//! are never read as pages and never touched by a write.

use std::collections::BTreeMap;
use std::sync::Arc;

use gix::ObjectId;
use gix::objs::tree::EntryKind;

use super::error::{ErrorKind, WikiError};
use super::paths::{check_page_path, check_tree_paths};

/// One page of a validated tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedPage {
    pub blob: ObjectId,
    pub kind: EntryKind,
}

/// Every page of one tree, keyed by path, all paths valid and clash-free, and
/// the paths of the tree's other files (images, files not ending in `.md`,
/// links and submodules by such names): never read as pages, kept untouched by
/// writes, and remembered so a new page cannot clash with one of them.
#[derive(Debug, Clone, Default)]
pub struct TreeIndex {
    pub pages: BTreeMap<String, IndexedPage>,
    pub other_files: Vec<String>,
}

/// An error naming a path in the wiki that teammem will not read or write around.
fn unsupported_wiki_path(path: &str, why: impl std::fmt::Display) -> WikiError {
    WikiError::not_applied(
        ErrorKind::UpstreamError,
        format!(
            "the wiki contains {:?}, which teammem does not handle ({why}); rename or remove it in the wiki first",
            super::validate::shorten(path, 300)
        ),
    )
}

/// Whether a tree entry's name makes it a page candidate: exactly the `.md`
/// suffix the page-path rules require (other files are not pages at all).
fn names_a_page(name: &[u8]) -> bool {
    name.ends_with(b".md")
}

/// A page candidate's path as text; a page whose path is not UTF-8 is refused.
fn page_path_of(path: Vec<u8>) -> Result<String, WikiError> {
    String::from_utf8(path).map_err(|err| {
        unsupported_wiki_path(
            &String::from_utf8_lossy(err.as_bytes()),
            "the path is not UTF-8",
        )
    })
}

/// Builds and validates the page index of `tree`. Entries named like pages
/// must pass every page rule (or the whole tree is refused); other files are
/// only recorded.
pub fn index_tree(repo: &gix::Repository, tree: ObjectId) -> Result<TreeIndex, WikiError> {
    let mut index = TreeIndex::default();
    let mut pending: Vec<(Vec<u8>, ObjectId)> = vec![(Vec::new(), tree)];
    while let Some((prefix, tree_id)) = pending.pop() {
        let tree = repo
            .find_tree(tree_id)
            .map_err(|err| WikiError::internal("reading a wiki tree", err))?;
        for entry in tree.iter() {
            let entry = entry.map_err(|err| WikiError::internal("decoding a wiki tree", err))?;
            let mut path = prefix.clone();
            path.extend_from_slice(entry.filename().as_ref());
            let kind = entry.mode().kind();
            let id = entry.oid().to_owned();
            match kind {
                EntryKind::Tree => {
                    path.push(b'/');
                    pending.push((path, id));
                }
                _ if !names_a_page(entry.filename().as_ref()) => {
                    index
                        .other_files
                        .push(String::from_utf8_lossy(&path).into_owned());
                }
                EntryKind::Blob | EntryKind::BlobExecutable => {
                    let path = page_path_of(path)?;
                    check_page_path(&path)
                        .map_err(|violation| unsupported_wiki_path(&path, violation))?;
                    index.pages.insert(path, IndexedPage { blob: id, kind });
                }
                EntryKind::Link => {
                    let path = page_path_of(path)?;
                    return Err(unsupported_wiki_path(&path, "it is a symbolic link"));
                }
                EntryKind::Commit => {
                    let path = page_path_of(path)?;
                    return Err(unsupported_wiki_path(&path, "it is a submodule"));
                }
            }
        }
    }
    check_tree_paths(index.pages.keys().map(String::as_str)).map_err(|clash| {
        WikiError::not_applied(
            ErrorKind::UpstreamError,
            format!(
                "the wiki cannot be read safely: {clash}; rename one of them in the wiki first"
            ),
        )
    })?;
    Ok(index)
}

/// A small cache of validated indexes, by tree id: a tree never changes.
#[derive(Default)]
pub struct IndexCache {
    entries: std::sync::Mutex<Vec<(ObjectId, Arc<TreeIndex>)>>,
}

const INDEX_CACHE_SIZE: usize = 4;

impl IndexCache {
    pub fn get_or_build(
        &self,
        repo: &gix::Repository,
        tree: ObjectId,
    ) -> Result<Arc<TreeIndex>, WikiError> {
        if let Some(found) = self.get(tree) {
            return Ok(found);
        }
        let built = Arc::new(index_tree(repo, tree)?);
        self.insert(tree, built.clone());
        Ok(built)
    }

    fn get(&self, tree: ObjectId) -> Option<Arc<TreeIndex>> {
        let entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        entries
            .iter()
            .find(|(id, _)| *id == tree)
            .map(|(_, index)| index.clone())
    }

    pub fn insert(&self, tree: ObjectId, index: Arc<TreeIndex>) {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        entries.retain(|(id, _)| *id != tree);
        entries.insert(0, (tree, index));
        entries.truncate(INDEX_CACHE_SIZE);
    }
}

/// The tree of a commit; `not_found` when `commit` is not a commit here.
pub fn commit_tree(repo: &gix::Repository, commit: ObjectId) -> Result<ObjectId, WikiError> {
    let not_a_commit = || {
        WikiError::not_found(format!(
            "the commit {commit} does not exist in this wiki; read a fresh snapshot"
        ))
    };
    let object = repo
        .try_find_object(commit)
        .map_err(|err| WikiError::internal("looking up a commit", err))?;
    let object = object.ok_or_else(not_a_commit)?;
    let commit = object.try_into_commit().map_err(|_| not_a_commit())?;
    commit
        .tree_id()
        .map(|id| id.detach())
        .map_err(|err| WikiError::internal("reading a commit", err))
}

/// Whether `id` names a commit present in `repo`.
pub fn has_commit(repo: &gix::Repository, id: ObjectId) -> bool {
    matches!(repo.try_find_header(id), Ok(Some(header)) if header.kind() == gix::object::Kind::Commit)
}

/// Reads a blob's bytes.
pub fn read_blob(repo: &gix::Repository, blob: ObjectId) -> Result<Vec<u8>, WikiError> {
    let object = repo
        .find_object(blob)
        .map_err(|err| WikiError::internal("reading a page", err))?;
    Ok(object.detach().data.split_off(0))
}

/// One difference between two trees, by path (blobs only).
#[derive(Debug, Clone)]
pub struct PathChange {
    pub path: String,
    pub old: Option<ObjectId>,
    pub new: Option<ObjectId>,
}

/// Objects `new_tree` has that `old_tree` does not reach by the same path: the
/// changed trees (root included) and the new or changed blobs. Also reports
/// blob-level path changes. Equal subtrees are skipped without reading them.
pub struct TreeDelta {
    pub new_objects: Vec<ObjectId>,
    pub changes: Vec<PathChange>,
}

pub fn tree_delta(
    repo: &gix::Repository,
    old_tree: Option<ObjectId>,
    new_tree: ObjectId,
) -> Result<TreeDelta, WikiError> {
    let mut delta = TreeDelta {
        new_objects: Vec::new(),
        changes: Vec::new(),
    };
    walk_delta(repo, String::new(), old_tree, Some(new_tree), &mut delta)?;
    delta.changes.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(delta)
}

type Entries = BTreeMap<Vec<u8>, (EntryKind, ObjectId)>;

fn entries_of(repo: &gix::Repository, tree: Option<ObjectId>) -> Result<Entries, WikiError> {
    let mut entries = Entries::new();
    if let Some(tree) = tree {
        let tree = repo
            .find_tree(tree)
            .map_err(|err| WikiError::internal("reading a wiki tree", err))?;
        for entry in tree.iter() {
            let entry = entry.map_err(|err| WikiError::internal("decoding a wiki tree", err))?;
            entries.insert(
                entry.filename().to_vec(),
                (entry.mode().kind(), entry.oid().to_owned()),
            );
        }
    }
    Ok(entries)
}

fn walk_delta(
    repo: &gix::Repository,
    prefix: String,
    old: Option<ObjectId>,
    new: Option<ObjectId>,
    delta: &mut TreeDelta,
) -> Result<(), WikiError> {
    if old == new {
        return Ok(());
    }
    if let Some(new) = new {
        delta.new_objects.push(new);
    }
    let old_entries = entries_of(repo, old)?;
    let new_entries = entries_of(repo, new)?;
    let names: std::collections::BTreeSet<&Vec<u8>> =
        old_entries.keys().chain(new_entries.keys()).collect();
    for name in names {
        let path = format!("{prefix}{}", String::from_utf8_lossy(name));
        let before = old_entries.get(name).copied();
        let after = new_entries.get(name).copied();
        if before == after {
            continue;
        }
        let subtree = |entry: Option<(EntryKind, ObjectId)>| {
            entry
                .filter(|(kind, _)| *kind == EntryKind::Tree)
                .map(|(_, id)| id)
        };
        let blob = |entry: Option<(EntryKind, ObjectId)>| {
            entry
                .filter(|(kind, _)| *kind != EntryKind::Tree)
                .map(|(_, id)| id)
        };
        let (old_tree, new_tree) = (subtree(before), subtree(after));
        if old_tree.is_some() || new_tree.is_some() {
            walk_delta(repo, format!("{path}/"), old_tree, new_tree, delta)?;
        }
        let (old_blob, new_blob) = (blob(before), blob(after));
        if old_blob.is_some() || new_blob.is_some() {
            if let Some(new_blob) = new_blob
                && old_blob != Some(new_blob)
            {
                delta.new_objects.push(new_blob);
            }
            if old_blob != new_blob || before.map(|e| e.0) != after.map(|e| e.0) {
                delta.changes.push(PathChange {
                    path,
                    old: old_blob,
                    new: new_blob,
                });
            }
        }
    }
    Ok(())
}

/// Whether `ancestor` is reachable from `tip` (walks the history of `tip`).
pub fn is_ancestor(
    repo: &gix::Repository,
    ancestor: ObjectId,
    tip: ObjectId,
) -> Result<bool, WikiError> {
    if ancestor == tip {
        return Ok(true);
    }
    let walk = repo
        .rev_walk([tip])
        .all()
        .map_err(|err| WikiError::internal("walking the wiki history", err))?;
    for info in walk {
        let info = info.map_err(|err| WikiError::internal("walking the wiki history", err))?;
        if info.id == ancestor {
            return Ok(true);
        }
    }
    Ok(false)
}
