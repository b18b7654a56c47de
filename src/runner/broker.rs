//! The per-job broker, daemon side: the one channel between the runner and
//! the writer child it spawned for a job, carrying what may not be handed on a
//! command line, in an environment or in a file. The wire protocol and the
//! child's client are in `writer_contract/broker.rs`.
//!
//! The runner makes a connected socket pair per job. One end stays in the
//! daemon and is served here; the other becomes the writer child's descriptor
//! [`BROKER_FD`](crate::writer_contract::BROKER_FD) at spawn, and exists nowhere else: it has no path, so no
//! other process (an agent, another writer an agent started, another job)
//! can connect to it. Source files are read by the daemon through the
//! source's [`SourceForge`] (for a GitHub source, the App's client with a
//! `contents: read` token that stays in the daemon); nothing here names a
//! particular forge.
//!
//! Invariants:
//! - the broker is reachable only through the descriptor handed to the child
//!   the runner spawned: nothing names it, so reading a configuration, an
//!   environment or a directory yields no way to ask it for anything;
//! - it is a value owned by the job's future: dropping it (job finished,
//!   cancelled, timed out) ends the serving task and closes the daemon's end;
//! - the daemon never hands out a source-read credential: file contents and
//!   directory listings, not tokens, cross the socket for `source_file` and
//!   `source_tree`, only for a source whose reads need a credential the
//!   writer lacks ([`SourceForge::reads_need_a_credential`]), and only for
//!   commits of the job's evidence bundle (the daemon's own copy, not the
//!   file on disk), bounded in size;
//! - the writer's evidence is this copy: `evidence` answers the bundle the
//!   runner collected and judged (with its marker rewrites) and
//!   `pull_patches` the patches it collected, both from memory, so nothing
//!   an agent writes into the job's work directory reaches the writer;
//! - requests are read bounded ([`MAX_REQUEST_BYTES`]); nothing here logs a
//!   token.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;

use crate::config::Source;
use crate::forge::evidence::{self, EvidenceBundle, PatchSet, SourceError};
use crate::forge::{Forges, SourceForge};
use crate::wiki::{ErrorKind, Secret};
use crate::writer_contract::MAX_SOURCE_FILE;
use crate::writer_contract::broker::{
    Answer, Ask, BrokerError, MAX_REQUEST_BYTES, RedactedToken, Request, SourceFile, SourceTree,
    WriterDestination, WriterGrant, refused,
};

/// What the broker of one job serves.
pub struct BrokerJob {
    pub source: Source,
    pub destination: WriterDestination,
    /// The job's evidence (the commits `source_file` may read), served whole
    /// to the writer by `evidence`.
    pub bundle: EvidenceBundle,
    /// GitHub sources: each pull request's patches, served by `pull_patches`
    /// (empty for local sources, whose writer reads the repository itself).
    pub patches: PatchSet,
    /// The daemon's forges, which read `source_file` and `source_tree` for a
    /// source whose reads need a credential (a GitHub source; forges without
    /// its client read nothing).
    pub forges: Forges,
    /// The wiki write token, for the writer child alone (GitHub wikis).
    pub wiki_token: Option<Secret>,
}

/// A running broker; dropping it ends it.
pub struct Broker {
    serving: tokio::task::JoinHandle<()>,
}

impl Broker {
    /// A connected socket pair: the daemon's end is served with `job`; the
    /// other end is returned, for the writer child's [`BROKER_FD`](crate::writer_contract::BROKER_FD).
    pub fn start(job: BrokerJob) -> Result<(Broker, OwnedFd), StartError> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(|e| StartError {
            reason: format!(
                "cannot make the job's broker socket pair: {e}; the daemon may be out of file descriptors"
            ),
            retryable: true,
        })?;
        ours.set_nonblocking(true)
            .and_then(|()| UnixStream::from_std(ours))
            .map(|stream| {
                (
                    Broker {
                        serving: tokio::spawn(serve(stream, Arc::new(job))),
                    },
                    OwnedFd::from(theirs),
                )
            })
            .map_err(|e| StartError {
                reason: format!("cannot serve the job's broker socket: {e}"),
                retryable: true,
            })
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

/// Why a broker could not start, and whether a later attempt may succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError {
    pub reason: String,
    pub retryable: bool,
}

