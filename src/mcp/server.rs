//! The rmcp server handler: `tools/list` and `tools/call` straight from the
//! toolset tables, filtered by the server's profile.
//!
//! Invariants: only tools the filter exposes are listed or run (anything else is
//! the JSON-RPC "unknown tool" error); every tool result goes through
//! [`envelope::respond`]; JSON-RPC error messages are checked for credentials too.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::context::{Binding, Context};
use super::envelope;
use super::toolsets::{self, ToolDef};

const INSTRUCTIONS: &str = "teammem's team memory: the wiki of each configured source repository. \
Every tool takes repository = the source (owner/name) and reports the resolved wiki_repository. \
Results are an envelope {success, outcome, result, error}; read error.message and correct the call. \
Read a snapshot first and pin reads to its sha.";

/// One MCP server process (or one in-process instance in tests).
#[derive(Clone)]
pub struct WikiServer {
    context: Arc<Context>,
    tools: Arc<Vec<&'static ToolDef>>,
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
        }
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
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
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
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = self.find(&request.name) else {
            return Err(self.guarded(toolsets::unknown_tool(&request.name)));
        };
        let arguments = request.arguments.unwrap_or_default();
        tracing::info!(target: "teammem::mcp", tool = tool.name, "tool call");
        let answer = (tool.handler)(&self.context, arguments)
            .await
            .map_err(|error| self.guarded(error))?;
        if let Err(error) = &answer.outcome {
            tracing::info!(target: "teammem::mcp", tool = tool.name, error = error.kind.as_str(), "tool call failed");
        }
        Ok(envelope::respond(
            answer.outcome,
            answer.identity.as_ref(),
            &self.context.guard,
            !tool.hints.read_only,
        )
        .into())
    }
}
