//! The functions behind `teammem wiki snapshot|list|get|search|history|diff|write|patch`:
//! the same tools, run for an operator, answering the same envelope as JSON.
//!
//! Invariants: the operator is bound to the one `--repository` it names (as a
//! writer is), reads and writes go through the very handlers the MCP tools use,
//! a write happens only with an explicit `--expected-base` (a full sha, never
//! `HEAD`), and its commit carries `Teammem-Source` and `Teammem-Origin: operator`
//! instead of a job's trailers. The printed envelope passes the same size and
//! credential checks as a tool result.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::context::{Binding, Context, WikiCredentials, WriteOrigin, WriterBinding};
use super::envelope::{self, Secret, ToolError};
use super::profile::{Profile, ServerKind};
use super::toolsets;
use super::toolsets::wiki_write::{self, Change, WriteRequest};
use crate::config::Config;

/// One `teammem wiki` invocation.
#[derive(Debug, Clone)]
pub struct Request {
    /// `--repository owner/name`: the source.
    pub repository: String,
    /// Credential for a GitHub wiki remote (e.g. from `TEAMMEM_WIKI_TOKEN`); never
    /// from an argument.
    pub token: Option<Secret>,
    pub command: Command,
}

/// The subcommands. Refs default to `HEAD` in the CLI.
#[derive(Debug, Clone)]
pub enum Command {
    Snapshot,
    List {
        git_ref: String,
    },
    Get {
        path: String,
        git_ref: String,
    },
    Search {
        query: String,
        git_ref: String,
    },
    History {
        path: Option<String>,
        git_ref: String,
        limit: i64,
    },
    Diff {
        from: String,
        to: String,
    },
    /// `--pages` is the tool's `pages` array as JSON: `[{"path", "content"}]`.
    Write {
        expected_base: String,
        expected_wiki_repository: Option<String>,
        message: String,
        pages: Value,
    },
    /// `--patches` is the tool's `patches` object as JSON.
    Patch {
        expected_base: String,
        expected_wiki_repository: Option<String>,
        message: String,
        patches: Value,
    },
}

/// Runs one operator command and returns the envelope to print.
pub async fn run(config: Config, request: Request) -> Value {
    run_with(config, request, None).await
}

/// [`run`] with a token provider for GitHub wikis (used when `request.token` is
/// `None`).
pub async fn run_with(
    config: Config,
    request: Request,
    credentials: Option<Arc<dyn WikiCredentials>>,
) -> Value {
    let binding = Binding {
        config: Arc::new(config),
        profile: Profile {
            kind: ServerKind::WikiWriter,
            read_only: false,
        },
        writer: Some(WriterBinding {
            source: request.repository.clone(),
            job: None,
            range: None,
            token: request.token.clone(),
            broker: None,
            inherited: Default::default(),
            evidence: None,
        }),
    };
    let mut context = Context::new(binding);
    if let Some(credentials) = credentials {
        context = context.with_credentials(credentials);
    }
    let repository = request.repository;
    let (expected_base, expected_wiki_repository, message, change) = match request.command {
        Command::Write {
            expected_base,
            expected_wiki_repository,
            message,
            pages,
        } => match wiki_write::parse_pages(pages) {
            Ok(pages) => (
                expected_base,
                expected_wiki_repository,
                message,
                Change::write(pages),
            ),
            Err(error) => return print(&context, Err(error), true),
        },
        Command::Patch {
            expected_base,
            expected_wiki_repository,
            message,
            patches,
        } => match wiki_write::parse_patches(patches) {
            Ok(patches) => (
                expected_base,
                expected_wiki_repository,
                message,
                Change::patch(patches),
            ),
            Err(error) => return print(&context, Err(error), true),
        },
        read => return run_read(&context, repository, read).await,
    };
    let write = WriteRequest {
        repository,
        expected_wiki_repository,
        expected_base,
        message,
        change,
    };
    let answer = wiki_write::run(&context, &WriteOrigin::Operator, write).await;
    envelope_value(envelope::respond(
        answer.outcome,
        answer.identity.as_ref(),
        &context.guard,
        true,
    ))
}

/// Read commands: the tool's own handler with the tool's own arguments.
async fn run_read(context: &Context, repository: String, command: Command) -> Value {
    let mut arguments = Map::new();
    arguments.insert("repository".into(), Value::String(repository));
    let mut put = |key: &str, value: Value| {
        arguments.insert(key.into(), value);
    };
    let tool = match command {
        Command::Snapshot => crate::writer_contract::tools::GET_WIKI_SNAPSHOT,
        Command::List { git_ref } => {
            put("ref", git_ref.into());
            crate::writer_contract::tools::LIST_WIKI_PAGES
        }
        Command::Get { path, git_ref } => {
            put("path", path.into());
            put("ref", git_ref.into());
            crate::writer_contract::tools::GET_WIKI_PAGE
        }
        Command::Search { query, git_ref } => {
            put("query", query.into());
            put("ref", git_ref.into());
            crate::writer_contract::tools::SEARCH_WIKI
        }
        Command::History {
            path,
            git_ref,
            limit,
        } => {
            if let Some(path) = path {
                put("path", path.into());
            }
            put("ref", git_ref.into());
            put("limit", limit.into());
            crate::writer_contract::tools::LIST_WIKI_HISTORY
        }
        Command::Diff { from, to } => {
            put("from", from.into());
            put("to", to.into());
            crate::writer_contract::tools::GET_WIKI_DIFF
        }
        Command::Write { .. } | Command::Patch { .. } => {
            unreachable!("writes are handled by run")
        }
    };
    let Some(def) = toolsets::wiki_read::TOOLSET
        .tools
        .iter()
        .find(|def| def.name == tool)
    else {
        unreachable!("every read command names a wiki_read tool")
    };
    match (def.handler)(context, arguments).await {
        Ok(answer) => envelope_value(envelope::respond(
            answer.outcome,
            answer.identity.as_ref(),
            &context.guard,
            false,
        )),
        // The operator's arguments are typed, so this is an internal mismatch.
        Err(error) => print(
            context,
            Err(ToolError::internal(
                "parsing operator arguments",
                error.message,
            )),
            false,
        ),
    }
}

fn print(context: &Context, outcome: envelope::ToolOutcome, may_write: bool) -> Value {
    envelope_value(envelope::respond(outcome, None, &context.guard, may_write))
}

fn envelope_value(result: rmcp::model::CallToolResult) -> Value {
    result.structured_content.unwrap_or(Value::Null)
}

/// The process exit status for a printed envelope: 0 on success, 1 otherwise.
pub fn exit_code(envelope: &Value) -> u8 {
    if envelope["success"].as_bool() == Some(true) {
        0
    } else {
        1
    }
}
