//! The daemon: opens the database, starts HTTP, the worker pool and the
//! scheduler (rescue, retention, and the sweep when a source asks for it),
//! and owns graceful shutdown.
//!
//! HTTP is served by `http::serve` (header-read and request timeouts, a
//! connection limit). Shutdown order (SIGTERM/SIGINT or the caller's signal):
//! stop accepting HTTP connections, end open `/mcp` sessions and their event streams (they never
//! end by themselves) and let other in-flight requests finish, stop claiming jobs, give
//! running jobs `queue.shutdown_grace_seconds` to finish and release the leases
//! of those that do not, stop the schedules, close the database. Then `run`
//! returns `Ok` and the process exits 0.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::config::Config;
use crate::db;
use crate::forge::Forges;
use crate::http::{self, AppState};
use crate::queue::{Clock, Queue, QueueSettings, SystemClock};
use crate::scheduler::Scheduler;
use crate::worker::{JobHandler, NoRunner, PoolSettings, WorkerPool};

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("cannot open the database in {dir}: {source}")]
    Database {
        dir: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot listen on {addr}: {source}; is another process using the port?")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the HTTP server failed: {0}")]
    Http(std::io::Error),
    #[error("cannot start dispatch ingest: {0}")]
    Ingest(String),
    #[error("{0}")]
    SessionKey(String),
}

/// How long after start the first sweep runs (then on `[schedule] sweep`):
/// pushes whose dispatch was lost while the daemon was down are found without
/// waiting for the schedule, and start-up is not slowed by forge calls.
const SWEEP_AFTER_START: Duration = Duration::from_secs(2);

/// What the daemon's workers run jobs with.
pub enum Handler {
    /// The job runner (what `teammem serve` runs), spawning this
    /// executable's `mcp --wiki-writer` bound to `config_path` for each job
    /// and asking the daemon's forges.
    Runner { config_path: std::path::PathBuf },
    /// A handler of the caller's own (tests).
    Given(Arc<dyn JobHandler>),
}

/// The job runner for `config`, asking `forges`: see [`Handler::Runner`].
fn default_handler(
    config: Arc<Config>,
    config_path: &std::path::Path,
    forges: Forges,
) -> Arc<dyn JobHandler> {
    match std::env::current_exe() {
        Ok(program) => {
            let runner =
                crate::runner::Runner::new(config, config_path.to_path_buf(), program, forges);
            // Compiled into test builds only (cargo feature `test-hooks`).
            #[cfg(feature = "test-hooks")]
            let runner = crate::runner::test_hooks::from_env(runner);
            Arc::new(runner)
        }
        Err(error) => {
            tracing::error!(%error, "cannot find the teammem executable; jobs will fail until the daemon is restarted");
            Arc::new(NoRunner)
        }
    }
}

/// Resolves when the process receives SIGTERM or SIGINT. The SIGTERM handler
/// is installed when this is called, not when the future is first polled:
/// a SIGTERM that arrives while the daemon is still starting (after it said
/// it listens) then stops it cleanly instead of killing it.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        match term {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                let _ = ctrl_c.await;
            }
        }
        #[cfg(not(unix))]
        {
            let _ = ctrl_c.await;
        }
        tracing::info!("shutdown requested");
    }
}

/// The key that signs dashboard sessions and form tokens.
///
/// When `dashboard.session_key_env` or `dashboard.session_key_file` is set,
/// it is derived from that secret (HMAC-SHA256 under it of a fixed label), so
/// every node given the same secret accepts the others' logins. Otherwise, on
/// SQLite, 32 random bytes in `data_dir/session.key` (mode 0600, made on first
/// start; deleting the file logs everybody out). A PostgreSQL node without a
/// configured key refuses to start: the key is never kept in the database,
/// where whoever reads a backup could sign any login (an older version's
/// `cluster_keys` row named `session` is no longer read).
fn session_key(config: &Config, data_dir: &std::path::Path) -> Result<[u8; 32], DaemonError> {
    use hmac::{Hmac, Mac};
    match (&config.dashboard.session_key, &config.database) {
        (Some(source), _) => {
            let secret = source.load().map_err(DaemonError::SessionKey)?;
            let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.expose().trim_ascii())
                .expect("any key length");
            mac.update(b"teammem dashboard session key v1");
            Ok(mac.finalize().into_bytes().into())
        }
        (None, crate::config::Database::Sqlite) => session_key_file(data_dir).map_err(|e| {
            DaemonError::SessionKey(format!(
                "{}: cannot read or make the dashboard session key: {e}",
                data_dir.join("session.key").display()
            ))
        }),
        (None, crate::config::Database::Postgres(_)) => Err(DaemonError::SessionKey(
            crate::config::SESSION_KEY_REQUIRED.into(),
        )),
    }
}

