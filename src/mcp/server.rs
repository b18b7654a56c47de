//! The rmcp server handler: `tools/list` and `tools/call` straight from the
//! toolset tables, filtered by the server's profile.
//!
//! Invariants: only tools the filter exposes are listed or run (anything else is
//! the JSON-RPC "unknown tool" error); every tool result goes through
//! [`envelope::respond`]; JSON-RPC error messages are checked for credentials too.
//! Every call runs inside its [`tasks::CallInfo`] (caller scope, protocol era,
//! declared extensions); a server marked remote (the daemon's `/mcp`) refuses a
//! call that carries no authenticated principal instead of acting unscoped.
//! The tasks extension is advertised only by servers with a job queue; task
//! state is read from and steered through the queue (see [`tasks`]).

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CreateTaskResult, GetTaskParams,
    GetTaskResult, Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::context::{Binding, Context};
use super::envelope::{self, ErrorKind, ToolError};
use super::tasks::{self, CallInfo};
use super::toolsets::{self, ToolDef, coordinator};
use crate::queue::JobState;
use crate::tokens::Principal;

const INSTRUCTIONS: &str = "teammem's team memory: the wiki of each configured source repository. \
Every tool takes repository = the source (owner/name) and reports the resolved wiki_repository. \
Results are an envelope {success, outcome, result, error}; read error.message and correct the call. \
Read a snapshot first and pin reads to its sha.";

/// One MCP server process (or one in-process instance in tests).
#[derive(Clone)]
pub struct WikiServer {
    context: Arc<Context>,
    tools: Arc<Vec<&'static ToolDef>>,
    /// Served over HTTP: every call must carry an authenticated [`Principal`]
    /// in the HTTP request's extensions.
    remote: bool,
}

impl WikiServer {
    pub fn new(binding: Binding) -> Self {
        Self::with_context(Context::new(binding))
    }

    /// A server over a prepared context (e.g. one with a [`WikiCredentials`]
    /// provider).
    ///
    /// [`WikiCredentials`]: super::context::WikiCredentials
    pub fn with_context(context: Context) -> Self {
        let tools = toolsets::exposed(context.binding.profile);
        Self {
            context: Arc::new(context),
            tools: Arc::new(tools),
            remote: false,
        }
    }

    /// The same server for a job's agent (its endpoint's connections): the
    /// tools only the runner calls (`publish_job_changes`) are neither listed
    /// nor run.
    pub fn for_agent(&self) -> Self {
        let tools = self
            .tools
            .iter()
            .copied()
            .filter(|tool| !crate::writer_contract::tools::RUNNER_ONLY_TOOLS.contains(&tool.name))
            .collect();
        Self {
            context: self.context.clone(),
            tools: Arc::new(tools),
            remote: self.remote,
        }
    }

    /// The same server for HTTP callers: each call is limited to the principal
    /// the HTTP layer authenticated (see `crate::http::mcp`).
    pub fn remote(mut self) -> Self {
        self.remote = true;
        self
    }

    /// Who is calling and how (see [`CallInfo`]).
    fn call_info(&self, request: &RequestContext<RoleServer>) -> Result<CallInfo, ErrorData> {
        let principal = request
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Principal>())
            .cloned();
        if self.remote && principal.is_none() {
            return Err(ErrorData::invalid_request(
                "this request carries no authenticated caller; send Authorization: Bearer <token>",
                None,
            ));
        }
        Ok(CallInfo {
            actor: principal
                .as_ref()
                .map(|p| {
                    if p.name.starts_with("github:") {
                        p.name.clone()
                    } else {
                        format!("token:{}", p.name)
                    }
                })
                .unwrap_or_else(|| "mcp:local".into()),
            principal,
            protocol: request.protocol_version(),
            tasks_declared: request
                .client_capabilities()
                .is_some_and(|caps| caps.supports_tasks()),
        })
    }

    /// The tool result a finished job's task completes with.
    fn job_result(&self, job: &crate::queue::Job) -> rmcp::model::CallToolResult {
        let identity =
            self.context
                .binding
                .config
                .source(&job.source)
                .map(|s| envelope::Identity {
                    source_repository: s.repository.to_string(),
                    wiki_repository: s.wiki_repository.to_string(),
                });
        let outcome = match job.state {
            JobState::Failed | JobState::Rejected => {
                let reason = job.last_error.as_deref().unwrap_or("no reason recorded");
                Err(if job.state == JobState::Rejected {
                    // Refused when it started: nothing was written.
                    ToolError::new(
                        ErrorKind::Conflict,
                        format!(
                            "job {} rejected: {reason}; get_job shows its details",
                            job.id
                        ),
                    )
                } else {
                    // An attempt may have published before it failed.
                    ToolError {
                        outcome: envelope::Outcome::Unknown,
                        ..ToolError::new(
                            ErrorKind::UpstreamError,
                            format!(
                                "job {} failed: {reason}; the wiki may carry commits of this job (trailer Teammem-Job: {}); get_job shows its details",
                                job.id, job.id
                            ),
                        )
                    }
                })
            }
            _ => Ok(coordinator::job_view(job)),
        };
        envelope::respond(outcome, identity.as_ref(), &self.context.guard, false)
    }

    /// The job behind a task id, if the caller may see it.
    async fn task_job(
        &self,
        task_id: &str,
        request: &RequestContext<RoleServer>,
    ) -> Result<(crate::queue::Job, CallInfo), ErrorData> {
        let id = tasks::job_id(task_id)?;
        let info = self.call_info(request)?;
        let job = tasks::scope(info.clone(), coordinator::visible_job(&self.context, id))
            .await
            .map_err(|_| tasks::unknown_task(task_id))?;
        Ok((job, info))
    }

    /// The context the tools run in.
    pub fn context(&self) -> &Context {
        &self.context
    }

    fn find(&self, name: &str) -> Option<&'static ToolDef> {
        self.tools.iter().copied().find(|tool| tool.name == name)
    }

    fn guarded(&self, error: ErrorData) -> ErrorData {
        if self.context.guard.leaks(&error.message)
            || error
                .data
                .as_ref()
                .is_some_and(|data| self.context.guard.leaks(&data.to_string()))
        {
            tracing::error!(target: "teammem::mcp", "a JSON-RPC error contained a credential; it was withheld");
            ErrorData::internal_error(
                "the error was withheld; the details are in the teammem log",
                None,
            )
        } else {
            error
        }
    }
}

