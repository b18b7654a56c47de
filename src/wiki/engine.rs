//! The blocking half of the engine: one `Wiki` per destination owns its local
//! repository (a bare mirror fetched through an anonymous remote, or the local
//! bare remote itself), its tree-index cache and the write path. Callers hold
//! the destination's lock around `sync` and `write`; reads of known commits run
//! without it. Outcomes follow DESIGN §7: nothing is retried or rebased.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::Instant;

use gix::ObjectId;
use gix::objs::tree::EntryKind;
use gix::protocol::transport::Service;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};

use super::confine::{Requested, WriteRules};
use super::error::{ErrorKind, WikiError};
use super::patch::apply_replacements;
use super::publish::{BuiltCommit, DesiredPage, build_commit, encode_pack, persist_objects};
use super::receive_pack::{AdvertisedRefs, PushFailure, current_refs, push};
use super::remote::HttpRemote;
use super::tree::{
    IndexCache, IndexedPage, TreeIndex, commit_tree, has_commit, is_ancestor, read_blob,
};
use super::types::{CommitSpec, PagePatch, PageWrite, WriteResult, WriteStatus, WrittenPage};
use super::validate::{RefSpec, check_result_sizes, commit_message, parse_full_sha};

/// Where a destination's objects live and how updates reach it.
pub(crate) enum Backend {
    Http { http: HttpRemote },
    Local,
}

/// The remote's default branch and tip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteHead {
    pub branch: Option<String>,
    pub tip: Option<ObjectId>,
}

/// Per-destination state.
pub(crate) struct WikiState {
    pub id: String,
    pub backend: Backend,
    pub repo: gix::ThreadSafeRepository,
    pub cache: Arc<IndexCache>,
    pub lock: Arc<tokio::sync::Mutex<()>>,
    /// A file in the mirror that serializes fetch and publish across
    /// processes (the daemon and a writer child may share a mirror).
    pub mirror_lock: Option<PathBuf>,
}

