//! A local-forge commit's changed-file manifest: the tree diff against its
//! first parent, with git's rename detection (50 % similar, no copies), so a
//! moved file is one [`FileStatus::Renamed`] entry naming its old path too,
//! and each file's added and removed line counts.
//!
//! Invariants: blobs and links only (no trees), sorted by path, at most
//! [`MAX_FILES`] (the caller learns it was cut); a blob over
//! [`MAX_DIFF_BLOB`] bytes, or a binary one, counts 0/0.

use gix::ObjectId;
use gix::bstr::ByteSlice;

use super::source_repo::{tree_of, unavailable};
use crate::forge::evidence::{ChangedFile, FileStatus, MAX_FILES, SourceError};

/// Blobs larger than this are not line-diffed (their counts are 0).
pub const MAX_DIFF_BLOB: usize = 1 << 20;

pub(super) fn blob_bytes(repo: &gix::Repository, id: ObjectId) -> Option<Vec<u8>> {
    let object = repo.find_object(id).ok()?;
    (object.kind == gix::object::Kind::Blob && object.data.len() <= MAX_DIFF_BLOB)
        .then(|| object.data.clone())
}

/// Added and removed line counts between two blob contents (0/0 for binary).
pub(super) fn line_counts(old: &[u8], new: &[u8]) -> (u64, u64) {
    use gix::diff::blob::{Algorithm, Diff, InternedInput};
    if old.contains(&0) || new.contains(&0) {
        return (0, 0);
    }
    let input = InternedInput::new(old, new);
    let diff = Diff::compute(Algorithm::Histogram, &input);
    (
        u64::from(diff.count_additions()),
        u64::from(diff.count_removals()),
    )
}

/// The changed files of `commit` against `parent` (the empty tree for a root
/// commit): blobs and links only, sorted by path, at most [`MAX_FILES`].
pub(super) fn manifest(
    repo: &gix::Repository,
    parent: Option<ObjectId>,
    commit: ObjectId,
) -> Result<(Vec<ChangedFile>, bool), SourceError> {
    use gix::object::tree::diff::ChangeDetached as Change;
    let old = tree_of(repo, parent)?;
    let new = tree_of(repo, Some(commit))?;
    let mut options = gix::diff::Options::default();
    options.track_rewrites(Some(gix::diff::Rewrites::default()));
    let changes = repo
        .diff_tree_to_tree(&old, &new, options)
        .map_err(|e| unavailable("diffing trees", e))?;
    let mut files = Vec::new();
    for change in changes {
        let mut previous_path = None;
        let (path, status, old_id, new_id) = match change {
            Change::Addition {
                location,
                entry_mode,
                id,
                ..
            } if !entry_mode.is_tree() => (location, FileStatus::Added, None, Some(id)),
            Change::Deletion {
                location,
                entry_mode,
                id,
                ..
            } if !entry_mode.is_tree() => (location, FileStatus::Removed, Some(id), None),
            Change::Modification {
                location,
                entry_mode,
                previous_id,
                id,
                ..
            } if !entry_mode.is_tree() => {
                (location, FileStatus::Modified, Some(previous_id), Some(id))
            }
            Change::Rewrite {
                source_location,
                source_id,
                location,
                entry_mode,
                id,
                copy: false,
                ..
            } if !entry_mode.is_tree() => {
                previous_path = Some(source_location.to_str_lossy().into_owned());
                (location, FileStatus::Renamed, Some(source_id), Some(id))
            }
            _ => continue,
        };
        let old_bytes = old_id
            .and_then(|id| blob_bytes(repo, id))
            .unwrap_or_default();
        let new_bytes = new_id
            .and_then(|id| blob_bytes(repo, id))
            .unwrap_or_default();
        let (additions, deletions) = line_counts(&old_bytes, &new_bytes);
        files.push(ChangedFile {
            path: path.to_str_lossy().into_owned(),
            status,
            additions,
            deletions,
            previous_path,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let truncated = files.len() > MAX_FILES;
    files.truncate(MAX_FILES);
    Ok((files, truncated))
}

/// Every path the diff from `old` to `new` (two commits) adds, removes or
/// changes, blobs and links only, without rename detection (a move names
/// both of its paths) and without reading any blob: what a range changed, for
/// [`crate::forge::evidence::direct_changes`].
pub(super) fn changed_paths(
    repo: &gix::Repository,
    old: ObjectId,
    new: ObjectId,
) -> Result<Vec<String>, SourceError> {
    use gix::object::tree::diff::ChangeDetached as Change;
    let old = tree_of(repo, Some(old))?;
    let new = tree_of(repo, Some(new))?;
    let mut options = gix::diff::Options::default();
    options.track_rewrites(None);
    let changes = repo
        .diff_tree_to_tree(&old, &new, options)
        .map_err(|e| unavailable("diffing trees", e))?;
    Ok(changes
        .into_iter()
        .filter_map(|change| match change {
            Change::Addition {
                location,
                entry_mode,
                ..
            }
            | Change::Deletion {
                location,
                entry_mode,
                ..
            }
            | Change::Modification {
                location,
                entry_mode,
                ..
            } if !entry_mode.is_tree() => Some(location.to_str_lossy().into_owned()),
            _ => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_counts_ignore_binary() {
        assert_eq!(line_counts(b"a\nb\n", b"a\nc\nd\n"), (2, 1));
        assert_eq!(line_counts(b"a\0", b"b"), (0, 0));
    }
}
