//! The request a tool call runs in ([`CallInfo`]: who, which protocol era,
//! which extensions), and MCP Tasks (SEP-2663) backed by the job queue.
//!
//! Invariants:
//! - a task is offered only when the request declared
//!   `io.modelcontextprotocol/tasks` **and** speaks 2026-07-28 or later (a
//!   handshake-era client that declared the extension gets a synchronous
//!   answer);
//! - a task id is `job-<id>`: nothing about tasks lives in memory, so
//!   `tasks/get` and `tasks/cancel` read and steer the queue's database and
//!   survive a daemon restart;
//! - a task of a job the caller may not see is answered exactly like an
//!   unknown task (`-32602`).

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, DetailedTask, JsonObject, ProtocolVersion, Task, TaskPayload, TaskStatus,
};
use serde_json::Value;

use crate::queue::{Job, JobState};
use crate::tokens::Principal;

/// How often a client should poll `tasks/get`.
pub const POLL_INTERVAL_MS: u64 = 2_000;

/// Who is calling and how; one per tool call (a task-local, so the toolset
/// handlers keep their signature).
#[derive(Debug, Clone, Default)]
pub struct CallInfo {
    /// The repositories the caller may see; `None` for the local operator
    /// (`teammem mcp` on stdio acts with the local configuration).
    pub principal: Option<Principal>,
    /// Recorded as the actor of jobs and events.
    pub actor: String,
    pub protocol: Option<ProtocolVersion>,
    /// The request declared the tasks extension.
    pub tasks_declared: bool,
}

impl CallInfo {
    /// May this caller see or act on `repository`?
    pub fn may_access(&self, repository: &str) -> bool {
        self.principal
            .as_ref()
            .is_none_or(|p| p.may_access(repository))
    }

    /// Tasks need both the declared extension and the 2026-07-28 revision.
    pub fn tasks_allowed(&self) -> bool {
        self.tasks_declared && self.protocol.as_ref().is_some_and(speaks_stateless)
    }
}

/// `true` for 2026-07-28 and later (versions are ISO dates).
pub fn speaks_stateless(version: &ProtocolVersion) -> bool {
    version.as_str() >= ProtocolVersion::V_2026_07_28.as_str()
}

tokio::task_local! {
    static CALL: CallInfo;
}

/// The current call's info; outside a call, the local operator's.
pub fn current() -> CallInfo {
    CALL.try_with(Clone::clone).unwrap_or_else(|_| CallInfo {
        actor: "mcp:local".into(),
        ..CallInfo::default()
    })
}

/// Runs `future` with `info` as the current call.
pub async fn scope<F: std::future::Future>(info: CallInfo, future: F) -> F::Output {
    CALL.scope(info, future).await
}

/// The task id of a job.
pub fn task_id(job_id: i64) -> String {
    format!("job-{job_id}")
}

/// The job id of a task id, or the `-32602` error for anything else.
pub fn job_id(task_id: &str) -> Result<i64, ErrorData> {
    task_id
        .strip_prefix("job-")
        .and_then(|n| n.parse::<i64>().ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| unknown_task(task_id))
}

/// The JSON-RPC error for a task that does not exist (or is not visible).
pub fn unknown_task(task_id: &str) -> ErrorData {
    let shown: String = task_id.chars().take(80).collect();
    ErrorData::invalid_params(
        format!(
            "unknown task {shown:?}; task ids come from request_pr_reconciliation (job-<id>), and jobs of other repositories are not visible"
        ),
        None,
    )
}

fn iso(millis: i64) -> String {
    chrono::DateTime::from_timestamp_millis(millis)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The task's base fields for a job.
pub fn task_of(job: &Job) -> Task {
    let status = match job.state {
        JobState::Queued | JobState::Running => TaskStatus::Working,
        JobState::Cancelled => TaskStatus::Cancelled,
        _ => TaskStatus::Completed,
    };
    Task::new(
        task_id(job.id),
        status,
        iso(job.created_at),
        iso(job.updated_at),
    )
    .with_status_message(format!("job {} is {}", job.id, job.state))
    .with_poll_interval_ms(POLL_INTERVAL_MS)
}

/// The full task: `completed` carries the tool result (`result` = the job,
/// receipt included; `isError` for failed/rejected jobs).
pub fn detailed(job: &Job, result: impl FnOnce(&Job) -> CallToolResult) -> DetailedTask {
    let task = task_of(job);
    let payload = match task.status {
        TaskStatus::Working => TaskPayload::Working,
        TaskStatus::Cancelled => TaskPayload::Cancelled,
        _ => match serde_json::to_value(result(job)) {
            Ok(Value::Object(object)) => TaskPayload::Completed { result: object },
            _ => TaskPayload::Completed {
                result: JsonObject::new(),
            },
        },
    };
    DetailedTask::new(task, payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_need_the_extension_and_the_stateless_revision() {
        let info = |protocol: ProtocolVersion, declared| CallInfo {
            protocol: Some(protocol),
            tasks_declared: declared,
            ..CallInfo::default()
        };
        assert!(info(ProtocolVersion::V_2026_07_28, true).tasks_allowed());
        assert!(!info(ProtocolVersion::V_2025_11_25, true).tasks_allowed());
        assert!(!info(ProtocolVersion::V_2026_07_28, false).tasks_allowed());
        assert!(!CallInfo::default().tasks_allowed());
    }

    #[test]
    fn task_ids_round_trip_and_refuse_anything_else() {
        assert_eq!(job_id(&task_id(42)).unwrap(), 42);
        for bad in ["42", "job-", "job-0", "job--1", "job-x", "task-1"] {
            assert!(job_id(bad).is_err(), "{bad}");
        }
    }
}