/// Holds the cross-process mirror lock until dropped.
pub(crate) struct MirrorGuard(#[allow(dead_code)] Option<std::fs::File>);

/// The write requests the engine knows.
pub(crate) enum PageChange {
    Write(Vec<PageWrite>),
    Patch(Vec<PagePatch>),
}

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

impl WikiState {
    /// Takes the cross-process lock of an HTTP mirror (a no-op for a local
    /// remote, whose ref transactions already compare and swap).
    pub fn lock_mirror(&self) -> Result<MirrorGuard, WikiError> {
        let Some(path) = &self.mirror_lock else {
            return Ok(MirrorGuard(None));
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|err| WikiError::internal("opening the mirror lock", err))?;
        file.lock()
            .map_err(|err| WikiError::internal("locking the mirror", err))?;
        Ok(MirrorGuard(Some(file)))
    }

    pub fn repo(&self) -> gix::Repository {
        self.repo.to_thread_local()
    }

    /// The default branch the local repository knows (its `HEAD` symref), if
    /// that branch exists locally.
    fn known_branch(repo: &gix::Repository) -> Option<(String, ObjectId)> {
        let head = repo.find_reference("HEAD").ok()?;
        let target = head.target().try_name()?.as_bstr().to_string();
        let branch = target.strip_prefix("refs/heads/")?.to_owned();
        let tip = repo
            .find_reference(target.as_str())
            .ok()?
            .target()
            .try_id()?
            .to_owned();
        Some((branch, tip))
    }

    /// Brings the local repository up to the remote and reports its `HEAD`.
    /// Callers hold the destination lock.
    pub fn sync(&self, deadline: Instant) -> Result<RemoteHead, WikiError> {
        match &self.backend {
            Backend::Local => {
                let repo = self.repo();
                let head = repo
                    .find_reference("HEAD")
                    .map_err(|err| WikiError::internal("reading the wiki HEAD", err))?;
                let branch = head
                    .target()
                    .try_name()
                    .map(|name| name.as_bstr().to_string())
                    .and_then(|name| name.strip_prefix("refs/heads/").map(str::to_owned));
                let tip = Self::known_branch(&repo).map(|(_, tip)| tip);
                Ok(RemoteHead { branch, tip })
            }
            Backend::Http { http } => self.fetch(http, deadline),
        }
    }

    fn fetch(&self, http: &HttpRemote, deadline: Instant) -> Result<RemoteHead, WikiError> {
        use gix::remote::Direction;
        let repo = self.repo();
        self.load_objects_of_local_branches(&repo);
        let transport = http.connect(gix::protocol::transport::Protocol::V1, deadline)?;
        let internal = |err: gix::Error| WikiError::internal("preparing the wiki fetch", err);
        let remote = repo
            .remote_at(http.base.as_str())
            .map_err(internal)?
            .with_fetch_tags(gix::remote::fetch::Tags::None)
            .with_refspecs(["+refs/heads/*:refs/heads/*", "HEAD"], Direction::Fetch)
            .map_err(internal)?;
        let connection = remote
            .to_connection_with_transport(transport)
            // Never ask credential helpers: the token (if any) is already a header.
            .with_credentials(|_| Ok(None));
        let interrupt = AtomicBool::new(false);
        let prepared = connection.prepare_fetch(gix::progress::Discard, Default::default());
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(err) => {
                // An empty repository advertises nothing to map; tell it apart.
                let refs = current_refs(
                    http,
                    Service::UploadPack,
                    deadline,
                    "reading the wiki's refs",
                )?;
                if refs
                    .refs
                    .iter()
                    .all(|r| matches!(r, gix::protocol::handshake::Ref::Unborn { .. }))
                {
                    let (branch, _) = refs.head();
                    return Ok(RemoteHead { branch, tip: None });
                }
                return Err(super::receive_pack::classify_transport_error(
                    "fetching the wiki",
                    &err,
                ));
            }
        };
        let advertised = AdvertisedRefs {
            refs: prepared.ref_map().remote_refs.clone(),
        };
        let (branch, tip) = advertised.head();
        if tip.is_none()
            && !advertised
                .refs
                .iter()
                .any(|r| !matches!(r, gix::protocol::handshake::Ref::Unborn { .. }))
        {
            // An empty repository: nothing to fetch, and gix would refuse to try.
            return Ok(RemoteHead { branch, tip: None });
        }
        prepared
            .receive(gix::progress::Discard, &interrupt)
            .map_err(|err| {
                super::receive_pack::classify_transport_error("fetching the wiki", &err)
            })?;
        if let Some(branch) = &branch {
            self.point_head_at(&repo, branch)?;
        }
        Ok(RemoteHead { branch, tip })
    }

    /// gix negotiates without refreshing the object store, so packs another
    /// process (or store) added to this mirror would look missing. Looking the
    /// branch tips up once, with refresh, loads them.
    fn load_objects_of_local_branches(&self, repo: &gix::Repository) {
        let Ok(references) = repo.references() else {
            return;
        };
        let Ok(branches) = references.local_branches() else {
            return;
        };
        for branch in branches.flatten() {
            if let Some(id) = branch.target().try_id() {
                repo.has_object(id);
            }
        }
    }

    /// Makes the mirror's `HEAD` name the remote's default branch, so later
    /// writes know the branch without asking the remote.
    fn point_head_at(&self, repo: &gix::Repository, branch: &str) -> Result<(), WikiError> {
        let target = format!("refs/heads/{branch}");
        let current = repo.find_reference("HEAD").ok().and_then(|head| {
            head.target()
                .try_name()
                .map(|name| name.as_bstr().to_string())
        });
        if current.as_deref() == Some(target.as_str()) {
            return Ok(());
        }
        let name = gix::refs::FullName::try_from(target.as_str())
            .map_err(|err| WikiError::internal("naming the wiki branch", err))?;
        repo.edit_reference(RefEdit {
            change: Change::Update {
                log: LogChange {
                    mode: RefLog::AndReference,
                    force_create_reflog: false,
                    message: "teammem: remote HEAD".into(),
                },
                expected: PreviousValue::Any,
                new: gix::refs::Target::Symbolic(name),
            },
            name: "HEAD".try_into().expect("HEAD is a valid ref name"),
            deref: false,
        })
        .map_err(|err| WikiError::internal("recording the wiki's default branch", err))?;
        Ok(())
    }

    /// Resolves a read ref to a commit present locally. `HEAD` always asks the
    /// remote; a sha the local repository already has needs no network.
    /// Returns `None` for `HEAD` of an empty wiki.
    pub fn resolve_locked(
        &self,
        spec: RefSpec,
        deadline: Instant,
    ) -> Result<Option<ObjectId>, WikiError> {
        match spec {
            RefSpec::Head => {
                let head = self.sync(deadline)?;
                Ok(head.tip)
            }
            RefSpec::Commit(id) => {
                if !has_commit(&self.repo(), id) {
                    self.sync(deadline)?;
                }
                if has_commit(&self.repo(), id) {
                    Ok(Some(id))
                } else {
                    Err(WikiError::not_found(format!(
                        "the commit {id} is not part of this wiki; use HEAD or a sha from the wiki's history"
                    )))
                }
            }
        }
    }

    /// The whole write path. The caller holds the destination lock and has run
    /// every argument check.
    pub fn write(
        &self,
        spec: &CommitSpec,
        base: ObjectId,
        change: &PageChange,
        rules: &WriteRules,
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
        let desired = desired_pages(&repo, &base_index, change)?;
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

        let changed_bytes = confine_changes(&repo, base, &base_index, &desired, change, rules)?;
        let all_match_base = desired.iter().all(|page| page_matches(&base_index, page));
        let tip = match &self.backend {
            // The warm path: the mirror's tip is the base and there is something
            // to write. The push itself asks the server to compare and swap, so
            // reading the branch first would only cost a request; a moved branch
            // is found from the push's refusal and handled as below.
            Backend::Http { .. } if mirror_tip == base && !all_match_base => Some(base),
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
            return self.no_change_on_descendant(&repo, base, tip, &branch, &desired, deadline);
        }
        if all_match_base {
            return Ok(no_change(base, &branch, &desired));
        }

        let message = commit_message(spec);
        let built = build_commit(&repo, base, base_tree, &desired, &message, &spec.identity)?;
        match &self.backend {
            Backend::Http { http } => {
                let pack = encode_pack(&built.objects)?;
                if !gate.begin_sending() {
                    return Err(timeout_before_send());
                }
                let pushed = push(http, deadline, base, built.commit, &branch, &pack);
                match classify_push(http, pushed, base, built.commit, &branch, deadline)? {
                    PushVerdict::Published => {
                        self.record_published(&repo, &built, &branch, &base_index, &desired)?;
                        Ok(outcome_result(
                            built.commit,
                            &branch,
                            &desired,
                            changed_bytes,
                        ))
                    }
                    PushVerdict::Moved(now) => {
                        self.no_change_on_descendant(&repo, base, now, &branch, &desired, deadline)
                    }
                }
            }
            Backend::Local => {
                if !gate.begin_sending() {
                    return Err(timeout_before_send());
                }
                let published = self.publish_local(&repo, &built, base, &branch)?;
                self.cache_new_index(&built, &base_index, &desired);
                Ok(outcome_result(published, &branch, &desired, changed_bytes))
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

    fn cache_new_index(
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

fn uninitialized() -> WikiError {
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

fn outcome_result(
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

/// Holds the pages that differ from the base to `rules`; the bytes they change.
fn confine_changes(
    repo: &gix::Repository,
    base: ObjectId,
    base_index: &TreeIndex,
    desired: &[DesiredPage],
    change: &PageChange,
    rules: &WriteRules,
) -> Result<u64, WikiError> {
    let requested = |path: &str| match change {
        PageChange::Write(_) => Requested::Replace,
        PageChange::Patch(patches) => patches
            .iter()
            .find(|patch| patch.path == path)
            .map_or(Requested::Replace, |patch| {
                Requested::Patch(&patch.replacements)
            }),
    };
    let changing: Vec<(&DesiredPage, Requested<'_>)> = desired
        .iter()
        .filter(|page| !page_matches(base_index, page))
        .map(|page| (page, requested(&page.path)))
        .collect();
    super::confine::enforce(repo, base, base_index, &changing, rules)
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
    match change {
        PageChange::Write(pages) => {
            for page in pages {
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
        }
        PageChange::Patch(patches) => {
            for patch in patches {
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
                let original =
                    String::from_utf8(read_blob(repo, existing.blob)?).map_err(|_| {
                        WikiError::invalid_input(format!(
                            "the page {:?} is not UTF-8 text and cannot be patched",
                            patch.path
                        ))
                    })?;
                let patched =
                    apply_replacements(&original, &patch.replacements).map_err(|violation| {
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
        }
    }
    Ok(desired)
}

/// The mirror directory for a destination id: readable, collision-free.
pub(crate) fn mirror_dir_name(destination_id: &str) -> String {
    use sha2::Digest;
    let readable: String = destination_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let digest = sha2::Sha256::digest(destination_id.as_bytes());
    format!(
        "{}-{}.git",
        readable.trim_start_matches(['_', '-']),
        &hex::encode(digest)[..12]
    )
}

/// Opens (creating if needed) the bare mirror at `path`, ignoring all global
/// and user git configuration.
pub(crate) fn open_mirror(path: &PathBuf) -> Result<gix::ThreadSafeRepository, WikiError> {
    if !path.join("HEAD").exists() {
        std::fs::create_dir_all(path)
            .map_err(|err| WikiError::internal("creating the wiki mirror", err))?;
        gix::init_bare(path).map_err(|err| WikiError::internal("creating the wiki mirror", err))?;
    }
    open_isolated(path)
}

pub(crate) fn open_isolated(path: &PathBuf) -> Result<gix::ThreadSafeRepository, WikiError> {
    gix::ThreadSafeRepository::open_opts(path, gix::open::Options::isolated())
        .map_err(|err| WikiError::internal("opening the wiki repository", err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_names_are_sanitized_and_distinct() {
        let a = mirror_dir_name("octo/app");
        let b = mirror_dir_name("octo_app");
        assert!(a.starts_with("octo_app-") && a.ends_with(".git"), "{a}");
        assert_ne!(a, b);
        let hostile = mirror_dir_name("../../etc/passwd");
        assert!(
            !hostile.contains('/') && !hostile.starts_with('.'),
            "{hostile}"
        );
    }
}
