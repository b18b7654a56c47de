//! What the builtin agent reads through the writer child before it plans:
//! the wiki as one snapshot shows it (the pages a plan may touch, and every
//! part of the quarter pages its pull requests' entries belong on), and the
//! files of the areas it records entries in, each with the purpose its first
//! lines state ([`crate::purpose`]), read at the job's tip through the
//! child's evidence tools (`list_source_files`, and `get_source_file_heads`
//! for many files' first [`HEAD_BYTES`] in one call).
//!
//! Invariants: source files are read only at the job's tip and only through
//! the writer's evidence tools; at most [`WHAT_IS_HERE_FILES`] per area and
//! [`HEADS_PER_JOB`] per job are read (an area past that keeps its section as
//! it is; areas without a section go first, the others in an order that
//! moves with the tip, so no area waits for ever), and at most
//! [`INCLUDED_DOCS_PER_AREA`] crate docs its files name with `include_str!`;
//! a read that fails for a lasting cause leaves its part out, a transient
//! one ends the run.

use std::collections::{BTreeMap, BTreeSet};

use super::archive::archive_page;
use super::areas::{area_of_entry, area_slug};
use super::inputs::{AreaFile, AreaFiles, CurrentPage, Listings};
use super::interest::{archives_of_interest, pages_of_interest, quarters_of_interest};
use super::sections::WHAT_IS_HERE_FILES;
use crate::forge::evidence::{EntryKind, TreeEntry};
use crate::purpose::{HEAD_BYTES, Stated, included_purpose, stated};
use crate::runner::agent::AgentTask;
use crate::runner::writer::{CallError, ToolFailure, WriterClient};
use crate::wiki::ErrorKind;
use crate::wiki::paths::collision_key;
use crate::writer_contract::tools::{self, FileArgs, HeadOutcome, HeadsArgs, TreeArgs};

/// At most this many file heads are read for the "What is here" sections of
/// one job.
pub const HEADS_PER_JOB: usize = 600;

/// Whether a failed call may succeed when tried again later (the run ends
/// and the job retries), as opposed to a lasting cause.
pub fn transient(e: &CallError) -> bool {
    matches!(e, CallError::Tool(f) if f.is_transient())
}

/// The wiki as one snapshot showed it.
pub struct View {
    pub base: String,
    pub wiki_repository: String,
    /// By the path the plan knows a page by (a page a person moved or
    /// renamed in case only is here under teammem's path: see `moved`).
    pub pages: BTreeMap<String, CurrentPage>,
    /// teammem's path of a page → where a person put it: in a folder, or
    /// under its name in another case (a GitHub wiki finds a page by its
    /// name, whatever its folder, so a link to it still works). The plan's
    /// patches go there.
    pub moved: BTreeMap<String, String>,
    /// Every page the listing showed, by its name folded ([`page_key`]):
    /// a new page the plan writes whose name is taken is not written.
    pub by_name: BTreeMap<String, Vec<String>>,
}

/// What identifies a page on a GitHub wiki: its file name without its
/// folder, compared as the writer compares paths (case and Unicode
/// normalization folded).
pub fn page_key(path: &str) -> String {
    collision_key(path.rsplit('/').next().unwrap_or(path))
}

impl View {
    /// Where the page teammem calls `path` is: `path` itself, or the one
    /// page of that name in another folder or case.
    fn locate(
        existing: &BTreeSet<String>,
        by_name: &BTreeMap<String, Vec<String>>,
        path: &str,
    ) -> Option<String> {
        if existing.contains(path) {
            return Some(path.to_owned());
        }
        match by_name.get(&page_key(path)).map(Vec::as_slice) {
            Some([one]) => Some(one.clone()),
            _ => None,
        }
    }
}

