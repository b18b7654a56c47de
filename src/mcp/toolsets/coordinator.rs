//! The coordinator toolset for coding agents: ask for one merged pull request
//! to be reconciled into the team memory, and follow the queue's jobs.
//!
//! Served by the agent server only (stdio `teammem mcp --config FILE` and the
//! daemon's `/mcp`). `request_pr_reconciliation` is the one write (it enqueues a
//! job; never destructive; idempotent: the same PR and merge commit name the
//! same job; open-world: it asks the forge), so `--read-only` removes it.
//!
//! Invariants: a caller sees and acts on only the repositories its token may
//! see (a job of another repository is `not_found`, a named repository outside
//! the scope `permission_denied`); the request goes through the same checks as
//! `POST /v1/requests` ([`crate::requests::Requests`]); a task is
//! answered only when [`tasks::CallInfo::tasks_allowed`].

use rmcp::model::JsonObject;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Answer, CallFuture, Hints, ServerKind, ToolDef, Toolset, parse_arguments};
use crate::mcp::context::Context;
use crate::mcp::envelope::{ErrorKind, ResolvedWiki, ToolError};
use crate::mcp::tasks;
use crate::queue::{Job, JobFilter, JobState};
use crate::requests::{Kind, RequestError};
use crate::requests::{MAX_PULL_NUMBER, check_pull_number};

pub const TOOLSET: Toolset = Toolset {
    name: "coordinator",
    served_by: &[ServerKind::Agent],
    tools: &[
        ToolDef {
            name: "request_pr_reconciliation",
            title: "Request a PR reconciliation",
            description: "Ask teammem to bring the team memory (wiki) of a source up to date with one merged pull request. Verifies that the PR is merged into the default branch, then queues a job (the same PR twice is the same job). Answers with job_id and state; clients speaking MCP 2026-07-28 with the tasks extension get a task to poll instead. Follow the job with get_job.",
            hints: Hints {
                read_only: false,
                destructive: false,
                idempotent: true,
                open_world: true,
            },
            input_schema: request_schema,
            handler: request_pr_reconciliation,
        },
        ToolDef {
            name: "get_job",
            title: "Get a job",
            description: "One reconciliation job: its source, state (queued, running, succeeded, no_change, skipped, failed, cancelled, rejected), attempts, last error and, when finished, its receipt.",
            hints: Hints::READ,
            input_schema: get_job_schema,
            handler: get_job,
        },
        ToolDef {
            name: "list_jobs",
            title: "List jobs",
            description: "The newest reconciliation jobs you may see, optionally of one repository and/or in one state; limit 1-100 (default 20).",
            hints: Hints::READ,
            input_schema: list_jobs_schema,
            handler: list_jobs,
        },
    ],
};

fn request_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "repository": super::repository_schema(),
            "pull_number": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_PULL_NUMBER,
                "description": "The number of a pull request merged into the source's default branch",
            },
        },
        "required": ["repository", "pull_number"],
        "additionalProperties": false,
    })
}

fn get_job_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "job_id": {"type": "integer", "minimum": 1, "description": "The job id request_pr_reconciliation or list_jobs returned"},
        },
        "required": ["job_id"],
        "additionalProperties": false,
    })
}

