//! The wiki write toolset: `write_wiki_pages` and `patch_wiki_pages`.
//!
//! Served only by the job-bound writer (`teammem mcp --wiki-writer`), never by a
//! read-only server. Both tools are annotated as writes that may replace page
//! text (`destructiveHint: true`) and are idempotent (repeating a call whose
//! pages already match answers `no-change` and writes nothing).
//!
//! Order of checks, each failure an envelope error that changed nothing:
//! binding (`permission_denied`), source (`not_found`), destination
//! precondition (`destination_changed`, before any credential or network use),
//! then the engine's argument rules, then the commit. A writer the runner
//! started stages each call on the job's own tree (`JobWrites::staged`) and
//! publishes nothing until the runner calls `publish_job_changes`, which is
//! never offered to an agent: a job that fails, times out or is cancelled
//! (its writer killed) leaves the wiki untouched, and one that succeeds adds
//! exactly one commit. A writer run by hand publishes each call by
//! compare-and-swap. The commit carries the job's trailers (`Teammem-Job`, `Teammem-Source`,
//! `Teammem-Range`). The runner's evidence-marker rewrites folded into a job's
//! write come only from the job's broker (the runner's in-memory bundle),
//! never from `evidence.json`; the engine checks each one and counts its bytes
//! against `agent.max_changed_bytes`. The writer's evidence tools are the
//! sibling toolset `job_evidence.rs`, served by the same server kind. The tools'
//! names and arguments are `writer_contract::tools`', shared with the runner.

use std::collections::BTreeMap;

use rmcp::model::JsonObject;
use serde_json::{Value, json};

use super::wiki_answer::to_outcome;
use super::{Answer, CallFuture, Hints, ServerKind, ToolDef, Toolset, parse_arguments};
use crate::mcp::context::{self, Context, Staged, WriteOrigin};
use crate::mcp::envelope::ToolError;
use crate::wiki::{Amend, CommitSpec, PagePatch, PageWrite, Replacement, WriteRules, WriteStatus};
use crate::writer_contract::tools::{self, PageArg, PatchArg, PatchArgs, PublishArgs, WriteArgs};

pub const TOOLSET: Toolset = Toolset {
    name: "wiki_write",
    served_by: &[ServerKind::WikiWriter],
    tools: &[
        ToolDef {
            name: tools::WRITE_WIKI_PAGES,
            title: "Write wiki pages",
            description: "Create or replace 1-20 Markdown pages with full contents (each at most 64 KiB, 256 KiB in all) in one commit whose only parent is expected_base; optional patches (the shape patch_wiki_pages takes) change other existing pages in the same commit, 20 pages at most in all, so one job's change is one commit. Take expected_base (sha) and expected_wiki_repository (wiki_repository) from one get_wiki_snapshot. Returns status updated or no-change and the new (or unchanged) tip sha. In a job, writes are staged: each call is a commit on the job's own tree (reads of HEAD and get_wiki_snapshot see it; the returned sha is the next call's expected_base), and all of the job's calls are published together as one commit when the job succeeds (nothing when it fails). On conflict read a fresh snapshot and reconcile; never retry blindly. Refused with permission_denied: replacing an existing protected page (Home.md, _Sidebar.md, _Footer.md unless configured) or an existing page a person last changed (its last commit has no Teammem-Job trailer); patch those with patch_wiki_pages instead. Creating new pages is allowed. A job may change at most agent.max_changed_bytes (256 KiB by default) in all, else limit_exceeded.",
            hints: WRITE,
            input_schema: write_schema,
            handler: write_wiki_pages,
        },
        ToolDef {
            name: tools::PATCH_WIKI_PAGES,
            title: "Patch wiki pages",
            description: "Exact-anchor replacements in 1-20 existing pages, in one commit whose only parent is expected_base. Every non-empty old must occur exactly once in the page at expected_base; replacements may not overlap; an empty old appends new at the end (one per page); at most 40 replacements and 256 KiB of replacement input. Untouched bytes are kept exactly. In a job the call is staged like write_wiki_pages' (published with the job's other writes as one commit when the job succeeds). On a protected page or one a person last changed, only lines carrying a <!-- teammem:... --> marker may be replaced (insert after teammem's anchor line by replacing it with itself plus the new lines) and an empty old appends, and every line added must be blank, carry a teammem marker, or be a plain heading above a marked line; on a protected page a marked line added must be the marker alone or a link to a wiki page (- [label](Page) <!-- teammem:name -->); anything else is refused with permission_denied. A job may change at most agent.max_changed_bytes (256 KiB by default) in all, else limit_exceeded.",
            hints: WRITE,
            input_schema: patch_schema,
            handler: patch_wiki_pages,
        },
        ToolDef {
            name: tools::PUBLISH_JOB_CHANGES,
            title: "Publish the job's changes",
            description: "The runner's alone (never offered to an agent): publish every write this job staged as one commit on the wiki tip its first write was based on, by compare-and-swap, with the job's trailers. Returns status updated and the published sha; when nothing was staged, the job's evidence-marker rewrites not yet on the wiki are published alone, else no-change with the wiki's tip; conflict when the wiki moved meanwhile (the staged writes are kept, nothing is published).",
            hints: WRITE,
            input_schema: publish_schema,
            handler: publish_job_changes,
        },
    ],
};

