//! Which agent runs a job: [`run`] hands the job's [`AgentTask`] to the
//! configured kind (the builtin agent, an OpenAI-compatible model or an
//! external command). The contract the kinds share is in `agent.rs`, below
//! all of them, so no kind imports this file or another kind.
//!
//! Invariant: a kind that cannot start (an unset API key variable, a command
//! agent without its settings or endpoint) ends the run with a permanent
//! [`AgentError`] naming what to set, never a retry loop.

use std::path::Path;

use super::agent::{AgentError, AgentOutcome, AgentTask};
use super::command::{CommandSettings, Endpoint};
use super::writer::WriterClient;
use crate::config::Agent;

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
