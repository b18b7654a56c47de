//! The broker's wire protocol and the writer child's client.
//!
//! The runner makes a connected socket pair per job; its end is served by
//! `runner/broker.rs`, the other becomes the writer child's descriptor
//! [`BROKER_FD`](super::BROKER_FD). The child asks, one JSON line per request, answered in order:
//!
//! - `{"request": "binding"}` → `{"ok": true, "binding": {"destination",
//!   "token"}}`: the wiki the writer serves, as the runner resolved it (the
//!   writer takes it over whatever its configuration file says), and for a
//!   GitHub wiki the job's own write token; the child asks once at start and
//!   keeps it in memory;
//! - `{"request": "source_file", "commit", "path"}` → `{"ok": true, "file":
//!   {"path", "commit", "content", "truncated"}}`: one UTF-8 file of at most
//!   [`MAX_SOURCE_FILE`](super::MAX_SOURCE_FILE) bytes at a commit of the job's
//!   evidence (GitHub sources); with `"max_bytes": N` (at most that limit)
//!   only its first N bytes, whatever its size, `truncated` when cut;
//! - `{"request": "source_tree", "commit", "path", "recursive"}` → `{"ok":
//!   true, "tree": {"commit", "directory", "entries": [{"path", "type"}],
//!   "truncated"}}`: one directory's listing at a commit of the job's
//!   evidence (`path` empty or absent: the root), bounded like
//!   [`TreeListing`];
//! - `{"request": "evidence"}` → `{"ok": true, "evidence": {bundle}}`: the
//!   job's evidence bundle as the runner holds it in memory, with the marker
//!   rewrites it decided; the writer's only source of the bundle, of the
//!   commits it may read and of the rewrites it folds into a write (it never
//!   reads `evidence.json`, which the agent can write); asked once, kept in
//!   memory by [`BrokerClient`], read up to [`MAX_EVIDENCE_ANSWER_BYTES`];
//! - `{"request": "pull_patches", "number"}` → `{"ok": true, "patches":
//!   [{"path", "patch", "patch_truncated"}]}`: the patches the runner
//!   collected for one pull request of the bundle (GitHub sources);
//! - anything refused → `{"ok": false, "error": {"kind", "message"}}`, `kind`
//!   being an envelope error type (`permission_denied`, `not_found`,
//!   `limit_exceeded`, `invalid_input`, `upstream_error`).
//!
//! Invariants: requests and answers are bounded ([`MAX_REQUEST_BYTES`],
//! [`MAX_ANSWER_BYTES`], [`MAX_EVIDENCE_ANSWER_BYTES`] for the two answers
//! that carry the bundle's lists); the marker rewrites a writer applies are
//! the broker's, and a write that published them (or found them already
//! applied) settles them, so a later write of the job carries none; a token on the wire is a [`RedactedToken`], whose
//! `Debug` never shows it; the client takes over only a descriptor that is a
//! socket, and marks it close-on-exec so nothing the writer starts inherits it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use crate::config::{Forge, Source};
use crate::forge::evidence::{EvidenceBundle, FilePatch, TreeEntry, TreeListing};
use crate::ids::RepoName;
use crate::staleness::MarkerRewrite;
use crate::wiki::ErrorKind;

/// A request line is read up to this size.
pub const MAX_REQUEST_BYTES: u64 = 8 * 1024;
/// An answer line is read up to this size (a 64 KiB file, JSON-escaped).
pub const MAX_ANSWER_BYTES: u64 = 512 * 1024;
/// The answers to `evidence` and `pull_patches` are read up to this size: a
/// bundle holds up to 1,000 commits and 100 pull requests of 300 files, a
/// pull request's patches up to 300 × 32 KiB, and both come from the daemon.
pub const MAX_EVIDENCE_ANSWER_BYTES: u64 = 64 * 1024 * 1024;
/// A path named in a request is at most this long.
pub const MAX_PATH_BYTES: usize = 1024;
/// The child waits this long for an answer (a GitHub read may wait out a
/// short rate-limit pause, up to three tries).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// The wiki a job's writer serves, as the runner resolved it from its own
/// configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterDestination {
    /// The source (`owner/name`) the writer is bound to.
    pub source: String,
    /// `owner/name` of the repository whose wiki receives the memory.
    pub wiki_repository: RepoName,
    #[serde(flatten)]
    pub remote: WriterRemote,
}