impl ServerHandler for WikiServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = if self.context.coordinator.is_some() {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build()
        } else {
            ServerCapabilities::builder().enable_tools().build()
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("teammem", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.tools.iter().map(|tool| tool.to_tool()).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.find(name).map(ToolDef::to_tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = self.find(&request.name) else {
            return Err(self.guarded(toolsets::unknown_tool(&request.name)));
        };
        let arguments = request.arguments.unwrap_or_default();
        let info = self.call_info(&context)?;
        // A job's writer calls are the job's own detail (its page says what
        // it did): debug. Calls from coding agents are the daemon's traffic.
        let job_detail = self.context.binding.profile.kind == toolsets::ServerKind::WikiWriter;
        if job_detail {
            tracing::debug!(target: "teammem::mcp", tool = tool.name, caller = %info.actor, "tool call");
        } else {
            tracing::info!(target: "teammem::mcp", tool = tool.name, caller = %info.actor, "tool call");
        }
        let answer = tasks::scope(info, (tool.handler)(&self.context, arguments))
            .await
            .map_err(|error| self.guarded(error))?;
        if let Some(task) = answer.task {
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        if let Err(error) = &answer.outcome {
            if job_detail {
                tracing::debug!(target: "teammem::mcp", tool = tool.name, error = error.kind.as_str(), "tool call failed");
            } else {
                tracing::info!(target: "teammem::mcp", tool = tool.name, error = error.kind.as_str(), "tool call failed");
            }
        }
        Ok(envelope::respond(
            answer.outcome,
            answer.identity.as_ref(),
            &self.context.guard,
            !tool.hints.read_only,
        )
        .into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let (job, _) = self.task_job(&request.task_id, &context).await?;
        Ok(GetTaskResult::new(tasks::detailed(&job, |job| {
            self.job_result(job)
        })))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (job, info) = self.task_job(&request.task_id, &context).await?;
        let Some(requests) = &self.context.coordinator else {
            return Err(tasks::unknown_task(&request.task_id));
        };
        if job.state.is_terminal() {
            return Err(ErrorData::invalid_params(
                format!(
                    "task {} cannot be cancelled: its job already finished ({})",
                    request.task_id, job.state
                ),
                None,
            ));
        }
        match requests.queue.cancel(job.id, &info.actor).await {
            Ok(_) => {
                tracing::info!(target: "teammem::mcp", job = job.id, caller = %info.actor, "task cancelled");
                Ok(())
            }
            Err(crate::queue::QueueError::InvalidTransition { .. }) => {
                Err(ErrorData::invalid_params(
                    format!(
                        "task {} cannot be cancelled: its job finished meanwhile; call tasks/get",
                        request.task_id
                    ),
                    None,
                ))
            }
            Err(e) => {
                tracing::error!(target: "teammem::mcp", error = %e, "cancelling a task failed");
                Err(ErrorData::internal_error(
                    "the task could not be cancelled; the details are in the teammem log",
                    None,
                ))
            }
        }
    }
}
