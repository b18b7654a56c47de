//! Ranked search over one wiki commit: a BM25 index built once per commit and
//! kept in a small LRU, with each result's snippet and nearest heading.
//!
//! Invariants:
//! - an index belongs to exactly one commit id (a commit never changes, so a
//!   cached index is never stale); at most [`SEARCH_CACHE_SIZE`] are kept;
//! - results are deterministic for a commit: scores are rounded and ties are
//!   broken by page path;
//! - at most `MAX_SEARCH_SCAN_BYTES` of pages are indexed (`truncated` says
//!   when the budget ended first); snippets are plain text, bounded, with
//!   markers and HTML comments removed, so page text cannot pose as a marker
//!   in a result;
//! - the commit's stale-fact count is computed with the index, from the same
//!   page texts (unreadable markers are not counted and break nothing); a
//!   count asked for alone (the dashboard's) reads the same pages within the
//!   same budget and builds no index.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gix::ObjectId;

use super::error::WikiError;
use super::tree::{IndexCache, commit_tree, read_blob};
use super::types::{SearchHit, SearchResult};
use super::validate::MAX_SEARCH_SCAN_BYTES;

/// Snapshots whose index is kept.
pub const SEARCH_CACHE_SIZE: usize = 4;
/// Most hits one search returns.
pub const MAX_HITS: usize = 20;
const MAX_SNIPPET_BYTES: usize = 240;
/// Term-frequency weight of a token in the page's path (its title) and headings.
const TITLE_WEIGHT: f32 = 3.0;
const HEADING_WEIGHT: f32 = 2.0;
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// Lowercased tokens of `text`: runs of alphanumerics and `_`; an identifier
/// with `_` also yields its parts, so `source_cursors` finds `cursors`.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
    {
        let lower = word.to_lowercase();
        if lower.contains('_') {
            let parts: Vec<&str> = lower.split('_').filter(|p| !p.is_empty()).collect();
            out.extend(parts.iter().map(|p| (*p).to_owned()));
            if parts.len() > 1 {
                out.push(lower.trim_matches('_').to_owned());
            }
        } else {
            out.push(lower);
        }
    }
    out
}

struct Doc {
    path: String,
    sha: String,
    text: String,
    /// Weighted length (body tokens plus weighted title and heading tokens).
    len: f32,
}

/// The index of one commit.
pub struct SearchIndex {
    docs: Vec<Doc>,
    /// term → (doc, weighted term frequency), docs ascending.
    postings: HashMap<String, Vec<(u32, f32)>>,
    avg_len: f32,
    scanned_bytes: u64,
    truncated: bool,
    /// Stale evidence markers across the indexed pages.
    pub stale_facts: usize,
}

impl SearchIndex {
    /// Builds the index from `(path, blob sha, text)` in path order.
    pub fn build(
        pages: Vec<(String, String, String)>,
        scanned_bytes: u64,
        truncated: bool,
    ) -> Self {
        let mut postings: HashMap<String, Vec<(u32, f32)>> = HashMap::new();
        let mut docs = Vec::with_capacity(pages.len());
        let mut stale_facts = 0;
        for (number, (path, sha, text)) in pages.into_iter().enumerate() {
            let mut counts: HashMap<String, f32> = HashMap::new();
            let mut len = 0f32;
            let title = path.strip_suffix(".md").unwrap_or(&path);
            for token in tokens(title) {
                *counts.entry(token).or_default() += TITLE_WEIGHT;
                len += TITLE_WEIGHT;
            }
            for line in text.lines() {
                let weight = if line.trim_start().starts_with('#') {
                    HEADING_WEIGHT
                } else {
                    1.0
                };
                for token in tokens(&plain(line)) {
                    *counts.entry(token).or_default() += weight;
                    len += weight;
                }
            }
            for (term, tf) in counts {
                postings.entry(term).or_default().push((number as u32, tf));
            }
            stale_facts += stale_markers(&text);
            docs.push(Doc {
                path,
                sha,
                text,
                len,
            });
        }
        for list in postings.values_mut() {
            list.sort_by_key(|(doc, _)| *doc);
        }
        let avg_len = if docs.is_empty() {
            1.0
        } else {
            (docs.iter().map(|d| d.len).sum::<f32>() / docs.len() as f32).max(1.0)
        };
        SearchIndex {
            docs,
            postings,
            avg_len,
            scanned_bytes,
            truncated,
            stale_facts,
        }
    }

