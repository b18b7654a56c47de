//! The per-job broker (`src/runner/broker.rs`) for a GitHub source, with the
//! real `teammem mcp --wiki-writer` child bound to it and the fake GitHub
//! serving the source's files from a real git history: `get_source_file`
//! through the broker (a file at a commit of the range, and each refusal), the
//! handle and peer checks on the raw socket, and a broker that answers nothing
//! once its job is over.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use teammem::config::Config;
use teammem::forge::github::GitHubForge;
use teammem::runner::broker::{Broker, BrokerJob, SOCKET_FILE};
use teammem::runner::evidence::{
    BUNDLE_VERSION, CommitInfo, EvidenceBundle, JobScope, SourceInfo, work_dir, write_bundle,
};
use teammem::runner::writer::{WriterClient, WriterLaunch};
use teammem::secrets::read_key_file;
use teammem::wiki::Secret;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::handler::BIN;
use crate::dispatch::config_text;
use crate::harness::fake_github::{FakeGitHub, GitRepo};

const WIKI_TOKEN: &str = "ghs_wiki_token_held_by_the_broker_for_this_test";
const JOB: i64 = 41;

/// `octo/app` on the fake GitHub: `before` (a README), then `after`, which adds
/// a source file, a directory, a file over 64 KiB and one that is not UTF-8.
struct Setup {
    _fake: FakeGitHub,
    dir: tempfile::TempDir,
    config_path: PathBuf,
    before: String,
    after: String,
    broker: Option<Broker>,
    evidence: PathBuf,
}

impl Setup {
    async fn new() -> Setup {
        let fake = FakeGitHub::start().await;
        let dir = tempfile::tempdir().unwrap();
        let git = GitRepo::init(&dir.path().join("app"));
        let before = git.commit("README.md", "root");
        std::fs::create_dir_all(git.dir.join("src")).unwrap();
        std::fs::write(
            git.dir.join("src/lib.rs"),
            "pub fn answer() -> u32 { 42 }\n",
        )
        .unwrap();
        std::fs::write(git.dir.join("big.txt"), "x".repeat(64 * 1024 + 1)).unwrap();
        std::fs::write(git.dir.join("latin1.txt"), b"caf\xe9\n").unwrap();
        let after = git.commit("CHANGES.md", "Add the answer");
        fake.add_repo("octo/app", &git, "private", true);

        let text = config_text(&fake, dir.path(), "");
        let config_path = dir.path().join("teammem.toml");
        std::fs::write(&config_path, &text).unwrap();
        let config = Config::parse(&text).unwrap();
        let gh = config.github.as_ref().unwrap();
        let key = read_key_file(match &gh.private_key {
            teammem::config::PrivateKey::File { path } => path,
            _ => unreachable!(),
        })
        .unwrap();
        let forge = Arc::new(GitHubForge::new(gh, &key).unwrap());
        let source = config.source("octo/app").unwrap().clone();

        let bundle = EvidenceBundle {
            version: BUNDLE_VERSION,
            source: SourceInfo {
                repository: "octo/app".into(),
                forge: "github".into(),
                default_branch: "main".into(),
            },
            job: JobScope::Range {
                job_id: JOB,
                before: before.clone(),
                after: after.clone(),
            },
            commits: vec![CommitInfo {
                sha: after.clone(),
                parents: vec![before.clone()],
                author: "Test".into(),
                committed_at: "2026-11-30T00:00:00Z".into(),
                subject: "Add the answer".into(),
            }],
            commits_truncated: false,
            pull_requests: vec![],
            pull_requests_truncated: false,
        };
        let work = work_dir(&config.server.data_dir, JOB);
        let evidence = write_bundle(&work, &bundle).unwrap();
        let broker = Broker::start(
            &work,
            BrokerJob {
                source,
                bundle,
                forge,
                wiki_token: Secret::new(WIKI_TOKEN),
                writer_program: BIN.into(),
            },
        )
        .unwrap();
        Setup {
            _fake: fake,
            dir,
            config_path,
            before,
            after,
            broker: Some(broker),
            evidence,
        }
    }

    fn broker(&self) -> &Broker {
        self.broker.as_ref().unwrap()
    }

    fn socket(&self) -> PathBuf {
        self.broker().access().socket.clone()
    }

    fn handle(&self) -> String {
        self.broker().access().handle.expose().to_owned()
    }

    /// The writer child bound to this job and its broker.
    async fn writer(&self) -> WriterClient {
        WriterClient::spawn(&WriterLaunch {
            program: BIN.into(),
            config_path: self.config_path.clone(),
            source: "octo/app".into(),
            job_id: JOB,
            range: format!("{}..{}", self.before, self.after),
            evidence: self.evidence.clone(),
            broker: Some(self.broker().access().clone()),
            path: std::env::var_os("PATH"),
            log_filter: None,
        })
        .await
        .unwrap()
    }
}

/// One request line on the raw socket; the answer line, parsed.
async fn ask(socket: &Path, request: &Value) -> Value {
    let mut stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    stream
        .write_all(format!("{request}\n").as_bytes())
        .await
        .unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).await.unwrap();
    serde_json::from_str(&line).unwrap()
}

/// A tool call's success, result and `error.type: error.message`.
async fn call(client: &WriterClient, args: Value) -> (bool, Value, String) {
    let envelope = client.call("get_source_file", args).await.unwrap();
    (
        envelope.success,
        envelope.result,
        format!("{}: {}", envelope.error_type, envelope.error_message),
    )
}

