//! The per-job broker (GitHub sources): the one way the job-bound writer
//! child gets what it may not be handed on a command line or in a file. The
//! runner serves it for the life of one job on a Unix socket in the job's
//! work directory; the writer child finds it through `TEAMMEM_WRITER_BROKER`
//! (the socket's path) and `TEAMMEM_WRITER_HANDLE` (a random per-job handle)
//! in its cleared environment, and asks, one JSON line per connection:
//!
//! - `{"handle", "request": "wiki_token"}` → `{"ok": true, "token"}`: the wiki
//!   write token the runner minted (`contents: write` on the wiki's repository
//!   only); the child asks once at start and keeps it in memory;
//! - `{"handle", "request": "source_file", "commit", "path"}` → `{"ok": true,
//!   "file": {"path", "commit", "content"}}`: one UTF-8 file of at most
//!   [`MAX_SOURCE_FILE`] bytes at a commit of the job's evidence, read by the
//!   daemon through `forge/github/` with a `contents: read` token that stays
//!   in the daemon;
//! - anything refused → `{"ok": false, "error": {"kind", "message"}}`, `kind`
//!   being an envelope error type (`permission_denied`, `not_found`,
//!   `limit_exceeded`, `invalid_input`, `upstream_error`).
//!
//! Invariants:
//! - the handle is 32 bytes from the CSPRNG, hex, compared in constant time;
//!   it is not a GitHub credential and dies with the job: the broker is a
//!   value owned by the job's future, and dropping it (job finished,
//!   cancelled, timed out) aborts the listener with every connection in
//!   flight and removes the socket file;
//! - the socket lives in the job's work directory (made 0700) and is 0600;
//!   a peer of another user is refused before its request is read;
//! - the wiki token goes only to a peer that is the daemon's own executable
//!   (the writer child, `/proc/{pid}/exe` of the socket peer): an external
//!   agent that read the handle from its MCP configuration can read source
//!   files of the evidence through it, never the wiki credential;
//! - the daemon never hands out a source-read credential: file contents,
//!   not tokens, cross the socket for `source_file`, and only for commits of
//!   the job's evidence bundle (the daemon's own copy, not the file on disk);
//! - requests and answers are bounded ([`MAX_REQUEST_BYTES`],
//!   [`MAX_ANSWER_BYTES`]); nothing here logs a handle or a token.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::evidence::{self, EvidenceBundle, SourceError};
use crate::config::Source;
use crate::forge::github::GitHubForge;
pub use crate::mcp::toolsets::evidence::MAX_SOURCE_FILE;
use crate::wiki::Secret;

/// The socket's name inside the job's work directory.
pub const SOCKET_FILE: &str = "broker.sock";
/// Random bytes in a handle (hex-encoded: twice as many characters).
pub const HANDLE_BYTES: usize = 32;
/// A request line is read up to this size.
pub const MAX_REQUEST_BYTES: u64 = 8 * 1024;
/// An answer line is read up to this size (a 64 KiB file, JSON-escaped).
pub const MAX_ANSWER_BYTES: u64 = 512 * 1024;
/// A path named in a request is at most this long.
const MAX_PATH_BYTES: usize = 1024;
/// A peer has this long to send its request line.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The child waits this long for an answer (a GitHub read may wait out a
/// short rate-limit pause, up to three tries).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);
/// A Unix socket path (`sun_path`) holds at most this many bytes.
const MAX_SOCKET_PATH: usize = 107;

/// Where a writer child finds its job's broker: the two variables of its
/// environment.
#[derive(Debug, Clone)]
pub struct BrokerAccess {
    pub socket: PathBuf,
    /// Not a GitHub credential, but still never in argv, a log or a result.
    pub handle: Secret,
}

/// What the broker of one job serves.
pub struct BrokerJob {
    pub source: Source,
    /// The job's evidence (the commits `source_file` may read).
    pub bundle: EvidenceBundle,
    pub forge: Arc<GitHubForge>,
    /// The wiki write token, for the writer child alone.
    pub wiki_token: Secret,
    /// The executable of the writer child (the daemon's own): only a peer
    /// running it is given the wiki token.
    pub writer_program: PathBuf,
}

/// A running broker; dropping it ends it (listener, connections, socket file).
pub struct Broker {
    access: BrokerAccess,
    listener: tokio::task::JoinHandle<()>,
}

