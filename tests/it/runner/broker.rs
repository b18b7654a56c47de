//! The per-job broker (`src/runner/broker.rs`) for a GitHub source, with the
//! real `teammem mcp --wiki-writer` child bound to it and the fake GitHub
//! serving the source's files from a real git history: `get_source_file`
//! through the broker (a file at a commit of the range, and each refusal), a
//! writer started without the runner's descriptor getting nothing, and a
//! broker that answers nothing once its job is over.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use teammem::config::Config;
use teammem::forge::evidence::{
    BUNDLE_VERSION, CommitInfo, EvidenceBundle, JobScope, SourceInfo, write_bundle,
};
use teammem::forge::github::GitHubForge;
use teammem::runner::broker::{Broker, BrokerJob};
use teammem::runner::work_dir;
use teammem::runner::writer::{WriterClient, WriterLaunch};
use teammem::secrets::read_key_file;
use teammem::wiki::Secret;
use teammem::writer_contract::broker::WriterDestination;

use super::handler::BIN;
use crate::dispatch::config_text;
use crate::harness::fake_github::{FakeGitHub, GitRepo};

const WIKI_TOKEN: &str = "ghs_wiki_token_held_by_the_broker_for_this_test";
const JOB: i64 = 41;

/// `octo/app` on the fake GitHub: `origin`, `before` (a README), then
/// `after`, which adds a source file, a directory, a file over 64 KiB and one
/// that is not UTF-8.
struct Setup {
    _fake: FakeGitHub,
    dir: tempfile::TempDir,
    config_path: PathBuf,
    origin: String,
    before: String,
    after: String,
    broker: Option<Broker>,
    /// The writer child's end of the broker's socket pair, until it starts.
    child_end: std::sync::Mutex<Option<OwnedFd>>,
    evidence: PathBuf,
}

