//! The job-bound wiki-writer child (`teammem mcp --wiki-writer`) and the rmcp
//! client the runner and its agents talk to it with.
//!
//! Invariants:
//! - only the runner starts a credentialed writer: the child's binding (its
//!   destination and the job's wiki token) arrives over the job's broker
//!   socket, inherited as descriptor [`BROKER_FD`]; an agent cannot
//!   make that descriptor, so a writer it starts itself holds no credential;
//! - the child starts with a cleared environment: only `TEAMMEM_CONFIG`,
//!   `TEAMMEM_WRITER_SOURCE`, `TEAMMEM_WRITER_JOB`, `TEAMMEM_WRITER_RANGE`,
//!   `TEAMMEM_WRITER_EVIDENCE`, `TEAMMEM_WRITER_BROKER_FD`, optionally
//!   `TEAMMEM_WRITER_AGENT_FD` (the listening socket a `command` agent
//!   reaches it through), `PATH` and `TEAMMEM_LOG` (a log filter); no
//!   credential is in its environment or argv;
//! - the agent endpoint's capability reaches the child only over its gate
//!   (descriptor [`AGENT_GATE_FD`], a socket the runner wrote it into and
//!   shut), never its environment, argv or a log line; what comes back on
//!   the gate (one byte per refused connection) is only counted;
//! - the child dies with the job: the process is spawned `kill_on_drop`, so a
//!   cancelled or timed-out job (its future dropped) kills it;
//! - tool results are read from the envelope's `structuredContent`; anything
//!   else is an error naming the tool.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, Tool};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde::Deserialize;
use serde_json::Value;

use crate::ids::Scope;
use crate::wiki::{ErrorKind, WriteStatus};
use crate::writer_contract::tools;
use crate::writer_contract::{AGENT_FD, AGENT_GATE_FD, BROKER_FD, ENV_LOG, Refusal, WriterEnv};

/// A `command` agent's endpoint as the writer child gets it: the listening
/// socket (descriptor [`AGENT_FD`]) and the child's end of the gate
/// (descriptor [`AGENT_GATE_FD`]), which already holds the capability every
/// connection must send first.
#[derive(Debug)]
pub struct AgentListener {
    listener: OwnedFd,
    /// The child's end of the gate.
    gate: OwnedFd,
    /// The runner's end: written and shut for writing here; the child's
    /// refusal notices arrive on it.
    notices: std::os::unix::net::UnixStream,
}

impl AgentListener {
    /// The endpoint `listener`, admitting connections that send `capability`.
    pub fn new(
        listener: OwnedFd,
        capability: &crate::secrets::Secret,
    ) -> std::io::Result<AgentListener> {
        use std::io::Write;
        // Both ends close-on-exec: only the writer child gets one, as its
        // descriptor AGENT_GATE_FD.
        let (mut notices, gate) = std::os::unix::net::UnixStream::pair()?;
        let mut line = capability.expose().to_vec();
        line.push(b'\n');
        let written = notices.write_all(&line);
        zeroize::Zeroize::zeroize(&mut line);
        written?;
        notices.shutdown(std::net::Shutdown::Write)?;
        Ok(AgentListener {
            listener,
            gate: OwnedFd::from(gate),
            notices,
        })
    }
}

/// Everything the writer child is bound to.
#[derive(Debug)]
pub struct WriterLaunch {
    /// The `teammem` binary (`std::env::current_exe()` in the daemon).
    pub program: PathBuf,
    pub config_path: PathBuf,
    /// The one source (`owner/name`) the child serves.
    pub source: String,
    pub job_id: i64,
    /// What the job reconciles (the `Teammem-Range` trailer's value).
    pub range: Scope,
    pub evidence: PathBuf,
    /// The child's end of the job's broker socket pair (the runner always
    /// gives one; without it the child serves its configuration's wiki with
    /// no credential).
    pub broker: Option<OwnedFd>,
    /// A listening Unix socket the child also serves MCP on (a `command`
    /// agent's endpoint), with the capability a connection must bring.
    pub agent_listener: Option<AgentListener>,
    /// `PATH` for the child; the daemon's own by default.
    pub path: Option<OsString>,
    /// `TEAMMEM_LOG` for the child (a log filter such as `debug`, never a
    /// secret); the daemon's own by default.
    pub log_filter: Option<OsString>,
}