fn publish_schema() -> Value {
    super::object_schema(
        json!({"repository": super::repository_schema()}),
        &["repository"],
    )
}

const WRITE: Hints = Hints {
    read_only: false,
    destructive: true,
    idempotent: true,
    open_world: false,
};

fn common_properties() -> serde_json::Map<String, Value> {
    let Value::Object(properties) = json!({
        "repository": super::repository_schema(),
        "expected_wiki_repository": {"type": "string", "description": "wiki_repository from the snapshot the change is based on (owner/name); a precondition, never a destination override"},
        "expected_base": {"type": "string", "description": "sha from the same snapshot: the full 40-character commit the change is based on"},
        "message": {"type": "string", "maxLength": 512, "description": "One-line commit message (at most 512 bytes); cite the full source commit sha; trailers naming the job are added"},
    }) else {
        unreachable!("a JSON object literal")
    };
    properties
}

const COMMON_REQUIRED: [&str; 4] = [
    "repository",
    "expected_wiki_repository",
    "expected_base",
    "message",
];

fn write_schema() -> Value {
    let mut properties = common_properties();
    properties.insert(
        "pages".into(),
        json!({
            "type": "array",
            "minItems": 1,
            "maxItems": 20,
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Page path ending in .md"},
                    "content": {"type": "string", "description": "The full UTF-8 content (at most 64 KiB)"},
                },
                "required": ["path", "content"],
                "additionalProperties": false,
            },
        }),
    );
    properties.insert(
        "patches".into(),
        patches_schema(
            "Optional: other existing pages patched in the same commit, exactly as patch_wiki_pages takes them (path -> patch); a page is written or patched, not both, and 20 pages at most in all",
            0,
        ),
    );
    let mut required = COMMON_REQUIRED.to_vec();
    required.push("pages");
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// `{path: {expected_sha, replacements}}`, at least `min` pages.
fn patches_schema(description: &str, min: u64) -> Value {
    json!({
        "type": "object",
        "description": description,
        "minProperties": min,
        "maxProperties": 20,
        "additionalProperties": {
            "type": "object",
            "properties": {
                "expected_sha": {"type": "string", "description": "The page's blob sha at expected_base (from list_wiki_pages or get_wiki_page)"},
                "replacements": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "old": {"type": "string", "description": "Exact text occurring once in the page, or empty to append"},
                            "new": {"type": "string"},
                        },
                        "required": ["old", "new"],
                        "additionalProperties": false,
                    },
                },
            },
            "required": ["expected_sha", "replacements"],
            "additionalProperties": false,
        },
    })
}