    /// The best [`MAX_HITS`] pages for `query`, best first, ties by path.
    pub fn search(&self, commit: ObjectId, query: &str) -> SearchResult {
        let mut terms = tokens(query);
        terms.sort();
        terms.dedup();
        let n = self.docs.len() as f32;
        let mut scores: HashMap<u32, f32> = HashMap::new();
        for term in &terms {
            let Some(list) = self.postings.get(term) else {
                continue;
            };
            let df = list.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(doc, tf) in list {
                let len = self.docs[doc as usize].len;
                let norm = tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / self.avg_len));
                *scores.entry(doc).or_default() += idf * norm;
            }
        }
        // Rounded so float noise can never reorder equal scores.
        let mut ranked: Vec<(u32, f64)> = scores
            .into_iter()
            .map(|(doc, score)| (doc, (f64::from(score) * 10_000.0).round() / 10_000.0))
            .collect();
        let total = ranked.len();
        ranked.sort_by(|a, b| {
            b.1.total_cmp(&a.1).then_with(|| {
                self.docs[a.0 as usize]
                    .path
                    .cmp(&self.docs[b.0 as usize].path)
            })
        });
        let hits = ranked
            .into_iter()
            .take(MAX_HITS)
            .map(|(doc, score)| {
                let doc = &self.docs[doc as usize];
                let (line, snippet, heading) = best_hit(&doc.text, &terms);
                SearchHit {
                    path: doc.path.clone(),
                    sha: doc.sha.clone(),
                    score,
                    line,
                    snippet,
                    heading,
                }
            })
            .collect();
        SearchResult {
            commit: commit.to_string(),
            query: query.to_owned(),
            hits,
            total,
            scanned_bytes: self.scanned_bytes,
            truncated: self.truncated,
        }
    }
}

/// Stale evidence markers in one page's text (unreadable markers are not
/// counted).
pub fn stale_markers(text: &str) -> usize {
    crate::facts::facts(text)
        .iter()
        .filter(|found| matches!(found, crate::facts::Found::Fact(fact) if fact.marker.is_stale()))
        .count()
}

