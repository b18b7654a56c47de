//! The context toolset: `get_context`, one call that answers "what must I
//! know before I change these files" from the team memory (the engine is
//! `crate::wiki::context`).
//!
//! Served by the coding agents' server (`teammem mcp`, `/mcp`) and by a
//! job's writer (so the `openai` agent can use it). Read-only,
//! non-destructive, idempotent and closed-world like the wiki reads; takes
//! `repository` = the source, resolved from configuration exactly as the
//! reads do (a repository the caller may not read is answered like one that
//! does not exist); rules on paths, query and budget are the engine's and
//! come back as envelope errors; every answer carries `as_of`; the answer
//! is text unless `format: "json"` is asked (`crate::wiki::context::text`),
//! and the budget counts the form sent. Without
//! `repository` it answers from every wiki the caller may read
//! (`super::org`), each item naming its repository.

use rmcp::model::JsonObject;
use serde::Deserialize;
use serde_json::{Value, json};

use super::wiki_answer::{added_bytes, as_of, identity_bytes, to_outcome, with_as_of};
use super::{Answer, CallFuture, Hints, ServerKind, ToolDef, Toolset, parse_arguments};
use crate::mcp::context::Context;
use crate::mcp::envelope::{ResolvedWiki, ToolOutcome};
use crate::wiki::WikiError;
use crate::wiki::context::{
    ContextRequest, DEFAULT_MAX_TOKENS, Detail, Format, MAX_MAX_TOKENS, MAX_PATHS, MIN_MAX_TOKENS,
    text,
};
use crate::writer_contract::tools;

/// The tool's name.
pub const GET_CONTEXT: &str = "get_context";

pub const TOOLSET: Toolset = Toolset {
    name: "context",
    served_by: &[ServerKind::Agent, ServerKind::WikiWriter],
    tools: &[ToolDef {
        name: GET_CONTEXT,
        title: "Context for a change",
        description: "What to know before changing files, from the team memory in one call: give the repository-relative paths you are about to change (files or folders) and/or a question. For each path: its purpose, its area, the facts on any wiki page that cite it (text, page and line, cited commit and lines, status current or stale with the commit that changed it: do not rely on a stale fact without checking the code), the merged pull requests that touched it newest first (number, title, why, author, date, merge commit, files and the page to read its entry on: the newest few in full, older ones one line each in the earlier_changes item, `#NUMBER TITLE` and ` (AUTHOR, DATE)` as the budget allows, its pages holding the whole entries; detail: full adds the older ones' ` — WHY` and then whole entries as the budget allows), who knows its area (`NAME (PULL REQUESTS)`), the dependencies a manifest declares, and the project's test and build commands (one each, more_of_topic counting the page's others; detail: full gives them all); for a question, the wiki passages that answer it best. Items come ranked by relevance, best first, and the whole answer is cut to max_tokens (estimated as the bytes of the answer as sent / 4, rounded up: tokens.used); the budget is a ceiling: a brief answer says each thing once and stops. left_out counts what did not fit and read_more names the pages that hold it. Each thing is said once: commits in items are abbreviated to 12 hex digits, an item's about is left out when it is the item's own path. By default (format: text) the answer is `text`, one line a thing, about a fifth fewer bytes than JSON (an eighth fewer o200k_base tokens): `path P: KIND, area A (PAGE)`; `purpose P: …` and `fact P: …` ending `[PAGE:LINE, cites COMMIT LINES, STATUS]`; `#NUMBER TITLE (AUTHOR, DATE) merge COMMIT [PAGE]` with `  why:` and `  files:` lines; `people of AREA [PAGE]: …`; `test (FILE): …`; `earlier changes [PAGES]:` then one `#NUMBER …` line each; `left out: N items (KIND N); read more: PAGES`. format: json gives the answer as objects in items, packed to max_tokens by their own (larger) cost. Deterministic, read at one wiki commit (ref); as_of is the source commit the memory is reconciled to (null with as_of_reason when unknown). Without repository, every wiki you may read answers (at most 200; wikis_left_out names the rest): each item and path names its repository, the items of all are ranked together and cut to max_tokens (the paths and items count; the line or entry naming each wiki read, up to 200, and what was left out come on top), read_more names repository and page, and wikis gives each wiki's ref and as_of.",
        hints: Hints::READ,
        input_schema: schema,
        handler: get_context,
    }],
};

