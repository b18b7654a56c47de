//! MCP resources over the team memory, served by the coding agents' server
//! (`teammem mcp`, `/mcp`; never by a job's writer): every wiki page the
//! caller may read as a resource, and two templates.
//!
//! URIs name the *source* repository, as the tools do (the wiki is resolved
//! from configuration):
//! - `teammem://{owner}/{name}/wiki/{page}`: a page (`Home.md`; the `.md` may
//!   be left out). Its text is the page's content exactly as `get_wiki_page`
//!   returns it (`text/markdown`); the rest of that answer (blob and commit
//!   sha, stale facts, who changed it last, citations) is in the contents'
//!   `_meta` under `teammem/page`. Listed by `resources/list`.
//! - `teammem://{owner}/{name}/context/{+path}`: `get_context` for one
//!   repository-relative file or folder (`application/json`, the tool's
//!   result). Not listed: a template only.
//!
//! Segments are percent-encoded where they hold anything but unreserved
//! characters and `/`; no query or fragment.
//!
//! Invariants:
//! - a repository the caller may not read is answered exactly like one that
//!   is not configured and like a page that does not exist (`resource not
//!   found`, one message shape), and no resource of it is listed, read or
//!   followed;
//! - reads reuse the tools' handlers, so their bounds, `HEAD` and checks are
//!   the tools'; a read's text is scanned for credentials like every tool
//!   result;
//! - `resources/list` answers at most [`PAGE_SIZE`] resources per call, the
//!   rest behind an opaque `nextCursor` that pins each wiki's commit, so
//!   paging never skips or repeats a page of a wiki that moved meanwhile;
//!   one call opens at most [`WIKIS_PER_LIST`] wikis (empty and unreadable
//!   ones count), so a caller cannot make one call wait on every remote.

use base64::Engine;
use rmcp::ErrorData;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, MetaObject, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::context::Context;
use super::envelope::ToolError;
use super::toolsets;
use crate::wiki::ErrorKind;

/// The scheme every resource URI starts with.
pub const SCHEME: &str = "teammem://";
/// The template of a page resource.
pub const PAGE_TEMPLATE: &str = "teammem://{owner}/{name}/wiki/{page}";
/// The template of a path's context.
pub const CONTEXT_TEMPLATE: &str = "teammem://{owner}/{name}/context/{+path}";
/// Most resources one `resources/list` answer holds.
pub const PAGE_SIZE: usize = 100;
/// Longest URI accepted.
pub const MAX_URI_BYTES: usize = 2048;
/// Most wikis one `resources/list` call opens before it answers with a
/// cursor: reading a GitHub wiki's `HEAD` asks the remote.
pub const WIKIS_PER_LIST: usize = 25;

/// What a resource URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A wiki page of the source's wiki.
    Page { repository: String, page: String },
    /// `get_context` for one path of the source repository.
    Context { repository: String, path: String },
}

