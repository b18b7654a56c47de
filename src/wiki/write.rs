//! The blocking half of the engine, its write side: a checked change becomes
//! one commit on the wiki's branch, published by compare-and-swap (a pushed
//! pack for an HTTP wiki, a ref transaction for a local one), or staged for
//! a job (`stage.rs`); the runner's marker verdicts are folded in by
//! `amend.rs`.
//!
//! Invariants (DESIGN §7): nothing is retried or rebased — a base that moved
//! is a conflict, never a silent merge; a deadline stops a write only before
//! its pack starts to leave ([`SendGate`]), and afterwards the caller is told
//! it may have landed; a write that changes nothing makes no commit.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use gix::ObjectId;
use gix::objs::tree::EntryKind;
use gix::protocol::transport::Service;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};

use super::confine::{Confined, Requested, WriteRules};
use super::error::{ErrorKind, WikiError};
use super::page_owners::PageOwners;
use super::patch::apply_replacements;
use super::publish::{BuiltCommit, DesiredPage, build_commit, encode_pack, persist_objects};
use super::receive_pack::{PushFailure, current_refs, push};
use super::remote::HttpRemote;
use super::tree::{IndexedPage, TreeIndex, commit_tree, has_commit, is_ancestor, read_blob};
use super::types::{CommitSpec, WriteResult, WriteStatus, WrittenPage};
use super::validate::{check_page_sizes, check_result_sizes, commit_message, parse_full_sha};

use super::mirror::{Backend, PageChange, WikiState};

/// Lets a call's deadline stop a write before its pack leaves, and tells the
/// caller afterwards whether it may have left.
#[derive(Default)]
pub(crate) struct SendGate(AtomicU8);

const GATE_PREPARING: u8 = 0;
const GATE_SENDING: u8 = 1;
const GATE_CANCELLED: u8 = 2;

impl SendGate {
    /// Called by the writer right before the first byte of the update leaves.
    fn begin_sending(&self) -> bool {
        self.0
            .compare_exchange(
                GATE_PREPARING,
                GATE_SENDING,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok()
    }

    /// Called on deadline: `true` when the update is now guaranteed never to leave.
    pub fn cancel(&self) -> bool {
        self.0
            .compare_exchange(
                GATE_PREPARING,
                GATE_CANCELLED,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok()
            || self.0.load(Ordering::SeqCst) == GATE_CANCELLED
    }
}

fn timeout_before_send() -> WikiError {
    WikiError::not_applied(
        ErrorKind::Timeout,
        "the call's deadline passed before the update was sent; nothing was written",
    )
}

/// Where a checked change goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteTarget {
    /// Published at once by compare-and-swap (the operator's writes, a
    /// writer run by hand).
    Publish,
    /// Committed on the base into the local object store and never sent: a
    /// job's writer stages each call and publishes them all as one commit
    /// ([`WikiState::publish_staged`]) when the job succeeds. `base_staged`:
    /// the base is the job's own staged commit, which no remote holds;
    /// otherwise it must be the branch's tip, as for a publish.
    Stage { base_staged: bool },
}

/// The commit a write goes on, read once.
pub(super) struct OnTip<'a> {
    pub(super) base: ObjectId,
    pub(super) base_tree: ObjectId,
    pub(super) base_index: &'a TreeIndex,
    pub(super) branch: &'a str,
    pub(super) mirror_tip: ObjectId,
}

