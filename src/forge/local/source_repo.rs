//! Opening a local source for the runner's reads, and the checks every read
//! starts with: the repository at `local_path`, its default branch (the
//! target of `HEAD`), a full sha checked to name a commit of it, a commit's
//! tree; and how a failed read is worded.
//!
//! Invariant: a source that is gone is [`SourceError::Invalid`] (retrying
//! cannot bring it back), one that cannot be read now is
//! [`SourceError::Unavailable`]; a sha that is not a commit of the
//! repository is [`SourceError::Rejected`], never read as anything else.

use std::path::Path;

use gix::ObjectId;

use crate::forge::evidence::{self, SourceError};

pub(super) fn unavailable(what: &str, e: impl std::fmt::Display) -> SourceError {
    SourceError::Unavailable(format!("{what} failed in the local source repository: {e}"))
}

pub(super) fn open(path: &Path) -> Result<gix::Repository, SourceError> {
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
pub(super) fn default_branch(repo: &gix::Repository) -> Result<(String, ObjectId), SourceError> {
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

pub(super) fn commit_id(
    repo: &gix::Repository,
    field: &str,
    sha: &str,
) -> Result<ObjectId, SourceError> {
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