impl Setup {
    async fn new() -> Setup {
        let fake = FakeGitHub::start().await;
        let dir = tempfile::tempdir().unwrap();
        let git = GitRepo::init(&dir.path().join("app"));
        let origin = git.commit("ORIGIN.md", "origin");
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
                repository: teammem::ids::RepoName::parse("octo/app").unwrap(),
                forge: teammem::forge::evidence::ForgeKind::Github,
                default_branch: "main".into(),
            },
            job: JobScope {
                job_id: JOB,
                scope: teammem::ids::Scope::Range {
                    before: teammem::ids::Sha::parse(&before.clone()).unwrap(),
                    after: teammem::ids::Sha::parse(&after.clone()).unwrap(),
                },
            },
            commits: vec![CommitInfo {
                sha: teammem::ids::Sha::parse(&after).unwrap(),
                parents: vec![teammem::ids::Sha::parse(&before).unwrap()],
                author: "Test".into(),
                committed_at: "2026-11-30T00:00:00Z".into(),
                subject: "Add the answer".into(),
            }],
            commits_truncated: false,
            pull_requests: vec![],
            pull_requests_truncated: false,
            stale_facts: Vec::new(),
            marker_rewrites: Default::default(),
            direct_changes: Vec::new(),
            direct_changes_truncated: false,
            tip_is_newest: true,
        };
        let work = work_dir(&config.server.data_dir, JOB);
        let evidence = write_bundle(&work, &bundle).unwrap();
        let (broker, child_end) = Broker::start(BrokerJob {
            destination: WriterDestination::of(&source, Some(&gh.git_url)).unwrap(),
            source,
            bundle,
            patches: Default::default(),
            forges: teammem::forge::Forges::with_github(Some(forge)),
            wiki_token: Some(Secret::new(WIKI_TOKEN)),
        })
        .unwrap();
        Setup {
            _fake: fake,
            dir,
            config_path,
            origin,
            before,
            after,
            broker: Some(broker),
            child_end: std::sync::Mutex::new(Some(child_end)),
            evidence,
        }
    }

    /// The writer child bound to this job and its broker.
    async fn writer(&self) -> WriterClient {
        let broker = self
            .child_end
            .lock()
            .unwrap()
            .take()
            .expect("one writer per job");
        WriterClient::spawn(WriterLaunch {
            program: BIN.into(),
            config_path: self.config_path.clone(),
            source: "octo/app".into(),
            job_id: JOB,
            range: teammem::ids::Scope::parse(&format!("{}..{}", self.before, self.after)).unwrap(),
            evidence: self.evidence.clone(),
            broker: Some(broker),
            agent_listener: None,
            path: std::env::var_os("PATH"),
            log_filter: None,
        })
        .await
        .unwrap()
    }

    /// `teammem mcp --wiki-writer` started as an agent could: the runner's
    /// variables, but no descriptor from the runner. Its exit and stderr.
    fn writer_by_hand(&self, broker_fd: &str) -> (Option<i32>, String) {
        let out = std::process::Command::new(BIN)
            .args(["mcp", "--wiki-writer"])
            .env_clear()
            .env("TEAMMEM_CONFIG", &self.config_path)
            .env("TEAMMEM_WRITER_SOURCE", "octo/app")
            .env("TEAMMEM_WRITER_EVIDENCE", &self.evidence)
            .env("TEAMMEM_WRITER_BROKER_FD", broker_fd)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// A `get_source_file` call's success, result and `error.type: error.message`.
async fn call(client: &WriterClient, args: Value) -> (bool, Value, String) {
    call_tool(client, "get_source_file", args).await
}

/// A tool call's success, result and `error.type: error.message`.
async fn call_tool(client: &WriterClient, tool: &str, args: Value) -> (bool, Value, String) {
    let envelope = client.call(tool, args).await.unwrap();
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

    // `before`, the range's base, is readable (a change is read from both
    // sides); `origin`, further back, is outside the job's evidence.
    let (ok, file, error) = call(
        &client,
        json!({"repository": repo, "path": "README.md", "commit": s.before}),
    )
    .await;
    assert!(ok, "{error}");
    assert_eq!(file["commit"], s.before.as_str());
    let (ok, _, error) = call(
        &client,
        json!({"repository": repo, "path": "ORIGIN.md", "commit": s.origin}),
    )
    .await;
    assert!(!ok);
    assert!(
        error.starts_with("permission_denied: ")
            && error.contains("not one of this job's evidence commits or their parents"),
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
async fn github_listings_and_file_heads_come_through_the_broker_within_the_range() {
    let s = Setup::new().await;
    let client = s.writer().await;
    let repo = "octo/app";
    let paths = |listing: &Value| -> Vec<(String, String)> {
        listing["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["path"].as_str().unwrap().to_owned(),
                    e["type"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };

    let (ok, root, error) =
        call_tool(&client, "list_source_files", json!({"repository": repo})).await;
    assert!(ok, "{error}");
    assert_eq!(root["commit"], s.after.as_str());
    assert_eq!(root["truncated"], false);
    let listed = paths(&root);
    for (path, kind) in [
        ("CHANGES.md", "file"),
        ("README.md", "file"),
        ("big.txt", "file"),
        ("src", "directory"),
    ] {
        assert!(
            listed.contains(&(path.to_owned(), kind.to_owned())),
            "{path} {kind} in {listed:?}"
        );
    }
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(listed, sorted, "sorted by path");
    let (ok, src, error) = call_tool(
        &client,
        "list_source_files",
        json!({"repository": repo, "directory": "src", "recursive": true}),
    )
    .await;
    assert!(ok, "{error}");
    assert_eq!(
        paths(&src),
        vec![("src/lib.rs".to_owned(), "file".to_owned())]
    );
    // The git CLI agrees.
    let git_root = root_files_by_git(&s, &s.after);
    let files: Vec<&str> = listed
        .iter()
        .filter(|(_, k)| k == "file")
        .map(|(p, _)| p.as_str())
        .collect();
    assert_eq!(files, git_root);

    let (ok, _, error) = call_tool(
        &client,
        "list_source_files",
        json!({"repository": repo, "directory": "nope"}),
    )
    .await;
    assert!(!ok);
    assert_eq!(
        error,
        format!("not_found: nope is not a directory at {}", s.after)
    );
    let (ok, _, error) = call_tool(
        &client,
        "list_source_files",
        json!({"repository": repo, "commit": s.origin}),
    )
    .await;
    assert!(!ok);
    assert!(error.starts_with("permission_denied: "), "{error}");
    let (ok, _, error) = call_tool(
        &client,
        "list_source_files",
        json!({"repository": repo, "directory": "../x"}),
    )
    .await;
    assert!(!ok);
    assert!(error.starts_with("invalid_input: "), "{error}");

    // A head of a file larger than the whole-file limit.
    let (ok, head, error) = call(
        &client,
        json!({"repository": repo, "path": "big.txt", "max_bytes": 10}),
    )
    .await;
    assert!(ok, "{error}");
    assert_eq!(head["content"], "x".repeat(10));
    assert_eq!(head["truncated"], true);
    let (ok, head, error) = call(
        &client,
        json!({"repository": repo, "path": "src/lib.rs", "max_bytes": 4096}),
    )
    .await;
    assert!(ok, "{error}");
    assert_eq!(head["content"], "pub fn answer() -> u32 { 42 }\n");
    assert_eq!(head["truncated"], false);
    let (ok, _, error) = call(
        &client,
        json!({"repository": repo, "path": "latin1.txt", "max_bytes": 100}),
    )
    .await;
    assert!(!ok);
    assert!(error.contains("not UTF-8 text"), "{error}");
    let (ok, _, error) = call(
        &client,
        json!({"repository": repo, "path": "README.md", "max_bytes": 0}),
    )
    .await;
    assert!(!ok);
    assert!(error.starts_with("invalid_input: "), "{error}");
    client.close().await;
}

/// The files at the root of `commit`, by the git CLI.
fn root_files_by_git(s: &Setup, commit: &str) -> Vec<String> {
    let out = std::process::Command::new("git")
        .args(["ls-tree", commit])
        .current_dir(s.dir.path().join("app"))
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (meta, path) = l.split_once('\t')?;
            meta.contains(" blob ").then(|| path.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn the_broker_has_no_address_serves_only_the_writer_it_was_given_to_and_ends_with_its_job() {
    let mut s = Setup::new().await;
    // Nothing on the file system names the broker: the job's directory holds
    // the evidence and nothing to connect to.
    let names: Vec<String> = std::fs::read_dir(s.evidence.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["evidence.json"]);

    // A writer started without the runner's descriptor is refused before it
    // serves anything, whatever number it is told.
    let (code, stderr) = s.writer_by_hand("3");
    assert_ne!(code, Some(0));
    assert!(
        stderr.contains("descriptor 3 is not the job's broker socket"),
        "{stderr}"
    );
    let (code, stderr) = s.writer_by_hand("7");
    assert_ne!(code, Some(0));
    assert!(
        stderr.contains("TEAMMEM_WRITER_BROKER_FD must be 3"),
        "{stderr}"
    );
    assert!(!stderr.contains(WIKI_TOKEN));

    // The writer the runner started got the token at its start, and no
    // result carries it.
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
        assert!(!text.contains(WIKI_TOKEN));
    }

    // The job ends: nothing answers, not even its own writer.
    drop(s.broker.take());
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
    client.close().await;
    drop(s.dir);
}