/// A line without HTML comments (evidence markers) and Markdown heading
/// marks, whitespace collapsed.
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        match rest[start..].find("-->") {
            Some(end) => rest = &rest[start + end + 3..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    let trimmed = out.trim_start().trim_start_matches('#');
    trimmed.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The body line with the most distinct query terms (first such line; the
/// first line when none has any), as `(1-based line, snippet, nearest heading at or above)`.
fn best_hit(text: &str, terms: &[String]) -> (usize, String, Option<String>) {
    let mut best: Option<(usize, usize)> = None;
    let mut heading_at: Vec<Option<usize>> = Vec::new();
    let mut last_heading = None;
    let lines: Vec<&str> = text.lines().collect();
    for (number, line) in lines.iter().enumerate() {
        let is_heading = line.trim_start().starts_with('#');
        if is_heading {
            last_heading = Some(number);
        }
        heading_at.push(last_heading);
        // A heading is already the `heading`; the snippet shows body text.
        if is_heading {
            continue;
        }
        let found: std::collections::HashSet<String> = tokens(&plain(line))
            .into_iter()
            .filter(|t| terms.contains(t))
            .collect();
        if !found.is_empty() && best.is_none_or(|(_, count)| found.len() > count) {
            best = Some((number, found.len()));
        }
    }
    let Some((number, _)) = best.or(if lines.is_empty() { None } else { Some((0, 0)) }) else {
        return (0, String::new(), None);
    };
    let snippet = super::validate::shorten(&plain(lines[number]), MAX_SNIPPET_BYTES).to_owned();
    let heading = heading_at[number]
        .map(|h| super::validate::shorten(&plain(lines[h]), MAX_SNIPPET_BYTES).to_owned());
    (number + 1, snippet, heading)
}

/// The indexes of the last few commits searched.
#[derive(Default)]
pub struct SearchCache {
    entries: Mutex<Vec<(ObjectId, Arc<SearchIndex>)>>,
}

impl SearchCache {
    /// The index of `commit`, built on first use.
    pub fn get_or_build(
        &self,
        repo: &gix::Repository,
        trees: &IndexCache,
        commit: ObjectId,
    ) -> Result<Arc<SearchIndex>, WikiError> {
        {
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(at) = entries.iter().position(|(id, _)| *id == commit) {
                let entry = entries.remove(at);
                let index = entry.1.clone();
                entries.insert(0, entry);
                return Ok(index);
            }
        }
        let built = Arc::new(build(repo, trees, commit)?);
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|(id, _)| *id != commit);
        entries.insert(0, (commit, built.clone()));
        entries.truncate(SEARCH_CACHE_SIZE);
        Ok(built)
    }

    /// The stale-fact count of `commit` and whether the scan budget ended
    /// first: the cached index's when there is one, else counted over the
    /// same pages an index would read, without building (or caching) one.
    pub fn stale_facts(
        &self,
        repo: &gix::Repository,
        trees: &IndexCache,
        commit: ObjectId,
    ) -> Result<(usize, bool), WikiError> {
        {
            let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((_, index)) = entries.iter().find(|(id, _)| *id == commit) {
                return Ok((index.stale_facts, index.truncated));
            }
        }
        let mut stale = 0;
        let (_, truncated) = each_page(repo, trees, commit, |_, _, text| {
            stale += stale_markers(&text);
        })?;
        Ok((stale, truncated))
    }
}

/// Calls `visit(path, blob, text)` for the pages of `commit` in path order
/// until [`MAX_SEARCH_SCAN_BYTES`] would be passed; returns the bytes read
/// and whether the budget ended first.
fn each_page(
    repo: &gix::Repository,
    trees: &IndexCache,
    commit: ObjectId,
    mut visit: impl FnMut(&str, ObjectId, String),
) -> Result<(u64, bool), WikiError> {
    let index = trees.get_or_build(repo, commit_tree(repo, commit)?)?;
    let mut scanned_bytes = 0u64;
    for (path, page) in &index.pages {
        let size = repo
            .find_header(page.blob)
            .map_err(|err| WikiError::internal("reading a page header", err))?
            .size();
        if scanned_bytes + size > MAX_SEARCH_SCAN_BYTES {
            return Ok((scanned_bytes, true));
        }
        scanned_bytes += size;
        let text = String::from_utf8_lossy(&read_blob(repo, page.blob)?).into_owned();
        visit(path, page.blob, text);
    }
    Ok((scanned_bytes, false))
}

fn build(
    repo: &gix::Repository,
    trees: &IndexCache,
    commit: ObjectId,
) -> Result<SearchIndex, WikiError> {
    let mut pages = Vec::new();
    let (scanned_bytes, truncated) = each_page(repo, trees, commit, |path, blob, text| {
        pages.push((path.to_owned(), blob.to_string(), text));
    })?;
    Ok(SearchIndex::build(pages, scanned_bytes, truncated))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(pages: &[(&str, &str)]) -> SearchIndex {
        SearchIndex::build(
            pages
                .iter()
                .map(|(p, t)| (p.to_string(), "0".repeat(40), t.to_string()))
                .collect(),
            0,
            false,
        )
    }

    #[test]
    fn tokens_split_paths_and_identifiers() {
        assert_eq!(
            tokens("src/queue/Source_Cursors.rs L10"),
            [
                "src",
                "queue",
                "source",
                "cursors",
                "source_cursors",
                "rs",
                "l10"
            ]
        );
    }

    #[test]
    fn topic_page_ranks_first_with_snippet_and_heading() {
        let idx = index(&[
            ("Areas/api.md", "# API\n\nRoutes live here.\n"),
            (
                "Billing.md",
                "# Billing\n\n## Invoices\n\nInvoice retry uses exponential backoff. <!-- x -->\n",
            ),
            ("Other.md", "Nothing about retry.\n"),
        ]);
        let result = idx.search(ObjectId::null(gix::hash::Kind::Sha1), "invoice retry");
        assert_eq!(result.hits[0].path, "Billing.md");
        assert_eq!(result.hits[0].line, 5);
        assert_eq!(
            result.hits[0].snippet,
            "Invoice retry uses exponential backoff."
        );
        assert_eq!(result.hits[0].heading.as_deref(), Some("Invoices"));
        assert_eq!(result.total, 2);
    }

    #[test]
    fn ties_break_by_path_and_counts_stale() {
        let stale = format!(
            "A fact <!-- teammem:evidence a.rs@{}#L1-L2 stale={} -->\nbad <!-- teammem:evidence nope -->\n",
            "a".repeat(40),
            "b".repeat(40)
        );
        let idx = index(&[
            ("B.md", "same words"),
            ("A.md", "same words"),
            ("S.md", &stale),
        ]);
        let result = idx.search(ObjectId::null(gix::hash::Kind::Sha1), "same");
        let paths: Vec<_> = result.hits.iter().map(|h| h.path.as_str()).collect();
        assert_eq!(paths, ["A.md", "B.md"]);
        assert_eq!(idx.stale_facts, 1);
    }
}