fn patch_schema() -> Value {
    let mut properties = common_properties();
    properties.insert(
        "patches".into(),
        patches_schema("Page path -> its patch", 1),
    );
    let mut required = COMMON_REQUIRED.to_vec();
    required.push("patches");
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// What a write changes: pages written whole and pages patched, as one commit.
pub struct Change {
    pub writes: Vec<PageWrite>,
    pub patches: Vec<PagePatch>,
}

impl Change {
    pub fn write(pages: Vec<PageWrite>) -> Change {
        Change {
            writes: pages,
            patches: Vec::new(),
        }
    }

    pub fn patch(patches: Vec<PagePatch>) -> Change {
        Change {
            writes: Vec::new(),
            patches,
        }
    }
}

/// One write request, from a tool call or the operator CLI.
pub struct WriteRequest {
    pub repository: String,
    /// `None` only for the operator, who is checked against the resolved wiki anyway.
    pub expected_wiki_repository: Option<String>,
    pub expected_base: String,
    pub message: String,
    pub change: Change,
}

/// Runs one write: binding, source, destination precondition, then the engine.
pub async fn run(context: &Context, origin: &WriteOrigin, request: WriteRequest) -> Answer {
    let resolved = match context.resolve(&request.repository) {
        Ok(resolved) => resolved,
        Err(error) => return Answer::new(None, Err(error)),
    };
    let identity = Some(resolved.identity.clone());
    if let Some(expected) = &request.expected_wiki_repository
        && let Err(error) = Context::check_destination(&resolved, expected)
    {
        return Answer::new(identity, Err(error));
    }
    let wiki = match context.wiki(&resolved, true).await {
        Ok(wiki) => wiki,
        Err(error) => return Answer::new(identity, Err(error)),
    };
    let spec = CommitSpec {
        expected_destination: None,
        expected_base: request.expected_base,
        message: request.message,
        identity: context.committer(),
        trailers: context::trailers(origin, &resolved.source.repository),
    };
    // The operator is trusted (it holds the App key anyway): only the
    // job-bound writer is confined. The job's write state is locked through
    // the write, so the job's writes (and the settling of its rewrites) are
    // one at a time.
    let (rules, mut job) = match origin {
        WriteOrigin::Job(_) => {
            let writes = context.job_writes.lock().await;
            let amend = match amend_of(context).await {
                Ok(amend) => amend,
                Err(error) => return Answer::new(identity, Err(error)),
            };
            (
                job_rules(context, &resolved, amend, writes.changed_bytes),
                Some(writes),
            )
        }
        WriteOrigin::Operator => (WriteRules::default(), None),
    };
    let Change { writes, patches } = request.change;
    let staging = job.is_some() && context.stages_writes();
    let result = match &job {
        Some(job) if staging => {
            // A job builds on its own staged tip once it staged anything.
            let base_staged = match &job.staged {
                Some(staged) if staged.tip.eq_ignore_ascii_case(&spec.expected_base) => true,
                Some(staged) => {
                    return Answer::new(
                        identity,
                        Err(ToolError::new(
                            crate::wiki::ErrorKind::Conflict,
                            format!(
                                "this job's earlier writes are staged at {}; expected_base must be that sha: read get_wiki_snapshot again (it shows the job's staged tip) and build on it",
                                staged.tip
                            ),
                        )),
                    );
                }
                None => false,
            };
            wiki.stage_confined(&spec, writes, patches, &rules, base_staged)
                .await
        }
        _ => wiki.change_confined(&spec, writes, patches, &rules).await,
    };
    if let (Some(job), Ok(written)) = (&mut job, &result) {
        job.changed_bytes += written.changed_bytes;
        if staging && written.status == WriteStatus::Updated {
            let earlier = job.staged.take();
            let start = earlier.as_ref().map_or_else(
                || spec.expected_base.to_ascii_lowercase(),
                |staged| staged.start.clone(),
            );
            let mut messages = earlier.map(|staged| staged.messages).unwrap_or_default();
            messages.push(spec.message.clone());
            job.staged = Some(Staged {
                start,
                tip: written.sha.clone(),
                messages,
            });
        }
        // Written (staged or published), or found in place: a later write
        // carries no rewrite.
        if let Some(broker) = broker(context) {
            broker.settle_rewrites();
        }
    }
    Answer::new(identity, to_outcome(result))
}

/// What confines a job's write: its source's protected pages, the job
/// trailer that marks teammem's own pages, the job's byte budget (of which
/// `already_changed` is spent) and the runner's marker rewrites to fold in.
fn job_rules(
    context: &Context,
    resolved: &context::Resolved,
    amend: Amend,
    already_changed: u64,
) -> WriteRules {
    WriteRules {
        protected: resolved.source.protected_pages.clone(),
        owner_trailer: Some(crate::writer_contract::TRAILER_JOB.to_owned()),
        max_changed_bytes: Some(context.binding.config.agent_limits.max_changed_bytes),
        already_changed,
        amend: Some(std::sync::Arc::new(amend)),
    }
}

/// The message of a job's commit that holds only the runner's marker
/// rewrites.
const REWRITES_MESSAGE: &str = "teammem: evidence markers follow the source";

/// At most this many staged writes' messages are listed in the published
/// commit's body.
const MAX_LISTED_MESSAGES: usize = 20;

/// The published commit's message: the first staged write's, and the others
/// (distinct, at most [`MAX_LISTED_MESSAGES`]) as a list in the body.
fn job_message(messages: &[String]) -> String {
    let mut distinct: Vec<&str> = Vec::new();
    for message in messages {
        if !distinct.contains(&message.as_str()) {
            distinct.push(message);
        }
    }
    let Some((first, rest)) = distinct.split_first() else {
        return "teammem: update the wiki".to_owned();
    };
    let mut text = (*first).to_owned();
    if !rest.is_empty() {
        text.push('\n');
        for message in rest.iter().take(MAX_LISTED_MESSAGES) {
            text.push_str("\n- ");
            text.push_str(message);
        }
        if rest.len() > MAX_LISTED_MESSAGES {
            text.push_str(&format!(
                "\n- and {} more writes",
                rest.len() - MAX_LISTED_MESSAGES
            ));
        }
    }
    text
}

/// `publish_job_changes`: the job's staged writes as one commit on the tip
/// its first write was based on, by compare-and-swap. Nothing staged: the
/// runner's marker rewrites still pending, as the job's one commit, or the
/// wiki's tip, `no-change`. A moved tip is `conflict` and the staged writes
/// stay as they are (the runner starts the job's agent again on the new tip).
fn publish_job_changes(context: &Context, arguments: JsonObject) -> CallFuture<'_> {
    Box::pin(async move {
        let args: PublishArgs = parse_arguments(tools::PUBLISH_JOB_CHANGES, arguments)?;
        let origin = match origin(context) {
            Ok(origin) => origin,
            Err(error) => return Ok(Answer::new(None, Err(error))),
        };
        let resolved = match context.resolve(&args.repository) {
            Ok(resolved) => resolved,
            Err(error) => return Ok(Answer::new(None, Err(error))),
        };
        let identity = Some(resolved.identity.clone());
        let wiki = match context.wiki(&resolved, true).await {
            Ok(wiki) => wiki,
            Err(error) => return Ok(Answer::new(identity, Err(error))),
        };
        let mut job = context.job_writes.lock().await;
        if job.staged.is_none()
            && let Err(error) =
                stage_rewrites_alone(context, &wiki, &origin, &resolved, &mut job).await
        {
            return Ok(Answer::new(identity, Err(error)));
        }
        let Some(staged) = job.staged.clone() else {
            let tip = wiki.snapshot().await.and_then(|snapshot| {
                let sha = snapshot.sha.ok_or_else(|| {
                    crate::wiki::WikiError::not_found(
                        "the wiki has no pages yet; create its first page in GitHub's web interface, then retry the job",
                    )
                })?;
                Ok(crate::wiki::WriteResult {
                    status: WriteStatus::NoChange,
                    sha,
                    branch: snapshot.branch.unwrap_or_default(),
                    pages: Vec::new(),
                    changed_bytes: 0,
                })
            });
            return Ok(Answer::new(identity, to_outcome(tip)));
        };
        let spec = CommitSpec {
            expected_destination: None,
            expected_base: staged.start.clone(),
            message: job_message(&staged.messages),
            identity: context.committer(),
            trailers: context::trailers(&origin, &resolved.source.repository),
        };
        let result = wiki.publish_staged(&spec, &staged.start, &staged.tip).await;
        if result.is_ok() {
            // Published: the job's reads see the wiki itself again.
            job.staged = None;
        }
        Ok(Answer::new(identity, to_outcome(result)))
    })
}

