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
//! - [`resources`] and [`resource_updates`]: the wiki's pages and a path's
//!   context as MCP resources, and notifications when they change;
//! - [`operator`]: the same tools for an operator's command line.
//!
//! Invariant: stdout carries MCP framing only. Nothing here prints; logs go to
//! stderr through `tracing` (the binary's subscriber must write to stderr).

pub mod app_credentials;
pub mod context;
pub mod envelope;
pub mod operator;
pub mod profile; // which server a process is and what it may expose (below context and toolsets)
pub mod resource_updates;
pub mod resources;
pub mod server;
pub mod sessions;
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
                .or_else(|| std::env::var_os(crate::writer_contract::ENV_CONFIG).map(PathBuf::from))
                .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
            let config = crate::config::Config::load(&path).map_err(McpError::Config)?;
            Ok(Binding::agent(config, read_only))
        }
        Mode::WikiWriter => {
            if config_path.is_some() {
                return Err(McpError::Usage(format!(
                    "--wiki-writer takes its configuration only from {}; remove --config",
                    crate::writer_contract::ENV_CONFIG
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
            let github = requests.forges.github().cloned();
            let context = Context::new(binding).with_coordinator(requests);
            match github {
                Some(forge) => context
                    .with_credentials(Arc::new(app_credentials::AppWikiCredentials::new(forge))),
                None => context,
            }
        }
        Mode::WikiWriter => {
            let (binding, agent_fd) = bind_writer(binding).await?;
            let server = WikiServer::with_context(Context::new(binding));
            if let Some(fd) = agent_fd {
                serve_agents(fd, server.for_agent())?;
            }
            return serve_stdio(server).await;
        }
    };
    serve_stdio(WikiServer::with_context(context)).await
}

/// A writer the runner started: non-dumpable before it holds anything (its
/// memory and `/proc` entries stay closed to processes of the same user),
/// then bound through the job's broker. Returns the agent listener's
/// descriptor, if the runner gave one.
async fn bind_writer(mut binding: Binding) -> Result<(Binding, Option<i32>), McpError> {
    crate::sandbox::make_non_dumpable().map_err(|e| {
        McpError::Binding(format!(
            "the wiki writer cannot make itself non-dumpable: {e}"
        ))
    })?;
    let Some(writer) = binding.writer.as_mut() else {
        return Ok((binding, None));
    };
    let agent_fd = writer.inherited.agent_fd.take();
    context::WriterBinding::attach_broker(Arc::make_mut(&mut binding.config), writer).await?;
    if agent_fd.is_some() && writer.broker.is_none() {
        return Err(McpError::Binding(format!(
            "{} is set without the job's broker; only the runner starts a writer that serves an agent",
            crate::writer_contract::ENV_WRITER_AGENT_FD
        )));
    }
    Ok((binding, agent_fd))
}

/// How long a connection to the agent endpoint has to send its capability
/// preamble (`teammem mcp --connect` sends it right after connecting).
const PREAMBLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves MCP on the inherited listening socket `fd` (a `command` agent's
/// endpoint, reached through `teammem mcp --connect`), each admitted
/// connection as its own session over the same context, until the process
/// exits (when the runner closes stdin).
///
/// A connection is admitted only from a peer of this process's user that
/// first sends the job's capability preamble (the capability arrives on the
/// gate, [`crate::writer_contract::AGENT_GATE_FD`]) within
/// [`PREAMBLE_TIMEOUT`]; any other is closed without a byte of answer, logged
/// once and reported to the runner over the gate. Without a readable
/// capability the writer does not start.
fn serve_agents(fd: i32, server: WikiServer) -> Result<(), McpError> {
    use std::os::fd::FromRawFd;
    // SAFETY: the runner installed this descriptor for the writer alone.
    let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    // SAFETY: marks the descriptor close-on-exec; nothing else uses it.
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    let job = server
        .context()
        .binding
        .writer
        .as_ref()
        .and_then(|w| w.job.clone());
    let gate = AgentGate::inherited(job)?;
    let listener = std::os::unix::net::UnixListener::from(owned);
    let unusable = |e: std::io::Error| {
        McpError::Binding(format!(
            "the agent endpoint the runner passed ({}={fd}) cannot be used: {e}",
            crate::writer_contract::ENV_WRITER_AGENT_FD
        ))
    };
    listener.set_nonblocking(true).map_err(unusable)?;
    let listener = tokio::net::UnixListener::from_std(listener).map_err(unusable)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let gate = Arc::new(gate);
    tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(target: "teammem::mcp", error = %e, "the agent endpoint could not accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            if !stream.peer_cred().is_ok_and(|cred| cred.uid() == me) {
                gate.refuse(crate::writer_contract::Refusal::OtherUser);
                continue;
            }
            let server = server.clone();
            let gate = gate.clone();
            tokio::spawn(async move {
                let mut stream = stream;
                if let Err(refusal) = admit(&mut stream, &gate.preamble, PREAMBLE_TIMEOUT).await {
                    // Dropped unanswered: the peer learns nothing but the close.
                    drop(stream);
                    gate.refuse(refusal);
                    return;
                }
                let (read, write) = stream.into_split();
                match server.serve((read, write)).await {
                    Ok(running) => {
                        let _ = running.waiting().await;
                    }
                    Err(e) => {
                        tracing::warn!(target: "teammem::mcp", error = %e, "an agent's MCP session on the endpoint failed to start")
                    }
                }
            });
        }
    });
    Ok(())
}

