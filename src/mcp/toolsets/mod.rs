//! Toolsets declared as data, and the one filter that decides what a server
//! exposes.
//!
//! A toolset is a table of [`ToolDef`]s (name, description, input schema,
//! explicit annotations, handler) plus the server kinds that serve it. Adding a
//! toolset (the coordinator's, the writer's evidence tools) means adding a file
//! with one more table and listing it in [`TOOLSETS`]; nothing else changes.
//!
//! The filter ([`exposes`]), in order:
//! 1. read-only mode beats everything: a tool whose `readOnlyHint` is not `true`
//!    is never exposed by a read-only server;
//! 2. a tool is exposed only by the server kinds its toolset names, so the wiki
//!    write tools exist only in writer mode.
//!
//! A tool the filter does not expose is absent from `tools/list` and a call to it
//! is answered exactly like a call to a tool that does not exist: a JSON-RPC
//! `-32602` error ("unknown tool"). It is never executed.
//!
//! Argument handling is split the way DESIGN §7 wants it: arguments that cannot
//! be parsed into the tool's argument type (wrong JSON type, a missing required
//! field, an unknown field) are a JSON-RPC `-32602` error; arguments that parse
//! but break a rule are an envelope error the agent can read and correct.

pub mod context;
pub mod coordinator;
pub mod job_evidence; // the writer's evidence tools: the job's bundle, a PR's patches, source files at its commits
mod source_reader; // where those tools read the source: its forge when this process can, else the job's broker
mod wiki_answer; // a wiki read as a tool's answer: the engine's result enveloped, and as_of
mod org; // search_wiki and get_context over every wiki the caller may read
pub mod wiki_read;
pub mod wiki_write;

use std::future::Future;
use std::pin::Pin;

use rmcp::ErrorData;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::context::Context;
use super::envelope::{ResolvedWiki, ToolOutcome};
// The toolsets name the server kinds that serve them as `super::ServerKind`.
use super::profile::{Profile, ServerKind};

/// The MCP tool annotations, all four always stated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

impl Hints {
    /// A tool that only reads this deployment's own data.
    pub const READ: Hints = Hints {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
}

/// What a handler hands back: the outcome and the source it resolved (if any).
#[derive(Debug)]
pub struct Answer {
    pub identity: Option<ResolvedWiki>,
    pub outcome: ToolOutcome,
    /// Answer with this task (`resultType: "task"`) instead of the envelope;
    /// only when the request may receive tasks (see [`super::tasks`]).
    pub task: Option<rmcp::model::Task>,
}

impl Answer {
    pub fn new(identity: Option<ResolvedWiki>, outcome: ToolOutcome) -> Self {
        Self {
            identity,
            outcome,
            task: None,
        }
    }

    /// A task handle; the envelope (`outcome`) stays for logging only.
    pub fn task(identity: Option<ResolvedWiki>, task: rmcp::model::Task) -> Self {
        Self {
            identity,
            outcome: Ok(Value::Null),
            task: Some(task),
        }
    }
}

/// A handler's future: an envelope-bound [`Answer`], or a JSON-RPC error for
/// arguments that could not be parsed.
pub type CallFuture<'a> = Pin<Box<dyn Future<Output = Result<Answer, ErrorData>> + Send + 'a>>;

/// Runs one tool call.
pub type Handler = for<'a> fn(&'a Context, JsonObject) -> CallFuture<'a>;

/// One tool, declared as data.
pub struct ToolDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub hints: Hints,
    /// The JSON Schema of the arguments (built on demand; it is data, not code).
    pub input_schema: fn() -> Value,
    pub handler: Handler,
}

impl ToolDef {
    /// The `tools/list` entry.
    pub fn to_tool(&self) -> Tool {
        let schema = match (self.input_schema)() {
            Value::Object(object) => object,
            _ => unreachable!("tool input schemas are JSON objects"),
        };
        let annotations = ToolAnnotations::with_title(self.title)
            .read_only(self.hints.read_only)
            .destructive(self.hints.destructive)
            .idempotent(self.hints.idempotent)
            .open_world(self.hints.open_world);
        Tool::new(self.name, self.description, schema)
            .with_title(self.title)
            .with_annotations(annotations)
    }
}

/// A named group of tools and the server kinds that serve it.
pub struct Toolset {
    pub name: &'static str,
    pub served_by: &'static [ServerKind],
    pub tools: &'static [ToolDef],
}

/// Every toolset, in `tools/list` order.
pub const TOOLSETS: &[&Toolset] = &[
    &wiki_read::TOOLSET,
    &context::TOOLSET,
    &wiki_write::TOOLSET,
    &job_evidence::TOOLSET,
    &coordinator::TOOLSET,
];

/// The filter (see the module doc): does a server with `profile` expose `tool`
/// of `toolset`?
pub fn exposes(profile: Profile, toolset: &Toolset, tool: &ToolDef) -> bool {
    if profile.read_only && !tool.hints.read_only {
        return false;
    }
    toolset.served_by.contains(&profile.kind)
}