fn schema() -> Value {
    super::object_schema(
        json!({
            "repository": super::org_repository_schema(),
            "paths": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 1024},
                "minItems": 1,
                "maxItems": MAX_PATHS,
                "description": "Repository-relative files or folders you are about to change, e.g. [\"src/queue/claim.rs\", \"docs/\"]",
            },
            "query": {"type": "string", "minLength": 1, "maxLength": 512, "description": "A question in plain words, e.g. \"why are leases renewed every 10 seconds?\""},
            "max_tokens": {"type": "integer", "minimum": MIN_MAX_TOKENS, "maximum": MAX_MAX_TOKENS, "default": DEFAULT_MAX_TOKENS, "description": "The most tokens the answer may take, estimated as its bytes / 4 in the format asked: o200k_base and cl100k_base count about a third more on an answer, whose hashes, dates and numbers tokenize densely, so ask three quarters of a hard limit"},
            "detail": {"type": "string", "enum": ["brief", "full"], "default": "brief", "description": "brief: every change named, the newest few whole; full: also the older changes' why and whole entries, as max_tokens allows"},
            "format": {"type": "string", "enum": ["text", "json"], "default": "text", "description": "text: the answer as lines in `text`, for reading (about a fifth fewer bytes, an eighth fewer tokens); json: the answer as objects in `items`, for programs (packed by their larger cost)"},
            "ref": super::ref_schema("The wiki commit to answer from (default HEAD; only with repository)"),
        }),
        &[],
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ContextArgs {
    repository: Option<String>,
    #[serde(default)]
    paths: Vec<String>,
    query: Option<String>,
    max_tokens: Option<i64>,
    #[serde(default)]
    detail: DetailArg,
    #[serde(default, deserialize_with = "format_arg")]
    format: Format,
    #[serde(rename = "ref", default = "tools::head")]
    git_ref: String,
}

/// `detail` as the tool takes it.
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum DetailArg {
    #[default]
    Brief,
    Full,
}

/// `format`: `text` or `json`.
fn format_arg<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Format, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum FormatArg {
        Text,
        Json,
    }
    Ok(match FormatArg::deserialize(deserializer)? {
        FormatArg::Text => Format::Text,
        FormatArg::Json => Format::Json,
    })
}

impl From<DetailArg> for Detail {
    fn from(arg: DetailArg) -> Detail {
        match arg {
            DetailArg::Brief => Detail::Brief,
            DetailArg::Full => Detail::Full,
        }
    }
}

fn get_context(context: &Context, arguments: JsonObject) -> CallFuture<'_> {
    Box::pin(async move {
        let args: ContextArgs = parse_arguments(GET_CONTEXT, arguments)?;
        let resolved = match args.repository.as_deref().map(|r| context.resolve(r)) {
            Some(Ok(resolved)) => Some(resolved),
            Some(Err(error)) => return Ok(Answer::new(None, Err(error))),
            None => None,
        };
        let identity = resolved.as_ref().map(|r| r.identity.clone());
        let max_tokens = match args.max_tokens {
            None => DEFAULT_MAX_TOKENS,
            // Out of range either way; the engine's check names the bounds.
            Some(n) => usize::try_from(n).unwrap_or(0),
        };
        if max_tokens == 0 {
            let error = WikiError::invalid_input(format!(
                "max_tokens must be between {MIN_MAX_TOKENS} and {MAX_MAX_TOKENS}, got {}",
                args.max_tokens.unwrap_or_default()
            ));
            return Ok(Answer::new(identity, to_outcome::<Value>(Err(error))));
        }
        let mut request = ContextRequest {
            paths: args.paths,
            query: args.query,
            max_tokens,
            detail: args.detail.into(),
            format: args.format,
            caller_bytes: 0,
        };
        let Some(resolved) = resolved else {
            let outcome = super::org::context(context, request, &args.git_ref).await;
            return Ok(Answer::new(None, formatted(outcome, args.format, None)));
        };
        let git_ref = context.read_ref(args.git_ref).await;
        let wiki = match context.wiki(&resolved, false).await {
            Ok(wiki) => wiki,
            Err(error) => return Ok(Answer::new(identity, Err(error))),
        };
        let as_of = as_of(context, &resolved).await;
        request.caller_bytes = added_bytes(&as_of, Some(&resolved.identity));
        let outcome = match to_outcome(wiki.context(&git_ref, request).await) {
            Ok(value) => Ok(with_as_of(value, as_of)),
            Err(error) => Err(error),
        };
        let outcome = formatted(outcome, args.format, identity.as_ref());
        Ok(Answer::new(identity, outcome))
    })
}

/// The answer in the `format` asked: as text ([`text`]) unless JSON was;
/// `identity` is what the envelope adds to it.
fn formatted(outcome: ToolOutcome, format: Format, identity: Option<&ResolvedWiki>) -> ToolOutcome {
    match (outcome, format) {
        (Ok(answer), Format::Text) => Ok(text::render(&answer, identity_bytes(identity))),
        (outcome, _) => outcome,
    }
}
