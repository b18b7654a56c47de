//! The wiki read toolset: snapshot, list, get, search, history, diff.
//!
//! Served by every server kind. Every tool is read-only, non-destructive,
//! idempotent and closed-world (the team memory of configured sources, nothing
//! else), and takes `repository` = the *source*; the wiki is resolved from
//! configuration. Rules on refs, paths, limits and sizes are the engine's
//! (`crate::wiki::validate`) and come back as envelope errors. A page read
//! says whose its last change was (`last_change`: teammem's job commit or a
//! person's), so a reader can tell checked memory from hand-written text.
//! A page comes folded (teammem comments out, evidence markers as
//! `citations`, lines kept) unless `format: "raw"` asks for the Markdown
//! byte for byte; a writer (a job's, the operator's) answers raw by default,
//! because its callers edit by exact anchors. Without `repository`,
//! `search_wiki` searches every wiki the caller may read (`super::org`).
//!
//! Invariant: no page is parsed on the async runtime. Folding a page and
//! comparing it with its previous version run on the blocking pool under
//! one deadline ([`crate::wiki::DEFAULT_DEADLINE`]), as the engine's own
//! reads do, so a large page read never stalls the daemon's other requests.

use rmcp::model::JsonObject;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::wiki_answer::{as_of, to_outcome, with_as_of};
use super::{Answer, CallFuture, Hints, ServerKind, ToolDef, Toolset, parse_arguments};
use crate::mcp::context::Context;
use crate::wiki::WikiError;
use crate::wiki::fold::{self, PageCitation};
use crate::writer_contract::tools::{
    self, HistoryArgs, ListArgs, PageArgs, PageFormat, SnapshotArgs,
};

pub const TOOLSET: Toolset = Toolset {
    name: "wiki_read",
    served_by: &[ServerKind::Agent, ServerKind::WikiWriter],
    tools: &[
        ToolDef {
            name: tools::GET_WIKI_SNAPSHOT,
            title: "Wiki snapshot",
            description: "Resolve the source's wiki: its default branch and full tip sha (initialized: false for an empty wiki). Pin later reads to this sha; writes take it as expected_base together with wiki_repository as expected_wiki_repository. as_of is the source commit the memory is reconciled to (null with as_of_reason when unknown): source changes after it are not in the wiki yet. stale_facts counts facts whose cited source lines changed since they were written; get_wiki_page lists a page's.",
            hints: Hints::READ,
            input_schema: snapshot_schema,
            handler: get_wiki_snapshot,
        },
        ToolDef {
            name: tools::LIST_WIKI_PAGES,
            title: "List wiki pages",
            description: "List the Markdown pages (path, blob sha, size) of the wiki at a ref; at most 2,000 pages (truncated says when there were more).",
            hints: Hints::READ,
            input_schema: list_schema,
            handler: list_wiki_pages,
        },
        ToolDef {
            name: tools::GET_WIKI_PAGE,
            title: "Read a wiki page",
            description: "Read one page at a ref. format folded (the default on coding agents' servers): content is the page with teammem's comments (evidence markers, anchors) folded out, line for line (line N of content is line N of the page), and citations lists what each statement rests on: line, path, commit, lines, and status current, re-anchored (the page's last change moved the citation to where the cited lines are now; from says where they were) or stale (changed_in: the source commit that changed the cited lines; deleted when the file went away): do not rely on a stale fact without checking the code; a #pr-N citation gives pull_request instead of path. format raw (the default on a job's writer): content is the Markdown byte for byte, as an edit's anchors need it, and stale_facts lists each stale statement (line, fact, path, lines, cited_commit, changed_in, deleted). Both give the blob sha (the expected_sha of a patch). last_change says who made the page's last commit: by teammem (a job's commit, with its Teammem-Job trailer) or by a person (anyone else, e.g. an edit in GitHub's web interface; text a person wrote is theirs, not checked memory), with commit and at; null when not found in the newest 1,000 commits.",
            hints: Hints::READ,
            input_schema: page_schema,
            handler: get_wiki_page,
        },
        ToolDef {
            name: tools::SEARCH_WIKI,
            title: "Search the wiki",
            description: "The wiki passages most relevant to query, best first, at most 20 and at most 3 from one page. Without repository, every wiki you may read is searched (at most 200; wikis_left_out names the rest) and each hit names its repository; wikis lists each wiki searched (ref, total, as_of) and unavailable those that could not be read. Ask in plain words or keywords: stop and question words do not drive the ranking; paths (src/x.rs) and identifiers may be named. Each hit: its page (path, sha), score, the matching line (line, plain-text snippet) and the heading nearest above it; a pull request's entry repeated on several pages (Changelog, quarter and area pages) is one hit with pull_request, merge_commit and every page in pages. total counts the pages matching any word. Indexes at most 8 MiB, pages up to 256 KiB each (truncated says when pages were left out). as_of is the source commit the memory is reconciled to (null with as_of_reason when unknown).",
            hints: Hints::READ,
            input_schema: search_schema,
            handler: search_wiki,
        },
        ToolDef {
            name: tools::LIST_WIKI_HISTORY,
            title: "Wiki history",
            description: "Commits (sha, message, time), newest first, reachable from a ref; only those touching path when given; limit 1-100 (default 20).",
            hints: Hints::READ,
            input_schema: history_schema,
            handler: list_wiki_history,
        },
        ToolDef {
            name: tools::GET_WIKI_DIFF,
            title: "Wiki diff",
            description: "Unified diff of the wiki between two refs (at most 512 KiB). A page version over 256 KiB, or pages past 8 MiB read in all, are not diffed: not_diffed names each (path, bytes, reason).",
            hints: Hints::READ,
            input_schema: diff_schema,
            handler: get_wiki_diff,
        },
    ],
};

