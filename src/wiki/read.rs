//! The read operations on one resolved commit of a local repository: list, get
//! (with the page's stale facts), history and diff (search is `search.rs`). Every read goes through the validated tree index,
//! so a wiki with a rejected page path is reported, never half-read, and files
//! that are not pages never show up; every result is bounded by the DESIGN §7
//! limits. A diff reads no page version larger than [`MAX_DIFF_BLOB_BYTES`]
//! and at most [`MAX_DIFF_READ_BYTES`] in all, naming the pages it left out;
//! the marker scan reads pages smallest first and skips pages larger than a
//! read returns, so planted huge pages cannot crowd the others out; a page's
//! last change is looked for in at most [`MAX_LAST_CHANGE_WALK`] commits.

use std::collections::HashMap;
use std::sync::Arc;

use gix::ObjectId;

use super::error::{ErrorKind, WikiError};
use super::evidence_memo::EvidenceMemo;
use super::page_facts::PageFactsMemo;
use super::tree::{IndexCache, commit_tree, read_blob, tree_delta};
use super::types::{
    Diff, EvidencePage, History, HistoryEntry, LastChange, NotDiffed, Page, PageInfo, PageList,
    StaleMarker,
};
use super::validate::{
    MAX_DIFF_BLOB_BYTES, MAX_DIFF_BYTES, MAX_DIFF_READ_BYTES, MAX_LAST_CHANGE_WALK,
    MAX_LISTED_PAGES, MAX_READ_PAGE_BYTES,
};
use crate::facts::{Citation, Found};
use crate::staleness::PageEvidence;

pub fn list_pages(
    repo: &gix::Repository,
    cache: &IndexCache,
    commit: ObjectId,
) -> Result<PageList, WikiError> {
    let index = cache.get_or_build(repo, commit_tree(repo, commit)?)?;
    let mut pages = Vec::with_capacity(index.pages.len().min(MAX_LISTED_PAGES));
    for (path, page) in index.pages.iter().take(MAX_LISTED_PAGES) {
        let size = repo
            .find_header(page.blob)
            .map_err(|err| WikiError::internal("reading a page header", err))?
            .size();
        pages.push(PageInfo {
            path: path.clone(),
            sha: page.blob.to_string(),
            size,
        });
    }
    Ok(PageList {
        commit: commit.to_string(),
        total: index.pages.len(),
        truncated: index.pages.len() > pages.len(),
        pages,
    })
}

pub fn get_page(
    repo: &gix::Repository,
    cache: &IndexCache,
    commit: ObjectId,
    path: &str,
) -> Result<Page, WikiError> {
    let index = cache.get_or_build(repo, commit_tree(repo, commit)?)?;
    let page = index.pages.get(path).ok_or_else(|| {
        WikiError::not_found(format!(
            "the page {path:?} does not exist at {commit}; list the pages to see which exist"
        ))
    })?;
    let size = repo
        .find_header(page.blob)
        .map_err(|err| WikiError::internal("reading a page header", err))?
        .size();
    if size > MAX_READ_PAGE_BYTES {
        return Err(WikiError::limit_exceeded(format!(
            "the page {path:?} is {size} bytes and pages larger than {MAX_READ_PAGE_BYTES} bytes cannot be returned"
        )));
    }
    let content = String::from_utf8(read_blob(repo, page.blob)?).map_err(|_| {
        WikiError::not_applied(
            ErrorKind::UpstreamError,
            format!("the page {path:?} is not valid UTF-8 text"),
        )
    })?;
    Ok(Page {
        path: path.to_owned(),
        commit: commit.to_string(),
        sha: page.blob.to_string(),
        stale_facts: stale_facts(&content),
        content,
    })
}

