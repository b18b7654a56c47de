//! Org scope: `search_wiki` and `get_context` without `repository` answer
//! from every wiki the caller may read, each hit and item naming its
//! repository.
//!
//! Invariants:
//! - the wikis searched are exactly the configured sources
//!   [`Context::resolve`] accepts for this call (a scoped token's
//!   repositories; every source for an unrestricted token and on stdio; a
//!   job's writer its one source), so a wiki the caller may not read is
//!   never opened and nothing from it can reach an answer;
//! - at most [`MAX_WIKIS`] wikis per query, in configuration order; the
//!   rest are named in `wikis_left_out`;
//! - each wiki is read through its own cached index (one per wiki commit,
//!   `crate::wiki::search`), at `HEAD` (a job's staged tip for a writer),
//!   [`CONCURRENT_WIKIS`] at a time, the answers merged in configuration
//!   order whatever order they finish in;
//!   a wiki that cannot be read (no pages yet, its remote down) is named in
//!   `unavailable` with why, and the others still answer.

use futures_util::stream::{self, StreamExt};
use serde_json::{Map, Value, json};

use super::wiki_answer::{as_of, with_as_of};
use crate::mcp::context::{Context, Resolved};
use crate::mcp::envelope::{ToolError, ToolOutcome};
use crate::wiki::context::{ContextRequest, Format, estimate_tokens, text};
use crate::wiki::validate;

/// Most wikis one org-scope query reads.
pub const MAX_WIKIS: usize = 200;
/// Most hits an org-scope search returns (as one wiki's search).
const MAX_HITS: usize = 20;
/// Most pages `read_more` names.
const MAX_READ_MORE: usize = 10;
/// Wikis read at once. Each read waits on its mirror, a blocking index
/// search and the queue's cursor (`as_of`); read in turn, a 100-wiki query
/// spent most of its time handing off between threads.
const CONCURRENT_WIKIS: usize = 8;

/// The wikis a call may read, at most [`MAX_WIKIS`], and the names of the
/// rest.
struct Scope {
    wikis: Vec<Resolved>,
    left_out: Vec<String>,
}

fn scope(context: &Context) -> Scope {
    let mut wikis: Vec<Resolved> = context
        .binding
        .config
        .sources
        .iter()
        .filter_map(|source| context.resolve(&source.repository).ok())
        .collect();
    let rest = wikis.split_off(wikis.len().min(MAX_WIKIS));
    Scope {
        wikis,
        left_out: rest
            .into_iter()
            .map(|r| r.identity.source_repository)
            .collect(),
    }
}

/// `ref` names one wiki's commit: org scope reads every wiki at its `HEAD`.
fn check_head(git_ref: &str) -> Result<(), ToolError> {
    if git_ref != "HEAD" {
        return Err(ToolError::invalid_input(
            "ref names a commit of one wiki; give repository with it, or leave ref out to read every wiki at its HEAD",
        ));
    }
    Ok(())
}

fn unavailable(resolved: &Resolved, error: &ToolError) -> Value {
    json!({
        "repository": resolved.identity.source_repository,
        "type": error.kind,
        "message": error.message,
    })
}

/// One wiki's line in `wikis`: what was read, at which commit, how fresh.
fn wiki_line(resolved: &Resolved, fields: Value, as_of: Result<String, &'static str>) -> Value {
    let mut line = json!({
        "repository": resolved.identity.source_repository,
        "wiki_repository": resolved.identity.wiki_repository,
    });
    if let (Some(line), Value::Object(fields)) = (line.as_object_mut(), fields) {
        line.extend(fields);
    }
    with_as_of(line, as_of)
}