impl Broker {
    /// Binds `{work_dir}/broker.sock` (the directory is made 0700, the socket
    /// 0600; a socket left by an earlier attempt is replaced) and serves
    /// `job` on it with a new handle.
    pub fn start(work_dir: &Path, job: BrokerJob) -> Result<Broker, StartError> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let socket = work_dir.join(SOCKET_FILE);
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(StartError {
                reason: format!(
                    "the job's broker socket {} is longer than the {MAX_SOCKET_PATH} bytes a Unix socket path may have; choose a shorter server.data_dir",
                    socket.display()
                ),
                retryable: false,
            });
        }
        let unusable = |what: &str, e: std::io::Error| StartError {
            reason: format!(
                "cannot {what} the job's broker socket {}: {e}; check data_dir's permissions",
                socket.display()
            ),
            retryable: true,
        };
        std::fs::create_dir_all(work_dir).map_err(|e| unusable("create the directory of", e))?;
        std::fs::set_permissions(work_dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| unusable("restrict the directory of", e))?;
        let owner = std::fs::metadata(work_dir)
            .map_err(|e| unusable("inspect the directory of", e))?
            .uid();
        match std::fs::remove_file(&socket) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(unusable("replace", e)),
        }
        let listener = UnixListener::bind(&socket).map_err(|e| unusable("bind", e))?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| unusable("restrict", e))?;
        let handle = new_handle();
        let shared = Arc::new(Shared {
            handle: handle.clone(),
            owner,
            job,
        });
        Ok(Broker {
            access: BrokerAccess { socket, handle },
            listener: tokio::spawn(serve(listener, shared)),
        })
    }

    /// What the writer child's environment carries.
    pub fn access(&self) -> &BrokerAccess {
        &self.access
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.listener.abort();
        let _ = std::fs::remove_file(&self.access.socket);
    }
}

/// Why a broker could not start, and whether a later attempt may succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError {
    pub reason: String,
    pub retryable: bool,
}

/// A new handle: [`HANDLE_BYTES`] from the CSPRNG, hex.
fn new_handle() -> Secret {
    use rand::RngCore;
    let mut bytes = [0u8; HANDLE_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    Secret::new(hex::encode(bytes))
}

/// `true` for a handle's shape: [`HANDLE_BYTES`] × 2 lowercase hex digits.
pub fn is_handle(text: &str) -> bool {
    text.len() == HANDLE_BYTES * 2
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

struct Shared {
    handle: Secret,
    /// The uid owning the work directory (the daemon's): the only peer uid served.
    owner: u32,
    job: BrokerJob,
}

/// One request line.
#[derive(Debug, Serialize, Deserialize)]
struct Request {
    handle: String,
    request: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    path: Option<String>,
}

/// One answer line.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Answer {
    ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file: Option<SourceFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<BrokerError>,
}

/// A file the broker read for the writer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceFile {
    pub path: String,
    pub commit: String,
    pub content: String,
}

/// A refusal: `kind` is an envelope error type, `message` says what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct BrokerError {
    pub kind: String,
    pub message: String,
}

impl BrokerError {
    fn new(kind: &str, message: impl Into<String>) -> BrokerError {
        BrokerError {
            kind: kind.to_owned(),
            message: message.into(),
        }
    }
}

fn refused(kind: &str, message: impl Into<String>) -> Answer {
    Answer {
        error: Some(BrokerError::new(kind, message)),
        ..Answer::default()
    }
}

