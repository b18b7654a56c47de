//! What the builtin agent reads for `How-to-work-here.md` through the writer
//! child: the files [`super::how_to_sources::kind_of`] names at the job's
//! tip (the root's task runners and manifests, `.github/workflows/`, and
//! `CONTRIBUTING.md` at the root, in `.github/` or in `docs/`), each read
//! with `get_source_file` and turned into facts.
//!
//! Invariants: files are read only at the job's tip, only by range jobs and
//! only when the job's change (a pull request or a commit outside any)
//! touched one of them or the page does not exist yet (otherwise the page
//! keeps what it says); at most [`MAX_HOW_TO_FILES`] files of at most
//! `MAX_SOURCE_FILE` bytes each (a longer file is read in part, up to its
//! last whole line); a read that fails for a lasting cause leaves its file
//! out, a transient one ends the run.

use super::how_to_sources::{Kind, MAX_HOW_TO_FILES, kind_of, read};
use super::how_to_work::HowTo;
use super::read::{list_files, read_head, transient};
use crate::runner::agent::AgentTask;
use crate::runner::writer::{CallError, WriterClient};
use crate::writer_contract::MAX_SOURCE_FILE;

/// Whether the job's change (a pull request, or a commit outside any)
/// touched a file the page is read from.
pub fn touches_how_to(task: &AgentTask<'_>) -> bool {
    task.bundle
        .changed_paths()
        .any(|path| kind_of(path).is_some())
}

/// The files in `directory` at the tip that the page reads; an absent or
/// unreadable folder has none.
async fn found_in(
    client: &WriterClient,
    task: &AgentTask<'_>,
    directory: &str,
    out: &mut Vec<String>,
) -> Result<Vec<String>, CallError> {
    let (entries, _) = match list_files(client, task, directory, false).await {
        Ok(listed) => listed,
        Err(e) if !transient(&e) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut folders = Vec::new();
    for (path, directory) in entries {
        if directory {
            folders.push(path);
        } else if kind_of(&path).is_some() {
            out.push(path);
        }
    }
    Ok(folders)
}

/// The page's facts at the tip, when it is to be re-derived (see the module
/// doc); `None` leaves the page as it is.
pub async fn read_how_to(
    client: &WriterClient,
    task: &AgentTask<'_>,
    page_exists: bool,
    at_tip: bool,
) -> Result<Option<HowTo>, CallError> {
    if !at_tip || (page_exists && !touches_how_to(task)) {
        return Ok(None);
    }
    let mut found = Vec::new();
    let root = found_in(client, task, "", &mut found).await?;
    for folder in [".github", "docs"] {
        if root.iter().any(|f| f == folder) {
            let inner = found_in(client, task, folder, &mut found).await?;
            if folder == ".github" && inner.iter().any(|f| f == ".github/workflows") {
                found_in(client, task, ".github/workflows", &mut found).await?;
            }
        }
    }
    // CI first, then the guide, the task runners and the manifests.
    found.sort_by_key(|path| (kind_of(path).unwrap_or(Kind::Cargo), path.clone()));
    found.dedup();
    let omitted = found.len().saturating_sub(MAX_HOW_TO_FILES);
    found.truncate(MAX_HOW_TO_FILES);
    let tip = task.bundle.job.tip().clone();
    let mut facts = Vec::new();
    let mut files = Vec::new();
    for path in found {
        let text = match read_head(client, task, tip.as_str(), &path, MAX_SOURCE_FILE).await {
            Ok(Some((text, cut))) => {
                if cut {
                    text.rfind('\n')
                        .map_or(String::new(), |end| text[..=end].to_owned())
                } else {
                    text
                }
            }
            Ok(None) => continue,
            Err(e) if !transient(&e) => continue,
            Err(e) => return Err(e),
        };
        facts.extend(read(&path, &text));
        files.push(path);
    }
    files.sort();
    Ok(Some(HowTo {
        commit: tip,
        facts,
        files,
        omitted,
    }))
}
