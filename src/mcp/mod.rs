//! The MCP servers (rmcp) over the team memory, and the operator functions
//! behind `teammem wiki ...`.
//!
//! Reading order:
//! - [`envelope`]: the one place a tool result is made (shape, size limit,
//!   credential scan);
//! - [`toolsets`]: tools declared as data, one file per toolset, and the one
//!   filter deciding what a server exposes;
//! - [`context`]: the binding (configuration, writer job from the environment)
//!   and how a call reaches a wiki;
//! - [`app_credentials`]: the GitHub App's read-only wiki tokens for the
//!   agent servers (private wikis);
//! - [`server`]: the rmcp handler serving the tables;
//! - [`operator`]: the same tools for an operator's command line.
//!
//! Invariant: stdout carries MCP framing only. Nothing here prints; logs go to
//! stderr through `tracing` (the binary's subscriber must write to stderr).

pub mod app_credentials;
pub mod context;
pub mod envelope;
pub mod operator;
pub mod server;
pub mod tasks;
pub mod toolsets;

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::ServiceExt;

pub use context::{Binding, Context, WikiCredentials};
pub use server::WikiServer;

/// Which server `teammem mcp` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `teammem mcp [--config FILE] [--read-only]`: the read tools for every
    /// configured source (and, later, the coordinator tools).
    Agent { read_only: bool },
    /// `teammem mcp --wiki-writer`: the job-bound writer; its binding comes only
    /// from the environment (see [`context`]).
    WikiWriter,
}

/// Why `teammem mcp` could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("{0}")]
    Config(crate::config::ConfigErrors),
    #[error("{0}")]
    Binding(String),
    #[error("{0}")]
    Usage(String),
    #[error("the MCP connection failed: {0}")]
    Transport(String),
}

/// The default configuration path of `teammem mcp` without `--config`.
pub const DEFAULT_CONFIG: &str = "teammem.toml";

/// Builds the binding of a server. The agent server reads `config_path`, else
/// `TEAMMEM_CONFIG`, else [`DEFAULT_CONFIG`]; the writer reads only the process
/// environment and refuses a `--config`.
pub fn binding(config_path: Option<PathBuf>, mode: Mode) -> Result<Binding, McpError> {
    match mode {
        Mode::Agent { read_only } => {
            let path = config_path
                .or_else(|| std::env::var_os(context::ENV_CONFIG).map(PathBuf::from))
                .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
            let config = crate::config::Config::load(&path).map_err(McpError::Config)?;
            Ok(Binding::agent(config, read_only))
        }
        Mode::WikiWriter => {
            if config_path.is_some() {
                return Err(McpError::Usage(format!(
                    "--wiki-writer takes its configuration only from {}; remove --config",
                    context::ENV_CONFIG
                )));
            }
            Binding::writer_from_env(|name| std::env::var(name).ok())
        }
    }
}

/// Serves MCP over stdin/stdout until the client disconnects.
pub async fn run_stdio(config_path: Option<PathBuf>, mode: Mode) -> Result<(), McpError> {
    let binding = binding(config_path, mode)?;
    let context = match mode {
        Mode::Agent { .. } => {
            let requests = coordinator(&binding.config).await?;
            let github = requests.github.clone();
            let context = Context::new(binding).with_coordinator(requests);
            match github {
                Some(forge) => context
                    .with_credentials(Arc::new(app_credentials::AppWikiCredentials::new(forge))),
                None => context,
            }
        }
        Mode::WikiWriter => Context::new(with_broker_token(binding).await?),
    };
    serve_stdio(WikiServer::with_context(context)).await
}

/// A writer bound to a job's broker asks it for the wiki token once, before it
/// serves anything, and keeps it in memory (it is never in its environment).
async fn with_broker_token(mut binding: Binding) -> Result<Binding, McpError> {
    if let Some(writer) = binding.writer.as_mut()
        && let Some(broker) = &writer.broker
    {
        let token = broker.wiki_token().await.map_err(|e| {
            McpError::Binding(format!(
                "the wiki writer could not get its wiki token from the job's broker: {e}"
            ))
        })?;
        writer.token = Some(token);
    }
    Ok(binding)
}

/// The coordinator tools' queue and forge for the agent server on stdio: the
/// daemon's database under `server.data_dir` (created and migrated if new) and,
/// with `[github]`, the App client (without a usable App key, requests for
/// GitHub sources answer that GitHub is unavailable).
pub async fn coordinator(
    config: &std::sync::Arc<crate::config::Config>,
) -> Result<crate::http::requests::Requests, McpError> {
    let data_dir = &config.server.data_dir;
    let pool = crate::db::open(data_dir).await.map_err(|e| {
        McpError::Binding(format!(
            "cannot open the job database in {}: {e}; check server.data_dir",
            data_dir.display()
        ))
    })?;
    crate::db::migrate(&pool).await.map_err(|e| {
        McpError::Binding(format!(
            "cannot migrate the job database in {}: {e}",
            data_dir.display()
        ))
    })?;
    let github = match &config.github {
        Some(gh) => match match crate::secrets::load_app_key(gh).await {
            Ok(key) => crate::forge::github::GitHubForge::new(gh, &key),
            Err(e) => Err(e.to_string()),
        } {
            Ok(forge) => Some(std::sync::Arc::new(forge)),
            Err(e) => {
                tracing::warn!(target: "teammem::mcp", error = %e, "the GitHub App key could not be loaded; requests for GitHub sources will be refused");
                None
            }
        },
        None => None,
    };
    Ok(crate::http::requests::Requests {
        config: config.clone(),
        queue: crate::daemon::queue_for(config, pool),
        github,
        wake: None,
    })
}

/// Serves a prepared server (e.g. with a credentials provider) over stdin/stdout
/// until the client disconnects.
pub async fn serve_stdio(server: WikiServer) -> Result<(), McpError> {
    let binding = &server.context().binding;
    let writer = binding.writer.as_ref();
    tracing::info!(
        target: "teammem::mcp",
        kind = ?binding.profile.kind,
        read_only = binding.profile.read_only,
        source = writer.map(|w| w.source.as_str()),
        job = writer.and_then(|w| w.job.as_deref()),
        holds_token = writer.is_some_and(|w| w.token.is_some()),
        brokered = writer.is_some_and(|w| w.broker.is_some()),
        "serving MCP on stdio"
    );
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| McpError::Transport(error.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|error| McpError::Transport(error.to_string()))?;
    Ok(())
}
