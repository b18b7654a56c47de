//! The contract every agent kind shares: what it is given and how its run
//! ends. Each kind (the builtin agent, [`super::builtin`]; an
//! OpenAI-compatible model, [`super::openai`]; an external command,
//! [`super::command`]) builds on this file and none of them on another;
//! [`super::agent_kinds::run`] hands a job to the configured kind.
//!
//! Invariants: an agent gets the job's data only as [`AgentTask`] (to an
//! external agent, one JSON value labelled as untrusted data, never spliced
//! into instructions) and reaches the wiki only through the job's writer
//! child; a run ends with a receipt ([`AgentOutcome`]) or an
//! [`AgentError`] that says whether retrying may help.

use super::receipt::Receipt;
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