/// What `read` gives for each wiki of the scope, in configuration order:
/// the wiki's answer and its `as_of`, or why it could not be read.
async fn each_wiki<'a, T, F, Fut>(
    context: &'a Context,
    scope: &'a Scope,
    read: F,
) -> Vec<(
    &'a Resolved,
    Result<(T, Result<String, &'static str>), ToolError>,
)>
where
    F: Fn(crate::wiki::Wiki, String) -> Fut,
    Fut: std::future::Future<Output = Result<T, crate::wiki::WikiError>>,
{
    // By index: a closure taking a borrowed `Resolved` makes the stream's
    // future not `Send` for every lifetime, which the tool's boxed future
    // needs.
    // Every wiki at `HEAD`: the staged tip applies to a writer's one source.
    let head = context.read_ref("HEAD".into()).await;
    stream::iter(0..scope.wikis.len())
        .map(|n| {
            let (read, resolved, at) = (&read, &scope.wikis[n], head.clone());
            async move {
                let answer = match context.wiki(resolved, false).await {
                    Ok(wiki) => read(wiki, at).await.map_err(ToolError::from),
                    Err(error) => Err(error),
                };
                let answer = match answer {
                    Ok(answer) => Ok((answer, as_of(context, resolved).await)),
                    Err(error) => Err(error),
                };
                (resolved, answer)
            }
        })
        .buffered(CONCURRENT_WIKIS)
        .collect()
        .await
}

/// `value` (an object) with `repository` first among its fields.
fn tagged(repository: &str, value: Value) -> Value {
    let mut object = Map::new();
    object.insert("repository".into(), Value::String(repository.to_owned()));
    if let Value::Object(fields) = value {
        object.extend(fields);
    }
    Value::Object(object)
}

/// `search_wiki` over every wiki the caller may read.
pub async fn search(context: &Context, query: &str, git_ref: &str) -> ToolOutcome {
    validate::check_query(query)?;
    check_head(git_ref)?;
    let scope = scope(context);
    let mut hits: Vec<(f64, usize, Value)> = Vec::new();
    let (mut wikis, mut failed) = (Vec::new(), Vec::new());
    let mut total = 0;
    let query_text = query.to_owned();
    let answers = each_wiki(context, &scope, |wiki, at| {
        let query = query_text.clone();
        async move { wiki.search(&at, &query).await }
    })
    .await;
    for (order, (resolved, answer)) in answers.into_iter().enumerate() {
        let (result, as_of) = match answer {
            Ok(answer) => answer,
            Err(error) => {
                failed.push(unavailable(resolved, &error));
                continue;
            }
        };
        total += result.total;
        let repository = &resolved.identity.source_repository;
        for hit in &result.hits {
            let value = serde_json::to_value(hit)
                .map_err(|e| ToolError::internal("encoding a search hit", e))?;
            hits.push((hit.score, order, tagged(repository, value)));
        }
        let fields =
            json!({"ref": result.commit, "total": result.total, "truncated": result.truncated});
        wikis.push(wiki_line(resolved, fields, as_of));
    }
    // Best first; ties by configuration order, then as each wiki ranked them.
    hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    hits.truncate(MAX_HITS);
    Ok(json!({
        "query": query,
        "hits": hits.into_iter().map(|(_, _, hit)| hit).collect::<Vec<_>>(),
        "total": total,
        "wikis": wikis,
        "unavailable": failed,
        "wikis_left_out": scope.left_out,
    }))
}

/// `get_context` over every wiki the caller may read: each wiki answers
/// with the whole budget, and the items of all are ranked together and cut
/// to it again.
pub async fn context(context: &Context, request: ContextRequest, git_ref: &str) -> ToolOutcome {
    request.check()?;
    check_head(git_ref)?;
    let scope = scope(context);
    let mut items: Vec<(u32, usize, Value)> = Vec::new();
    let (mut wikis, mut failed) = (Vec::new(), Vec::new());
    let mut known: Vec<Vec<Value>> = vec![Vec::new(); request.paths.len()];
    let mut left_items = 0;
    let mut by_kind: std::collections::BTreeMap<String, usize> = Default::default();
    let mut read_more: Vec<Value> = Vec::new();
    let answers = each_wiki(context, &scope, |wiki, at| {
        let request = request.clone();
        async move { wiki.context(&at, request).await }
    })
    .await;
    for (order, (resolved, answer)) in answers.into_iter().enumerate() {
        let (answer, as_of) = match answer {
            Ok(answer) => answer,
            Err(error) => {
                failed.push(unavailable(resolved, &error));
                continue;
            }
        };
        let repository = &resolved.identity.source_repository;
        for (asked, summary) in answer.paths.iter().enumerate() {
            if summary.kind != "unknown"
                && let Some(list) = known.get_mut(asked)
            {
                list.push(tagged(repository, encode(summary)?));
            }
        }
        for item in &answer.items {
            items.push((item.relevance, order, tagged(repository, encode(item)?)));
        }
        left_items += answer.left_out.items;
        for (kind, count) in &answer.left_out.by_kind {
            *by_kind.entry((*kind).to_owned()).or_default() += count;
        }
        for page in &answer.left_out.read_more {
            push_read_more(&mut read_more, repository, page);
        }
        let fields = json!({
            "ref": answer.commit,
            "truncated": answer.truncated,
            "unreadable_markers": answer.unreadable_markers,
        });
        wikis.push(wiki_line(resolved, fields, as_of));
    }
    let paths: Vec<Value> = request
        .paths
        .iter()
        .zip(known)
        .flat_map(|(path, found)| {
            if found.is_empty() {
                vec![json!({"path": path, "kind": "unknown"})]
            } else {
                found
            }
        })
        .collect();
    // Most relevant first; ties by configuration order, then each wiki's.
    items.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    // The budget counts the paths and the items, in the form sent.
    let bytes = |value: &Value, is_path: bool| match (request.format, is_path) {
        (Format::Json, _) => value.to_string().len() + 1,
        (Format::Text, true) => text::line_bytes(&text::path_line(value)),
        (Format::Text, false) => text::item_bytes(value),
    };
    let frame: usize = paths.iter().map(|path| bytes(path, true)).sum();
    let mut used = estimate_tokens(frame);
    let mut kept = Vec::new();
    for (_, _, item) in items {
        let cost = estimate_tokens(bytes(&item, false));
        if used + cost <= request.max_tokens {
            used += cost;
            kept.push(item);
            continue;
        }
        left_items += 1;
        let kind = item["kind"].as_str().unwrap_or("item").to_owned();
        *by_kind.entry(kind).or_default() += 1;
        let page = item["page"]
            .as_str()
            .or_else(|| item["pages"][0].as_str())
            .unwrap_or("Home.md");
        push_read_more(
            &mut read_more,
            item["repository"].as_str().unwrap_or_default(),
            page,
        );
    }
    Ok(json!({
        "paths": paths,
        "query": request.query,
        "items": kept,
        "tokens": {
            "max": request.max_tokens,
            "used": used,
        },
        "left_out": left_out(left_items, by_kind, read_more),
        "wikis": wikis,
        "unavailable": failed,
        "wikis_left_out": scope.left_out,
    }))
}

/// What the org answer left out, shaped as one wiki's (`{"items": 0}` when
/// nothing).
fn left_out(
    items: usize,
    by_kind: std::collections::BTreeMap<String, usize>,
    read_more: Vec<Value>,
) -> Value {
    let mut left_out = json!({"items": items});
    if !by_kind.is_empty() {
        left_out["by_kind"] = json!(by_kind);
    }
    if !read_more.is_empty() {
        left_out["read_more"] = Value::Array(read_more);
    }
    left_out
}

/// A part of a wiki's answer as JSON.
fn encode<T: serde::Serialize>(value: &T) -> Result<Value, ToolError> {
    serde_json::to_value(value).map_err(|e| ToolError::internal("encoding a context answer", e))
}

fn push_read_more(read_more: &mut Vec<Value>, repository: &str, page: &str) {
    let entry = json!({"repository": repository, "page": page});
    if read_more.len() < MAX_READ_MORE && !read_more.contains(&entry) {
        read_more.push(entry);
    }
}
