//! The runner's evidence-marker verdicts folded into a job's write: each
//! rewrite checked against the page it names, applied, and `Stale.md`
//! re-rendered from every page's final text (pages the job did not change
//! are read only when their blob's remembered facts say Stale.md lists
//! something from them).
//!
//! Invariant: a rewrite lands only where the runner could have made it (its
//! `old` is a marker on that page at the base, or its `new` already is), it
//! cites the same fact, and its bytes count against the job's budget.

use gix::objs::tree::EntryKind;

use super::confine::Amend;
use super::error::{ErrorKind, WikiError};
use super::page_facts::PageFactsMemo;
use super::publish::DesiredPage;
use super::tree::{TreeIndex, read_blob};

/// Folds the runner's [`Amend`] into the pages a write leaves: each named
/// page's markers rewritten (on the caller's new text, or the base's), then
/// `Stale.md` rendered from every page's final text. Every rewrite is checked
/// first (a marker the runner could have rewritten, on that page at the base,
/// or already rewritten there); the bytes the rewrites change are returned.
pub(super) fn amend_pages(
    repo: &gix::Repository,
    base_index: &TreeIndex,
    desired: &mut Vec<DesiredPage>,
    amend: &Amend,
    memo: &PageFactsMemo,
) -> Result<u64, WikiError> {
    use crate::staleness::{STALE_PAGE, apply_rewrites, check_rewrite, stale_page};
    let text_of = |desired: &[DesiredPage], path: &str| -> Result<Option<String>, WikiError> {
        if let Some(page) = desired.iter().find(|page| page.path == path) {
            return Ok(String::from_utf8(page.content.clone()).ok());
        }
        base_text(repo, base_index, path)
    };
    let upsert =
        |desired: &mut Vec<DesiredPage>, path: &str, text: String| -> Result<(), WikiError> {
            let kind = base_index
                .pages
                .get(path)
                .map_or(EntryKind::Blob, |existing| existing.kind);
            let page = DesiredPage::new(path.to_owned(), text.into_bytes(), kind)?;
            match desired.iter_mut().find(|page| page.path == path) {
                Some(slot) => *slot = page,
                None => desired.push(page),
            }
            Ok(())
        };
    let refused = |path: &str, why: String| {
        WikiError::not_applied(
            ErrorKind::PermissionDenied,
            format!(
                "the job's evidence-marker rewrite for {path:?} was refused: {why}; nothing was written (the rewrites come from the runner: retry the job so it judges the wiki again)"
            ),
        )
    };
    for (path, rewrites) in &amend.rewrites {
        let Some(at_base) = base_text(repo, base_index, path)? else {
            return Err(refused(
                path,
                "the page does not exist at expected_base".to_owned(),
            ));
        };
        for rewrite in rewrites {
            check_rewrite(rewrite, amend.tip.as_ref()).map_err(|why| refused(path, why))?;
            // On the page as the runner judged it, or already rewritten by an
            // earlier write of this job.
            if !at_base.contains(&rewrite.old) && !at_base.contains(&rewrite.new) {
                return Err(refused(
                    path,
                    format!(
                        "its old {:?} is not an evidence marker on that page",
                        rewrite.old.chars().take(200).collect::<String>()
                    ),
                ));
            }
        }
    }
    let mut rewritten = 0u64;
    for (path, rewrites) in &amend.rewrites {
        if let Some(text) = text_of(desired, path)? {
            for rewrite in rewrites {
                let each = super::confine::changed_bytes(
                    Some(rewrite.old.as_bytes()),
                    rewrite.new.as_bytes(),
                );
                rewritten += each * text.matches(rewrite.old.as_str()).count() as u64;
            }
            let after = apply_rewrites(&text, rewrites);
            if after != text {
                upsert(desired, path, after)?;
            }
        }
    }
    if amend.stale_page {
        let mut paths: std::collections::BTreeSet<&str> =
            base_index.pages.keys().map(String::as_str).collect();
        let extra: Vec<String> = desired.iter().map(|page| page.path.clone()).collect();
        paths.extend(extra.iter().map(String::as_str));
        let mut texts = Vec::new();
        let mut scanned = 0u64;
        for path in paths {
            if path == STALE_PAGE || scanned > super::validate::MAX_SEARCH_SCAN_BYTES {
                continue;
            }
            if let Some(page) = desired.iter().find(|page| page.path == path) {
                scanned += page.content.len() as u64;
                if let Ok(text) = std::str::from_utf8(&page.content)
                    && text.contains(crate::facts::PREFIX)
                {
                    texts.push((path.to_owned(), text.to_owned()));
                }
                continue;
            }
            let Some(page) = base_index.pages.get(path) else {
                continue;
            };
            // A page larger than any page teammem writes is not read: one
            // planted huge page must not use up the scan of the others. A
            // page Stale.md lists nothing from is not read either: its blob's
            // facts are remembered from an earlier scan.
            let (found, text) = memo.facts(repo, page.blob)?;
            if found.size > super::validate::MAX_READ_PAGE_BYTES {
                continue;
            }
            scanned += found.size;
            if !found.on_stale_page {
                continue;
            }
            let text = match text {
                Some(text) => Some(text),
                None => base_text(repo, base_index, path)?,
            };
            if let Some(text) = text {
                texts.push((path.to_owned(), text));
            }
        }
        let page = stale_page(texts.iter().map(|(p, t)| (p.as_str(), t.as_str())));
        let exists = text_of(desired, STALE_PAGE)?;
        let wanted = match (page, &exists) {
            (Some(page), _) => Some(page),
            (None, Some(_)) => Some(crate::staleness::no_stale_page()),
            (None, None) => None,
        };
        if let Some(wanted) = wanted
            && exists.as_deref() != Some(wanted.as_str())
        {
            upsert(desired, STALE_PAGE, wanted)?;
        }
    }
    Ok(rewritten)
}

/// A page's text at the base, `None` when it is not there or not UTF-8.
fn base_text(
    repo: &gix::Repository,
    base_index: &TreeIndex,
    path: &str,
) -> Result<Option<String>, WikiError> {
    match base_index.pages.get(path) {
        Some(page) => Ok(String::from_utf8(read_blob(repo, page.blob)?).ok()),
        None => Ok(None),
    }
}
