//! The runner's typed calls to its writer child: one method of
//! [`WriterClient`] per writer tool the runner and the builtin agent use,
//! taking and returning the wire types both ends share
//! ([`crate::writer_contract::tools`]). The rmcp plumbing (spawn, envelope,
//! metrics) is `writer.rs`'s; agents that relay a model's or a command's
//! calls use its untyped [`WriterClient::call`].
//!
//! Invariant: a result that does not parse as the tool's result type is a
//! protocol error naming the tool, never a default value; an envelope error
//! keeps its kind as [`crate::wiki::ErrorKind`].

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::writer::{CallError, WriterClient};
use crate::wiki::{History, Page, PageList, Snapshot, WriteResult};
use crate::writer_contract::tools::{
    self, Bound, FileArgs, FileHeads, HeadsArgs, HistoryArgs, ListArgs, PageArgs, PatchArgs,
    PublishArgs, SnapshotArgs, SourceFile, SourceListing, TreeArgs, WriteArgs,
};

impl WriterClient {
    /// Calls `tool` with `arguments` and reads its result as `R`.
    async fn typed<A: Serialize, R: DeserializeOwned>(
        &self,
        tool: &str,
        arguments: &A,
    ) -> Result<R, CallError> {
        let arguments = serde_json::to_value(arguments).map_err(|e| {
            CallError::Protocol(format!("the arguments of {tool} do not encode: {e}"))
        })?;
        let result = self.result(tool, arguments).await?;
        serde_json::from_value(result).map_err(|e| {
            CallError::Protocol(format!(
                "the wiki writer's answer to {tool} is not its result: {e}"
            ))
        })
    }

    /// `get_wiki_snapshot`: the wiki's branch and tip (`sha` is `None` for a
    /// wiki without commits), and the wiki the source resolved to.
    pub async fn snapshot(&self, repository: &str) -> Result<Bound<Snapshot>, CallError> {
        let args = SnapshotArgs {
            repository: repository.to_owned(),
        };
        self.typed(tools::GET_WIKI_SNAPSHOT, &args).await
    }

    /// `list_wiki_pages` at `git_ref`.
    pub async fn list_pages(&self, repository: &str, git_ref: &str) -> Result<PageList, CallError> {
        let args = ListArgs {
            repository: repository.to_owned(),
            git_ref: git_ref.to_owned(),
        };
        self.typed(tools::LIST_WIKI_PAGES, &args).await
    }

    /// `get_wiki_page`: the page at `git_ref`.
    pub async fn page(
        &self,
        repository: &str,
        git_ref: &str,
        path: &str,
    ) -> Result<Page, CallError> {
        let args = PageArgs {
            repository: repository.to_owned(),
            path: path.to_owned(),
            git_ref: git_ref.to_owned(),
            format: Some(tools::PageFormat::Raw),
            // The runner's agents edit pages; who changed them last is a
            // walk of the wiki's history they do not need.
            last_change: false,
        };
        self.typed(tools::GET_WIKI_PAGE, &args).await
    }

    /// `list_wiki_history`: at most `limit` commits from `git_ref` back.
    pub async fn history(
        &self,
        repository: &str,
        git_ref: &str,
        limit: i64,
    ) -> Result<History, CallError> {
        let args = HistoryArgs {
            repository: repository.to_owned(),
            path: None,
            git_ref: git_ref.to_owned(),
            limit,
        };
        self.typed(tools::LIST_WIKI_HISTORY, &args).await
    }

    /// `write_wiki_pages`: pages written whole, and patches, as one commit.
    pub async fn write_pages(&self, args: &WriteArgs) -> Result<WriteResult, CallError> {
        self.typed(tools::WRITE_WIKI_PAGES, args).await
    }

    /// `patch_wiki_pages`: patches alone, as one commit.
    pub async fn patch_pages(&self, args: &PatchArgs) -> Result<WriteResult, CallError> {
        self.typed(tools::PATCH_WIKI_PAGES, args).await
    }

    /// `publish_job_changes`: the job's staged writes as one commit (the
    /// runner's alone; never relayed for an agent).
    pub async fn publish_job_changes(&self, repository: &str) -> Result<WriteResult, CallError> {
        let args = PublishArgs {
            repository: repository.to_owned(),
        };
        self.typed(tools::PUBLISH_JOB_CHANGES, &args).await
    }

    /// `list_source_files`.
    pub async fn source_files(&self, args: &TreeArgs) -> Result<SourceListing, CallError> {
        self.typed(tools::LIST_SOURCE_FILES, args).await
    }

    /// `get_source_file`.
    pub async fn source_file(&self, args: &FileArgs) -> Result<SourceFile, CallError> {
        self.typed(tools::GET_SOURCE_FILE, args).await
    }

    /// `get_source_file_heads`.
    pub async fn source_file_heads(&self, args: &HeadsArgs) -> Result<FileHeads, CallError> {
        self.typed(tools::GET_SOURCE_FILE_HEADS, args).await
    }
}
