//! A job's staged writes: each call committed on the job's staged tip into
//! the local object store only, and all of them published as ONE commit on
//! the tip the first write was based on.
//!
//! Invariant: a staged commit is never sent anywhere; the published commit's
//! tree is exactly the staged tip's, its only parent the job's start, and it
//! goes out by the same compare-and-swap as any write (a moved branch is a
//! conflict, never a rebase).

use std::time::Instant;

use gix::ObjectId;

use super::error::{ErrorKind, WikiError};
use super::mirror::WikiState;
use super::publish::{DesiredPage, build_commit, persist_objects};
use super::tree::{TreeIndex, commit_tree, has_commit, is_ancestor, read_blob};
use super::types::{CommitSpec, WriteResult};
use super::validate::commit_message;
use super::write::{OnTip, SendGate, WriteTarget, outcome_result, uninitialized};

impl WikiState {
    /// Commits `desired` on `base` into the local object store only: a
    /// job's staged write, which no remote sees until [`Self::publish_staged`].
    #[allow(clippy::too_many_arguments)]
    pub(super) fn stage(
        &self,
        repo: &gix::Repository,
        spec: &CommitSpec,
        base: ObjectId,
        base_tree: ObjectId,
        base_index: &TreeIndex,
        desired: &[DesiredPage],
        branch: &str,
        changed_bytes: u64,
    ) -> Result<WriteResult, WikiError> {
        let message = commit_message(spec);
        let built = build_commit(repo, base, base_tree, desired, &message, &spec.identity)?;
        persist_objects(repo, &built.objects)?;
        self.cache_new_index(&built, base_index, desired);
        Ok(outcome_result(built.commit, branch, desired, changed_bytes))
    }

    /// Publishes a job's staged commits as ONE commit on `start` (the base
    /// of its first staged write) by compare-and-swap: its tree is the
    /// staged tip's. The rules were held when each write was staged, so none
    /// is checked again. A branch that moved past `start` is a conflict
    /// (unless every page already matches there); nothing is rebased.
    pub fn publish_staged(
        &self,
        spec: &CommitSpec,
        start: ObjectId,
        staged: ObjectId,
        gate: &SendGate,
        deadline: Instant,
    ) -> Result<WriteResult, WikiError> {
        let repo = self.repo();
        for (what, id) in [("start", start), ("staged tip", staged)] {
            if !has_commit(&repo, id) {
                return Err(WikiError::not_applied(
                    ErrorKind::InvalidInput,
                    format!(
                        "the job's {what} {id} is not in this wiki's store; the writer's staged changes are lost, so the job must run again"
                    ),
                ));
            }
        }
        if start != staged && !is_ancestor(&repo, start, staged)? {
            return Err(WikiError::not_applied(
                ErrorKind::InvalidInput,
                format!(
                    "the job's staged tip {staged} does not descend from its start {start}; the job must run again"
                ),
            ));
        }
        let (branch, mirror_tip) = Self::known_branch(&repo).ok_or_else(uninitialized)?;
        let start_tree = commit_tree(&repo, start)?;
        let start_index = self.cache.get_or_build(&repo, start_tree)?;
        let staged_index = self
            .cache
            .get_or_build(&repo, commit_tree(&repo, staged)?)?;
        if let Some(gone) = start_index
            .pages
            .keys()
            .find(|path| !staged_index.pages.contains_key(*path))
        {
            return Err(WikiError::internal(
                "publishing the job's staged changes",
                format!("the staged tree lost the page {gone}, which no write can remove"),
            ));
        }
        let mut desired = Vec::new();
        for (path, page) in &staged_index.pages {
            if start_index.pages.get(path) == Some(page) {
                continue;
            }
            desired.push(DesiredPage::new(
                path.clone(),
                read_blob(&repo, page.blob)?,
                page.kind,
            )?);
        }
        self.commit_on_tip(
            &repo,
            spec,
            OnTip {
                base: start,
                base_tree: start_tree,
                base_index: &start_index,
                branch: &branch,
                mirror_tip,
            },
            &desired,
            0,
            WriteTarget::Publish,
            gate,
            deadline,
        )
    }
}
