//! The wiki engine: the team memory as a git repository, read and written
//! through gix (the only module that imports it). It knows nothing of jobs,
//! HTTP APIs or GitHub's REST API; it takes a destination (a smart-HTTP URL with
//! an optional token, or a local bare repository) and enforces DESIGN §7:
//! bounded reads, checked writes, one compare-and-swap publish per write with
//! outcomes `updated` / `no-change` / `conflict` / `publish_rejected` /
//! `outcome_unknown`, a deadline per call, and no credential ever on disk or in
//! a result.
//!
//! Blocking gix work runs in `spawn_blocking`. Fetch and publish of one
//! destination are serialized by an async mutex; reads of known commits run
//! concurrently.

pub mod confine;
pub mod context; // get_context: what to know before changing some files, from one commit's pages
mod create; // a new local bare wiki with its first pages (local forge, the demo)
mod mirror; // the engine's mirror side: per-destination repository, fetch, resolve
mod write; // the engine's write side: a checked change as one commit, compare-and-swap publish
mod amend; // the runner's marker verdicts folded into a job's write, Stale.md re-rendered
mod stage; // a job's staged writes and their one publish
pub mod error;
pub mod fold; // a page with its teammem comments folded out and its citations as data
pub mod patch;
pub mod paths;
mod publish;
mod evidence_memo; // each page blob's parsed evidence as of the last fact check, so the next parses only changed pages
mod page_facts; // what a page blob says (size, evidence, stale), remembered per blob for whole-wiki scans
mod page_owners; // whose text a page holds (teammem's alone or a person's too), remembered per page version
mod record_file; // fixed-size checksummed records this node's processes share (page facts, page owners)
mod read;
pub mod search; // ranked search over one tree's pages (public for bench/rank)
pub mod search_cache; // the indexes of the last trees searched: one build per tree, waiters share it
mod build_permits; // at most 2 index builds at once in a process, waiters give up at their deadline
pub mod query; // how text becomes search terms: stop words, stems, paths
mod receive_pack;
pub mod remote;
mod smart_http;
mod tree;
pub mod types;
pub mod validate;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gix::ObjectId;

pub use confine::{Amend, WriteRules};
pub use create::create_local_wiki;
pub use error::{ErrorKind, Outcome, WikiError};
use mirror::{Backend, PageChange, WikiState};
pub use remote::{Destination, Remote, Secret};
pub use types::*;
use validate::RefSpec;
use write::{SendGate, WriteTarget};

/// Default deadline of one call (DESIGN §7).
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);

/// What every handle of one destination shares.
struct Shared {
    location: PathBuf,
    repo: gix::ThreadSafeRepository,
    lock: Arc<tokio::sync::Mutex<()>>,
    cache: Arc<tree::IndexCache>,
    search: Arc<search_cache::SearchCache>,
    page_owners: Arc<page_owners::PageOwners>,
    evidence: Arc<evidence_memo::EvidenceMemo>,
}

/// Owns the mirrors (one bare repository per HTTP destination under
/// `mirrors_dir`), the per-destination locks and the HTTP client all remotes
/// share.
pub struct WikiStore {
    mirrors_dir: PathBuf,
    deadline: Duration,
    shared: std::sync::Mutex<HashMap<String, Arc<Shared>>>,
    /// One HTTP client (connection pool, TLS set-up) for every remote.
    http_clients: Arc<smart_http::HttpClients>,
}

impl WikiStore {
    /// A store keeping its mirrors under `mirrors_dir` (created on first use).
    pub fn new(mirrors_dir: impl Into<PathBuf>) -> Self {
        Self {
            mirrors_dir: mirrors_dir.into(),
            deadline: DEFAULT_DEADLINE,
            shared: std::sync::Mutex::new(HashMap::new()),
            http_clients: Arc::default(),
        }
    }

    /// Overrides the per-call deadline.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The mirror directory a destination id uses (for operators and tests).
    pub fn mirror_path(&self, destination_id: &str) -> PathBuf {
        self.mirrors_dir
            .join(mirror::mirror_dir_name(destination_id))
    }