/// A job that staged nothing still publishes the runner's marker rewrites
/// that are not on the wiki yet (and `Stale.md` with them): they become the
/// job's staged commit, spending its byte budget like any write. Nothing is
/// staged when the broker has none left.
async fn stage_rewrites_alone(
    context: &Context,
    wiki: &crate::wiki::Wiki,
    origin: &WriteOrigin,
    resolved: &context::Resolved,
    job: &mut context::JobWrites,
) -> Result<(), ToolError> {
    let amend = amend_of(context).await?;
    if amend.rewrites.is_empty() {
        return Ok(());
    }
    let snapshot = wiki.snapshot().await.map_err(ToolError::from)?;
    let Some(base) = snapshot.sha else {
        return Ok(());
    };
    let spec = CommitSpec {
        expected_destination: None,
        expected_base: base.clone(),
        message: REWRITES_MESSAGE.to_owned(),
        identity: context.committer(),
        trailers: context::trailers(origin, &resolved.source.repository),
    };
    let rules = job_rules(context, resolved, amend, job.changed_bytes);
    let written = wiki
        .stage_rewrites(&spec, &rules)
        .await
        .map_err(ToolError::from)?;
    job.changed_bytes += written.changed_bytes;
    if written.status == WriteStatus::Updated {
        job.staged = Some(Staged {
            start: base.to_ascii_lowercase(),
            tip: written.sha,
            messages: vec![spec.message],
        });
    }
    if let Some(broker) = broker(context) {
        broker.settle_rewrites();
    }
    Ok(())
}

/// The job's broker, when the runner started this writer.
fn broker(context: &Context) -> Option<&crate::writer_contract::broker::BrokerClient> {
    context.binding.writer.as_ref()?.broker.as_ref()
}