/// Answers the child's requests in order until it closes its end.
async fn serve(stream: UnixStream, job: Arc<BrokerJob>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    loop {
        let mut line = Vec::new();
        let read = (&mut reader)
            .take(MAX_REQUEST_BYTES + 1)
            .read_until(b'\n', &mut line)
            .await;
        let answer = match read {
            Ok(0) | Err(_) => return,
            Ok(_) if line.len() as u64 > MAX_REQUEST_BYTES || !line.ends_with(b"\n") => {
                // The rest of an oversized line cannot be told from the next
                // request: answer, then stop serving this child.
                let answer = refused(
                    ErrorKind::InvalidInput,
                    format!("a broker request is one line of at most {MAX_REQUEST_BYTES} bytes"),
                );
                let _ = send(&mut write, &answer).await;
                return;
            }
            Ok(_) => match serde_json::from_slice::<Request>(&line) {
                Ok(request) => decide(&job, request).await,
                Err(e) => refused(
                    ErrorKind::InvalidInput,
                    format!("a broker request is one JSON line with a request field: {e}"),
                ),
            },
        };
        if send(&mut write, &answer).await.is_err() {
            return;
        }
    }
}

async fn send(write: &mut OwnedWriteHalf, answer: &Answer) -> std::io::Result<()> {
    let mut text = serde_json::to_vec(answer).unwrap_or_default();
    text.push(b'\n');
    write.write_all(&text).await
}

async fn decide(job: &BrokerJob, request: Request) -> Answer {
    match request.request {
        Ask::Binding => Answer {
            ok: true,
            binding: Some(WriterGrant {
                destination: job.destination.clone(),
                token: job
                    .wiki_token
                    .as_ref()
                    .map(|t| RedactedToken(t.expose_str().unwrap_or_default().to_owned())),
            }),
            ..Answer::default()
        },
        Ask::SourceFile => {
            let (Some(commit), Some(path)) = (request.commit, request.path) else {
                return refused(ErrorKind::InvalidInput, "source_file needs commit and path");
            };
            match source_file(job, &commit, &path, request.max_bytes).await {
                Ok(file) => Answer {
                    ok: true,
                    file: Some(file),
                    ..Answer::default()
                },
                Err(error) => Answer {
                    error: Some(error),
                    ..Answer::default()
                },
            }
        }
        Ask::SourceTree => {
            let Some(commit) = request.commit else {
                return refused(ErrorKind::InvalidInput, "source_tree needs commit");
            };
            let directory = request.path.unwrap_or_default();
            let recursive = request.recursive.unwrap_or(false);
            match source_tree(job, &commit, &directory, recursive).await {
                Ok(tree) => Answer {
                    ok: true,
                    tree: Some(tree),
                    ..Answer::default()
                },
                Err(error) => Answer {
                    error: Some(error),
                    ..Answer::default()
                },
            }
        }
        Ask::Evidence => Answer {
            ok: true,
            evidence: Some(Box::new(job.bundle.clone())),
            ..Answer::default()
        },
        Ask::PullPatches => {
            let Some(number) = request.number else {
                return refused(ErrorKind::InvalidInput, "pull_patches needs number");
            };
            let Some(pull) = job.bundle.pull(number) else {
                return refused(
                    ErrorKind::NotFound,
                    format!("pull request #{number} is not in this job's evidence"),
                );
            };
            Answer {
                ok: true,
                patches: Some(
                    job.patches
                        .pulls
                        .get(&pull.number)
                        .cloned()
                        .unwrap_or_default(),
                ),
                ..Answer::default()
            }
        }
    }
}

