//! The blocking half of the engine, its mirror side: one `Wiki` per
//! destination owns its local repository (a bare mirror fetched through an
//! anonymous remote, or the local bare remote itself) and its tree-index
//! cache; `sync` brings the mirror to the remote's tip and `resolve_locked`
//! finds a read ref's commit. The write path is `write.rs`.
//!
//! Invariants: callers hold the destination's lock around `sync` (and
//! `write`); reads of known commits run without it; a mirror directory's name
//! is derived from the destination id alone, sanitized, so two destinations
//! never share one.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use gix::ObjectId;
use gix::protocol::transport::Service;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};

use super::error::WikiError;
use super::receive_pack::{AdvertisedRefs, current_refs};
use super::remote::HttpRemote;
use super::tree::{IndexCache, has_commit};
use super::types::{PagePatch, PageWrite};
use super::validate::RefSpec;

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
    pub search: Arc<super::search_cache::SearchCache>,
    /// Whose text each page version holds (`page_owners.rs`).
    pub page_owners: Arc<super::page_owners::PageOwners>,
    /// Each page blob's parsed evidence as of the last fact check.
    pub evidence: Arc<super::evidence_memo::EvidenceMemo>,
    pub lock: Arc<tokio::sync::Mutex<()>>,
    /// A file in the mirror that serializes fetch and publish across
    /// processes (the daemon and a writer child may share a mirror).
    pub mirror_lock: Option<PathBuf>,
}

/// Holds the cross-process mirror lock until dropped.
pub(crate) struct MirrorGuard(#[allow(dead_code)] Option<std::fs::File>);

/// One commit's worth of changes: pages written whole and pages patched
/// (their paths disjoint, checked by `validate::check_change`).
#[derive(Default)]
pub(crate) struct PageChange {
    pub writes: Vec<PageWrite>,
    pub patches: Vec<PagePatch>,
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
    pub(super) fn known_branch(repo: &gix::Repository) -> Option<(String, ObjectId)> {
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