/// The runner's marker rewrites, from the broker's in-memory copy of the
/// job's bundle (never from a file the agent could write), with the job's
/// tip to check moved markers against, and `Stale.md` kept in step: the
/// job's first write carries them, so the job stays one commit. A writer
/// without a broker (run by hand) has no rewrites.
async fn amend_of(context: &Context) -> Result<Amend, ToolError> {
    let Some(broker) = broker(context) else {
        return Ok(Amend {
            rewrites: Default::default(),
            stale_page: true,
            tip: None,
        });
    };
    let unreachable = |error: crate::writer_contract::broker::BrokerError| {
        ToolError::new(
            crate::wiki::ErrorKind::UpstreamError,
            format!(
                "the job's evidence could not be read from its broker: {error}; nothing was written"
            ),
        )
    };
    let bundle = broker.evidence().await.map_err(unreachable)?;
    let rewrites = broker.pending_rewrites().await.map_err(unreachable)?;
    Ok(Amend {
        rewrites,
        stale_page: true,
        tip: Some(bundle.job.tip().clone()),
    })
}

/// The origin of a tool call: the job this writer is bound to.
fn origin(context: &Context) -> Result<WriteOrigin, ToolError> {
    context
        .binding
        .writer
        .clone()
        .map(WriteOrigin::Job)
        .ok_or_else(|| {
            ToolError::permission_denied("wiki writes are served only by the job-bound wiki writer")
        })
}

fn write_wiki_pages(context: &Context, arguments: JsonObject) -> CallFuture<'_> {
    Box::pin(async move {
        let args: WriteArgs = parse_arguments(tools::WRITE_WIKI_PAGES, arguments)?;
        let origin = match origin(context) {
            Ok(origin) => origin,
            Err(error) => return Ok(Answer::new(None, Err(error))),
        };
        if args.pages.is_empty() {
            return Ok(Answer::new(
                None,
                Err(ToolError::invalid_input(
                    "pages: give at least one page; to patch pages alone, call patch_wiki_pages",
                )),
            ));
        }
        let pages = args
            .pages
            .into_iter()
            .map(|page| PageWrite {
                path: page.path,
                content: page.content,
            })
            .collect();
        let request = WriteRequest {
            repository: args.repository,
            expected_wiki_repository: Some(args.expected_wiki_repository),
            expected_base: args.expected_base,
            message: args.message,
            change: Change {
                writes: pages,
                patches: patches_from(args.patches),
            },
        };
        Ok(run(context, &origin, request).await)
    })
}

fn patch_wiki_pages(context: &Context, arguments: JsonObject) -> CallFuture<'_> {
    Box::pin(async move {
        let args: PatchArgs = parse_arguments(tools::PATCH_WIKI_PAGES, arguments)?;
        let origin = match origin(context) {
            Ok(origin) => origin,
            Err(error) => return Ok(Answer::new(None, Err(error))),
        };
        let request = WriteRequest {
            repository: args.repository,
            expected_wiki_repository: Some(args.expected_wiki_repository),
            expected_base: args.expected_base,
            message: args.message,
            change: Change::patch(patches_from(args.patches)),
        };
        Ok(run(context, &origin, request).await)
    })
}

/// `{path: {expected_sha, replacements}}` as the engine's list.
fn patches_from(patches: BTreeMap<String, PatchArg>) -> Vec<PagePatch> {
    patches
        .into_iter()
        .map(|(path, patch)| PagePatch {
            path,
            expected_sha: patch.expected_sha,
            replacements: patch
                .replacements
                .into_iter()
                .map(|r| Replacement {
                    old: r.old,
                    new: r.new,
                })
                .collect(),
        })
        .collect()
}

/// Parses the operator's `--patches` JSON (same shape as the tool's `patches`).
pub fn parse_patches(value: Value) -> Result<Vec<PagePatch>, ToolError> {
    let patches: BTreeMap<String, PatchArg> = serde_json::from_value(value).map_err(|error| {
        ToolError::invalid_input(format!(
            "patches must be an object {{path: {{expected_sha, replacements: [{{old, new}}]}}}}: {error}"
        ))
    })?;
    Ok(patches_from(patches))
}

/// Parses the operator's `--pages` JSON (same shape as the tool's `pages`).
pub fn parse_pages(value: Value) -> Result<Vec<PageWrite>, ToolError> {
    let pages: Vec<PageArg> = serde_json::from_value(value).map_err(|error| {
        ToolError::invalid_input(format!(
            "pages must be an array of {{path, content}} objects: {error}"
        ))
    })?;
    Ok(pages
        .into_iter()
        .map(|page| PageWrite {
            path: page.path,
            content: page.content,
        })
        .collect())
}