/// The writer's end of the agent gate: the preamble an admitted connection
/// sends, and the socket refusals are reported to the runner on.
struct AgentGate {
    preamble: crate::secrets::Secret,
    notices: std::os::unix::net::UnixStream,
    /// The job, for the log.
    job: Option<String>,
}

impl AgentGate {
    /// Takes over [`crate::writer_contract::AGENT_GATE_FD`] and reads the
    /// capability the runner wrote there (bounded; the runner has shut its
    /// side, so this does not wait).
    fn inherited(job: Option<String>) -> Result<AgentGate, McpError> {
        use std::io::Read;
        use std::os::fd::FromRawFd;
        let fd = crate::writer_contract::AGENT_GATE_FD;
        let unusable = |why: String| {
            McpError::Binding(format!(
                "the agent endpoint's capability (descriptor {fd}) cannot be read: {why}; only the runner starts a writer that serves an agent"
            ))
        };
        // Only a socket is taken over: a writer started without the gate
        // may have any other descriptor of its own at this number.
        // SAFETY: fstat writes only into the buffer it is given.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut stat) } != 0
            || stat.st_mode & libc::S_IFMT != libc::S_IFSOCK
        {
            return Err(unusable("it is not an inherited socket".into()));
        }
        // SAFETY: the runner installed this socket for the writer alone, and
        // it is one (checked above).
        let notices = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
        // SAFETY: marks the descriptor close-on-exec; nothing else uses it.
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
        let limit = crate::writer_contract::CAPABILITY_HEX_LEN as u64 + 2;
        let mut text = Vec::new();
        let read = (&notices).take(limit).read_to_end(&mut text);
        let capability = read
            .map_err(|e| e.to_string())
            .and_then(|_| crate::writer_contract::parse_capability(&text));
        zeroize::Zeroize::zeroize(&mut text);
        let capability = capability.map_err(unusable)?;
        notices
            .set_nonblocking(true)
            .map_err(|e| unusable(e.to_string()))?;
        Ok(AgentGate {
            preamble: crate::writer_contract::capability_preamble(&capability),
            notices,
            job,
        })
    }

    /// Logs the refusal once and tells the runner (best effort: a full or
    /// closed gate loses the count, never blocks the endpoint).
    fn refuse(&self, refusal: crate::writer_contract::Refusal) {
        use crate::writer_contract::Refusal;
        use std::io::Write;
        let why = match refusal {
            Refusal::Missing => "it did not send the job's capability in time",
            Refusal::Wrong => "it did not send this job's capability",
            Refusal::OtherUser => "its peer is another user",
        };
        tracing::warn!(target: "teammem::mcp", job = self.job.as_deref(), reason = refusal.label(), "the agent endpoint refused a connection unanswered: {why}");
        let _ = (&self.notices).write(&[refusal.byte()]);
    }
}

/// Reads the first [`crate::writer_contract::CAPABILITY_PREAMBLE_LEN`] bytes
/// of `stream` (never more: what follows is MCP) within `timeout` and
/// compares them in constant time with `preamble`.
async fn admit(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    preamble: &crate::secrets::Secret,
    timeout: std::time::Duration,
) -> Result<(), crate::writer_contract::Refusal> {
    use crate::writer_contract::{CAPABILITY_PREAMBLE_LEN, Refusal};
    use subtle::ConstantTimeEq;
    use tokio::io::AsyncReadExt;
    let mut sent = [0u8; CAPABILITY_PREAMBLE_LEN];
    let read = tokio::time::timeout(timeout, stream.read_exact(&mut sent)).await;
    let verdict = match read {
        Ok(Ok(_)) if bool::from(sent.ct_eq(preamble.expose())) => Ok(()),
        Ok(Ok(_)) => Err(Refusal::Wrong),
        Ok(Err(_)) | Err(_) => Err(Refusal::Missing),
    };
    zeroize::Zeroize::zeroize(&mut sent);
    verdict
}

