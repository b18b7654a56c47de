//! The HTTP API (axum): one app state, one `router()` per resource, every error
//! mapped to a status code in `error.rs`.
//!
//! Every route but `/healthz`, `/readyz` and `/metrics` authenticates its caller
//! (see `auth.rs`); the dispatch route authenticates by signature instead.

mod auth;
mod dashboard;
mod dispatch; // POST /v1/dispatch: signed, verified, then enqueued
mod error;
mod health;
mod jobs;
pub mod limits; // per-principal limits: a request token bucket, open /mcp streams
mod mcp; // /mcp: the coordinator MCP server over Streamable HTTP, Origin and token checked first
mod metrics;
pub mod serve; // the HTTP/1 server: header-read and request timeouts, a connection limit, graceful drain
pub mod requests; // POST /v1/requests: maintainers ask for one merged PR (shared with the MCP coordinator)
pub mod wiki_reads; // the dashboard's wiki reads: one store, each tip fetched at most every 10 s

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};

use axum::Router;
use tokio::sync::Notify;

use crate::config::Config;
use crate::queue::Queue;

pub use auth::Caller;
pub use dispatch::new_job;
pub use error::ApiError;

/// Everything a request handler may use. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub config: Arc<Config>,
    pub pool: crate::db::Pool,
    pub queue: Queue,
    /// Wakes idle workers after an enqueue.
    pub wake_workers: Arc<Notify>,
    /// Workers currently running their loop (for `/readyz`).
    pub workers_alive: Arc<AtomicUsize>,
    /// False once shutdown began (for `/readyz`).
    pub ready: Arc<AtomicBool>,
    /// Signs dashboard session cookies (see `session_key` in daemon.rs).
    pub session_key: Arc<[u8; 32]>,
    /// The dispatch front door; `None` answers `POST /v1/dispatch` with 503.
    pub ingest: Option<Arc<crate::ingest::Ingest>>,
    /// The process's forges, built once by the daemon (the request routes
    /// verify PRs and maintainers through them; the sources page and
    /// `/metrics` read lags). Without `[github]` only local sources answer.
    pub forges: crate::forge::Forges,
    /// Cancelled when shutdown begins: ends open `/mcp` sessions and their
    /// event streams, which would otherwise hold the graceful shutdown open.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Why jobs cannot run as configured (the command agent's sandbox), found
    /// at start; `/readyz` reports each.
    pub job_problems: Arc<Vec<String>>,
    /// How a `command` agent is isolated (`/readyz`); `None` for in-process agents.
    pub agent_isolation: Arc<Option<String>>,
    /// The sources page's lag cache.
    pub freshness: Arc<crate::freshness::Freshness>,
    /// Whether this node runs the cluster's duties (`/readyz`, `/metrics`).
    pub leader: crate::cluster::Leader,
    /// How idle workers hear of new jobs (`/readyz`).
    pub wakeups: crate::cluster::Wakeups,
    /// Per-principal limits (`[limits]`), shared by every authenticated route.
    pub limits: Arc<limits::PrincipalLimits>,
    /// The dashboard's reads of the wikis it shows.
    pub wiki_reads: Arc<wiki_reads::WikiReads>,
}

impl AppState {
    pub fn new(
        config: Arc<Config>,
        pool: impl Into<crate::db::Pool>,
        queue: Queue,
        wake_workers: Arc<Notify>,
        workers_alive: Arc<AtomicUsize>,
        session_key: [u8; 32],
    ) -> AppState {
        let limits = Arc::new(limits::PrincipalLimits::new(config.limits.clone()));
        let wiki_reads = Arc::new(wiki_reads::WikiReads::new(&config));
        AppState {
            config,
            pool: pool.into(),
            queue,
            wake_workers,
            workers_alive,
            ready: Arc::new(AtomicBool::new(true)),
            session_key: Arc::new(session_key),
            ingest: None,
            forges: crate::forge::Forges::with_github(None),
            shutdown: tokio_util::sync::CancellationToken::new(),
            job_problems: Arc::new(Vec::new()),
            agent_isolation: Arc::new(None),
            freshness: Arc::default(),
            leader: crate::cluster::Leader::sole(),
            wakeups: crate::cluster::Wakeups::in_process(),
            limits,
            wiki_reads,
        }
    }

    /// Ends `/mcp` sessions when `shutdown` is cancelled.
    pub fn with_shutdown(mut self, shutdown: tokio_util::sync::CancellationToken) -> AppState {
        self.shutdown = shutdown;
        self
    }

    /// Answers forge questions through `forges` (the daemon's, shared with
    /// ingest and the runner).
    pub fn with_forges(mut self, forges: crate::forge::Forges) -> AppState {
        self.forges = forges;
        self
    }

    /// Serves `POST /v1/dispatch` through `ingest`.
    pub fn with_ingest(mut self, ingest: Arc<crate::ingest::Ingest>) -> AppState {
        self.ingest = Some(ingest);
        self
    }
}

/// The whole API.
pub fn router(state: AppState) -> Router {
    Router::new()
        .merge(health::router())
        .merge(metrics::router())
        .merge(jobs::router())
        .merge(dashboard::router())
        .merge(dispatch::router())
        .merge(requests::router())
        .merge(mcp::router(&state))
        .fallback(error::not_found)
        .with_state(state)
}