/// The source's forge, when the broker reads for this job, and `commit`
/// checked to be one of the job's evidence.
fn readable<'a>(job: &'a BrokerJob, commit: &str) -> Result<SourceForge<'a>, BrokerError> {
    let forge = job.forges.of(&job.source);
    if !forge.reads_need_a_credential() {
        return Err(BrokerError::new(
            ErrorKind::InvalidInput,
            "this job's source is read without a credential; the writer reads its files itself",
        ));
    }
    if !forge.reads_here() {
        return Err(BrokerError::new(
            ErrorKind::InvalidInput,
            "this daemon holds no client for this job's source (no [github] section), so its broker reads no files",
        ));
    }
    if !evidence::is_full_sha(commit) || !job.bundle.readable_commit(commit) {
        return Err(BrokerError::new(
            ErrorKind::PermissionDenied,
            format!(
                "commit {:?} is not one of this job's evidence commits or their parents; use a sha from get_job_evidence",
                evidence::bound(commit, 64).0
            ),
        ));
    }
    Ok(forge)
}

fn source_failure(error: SourceError) -> BrokerError {
    match error {
        SourceError::Rejected(message) => BrokerError::new(ErrorKind::NotFound, message),
        SourceError::Invalid(message) => BrokerError::new(ErrorKind::LimitExceeded, message),
        SourceError::Unavailable(message) => BrokerError::new(ErrorKind::UpstreamError, message),
    }
}

/// The rule of `get_source_file`: a commit of the evidence, a
/// repository-relative path, a UTF-8 file of at most [`MAX_SOURCE_FILE`]
/// bytes, or with `max_bytes` (1 to [`MAX_SOURCE_FILE`]) its first bytes.
async fn source_file(
    job: &BrokerJob,
    commit: &str,
    path: &str,
    max_bytes: Option<usize>,
) -> Result<SourceFile, BrokerError> {
    let forge = readable(job, commit)?;
    let clean = evidence::clean_source_path(path, false)
        .map_err(|message| BrokerError::new(ErrorKind::InvalidInput, message))?;
    if max_bytes.is_some_and(|n| n == 0 || n > MAX_SOURCE_FILE) {
        return Err(BrokerError::new(
            ErrorKind::InvalidInput,
            format!("max_bytes must be between 1 and {MAX_SOURCE_FILE}"),
        ));
    }
    let commit = commit.to_ascii_lowercase();
    let not_a_file = || {
        BrokerError::new(
            ErrorKind::NotFound,
            format!("{clean} is not a file at {commit}"),
        )
    };
    let (content, truncated) = match max_bytes {
        None => forge
            .read_file(&commit, &clean, MAX_SOURCE_FILE)
            .await
            .map_err(source_failure)?
            .map(|content| (content, false))
            .ok_or_else(not_a_file)?,
        Some(max) => forge
            .read_head(&commit, &clean, max)
            .await
            .map_err(source_failure)?
            .map(|head| (head.content, head.truncated))
            .ok_or_else(not_a_file)?,
    };
    Ok(SourceFile {
        path: clean,
        commit,
        content,
        truncated,
    })
}

/// The rule of `list_source_files`: a commit of the evidence, a
/// repository-relative directory, a bounded listing.
async fn source_tree(
    job: &BrokerJob,
    commit: &str,
    directory: &str,
    recursive: bool,
) -> Result<SourceTree, BrokerError> {
    let forge = readable(job, commit)?;
    let clean = evidence::clean_source_path(directory, true)
        .map_err(|message| BrokerError::new(ErrorKind::InvalidInput, message))?;
    let commit = commit.to_ascii_lowercase();
    let listing = forge
        .list_tree(&commit, &clean, recursive)
        .await
        .map_err(source_failure)?
        .ok_or_else(|| {
            BrokerError::new(
                ErrorKind::NotFound,
                format!("{clean} is not a directory at {commit}"),
            )
        })?;
    Ok(SourceTree {
        commit,
        directory: clean,
        entries: listing.entries,
        truncated: listing.truncated,
    })
}