pub async fn read_view(client: &WriterClient, task: &AgentTask<'_>) -> Result<View, CallError> {
    let snapshot = client.snapshot(task.repository).await?;
    let wiki_repository = snapshot.wiki_repository;
    let Some(base) = snapshot.result.sha else {
        return Err(CallError::Protocol(format!(
            "the wiki {wiki_repository} has no commits yet; create its first page (Home) in GitHub's web interface, then retry the job"
        )));
    };
    let listed = client.list_pages(task.repository, &base).await?;
    let complete = !listed.truncated;
    let mut existing: BTreeSet<String> = listed.pages.into_iter().map(|p| p.path).collect();
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in &existing {
        by_name
            .entry(page_key(path))
            .or_default()
            .push(path.clone());
    }
    let mut pages = BTreeMap::new();
    let quarters = if complete {
        // Each part of a quarter of interest, where teammem put it or where
        // a person moved it.
        let mut wanted = archives_of_interest(task.bundle, &existing);
        for (family, period) in quarters_of_interest(task.bundle) {
            for part in 1.. {
                let path = archive_page(&family, period, part);
                if View::locate(&existing, &by_name, &path).is_none() {
                    break;
                }
                wanted.insert(path);
            }
        }
        wanted
    } else {
        // A listing cut short may miss quarter pages, and a part the plan
        // did not see would be written over: ask for each part in turn.
        let mut found = BTreeSet::new();
        for (family, period) in quarters_of_interest(task.bundle) {
            for part in 1.. {
                let path = archive_page(&family, period, part);
                match client.page(task.repository, &base, &path).await {
                    Ok(page) => {
                        pages.insert(
                            path.clone(),
                            CurrentPage {
                                sha: page.sha,
                                content: page.content,
                            },
                        );
                        found.insert(path);
                    }
                    Err(CallError::Tool(f)) if f.kind == ErrorKind::NotFound => break,
                    Err(e) => return Err(e),
                }
            }
        }
        existing.extend(pages_of_interest(task.bundle));
        found
    };
    let mut moved = BTreeMap::new();
    for path in pages_of_interest(task.bundle).into_iter().chain(quarters) {
        if pages.contains_key(&path) {
            continue;
        }
        // A page a person moved into a folder or renamed in case only is
        // still the page: it is read, and patched, where the person put it.
        let Some(at) = View::locate(&existing, &by_name, &path) else {
            continue;
        };
        let page = match client.page(task.repository, &base, &at).await {
            Ok(page) => page,
            // Probed past a cut listing: a page of interest that is not there.
            Err(CallError::Tool(f)) if !complete && f.kind == ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if at != path {
            moved.insert(path.clone(), at);
        }
        pages.insert(
            path,
            CurrentPage {
                sha: page.sha,
                content: page.content,
            },
        );
    }
    Ok(View {
        base,
        wiki_repository,
        pages,
        moved,
        by_name,
    })
}

/// A listing call's entries and whether it was cut.
pub async fn list_entries(
    client: &WriterClient,
    task: &AgentTask<'_>,
    directory: &str,
    recursive: bool,
) -> Result<(Vec<TreeEntry>, bool), CallError> {
    let listed = client
        .source_files(&TreeArgs {
            repository: task.repository.to_owned(),
            directory: directory.to_owned(),
            recursive,
            commit: Some(task.bundle.job.tip().as_str().to_owned()),
        })
        .await?;
    Ok((listed.entries, listed.truncated))
}

/// A listing call's files and directories (not its submodules: nothing of
/// theirs can be read): (path, is a directory), and whether it was cut.
pub async fn list_files(
    client: &WriterClient,
    task: &AgentTask<'_>,
    directory: &str,
    recursive: bool,
) -> Result<(Vec<(String, bool)>, bool), CallError> {
    let (entries, truncated) = list_entries(client, task, directory, recursive).await?;
    let entries = entries
        .into_iter()
        .filter(|e| e.kind != EntryKind::Submodule)
        .map(|e| (e.path, e.kind == EntryKind::Directory))
        .collect();
    Ok((entries, truncated))
}

/// The first `max_bytes` of `path` at `commit` through `get_source_file`,
/// and whether it was cut: `Ok(None)` when the file is not there or cannot be
/// read as text.
pub async fn read_head(
    client: &WriterClient,
    task: &AgentTask<'_>,
    commit: &str,
    path: &str,
    max_bytes: usize,
) -> Result<Option<(String, bool)>, CallError> {
    let file = client
        .source_file(&FileArgs {
            repository: task.repository.to_owned(),
            path: path.to_owned(),
            commit: Some(commit.to_owned()),
            max_bytes: Some(max_bytes as i64),
        })
        .await;
    match file {
        Ok(file) => Ok(Some((file.content, file.truncated))),
        Err(CallError::Tool(f)) if unreadable(f.kind) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A reading tool's failure kind that means "no text to read here" (the file
/// is absent, or too large or binary) rather than a failed call.
fn unreadable(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::NotFound | ErrorKind::LimitExceeded)
}

/// At most this many files named by `#![doc = include_str!(…)]` are read
/// for one area's purposes.
pub const INCLUDED_DOCS_PER_AREA: usize = 8;

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
    let mut includes: Vec<(usize, String, crate::facts::Lines)> = Vec::new();
    for chunk in paths.chunks(HEADS_PER_CALL) {
        let heads = client
            .source_file_heads(&HeadsArgs {
                repository: task.repository.to_owned(),
                paths: chunk.to_vec(),
                max_bytes: HEAD_BYTES as i64,
                commit: Some(task.bundle.job.tip().as_str().to_owned()),
            })
            .await?;
        let files = heads.files;
        if files.len() != chunk.len() {
            return Err(CallError::Protocol(format!(
                "get_source_file_heads answered {} files for {} paths",
                files.len(),
                chunk.len()
            )));
        }
        for (path, file) in chunk.iter().zip(files) {
            let (content, truncated) = match &file.head {
                HeadOutcome::Read { content, truncated } => (content.as_str(), *truncated),
                HeadOutcome::Failed { error } if unreadable(error.kind) => {
                    purposes.push(None);
                    continue;
                }
                HeadOutcome::Failed { error } => {
                    return Err(CallError::Tool(ToolFailure {
                        tool: tools::GET_SOURCE_FILE_HEADS.into(),
                        kind: error.kind,
                        outcome: "not_applied".into(),
                        message: error.message.clone(),
                    }));
                }
            };
            // A head cut inside a line ends at the last whole line.
            let content = if truncated {
                content.rfind('\n').map_or(content, |end| &content[..=end])
            } else {
                content
            };
            match stated(path, content.as_bytes()) {
                Some(Stated::Purpose(text, lines)) => purposes.push(Some((text, lines))),
                Some(Stated::Include { path: doc, line }) => {
                    includes.push((purposes.len(), doc, line));
                    purposes.push(None);
                }
                None => purposes.push(None),
            }
        }
    }
    // A crate doc kept in another file (`#![doc = include_str!(…)]`): that
    // file's purpose, cited at the line that names it. The file is read
    // once however many name it; one that cannot be read leaves no purpose.
    let mut docs: Vec<String> = includes.iter().map(|(_, doc, _)| doc.clone()).collect();
    docs.sort();
    docs.dedup();
    docs.truncate(INCLUDED_DOCS_PER_AREA);
    for chunk in docs.chunks(HEADS_PER_CALL) {
        let heads = client
            .source_file_heads(&HeadsArgs {
                repository: task.repository.to_owned(),
                paths: chunk.to_vec(),
                max_bytes: HEAD_BYTES as i64,
                commit: Some(task.bundle.job.tip().as_str().to_owned()),
            })
            .await?;
        for (doc, file) in chunk.iter().zip(heads.files) {
            let HeadOutcome::Read { content, .. } = &file.head else {
                continue;
            };
            let Some(text) = included_purpose(content.as_bytes()) else {
                continue;
            };
            for (at, _, line) in includes.iter().filter(|(_, d, _)| d == doc) {
                purposes[*at] = Some((text.clone(), *line));
            }
        }
    }
    Ok(purposes)
}

/// The commit a listed submodule pins, when it is a full sha (anything else
/// is listed as a plain path).
fn pin_of(entry: &TreeEntry) -> Option<String> {
    (entry.kind == EntryKind::Submodule)
        .then(|| entry.commit.clone())
        .flatten()
        .filter(|commit| crate::ids::Sha::parse(commit).is_ok())
}

/// Reads the files of the areas `slugs` (not yet in `listings`), in that
/// order ([`super::sections::refresh_order`]), at the job's tip, each with its
/// purpose, into `listings`, spending at most `heads` file reads. An area
/// that cannot be read (other than for a transient cause, which ends the
/// run) or that would overspend is left out, so its page keeps its section
/// as it is.
pub async fn read_listings(
    client: &WriterClient,
    task: &AgentTask<'_>,
    slugs: &[String],
    listings: &mut Listings,
    heads: &mut usize,
) -> Result<(), CallError> {
    let (root, root_cut) = match list_entries(client, task, "", false).await {
        Ok(found) => found,
        Err(e) if !transient(&e) => {
            tracing::warn!(reason = %e, "the source tree could not be listed; the area pages keep their \"What is here\" sections");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    // The root's entries by area, in the root's order.
    let mut by_slug: BTreeMap<String, Vec<&TreeEntry>> = BTreeMap::new();
    for entry in &root {
        let directory = entry.kind == EntryKind::Directory;
        by_slug
            .entry(area_slug(&area_of_entry(&entry.path, directory)))
            .or_default()
            .push(entry);
    }
    for slug in slugs {
        if listings.contains_key(slug) {
            continue;
        }
        // The area's files and submodules: (path, the commit a submodule pins).
        let mut items: Vec<(String, Option<String>)> = Vec::new();
        let mut cut = root_cut;
        let mut readable = true;
        for &entry in by_slug.get(slug).into_iter().flatten() {
            if entry.kind != EntryKind::Directory {
                items.push((entry.path.clone(), pin_of(entry)));
                continue;
            }
            match list_entries(client, task, &entry.path, true).await {
                Ok((found, truncated)) => {
                    cut |= truncated;
                    items.extend(
                        found
                            .iter()
                            .filter(|e| e.kind != EntryKind::Directory)
                            .map(|e| (e.path.clone(), pin_of(e))),
                    );
                }
                Err(e) if !transient(&e) => {
                    tracing::warn!(reason = %e, area = %slug, "an area's files could not be listed; its page keeps its \"What is here\" section");
                    readable = false;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        items.sort();
        items.dedup_by(|a, b| a.0 == b.0);
        let shown = &items[..items.len().min(WHAT_IS_HERE_FILES)];
        // A submodule's files are another repository's: only the files'
        // heads are read.
        let paths: Vec<String> = shown
            .iter()
            .filter(|(_, pin)| pin.is_none())
            .map(|(path, _)| path.clone())
            .collect();
        if !readable || paths.len() > *heads {
            continue;
        }
        *heads -= paths.len();
        let mut files = Vec::with_capacity(shown.len());
        match file_purposes(client, task, &paths).await {
            Ok(purposes) => {
                let mut purposes = purposes.into_iter();
                for (path, pinned) in shown {
                    let purpose = match pinned {
                        Some(_) => None,
                        None => purposes.next().flatten(),
                    };
                    files.push(AreaFile {
                        path: path.clone(),
                        purpose,
                        pinned: pinned.clone(),
                    });
                }
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
                    omitted: items.len() - shown.len(),
                    listing_cut: cut,
                },
            );
        }
    }
    Ok(())
}
