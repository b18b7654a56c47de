//! Where the writer's evidence tools read a job's source: the source's own
//! forge when this process can read it ([`SourceForge::reads_here`]: a local
//! repository), otherwise the job's broker, which reads it in the daemon (a
//! GitHub source: its patches as the runner collected them, its files with
//! the daemon's credential).
//!
//! Invariants:
//! - the writer never calls GitHub itself and holds no source credential:
//!   its forges have no GitHub client, so a GitHub source is never read here;
//! - which forge answers is decided by `forge/source.rs`, never here (no
//!   match on the source's forge);
//! - every read names a commit the caller has already checked against the
//!   job's bundle; a refusal keeps its kind (`not_found`,
//!   `permission_denied`, `limit_exceeded`, …) in the envelope.

use std::sync::LazyLock;

use crate::forge::evidence::{ChangedFile, FileHead, PullRequest, SourceError, TreeListing};
use crate::forge::{Forges, SourceForge};
use crate::mcp::context::{Context, Resolved};
use crate::mcp::envelope::ToolError;
use crate::wiki::ErrorKind;
use crate::writer_contract::MAX_SOURCE_FILE;
use crate::writer_contract::broker::{BrokerClient, BrokerError};

/// The writer's forges: no GitHub client, because the writer holds no
/// source credential.
static WRITER_FORGES: LazyLock<Forges> = LazyLock::new(Forges::default);

/// A pull request's changed files, each with its patch.
pub(super) type FilePatches = Vec<(ChangedFile, Option<String>)>;

/// The reader of one job's source.
pub(super) enum SourceReader<'a> {
    /// This process reads the source itself.
    Here(SourceForge<'a>),
    /// The job's broker reads it in the daemon.
    Brokered(&'a Context),
}

impl<'a> SourceReader<'a> {
    pub(super) fn of(context: &'a Context, resolved: &'a Resolved) -> SourceReader<'a> {
        let forge = WRITER_FORGES.of(&resolved.source);
        if forge.reads_here() {
            SourceReader::Here(forge)
        } else {
            SourceReader::Brokered(context)
        }
    }

    /// The files of `pull` with their patches.
    pub(super) async fn patches(&self, pull: &PullRequest) -> Result<FilePatches, ToolError> {
        match self {
            SourceReader::Here(forge) => forge.pull_patches(pull).await.map_err(source_error),
            SourceReader::Brokered(context) => stored_patches(context, pull).await,
        }
    }

    /// The text of `path` at `commit`, whole (at most [`MAX_SOURCE_FILE`]
    /// bytes) or (with `head`) its first bytes; `None` when it is not a file
    /// there.
    pub(super) async fn file(
        &self,
        commit: &str,
        path: &str,
        head: Option<usize>,
    ) -> Result<Option<FileHead>, ToolError> {
        match self {
            SourceReader::Here(forge) => match head {
                None => forge
                    .read_file(commit, path, MAX_SOURCE_FILE)
                    .await
                    .map(|file| {
                        file.map(|content| FileHead {
                            content,
                            truncated: false,
                        })
                    }),
                Some(max) => forge.read_head(commit, path, max).await,
            }
            .map_err(source_error),
            SourceReader::Brokered(context) => {
                let file = broker_of(context)?
                    .source_file(commit, path, head)
                    .await
                    .map_err(broker_error)?;
                Ok(Some(FileHead {
                    content: file.content,
                    truncated: file.truncated,
                }))
            }
        }
    }

    /// The heads of `paths` at `commit`, one result per path: the forge
    /// reads a local source's all from one open repository, the broker is
    /// asked for each of a GitHub source's (the daemon answers unchanged
    /// blobs from its head cache).
    pub(super) async fn heads(
        &self,
        commit: &str,
        paths: Vec<String>,
        max: usize,
    ) -> Result<Vec<Result<Option<FileHead>, ToolError>>, ToolError> {
        match self {
            SourceReader::Here(forge) => {
                let heads = forge
                    .read_heads(commit, paths, max)
                    .await
                    .map_err(source_error)?;
                Ok(heads
                    .into_iter()
                    .map(|head| head.map_err(source_error))
                    .collect())
            }
            SourceReader::Brokered(context) => {
                let broker = broker_of(context)?;
                let mut heads = Vec::with_capacity(paths.len());
                for path in &paths {
                    let head = match broker.source_file(commit, path, Some(max)).await {
                        Ok(file) => Ok(Some(FileHead {
                            content: file.content,
                            truncated: file.truncated,
                        })),
                        Err(error) if error.kind == ErrorKind::NotFound => Ok(None),
                        // The commit was checked here; a broker that refuses
                        // it anyway refuses the whole call.
                        Err(error) if error.kind == ErrorKind::PermissionDenied => {
                            return Err(broker_error(error));
                        }
                        Err(error) => Err(broker_error(error)),
                    };
                    heads.push(head);
                }
                Ok(heads)
            }
        }
    }

    /// The listing of `directory` at `commit`; `None` when it is not a
    /// directory there.
    pub(super) async fn tree(
        &self,
        commit: &str,
        directory: &str,
        recursive: bool,
    ) -> Result<Option<TreeListing>, ToolError> {
        match self {
            SourceReader::Here(forge) => forge
                .list_tree(commit, directory, recursive)
                .await
                .map_err(source_error),
            SourceReader::Brokered(context) => {
                let tree = broker_of(context)?
                    .source_tree(commit, directory, recursive)
                    .await
                    .map_err(broker_error)?;
                Ok(Some(tree.listing()))
            }
        }
    }
}

/// The job's broker, through which a GitHub source's files are read.
fn broker_of(context: &Context) -> Result<&BrokerClient, ToolError> {
    context
        .binding
        .writer
        .as_ref()
        .and_then(|w| w.broker.as_ref())
        .ok_or_else(|| {
            ToolError::configuration(
                "source files of GitHub sources are read through the job's broker, and this writer has none (TEAMMEM_WRITER_BROKER is not set); only a writer started for a job serves them",
            )
        })
}

/// A GitHub pull request's files with the patches the runner collected, from
/// the job's broker (the writer holds no source credential).
async fn stored_patches(context: &Context, pull: &PullRequest) -> Result<FilePatches, ToolError> {
    let patches = broker_of(context)?
        .pull_patches(pull.number.get())
        .await
        .map_err(broker_error)?;
    Ok(pull
        .files
        .iter()
        .map(|file| {
            let patch = patches
                .iter()
                .find(|p| p.path == file.path)
                .and_then(|p| p.patch.clone());
            (file.clone(), patch)
        })
        .collect())
}

/// A source refusal as the envelope error the agent can act on.
fn source_error(error: SourceError) -> ToolError {
    match error {
        SourceError::Rejected(message) => ToolError::not_found(message),
        SourceError::Invalid(message) => ToolError::new(ErrorKind::LimitExceeded, message),
        SourceError::Unavailable(message) => ToolError::new(ErrorKind::UpstreamError, message),
    }
}

/// A broker refusal as the envelope error of the same type.
pub(super) fn broker_error(error: BrokerError) -> ToolError {
    ToolError::new(error.kind, error.message)
}