impl WikiState {
    /// The whole write path. The caller holds the destination lock and has run
    /// every argument check.
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &self,
        spec: &CommitSpec,
        base: ObjectId,
        change: &PageChange,
        rules: &WriteRules,
        target: WriteTarget,
        gate: &SendGate,
        deadline: Instant,
    ) -> Result<WriteResult, WikiError> {
        let mut repo = self.repo();
        if !has_commit(&repo, base) || Self::known_branch(&repo).is_none() {
            let head = self.sync(deadline)?;
            if head.tip.is_none() {
                return Err(uninitialized());
            }
            repo = self.repo();
            if !has_commit(&repo, base) {
                return Err(WikiError::conflict(format!(
                    "expected_base {base} is not a commit of this wiki; read a fresh snapshot and use its sha"
                )));
            }
        }
        let (branch, mirror_tip) = Self::known_branch(&repo).ok_or_else(uninitialized)?;
        let base_tree = commit_tree(&repo, base)?;
        let base_index = self.cache.get_or_build(&repo, base_tree)?;
        let mut desired = desired_pages(&repo, &base_index, change)?;
        check_result_sizes(
            desired
                .iter()
                .map(|page| (page.path.as_str(), page.content.len())),
        )?;
        if desired
            .iter()
            .any(|page| !base_index.pages.contains_key(&page.path))
        {
            super::paths::check_tree_paths(
                base_index
                    .pages
                    .keys()
                    .map(String::as_str)
                    .chain(desired.iter().map(|page| page.path.as_str())),
            )
            .map_err(|clash| {
                WikiError::invalid_input(format!(
                    "the new pages clash with the wiki: {clash}; use the existing path"
                ))
            })?;
            let added: Vec<&str> = desired
                .iter()
                .filter(|page| !base_index.pages.contains_key(&page.path))
                .map(|page| page.path.as_str())
                .collect();
            super::paths::check_against_other_files(
                base_index.other_files.iter().map(String::as_str),
                &added,
            )
            .map_err(|clash| {
                WikiError::invalid_input(format!(
                    "a new page clashes with a file in the wiki that is not a page: {clash}; choose another path"
                ))
            })?;
        }

        let confined = confine_changes(
            &repo,
            base,
            &base_index,
            &desired,
            change,
            rules,
            &self.page_owners,
        )?;
        let mut changed_bytes = confined.changed;
        if let Some(amend) = &rules.amend {
            let rewritten = super::amend::amend_pages(
                &repo,
                &base_index,
                &mut desired,
                amend,
                self.search.page_facts(),
            )?;
            // The runner's rewrites spend the same budget as the caller's text.
            if let Some(max) = rules.max_changed_bytes
                && rules
                    .already_changed
                    .saturating_add(changed_bytes)
                    .saturating_add(rewritten)
                    > max
            {
                return Err(WikiError::limit_exceeded(format!(
                    "this write would change {changed_bytes} bytes of the wiki and the job's evidence-marker rewrites {rewritten} more, and this job has already changed {}; a job may change at most {max} bytes (agent.max_changed_bytes): write less in this call, or raise the limit",
                    rules.already_changed
                )));
            }
            changed_bytes += rewritten;
            // Each page stays within its size; the call's total is not checked
            // again: the runner's rewrites reach every page citing a moved
            // line (archives included), they are bounded by the citations a
            // job follows and by the budget above, and failing on them would
            // fail every later job the same way.
            check_page_sizes(
                desired
                    .iter()
                    .map(|page| (page.path.as_str(), page.content.len())),
            )?;
        }
        if rules.owner_trailer.is_some() {
            self.page_owners
                .remember_written(&base_index, &desired, &confined.owners);
        }
        let all_match_base = desired.iter().all(|page| page_matches(&base_index, page));
        if target == (WriteTarget::Stage { base_staged: true }) {
            // On the job's own staged commit: no remote holds it to compare with.
            if all_match_base {
                return Ok(no_change(base, &branch, &desired));
            }
            return self.stage(
                &repo,
                spec,
                base,
                base_tree,
                &base_index,
                &desired,
                &branch,
                changed_bytes,
            );
        }
        self.commit_on_tip(
            &repo,
            spec,
            OnTip {
                base,
                base_tree,
                base_index: &base_index,
                branch: &branch,
                mirror_tip,
            },
            &desired,
            changed_bytes,
            target,
            gate,
            deadline,
        )
    }

    /// The write's second half: checks that `on.base` is the branch's tip
    /// (or finds the pages already there), then commits `desired` on it,
    /// staged or published as `target` says.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn commit_on_tip(
        &self,
        repo: &gix::Repository,
        spec: &CommitSpec,
        on: OnTip<'_>,
        desired: &[DesiredPage],
        changed_bytes: u64,
        target: WriteTarget,
        gate: &SendGate,
        deadline: Instant,
    ) -> Result<WriteResult, WikiError> {
        let OnTip {
            base,
            base_tree,
            base_index,
            branch,
            mirror_tip,
        } = on;
        let branch = branch.to_owned();
        let all_match_base = desired.iter().all(|page| page_matches(base_index, page));
        let tip = match &self.backend {
            // The warm path: the mirror's tip is the base and there is something
            // to write. The push itself asks the server to compare and swap, so
            // reading the branch first would only cost a request; a moved branch
            // is found from the push's refusal and handled as below.
            // Only for a publish: a staged write sends nothing, so it must
            // learn here whether its base is still the tip.
            Backend::Http { .. }
                if mirror_tip == base && !all_match_base && target == WriteTarget::Publish =>
            {
                Some(base)
            }
            // Otherwise ask where the branch is now (a no-change answer must be
            // checked against the remote's tip, not the mirror's).
            Backend::Http { http } => {
                let advertised = current_refs(
                    http,
                    Service::ReceivePack,
                    deadline,
                    "reading the wiki's refs for a write",
                )?;
                let tip = advertised.branch_tip(&branch);
                if tip.is_none() && advertised.refs.is_empty() {
                    return Err(uninitialized());
                }
                tip
            }
            Backend::Local => Some(mirror_tip),
        };
        let Some(tip) = tip else {
            return Err(WikiError::conflict(format!(
                "the wiki branch {branch} no longer exists; read a fresh snapshot"
            )));
        };
        if tip != base {
            return self.no_change_on_descendant(repo, base, tip, &branch, desired, deadline);
        }
        if all_match_base {
            return Ok(no_change(base, &branch, desired));
        }
        if let WriteTarget::Stage { .. } = target {
            return self.stage(
                repo,
                spec,
                base,
                base_tree,
                base_index,
                desired,
                &branch,
                changed_bytes,
            );
        }

        let message = commit_message(spec);
        let built = build_commit(repo, base, base_tree, desired, &message, &spec.identity)?;
        match &self.backend {
            Backend::Http { http } => {
                let pack = encode_pack(&built.objects)?;
                if !gate.begin_sending() {
                    return Err(timeout_before_send());
                }
                let pushed = push(http, deadline, base, built.commit, &branch, &pack);
                match classify_push(http, pushed, base, built.commit, &branch, deadline)? {
                    PushVerdict::Published => {
                        self.record_published(repo, &built, &branch, base_index, desired)?;
                        Ok(outcome_result(
                            built.commit,
                            &branch,
                            desired,
                            changed_bytes,
                        ))
                    }
                    PushVerdict::Moved(now) => {
                        self.no_change_on_descendant(repo, base, now, &branch, desired, deadline)
                    }
                }
            }
            Backend::Local => {
                if !gate.begin_sending() {
                    return Err(timeout_before_send());
                }
                let published = self.publish_local(repo, &built, base, &branch)?;
                self.cache_new_index(&built, base_index, desired);
                Ok(outcome_result(published, &branch, desired, changed_bytes))
            }
        }
    }

    /// The tip moved past `base`: `no-change` if it descends from `base` and
    /// every requested page already matches there, otherwise `conflict`.
    fn no_change_on_descendant(
        &self,
        repo: &gix::Repository,
        base: ObjectId,
        tip: ObjectId,
        branch: &str,
        desired: &[DesiredPage],
        deadline: Instant,
    ) -> Result<WriteResult, WikiError> {
        let stale = || {
            WikiError::conflict(format!(
                "wiki base changed (expected {base}, the wiki is at {tip}); read a fresh snapshot and reconcile before writing"
            ))
        };
        let mut repo = repo.clone();
        if !has_commit(&repo, tip) {
            self.sync(deadline)?;
            repo = self.repo();
            if !has_commit(&repo, tip) {
                return Err(stale());
            }
        }
        if !is_ancestor(&repo, base, tip)? {
            return Err(stale());
        }
        let tip_index = self.cache.get_or_build(&repo, commit_tree(&repo, tip)?)?;
        if desired.iter().all(|page| page_matches(&tip_index, page)) {
            Ok(no_change(tip, branch, desired))
        } else {
            Err(stale())
        }
    }

    fn publish_local(
        &self,
        repo: &gix::Repository,
        built: &BuiltCommit,
        base: ObjectId,
        branch: &str,
    ) -> Result<ObjectId, WikiError> {
        persist_objects(repo, &built.objects)?;
        let name = format!("refs/heads/{branch}");
        let edit = RefEdit {
            change: Change::Update {
                log: LogChange {
                    mode: RefLog::AndReference,
                    force_create_reflog: false,
                    message: "teammem: update wiki".into(),
                },
                expected: PreviousValue::MustExistAndMatch(gix::refs::Target::Object(base)),
                new: gix::refs::Target::Object(built.commit),
            },
            name: name
                .as_str()
                .try_into()
                .map_err(|err| WikiError::internal("naming the wiki branch", err))?,
            deref: false,
        };
        let applied = repo.edit_reference(edit);
        let now = self
            .repo()
            .find_reference(name.as_str())
            .ok()
            .and_then(|r| r.target().try_id().map(|id| id.to_owned()));
        match (applied, now) {
            (Ok(_), Some(now)) if now == built.commit => Ok(built.commit),
            (Ok(_), _) => Err(WikiError::outcome_unknown(
                "the wiki branch was updated but then read back at another commit; read a fresh snapshot and compare the pages before writing again",
            )),
            (Err(_), Some(now)) if now != base => Err(conflict_after_rejection(base, now)),
            (Err(err), _) => {
                tracing::warn!(target: "teammem::wiki", detail = %err, "local ref update refused");
                Err(WikiError::not_applied(
                    ErrorKind::PublishRejected,
                    "the wiki repository refused the update; nothing was written",
                ))
            }
        }
    }

    /// After a confirmed publish: store the objects and the new tip in the
    /// mirror, so the next write on this tip needs no fetch.
    fn record_published(
        &self,
        repo: &gix::Repository,
        built: &BuiltCommit,
        branch: &str,
        base_index: &TreeIndex,
        desired: &[DesiredPage],
    ) -> Result<(), WikiError> {
        persist_objects(repo, &built.objects)?;
        let name = format!("refs/heads/{branch}");
        repo.edit_reference(RefEdit {
            change: Change::Update {
                log: LogChange {
                    mode: RefLog::AndReference,
                    force_create_reflog: false,
                    message: "teammem: published".into(),
                },
                expected: PreviousValue::Any,
                new: gix::refs::Target::Object(built.commit),
            },
            name: name
                .as_str()
                .try_into()
                .map_err(|err| WikiError::internal("naming the wiki branch", err))?,
            deref: false,
        })
        .map_err(|err| WikiError::internal("recording the published commit in the mirror", err))?;
        self.cache_new_index(built, base_index, desired);
        Ok(())
    }

    pub(super) fn cache_new_index(
        &self,
        built: &BuiltCommit,
        base_index: &TreeIndex,
        desired: &[DesiredPage],
    ) {
        let mut index = base_index.clone();
        for page in desired {
            index.pages.insert(
                page.path.clone(),
                IndexedPage {
                    blob: page.blob,
                    kind: page.kind,
                },
            );
        }
        self.cache.insert(built.tree, Arc::new(index));
    }
}