impl WriterLaunch {
    /// The child's command: argv carries no secret, the environment only the
    /// binding, and descriptors 3 (broker), 4 (agent listener) and 5 (its
    /// gate) are installed in the child just before it executes.
    pub fn command(&self) -> std::io::Result<tokio::process::Command> {
        let env = WriterEnv {
            config_path: self.config_path.clone(),
            source: self.source.clone(),
            job: Some(self.job_id.to_string()),
            range: Some(self.range.clone()),
            evidence: Some(self.evidence.clone()),
            token: None,
            broker: self.broker.is_some(),
            agent: self.agent_listener.is_some(),
        };
        let mut cmd = tokio::process::Command::new(&self.program);
        cmd.arg("mcp")
            .arg("--wiki-writer")
            .env_clear()
            .envs(env.encode())
            .kill_on_drop(true);
        if let Some(path) = &self.path {
            cmd.env("PATH", path);
        }
        if let Some(filter) = &self.log_filter {
            cmd.env(ENV_LOG, filter);
        }
        // Copies above every target number, so installing one cannot close
        // the other; close-on-exec, so no other child of the daemon gets them.
        let broker = self.broker.as_ref().map(above_targets).transpose()?;
        let agent = self
            .agent_listener
            .as_ref()
            .map(|a| {
                Ok::<_, std::io::Error>((above_targets(&a.listener)?, above_targets(&a.gate)?))
            })
            .transpose()?;
        let sources = (
            broker.as_ref().map(AsRawFd::as_raw_fd),
            agent
                .as_ref()
                .map(|(listener, gate)| (listener.as_raw_fd(), gate.as_raw_fd())),
        );
        // SAFETY: the closure runs between fork and exec and only calls dup2,
        // which is async-signal-safe; the descriptors it copies are kept open
        // by the closure itself until the command is dropped.
        unsafe {
            cmd.pre_exec(move || {
                let _keep = (&broker, &agent);
                if let Some(broker) = sources.0
                    && libc::dup2(broker, BROKER_FD) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some((listener, gate)) = sources.1
                    && (libc::dup2(listener, AGENT_FD) < 0 || libc::dup2(gate, AGENT_GATE_FD) < 0)
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(cmd)
    }
}

/// A close-on-exec duplicate of `fd` numbered above the child's targets.
fn above_targets(fd: &OwnedFd) -> std::io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor this function owns.
    let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) };
    if copy < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `copy` is a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// A tool's envelope: `success`, `outcome`, `result`, `error`.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub success: bool,
    pub outcome: String,
    pub result: Value,
    /// `error.type` (e.g. `conflict`), empty on success.
    pub error_type: String,
    pub error_message: String,
}

impl Envelope {
    pub fn from_value(tool: &str, value: &Value) -> Result<Envelope, String> {
        let wire = WireEnvelope::deserialize(value).map_err(|_| {
            format!("the wiki writer's answer to {tool} is not an envelope (no success field)")
        })?;
        let error = wire.error.unwrap_or_default();
        Ok(Envelope {
            success: wire.success,
            outcome: wire.outcome.unwrap_or_default(),
            result: wire.result,
            error_type: error.kind.unwrap_or_default(),
            error_message: error.message.unwrap_or_default(),
        })
    }

    /// `Ok(result)` on success, else the error as one line.
    pub fn into_result(self, tool: &str) -> Result<Value, ToolFailure> {
        if self.success {
            Ok(self.result)
        } else {
            Err(ToolFailure {
                tool: tool.to_owned(),
                kind: error_kind(&self.error_type),
                outcome: self.outcome,
                message: self.error_message,
            })
        }
    }
}

/// An envelope as it arrives; fields other than `success` may be absent or
/// null (the writer's `mcp/envelope.rs` makes it).
#[derive(Deserialize)]
struct WireEnvelope {
    success: bool,
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    result: Value,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Default, Deserialize)]
struct WireError {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// A tool call that ended in an envelope error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    pub tool: String,
    /// `error.type`: `conflict`, `timeout`, ... (one the writer never sends
    /// is `internal_error`).
    pub kind: ErrorKind,
    /// `not_applied` or `unknown`.
    pub outcome: String,
    pub message: String,
}