fn snapshot_schema() -> Value {
    super::object_schema(
        json!({"repository": super::repository_schema()}),
        &["repository"],
    )
}

fn list_schema() -> Value {
    super::object_schema(
        json!({
            "repository": super::repository_schema(),
            "ref": super::ref_schema("The commit to list (default HEAD)"),
        }),
        &["repository"],
    )
}

fn page_schema() -> Value {
    super::object_schema(
        json!({
            "repository": super::repository_schema(),
            "path": {"type": "string", "description": "Page path, e.g. Home.md or area/Topic.md"},
            "ref": super::ref_schema("The commit to read at (default HEAD)"),
            "format": {"type": "string", "enum": ["folded", "raw"], "description": "folded: markers folded out of content, citations as data (default on coding agents' servers); raw: the Markdown byte for byte, for editing (default on a job's writer)"},
            "last_change": {"type": "boolean", "description": "false: a raw read leaves out last_change (finding it may walk up to 1,000 commits for a page that rarely changes); default true; folded reads always include it"},
        }),
        &["repository", "path"],
    )
}

fn search_schema() -> Value {
    super::object_schema(
        json!({
            "repository": super::org_repository_schema(),
            "query": {"type": "string", "minLength": 1, "maxLength": 512, "description": "Words to rank pages by, case-insensitively"},
            "ref": super::ref_schema("The commit to search (default HEAD; only with repository)"),
        }),
        &["query"],
    )
}

fn history_schema() -> Value {
    super::object_schema(
        json!({
            "repository": super::repository_schema(),
            "path": {"type": "string", "description": "Only commits touching this page"},
            "ref": super::ref_schema("The commit to start from (default HEAD)"),
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20, "description": "Most commits to return"},
        }),
        &["repository"],
    )
}