/// Where the wiki lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "forge", rename_all = "snake_case")]
pub enum WriterRemote {
    /// A GitHub wiki under `git_url` (`{git_url}/{wiki_repository}.wiki.git`).
    Github { git_url: String },
    /// Plain git repositories on this machine.
    Local { repo: PathBuf, wiki: PathBuf },
}

impl WriterDestination {
    /// The destination of `source`; `git_url` is `[github] git_url` (GitHub
    /// sources need it).
    pub fn of(source: &Source, git_url: Option<&str>) -> Result<WriterDestination, String> {
        let remote = match &source.forge {
            Forge::Local { repo, wiki } => WriterRemote::Local {
                repo: repo.clone(),
                wiki: wiki.clone(),
            },
            Forge::GitHub => WriterRemote::Github {
                git_url: git_url
                    .ok_or_else(|| {
                        format!(
                            "{} lives on GitHub but the configuration has no [github] section",
                            source.repository
                        )
                    })?
                    .to_owned(),
            },
        };
        Ok(WriterDestination {
            source: source.repository.to_string(),
            wiki_repository: source.wiki_repository.clone(),
            remote,
        })
    }
}

/// What the writer child is bound to: the destination and its credential.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WriterGrant {
    pub destination: WriterDestination,
    /// The job's wiki write token (GitHub wikis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<RedactedToken>,
}

/// A token on the wire; its `Debug` never shows it.
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RedactedToken(pub String);

impl std::fmt::Debug for RedactedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// What a request line asks for (its `request` field); a name outside
/// these is refused when the line is read, naming the ones there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ask {
    Binding,
    SourceFile,
    SourceTree,
    Evidence,
    PullPatches,
}

impl Ask {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Ask::Binding => "binding",
            Ask::SourceFile => "source_file",
            Ask::SourceTree => "source_tree",
            Ask::Evidence => "evidence",
            Ask::PullPatches => "pull_patches",
        }
    }
}

impl std::fmt::Display for Ask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request line.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub request: Ask,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `source_file`: read only this many first bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<usize>,
    /// `source_tree`: list every file below the directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recursive: Option<bool>,
    /// `pull_patches`: the pull request's number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<u64>,
}

impl Request {
    fn new(request: Ask) -> Request {
        Request {
            request,
            commit: None,
            path: None,
            max_bytes: None,
            recursive: None,
            number: None,
        }
    }
}

/// One answer line.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Answer {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<WriterGrant>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<SourceFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<SourceTree>,
    /// `evidence`: the job's bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Box<EvidenceBundle>>,
    /// `pull_patches`: one pull request's stored patches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches: Option<Vec<FilePatch>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<BrokerError>,
}

/// A file the broker read for the writer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceFile {
    pub path: String,
    pub commit: String,
    pub content: String,
    /// Only the first `max_bytes` of a longer file.
    #[serde(default)]
    pub truncated: bool,
}

/// A directory listing the broker read for the writer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceTree {
    pub commit: String,
    /// `""` for the root.
    pub directory: String,
    pub entries: Vec<TreeEntry>,
    pub truncated: bool,
}

impl SourceTree {
    pub fn listing(self) -> TreeListing {
        TreeListing {
            entries: self.entries,
            truncated: self.truncated,
        }
    }
}

/// A refusal: `kind` is the envelope error type the writer answers with
/// (the enum both ends share, never compared as text), `message` says what
/// to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct BrokerError {
    pub kind: ErrorKind,
    pub message: String,
}

impl BrokerError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> BrokerError {
        BrokerError {
            kind,
            message: message.into(),
        }
    }
}

/// An answer refusing a request.
pub fn refused(kind: ErrorKind, message: impl Into<String>) -> Answer {
    Answer {
        error: Some(BrokerError::new(kind, message)),
        ..Answer::default()
    }
}

/// The writer child's side: asks its job's broker over the inherited socket.
#[derive(Clone)]
pub struct BrokerClient {
    link: Arc<tokio::sync::Mutex<Link>>,
    /// The job's bundle, asked once.
    evidence: Arc<tokio::sync::OnceCell<Arc<EvidenceBundle>>>,
    /// A write published the bundle's marker rewrites (or found them applied).
    settled: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for BrokerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BrokerClient")
    }
}

