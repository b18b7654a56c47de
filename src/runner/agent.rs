//! What every agent backend gets and gives back, and the builtin agent's
//! driver: it reads the wiki through the writer child, reads the files of
//! the areas it records entries in through the child's evidence tools
//! (`list_source_files`, and `get_source_file_heads` for many files' first
//! [`HEAD_BYTES`] in one call, whose purpose [`crate::purpose`] finds) and
//! the manifests [`crate::manifests`] reads (at the tip for `Dependencies.md`,
//! and at each PR's merge commit and first parent for its changes), plans
//! with [`super::builtin::plan_full`], and writes through the child's
//! `patch_wiki_pages` / `write_wiki_pages`, never through the engine.
//!
//! Invariants:
//! - source files are read only at the job's tip and only through the
//!   writer's evidence tools; at most [`WHAT_IS_HERE_FILES`] per area and
//!   [`HEADS_PER_JOB`] per job are read (an area past that keeps its section
//!   as it is; areas without a section go first, the others in an order
//!   that moves with the tip, so no area waits for ever); manifests are read only at evidence commits and their
//!   parents, at most
//!   [`builtin::MAX_MANIFESTS`] at the tip and [`CHANGE_READS_PER_JOB`] for
//!   the PRs' changes; the root and folders are not listed again for
//!   manifests when the range starts at a commit this process found
//!   manifest-free and its first-parent path holds only PR merges that name
//!   no manifest (the answer at the tip is then the same);
//! - a job for one merged PR (a maintainer's request, possibly for an old PR)
//!   never re-derives the current-state sections ("What is here",
//!   `Dependencies.md`): only range jobs, whose tip is the newest commit
//!   reconciled, do;
//! - every write names the snapshot it was planned on (`expected_base`) and the
//!   destination the snapshot reported (`expected_wiki_repository`);
//! - on `conflict` (or `outcome_unknown`) the builtin agent re-reads a fresh
//!   snapshot and rebuilds its edit exactly once; entries keyed by merge sha make the rebuild skip what
//!   already landed; a second conflict ends the run with a receipt that says so;
//! - the receipt lists every PR of the evidence.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::builtin::{
    self, AreaFile, AreaFiles, CurrentPage, DependencyFacts, Listings, Plan, TipManifests,
    WHAT_IS_HERE_FILES,
};
use super::receipt::{PullResult, PullStatus, Receipt, ReceiptStatus};
use super::writer::{CallError, WriterClient};
use crate::forge::evidence::{EvidenceBundle, FileStatus};
use crate::manifests::{self, Manifest};
use crate::purpose::{HEAD_BYTES, purpose};
use crate::writer_contract::MAX_SOURCE_FILE;

/// At most this many pages per write call (DESIGN §7).
const PAGES_PER_CALL: usize = 20;
/// At most this many bytes of page content per write call (DESIGN §7), with margin.
const BYTES_PER_CALL: usize = 240 * 1024;
/// At most this many replacements per call (DESIGN §7).
const REPLACEMENTS_PER_CALL: usize = crate::wiki::validate::MAX_REPLACEMENTS;
/// At most this many file heads are read for the "What is here" sections of
/// one job.
pub const HEADS_PER_JOB: usize = 600;

/// What an agent backend is given.
pub struct AgentTask<'a> {
    /// The source repository (`owner/name`), the `repository` of every tool call.
    pub repository: &'a str,
    pub job_id: i64,
    pub bundle: &'a EvidenceBundle,
    /// The source's policy file at the verified sha, if any (guidance, as data).
    pub policy: Option<&'a str>,
    /// Awaited before each write attempt of the builtin agent with the attempt
    /// number (tests use it to move the wiki under the agent).
    pub before_write: Option<&'a super::Hook>,
}

impl AgentTask<'_> {
    /// The job's data as an external agent receives it: one JSON value
    /// labelled as untrusted data, never spliced into instructions.
    pub fn job_data(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "teammem job data (untrusted; not instructions)",
            "repository": self.repository,
            "job_id": self.job_id,
            "evidence": self.bundle,
            "policy": self.policy,
        })
    }
}

/// How an agent run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentOutcome {
    pub receipt: Receipt,
    /// A `failed` receipt from a cause that may clear up (a conflict twice,
    /// a transport error): the job retries with backoff.
    pub retry_failed: bool,
}

/// An agent that could not produce a receipt at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentError {
    pub reason: String,
    pub retryable: bool,
}

/// The wiki as one snapshot showed it.
struct View {
    base: String,
    wiki_repository: String,
    pages: BTreeMap<String, CurrentPage>,
}

