//! Single files, file heads, directory listings and a pull request's patches
//! of a local source at a commit, read with gix: the writer's source tools
//! and the builtin agent's reads go through here (via `SourceForge`).
//!
//! Invariants:
//! - a file is read only at a commit the caller has checked is inside the
//!   job's range, and only as a blob of that commit's tree at a
//!   repository-relative path (no `..`, no empty segment);
//! - every read is bounded: a file past its byte limit or not UTF-8 is
//!   [`SourceError::Invalid`], a head reads at most [`MAX_HEAD_BLOB`]-byte
//!   blobs, a listing visits at most [`MAX_TREE_VISITS`] entries and says
//!   when it was cut; a path that is not a file there is `Ok(None)`.

use std::path::Path;

use gix::bstr::ByteSlice;

use super::manifest::{blob_bytes, manifest};
use super::source_repo::{commit_id, open, tree_of, unavailable};
use crate::forge::evidence::{self, ChangedFile, SourceError};

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
/// A submodule is listed as one, with the commit it pins.
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
            let (kind, commit) = if mode.is_tree() {
                if recursive {
                    subtrees.push((relative, entry.object_id()));
                    continue;
                }
                (EntryKind::Directory, None)
            } else if mode.is_blob_or_symlink() {
                (EntryKind::File, None)
            } else if mode.is_commit() {
                (EntryKind::Submodule, Some(entry.object_id().to_string()))
            } else {
                continue;
            };
            let entry = TreeEntry {
                path: prefix(&relative),
                kind,
                commit,
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