impl Target {
    /// Parses a resource URI, checking its shape (not whether the caller may
    /// read it): a bad URI is an invalid-params error naming what is wrong.
    pub fn parse(uri: &str) -> Result<Target, ErrorData> {
        let shown = shorten(uri);
        let bad = |why: String| {
            ErrorData::invalid_params(
                format!(
                    "the resource URI {shown:?} {why}; use {PAGE_TEMPLATE} or {CONTEXT_TEMPLATE}"
                ),
                Some(json!({"uri": shown})),
            )
        };
        if uri.len() > MAX_URI_BYTES {
            return Err(bad(format!("is longer than {MAX_URI_BYTES} bytes")));
        }
        let Some(rest) = uri.strip_prefix(SCHEME) else {
            return Err(bad("is not a teammem:// URI".into()));
        };
        if rest.contains(['?', '#']) {
            return Err(bad(
                "has a query or fragment, which teammem URIs never have".into(),
            ));
        }
        let mut parts = rest.splitn(4, '/');
        let (owner, name, kind, tail) = (
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        let repository = format!(
            "{}/{}",
            decode(owner).map_err(&bad)?,
            decode(name).map_err(&bad)?
        );
        if !crate::config::is_repository_name(&repository) {
            return Err(bad(format!(
                "does not start with a source repository (owner/name), got {:?}",
                shorten(&repository)
            )));
        }
        if kind != "wiki" && kind != "context" {
            return Err(bad(format!(
                "names {:?} where wiki or context belongs",
                shorten(kind)
            )));
        }
        let tail = decode(tail).map_err(&bad)?;
        if tail.is_empty() {
            return Err(bad(format!(
                "names no {}",
                if kind == "context" { "path" } else { "page" }
            )));
        }
        match kind {
            "wiki" => {
                let page = if tail.ends_with(".md") {
                    tail
                } else {
                    format!("{tail}.md")
                };
                crate::wiki::validate::check_page_path_argument(&page)
                    .map_err(|e| bad(format!("names a page that cannot exist: {}", e.message)))?;
                Ok(Target::Page { repository, page })
            }
            "context" => {
                let request = crate::wiki::context::ContextRequest {
                    paths: vec![tail.clone()],
                    query: None,
                    max_tokens: crate::wiki::context::DEFAULT_MAX_TOKENS,
                    ..Default::default()
                };
                request
                    .check()
                    .map_err(|e| bad(format!("names a path get_context refuses: {}", e.message)))?;
                Ok(Target::Context {
                    repository,
                    path: tail,
                })
            }
            other => Err(bad(format!(
                "names {:?} where wiki or context belongs",
                shorten(other)
            ))),
        }
    }

    /// The source repository the URI names.
    pub fn repository(&self) -> &str {
        match self {
            Target::Page { repository, .. } | Target::Context { repository, .. } => repository,
        }
    }
}

/// The canonical URI of a page.
pub fn page_uri(repository: &str, page: &str) -> String {
    let (owner, name) = repository.split_once('/').unwrap_or((repository, ""));
    format!(
        "{SCHEME}{}/{}/wiki/{}",
        encode(owner, false),
        encode(name, false),
        encode(page, true)
    )
}

/// The JSON-RPC error for a resource that is not there, or that the caller
/// may not read: one shape for both.
pub fn not_found(uri: &str) -> ErrorData {
    let shown = shorten(uri);
    ErrorData::resource_not_found(
        format!(
            "resource {shown:?} not found: no wiki this caller may read holds it; resources/list names the pages, and the repository is the source's owner/name"
        ),
        Some(json!({"uri": shown})),
    )
}

/// The configured source a URI's repository names, if the caller may read
/// it (the current call's scope, see [`super::tasks`]).
pub fn readable(context: &Context, repository: &str) -> bool {
    super::tasks::current().may_access(repository)
        && context.binding.config.source(repository).is_some()
}

/// `resources/templates/list`.
pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(PAGE_TEMPLATE, "wiki-page")
            .with_title("Team memory: a wiki page")
            .with_description("A page of the team memory of a source repository (owner/name), as get_wiki_page returns it: Markdown, with its sha, stale facts and last change in _meta. The page may be named without .md.")
            .with_mime_type("text/markdown"),
        ResourceTemplate::new(CONTEXT_TEMPLATE, "path-context")
            .with_title("Team memory: what to know before changing a path")
            .with_description("get_context for one repository-relative file or folder of a source repository: its purpose, area, the facts citing it (current or stale), the pull requests that touched it, who knows it; JSON.")
            .with_mime_type("application/json"),
    ])
}

/// Where a listing goes on: the source, the commit its listing is pinned
/// to, and how many of its pages were already listed.
#[derive(Debug, Serialize, Deserialize)]
struct Cursor {
    #[serde(rename = "s")]
    source: String,
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    commit: Option<String>,
    #[serde(rename = "o", default)]
    offset: usize,
}