#[tokio::test]
async fn get_source_file_reads_github_sources_through_the_broker_within_the_range() {
    let s = Setup::new().await;
    let client = s.writer().await;
    let repo = "octo/app";

    let (ok, file, error) = call(
        &client,
        json!({"repository": repo, "path": "src/lib.rs", "commit": s.after}),
    )
    .await;
    assert!(ok, "{error}");
    assert_eq!(file["content"], "pub fn answer() -> u32 { 42 }\n");
    assert_eq!(file["commit"], s.after.as_str());
    // Without a commit: the newest of the range.
    let (ok, file, error) = call(&client, json!({"repository": repo, "path": "README.md"})).await;
    assert!(ok, "{error}");
    assert_eq!(file["content"], "root\n");

    // `before` is outside the range: it was reconciled by an earlier job.
    let (ok, _, error) = call(
        &client,
        json!({"repository": repo, "path": "README.md", "commit": s.before}),
    )
    .await;
    assert!(!ok);
    assert!(
        error.starts_with("permission_denied: ")
            && error.contains("not one of this job's evidence commits"),
        "{error}"
    );
    let (ok, _, error) = call(&client, json!({"repository": repo, "path": "src"})).await;
    assert!(!ok);
    assert_eq!(
        error,
        format!("not_found: src is not a file at {}", s.after)
    );
    let (ok, _, error) = call(&client, json!({"repository": repo, "path": "nope.rs"})).await;
    assert!(!ok);
    assert_eq!(
        error,
        format!("not_found: nope.rs is not a file at {}", s.after)
    );
    let (ok, _, error) = call(&client, json!({"repository": repo, "path": "big.txt"})).await;
    assert!(!ok);
    assert_eq!(
        error,
        format!(
            "limit_exceeded: big.txt at {} is 65537 bytes, more than the 65536-byte limit",
            s.after
        )
    );
    let (ok, _, error) = call(&client, json!({"repository": repo, "path": "latin1.txt"})).await;
    assert!(!ok);
    assert_eq!(
        error,
        format!(
            "limit_exceeded: latin1.txt at {} is not UTF-8 text",
            s.after
        )
    );
    let (ok, _, error) = call(
        &client,
        json!({"repository": repo, "path": "src/../README.md"}),
    )
    .await;
    assert!(!ok);
    assert!(error.starts_with("invalid_input: "), "{error}");
    client.close().await;
}

#[tokio::test]
async fn the_broker_refuses_a_wrong_handle_keeps_the_token_from_other_processes_and_ends_with_its_job()
 {
    let mut s = Setup::new().await;
    let socket = s.socket();
    assert_eq!(socket, s.evidence.with_file_name(SOCKET_FILE));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&socket), 0o600);
    assert_eq!(mode(socket.parent().unwrap()), 0o700);
    assert_eq!(s.handle().len(), 64);

    // A wrong handle (same length, one digit off) is refused and learns nothing.
    let mut wrong = s.handle().into_bytes();
    wrong[63] = if wrong[63] == b'0' { b'1' } else { b'0' };
    let wrong = String::from_utf8(wrong).unwrap();
    for request in ["wiki_token", "source_file"] {
        let answer = ask(
            &socket,
            &json!({"handle": wrong, "request": request, "commit": s.after, "path": "README.md"}),
        )
        .await;
        assert_eq!(answer["ok"], false, "{answer}");
        assert_eq!(answer["error"]["kind"], "permission_denied", "{answer}");
        assert!(answer.get("file").is_none() && answer.get("token").is_none());
    }
    // The right handle from a process that is not the writer (this test): a
    // source file of the range, but never the wiki token.
    let answer = ask(
        &socket,
        &json!({"handle": s.handle(), "request": "wiki_token"}),
    )
    .await;
    assert_eq!(answer["error"]["kind"], "permission_denied", "{answer}");
    assert!(!answer.to_string().contains(WIKI_TOKEN));
    let answer = ask(
        &socket,
        &json!({"handle": s.handle(), "request": "source_file", "commit": s.after, "path": "README.md"}),
    )
    .await;
    assert_eq!(answer["file"]["content"], "root\n", "{answer}");

    // The writer got the token at its start (it reads nothing else from the
    // broker for this call), and no result carries the token or the handle.
    let client = s.writer().await;
    let envelope = client
        .call("get_job_evidence", json!({"repository": "octo/app"}))
        .await
        .unwrap();
    assert!(envelope.success);
    let (ok, file, _) = call(
        &client,
        json!({"repository": "octo/app", "path": "src/lib.rs"}),
    )
    .await;
    assert!(ok);
    for text in [envelope.result.to_string(), file.to_string()] {
        assert!(!text.contains(WIKI_TOKEN) && !text.contains(&s.handle()));
    }

    // The job ends: the socket is gone and nothing answers, not even the
    // writer that knows the handle.
    let handle = s.handle();
    drop(s.broker.take());
    assert!(!socket.exists(), "the socket outlived its job");
    assert!(tokio::net::UnixStream::connect(&socket).await.is_err());
    let (ok, _, error) = call(
        &client,
        json!({"repository": "octo/app", "path": "src/lib.rs"}),
    )
    .await;
    assert!(!ok);
    assert!(
        error.starts_with("upstream_error: ") && error.contains("the job has ended"),
        "{error}"
    );
    assert!(!error.contains(&handle));
    client.close().await;
    drop(s.dir);
}
