//! Request and result types of the wiki engine. Results serialize with the field
//! names of DESIGN §7 so the MCP layer can put them into the envelope as they are.

use serde::{Deserialize, Serialize};

pub use super::patch::Replacement;

/// `get_wiki_snapshot`: the default branch and its tip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Default branch from the remote `HEAD` symref (e.g. `master`); `None` when unknown.
    pub branch: Option<String>,
    /// Full 40-hex tip; `None` for an empty wiki.
    pub sha: Option<String>,
    /// `false` when the wiki repository has no commits yet.
    pub initialized: bool,
    /// Stale evidence markers across the pages at `sha` (0 for an empty wiki).
    pub stale_facts: usize,
}

/// The stale evidence markers across the pages of one wiki commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaleCount {
    pub stale: usize,
    /// The scan left pages out (one over 256 KiB, or the search budget
    /// ending first): they were not counted, so there are at least `stale`.
    pub truncated: bool,
}

/// One page of a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageInfo {
    pub path: String,
    /// Blob sha (the `expected_sha` of a patch).
    pub sha: String,
    pub size: u64,
}

/// `list_wiki_pages`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageList {
    /// The commit the list was read at.
    #[serde(rename = "ref")]
    pub commit: String,
    pub pages: Vec<PageInfo>,
    /// Pages in the tree; more than `pages.len()` when `truncated`.
    pub total: usize,
    pub truncated: bool,
}

/// `get_wiki_page`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    pub path: String,
    /// The commit the page was read at.
    #[serde(rename = "ref")]
    pub commit: String,
    /// Blob sha of the page.
    pub sha: String,
    pub content: String,
    /// Each stale evidence marker on the page, in page order.
    pub stale_facts: Vec<StaleMarker>,
}

/// A page ranked for a query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    pub path: String,
    pub sha: String,
    /// BM25 relevance (higher is better), rounded to 4 decimals.
    pub score: f64,
    /// 1-based line of the best hit (the line with most query terms).
    pub line: usize,
    /// That line as plain text (markers removed), at most 240 bytes.
    pub snippet: String,
    /// The nearest heading at or above the hit, as plain text.
    pub heading: Option<String>,
    /// Every page holding this line, `path` first: a pull request's entry
    /// repeated on the Changelog, its quarter page and area pages is one hit.
    pub pages: Vec<String>,
    /// The pull request whose entry the hit is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pull_request: Option<u64>,
    /// That entry's merge commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge_commit: Option<String>,
}

/// `search_wiki`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchResult {
    #[serde(rename = "ref")]
    pub commit: String,
    pub query: String,
    /// Best first; ties in score by path.
    pub hits: Vec<SearchHit>,
    /// Pages matching at least one query term (more than `hits.len()` when cut).
    pub total: usize,
    pub scanned_bytes: u64,
    /// `true` when pages were left out of the index: one over 256 KiB, or
    /// the index budget ending before every page was read.
    pub truncated: bool,
}

/// A stale evidence marker on a page (`get_wiki_page`'s `stale_facts`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleMarker {
    /// 1-based page line carrying the marker.
    pub line: usize,
    /// The statement (the line without its markers).
    pub fact: String,
    /// The cited source file.
    pub path: String,
    /// The cited lines, e.g. `L10-L24`.
    pub lines: String,
    /// The source commit the fact cites.
    pub cited_commit: String,
    /// The source commit that changed (or deleted) the cited lines.
    pub changed_in: String,
    /// The cited file no longer exists at `changed_in`.
    pub deleted: bool,
}

/// One commit of `list_wiki_history`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub sha: String,
    pub message: String,
    /// Committer time, RFC 3339 UTC.
    pub time: String,
}

/// `list_wiki_history`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    #[serde(rename = "ref")]
    pub commit: String,
    pub path: Option<String>,
    pub commits: Vec<HistoryEntry>,
}

/// `get_wiki_diff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diff {
    pub from: String,
    pub to: String,
    /// Unified diff (git style, 3 lines of context); empty when the trees match.
    pub diff: String,
    /// Changed pages left out of `diff` because they are too large to diff
    /// (or the diff's read budget was spent), each with why; at most 100.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_diffed: Vec<NotDiffed>,
}

/// A changed page `get_wiki_diff` did not diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotDiffed {
    pub path: String,
    /// The larger of the page's two versions, in bytes.
    pub bytes: u64,
    pub reason: String,
}

/// Who made the last commit that changed a page (`get_wiki_page`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastChange {
    /// `teammem` when the commit carries teammem's job trailer
    /// (`Teammem-Job`), else `person`.
    pub by: &'static str,
    pub commit: String,
    /// RFC 3339, UTC (the commit time).
    pub at: String,
}

/// Full content for one page.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct PageWrite {
    pub path: String,
    pub content: String,
}

/// Exact-anchor replacements for one existing page.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct PagePatch {
    pub path: String,
    /// Blob sha of the page at `expected_base`.
    pub expected_sha: String,
    pub replacements: Vec<Replacement>,
}

/// Who commits (from trusted config, e.g. `teammem[bot]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Committer {
    pub name: String,
    pub email: String,
}

/// A `Key: value` line appended to the commit message.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Trailer {
    pub key: String,
    pub value: String,
}

/// What every write carries besides the pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitSpec {
    /// When set, must equal the destination id (case-insensitive) or the call
    /// fails with `destination_changed` before anything else happens.
    pub expected_destination: Option<String>,
    /// Full 40-hex sha from the snapshot the caller read.
    pub expected_base: String,
    /// One line, at most 512 bytes.
    pub message: String,
    pub identity: Committer,
    pub trailers: Vec<Trailer>,
}

/// `updated` or `no-change`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WriteStatus {
    #[serde(rename = "updated")]
    Updated,
    #[serde(rename = "no-change")]
    NoChange,
}

/// A page as it is after a write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrittenPage {
    pub path: String,
    /// Blob sha of the page now.
    pub sha: String,
}

/// `write_wiki_pages` / `patch_wiki_pages`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteResult {
    pub status: WriteStatus,
    /// The new tip, or the unchanged one for `no-change`.
    pub sha: String,
    pub branch: String,
    pub pages: Vec<WrittenPage>,
    /// Bytes the write changed ([`crate::wiki::confine::changed_bytes`]);
    /// for the caller's budget, not part of the tool result.
    #[serde(skip)]
    pub changed_bytes: u64,
}

/// A page holding evidence markers, as the fact check reads it: its path
/// and its parsed evidence (shared with the wiki's memo of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidencePage {
    pub path: String,
    pub evidence: std::sync::Arc<crate::staleness::PageEvidence>,
}