/// The pages at `commit` that hold an evidence marker, each with its parsed
/// evidence, sorted by path; considers pages smallest first, none larger
/// than [`MAX_READ_PAGE_BYTES`], at most
/// [`super::validate::MAX_SEARCH_SCAN_BYTES`] in all, and says whether it
/// left any page out. Each blob's facts are remembered in `page_facts` and
/// its evidence in `evidence`, so only the pages whose blob is new since the
/// last scan are read and parsed.
pub fn evidence_scan(
    repo: &gix::Repository,
    cache: &IndexCache,
    page_facts: &PageFactsMemo,
    evidence: &EvidenceMemo,
    commit: ObjectId,
) -> Result<(Vec<EvidencePage>, bool), WikiError> {
    let index = cache.get_or_build(repo, commit_tree(repo, commit)?)?;
    // Smallest first, and none larger than a read returns: a few planted
    // huge pages (or huge pages whose names sort first) cannot use up the
    // scan before the other pages are read.
    let mut sized = Vec::with_capacity(index.pages.len());
    for (path, page) in &index.pages {
        let (found, text) = page_facts.facts(repo, page.blob)?;
        sized.push((found.size, path, page.blob, found, text));
    }
    sized.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let mut found = Vec::new();
    let mut scanned_evidence = HashMap::new();
    let mut scanned = 0u64;
    let mut cut = false;
    for (size, path, blob, facts, text) in sized {
        if size > MAX_READ_PAGE_BYTES || scanned + size > super::validate::MAX_SEARCH_SCAN_BYTES {
            cut = true;
            continue;
        }
        scanned += size;
        if !facts.evidence {
            continue;
        }
        let parsed = match scanned_evidence
            .get(&blob)
            .cloned()
            .or_else(|| evidence.get(blob))
        {
            Some(parsed) => parsed,
            None => {
                let text = match text {
                    Some(text) => text,
                    None => String::from_utf8_lossy(&read_blob(repo, blob)?).into_owned(),
                };
                Arc::new(PageEvidence::of_text(&text))
            }
        };
        scanned_evidence.insert(blob, parsed.clone());
        found.push(EvidencePage {
            path: path.clone(),
            evidence: parsed,
        });
    }
    evidence.replace(scanned_evidence);
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((found, cut))
}

/// The text of each page `paths` names at `commit` (as [`evidence_scan`]
/// read it: invalid UTF-8 replaced), in the order asked.
pub fn page_texts(
    repo: &gix::Repository,
    cache: &IndexCache,
    commit: ObjectId,
    paths: &[String],
) -> Result<Vec<(String, String)>, WikiError> {
    let index = cache.get_or_build(repo, commit_tree(repo, commit)?)?;
    let mut texts = Vec::with_capacity(paths.len());
    for path in paths {
        let page = index.pages.get(path).ok_or_else(|| {
            WikiError::not_found(format!(
                "the page {path:?} does not exist at {commit}; list the pages to see which exist"
            ))
        })?;
        let text = String::from_utf8_lossy(&read_blob(repo, page.blob)?).into_owned();
        texts.push((path.clone(), text));
    }
    Ok(texts)
}

pub fn history(
    repo: &gix::Repository,
    tip: ObjectId,
    path: Option<&str>,
    limit: usize,
) -> Result<History, WikiError> {
    Ok(History {
        commit: tip.to_string(),
        path: path.map(str::to_owned),
        commits: walk_history(repo, tip, path, limit, usize::MAX)?,
    })
}

/// The newest commit reachable from `tip` that changed `path`, and whether
/// it is teammem's (its message ends with a trailer `owner_trailer`); `None`
/// when none is found in the newest [`MAX_LAST_CHANGE_WALK`] commits.
pub fn last_change(
    repo: &gix::Repository,
    tip: ObjectId,
    path: &str,
    owner_trailer: &str,
) -> Result<Option<LastChange>, WikiError> {
    let found = walk_history(repo, tip, Some(path), 1, MAX_LAST_CHANGE_WALK)?;
    Ok(found.into_iter().next().map(|entry| LastChange {
        by: if super::page_owners::has_trailer(&entry.message, owner_trailer) {
            "teammem"
        } else {
            "person"
        },
        commit: entry.sha,
        at: entry.time,
    }))
}