fn diff_schema() -> Value {
    super::object_schema(
        json!({
            "repository": super::repository_schema(),
            "from": super::ref_schema("The older commit"),
            "to": super::ref_schema("The newer commit"),
        }),
        &["repository", "from", "to"],
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    repository: Option<String>,
    query: String,
    #[serde(rename = "ref", default = "tools::head")]
    git_ref: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DiffArgs {
    repository: String,
    from: String,
    to: String,
}

/// Resolves the source, opens its wiki and runs `read` on it.
macro_rules! read_tool {
    ($context:expr, $repository:expr, |$wiki:ident| $body:expr) => {{
        let resolved = match $context.resolve(&$repository) {
            Ok(resolved) => resolved,
            Err(error) => return Ok(Answer::new(None, Err(error))),
        };
        let identity = Some(resolved.identity.clone());
        let $wiki = match $context.wiki(&resolved, false).await {
            Ok(wiki) => wiki,
            Err(error) => return Ok(Answer::new(identity, Err(error))),
        };
        Ok(Answer::new(identity, to_outcome($body.await)))
    }};
}

/// Like `read_tool!`, and adds `as_of` (with `as_of_reason`) to the result.
macro_rules! read_tool_as_of {
    ($context:expr, $repository:expr, |$wiki:ident| $body:expr) => {{
        let resolved = match $context.resolve(&$repository) {
            Ok(resolved) => resolved,
            Err(error) => return Ok(Answer::new(None, Err(error))),
        };
        let identity = Some(resolved.identity.clone());
        let $wiki = match $context.wiki(&resolved, false).await {
            Ok(wiki) => wiki,
            Err(error) => return Ok(Answer::new(identity, Err(error))),
        };
        let outcome = to_outcome($body.await);
        let outcome = match outcome {
            Ok(value) => Ok(with_as_of(value, as_of($context, &resolved).await)),
            Err(error) => Err(error),
        };
        Ok(Answer::new(identity, outcome))
    }};
}

fn get_wiki_snapshot(context: &Context, arguments: JsonObject) -> CallFuture<'_> {
    Box::pin(async move {
        let args: SnapshotArgs = parse_arguments(tools::GET_WIKI_SNAPSHOT, arguments)?;
        read_tool_as_of!(context, args.repository, |wiki| async {
            let mut snapshot = wiki.snapshot().await?;
            // A job reads what it staged: its staged tip is its HEAD.
            if let Some(tip) = context.staged_tip().await {
                snapshot.stale_facts = wiki.stale_facts(&tip).await?.stale;
                snapshot.sha = Some(tip);
            }
            Ok::<_, WikiError>(snapshot)
        })
    })
}

fn list_wiki_pages(context: &Context, arguments: JsonObject) -> CallFuture<'_> {
    Box::pin(async move {
        let mut args: ListArgs = parse_arguments(tools::LIST_WIKI_PAGES, arguments)?;
        args.git_ref = context.read_ref(args.git_ref).await;
        read_tool!(context, args.repository, |wiki| wiki
            .list_pages(&args.git_ref))
    })
}

fn get_wiki_page(context: &Context, arguments: JsonObject) -> CallFuture<'_> {
    Box::pin(async move {
        let mut args: PageArgs = parse_arguments(tools::GET_WIKI_PAGE, arguments)?;
        args.git_ref = context.read_ref(args.git_ref).await;
        let format = args.format.unwrap_or(match context.binding.profile.kind {
            ServerKind::WikiWriter => PageFormat::Raw,
            ServerKind::Agent => PageFormat::Folded,
        });
        read_tool!(context, args.repository, |wiki| async {
            let page = wiki.get_page(&args.git_ref, &args.path).await?;
            if format == PageFormat::Raw && !args.last_change {
                return Ok::<_, WikiError>(PageAnswer::Raw(PageRead {
                    page,
                    format: "raw",
                    last_change: None,
                }));
            }
            // At the page's own commit, so both answers describe one version.
            let last = wiki
                .last_change(
                    &page.commit,
                    &page.path,
                    crate::writer_contract::TRAILER_JOB,
                )
                .await?;
            if format == PageFormat::Raw {
                return Ok::<_, WikiError>(PageAnswer::Raw(PageRead {
                    page,
                    format: "raw",
                    last_change: Some(last),
                }));
            }
            let deadline = tokio::time::Instant::now() + crate::wiki::DEFAULT_DEADLINE;
            let content = std::sync::Arc::new(page.content);
            let mut folded = {
                let content = content.clone();
                off_runtime(deadline, move || fold::fold(&content)).await?
            };
            // A citation teammem's last change moved reads as re-anchored:
            // compared with the page as that change found it.
            if let Some(last) = last.as_ref().filter(|l| l.by == "teammem")
                && folded.citations.iter().any(|c| c.path.is_some())
                && let Ok(history) = wiki.history(&last.commit, Some(&page.path), 2).await
                && let Some(before) = history.commits.get(1)
                && let Ok(previous) = wiki.get_page(&before.sha, &page.path).await
            {
                folded = off_runtime(deadline, move || {
                    fold::mark_reanchored(&mut folded, &content, &previous.content);
                    folded
                })
                .await?;
            }
            Ok(PageAnswer::Folded(FoldedRead {
                path: page.path,
                commit: page.commit,
                sha: page.sha,
                format: "folded",
                content: folded.text,
                citations: folded.citations,
                unreadable_markers: folded.unreadable_markers,
                last_change: last,
            }))
        })
    })
}

