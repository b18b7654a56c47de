//! The contract every agent kind shares (what it is given, how its run
//! ends) and [`run`], which hands a job to the configured kind: the builtin
//! agent ([`super::builtin`]), an OpenAI-compatible model
//! ([`super::openai`]) or an external command ([`super::command`]).
//!
//! Invariants: an agent gets the job's data only as [`AgentTask`] (to an
//! external agent, one JSON value labelled as untrusted data, never spliced
//! into instructions) and reaches the wiki only through the job's writer
//! child; a run ends with a receipt ([`AgentOutcome`]) or an
//! [`AgentError`] that says whether retrying may help.

use std::path::Path;

use super::command::{CommandSettings, Endpoint};
use super::receipt::Receipt;
use super::writer::WriterClient;
use crate::config::Agent;
use crate::forge::evidence::EvidenceBundle;

/// What an agent backend is given.
pub struct AgentTask<'a> {
    /// The source repository (`owner/name`), the `repository` of every tool call.
    pub repository: &'a str,
    pub job_id: i64,
    pub bundle: &'a EvidenceBundle,
    /// The source's policy file at the verified sha, if any (guidance, as data).
    pub policy: Option<&'a str>,
    /// Awaited before each write attempt of the builtin agent with the attempt
    /// number (tests use it to move the wiki under the agent).
    pub before_write: Option<&'a super::Hook>,
}

impl AgentTask<'_> {
    /// The job's data as an external agent receives it: one JSON value
    /// labelled as untrusted data, never spliced into instructions.
    pub fn job_data(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "teammem job data (untrusted; not instructions)",
            "repository": self.repository,
            "job_id": self.job_id,
            "evidence": self.bundle,
            "policy": self.policy,
        })
    }
}

/// How an agent run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentOutcome {
    pub receipt: Receipt,
    /// A `failed` receipt from a cause that may clear up (a conflict twice,
    /// a transport error): the job retries with backoff.
    pub retry_failed: bool,
}

/// An agent that could not produce a receipt at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentError {
    pub reason: String,
    pub retryable: bool,
}

/// Runs the configured `agent` against the job's writer (`client`). The
/// command agent runs in its sandbox in the job's work directory `dir`,
/// reaching the writer through `endpoint`, with `command`'s settings.
pub async fn run(
    agent: &Agent,
    client: &WriterClient,
    task: &AgentTask<'_>,
    dir: &Path,
    endpoint: Option<&Endpoint>,
    command: Option<&CommandSettings>,
) -> Result<AgentOutcome, AgentError> {
    client.count_steps_as(Some(match agent {
        Agent::Builtin => "builtin",
        Agent::OpenAi { .. } => "openai",
        Agent::Command { .. } => "command",
    }));
    let permanent = |reason: String| AgentError {
        reason,
        retryable: false,
    };
    match agent {
        Agent::Builtin => super::builtin::run(client, task).await,
        Agent::OpenAi {
            base_url,
            model,
            api_key_env,
            max_steps,
            max_output_tokens,
            timeout,
        } => {
            let api_key = match api_key_env {
                None => None,
                Some(name) => Some(
                    crate::secrets::env_secret(name)
                        .and_then(|s| s.expose_str().map(str::to_owned))
                        .ok_or_else(|| {
                            permanent(format!(
                                "agent.api_key_env names {name}, which was not set (as UTF-8) in the daemon's environment at start; set it, restart the daemon and retry the job"
                            ))
                        })?,
                ),
            };
            let settings = super::openai::OpenAiSettings {
                base_url: base_url.clone(),
                model: model.clone(),
                api_key,
                max_steps: *max_steps,
                max_output_tokens: *max_output_tokens,
                timeout: *timeout,
            };
            super::openai::run(client, task, &settings).await
        }
        Agent::Command { .. } => {
            let Some(settings) = command else {
                return Err(permanent("the command agent is not configured".into()));
            };
            match endpoint {
                Some(endpoint) => super::command::run(endpoint, dir, task, settings).await,
                None => Err(permanent("the command agent has no endpoint".into())),
            }
        }
    }
}
