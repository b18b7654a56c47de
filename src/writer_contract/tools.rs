//! The writer's tools on the wire, for the two ends in this crate: every
//! tool's name (defined here once), and the arguments and results of the
//! tools the runner calls itself. The tool handlers (`mcp/toolsets/`)
//! deserialize these arguments and serialize these results; the runner's
//! typed client (`runner/writer_client.rs`) does the reverse. The wiki
//! tools' results are the wiki engine's own types (`crate::wiki`), with the
//! wiki the writer resolved ([`Bound`]).
//!
//! Invariant: one shape per tool on both ends: an argument struct refuses
//! fields it does not know (so a renamed field fails loudly, in the writer,
//! as `invalid_input`), and what the runner reads is what the handler
//! wrote, field for field. Agents that relay a model's or a command's calls
//! (`openai`, `command`) keep speaking plain MCP JSON; the schemas they see
//! are the toolsets' own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::forge::evidence::TreeEntry;
use crate::wiki::ErrorKind;

pub const GET_WIKI_SNAPSHOT: &str = "get_wiki_snapshot";
pub const LIST_WIKI_PAGES: &str = "list_wiki_pages";
pub const GET_WIKI_PAGE: &str = "get_wiki_page";
pub const SEARCH_WIKI: &str = "search_wiki";
pub const LIST_WIKI_HISTORY: &str = "list_wiki_history";
pub const GET_WIKI_DIFF: &str = "get_wiki_diff";
pub const WRITE_WIKI_PAGES: &str = "write_wiki_pages";
pub const PATCH_WIKI_PAGES: &str = "patch_wiki_pages";
pub const GET_JOB_EVIDENCE: &str = "get_job_evidence";
pub const LIST_PULL_REQUEST_FILES: &str = "list_pull_request_files";
pub const LIST_SOURCE_FILES: &str = "list_source_files";
pub const GET_SOURCE_FILE: &str = "get_source_file";
pub const GET_SOURCE_FILE_HEADS: &str = "get_source_file_heads";

pub const PUBLISH_JOB_CHANGES: &str = "publish_job_changes";

/// The writer's tools that change the wiki (a job's writer stages them;
/// [`PUBLISH_JOB_CHANGES`] publishes).
pub const WRITE_TOOLS: [&str; 2] = [WRITE_WIKI_PAGES, PATCH_WIKI_PAGES];

/// The writer's tools only the runner calls, on its own connection: never
/// listed to an agent, never relayed for one.
pub const RUNNER_ONLY_TOOLS: [&str; 1] = [PUBLISH_JOB_CHANGES];

/// `publish_job_changes`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishArgs {
    pub repository: String,
}

/// The ref a wiki read is at when the call names none.
pub fn head() -> String {
    "HEAD".into()
}

fn default_limit() -> i64 {
    20
}

/// `get_wiki_snapshot`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotArgs {
    pub repository: String,
}

/// `list_wiki_pages`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    pub repository: String,
    #[serde(rename = "ref", default = "head")]
    pub git_ref: String,
}

/// `get_wiki_page`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageArgs {
    pub repository: String,
    pub path: String,
    #[serde(rename = "ref", default = "head")]
    pub git_ref: String,
    /// `None`: the server's default (raw on a writer, folded on an agent's
    /// server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<PageFormat>,
    /// `false`: a raw read does not look for the page's last change (a walk
    /// of up to 1,000 commits for a page that rarely changes); the folded
    /// format always does, its citations' status needs it.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub last_change: bool,
}

fn yes() -> bool {
    true
}

fn is_yes(value: &bool) -> bool {
    *value
}

/// How `get_wiki_page` returns a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PageFormat {
    /// Teammem comments folded out, evidence markers as `citations`.
    Folded,
    /// The Markdown byte for byte (what an edit's anchors need).
    Raw,
}

/// `list_wiki_history`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryArgs {
    pub repository: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(rename = "ref", default = "head")]
    pub git_ref: String,
    /// Any integer parses; the range is a rule (an envelope error), not a type.
    #[serde(default = "default_limit")]
    pub limit: i64,
}