fn encode_cursor(cursor: &Cursor) -> String {
    let text = serde_json::to_vec(cursor).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

fn decode_cursor(text: &str) -> Option<Cursor> {
    if text.len() > 1024 {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// `resources/list`: the pages of every wiki the caller may read, in the
/// configuration's order of sources, then by path; at most [`PAGE_SIZE`],
/// from at most [`WIKIS_PER_LIST`] wikis.
/// A wiki that cannot be read now is skipped and named in `_meta`
/// (`teammem/unavailable`).
pub async fn list(
    context: &Context,
    cursor: Option<&str>,
) -> Result<ListResourcesResult, ErrorData> {
    let sources: Vec<String> = context
        .binding
        .config
        .sources
        .iter()
        .map(|s| s.repository.to_string())
        .filter(|r| readable(context, r))
        .collect();
    let (mut index, mut pinned, mut offset) = (0, None, 0);
    if let Some(text) = cursor {
        let invalid = || {
            ErrorData::invalid_params(
                "the cursor is not one this server gave out (or its source is gone); list again without a cursor",
                None,
            )
        };
        let cursor = decode_cursor(text).ok_or_else(invalid)?;
        index = sources
            .iter()
            .position(|s| s.eq_ignore_ascii_case(&cursor.source))
            .ok_or_else(invalid)?;
        if let Some(commit) = &cursor.commit
            && crate::wiki::validate::parse_full_sha(commit, "cursor").is_err()
        {
            return Err(invalid());
        }
        pinned = cursor.commit;
        offset = cursor.offset;
    }
    let mut resources = Vec::new();
    let mut unavailable = Vec::new();
    let mut next = None;
    let mut opened = 0;
    while index < sources.len() {
        let repository = &sources[index];
        if opened == WIKIS_PER_LIST {
            next = Some(Cursor {
                source: repository.clone(),
                commit: None,
                offset: 0,
            });
            break;
        }
        opened += 1;
        let at = pinned.take().unwrap_or_else(|| "HEAD".to_owned());
        let listed = match context.resolve(repository) {
            Ok(resolved) => match context.wiki(&resolved, false).await {
                Ok(wiki) => wiki.list_pages(&at).await.map_err(ToolError::from),
                Err(error) => Err(error),
            },
            Err(error) => Err(error),
        };
        let list = match listed {
            Ok(list) => list,
            // An empty wiki has no pages: nothing to list, nothing wrong.
            Err(error) if error.kind == ErrorKind::NotFound && at == "HEAD" => {
                (index, offset) = (index + 1, 0);
                continue;
            }
            Err(error) => {
                tracing::warn!(target: "teammem::mcp", source = %repository, error = error.kind.as_str(), "resources/list skipped a wiki it could not read");
                unavailable.push(json!({"repository": repository, "error": error.kind.as_str()}));
                (index, offset) = (index + 1, 0);
                continue;
            }
        };
        let room = PAGE_SIZE - resources.len();
        let pages = list.pages.iter().skip(offset);
        for page in pages.clone().take(room) {
            resources.push(
                Resource::new(
                    page_uri(repository, &page.path),
                    format!("{repository}/{}", page.path),
                )
                .with_title(format!(
                    "{} ({repository})",
                    page.path.trim_end_matches(".md")
                ))
                .with_mime_type("text/markdown"),
            );
        }
        let left = pages.count().saturating_sub(room);
        if left > 0 {
            next = Some(Cursor {
                source: repository.clone(),
                commit: Some(list.commit.clone()),
                offset: offset + room,
            });
            break;
        }
        (index, offset) = (index + 1, 0);
        if resources.len() == PAGE_SIZE {
            if let Some(following) = sources.get(index) {
                next = Some(Cursor {
                    source: following.clone(),
                    commit: None,
                    offset: 0,
                });
            }
            break;
        }
    }
    let mut result = ListResourcesResult::with_all_items(resources);
    result.next_cursor = next.as_ref().map(encode_cursor);
    if !unavailable.is_empty() {
        let mut meta = MetaObject::new();
        meta.insert("teammem/unavailable".into(), Value::Array(unavailable));
        result.meta = Some(meta);
    }
    Ok(result)
}

/// `resources/read`.
pub async fn read(context: &Context, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let target = Target::parse(uri)?;
    if !readable(context, target.repository()) {
        return Err(not_found(uri));
    }
    let (tool, arguments, mime) = match &target {
        Target::Page { repository, page } => (
            crate::writer_contract::tools::GET_WIKI_PAGE,
            json!({"repository": repository, "path": page}),
            "text/markdown",
        ),
        Target::Context { repository, path } => (
            toolsets::context::GET_CONTEXT,
            json!({"repository": repository, "paths": [path], "format": "json"}),
            "application/json",
        ),
    };
    let value = call(context, tool, arguments, uri).await?;
    let (text, meta) = match target {
        Target::Page { .. } => {
            let mut value = value;
            let text = value
                .as_object_mut()
                .and_then(|o| o.remove("content"))
                .and_then(|c| c.as_str().map(str::to_owned))
                .unwrap_or_default();
            let mut meta = MetaObject::new();
            meta.insert("teammem/page".into(), value);
            (text, Some(meta))
        }
        Target::Context { .. } => (
            serde_json::to_string_pretty(&value).map_err(|e| {
                ErrorData::internal_error(format!("encoding the context: {e}"), None)
            })?,
            None,
        ),
    };
    if context.guard.leaks(&text)
        || meta
            .as_ref()
            .is_some_and(|m| context.guard.leaks(&Value::Object(m.0.clone()).to_string()))
    {
        tracing::error!(target: "teammem::mcp", "a resource contained a credential; it was withheld");
        return Err(ErrorData::internal_error(
            "the resource was withheld; the details are in the teammem log",
            None,
        ));
    }
    Ok(ReadResourceResult::new(vec![
        ResourceContents::TextResourceContents {
            uri: uri.to_owned(),
            mime_type: Some(mime.into()),
            text,
            meta,
        },
    ]))
}

/// Runs a read tool's handler and turns its envelope into a result or a
/// JSON-RPC error (the repository was checked readable before).
async fn call(
    context: &Context,
    tool: &str,
    arguments: Value,
    uri: &str,
) -> Result<Value, ErrorData> {
    let Some(def) = toolsets::exposed(context.binding.profile)
        .into_iter()
        .find(|def| def.name == tool)
    else {
        return Err(ErrorData::internal_error(
            format!("the {tool} tool is not served here"),
            None,
        ));
    };
    let Value::Object(arguments) = arguments else {
        return Err(ErrorData::internal_error("resource arguments", None));
    };
    let answer = (def.handler)(context, arguments).await?;
    let mut value = match answer.outcome {
        Ok(value) => value,
        Err(error) => return Err(rpc_error(error, uri)),
    };
    if let (Some(object), Some(identity)) = (value.as_object_mut(), answer.identity) {
        object.insert(
            "source_repository".into(),
            identity.source_repository.into(),
        );
        object.insert("wiki_repository".into(), identity.wiki_repository.into());
    }
    Ok(value)
}

/// A tool's error as a read's JSON-RPC error.
fn rpc_error(error: ToolError, uri: &str) -> ErrorData {
    let data = Some(json!({"uri": shorten(uri), "type": error.kind.as_str()}));
    match error.kind {
        ErrorKind::NotFound | ErrorKind::PermissionDenied => not_found(uri),
        ErrorKind::InvalidInput | ErrorKind::LimitExceeded => {
            ErrorData::invalid_params(format!("{}: {}", shorten(uri), error.message), data)
        }
        _ => ErrorData::internal_error(
            format!(
                "reading {} failed ({}): {}",
                shorten(uri),
                error.kind.as_str(),
                error.message
            ),
            data,
        ),
    }
}

/// Percent-decodes one URI part; the result must be UTF-8.
fn decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| "has a % that is not followed by two hex digits".to_string())?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "decodes to bytes that are not UTF-8".to_string())
}