struct Link {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

impl BrokerClient {
    /// Takes over descriptor `fd` (the writer child's [`BROKER_FD`](super::BROKER_FD)), which
    /// must be a socket; it is marked close-on-exec so nothing the writer
    /// starts inherits it. Call inside a tokio runtime.
    pub fn from_inherited(fd: RawFd) -> Result<BrokerClient, String> {
        // SAFETY: fstat on a descriptor number only reads its metadata.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut stat) } != 0
            || (stat.st_mode & libc::S_IFMT) != libc::S_IFSOCK
        {
            return Err(format!(
                "descriptor {fd} is not the job's broker socket; only the runner starts a writer bound to a broker"
            ));
        }
        // SAFETY: the descriptor was inherited for this purpose and nothing
        // else in this process owns it.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        unsafe {
            libc::fcntl(owned.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
        }
        let std = std::os::unix::net::UnixStream::from(owned);
        std.set_nonblocking(true)
            .map_err(|e| format!("cannot use the job's broker socket: {e}"))?;
        let stream = UnixStream::from_std(std)
            .map_err(|e| format!("cannot use the job's broker socket: {e}"))?;
        let (read, writer) = stream.into_split();
        Ok(BrokerClient {
            link: Arc::new(tokio::sync::Mutex::new(Link {
                reader: BufReader::new(read),
                writer,
            })),
            evidence: Arc::default(),
            settled: Arc::default(),
        })
    }

    /// The destination and token (asked once, at the writer's start).
    pub async fn binding(&self) -> Result<WriterGrant, BrokerError> {
        let answer = self.ask(Request::new(Ask::Binding)).await?;
        answer.binding.ok_or_else(|| {
            BrokerError::new(
                ErrorKind::InternalError,
                "the job's broker answered without a binding",
            )
        })
    }

    /// One source file at a commit of the evidence; with `max_bytes`, only
    /// its first bytes.
    pub async fn source_file(
        &self,
        commit: &str,
        path: &str,
        max_bytes: Option<usize>,
    ) -> Result<SourceFile, BrokerError> {
        let answer = self
            .ask(Request {
                commit: Some(commit.to_owned()),
                path: Some(path.to_owned()),
                max_bytes,
                ..Request::new(Ask::SourceFile)
            })
            .await?;
        answer.file.ok_or_else(|| {
            BrokerError::new(
                ErrorKind::InternalError,
                "the job's broker answered without the file",
            )
        })
    }

    /// One directory's listing at a commit of the evidence.
    pub async fn source_tree(
        &self,
        commit: &str,
        directory: &str,
        recursive: bool,
    ) -> Result<SourceTree, BrokerError> {
        let answer = self
            .ask(Request {
                commit: Some(commit.to_owned()),
                path: Some(directory.to_owned()),
                recursive: Some(recursive),
                ..Request::new(Ask::SourceTree)
            })
            .await?;
        answer.tree.ok_or_else(|| {
            BrokerError::new(
                ErrorKind::InternalError,
                "the job's broker answered without the listing",
            )
        })
    }

    /// The job's evidence bundle as the runner holds it (asked once, then
    /// kept): the only bundle the writer serves and checks commits against.
    pub async fn evidence(&self) -> Result<Arc<EvidenceBundle>, BrokerError> {
        self.evidence
            .get_or_try_init(|| async {
                let answer = self
                    .ask_bounded(Request::new(Ask::Evidence), MAX_EVIDENCE_ANSWER_BYTES)
                    .await?;
                let bundle = answer.evidence.ok_or_else(|| {
                    BrokerError::new(
                        ErrorKind::InternalError,
                        "the job's broker answered without the evidence",
                    )
                })?;
                Ok(Arc::new(*bundle))
            })
            .await
            .cloned()
    }

    /// The stored patches of pull request `number` of the bundle.
    pub async fn pull_patches(&self, number: u64) -> Result<Vec<FilePatch>, BrokerError> {
        let answer = self
            .ask_bounded(
                Request {
                    number: Some(number),
                    ..Request::new(Ask::PullPatches)
                },
                MAX_EVIDENCE_ANSWER_BYTES,
            )
            .await?;
        answer.patches.ok_or_else(|| {
            BrokerError::new(
                ErrorKind::InternalError,
                "the job's broker answered without the patches",
            )
        })
    }