/// Accepts until aborted; each connection is answered in a task of a set the
/// listener owns, so aborting the listener ends them too.
async fn serve(listener: UnixListener, shared: Arc<Shared>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(answer(stream, shared.clone()));
                }
                Err(e) => {
                    tracing::warn!(target: "teammem::runner", error = %e, "the job's broker could not accept a connection");
                    // Out of descriptors and the like: do not spin on it.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// The executable behind a socket peer is the writer's (same file).
fn peer_runs(pid: Option<i32>, program: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(pid) = pid else {
        return false;
    };
    let (Ok(peer), Ok(writer)) = (
        std::fs::metadata(format!("/proc/{pid}/exe")),
        std::fs::metadata(program),
    ) else {
        return false;
    };
    peer.dev() == writer.dev() && peer.ino() == writer.ino()
}

async fn answer(stream: UnixStream, shared: Arc<Shared>) {
    let peer = stream.peer_cred().ok();
    let (read, mut write) = stream.into_split();
    let answer = match peer {
        Some(cred) if cred.uid() == shared.owner => {
            let mut line = Vec::new();
            let mut reader = BufReader::new(read).take(MAX_REQUEST_BYTES + 1);
            match tokio::time::timeout(REQUEST_TIMEOUT, reader.read_until(b'\n', &mut line)).await {
                Ok(Ok(_)) if line.len() as u64 > MAX_REQUEST_BYTES => refused(
                    "invalid_input",
                    format!("a broker request is at most {MAX_REQUEST_BYTES} bytes"),
                ),
                Ok(Ok(_)) => match serde_json::from_slice::<Request>(&line) {
                    Ok(request) => decide(&shared, request, cred.pid()).await,
                    Err(e) => refused(
                        "invalid_input",
                        format!("a broker request is one JSON line with handle and request: {e}"),
                    ),
                },
                Ok(Err(_)) | Err(_) => return,
            }
        }
        _ => refused(
            "permission_denied",
            "the job's broker serves only its own user",
        ),
    };
    let mut text = serde_json::to_vec(&answer).unwrap_or_default();
    text.push(b'\n');
    let _ = write.write_all(&text).await;
    let _ = write.shutdown().await;
}

async fn decide(shared: &Shared, request: Request, pid: Option<i32>) -> Answer {
    let expected = shared.handle.expose().as_bytes();
    if !bool::from(expected.ct_eq(request.handle.as_bytes())) {
        tracing::warn!(target: "teammem::runner", "the job's broker refused a request with a wrong handle");
        return refused(
            "permission_denied",
            "the broker handle is wrong; only the writer started for this job may ask",
        );
    }
    match request.request.as_str() {
        "wiki_token" => {
            if !peer_runs(pid, &shared.job.writer_program) {
                tracing::warn!(target: "teammem::runner", pid, "the job's broker refused the wiki token to a process that is not the writer");
                return refused(
                    "permission_denied",
                    "the wiki token is handed only to the job's wiki writer (teammem mcp --wiki-writer)",
                );
            }
            Answer {
                ok: true,
                token: Some(shared.job.wiki_token.expose().to_owned()),
                ..Answer::default()
            }
        }
        "source_file" => {
            let (Some(commit), Some(path)) = (request.commit, request.path) else {
                return refused("invalid_input", "source_file needs commit and path");
            };
            match source_file(&shared.job, &commit, &path).await {
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
        other => refused(
            "invalid_input",
            format!(
                "unknown broker request {:?}; ask wiki_token or source_file",
                evidence::bound(other, 64).0
            ),
        ),
    }
}

/// The rule of `get_source_file`: a commit of the evidence, a
/// repository-relative path, a UTF-8 file of at most [`MAX_SOURCE_FILE`] bytes.
async fn source_file(job: &BrokerJob, commit: &str, path: &str) -> Result<SourceFile, BrokerError> {
    if !evidence::is_full_sha(commit) || !job.bundle.contains_commit(commit) {
        return Err(BrokerError::new(
            "permission_denied",
            format!(
                "commit {:?} is not one of this job's evidence commits; use a sha from get_job_evidence",
                evidence::bound(commit, 64).0
            ),
        ));
    }
    let clean = path.trim_start_matches('/');
    if clean.is_empty()
        || clean.len() > MAX_PATH_BYTES
        || clean.chars().any(char::is_control)
        || clean
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err(BrokerError::new(
            "invalid_input",
            format!(
                "path {:?} is not a repository-relative file path; use a/b/c.ext",
                evidence::bound(path, 240).0
            ),
        ));
    }
    let commit = commit.to_ascii_lowercase();
    match job
        .forge
        .read_file_at(&job.source, &commit, clean, MAX_SOURCE_FILE)
        .await
    {
        Ok(Some(content)) => Ok(SourceFile {
            path: clean.to_owned(),
            commit,
            content,
        }),
        Ok(None) => Err(BrokerError::new(
            "not_found",
            format!("{clean} is not a file at {commit}"),
        )),
        Err(SourceError::Rejected(message)) => Err(BrokerError::new("not_found", message)),
        Err(SourceError::Invalid(message)) => Err(BrokerError::new("limit_exceeded", message)),
        Err(SourceError::Unavailable(message)) => Err(BrokerError::new("upstream_error", message)),
    }
}

/// The writer child's side: asks its job's broker.
#[derive(Debug, Clone)]
pub struct BrokerClient {
    access: BrokerAccess,
}

impl BrokerClient {
    pub fn new(access: BrokerAccess) -> BrokerClient {
        BrokerClient { access }
    }

    /// The handle (for the writer's credential scan).
    pub fn handle(&self) -> &Secret {
        &self.access.handle
    }

    /// The socket and handle (for the environment of a writer started by hand).
    pub fn access(&self) -> &BrokerAccess {
        &self.access
    }

    /// The wiki write token (asked once, at the writer's start).
    pub async fn wiki_token(&self) -> Result<Secret, BrokerError> {
        let answer = self.ask("wiki_token", None, None).await?;
        answer
            .token
            .filter(|t| !t.is_empty())
            .map(Secret::new)
            .ok_or_else(|| {
                BrokerError::new(
                    "internal_error",
                    "the job's broker answered without a token",
                )
            })
    }

    /// One source file at a commit of the evidence.
    pub async fn source_file(&self, commit: &str, path: &str) -> Result<SourceFile, BrokerError> {
        let answer = self.ask("source_file", Some(commit), Some(path)).await?;
        answer.file.ok_or_else(|| {
            BrokerError::new(
                "internal_error",
                "the job's broker answered without the file",
            )
        })
    }

    async fn ask(
        &self,
        request: &str,
        commit: Option<&str>,
        path: Option<&str>,
    ) -> Result<Answer, BrokerError> {
        let socket = &self.access.socket;
        let gone = |e: std::io::Error| {
            BrokerError::new(
                "upstream_error",
                format!(
                    "the job's broker at {} cannot be reached ({e}); the job has ended or the daemon stopped",
                    socket.display()
                ),
            )
        };
        let exchange = async {
            let mut stream = UnixStream::connect(socket).await.map_err(gone)?;
            let mut line = serde_json::to_vec(&Request {
                handle: self.access.handle.expose().to_owned(),
                request: request.to_owned(),
                commit: commit.map(str::to_owned),
                path: path.map(str::to_owned),
            })
            .map_err(|e| BrokerError::new("internal_error", e.to_string()))?;
            line.push(b'\n');
            stream.write_all(&line).await.map_err(gone)?;
            let mut answer = Vec::new();
            BufReader::new(stream)
                .take(MAX_ANSWER_BYTES + 1)
                .read_until(b'\n', &mut answer)
                .await
                .map_err(gone)?;
            if answer.len() as u64 > MAX_ANSWER_BYTES {
                return Err(BrokerError::new(
                    "limit_exceeded",
                    format!("the job's broker answered more than {MAX_ANSWER_BYTES} bytes"),
                ));
            }
            serde_json::from_slice::<Answer>(&answer).map_err(|_| {
                BrokerError::new(
                    "upstream_error",
                    "the job's broker closed the connection without an answer; the job has ended or the daemon stopped",
                )
            })
        };
        let answer = tokio::time::timeout(ANSWER_TIMEOUT, exchange)
            .await
            .map_err(|_| {
                BrokerError::new(
                    "timeout",
                    format!(
                        "the job's broker did not answer {request} within {} s",
                        ANSWER_TIMEOUT.as_secs()
                    ),
                )
            })??;
        match answer.error {
            Some(error) => Err(error),
            None if answer.ok => Ok(answer),
            None => Err(BrokerError::new(
                "upstream_error",
                "the job's broker answered neither a result nor an error",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_32_random_bytes_in_hex() {
        let (a, b) = (new_handle(), new_handle());
        assert!(is_handle(a.expose()), "{}", a.expose().len());
        assert_ne!(a.expose(), b.expose());
        assert!(!is_handle("ABCDEF"));
        assert!(!is_handle(&"g".repeat(64)));
        let shown = format!(
            "{:?}",
            BrokerAccess {
                socket: "/s".into(),
                handle: a.clone()
            }
        );
        assert!(!shown.contains(a.expose()), "{shown}");
    }

    #[test]
    fn answers_carry_only_what_they_hold() {
        let text = serde_json::to_string(&refused("not_found", "x is not a file")).unwrap();
        assert_eq!(
            text,
            r#"{"ok":false,"error":{"kind":"not_found","message":"x is not a file"}}"#
        );
    }
}