pub(super) fn uninitialized() -> WikiError {
    WikiError::not_applied(
        ErrorKind::NotFound,
        "the wiki has no pages yet; create its first page in GitHub's web interface, then read a snapshot",
    )
}

fn conflict_after_rejection(base: ObjectId, now: ObjectId) -> WikiError {
    WikiError::conflict(format!(
        "wiki base changed (expected {base}, the wiki is at {now}); read a fresh snapshot and reconcile before writing"
    ))
}

fn page_matches(index: &TreeIndex, page: &DesiredPage) -> bool {
    index
        .pages
        .get(&page.path)
        .is_some_and(|existing| existing.blob == page.blob)
}

fn no_change(tip: ObjectId, branch: &str, desired: &[DesiredPage]) -> WriteResult {
    WriteResult {
        status: WriteStatus::NoChange,
        sha: tip.to_string(),
        branch: branch.to_owned(),
        pages: written(desired),
        changed_bytes: 0,
    }
}

pub(super) fn outcome_result(
    commit: ObjectId,
    branch: &str,
    desired: &[DesiredPage],
    changed_bytes: u64,
) -> WriteResult {
    WriteResult {
        status: WriteStatus::Updated,
        sha: commit.to_string(),
        branch: branch.to_owned(),
        pages: written(desired),
        changed_bytes,
    }
}