/// Up to `limit` commits from `tip`, newest first (only those touching
/// `path` when given), looking at no more than `max_walk` commits.
fn walk_history(
    repo: &gix::Repository,
    tip: ObjectId,
    path: Option<&str>,
    limit: usize,
    max_walk: usize,
) -> Result<Vec<HistoryEntry>, WikiError> {
    let walk = repo
        .rev_walk([tip])
        .sorting(gix::revision::walk::Sorting::ByCommitTime(
            Default::default(),
        ))
        .all()
        .map_err(|err| WikiError::internal("walking the wiki history", err))?;
    let mut commits = Vec::new();
    // A commit's entry for `path`, looked up once per walk: in a line of
    // history each commit is looked at as a child and again as a parent.
    let mut entries: HashMap<ObjectId, Option<(ObjectId, gix::objs::tree::EntryKind)>> =
        HashMap::new();
    for info in walk.take(max_walk) {
        if commits.len() >= limit {
            break;
        }
        let info = info.map_err(|err| WikiError::internal("walking the wiki history", err))?;
        let commit = info
            .object()
            .map_err(|err| WikiError::internal("reading a commit", err))?;
        if let Some(path) = path {
            let mut entry_at = |commit_id: ObjectId| -> Result<
                Option<(ObjectId, gix::objs::tree::EntryKind)>,
                WikiError,
            > {
                if let Some(known) = entries.get(&commit_id) {
                    return Ok(*known);
                }
                let tree = repo
                    .find_tree(commit_tree(repo, commit_id)?)
                    .map_err(|err| WikiError::internal("reading a tree", err))?;
                let entry = tree
                    .lookup_entry_by_path(path)
                    .map_err(|err| WikiError::internal("looking up a path", err))?
                    .map(|entry| (entry.object_id(), entry.mode().kind()));
                entries.insert(commit_id, entry);
                Ok(entry)
            };
            let here = entry_at(commit.id)?;
            let parents: Vec<ObjectId> = commit.parent_ids().map(|id| id.detach()).collect();
            let touched = if parents.is_empty() {
                here.is_some()
            } else {
                let mut differs_from_all = true;
                for parent in parents {
                    if entry_at(parent)? == here {
                        differs_from_all = false;
                        break;
                    }
                }
                differs_from_all
            };
            // Only the commits still ahead in the walk are looked up again.
            entries.remove(&commit.id);
            if !touched {
                continue;
            }
        }
        let message = commit
            .message_raw()
            .map_err(|err| WikiError::internal("reading a commit message", err))?
            .to_string();
        let seconds = commit
            .time()
            .map_err(|err| WikiError::internal("reading a commit time", err))?
            .seconds;
        let time = chrono::DateTime::from_timestamp(seconds, 0)
            .map(|time| time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_default();
        commits.push(HistoryEntry {
            sha: commit.id.to_string(),
            message: message.trim_end().to_owned(),
            time,
        });
    }
    Ok(commits)
}

pub fn diff(
    repo: &gix::Repository,
    cache: &IndexCache,
    from: ObjectId,
    to: ObjectId,
) -> Result<Diff, WikiError> {
    let from_tree = commit_tree(repo, from)?;
    let to_tree = commit_tree(repo, to)?;
    // Both trees must be valid wikis before anything is rendered from them.
    let from_index = cache.get_or_build(repo, from_tree)?;
    let to_index = cache.get_or_build(repo, to_tree)?;
    let delta = tree_delta(repo, Some(from_tree), to_tree)?;
    let mut out = String::new();
    // Files that are not pages (images, attachments) are not part of the diff.
    let page_changes = delta.changes.iter().filter(|change| {
        from_index.pages.contains_key(&change.path) || to_index.pages.contains_key(&change.path)
    });
    let size = |id: Option<ObjectId>| -> Result<u64, WikiError> {
        match id {
            Some(id) => Ok(repo
                .find_header(id)
                .map_err(|err| WikiError::internal("reading a page header", err))?
                .size()),
            None => Ok(0),
        }
    };
    let mut not_diffed = Vec::new();
    let mut left_out = 0usize;
    let mut read = 0u64;
    for change in page_changes {
        let path = &change.path;
        // Sizes first: a page too large, or past the read budget, is named
        // instead of read.
        let bytes = size(change.old)?.max(size(change.new)?);
        let pair = size(change.old)? + size(change.new)?;
        let skip = if bytes > MAX_DIFF_BLOB_BYTES {
            Some(format!(
                "the page is {bytes} bytes and a diff reads pages of at most {MAX_DIFF_BLOB_BYTES} bytes; compare its history instead"
            ))
        } else if read + pair > MAX_DIFF_READ_BYTES {
            Some(format!(
                "the diff already read {read} bytes of pages, and reads at most {MAX_DIFF_READ_BYTES}; compare closer commits"
            ))
        } else {
            None
        };
        if let Some(reason) = skip {
            out.push_str(&format!(
                "diff --git a/{path} b/{path}\n# not diffed: {reason}\n"
            ));
            if not_diffed.len() < 100 {
                not_diffed.push(NotDiffed {
                    path: path.clone(),
                    bytes,
                    reason,
                });
            } else {
                left_out += 1;
            }
            if out.len() > MAX_DIFF_BYTES {
                return Err(too_large(from, to));
            }
            continue;
        }
        read += pair;
        let old = match change.old {
            Some(id) => read_blob(repo, id)?,
            None => Vec::new(),
        };
        let new = match change.new {
            Some(id) => read_blob(repo, id)?,
            None => Vec::new(),
        };
        out.push_str(&format!("diff --git a/{path} b/{path}\n"));
        match (change.old, change.new) {
            (None, Some(_)) => out.push_str("new file mode 100644\n"),
            (Some(_), None) => out.push_str("deleted file mode 100644\n"),
            _ => {}
        }
        let short = |id: Option<ObjectId>| {
            id.map_or_else(
                || "0000000".to_owned(),
                |id| id.to_hex_with_len(7).to_string(),
            )
        };
        out.push_str(&format!(
            "index {}..{}\n",
            short(change.old),
            short(change.new)
        ));
        out.push_str(&match change.old {
            Some(_) => format!("--- a/{path}\n"),
            None => "--- /dev/null\n".to_owned(),
        });
        out.push_str(&match change.new {
            Some(_) => format!("+++ b/{path}\n"),
            None => "+++ /dev/null\n".to_owned(),
        });
        out.push_str(&unified_hunks(&old, &new)?);
        if out.len() > MAX_DIFF_BYTES {
            return Err(too_large(from, to));
        }
    }
    if left_out > 0 {
        out.push_str(&format!(
            "# {left_out} more pages were not diffed and are not listed in not_diffed\n"
        ));
    }
    Ok(Diff {
        from: from.to_string(),
        to: to.to_string(),
        diff: out,
        not_diffed,
    })
}

fn too_large(from: ObjectId, to: ObjectId) -> WikiError {
    WikiError::limit_exceeded(format!(
        "the diff between {from} and {to} is larger than {MAX_DIFF_BYTES} bytes (512 KiB); compare closer commits or read single pages"
    ))
}

fn unified_hunks(old: &[u8], new: &[u8]) -> Result<String, WikiError> {
    use gix::diff::blob::{
        Algorithm, InternedInput, UnifiedDiff, diff_with_slider_heuristics, unified_diff,
    };
    let input = InternedInput::new(old, new);
    let diff = diff_with_slider_heuristics(Algorithm::Histogram, &input);
    let rendered = UnifiedDiff::new(
        &diff,
        &input,
        unified_diff::ConsumeBinaryHunk::new(gix::bstr::BString::default(), "\n"),
        unified_diff::ContextSize::symmetrical(3),
    )
    .consume()
    .map_err(|err| WikiError::internal("rendering a diff", err))?;
    Ok(String::from_utf8_lossy(&rendered).into_owned())
}

/// The stale evidence markers of a page; unreadable markers are skipped
/// (the runner reports them on `Stale.md`), never an error.
fn stale_facts(content: &str) -> Vec<StaleMarker> {
    crate::facts::facts(content)
        .into_iter()
        .filter_map(|found| match found {
            Found::Fact(fact) => {
                let stale = fact.marker.stale.as_ref()?;
                let Citation::Source {
                    path,
                    commit,
                    lines,
                } = &fact.marker.citation
                else {
                    return None;
                };
                Some(StaleMarker {
                    line: fact.line + 1,
                    fact: fact.text.clone(),
                    path: path.clone(),
                    lines: format!("L{}-L{}", lines.start(), lines.end()),
                    cited_commit: commit.to_string(),
                    changed_in: stale.changed_in.to_string(),
                    deleted: stale.deleted,
                })
            }
            Found::Unreadable { .. } => None,
        })
        .collect()
}