/// Runs `work` (parsing a page) on the blocking pool, so the async runtime's
/// workers stay free for other requests, and gives up at `deadline` like
/// the engine's calls do.
async fn off_runtime<T: Send + 'static>(
    deadline: tokio::time::Instant,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, WikiError> {
    match tokio::time::timeout_at(deadline, tokio::task::spawn_blocking(work)).await {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(err)) => Err(WikiError::internal("folding a page", err)),
        Err(_) => Err(WikiError::not_applied(
            crate::wiki::ErrorKind::Timeout,
            "folding the page did not finish before its deadline; try again",
        )),
    }
}

/// `get_wiki_page`'s result in either format.
#[derive(Serialize)]
#[serde(untagged)]
enum PageAnswer {
    Raw(PageRead),
    Folded(FoldedRead),
}

/// The page byte for byte, and who changed it last.
#[derive(Serialize)]
struct PageRead {
    #[serde(flatten)]
    page: crate::wiki::Page,
    format: &'static str,
    /// `None` when the caller asked to leave it out; `Some(None)`
    /// (`null`) when not found in the newest 1,000 commits.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_change: Option<Option<crate::wiki::LastChange>>,
}

/// The page folded, its citations, and who changed it last.
#[derive(Serialize)]
struct FoldedRead {
    path: String,
    #[serde(rename = "ref")]
    commit: String,
    sha: String,
    format: &'static str,
    content: String,
    citations: Vec<PageCitation>,
    #[serde(skip_serializing_if = "is_zero")]
    unreadable_markers: usize,
    last_change: Option<crate::wiki::LastChange>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn search_wiki(context: &Context, arguments: JsonObject) -> CallFuture<'_> {
    Box::pin(async move {
        let args: SearchArgs = parse_arguments(tools::SEARCH_WIKI, arguments)?;
        let Some(repository) = args.repository else {
            let outcome = super::org::search(context, &args.query, &args.git_ref).await;
            return Ok(Answer::new(None, outcome));
        };
        let git_ref = context.read_ref(args.git_ref).await;
        read_tool_as_of!(context, repository, |wiki| wiki
            .search(&git_ref, &args.query))
    })
}

fn list_wiki_history(context: &Context, arguments: JsonObject) -> CallFuture<'_> {
    Box::pin(async move {
        let mut args: HistoryArgs = parse_arguments(tools::LIST_WIKI_HISTORY, arguments)?;
        args.git_ref = context.read_ref(args.git_ref).await;
        let limit = u32::try_from(args.limit).map_err(|_| {
            WikiError::invalid_input(format!(
                "limit must be between 1 and 100, got {}",
                args.limit
            ))
        });
        read_tool!(context, args.repository, |wiki| async {
            wiki.history(&args.git_ref, args.path.as_deref(), limit?)
                .await
        })
    })
}

fn get_wiki_diff(context: &Context, arguments: JsonObject) -> CallFuture<'_> {
    Box::pin(async move {
        let mut args: DiffArgs = parse_arguments(tools::GET_WIKI_DIFF, arguments)?;
        args.from = context.read_ref(args.from).await;
        args.to = context.read_ref(args.to).await;
        read_tool!(context, args.repository, |wiki| wiki
            .diff(&args.from, &args.to))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn page_work_leaves_the_runtime_free() {
        // The work waits for a message only another task on this one-thread
        // runtime sends: run inline, it would wait out its 10 s and fail.
        let (tx, rx) = std::sync::mpsc::channel();
        let deadline = tokio::time::Instant::now() + crate::wiki::DEFAULT_DEADLINE;
        let work = off_runtime(deadline, move || {
            rx.recv_timeout(std::time::Duration::from_secs(10)).is_ok()
        });
        let other = async move { tx.send(()).unwrap() };
        let (answered, ()) = tokio::join!(work, other);
        assert!(
            answered.unwrap(),
            "the runtime ran the other task meanwhile"
        );
    }
}