/// Holds the pages that differ from the base to `rules`.
fn confine_changes(
    repo: &gix::Repository,
    base: ObjectId,
    base_index: &TreeIndex,
    desired: &[DesiredPage],
    change: &PageChange,
    rules: &WriteRules,
    page_owners: &PageOwners,
) -> Result<Confined, WikiError> {
    let requested = |path: &str| {
        change
            .patches
            .iter()
            .find(|patch| patch.path == path)
            .map_or(Requested::Replace, |patch| {
                Requested::Patch(&patch.replacements)
            })
    };
    let changing: Vec<(&DesiredPage, Requested<'_>)> = desired
        .iter()
        .filter(|page| !page_matches(base_index, page))
        .map(|page| (page, requested(&page.path)))
        .collect();
    super::confine::enforce(repo, base, base_index, &changing, rules, page_owners)
}

fn written(desired: &[DesiredPage]) -> Vec<WrittenPage> {
    desired
        .iter()
        .map(|page| WrittenPage {
            path: page.path.clone(),
            sha: page.blob.to_string(),
        })
        .collect()
}

/// What a push that did not fail outright did to the branch.
enum PushVerdict {
    /// The remote's tip is the new commit.
    Published,
    /// Refused because the branch is now at another commit than the base.
    Moved(ObjectId),
}

/// Turns the push answer into DESIGN §7's outcomes, re-reading the ref once.
fn classify_push(
    http: &HttpRemote,
    pushed: Result<super::receive_pack::PushReport, PushFailure>,
    base: ObjectId,
    new: ObjectId,
    branch: &str,
    deadline: Instant,
) -> Result<PushVerdict, WikiError> {
    let reread = || -> Option<Option<ObjectId>> {
        current_refs(
            http,
            Service::UploadPack,
            deadline,
            "verifying the wiki update",
        )
        .ok()
        .map(|refs| refs.branch_tip(branch))
    };
    let unknown = |now: Option<Option<ObjectId>>| {
        let seen = match now {
            Some(Some(tip)) if tip == new => {
                format!(
                    "the wiki is now at {tip}, this update's own commit, so it most likely landed"
                )
            }
            Some(Some(tip)) => {
                format!("the wiki is now at {tip}; this update's commit would be {new}")
            }
            Some(None) => "the wiki branch is gone".to_owned(),
            None => "the wiki could not be read back".to_owned(),
        };
        WikiError::outcome_unknown(format!(
            "the update was sent but its result was not confirmed; {seen}; read a fresh snapshot and compare the pages before writing again"
        ))
    };
    match pushed {
        Err(PushFailure::NotSent(err)) => Err(err),
        // DESIGN §7: a lost answer is `outcome_unknown` even when the re-read
        // shows the new commit; the message says what the re-read saw.
        Err(PushFailure::AnswerLost) => Err(unknown(reread())),
        Ok(report) if report.ref_ok => match reread() {
            Some(Some(tip)) if tip == new => Ok(PushVerdict::Published),
            now => Err(unknown(now)),
        },
        Ok(report) => {
            tracing::warn!(target: "teammem::wiki", reason = ?report.rejection, "wiki push rejected");
            match reread() {
                Some(Some(tip)) if tip == new => Ok(PushVerdict::Published),
                Some(Some(tip)) if tip != base => Ok(PushVerdict::Moved(tip)),
                _ => Err(WikiError::not_applied(
                    ErrorKind::PublishRejected,
                    "the wiki remote rejected the update; nothing was written",
                )),
            }
        }
    }
}

/// The resulting pages of a write or patch, checked against the base.
fn desired_pages(
    repo: &gix::Repository,
    base_index: &TreeIndex,
    change: &PageChange,
) -> Result<Vec<DesiredPage>, WikiError> {
    let mut desired = Vec::new();
    for page in &change.writes {
        let kind = base_index
            .pages
            .get(&page.path)
            .map_or(EntryKind::Blob, |existing| existing.kind);
        desired.push(DesiredPage::new(
            page.path.clone(),
            page.content.clone().into_bytes(),
            kind,
        )?);
    }
    for patch in &change.patches {
        let existing = base_index.pages.get(&patch.path).ok_or_else(|| {
            WikiError::not_found(format!(
                "the page {:?} does not exist at expected_base; patch only existing pages, or write the full page",
                patch.path
            ))
        })?;
        let expected = parse_full_sha(&patch.expected_sha, "expected_sha")?;
        if existing.blob != expected {
            return Err(WikiError::conflict(format!(
                "the page {:?} is at blob {} at expected_base, not expected_sha {expected}; re-read the page and rebuild the patch",
                patch.path, existing.blob
            )));
        }
        let original = String::from_utf8(read_blob(repo, existing.blob)?).map_err(|_| {
            WikiError::invalid_input(format!(
                "the page {:?} is not UTF-8 text and cannot be patched",
                patch.path
            ))
        })?;
        let patched = apply_replacements(&original, &patch.replacements).map_err(|violation| {
            WikiError::invalid_input(format!(
                "the patch for {:?} cannot be applied: {violation}",
                patch.path
            ))
        })?;
        desired.push(DesiredPage::new(
            patch.path.clone(),
            patched.into_bytes(),
            existing.kind,
        )?);
    }
    Ok(desired)
}