    /// A handle for one destination. Checks the remote's configuration (https,
    /// or http only to loopback) and opens or creates its mirror; nothing is
    /// sent yet. Call it per use: a rotated token takes effect immediately.
    pub fn wiki(&self, destination: &Destination) -> Result<Wiki, WikiError> {
        if destination.id.trim().is_empty() {
            return Err(WikiError::not_applied(
                ErrorKind::ConfigurationError,
                "the wiki destination id must not be empty",
            ));
        }
        let (backend, location) = match &destination.remote {
            Remote::Http { url, token } => (
                Backend::Http {
                    http: remote::validate_http(url, token.as_ref(), &self.http_clients)?,
                },
                self.mirror_path(&destination.id),
            ),
            Remote::LocalBare { path } => (Backend::Local, path.clone()),
        };
        let shared = {
            let mut all = self
                .shared
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match all.get(&destination.id) {
                Some(existing) if existing.location == location => existing.clone(),
                _ => {
                    let repo = match backend {
                        Backend::Http { .. } => mirror::open_mirror(&location)?,
                        Backend::Local => mirror::open_isolated(&location).map_err(|_| {
                            WikiError::not_applied(
                                ErrorKind::ConfigurationError,
                                "the local wiki repository could not be opened; check local_wiki_path",
                            )
                        })?,
                    };
                    let shared_file = |kind: &str| {
                        self.mirrors_dir.join(format!(
                            "{}.{kind}",
                            mirror::mirror_dir_name(&destination.id)
                        ))
                    };
                    let shared = Arc::new(Shared {
                        location: location.clone(),
                        repo,
                        lock: Arc::new(tokio::sync::Mutex::new(())),
                        cache: Arc::new(tree::IndexCache::default()),
                        // Shared by the daemon and each job's writer child
                        // (a new process per job) through the mirrors dir.
                        search: Arc::new(search_cache::SearchCache::with_page_facts_file(
                            shared_file("page-facts"),
                        )),
                        page_owners: Arc::new(page_owners::PageOwners::persisted(shared_file(
                            "page-owners",
                        ))),
                        evidence: Arc::default(),
                    });
                    all.insert(destination.id.clone(), shared.clone());
                    shared
                }
            }
        };
        let mirror_lock = match backend {
            Backend::Http { .. } => Some(location.join("teammem.lock")),
            Backend::Local => None,
        };
        Ok(Wiki {
            state: Arc::new(WikiState {
                mirror_lock,
                id: destination.id.clone(),
                backend,
                repo: shared.repo.clone(),
                cache: shared.cache.clone(),
                search: shared.search.clone(),
                page_owners: shared.page_owners.clone(),
                evidence: shared.evidence.clone(),
                lock: shared.lock.clone(),
            }),
            deadline: self.deadline,
        })
    }
}

/// A handle on one destination's wiki. Cheap to clone.
#[derive(Clone)]
pub struct Wiki {
    state: Arc<WikiState>,
    deadline: Duration,
}

fn timed_out() -> WikiError {
    WikiError::not_applied(
        ErrorKind::Timeout,
        "the wiki call did not finish before its deadline; try again",
    )
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, WikiError> + Send + 'static,
) -> Result<T, WikiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| WikiError::internal("running a wiki task", err))?
}

impl Wiki {
    /// The destination id this handle serves.
    pub fn destination_id(&self) -> &str {
        &self.state.id
    }