fn session_key_file(data_dir: &std::path::Path) -> std::io::Result<[u8; 32]> {
    use rand::RngCore;
    let path = data_dir.join("session.key");
    match std::fs::read(&path) {
        Ok(bytes) if bytes.len() == 32 => {
            let mut key = [0u8; 32];
            key.copy_from_slice(&bytes);
            return Ok(key);
        }
        Ok(_) => {
            tracing::warn!(path = %path.display(), "session key has the wrong size; making a new one")
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut key = [0u8; 32];
    rand::rng().fill_bytes(&mut key);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    std::io::Write::write_all(&mut options.open(&path)?, &key)?;
    Ok(key)
}

/// Options for embedding the daemon (tests, the demo).
pub struct Options {
    pub handler: Handler,
    pub clock: Arc<dyn Clock>,
    /// Called with the bound address once the server accepts connections.
    pub on_listening: Option<Box<dyn FnOnce(SocketAddr) + Send>>,
}

/// Runs the daemon until `shutdown` resolves.
pub async fn run(
    config: Arc<Config>,
    handler: Handler,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), DaemonError> {
    run_with(
        config,
        Options {
            handler,
            clock: Arc::new(SystemClock),
            on_listening: Some(Box::new(|addr| {
                // A line on stdout that scripts and tests can wait for.
                println!("teammem listening on http://{addr}");
            })),
        },
        shutdown,
    )
    .await
}

pub async fn run_with(
    config: Arc<Config>,
    options: Options,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), DaemonError> {
    // The process's forges, built here once (with `[github]`, the one GitHub
    // client and its token cache) and handed to ingest, the runner, the
    // sweep and the request routes. Before the database and any worker: a
    // bad App key stops the daemon here.
    let forges = Forges::from_config(&config)
        .await
        .map_err(|e| DaemonError::Ingest(e.to_string()))?;
    let ingest = crate::ingest::Ingest::from_config(&config, forges.clone());
    run_with_ingest(config, options, forges, ingest, shutdown).await
}

/// Like [`run_with`], with the forges and dispatch ingest built by the
/// caller: the demo hands its generated dispatch secret over this way
/// instead of through the process environment.
pub async fn run_with_ingest(
    config: Arc<Config>,
    options: Options,
    forges: Forges,
    ingest: crate::ingest::Ingest,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), DaemonError> {
    let data_dir = &config.server.data_dir;
    let database = || match &config.database {
        crate::config::Database::Sqlite => data_dir.display().to_string(),
        crate::config::Database::Postgres(pg) => pg.location(),
    };
    if matches!(config.database, crate::config::Database::Postgres(_)) {
        // Mirrors and job work directories stay on each node.
        db::prepare_data_dir(data_dir).map_err(|e| DaemonError::Database {
            dir: data_dir.display().to_string(),
            source: e.into(),
        })?;
    }
    let pool = db::open_configured(&config)
        .await
        .map_err(|e| DaemonError::Database {
            dir: database(),
            source: e.into(),
        })?;
    // Before any worker starts: a node without its key stops here.
    let session_key = session_key(&config, data_dir)?;
    let queue = Queue::new(
        pool.clone(),
        options.clock.clone(),
        QueueSettings::of(&config),
    );
    let handler = match options.handler {
        Handler::Runner { config_path } => {
            default_handler(config.clone(), &config_path, forges.clone())
        }
        Handler::Given(handler) => handler,
    };
    let job_problems = handler.problems();
    let agent_isolation = handler.agent_isolation();
    for problem in &job_problems {
        tracing::error!(%problem, "jobs cannot run as configured; /readyz reports not ready");
    }
    let workers = WorkerPool::start(
        queue.clone(),
        handler,
        PoolSettings {
            workers: config.queue.workers,
            lease: config.queue.lease,
            job_timeout: config.queue.job_timeout,
            shutdown_grace: config.queue.shutdown_grace,
            idle_poll: Duration::from_secs(1),
            job_nice: Some(config.queue.job_nice),
            node: config.server.node_id.clone(),
        },
    );

    // On PostgreSQL: job notifications from every node wake this node's
    // workers, and the cluster's duties run on the leader only.
    let cluster = tokio_util::sync::CancellationToken::new();
    let (leader, wakeups) = match &pool {
        db::Pool::Postgres(postgres) => {
            let wakeups = crate::cluster::wake_on_notifications(
                postgres.clone(),
                workers.wake.clone(),
                cluster.clone(),
            );
            let leader = crate::cluster::Leader::campaign(
                postgres.clone(),
                config.server.node_id.clone(),
                cluster.clone(),
            );
            (leader, wakeups)
        }
        db::Pool::Sqlite(_) => (
            crate::cluster::Leader::sole(),
            crate::cluster::Wakeups::in_process(),
        ),
    };

    let mut scheduler = Scheduler::new();
    {
        let queue = queue.clone();
        let leader = leader.clone();
        scheduler.every("rescue", config.schedule.rescue.clone(), move || {
            let queue = queue.clone();
            let leading = leader.is_leader();
            async move {
                if !leading {
                    return;
                }
                match queue.rescue_expired().await {
                    Ok(0) => {}
                    // Each rescued job has its own WARN line (`Queue::rescue_expired`).
                    Ok(n) => tracing::debug!(jobs = n, "rescued jobs whose lease expired"),
                    Err(e) => tracing::error!(error = %e, "rescue failed"),
                }
            }
        });
    }
    {
        let queue = queue.clone();
        let leader = leader.clone();
        let pool = pool.clone();
        scheduler.every("retention", config.schedule.retention.clone(), move || {
            let queue = queue.clone();
            let pool = pool.clone();
            let leading = leader.is_leader();
            async move {
                if !leading {
                    return;
                }
                match queue.prune().await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(jobs = n, "pruned finished jobs past retention"),
                    Err(e) => tracing::error!(error = %e, "retention failed"),
                }
                match crate::mcp::sessions::prune(&pool).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(sessions = n, "pruned MCP sessions past retention"),
                    Err(e) => tracing::error!(error = %e, "MCP session retention failed"),
                }
            }
        });
    }

    let sweep = crate::sweep::Sweep::new(config.clone(), queue.clone(), forges.clone());
    if sweep.has_sources() {
        scheduler.after_start_and_every(
            "sweep",
            SWEEP_AFTER_START,
            config.schedule.sweep.clone(),
            {
                let leader = leader.clone();
                move || {
                    let sweep = sweep.clone();
                    let leading = leader.is_leader();
                    async move {
                        if leading {
                            sweep.run().await;
                        }
                    }
                }
            },
        );
    }

    // Cancelled when shutdown begins: ends open /mcp sessions and streams.
    let mcp_sessions = tokio_util::sync::CancellationToken::new();
    let state = AppState::new(
        config.clone(),
        pool.clone(),
        queue.clone(),
        workers.wake.clone(),
        workers.alive.clone(),
        session_key,
    )
    .with_forges(forges)
    .with_ingest(Arc::new(ingest))
    .with_shutdown(mcp_sessions.clone());
    let state = AppState {
        job_problems: Arc::new(job_problems),
        agent_isolation: Arc::new(agent_isolation),
        leader,
        wakeups,
        ..state
    };
    let listener = TcpListener::bind(config.server.listen)
        .await
        .map_err(|source| DaemonError::Listen {
            addr: config.server.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(DaemonError::Http)?;
    tracing::info!(%addr, workers = config.queue.workers, "teammem started");
    if let Some(notify) = options.on_listening {
        notify(addr);
    }

    let ready = state.ready.clone();
    let limits = http::serve::Limits::from_config(&config.server);
    let served = http::serve::serve(listener, http::router(state), limits, async move {
        shutdown.await;
        ready.store(false, std::sync::atomic::Ordering::SeqCst);
        mcp_sessions.cancel();
    })
    .await;

    tracing::info!("HTTP stopped; waiting for running jobs");
    workers.shutdown().await;
    scheduler.shutdown().await;
    // Gives up the leader lock, so another node takes over at once.
    cluster.cancel();
    pool.close().await;
    tracing::info!("teammem stopped");
    served.map_err(DaemonError::Http)
}