/// Percent-encodes everything but unreserved characters (and `/` when
/// `slashes`).
fn encode(text: &str, slashes: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) || (slashes && byte == b'/') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A URI or name echoed in a message, bounded.
pub fn shorten(text: &str) -> &str {
    match text.char_indices().nth(200) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_parse_to_their_targets_and_round_trip() {
        assert_eq!(
            Target::parse("teammem://demo/app/wiki/Home.md").unwrap(),
            Target::Page {
                repository: "demo/app".into(),
                page: "Home.md".into()
            }
        );
        assert_eq!(
            Target::parse("teammem://demo/app/wiki/Home").unwrap(),
            Target::Page {
                repository: "demo/app".into(),
                page: "Home.md".into()
            }
        );
        assert_eq!(
            Target::parse("teammem://demo/app/context/src/queue/claim.rs").unwrap(),
            Target::Context {
                repository: "demo/app".into(),
                path: "src/queue/claim.rs".into()
            }
        );
        let uri = page_uri("demo/app", "Ünïcode/Café.md");
        assert_eq!(
            uri,
            "teammem://demo/app/wiki/%C3%9Cn%C3%AFcode/Caf%C3%A9.md"
        );
        assert_eq!(
            Target::parse(&uri).unwrap(),
            Target::Page {
                repository: "demo/app".into(),
                page: "Ünïcode/Café.md".into()
            }
        );
    }

    #[test]
    fn bad_uris_are_invalid_params_naming_the_problem() {
        for (uri, says) in [
            ("https://demo/app/wiki/Home.md", "not a teammem:// URI"),
            ("teammem://demo/app/wiki/", "names no page"),
            (
                "teammem://demo/app/pages/Home.md",
                "where wiki or context belongs",
            ),
            ("teammem://demo/app/wiki/Home.md?ref=x", "query or fragment"),
            ("teammem://demo/app/wiki/%zz", "two hex digits"),
            ("teammem://demo/app/wiki/..%2Fetc.md", "cannot exist"),
            ("teammem://demo/app/context/..%2Fetc", "get_context refuses"),
            ("teammem://demo/app/context/%00", "get_context refuses"),
            (
                "teammem://demo/wiki/Home.md",
                "where wiki or context belongs",
            ),
            ("teammem://demo//wiki/Home.md", "owner/name"),
            ("teammem://de mo/app/wiki/Home.md", "owner/name"),
        ] {
            let error = Target::parse(uri).unwrap_err();
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS, "{uri}");
            assert!(error.message.contains(says), "{uri}: {}", error.message);
        }
        let long = format!("teammem://demo/app/wiki/{}.md", "a".repeat(MAX_URI_BYTES));
        assert!(
            Target::parse(&long)
                .unwrap_err()
                .message
                .contains("longer than")
        );
    }

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let cursor = Cursor {
            source: "demo/app".into(),
            commit: Some("a".repeat(40)),
            offset: 100,
        };
        let back = decode_cursor(&encode_cursor(&cursor)).unwrap();
        assert_eq!(
            (back.source, back.commit, back.offset),
            (cursor.source, cursor.commit, 100)
        );
        assert!(decode_cursor("not a cursor!").is_none());
        assert!(decode_cursor(&"A".repeat(2000)).is_none());
    }
}