impl ToolFailure {
    /// Causes that may clear up by trying again later.
    pub fn is_transient(&self) -> bool {
        matches!(
            self.kind,
            ErrorKind::Conflict
                | ErrorKind::Timeout
                | ErrorKind::TransportError
                | ErrorKind::RateLimited
                | ErrorKind::UpstreamError
                | ErrorKind::OutcomeUnknown
        )
    }
}

impl std::fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} failed with {} ({}): {}",
            self.tool,
            self.kind.as_str(),
            self.outcome,
            self.message.trim_end_matches('.')
        )
    }
}

/// The runner's connection to its writer child.
pub struct WriterClient {
    service: RunningService<RoleClient, ()>,
    pid: Option<u32>,
    /// While set, every tool call counts as a step of this agent kind in
    /// `teammem_agent_steps_total` (the runner's own reads do not).
    agent: std::sync::Mutex<Option<&'static str>>,
    /// Counts the agent endpoint's refusals until the child closes its gate.
    refusals: Option<AbortOnDrop>,
}

/// A task that ends with its owner.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Reads the refusal notices the child sends over its gate into
/// `teammem_agent_endpoint_refusals_total`, until the child's end closes.
fn count_refusals(notices: std::os::unix::net::UnixStream) -> Option<AbortOnDrop> {
    use tokio::io::AsyncReadExt;
    let notices = notices
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(notices))
        .ok()?;
    Some(AbortOnDrop(tokio::spawn(async move {
        let mut notices = notices;
        let mut buf = [0u8; 64];
        while let Ok(n @ 1..) = notices.read(&mut buf).await {
            for refusal in buf[..n].iter().filter_map(|b| Refusal::from_byte(*b)) {
                crate::metrics::AGENT_ENDPOINT_REFUSALS.inc(&[refusal.label()]);
            }
        }
    })))
}

impl WriterClient {
    /// Spawns the child and completes the MCP handshake.
    pub async fn spawn(launch: WriterLaunch) -> Result<WriterClient, String> {
        let command = launch.command().map_err(|e| {
            format!("cannot prepare the wiki writer's descriptors: {e}; the daemon may be out of file descriptors")
        })?;
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start the wiki writer {} mcp --wiki-writer: {e}; check the teammem installation",
                    launch.program.display()
                )
            })?;
        let pid = transport.id();
        // The child holds its end of the gate now; the daemon's copy goes,
        // so the notices end when the child does.
        let refusals = launch
            .agent_listener
            .and_then(|AgentListener { notices, .. }| count_refusals(notices));
        let service = ().serve(transport).await.map_err(|e| {
            format!("the wiki writer did not complete the MCP handshake: {e}; see its stderr")
        })?;
        Ok(WriterClient {
            service,
            pid,
            agent: std::sync::Mutex::new(None),
            refusals,
        })
    }

    /// The child's process id (for tests and logs).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Counts the following tool calls as steps of `agent` (`None`: stop).
    pub fn count_steps_as(&self, agent: Option<&'static str>) {
        *self.agent.lock().unwrap_or_else(|e| e.into_inner()) = agent;
    }

    /// The tools the writer offers an agent (not those only the runner calls).
    pub async fn tools(&self) -> Result<Vec<Tool>, String> {
        let mut tools = self
            .service
            .list_all_tools()
            .await
            .map_err(|e| format!("listing the wiki writer's tools failed: {e}"))?;
        tools.retain(|tool| !tools::RUNNER_ONLY_TOOLS.contains(&tool.name.as_ref()));
        Ok(tools)
    }

    /// Calls a tool for an agent (a model's or a command's call relayed);
    /// `Err(String)` for a protocol-level failure (unknown tool, unparseable
    /// arguments, a dead child, a tool only the runner calls), else the
    /// envelope.
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<Envelope, String> {
        if tools::RUNNER_ONLY_TOOLS.contains(&tool) {
            return Err(format!(
                "{tool} is the runner's alone: the job's changes are published when it succeeds"
            ));
        }
        self.call_any(tool, arguments).await
    }

    /// Calls any tool, the runner's own included.
    pub(super) async fn call_any(&self, tool: &str, arguments: Value) -> Result<Envelope, String> {
        let Value::Object(arguments) = arguments else {
            return Err(format!("the arguments of {tool} must be a JSON object"));
        };
        let agent = *self.agent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(agent) = agent {
            crate::metrics::AGENT_STEPS.inc(&[agent]);
        }
        let result = self
            .service
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
            .await
            .map_err(|e| format!("calling {tool} on the wiki writer failed: {e}"))?;
        let value = result.structured_content.clone().ok_or_else(|| {
            format!("the wiki writer's answer to {tool} has no structuredContent")
        })?;
        let envelope = Envelope::from_value(tool, &value)?;
        if tool == tools::PUBLISH_JOB_CHANGES {
            crate::metrics::WIKI_PUBLISHES.inc(&[publish_outcome(&envelope)]);
        }
        Ok(envelope)
    }

    /// Calls a tool and returns its result, or the envelope error.
    pub async fn result(&self, tool: &str, arguments: Value) -> Result<Value, CallError> {
        self.call_any(tool, arguments)
            .await
            .map_err(CallError::Protocol)?
            .into_result(tool)
            .map_err(CallError::Tool)
    }

    /// Closes the connection; the child exits when its stdin closes. The
    /// refusals it reported are counted before this returns (bounded).
    pub async fn close(self) {
        let _ = self.service.cancel().await;
        if let Some(mut refusals) = self.refusals {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), &mut refusals.0).await;
        }
    }
}

