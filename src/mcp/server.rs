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
//! Resources (see [`resources`] and [`resource_updates`]) are served only by
//! the coding agents' server ([`ServerKind::Agent`]), each request in its
//! caller's scope like a tool call; a writer answers them "method not found".

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CreateTaskResult, GetTaskParams,
    GetTaskResult, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::context::{Binding, Context};
use super::envelope::{self, ErrorKind, ToolError};
use super::profile::ServerKind;
use super::resource_updates::{self, Session, Watches};
use super::resources;
use super::tasks::{self, CallInfo};
use super::toolsets::{self, ToolDef, coordinator};
use crate::queue::{JobState, Steering};
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
    /// The tips of followed wikis, shared by every session of the process.
    watches: Arc<Watches>,
    /// What this session follows (see [`WikiServer::session`]).
    session: Arc<Session>,
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
            watches: Arc::default(),
            session: Arc::default(),
        }
    }

    /// The same server for a new session: it shares the context and the
    /// watched tips, and follows resources of its own (an HTTP service
    /// makes one per session or stateless request).
    pub fn session(&self) -> Self {
        Self {
            session: Arc::default(),
            ..self.clone()
        }
    }

    /// Does this server serve resources?
    fn serves_resources(&self) -> bool {
        self.context.binding.profile.kind == ServerKind::Agent
    }

    /// Runs a resource request in its caller's scope; a server without
    /// resources answers "method not found".
    async fn resource_call<T, F: std::future::Future<Output = Result<T, ErrorData>>>(
        &self,
        request: &RequestContext<RoleServer>,
        method: &'static str,
        call: F,
    ) -> Result<T, ErrorData> {
        if !self.serves_resources() {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("{method} is not served here: a job's writer has no resources"),
                None,
            ));
        }
        let info = self.call_info(request)?;
        tasks::scope(info, call)
            .await
            .map_err(|error| self.guarded(error))
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
            watches: self.watches.clone(),
            session: Arc::default(),
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
                .map(|s| envelope::ResolvedWiki {
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
        let mut capabilities = if self.context.coordinator.is_some() {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build()
        } else {
            ServerCapabilities::builder().enable_tools().build()
        };
        if self.serves_resources() {
            capabilities.resources = ServerCapabilities::builder()
                .enable_resources()
                .enable_resources_subscribe()
                .build()
                .resources;
        }
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
        let job_detail = self.context.binding.profile.kind == ServerKind::WikiWriter;
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

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let cursor = request.and_then(|r| r.cursor);
        self.resource_call(
            &context,
            "resources/list",
            resources::list(&self.context, cursor.as_deref()),
        )
        .await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.resource_call(&context, "resources/templates/list", async {
            Ok(resources::templates())
        })
        .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.resource_call(
            &context,
            "resources/read",
            resources::read(&self.context, &request.uri),
        )
        .await
        .map(Into::into)
    }

    #[allow(deprecated)] // the handshake era's subscription; listen is 2026-07-28's
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let peer = context.peer.clone();
        self.resource_call(
            &context,
            "resources/subscribe",
            resource_updates::subscribe(
                &self.context,
                &self.watches,
                &self.session,
                &request.uri,
                peer,
            ),
        )
        .await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.resource_call(&context, "resources/unsubscribe", async {
            resource_updates::unsubscribe(&self.session, &request.uri)
        })
        .await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.serves_resources()
            .then(|| resource_updates::accepted(requested))
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let request = subscription.request_context().clone();
        self.resource_call(
            &request,
            "subscriptions/listen",
            resource_updates::listen(&self.context, &self.watches, &self.session, subscription),
        )
        .await
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
            Ok(cancelled) => {
                Steering::Cancel.log_committed(&cancelled, &info.actor);
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