    /// The marker rewrites a job write must still fold in: the broker's,
    /// until a write settled them ([`BrokerClient::settle_rewrites`]).
    pub async fn pending_rewrites(
        &self,
    ) -> Result<std::collections::BTreeMap<String, Vec<MarkerRewrite>>, BrokerError> {
        if self.settled.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(Default::default());
        }
        Ok(self.evidence().await?.marker_rewrites.clone())
    }

    /// A write published the pending rewrites, or found every one of them
    /// already applied: later writes of the job carry none.
    pub fn settle_rewrites(&self) {
        self.settled
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    async fn ask(&self, request: Request) -> Result<Answer, BrokerError> {
        self.ask_bounded(request, MAX_ANSWER_BYTES).await
    }

    async fn ask_bounded(&self, request: Request, max: u64) -> Result<Answer, BrokerError> {
        let gone = |e: std::io::Error| {
            BrokerError::new(
                ErrorKind::UpstreamError,
                format!(
                    "the job's broker cannot be reached ({e}); the job has ended or the daemon stopped"
                ),
            )
        };
        let mut line = serde_json::to_vec(&request)
            .map_err(|e| BrokerError::new(ErrorKind::InternalError, e.to_string()))?;
        let request = request.request;
        line.push(b'\n');
        // One exchange at a time: answers come back in request order.
        let mut link = self.link.lock().await;
        let exchange = async {
            link.writer.write_all(&line).await.map_err(gone)?;
            let mut answer = Vec::new();
            (&mut link.reader)
                .take(max + 1)
                .read_until(b'\n', &mut answer)
                .await
                .map_err(gone)?;
            if answer.len() as u64 > max {
                return Err(BrokerError::new(
                    ErrorKind::LimitExceeded,
                    format!("the job's broker answered more than {max} bytes"),
                ));
            }
            serde_json::from_slice::<Answer>(&answer).map_err(|_| {
                BrokerError::new(
                    ErrorKind::UpstreamError,
                    "the job's broker closed the connection without an answer; the job has ended or the daemon stopped",
                )
            })
        };
        let answer = tokio::time::timeout(ANSWER_TIMEOUT, exchange)
            .await
            .map_err(|_| {
                BrokerError::new(
                    ErrorKind::Timeout,
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
                ErrorKind::UpstreamError,
                "the job's broker answered neither a result nor an error",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_carry_only_what_they_hold() {
        let text = serde_json::to_string(&refused(ErrorKind::NotFound, "x is not a file")).unwrap();
        assert_eq!(
            text,
            r#"{"ok":false,"error":{"kind":"not_found","message":"x is not a file"}}"#
        );
    }

    #[test]
    fn a_request_names_what_it_asks_on_the_wire_and_nothing_else_is_read() {
        for ask in [
            Ask::Binding,
            Ask::SourceFile,
            Ask::SourceTree,
            Ask::Evidence,
            Ask::PullPatches,
        ] {
            let text = serde_json::to_string(&Request::new(ask)).unwrap();
            assert_eq!(text, format!(r#"{{"request":"{ask}"}}"#));
            let back: Request = serde_json::from_str(&text).unwrap();
            assert_eq!(back.request, ask);
        }
        let unknown = serde_json::from_str::<Request>(r#"{"request":"token"}"#)
            .unwrap_err()
            .to_string();
        assert!(
            unknown.contains("token") && unknown.contains("source_file"),
            "{unknown}"
        );
    }

    #[test]
    fn a_grant_prints_without_its_token() {
        let grant = WriterGrant {
            destination: WriterDestination {
                source: "octo/app".into(),
                wiki_repository: RepoName::parse("octo/app").unwrap(),
                remote: WriterRemote::Github {
                    git_url: "https://github.com".into(),
                },
            },
            token: Some(RedactedToken("ghs_secret_value".into())),
        };
        assert!(!format!("{grant:?}").contains("ghs_secret_value"));
        let wire = serde_json::to_value(&grant).unwrap();
        assert_eq!(wire["token"], "ghs_secret_value");
        assert_eq!(wire["destination"]["forge"], "github");
        let back: WriterGrant = serde_json::from_value(wire).unwrap();
        assert_eq!(back.destination, grant.destination);
    }
}
