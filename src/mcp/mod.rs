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
//! - [`server`]: the rmcp handler serving the tables;
//! - [`operator`]: the same tools for an operator's command line.
//!
//! Invariant: stdout carries MCP framing only. Nothing here prints; logs go to
//! stderr through `tracing` (the binary's subscriber must write to stderr).

pub mod context;
pub mod envelope;
pub mod operator;
pub mod server;
pub mod toolsets;

use std::path::PathBuf;

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
    serve_stdio(WikiServer::new(binding(config_path, mode)?)).await
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