/// The tools a server with `profile` exposes, in order.
pub fn exposed(profile: Profile) -> Vec<&'static ToolDef> {
    TOOLSETS
        .iter()
        .flat_map(|toolset| {
            toolset
                .tools
                .iter()
                .filter(move |tool| exposes(profile, toolset, tool))
        })
        .collect()
}

/// The JSON-RPC error for a tool this server does not have (or does not expose).
pub fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("unknown tool {name:?}; call tools/list for the tools this server offers"),
        None,
    )
}

/// Parses a call's arguments into the tool's argument type, or answers with the
/// JSON-RPC error for unparseable arguments.
pub fn parse_arguments<T: DeserializeOwned>(
    tool: &str,
    arguments: JsonObject,
) -> Result<T, ErrorData> {
    serde_json::from_value(Value::Object(arguments)).map_err(|error| {
        ErrorData::invalid_params(
            format!(
                "the arguments of {tool} do not match its input schema: {error}; see tools/list"
            ),
            None,
        )
    })
}

/// A closed object schema: these properties, these required, nothing else.
pub fn object_schema(properties: Value, required: &[&str]) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The schema of the `repository` argument every tool takes.
pub fn repository_schema() -> Value {
    serde_json::json!({
        "type": "string",
        "description": "The source repository (owner/name) whose team memory this is; the wiki is resolved from configuration and reported back as wiki_repository",
    })
}

/// The schema of `repository` where leaving it out means every wiki the
/// caller may read (org scope).
pub fn org_repository_schema() -> Value {
    serde_json::json!({
        "type": "string",
        "description": "The source repository (owner/name) whose team memory to read; leave it out to read every wiki you may read (each hit names its repository)",
    })
}

/// The schema of a `ref` argument.
pub fn ref_schema(what: &str) -> Value {
    serde_json::json!({
        "type": "string",
        "description": format!("{what}: HEAD or a full 40-character commit sha (pin reads to the sha of one snapshot)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(profile: Profile) -> Vec<&'static str> {
        exposed(profile).iter().map(|tool| tool.name).collect()
    }

    #[test]
    fn the_filter_gives_each_profile_its_tools() {
        let reads = [
            "get_wiki_snapshot",
            "list_wiki_pages",
            "get_wiki_page",
            "search_wiki",
            "list_wiki_history",
            "get_wiki_diff",
            "get_context",
        ];
        let agent = Profile {
            kind: ServerKind::Agent,
            read_only: false,
        };
        let mut agent_tools = reads.to_vec();
        agent_tools.extend(["request_pr_reconciliation", "get_job", "list_jobs"]);
        assert_eq!(names(agent), agent_tools);
        // --read-only removes the coordinator's one write.
        let read_only_agent = Profile {
            kind: ServerKind::Agent,
            read_only: true,
        };
        let mut read_only_tools = reads.to_vec();
        read_only_tools.extend(["get_job", "list_jobs"]);
        assert_eq!(names(read_only_agent), read_only_tools);
        let writer = Profile {
            kind: ServerKind::WikiWriter,
            read_only: false,
        };
        let evidence = [
            "get_job_evidence",
            "list_pull_request_files",
            "list_source_files",
            "get_source_file",
            "get_source_file_heads",
        ];
        let mut with_writes = reads.to_vec();
        with_writes.extend([
            "write_wiki_pages",
            "patch_wiki_pages",
            "publish_job_changes",
        ]);
        with_writes.extend(evidence);
        assert_eq!(names(writer), with_writes);
        // Read-only beats everything, writer mode included (the evidence tools
        // only read).
        let read_only_writer = Profile {
            kind: ServerKind::WikiWriter,
            read_only: true,
        };
        let mut reads_and_evidence = reads.to_vec();
        reads_and_evidence.extend(evidence);
        assert_eq!(names(read_only_writer), reads_and_evidence);
    }

    #[test]
    fn every_tool_states_its_annotations_and_has_an_object_schema() {
        let mut seen = std::collections::BTreeSet::new();
        for toolset in TOOLSETS {
            for tool in toolset.tools {
                assert!(seen.insert(tool.name), "{} is declared twice", tool.name);
                let listed = tool.to_tool();
                let annotations = listed.annotations.expect("annotations");
                assert!(annotations.read_only_hint.is_some());
                assert!(annotations.destructive_hint.is_some());
                assert!(annotations.idempotent_hint.is_some());
                assert!(annotations.open_world_hint.is_some());
                assert_eq!(listed.input_schema["type"], "object");
                assert_eq!(listed.input_schema["additionalProperties"], false);
                let required = listed.input_schema["required"]
                    .as_array()
                    .expect("required");
                // Every tool about one source names it (the org-scope
                // reads may leave it out); the job tools name jobs.
                let org_scope = ["search_wiki", "get_context"].contains(&tool.name);
                assert!(
                    toolset.name == "coordinator"
                        || org_scope
                        || required.contains(&Value::from("repository")),
                    "{}",
                    tool.name
                );
            }
        }
    }
}