/// The wiki engine's error type named `error_type` on the wire, if it is one.
fn known_error(error_type: &str) -> Option<ErrorKind> {
    serde_json::from_value(Value::String(error_type.to_owned())).ok()
}

/// The error type of an envelope error as the enum; a name the writer never
/// sends (it speaks only [`ErrorKind`]) is an internal error.
fn error_kind(error_type: &str) -> ErrorKind {
    known_error(error_type).unwrap_or(ErrorKind::InternalError)
}

/// The `outcome` label of `teammem_wiki_publishes_total` for a write's
/// envelope: `updated`, `no_change`, or the error type; anything outside
/// these closed sets is `other`, so the series stay bounded.
fn publish_outcome(envelope: &Envelope) -> &'static str {
    if envelope.success {
        #[derive(Deserialize)]
        struct Written {
            status: WriteStatus,
        }
        return match Written::deserialize(&envelope.result) {
            Ok(Written {
                status: WriteStatus::Updated,
            }) => "updated",
            Ok(Written {
                status: WriteStatus::NoChange,
            }) => "no_change",
            Err(_) => "other",
        };
    }
    known_error(&envelope.error_type).map_or("other", ErrorKind::as_str)
}

/// A failed call: the protocol broke, or the tool answered with an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    Protocol(String),
    Tool(ToolFailure),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Protocol(message) => f.write_str(message),
            CallError::Tool(failure) => failure.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_carries_only_the_binding() {
        let (_ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let launch = WriterLaunch {
            program: "/usr/bin/teammem".into(),
            config_path: "/etc/teammem.toml".into(),
            source: "octo/app".into(),
            job_id: 9,
            range: Scope::parse(&format!("{}..{}", "a".repeat(40), "b".repeat(40))).unwrap(),
            evidence: "/data/jobs/9/evidence.json".into(),
            broker: Some(OwnedFd::from(theirs)),
            agent_listener: None,
            path: Some("/usr/bin".into()),
            log_filter: Some("debug".into()),
        };
        let cmd = launch.command().unwrap();
        let std = cmd.as_std();
        let args: Vec<_> = std.get_args().collect();
        assert_eq!(args, ["mcp", "--wiki-writer"]);
        let mut envs: Vec<(String, String)> = std
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.unwrap().to_string_lossy().into_owned(),
                )
            })
            .collect();
        envs.sort();
        let names: Vec<&str> = envs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "PATH",
                "TEAMMEM_CONFIG",
                "TEAMMEM_LOG",
                "TEAMMEM_WRITER_BROKER_FD",
                "TEAMMEM_WRITER_EVIDENCE",
                "TEAMMEM_WRITER_JOB",
                "TEAMMEM_WRITER_RANGE",
                "TEAMMEM_WRITER_SOURCE",
            ]
        );
        assert!(envs.contains(&("TEAMMEM_WRITER_BROKER_FD".into(), "3".into())));
    }

    #[test]
    fn the_agent_endpoints_capability_is_neither_in_the_environment_nor_in_argv() {
        use std::io::Read;
        let (_ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let (listener, _) = std::os::unix::net::UnixStream::pair().unwrap();
        let capability = crate::writer_contract::new_capability();
        let agent = AgentListener::new(OwnedFd::from(listener), &capability).unwrap();
        let launch = WriterLaunch {
            program: "/usr/bin/teammem".into(),
            config_path: "/etc/teammem.toml".into(),
            source: "octo/app".into(),
            job_id: 9,
            range: Scope::parse(&format!("{}..{}", "a".repeat(40), "b".repeat(40))).unwrap(),
            evidence: "/data/jobs/9/evidence.json".into(),
            broker: Some(OwnedFd::from(theirs)),
            agent_listener: Some(agent),
            path: None,
            log_filter: None,
        };
        let cmd = launch.command().unwrap();
        let text = capability.expose_str().unwrap();
        let std = cmd.as_std();
        assert!(std.get_args().all(|a| !a.to_string_lossy().contains(text)));
        let envs: Vec<(String, String)> = std
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.unwrap().to_string_lossy().into_owned(),
                )
            })
            .collect();
        assert!(envs.contains(&("TEAMMEM_WRITER_AGENT_FD".into(), "4".into())));
        assert!(envs.iter().all(|(_, v)| !v.contains(text)), "{envs:?}");
        // The gate the child gets holds the capability, then end of input.
        let gate = launch.agent_listener.as_ref().unwrap();
        let mut sent = String::new();
        std::os::unix::net::UnixStream::from(gate.gate.try_clone().unwrap())
            .read_to_string(&mut sent)
            .unwrap();
        assert_eq!(sent, format!("{text}\n"));
    }

    #[test]
    fn publish_outcomes_are_a_closed_set() {
        let envelope = |v: Value| Envelope::from_value("write_wiki_pages", &v).unwrap();
        let ok = |status: &str| {
            envelope(
                serde_json::json!({"success": true, "outcome": "completed", "result": {"status": status}}),
            )
        };
        let err = |kind: &str| {
            envelope(
                serde_json::json!({"success": false, "outcome": "not_applied", "result": null, "error": {"type": kind, "message": "m"}}),
            )
        };
        assert_eq!(publish_outcome(&ok("updated")), "updated");
        assert_eq!(publish_outcome(&ok("no-change")), "no_change");
        assert_eq!(publish_outcome(&ok("weird")), "other");
        assert_eq!(publish_outcome(&err("conflict")), "conflict");
        assert_eq!(publish_outcome(&err("outcome_unknown")), "outcome_unknown");
        assert_eq!(publish_outcome(&err("made-up\"")), "other");
    }

    #[test]
    fn envelopes_become_results_or_failures() {
        let ok = serde_json::json!({"success": true, "outcome": "completed", "result": {"sha": "x"}, "error": null});
        assert_eq!(
            Envelope::from_value("t", &ok)
                .unwrap()
                .into_result("t")
                .unwrap()["sha"],
            "x"
        );
        let conflict = serde_json::json!({"success": false, "outcome": "not_applied", "result": null,
            "error": {"type": "conflict", "message": "wiki base changed.", "http_status": null}});
        let failure = Envelope::from_value("patch_wiki_pages", &conflict)
            .unwrap()
            .into_result("patch_wiki_pages")
            .unwrap_err();
        assert!(failure.is_transient());
        assert_eq!(
            failure.to_string(),
            "patch_wiki_pages failed with conflict (not_applied): wiki base changed"
        );
        assert!(Envelope::from_value("t", &serde_json::json!("text")).is_err());
    }
}