    async fn with_deadline<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, WikiError>>,
    ) -> Result<T, WikiError> {
        tokio::time::timeout(self.deadline, work)
            .await
            .unwrap_or_else(|_| Err(timed_out()))
    }

    /// Resolves a read ref to a local commit (`None`: `HEAD` of an empty wiki).
    async fn resolve(
        &self,
        spec: RefSpec,
        deadline: Instant,
    ) -> Result<Option<ObjectId>, WikiError> {
        if let RefSpec::Commit(id) = spec {
            let state = self.state.clone();
            if blocking(move || Ok(tree::has_commit(&state.repo(), id))).await? {
                return Ok(Some(id));
            }
        }
        let guard = self.state.lock.clone().lock_owned().await;
        let state = self.state.clone();
        blocking(move || {
            let _serialized = guard;
            let _mirror = state.lock_mirror()?;
            state.resolve_locked(spec, deadline)
        })
        .await
    }

    async fn resolve_initialized(
        &self,
        spec: RefSpec,
        deadline: Instant,
    ) -> Result<ObjectId, WikiError> {
        self.resolve(spec, deadline).await?.ok_or_else(|| {
            WikiError::not_found("the wiki has no pages yet; create its first page in GitHub's web interface, then read a snapshot")
        })
    }

    /// `get_wiki_snapshot`: the remote's default branch and tip (fetching new
    /// commits into the mirror when there are any).
    pub async fn snapshot(&self) -> Result<Snapshot, WikiError> {
        let deadline = Instant::now() + self.deadline;
        self.with_deadline(async {
            let guard = self.state.lock.clone().lock_owned().await;
            let state = self.state.clone();
            let head = blocking(move || {
                let _serialized = guard;
                let _mirror = state.lock_mirror()?;
                state.sync(deadline)
            })
            .await?;
            let stale_facts = match head.tip {
                Some(tip) => {
                    let state = self.state.clone();
                    // Counted without building the search index: a snapshot
                    // is taken by every job, on a tip no index exists for yet.
                    blocking(move || {
                        Ok(state
                            .search
                            .stale_facts(&state.repo(), &state.cache, tip)?
                            .0)
                    })
                    .await?
                }
                None => 0,
            };
            Ok(Snapshot {
                branch: head.branch,
                sha: head.tip.map(|tip| tip.to_string()),
                initialized: head.tip.is_some(),
                stale_facts,
            })
        })
        .await
    }

    /// The tip of the default branch as this node's copy holds it (the
    /// mirror, or a local wiki itself), without asking the remote: no fetch,
    /// no lock. `None` when the copy holds no commit yet.
    pub async fn local_tip(&self) -> Result<Option<String>, WikiError> {
        let state = self.state.clone();
        self.with_deadline(blocking(move || {
            Ok(WikiState::known_branch(&state.repo()).map(|(_, tip)| tip.to_string()))
        }))
        .await
    }

    /// The stale evidence markers across the pages of `commit`, a commit this
    /// node's copy already holds (never fetched: one it lacks is not found),
    /// counted over the pages a search would index.
    pub async fn stale_facts(&self, commit: &str) -> Result<StaleCount, WikiError> {
        let id = validate::parse_full_sha(commit, "commit")?;
        let state = self.state.clone();
        self.with_deadline(blocking(move || {
            let repo = state.repo();
            if !tree::has_commit(&repo, id) {
                return Err(WikiError::not_found(format!(
                    "this node's copy of the wiki does not hold the commit {id}"
                )));
            }
            let (stale, truncated) = state.search.stale_facts(&repo, &state.cache, id)?;
            Ok(StaleCount { stale, truncated })
        }))
        .await
    }

    /// `list_wiki_pages` at `HEAD` or a full sha (at most 2,000 pages, sorted by path).
    pub async fn list_pages(&self, git_ref: &str) -> Result<PageList, WikiError> {
        let spec = validate::parse_ref(git_ref, "ref")?;
        let deadline = Instant::now() + self.deadline;
        self.with_deadline(async {
            let commit = self.resolve_initialized(spec, deadline).await?;
            let state = self.state.clone();
            blocking(move || read::list_pages(&state.repo(), &state.cache, commit)).await
        })
        .await
    }

    /// `get_wiki_page`.
    pub async fn get_page(&self, git_ref: &str, path: &str) -> Result<Page, WikiError> {
        let spec = validate::parse_ref(git_ref, "ref")?;
        validate::check_page_path_argument(path)?;
        let deadline = Instant::now() + self.deadline;
        let path = path.to_owned();
        self.with_deadline(async {
            let commit = self.resolve_initialized(spec, deadline).await?;
            let state = self.state.clone();
            blocking(move || read::get_page(&state.repo(), &state.cache, commit, &path)).await
        })
        .await
    }

    /// The last commit that changed `path` at `git_ref`, and whether it was
    /// teammem's (its message carries `owner_trailer`) or a person's; `None`
    /// when the newest 1,000 commits hold none.
    pub async fn last_change(
        &self,
        git_ref: &str,
        path: &str,
        owner_trailer: &str,
    ) -> Result<Option<LastChange>, WikiError> {
        let spec = validate::parse_ref(git_ref, "ref")?;
        validate::check_page_path_argument(path)?;
        let deadline = Instant::now() + self.deadline;
        let (path, owner_trailer) = (path.to_owned(), owner_trailer.to_owned());
        self.with_deadline(async {
            let commit = self.resolve_initialized(spec, deadline).await?;
            let state = self.state.clone();
            blocking(move || read::last_change(&state.repo(), commit, &path, &owner_trailer)).await
        })
        .await
    }

    /// `search_wiki`: pages ranked by BM25 for `query` (indexes at most 8 MiB,
    /// once per commit).
    pub async fn search(&self, git_ref: &str, query: &str) -> Result<SearchResult, WikiError> {
        let spec = validate::parse_ref(git_ref, "ref")?;
        validate::check_query(query)?;
        let deadline = Instant::now() + self.deadline;
        let query = query.to_owned();
        self.with_deadline(async {
            let commit = self.resolve_initialized(spec, deadline).await?;
            let state = self.state.clone();
            blocking(move || {
                let index =
                    state
                        .search
                        .get_or_build(&state.repo(), &state.cache, commit, deadline)?;
                Ok(index.search(commit, &query))
            })
            .await
        })
        .await
    }

    /// The pages at `git_ref` holding evidence markers, each with its parsed
    /// evidence, and whether the scan's bound left pages out
    /// (`read::evidence_scan`); only pages whose blob changed since this
    /// destination's last scan are read and parsed.
    pub async fn evidence_scan(
        &self,
        git_ref: &str,
    ) -> Result<(Vec<EvidencePage>, bool), WikiError> {
        let spec = validate::parse_ref(git_ref, "ref")?;
        let deadline = Instant::now() + self.deadline;
        self.with_deadline(async {
            let commit = self.resolve_initialized(spec, deadline).await?;
            let state = self.state.clone();
            blocking(move || {
                read::evidence_scan(
                    &state.repo(),
                    &state.cache,
                    state.search.page_facts(),
                    &state.evidence,
                    commit,
                )
            })
            .await
        })
        .await
    }

    /// The text of each page `paths` names at `git_ref`, in the order asked;
    /// a path that is not a page there is an error.
    pub async fn page_texts(
        &self,
        git_ref: &str,
        paths: Vec<String>,
    ) -> Result<Vec<(String, String)>, WikiError> {
        let spec = validate::parse_ref(git_ref, "ref")?;
        let deadline = Instant::now() + self.deadline;
        self.with_deadline(async {
            let commit = self.resolve_initialized(spec, deadline).await?;
            let state = self.state.clone();
            blocking(move || read::page_texts(&state.repo(), &state.cache, commit, &paths)).await
        })
        .await
    }

    /// `list_wiki_history`: newest first, commits touching `path` when given.
    pub async fn history(
        &self,
        git_ref: &str,
        path: Option<&str>,
        limit: u32,
    ) -> Result<History, WikiError> {
        let spec = validate::parse_ref(git_ref, "ref")?;
        validate::check_history_limit(limit)?;
        if let Some(path) = path {
            validate::check_page_path_argument(path)?;
        }
        let deadline = Instant::now() + self.deadline;
        let path = path.map(str::to_owned);
        self.with_deadline(async {
            let tip = self.resolve_initialized(spec, deadline).await?;
            let state = self.state.clone();
            blocking(move || read::history(&state.repo(), tip, path.as_deref(), limit as usize))
                .await
        })
        .await
    }

    /// `get_wiki_diff`: unified diff from `from` to `to` (at most 512 KiB).
    pub async fn diff(&self, from: &str, to: &str) -> Result<Diff, WikiError> {
        let from_spec = validate::parse_ref(from, "from")?;
        let to_spec = validate::parse_ref(to, "to")?;
        let deadline = Instant::now() + self.deadline;
        self.with_deadline(async {
            let from = self.resolve_initialized(from_spec, deadline).await?;
            let to = self.resolve_initialized(to_spec, deadline).await?;
            let state = self.state.clone();
            blocking(move || read::diff(&state.repo(), &state.cache, from, to)).await
        })
        .await
    }

    /// `write_wiki_pages`: full contents for 1–20 `.md` pages.
    pub async fn write(
        &self,
        spec: &CommitSpec,
        pages: Vec<PageWrite>,
    ) -> Result<WriteResult, WikiError> {
        self.write_confined(spec, pages, &WriteRules::default())
            .await
    }

    /// `write` held to `rules` (checked against the base before anything is sent).
    pub async fn write_confined(
        &self,
        spec: &CommitSpec,
        pages: Vec<PageWrite>,
        rules: &WriteRules,
    ) -> Result<WriteResult, WikiError> {
        self.change_confined(spec, pages, Vec::new(), rules).await
    }

    /// `patch_wiki_pages`: exact-anchor replacements in 1–20 existing pages.
    pub async fn patch(
        &self,
        spec: &CommitSpec,
        patches: Vec<PagePatch>,
    ) -> Result<WriteResult, WikiError> {
        self.patch_confined(spec, patches, &WriteRules::default())
            .await
    }

    /// `patch` held to `rules` (checked against the base before anything is sent).
    pub async fn patch_confined(
        &self,
        spec: &CommitSpec,
        patches: Vec<PagePatch>,
        rules: &WriteRules,
    ) -> Result<WriteResult, WikiError> {
        self.change_confined(spec, Vec::new(), patches, rules).await
    }

    /// `write_wiki_pages` with `patches`: pages written whole and others
    /// patched, 1–20 distinct pages in all, as one commit held to `rules`.
    pub async fn change_confined(
        &self,
        spec: &CommitSpec,
        writes: Vec<PageWrite>,
        patches: Vec<PagePatch>,
        rules: &WriteRules,
    ) -> Result<WriteResult, WikiError> {
        let base = validate::check_commit_spec(spec, &self.state.id)?;
        validate::check_change(&writes, &patches)?;
        self.publish(
            spec,
            base,
            PageChange { writes, patches },
            rules,
            WriteTarget::Publish,
        )
        .await
    }

    /// [`Wiki::change_confined`], staged instead of published: the commit
    /// goes into the local object store only (see [`WriteTarget::Stage`]).
    /// `base_staged`: `expected_base` is the job's own staged commit.
    pub async fn stage_confined(
        &self,
        spec: &CommitSpec,
        writes: Vec<PageWrite>,
        patches: Vec<PagePatch>,
        rules: &WriteRules,
        base_staged: bool,
    ) -> Result<WriteResult, WikiError> {
        let base = validate::check_commit_spec(spec, &self.state.id)?;
        validate::check_change(&writes, &patches)?;
        self.publish(
            spec,
            base,
            PageChange { writes, patches },
            rules,
            WriteTarget::Stage { base_staged },
        )
        .await
    }

    /// A job's staged commit of `rules.amend`'s evidence-marker rewrites
    /// alone, on `spec.expected_base`: for a job whose agent wrote nothing,
    /// so its markers (and `Stale.md`) still follow the source. `no-change`
    /// when every rewrite is already in place.
    pub async fn stage_rewrites(
        &self,
        spec: &CommitSpec,
        rules: &WriteRules,
    ) -> Result<WriteResult, WikiError> {
        let base = validate::check_commit_spec(spec, &self.state.id)?;
        self.publish(
            spec,
            base,
            PageChange::default(),
            rules,
            WriteTarget::Stage { base_staged: false },
        )
        .await
    }

    /// Publishes a job's staged commits `start..staged` as one commit on
    /// `start` with `spec`'s message and trailers, by compare-and-swap.
    pub async fn publish_staged(
        &self,
        spec: &CommitSpec,
        start: &str,
        staged: &str,
    ) -> Result<WriteResult, WikiError> {
        let start = validate::parse_full_sha(start, "start")?;
        let staged = validate::parse_full_sha(staged, "staged")?;
        let deadline = Instant::now() + self.deadline;
        let gate = Arc::new(SendGate::default());
        let state = self.state.clone();
        let spec = spec.clone();
        let task_gate = gate.clone();
        let work = async move {
            let guard = state.lock.clone().lock_owned().await;
            blocking(move || {
                let _serialized = guard;
                let _mirror = state.lock_mirror()?;
                state.publish_staged(&spec, start, staged, &task_gate, deadline)
            })
            .await
        };
        match tokio::time::timeout(self.deadline, work).await {
            Ok(result) => result,
            Err(_) if gate.cancel() => Err(timed_out()),
            Err(_) => Err(WikiError::outcome_unknown(
                "the call's deadline passed after the update was sent; read a fresh snapshot and compare the pages before writing again",
            )),
        }
    }

    async fn publish(
        &self,
        spec: &CommitSpec,
        base: ObjectId,
        change: PageChange,
        rules: &WriteRules,
        target: WriteTarget,
    ) -> Result<WriteResult, WikiError> {
        let rules = rules.clone();
        let deadline = Instant::now() + self.deadline;
        let gate = Arc::new(SendGate::default());
        let state = self.state.clone();
        let spec = spec.clone();
        let task_gate = gate.clone();
        let work = async move {
            let guard = state.lock.clone().lock_owned().await;
            blocking(move || {
                let _serialized = guard;
                let _mirror = state.lock_mirror()?;
                state.write(&spec, base, &change, &rules, target, &task_gate, deadline)
            })
            .await
        };
        match tokio::time::timeout(self.deadline, work).await {
            Ok(result) => result,
            Err(_) if gate.cancel() => Err(timed_out()),
            Err(_) => Err(WikiError::outcome_unknown(
                "the call's deadline passed after the update was sent; read a fresh snapshot and compare the pages before writing again",
            )),
        }
    }
}