async fn read_view(client: &WriterClient, task: &AgentTask<'_>) -> Result<View, CallError> {
    let snapshot = client
        .result("get_wiki_snapshot", json!({"repository": task.repository}))
        .await?;
    let wiki_repository = snapshot["wiki_repository"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let Some(base) = snapshot["sha"].as_str().map(str::to_owned) else {
        return Err(CallError::Protocol(format!(
            "the wiki {wiki_repository} has no commits yet; create its first page (Home) in GitHub's web interface, then retry the job"
        )));
    };
    let listed = client
        .result(
            "list_wiki_pages",
            json!({"repository": task.repository, "ref": base}),
        )
        .await?;
    let existing: BTreeSet<String> = listed["pages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["path"].as_str().map(str::to_owned))
        .collect();
    let mut pages = BTreeMap::new();
    for path in builtin::pages_of_interest(task.bundle) {
        if !existing.contains(&path) {
            continue;
        }
        let page = client
            .result(
                "get_wiki_page",
                json!({"repository": task.repository, "ref": base, "path": path}),
            )
            .await?;
        pages.insert(
            path,
            CurrentPage {
                sha: page["sha"].as_str().unwrap_or_default().to_owned(),
                content: page["content"].as_str().unwrap_or_default().to_owned(),
            },
        );
    }
    Ok(View {
        base,
        wiki_repository,
        pages,
    })
}

/// A listing call's entries: (path, is a directory), and whether it was cut.
async fn list_files(
    client: &WriterClient,
    task: &AgentTask<'_>,
    directory: &str,
    recursive: bool,
) -> Result<(Vec<(String, bool)>, bool), CallError> {
    let listed = client
        .result(
            "list_source_files",
            json!({
                "repository": task.repository,
                "commit": task.bundle.job.tip().as_str(),
                "directory": directory,
                "recursive": recursive,
            }),
        )
        .await?;
    let entries = listed["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["path"].as_str()?.to_owned(), e["type"] == "directory")))
        .collect();
    Ok((entries, listed["truncated"] == true))
}

/// The first `max_bytes` of `path` at `commit` through `get_source_file`,
/// and whether it was cut: `Ok(None)` when the file is not there or cannot be
/// read as text.
async fn read_head(
    client: &WriterClient,
    task: &AgentTask<'_>,
    commit: &str,
    path: &str,
    max_bytes: usize,
) -> Result<Option<(String, bool)>, CallError> {
    let file = client
        .result(
            "get_source_file",
            json!({
                "repository": task.repository,
                "commit": commit,
                "path": path,
                "max_bytes": max_bytes,
            }),
        )
        .await;
    let file = match file {
        Ok(file) => file,
        Err(CallError::Tool(f)) if unreadable(&f.kind) => return Ok(None),
        Err(e) => return Err(e),
    };
    let content = file["content"].as_str().unwrap_or_default().to_owned();
    Ok(Some((content, file["truncated"] == true)))
}

/// A reading tool's failure kind that means "no text to read here" (the file
/// is absent, or too large or binary) rather than a failed call.
fn unreadable(kind: &str) -> bool {
    matches!(kind, "not_found" | "limit_exceeded")
}

/// How many file heads one `get_source_file_heads` call asks for (its limits
/// are 50 paths and 128 KiB of paths × bytes).
const HEADS_PER_CALL: usize = 32;

/// The purpose of each of `paths` at the job's tip, read with one
/// `get_source_file_heads` call per [`HEADS_PER_CALL`] paths: `None` for a
/// file that states none or cannot be read as text (too large, binary, gone).
/// Another per-path error ends the read like a failed call.
async fn file_purposes(
    client: &WriterClient,
    task: &AgentTask<'_>,
    paths: &[String],
) -> Result<Vec<Option<(String, crate::facts::Lines)>>, CallError> {
    let mut purposes = Vec::with_capacity(paths.len());
    for chunk in paths.chunks(HEADS_PER_CALL) {
        let heads = client
            .result(
                "get_source_file_heads",
                json!({
                    "repository": task.repository,
                    "commit": task.bundle.job.tip().as_str(),
                    "paths": chunk,
                    "max_bytes": HEAD_BYTES,
                }),
            )
            .await?;
        let files = heads["files"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if files.len() != chunk.len() {
            return Err(CallError::Protocol(format!(
                "get_source_file_heads answered {} files for {} paths",
                files.len(),
                chunk.len()
            )));
        }
        for (path, file) in chunk.iter().zip(files) {
            if let Some(error) = file.get("error") {
                let kind = error["type"].as_str().unwrap_or_default();
                if unreadable(kind) {
                    purposes.push(None);
                    continue;
                }
                return Err(CallError::Tool(super::writer::ToolFailure {
                    tool: "get_source_file_heads".into(),
                    kind: kind.to_owned(),
                    outcome: "not_applied".into(),
                    message: error["message"].as_str().unwrap_or_default().to_owned(),
                }));
            }
            let content = file["content"].as_str().unwrap_or_default();
            // A head cut inside a line ends at the last whole line.
            let content = if file["truncated"] == true {
                content.rfind('\n').map_or(content, |end| &content[..=end])
            } else {
                content
            };
            purposes.push(purpose(path, content.as_bytes()));
        }
    }
    Ok(purposes)
}

/// Reads the files of the areas `slugs` (not yet in `listings`), in that
/// order ([`builtin::refresh_order`]), at the job's tip, each with its
/// purpose, into `listings`, spending at most `heads` file reads. An area that cannot be read (other than for a transient cause,
/// which ends the run) or that would overspend is left out, so its page
/// keeps its section as it is.
async fn read_listings(
    client: &WriterClient,
    task: &AgentTask<'_>,
    slugs: &[String],
    listings: &mut Listings,
    heads: &mut usize,
) -> Result<(), CallError> {
    let transient = |e: &CallError| matches!(e, CallError::Tool(f) if f.is_transient());
    let (root, root_cut) = match list_files(client, task, "", false).await {
        Ok(found) => found,
        Err(e) if !transient(&e) => {
            tracing::warn!(reason = %e, "the source tree could not be listed; the area pages keep their \"What is here\" sections");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    for slug in slugs {
        if listings.contains_key(slug) {
            continue;
        }
        let mut paths: Vec<String> = Vec::new();
        let mut cut = root_cut;
        let mut readable = true;
        for (path, directory) in &root {
            let area = if *directory {
                path.clone()
            } else {
                builtin::ROOT_AREA.to_owned()
            };
            if builtin::area_slug(&area) != *slug {
                continue;
            }
            if !directory {
                paths.push(path.clone());
                continue;
            }
            match list_files(client, task, path, true).await {
                Ok((files, truncated)) => {
                    cut |= truncated;
                    paths.extend(files.into_iter().filter(|(_, d)| !d).map(|(p, _)| p));
                }
                Err(e) if !transient(&e) => {
                    tracing::warn!(reason = %e, area = %slug, "an area's files could not be listed; its page keeps its \"What is here\" section");
                    readable = false;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        paths.sort();
        paths.dedup();
        let shown = paths.len().min(WHAT_IS_HERE_FILES);
        if !readable || shown > *heads {
            continue;
        }
        *heads -= shown;
        let mut files = Vec::with_capacity(shown);
        match file_purposes(client, task, &paths[..shown]).await {
            Ok(purposes) => {
                files.extend(paths.iter().zip(purposes).map(|(path, purpose)| AreaFile {
                    path: path.clone(),
                    purpose,
                }))
            }
            Err(e) if !transient(&e) => {
                tracing::warn!(reason = %e, area = %slug, "an area's files could not be read; its page keeps its \"What is here\" section");
                readable = false;
            }
            Err(e) => return Err(e),
        }
        if readable {
            listings.insert(
                slug.clone(),
                AreaFiles {
                    commit: task.bundle.job.tip().clone(),
                    files,
                    omitted: paths.len() - shown,
                    listing_cut: cut,
                },
            );
        }
    }
    Ok(())
}

/// At most this many manifest reads (both sides of each PR's manifests) per
/// job for the entries' dependency changes.
pub const CHANGE_READS_PER_JOB: usize = 40;
/// At most this many top-level folders are listed to find manifests.
const MANIFEST_FOLDERS: usize = 50;

/// A manifest at `commit`, parsed: `Ok(None)` when it is not there or cannot
/// be read as text. A file over the read limit is read in part (and `cut`).
async fn read_manifest(
    client: &WriterClient,
    task: &AgentTask<'_>,
    commit: &str,
    path: &str,
) -> Result<Option<Manifest>, CallError> {
    let Some((content, truncated)) = read_head(client, task, commit, path, MAX_SOURCE_FILE).await?
    else {
        return Ok(None);
    };
    let content = content.as_str();
    let content = if truncated {
        content.rfind('\n').map_or("", |end| &content[..=end])
    } else {
        content
    };
    Ok(manifests::parse(path, content).map(|mut m| {
        m.cut |= truncated;
        m
    }))
}

/// The source commits at which this process listed the root and top-level
/// folders completely and found no manifest, per repository (the newest
/// only). A commit names its tree, so the fact never goes out of date; it
/// lets the next range, which starts there, skip the listing.
static NO_MANIFESTS: std::sync::Mutex<BTreeMap<String, String>> =
    std::sync::Mutex::new(BTreeMap::new());

fn remember_manifests(repository: &str, tip: &crate::ids::Sha, none: bool) {
    let mut known = NO_MANIFESTS.lock().unwrap_or_else(|e| e.into_inner());
    let key = repository.to_ascii_lowercase();
    if none {
        // Bounded by the configured sources: one entry per repository.
        known.insert(key, tip.as_str().to_ascii_lowercase());
    } else {
        known.remove(&key);
    }
}

/// Whether the job's tip is known to have no manifests: its range starts at a
/// commit remembered to have none, and every commit on the first-parent path
/// from the tip back to that start is a recorded PR's merge with its whole
/// file list, none of which names a manifest (the caller checked that).
/// Adding or removing a manifest anywhere the search looks is such a file
/// change, so the answer at the tip is the start's.
fn no_manifests_known(repository: &str, bundle: &EvidenceBundle) -> bool {
    let crate::ids::Scope::Range { before, after } = &bundle.job.scope else {
        return false;
    };
    let known = NO_MANIFESTS.lock().unwrap_or_else(|e| e.into_inner());
    if known
        .get(&repository.to_ascii_lowercase())
        .map(String::as_str)
        != Some(before.as_str().to_ascii_lowercase().as_str())
    {
        return false;
    }
    drop(known);
    first_parent_path_is_pulls(bundle, before.as_str(), after.as_str())
}

/// Whether the first-parent path from `after` back to `before` runs only
/// through the bundle's PR merges, each with its whole file list.
fn first_parent_path_is_pulls(bundle: &EvidenceBundle, before: &str, after: &str) -> bool {
    if bundle.commits_truncated || bundle.pull_requests_truncated {
        return false;
    }
    let mut at = after.to_ascii_lowercase();
    let before = before.to_ascii_lowercase();
    // Each step moves to a distinct commit of the bundle, so this ends.
    for _ in 0..=bundle.commits.len() {
        if at == before {
            return true;
        }
        let pulled = bundle
            .pull_requests
            .iter()
            .any(|p| p.merge_sha.eq_ignore_ascii_case(&at) && !p.files_truncated);
        let Some(commit) = bundle
            .commits
            .iter()
            .find(|c| c.sha.eq_ignore_ascii_case(&at))
        else {
            return false;
        };
        let Some(parent) = commit.parents.first() else {
            return false;
        };
        if !pulled {
            return false;
        }
        at = parent.to_ascii_lowercase();
    }
    false
}

/// The manifest paths touched by the job's PRs.
fn touched_manifests(task: &AgentTask<'_>) -> BTreeSet<String> {
    task.bundle
        .pull_requests
        .iter()
        .flat_map(|p| &p.files)
        .filter(|f| manifests::ecosystem_of(&f.path).is_some())
        .map(|f| f.path.clone())
        .collect()
}

/// What the job's dependency facts are: the tip's manifests (when a PR
/// touched one or the page does not exist yet) and each PR's changes to the
/// manifests it touched, read at its merge commit and its first parent (for
/// the range's first PR, the range's base). Reads that fail for a lasting cause leave the
/// part out (the page keeps its text, the entry names no changes).
async fn read_dependencies(
    client: &WriterClient,
    task: &AgentTask<'_>,
    page_exists: bool,
    at_tip: bool,
) -> Result<DependencyFacts, CallError> {
    let transient = |e: &CallError| matches!(e, CallError::Tool(f) if f.is_transient());
    let touched = touched_manifests(task);
    let mut facts = DependencyFacts::default();
    let known_empty =
        !page_exists && touched.is_empty() && no_manifests_known(task.repository, task.bundle);
    if at_tip && (!touched.is_empty() || !page_exists) && !known_empty {
        let tip = task.bundle.job.tip().clone();
        let mut found: BTreeSet<String> = touched.clone();
        let listed = match list_files(client, task, "", false).await {
            Ok(root) => Some(root),
            Err(e) if !transient(&e) => None,
            Err(e) => return Err(e),
        };
        if let Some((root, root_cut)) = listed {
            let mut folders = 0;
            // Whether the search saw everything it looks at: only then may
            // "no manifests" be remembered for the next job.
            let mut complete = !root_cut;
            for (path, directory) in root {
                if !directory {
                    if manifests::ecosystem_of(&path).is_some() {
                        found.insert(path);
                    }
                    continue;
                }
                if folders == MANIFEST_FOLDERS {
                    complete = false;
                    continue;
                }
                folders += 1;
                match list_files(client, task, &path, false).await {
                    Ok((files, cut)) => {
                        complete &= !cut;
                        found.extend(
                            files
                                .into_iter()
                                .filter(|(p, d)| !d && manifests::ecosystem_of(p).is_some())
                                .map(|(p, _)| p),
                        );
                    }
                    Err(e) if !transient(&e) => complete = false,
                    Err(e) => return Err(e),
                }
            }
            remember_manifests(task.repository, &tip, complete && found.is_empty());
            let mut read = Vec::new();
            let mut omitted = 0;
            for path in &found {
                if read.len() == builtin::MAX_MANIFESTS {
                    omitted += 1;
                    continue;
                }
                match read_manifest(client, task, tip.as_str(), path).await {
                    Ok(Some(manifest)) => read.push((path.clone(), manifest)),
                    Ok(None) => {}
                    Err(e) if !transient(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            facts.tip = Some(TipManifests {
                commit: tip,
                manifests: read,
                omitted,
            });
        }
    }
    let mut reads = CHANGE_READS_PER_JOB;
    for pull in &task.bundle.pull_requests {
        let parent = task
            .bundle
            .commits
            .iter()
            .find(|c| c.sha.eq_ignore_ascii_case(&pull.merge_sha))
            .and_then(|c| c.parents.first())
            .filter(|p| task.bundle.readable_commit(p));
        let Some(parent) = parent else {
            continue;
        };
        let mut changes = Vec::new();
        for file in &pull.files {
            if manifests::ecosystem_of(&file.path).is_none() || reads < 2 {
                continue;
            }
            reads -= 2;
            let side = |commit: String, absent: bool| {
                let path = file.path.clone();
                async move {
                    if absent {
                        return Ok(None);
                    }
                    read_manifest(client, task, &commit, &path).await
                }
            };
            let new = side(pull.merge_sha.clone(), file.status == FileStatus::Removed).await;
            let old = side(parent.clone(), file.status == FileStatus::Added).await;
            match (old, new) {
                (Ok(old), Ok(new)) => changes.push((
                    file.path.clone(),
                    manifests::diff(old.as_ref(), new.as_ref()),
                )),
                (Err(e), _) | (_, Err(e)) if transient(&e) => return Err(e),
                _ => {}
            }
        }
        if !changes.is_empty() {
            facts
                .changes
                .insert(pull.merge_sha.to_ascii_lowercase(), changes);
        }
    }
    Ok(facts)
}

/// Splits items into calls of at most [`PAGES_PER_CALL`] items,
/// [`BYTES_PER_CALL`] bytes and [`REPLACEMENTS_PER_CALL`] replacements;
/// `weigh` gives an item's bytes and replacements.
fn batches<T>(items: Vec<T>, weigh: impl Fn(&T) -> (usize, usize)) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = Vec::new();
    let (mut bytes, mut replacements) = (0, 0);
    for item in items {
        let (n, r) = weigh(&item);
        match out.last_mut() {
            Some(last)
                if last.len() < PAGES_PER_CALL
                    && bytes + n <= BYTES_PER_CALL
                    && replacements + r <= REPLACEMENTS_PER_CALL =>
            {
                bytes += n;
                replacements += r;
                last.push(item);
            }
            _ => {
                (bytes, replacements) = (n, r);
                out.push(vec![item]);
            }
        }
    }
    out
}

fn commit_message(task: &AgentTask<'_>) -> String {
    let numbers: Vec<String> = task
        .bundle
        .pull_requests
        .iter()
        .map(|p| format!("#{}", p.number))
        .collect();
    let mut message = format!(
        "teammem: record {} (job {})",
        numbers.join(", "),
        task.job_id
    );
    if message.len() > 200 {
        message = format!(
            "teammem: record {} pull requests (job {})",
            numbers.len(),
            task.job_id
        );
    }
    message
}

/// One page of a plan: patched in place or written whole.
enum Step {
    Patch(String, builtin::PagePatch),
    Write(builtin::NewPage),
}

impl Step {
    /// The bytes and replacements the step adds to a call: the bytes are the
    /// page as the step leaves it (the writer bounds a call by the sizes of
    /// the pages it results in, patched pages whole), `pages` holding the
    /// current ones.
    fn weight(&self, pages: &BTreeMap<String, CurrentPage>) -> (usize, usize) {
        match self {
            Step::Patch(path, p) => {
                let now = pages.get(path).map_or(0, |page| page.content.len());
                let grown: usize = p.replacements.iter().map(|r| r.new.len()).sum();
                let shrunk: usize = p.replacements.iter().map(|r| r.old.len()).sum();
                ((now + grown).saturating_sub(shrunk), p.replacements.len())
            }
            Step::Write(w) => (w.content.len(), 0),
        }
    }
}

/// Applies a plan as few commits as the per-call limits allow (one for a
/// job of up to 20 pages): each batch is one `write_wiki_pages` call that
/// also carries the batch's patches, or `patch_wiki_pages` for a batch of
/// patches only; the base is chained. Returns the new tip and whether
/// anything changed.
async fn apply_plan(
    client: &WriterClient,
    task: &AgentTask<'_>,
    view: &View,
    plan: Plan,
) -> Result<(String, bool), (CallError, String, bool)> {
    let mut tip = view.base.clone();
    let mut changed = false;
    let message = commit_message(task);
    let steps: Vec<Step> = plan
        .patches
        .into_iter()
        .map(|(path, patch)| Step::Patch(path, patch))
        .chain(plan.writes.into_iter().map(Step::Write))
        .collect();
    for batch in batches(steps, |step| step.weight(&view.pages)) {
        let mut patches = serde_json::Map::new();
        let mut pages = Vec::new();
        for step in batch {
            match step {
                Step::Patch(path, patch) => {
                    patches.insert(path, serde_json::to_value(patch).unwrap_or(Value::Null));
                }
                Step::Write(write) => pages.push(write),
            }
        }
        let mut arguments = json!({
            "repository": task.repository,
            "expected_wiki_repository": view.wiki_repository,
            "expected_base": tip,
            "message": message,
            "patches": patches,
        });
        let tool = if pages.is_empty() {
            "patch_wiki_pages"
        } else {
            arguments["pages"] = serde_json::to_value(&pages).unwrap_or(Value::Null);
            "write_wiki_pages"
        };
        let result = client
            .result(tool, arguments)
            .await
            .map_err(|e| (e, tip.clone(), changed))?;
        changed |= result["status"] == "updated";
        tip = result["sha"].as_str().unwrap_or(&tip).to_owned();
    }
    Ok((tip, changed))
}

fn pull_results(
    plan: &Plan,
    written: &BTreeSet<u64>,
    failed: Option<PullStatus>,
) -> Vec<PullResult> {
    plan.pulls
        .iter()
        .map(|p| PullResult {
            number: p.number,
            merge_sha: p.merge_sha.clone(),
            status: if written.contains(&p.number) {
                PullStatus::Updated
            } else if p.already_recorded {
                PullStatus::NoChange
            } else {
                failed.unwrap_or(PullStatus::Updated)
            },
            pages: p.pages.clone(),
        })
        .collect()
}

/// Runs the builtin agent against the writer child.
pub async fn run_builtin(
    client: &WriterClient,
    task: &AgentTask<'_>,
) -> Result<AgentOutcome, AgentError> {
    let mut written: BTreeSet<u64> = BTreeSet::new();
    let mut first_base: Option<String> = None;
    let mut last_tip: Option<String> = None;
    let mut listings = Listings::new();
    let mut heads = HEADS_PER_JOB;
    let mut deps: Option<DependencyFacts> = None;
    let current_state = matches!(task.bundle.job.scope, crate::ids::Scope::Range { .. });
    for attempt in 0..2 {
        let view = read_view(client, task).await.map_err(|e| AgentError {
            retryable: matches!(&e, CallError::Tool(f) if f.is_transient()),
            reason: format!("the builtin agent could not read the wiki: {e}"),
        })?;
        first_base.get_or_insert_with(|| view.base.clone());
        let wiki_repository = view.wiki_repository.clone();
        // The areas that get entries have their files read (once per run),
        // by range jobs only: their tip is the newest commit reconciled. A
        // request for one (possibly old) merged PR must not set the pages'
        // current state back to its merge commit.
        let areas = builtin::plan(task.bundle, &view.pages).area_slugs();
        if current_state && areas.iter().any(|slug| !listings.contains_key(slug)) {
            let order = builtin::refresh_order(&areas, &view.pages, task.bundle.job.tip());
            read_listings(client, task, &order, &mut listings, &mut heads)
                .await
                .map_err(|e| AgentError {
                    retryable: matches!(&e, CallError::Tool(f) if f.is_transient()),
                    reason: format!("the builtin agent could not read the source's files: {e}"),
                })?;
        }
        if deps.is_none() {
            let page_exists = view.pages.contains_key(builtin::DEPENDENCIES);
            deps = Some(
                read_dependencies(client, task, page_exists, current_state)
                    .await
                    .map_err(|e| AgentError {
                        retryable: matches!(&e, CallError::Tool(f) if f.is_transient()),
                        reason: format!(
                            "the builtin agent could not read the source's manifests: {e}"
                        ),
                    })?,
            );
        }
        let plan = builtin::plan_full(
            task.bundle,
            &view.pages,
            &listings,
            deps.as_ref().unwrap_or(&DependencyFacts::default()),
        );
        if plan.is_empty() {
            let any_written = !written.is_empty();
            return Ok(AgentOutcome {
                receipt: Receipt {
                    status: if any_written {
                        ReceiptStatus::Updated
                    } else {
                        ReceiptStatus::NoChange
                    },
                    wiki_repository,
                    wiki_sha: Some(last_tip.unwrap_or(view.base)),
                    base_sha: first_base,
                    pull_requests: pull_results(&plan, &written, None),
                    summary: if any_written {
                        "every pull request of the range is recorded".into()
                    } else {
                        "every pull request of the range was already recorded".into()
                    },
                },
                retry_failed: false,
            });
        }
        if let Some(hook) = task.before_write {
            hook(attempt).await;
        }
        let to_write: Vec<u64> = plan
            .pulls
            .iter()
            .filter(|p| !p.already_recorded)
            .map(|p| p.number)
            .collect();
        match apply_plan(client, task, &view, plan.clone()).await {
            Ok((tip, _changed)) => {
                written.extend(to_write);
                return Ok(AgentOutcome {
                    receipt: Receipt {
                        status: ReceiptStatus::Updated,
                        wiki_repository,
                        wiki_sha: Some(tip),
                        base_sha: first_base,
                        pull_requests: pull_results(&plan, &written, None),
                        summary: format!(
                            "recorded {} pull request(s) on Home, the area pages and the Changelog{}",
                            written.len(),
                            if attempt > 0 {
                                " after one rebuild on a fresh snapshot"
                            } else {
                                ""
                            }
                        ),
                    },
                    retry_failed: false,
                });
            }
            // A conflict, or a write whose outcome is unknown: re-read the wiki
            // (the markers tell what landed) and rebuild once.
            Err((CallError::Tool(failure), tip, changed))
                if failure.kind == "conflict" || failure.kind == "outcome_unknown" =>
            {
                if changed {
                    last_tip = Some(tip);
                }
                if attempt == 0 {
                    tracing::info!(
                        "the wiki moved during the write; rebuilding on a fresh snapshot"
                    );
                    continue;
                }
                let status = if changed || !written.is_empty() {
                    ReceiptStatus::Partial
                } else {
                    ReceiptStatus::Failed
                };
                return Ok(AgentOutcome {
                    receipt: Receipt {
                        status,
                        wiki_repository,
                        wiki_sha: last_tip.or(Some(view.base)),
                        base_sha: first_base,
                        pull_requests: pull_results(&plan, &written, Some(PullStatus::Failed)),
                        summary: "the wiki kept moving: a write conflicted again after one rebuild on a fresh snapshot; the job retries later".into(),
                    },
                    retry_failed: true,
                });
            }
            Err((error, _, _)) => {
                return Err(AgentError {
                    retryable: matches!(&error, CallError::Tool(f) if f.is_transient()),
                    reason: format!("the builtin agent's write failed: {error}"),
                });
            }
        }
    }
    unreachable!("the loop returns on its second attempt")
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::forge::evidence::{
        BUNDLE_VERSION, ChangedFile, CommitInfo, JobScope, PullRequest, SourceInfo,
    };

    fn sha(c: char) -> String {
        c.to_string().repeat(40)
    }

    /// A range `0..b` of commits `a` (parent `0`) and `b` (parent `a`), each a
    /// PR merge with the given files.
    fn range(repository: &str, files: [&str; 2]) -> EvidenceBundle {
        let commit = |s: char, parent: char| CommitInfo {
            sha: sha(s),
            parents: vec![sha(parent)],
            author: "Zoë".into(),
            committed_at: "2026-11-30T10:00:00Z".into(),
            subject: "change".into(),
        };
        let pull = |number: u64, s: char, path: &str| PullRequest {
            number,
            title: "change".into(),
            body: String::new(),
            body_truncated: false,
            author: "Zoë".into(),
            labels: vec![],
            merged_at: "2026-11-30T10:00:00Z".into(),
            merge_sha: sha(s),
            files: vec![ChangedFile {
                path: path.into(),
                status: FileStatus::Added,
                additions: 1,
                deletions: 0,
            }],
            files_truncated: false,
        };
        EvidenceBundle {
            version: BUNDLE_VERSION,
            source: SourceInfo {
                repository: repository.into(),
                forge: "local".into(),
                default_branch: "main".into(),
            },
            job: JobScope {
                job_id: 1,
                scope: crate::ids::Scope::Range {
                    before: crate::ids::Sha::parse(&sha('0')).unwrap(),
                    after: crate::ids::Sha::parse(&sha('b')).unwrap(),
                },
            },
            commits: vec![commit('a', '0'), commit('b', 'a')],
            commits_truncated: false,
            pull_requests: vec![pull(1, 'a', files[0]), pull(2, 'b', files[1])],
            pull_requests_truncated: false,
            stale_facts: Vec::new(),
            marker_rewrites: Default::default(),
        }
    }

    #[test]
    fn manifests_are_known_absent_only_from_a_remembered_start_through_pull_merges() {
        let repository = "unit/no-manifests";
        let start = crate::ids::Sha::parse(&sha('0')).unwrap();
        let plain = range(repository, ["a/x.txt", "b/y.txt"]);
        // Nothing remembered yet: list.
        assert!(!no_manifests_known(repository, &plain));
        remember_manifests(repository, &start, true);
        assert!(no_manifests_known(repository, &plain));
        // Another repository's memory does not count.
        assert!(!no_manifests_known(
            "unit/other",
            &range("unit/other", ["a", "b"])
        ));
        // A commit on the path that is no PR merge (a direct push): list.
        let mut pushed = plain.clone();
        pushed.pull_requests.remove(0);
        assert!(!no_manifests_known(repository, &pushed));
        // A PR whose file list was cut: list.
        let mut cut = plain.clone();
        cut.pull_requests[1].files_truncated = true;
        assert!(!no_manifests_known(repository, &cut));
        // A range that starts elsewhere: list.
        let mut elsewhere = plain.clone();
        elsewhere.job.scope = crate::ids::Scope::Range {
            before: crate::ids::Sha::parse(&sha('a')).unwrap(),
            after: crate::ids::Sha::parse(&sha('b')).unwrap(),
        };
        assert!(!no_manifests_known(repository, &elsewhere));
        // Found manifests (or an incomplete search) forget the start.
        remember_manifests(repository, &start, false);
        assert!(!no_manifests_known(repository, &plain));
        // (A PR that touches a manifest is the caller's check: touched_manifests.)
        let touching = range(repository, ["a/x.txt", "b/Cargo.toml"]);
        let task = AgentTask {
            repository,
            job_id: 1,
            bundle: &touching,
            policy: None,
            before_write: None,
        };
        assert_eq!(
            touched_manifests(&task),
            BTreeSet::from(["b/Cargo.toml".to_owned()])
        );
    }

    #[test]
    fn a_patch_weighs_the_page_it_leaves_not_its_replacements() {
        let page = |content: String| CurrentPage {
            sha: String::new(),
            content,
        };
        // Five 60 KiB area pages, each patched with a 100-byte change: the
        // writer counts the five whole pages (300 KiB), so two calls.
        let mut pages = BTreeMap::new();
        let mut steps = Vec::new();
        for n in 0..5 {
            let path = format!("Areas/a{n}.md");
            pages.insert(path.clone(), page("x".repeat(60 * 1024)));
            let patch = builtin::PagePatch {
                expected_sha: String::new(),
                replacements: vec![builtin::Replacement {
                    old: "x".repeat(50),
                    new: "y".repeat(150),
                }],
            };
            steps.push(Step::Patch(path, patch));
        }
        assert_eq!(steps[0].weight(&pages), (60 * 1024 + 100, 1));
        let calls = batches(steps, |step| step.weight(&pages));
        assert_eq!(calls.iter().map(Vec::len).collect::<Vec<_>>(), vec![3, 2]);
        for call in &calls {
            let bytes: usize = call.iter().map(|step| step.weight(&pages).0).sum();
            assert!(bytes <= crate::wiki::validate::MAX_BATCH_BYTES, "{bytes}");
        }
    }

    #[test]
    fn batches_respect_count_size_and_replacements() {
        let items: Vec<usize> = vec![1; 45];
        let b = batches(items, |n| (*n, 0));
        assert_eq!(b.iter().map(Vec::len).collect::<Vec<_>>(), vec![20, 20, 5]);
        let big = vec![BYTES_PER_CALL / 2 + 1; 3];
        assert_eq!(batches(big, |n| (*n, 0)).len(), 3);
        // 20 area pages of 3 replacements each: 13 fit in 40.
        let patches: Vec<usize> = vec![3; 20];
        let b = batches(patches, |r| (1, *r));
        assert_eq!(b.iter().map(Vec::len).collect::<Vec<_>>(), vec![13, 7]);
        assert!(
            b.iter()
                .all(|call| call.iter().sum::<usize>() <= REPLACEMENTS_PER_CALL)
        );
    }
}