/// The coordinator tools' queue and forge for the agent server on stdio: the
/// daemon's database under `server.data_dir` (created and migrated if new) and,
/// with `[github]`, the App client (without a usable App key, requests for
/// GitHub sources answer that GitHub is unavailable).
pub async fn coordinator(
    config: &std::sync::Arc<crate::config::Config>,
) -> Result<crate::requests::Requests, McpError> {
    let data_dir = &config.server.data_dir;
    let pool = crate::db::open_configured(config).await.map_err(|e| {
        McpError::Binding(format!(
            "cannot open the job database (server.data_dir {}, or [database]): {e}",
            data_dir.display()
        ))
    })?;
    let forges = crate::forge::Forges::from_config(config)
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(target: "teammem::mcp", error = %e, "the GitHub App key could not be loaded; requests for GitHub sources will be refused");
            crate::forge::Forges::with_github(None)
        });
    Ok(crate::requests::Requests {
        config: config.clone(),
        queue: crate::queue::Queue::from_config(config, pool),
        forges,
        wake: None,
    })
}

/// Serves a prepared server (e.g. with a credentials provider) over stdin/stdout
/// until the client disconnects.
pub async fn serve_stdio(server: WikiServer) -> Result<(), McpError> {
    let binding = &server.context().binding;
    let writer = binding.writer.as_ref();
    tracing::debug!(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer_contract::{Refusal, capability_preamble, new_capability};
    use tokio::io::AsyncWriteExt;

    async fn verdict(sent: &[u8], then_close: bool) -> Result<(), Refusal> {
        let preamble = capability_preamble(&new_capability());
        verdict_for(&preamble, sent, then_close).await
    }

    async fn verdict_for(
        preamble: &crate::secrets::Secret,
        sent: &[u8],
        then_close: bool,
    ) -> Result<(), Refusal> {
        let (mut theirs, mut ours) = tokio::net::UnixStream::pair().unwrap();
        theirs.write_all(sent).await.unwrap();
        if then_close {
            theirs.shutdown().await.unwrap();
        }
        let verdict = admit(&mut ours, preamble, std::time::Duration::from_millis(200)).await;
        drop(theirs);
        verdict
    }

    #[tokio::test]
    async fn only_this_jobs_capability_preamble_is_admitted_and_nothing_after_it_is_read() {
        let capability = new_capability();
        let preamble = capability_preamble(&capability);
        // The right preamble, with MCP right behind it: admitted, and the MCP
        // bytes are still there for the session.
        let (mut theirs, mut ours) = tokio::net::UnixStream::pair().unwrap();
        let mut sent = preamble.expose().to_vec();
        sent.extend_from_slice(b"{\"jsonrpc\":\"2.0\"}\n");
        theirs.write_all(&sent).await.unwrap();
        admit(&mut ours, &preamble, std::time::Duration::from_millis(200))
            .await
            .unwrap();
        let mut rest = [0u8; 18];
        tokio::io::AsyncReadExt::read_exact(&mut ours, &mut rest)
            .await
            .unwrap();
        assert_eq!(&rest, b"{\"jsonrpc\":\"2.0\"}\n");

        // Another job's capability, MCP without a preamble: wrong.
        let other = capability_preamble(&new_capability());
        assert_eq!(
            verdict_for(&preamble, other.expose(), false).await,
            Err(Refusal::Wrong)
        );
        let initialize = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}"#;
        assert_eq!(verdict(initialize, false).await, Err(Refusal::Wrong));
        // A capability one digit off is as wrong as any other.
        let mut off = preamble.expose().to_vec();
        off[CAPABILITY_OFF] ^= 1;
        assert_eq!(
            verdict_for(&preamble, &off, false).await,
            Err(Refusal::Wrong)
        );
        // Nothing, a short prefix then the end, or silence: missing.
        assert_eq!(verdict(b"", true).await, Err(Refusal::Missing));
        assert_eq!(
            verdict_for(&preamble, &preamble.expose()[..40], true).await,
            Err(Refusal::Missing)
        );
        assert_eq!(
            verdict_for(&preamble, &preamble.expose()[..40], false).await,
            Err(Refusal::Missing)
        );
    }

    const CAPABILITY_OFF: usize = crate::writer_contract::CAPABILITY_PREFIX.len() + 3;
}