fn list_jobs_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "repository": {"type": "string", "description": "Only jobs of this source repository (owner/name)"},
            "state": {
                "type": "string",
                "enum": JobState::ALL.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "description": "Only jobs in this state",
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "At most this many jobs, newest first (default 20)"},
        },
        "required": [],
        "additionalProperties": false,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestArgs {
    repository: String,
    pull_number: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetJobArgs {
    job_id: i64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListJobsArgs {
    repository: Option<String>,
    state: Option<String>,
    limit: Option<i64>,
}

/// The coordinator of a context, or the envelope error of a server without one.
fn coordinator(context: &Context) -> Result<&crate::requests::Requests, ToolError> {
    context.coordinator.as_ref().ok_or_else(|| {
        ToolError::configuration(
            "this server has no job queue; run teammem mcp with --config naming the daemon's configuration",
        )
    })
}

/// A request refusal as an envelope error (same sentence, a tool kind).
pub fn tool_error(e: RequestError) -> ToolError {
    let kind = match e.kind {
        Kind::NotFound => ErrorKind::NotFound,
        Kind::Conflict => ErrorKind::Conflict,
        Kind::Forbidden => ErrorKind::PermissionDenied,
        Kind::Unauthorized => ErrorKind::AuthenticationError,
        Kind::Unavailable => ErrorKind::UpstreamError,
        Kind::InvalidField => ErrorKind::InvalidInput,
        Kind::Internal => ErrorKind::InternalError,
    };
    let message = match e.retry_after {
        Some(secs) => format!("{} ({}); retry in {secs} s", e.message, e.code),
        None => format!("{} ({})", e.message, e.code),
    };
    ToolError::new(kind, message)
}

/// The job as agents see it.
pub fn job_view(job: &Job) -> Value {
    let columns = job.kind.columns();
    json!({
        "job_id": job.id,
        "task_id": tasks::task_id(job.id),
        "repository": job.source,
        "state": job.state,
        "finished": job.state.is_terminal(),
        "origin": job.origin,
        "kind": job.kind.name(),
        "pull_number": columns.pull_number,
        "merge_sha": columns.merge_sha,
        "push_before": columns.push_before,
        "push_after": columns.push_after,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "last_error": job.last_error,
        "receipt": job.receipt,
        "actor": job.actor,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
        "finished_at": job.finished_at,
    })
}

fn identity_of(context: &Context, job: &Job) -> Option<ResolvedWiki> {
    context
        .binding
        .config
        .source(&job.source)
        .map(|s| ResolvedWiki {
            source_repository: s.repository.to_string(),
            wiki_repository: s.wiki_repository.to_string(),
        })
}

fn request_pr_reconciliation(context: &Context, arguments: JsonObject) -> CallFuture<'_> {
    Box::pin(async move {
        let args: RequestArgs = parse_arguments("request_pr_reconciliation", arguments)?;
        let resolved = match context.resolve(&args.repository) {
            Ok(resolved) => resolved,
            Err(e) => return Ok(Answer::new(None, Err(e))),
        };
        let identity = Some(resolved.identity.clone());
        let outcome: Result<_, ToolError> = async {
            let requests = coordinator(context)?;
            check_pull_number(args.pull_number).map_err(tool_error)?;
            let info = tasks::current();
            let accepted = requests
                .request(&resolved.source, args.pull_number, &info.actor)
                .await
                .map_err(tool_error)?;
            Ok((accepted, info))
        }
        .await;
        match outcome {
            Err(e) => Ok(Answer::new(identity, Err(e))),
            Ok((accepted, info)) => {
                let job = &accepted.enqueued.job;
                if info.tasks_allowed() {
                    return Ok(Answer::task(identity, tasks::task_of(job)));
                }
                let mut result = job_view(job);
                result["new"] = Value::Bool(accepted.is_new());
                result["next"] = Value::String(format!(
                    "call get_job with job_id {} until finished is true",
                    job.id
                ));
                Ok(Answer::new(identity, Ok(result)))
            }
        }
    })
}

/// A job the current caller may see.
pub async fn visible_job(context: &Context, id: i64) -> Result<Job, ToolError> {
    let requests = coordinator(context)?;
    let not_found = || {
        ToolError::not_found(format!(
            "job {id} not found; list_jobs shows the jobs you may see"
        ))
    };
    if id < 1 {
        return Err(ToolError::invalid_input(format!(
            "job_id must be a positive job id, got {id}"
        )));
    }
    let job = match requests.queue.get(id).await {
        Ok(job) => job,
        Err(crate::queue::QueueError::NotFound { .. }) => return Err(not_found()),
        Err(e) => return Err(ToolError::internal("reading the job", e)),
    };
    if tasks::current().may_access(&job.source) {
        Ok(job)
    } else {
        Err(not_found())
    }
}

fn get_job(context: &Context, arguments: JsonObject) -> CallFuture<'_> {
    Box::pin(async move {
        let args: GetJobArgs = parse_arguments("get_job", arguments)?;
        Ok(match visible_job(context, args.job_id).await {
            Ok(job) => Answer::new(identity_of(context, &job), Ok(job_view(&job))),
            Err(e) => Answer::new(None, Err(e)),
        })
    })
}

fn list_jobs(context: &Context, arguments: JsonObject) -> CallFuture<'_> {
    Box::pin(async move {
        let args: ListJobsArgs = parse_arguments("list_jobs", arguments)?;
        let outcome: Result<Value, ToolError> = async {
            let requests = coordinator(context)?;
            let info = tasks::current();
            let limit = match args.limit {
                None => 20,
                Some(n @ 1..=100) => n as u32,
                Some(n) => {
                    return Err(ToolError::invalid_input(format!(
                        "limit must be 1 to 100, got {n}"
                    )));
                }
            };
            let state = match args.state.as_deref() {
                None => None,
                Some(s) => Some(s.parse::<JobState>().map_err(|e| {
                    ToolError::invalid_input(format!("state: {e}"))
                })?),
            };
            if let Some(r) = &args.repository
                && !info.may_access(r)
            {
                return Err(ToolError::permission_denied(format!(
                    "this token may not see jobs of {}; list_jobs without repository shows the jobs you may see",
                    r.chars().take(100).collect::<String>()
                )));
            }
            let page = requests
                .queue
                .list(&JobFilter {
                    repository: args.repository.clone(),
                    allowed_repositories: info
                        .principal
                        .as_ref()
                        .filter(|p| !p.repositories.is_empty())
                        .map(|p| p.repositories.clone()),
                    state,
                    limit,
                    cursor: None,
                })
                .await
                .map_err(|e| ToolError::internal("listing jobs", e))?;
            Ok(json!({
                "jobs": page.jobs.iter().map(job_view).collect::<Vec<_>>(),
                "truncated": page.next_cursor.is_some(),
            }))
        }
        .await;
        Ok(Answer::new(None, outcome))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_keep_their_sentence_and_code() {
        let e = tool_error(RequestError::new(
            Kind::Conflict,
            "pull_not_merged",
            "pull request #3 of o/r is not merged",
        ));
        assert_eq!(e.kind, ErrorKind::Conflict);
        assert!(e.message.contains("pull_not_merged"), "{}", e.message);
    }
}
