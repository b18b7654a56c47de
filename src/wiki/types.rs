//! Request and result types of the wiki engine. Results serialize with the field
//! names of DESIGN §7 so the MCP layer can put them into the envelope as they are.

use serde::{Deserialize, Serialize};

pub use super::patch::Replacement;

/// `get_wiki_snapshot`: the default branch and its tip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    /// Default branch from the remote `HEAD` symref (e.g. `master`); `None` when unknown.
    pub branch: Option<String>,
    /// Full 40-hex tip; `None` for an empty wiki.
    pub sha: Option<String>,
    /// `false` when the wiki repository has no commits yet.
    pub initialized: bool,
}

/// One page of a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PageInfo {
    pub path: String,
    /// Blob sha (the `expected_sha` of a patch).
    pub sha: String,
    pub size: u64,
}

/// `list_wiki_pages`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Page {
    pub path: String,
    /// The commit the page was read at.
    #[serde(rename = "ref")]
    pub commit: String,
    /// Blob sha of the page.
    pub sha: String,
    pub content: String,
}

/// One matching line of a search hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MatchedLine {
    /// 1-based line number.
    pub line: usize,
    /// The line, shortened to at most 240 bytes.
    pub text: String,
}

/// A page whose content contains the query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchHit {
    pub path: String,
    pub sha: String,
    /// The first few matching lines.
    pub lines: Vec<MatchedLine>,
}

/// `search_wiki`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchResult {
    #[serde(rename = "ref")]
    pub commit: String,
    pub query: String,
    pub hits: Vec<SearchHit>,
    pub scanned_bytes: u64,
    /// `true` when the scan budget ended before every page was read.
    pub truncated: bool,
}

/// One commit of `list_wiki_history`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryEntry {
    pub sha: String,
    pub message: String,
    /// Committer time, RFC 3339 UTC.
    pub time: String,
}

/// `list_wiki_history`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
pub struct Identity {
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
    pub identity: Identity,
    pub trailers: Vec<Trailer>,
}

/// `updated` or `no-change`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum WriteStatus {
    #[serde(rename = "updated")]
    Updated,
    #[serde(rename = "no-change")]
    NoChange,
}

/// A page as it is after a write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WrittenPage {
    pub path: String,
    /// Blob sha of the page now.
    pub sha: String,
}

/// `write_wiki_pages` / `patch_wiki_pages`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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