/// One page written whole (`write_wiki_pages`' `pages`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageArg {
    pub path: String,
    pub content: String,
}

/// One exact-anchor replacement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplacementArg {
    pub old: String,
    pub new: String,
}

/// The replacements of one existing page (a value of `patches`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchArg {
    pub expected_sha: String,
    pub replacements: Vec<ReplacementArg>,
}

/// `write_wiki_pages`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    pub repository: String,
    pub expected_wiki_repository: String,
    pub expected_base: String,
    pub message: String,
    pub pages: Vec<PageArg>,
    /// Other pages patched in the same commit (as `patch_wiki_pages` takes them).
    #[serde(default)]
    pub patches: BTreeMap<String, PatchArg>,
}

/// `patch_wiki_pages`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchArgs {
    pub repository: String,
    pub expected_wiki_repository: String,
    pub expected_base: String,
    pub message: String,
    pub patches: BTreeMap<String, PatchArg>,
}

/// `list_source_files`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeArgs {
    pub repository: String,
    #[serde(default)]
    pub directory: String,
    #[serde(default)]
    pub recursive: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// `get_source_file`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileArgs {
    pub repository: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<i64>,
}

/// `get_source_file_heads`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadsArgs {
    pub repository: String,
    pub paths: Vec<String>,
    pub max_bytes: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// A result with the wiki the writer resolved the source to (the envelope
/// adds `wiki_repository` to every result of a resolved source).
#[derive(Debug, Clone, Deserialize)]
pub struct Bound<T> {
    #[serde(flatten)]
    pub result: T,
    pub wiki_repository: String,
}

/// `list_source_files`' result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceListing {
    pub commit: String,
    pub directory: String,
    pub recursive: bool,
    pub entries: Vec<TreeEntry>,
    pub truncated: bool,
}

/// `get_source_file`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceFile {
    pub path: String,
    pub commit: String,
    pub content: String,
    pub truncated: bool,
}

/// `get_source_file_heads`' result: one entry per path asked, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileHeads {
    pub commit: String,
    pub files: Vec<FileHeadEntry>,
}

/// One path of a heads call: its head, or why it has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileHeadEntry {
    pub path: String,
    #[serde(flatten)]
    pub head: HeadOutcome,
}

/// A head read, or the error of that path alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HeadOutcome {
    Read { content: String, truncated: bool },
    Failed { error: PathError },
}

/// An error of one path of a heads call (`error.type`, `error.message`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathError {
    #[serde(rename = "type")]
    pub kind: ErrorKind,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_entry_is_the_content_or_the_error_of_its_path() {
        let read = FileHeadEntry {
            path: "a.rs".into(),
            head: HeadOutcome::Read {
                content: "//! A.\n".into(),
                truncated: false,
            },
        };
        let failed = FileHeadEntry {
            path: "b.bin".into(),
            head: HeadOutcome::Failed {
                error: PathError {
                    kind: ErrorKind::LimitExceeded,
                    message: "binary".into(),
                },
            },
        };
        let wire = serde_json::to_value([&read, &failed]).unwrap();
        assert_eq!(
            wire,
            serde_json::json!([
                {"path": "a.rs", "content": "//! A.\n", "truncated": false},
                {"path": "b.bin", "error": {"type": "limit_exceeded", "message": "binary"}},
            ])
        );
        let back: Vec<FileHeadEntry> = serde_json::from_value(wire).unwrap();
        assert_eq!(back, vec![read, failed]);
    }

    #[test]
    fn arguments_refuse_unknown_fields_and_leave_out_what_is_unset() {
        let args = TreeArgs {
            repository: "o/r".into(),
            directory: String::new(),
            recursive: false,
            commit: None,
        };
        assert_eq!(
            serde_json::to_value(&args).unwrap(),
            serde_json::json!({"repository": "o/r", "directory": "", "recursive": false})
        );
        let unknown = serde_json::json!({"repository": "o/r", "dir": "src"});
        assert!(serde_json::from_value::<TreeArgs>(unknown).is_err());
    }
}
