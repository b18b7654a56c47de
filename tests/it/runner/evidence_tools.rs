//! The writer's evidence tools through the real `teammem mcp --wiki-writer`
//! child: only the bound job's bundle and commits are reachable.

use serde_json::{Value, json};
use teammem::forge::evidence::{JobScope, write_bundle};
use teammem::forge::local::range_bundle as local_bundle;
use teammem::runner::broker::{Broker, BrokerJob};
use teammem::runner::work_dir;
use teammem::runner::writer::{WriterClient, WriterLaunch};
use teammem::writer_contract::broker::WriterDestination;

use super::handler::{BIN, Setup};

/// The writer child bound to job 5 through a broker holding its bundle (the
/// writer's only source of evidence); keep the broker while the writer runs.
async fn writer(s: &Setup) -> (Broker, WriterClient) {
    let scope = JobScope {
        job_id: 5,
        scope: teammem::ids::Scope::Range {
            before: teammem::ids::Sha::parse(&s.source.merge_12.clone()).unwrap(),
            after: teammem::ids::Sha::parse(&s.source.head.clone()).unwrap(),
        },
    };
    let bundle = local_bundle::collect(
        &s.source.dir,
        &teammem::ids::RepoName::parse("demo/app").unwrap(),
        &scope,
    )
    .unwrap();
    let path = write_bundle(&work_dir(&s.tmp.path().join("data"), 5), &bundle).unwrap();
    let source = s.config.source("demo/app").unwrap().clone();
    let (broker, broker_end) = Broker::start(BrokerJob {
        destination: WriterDestination::of(&source, None).unwrap(),
        source,
        bundle,
        patches: Default::default(),
        forges: Default::default(),
        wiki_token: None,
    })
    .unwrap();
    let client = WriterClient::spawn(WriterLaunch {
        program: BIN.into(),
        config_path: s.config_path.clone(),
        source: "demo/app".into(),
        job_id: 5,
        range: scope.scope.clone(),
        evidence: path,
        broker: Some(broker_end),
        agent_listener: None,
        path: std::env::var_os("PATH"),
        log_filter: None,
    })
    .await
    .unwrap();
    (broker, client)
}

async fn call(client: &WriterClient, tool: &str, args: Value) -> (bool, Value, String) {
    let envelope = client.call(tool, args).await.unwrap();
    (envelope.success, envelope.result, envelope.error_type)
}

#[tokio::test]
async fn evidence_tools_serve_only_the_bound_job() {
    let s = Setup::new();
    let (_broker, client) = writer(&s).await;

    let (ok, bundle, _) = call(
        &client,
        "get_job_evidence",
        json!({"repository": "demo/app"}),
    )
    .await;
    assert!(ok);
    let numbers: Vec<u64> = bundle["pull_requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["number"].as_u64().unwrap())
        .collect();
    // The range starts after PR #12's merge: only #13 is authorized.
    assert_eq!(numbers, vec![13]);
    assert_eq!(bundle["wiki_repository"], "demo/app");

    let (ok, files, _) = call(
        &client,
        "list_pull_request_files",
        json!({"repository": "demo/app", "number": 13, "per_page": 1, "page": 2}),
    )
    .await;
    assert!(ok);
    assert_eq!(files["total"], 2);
    assert_eq!(files["has_more"], false);
    assert_eq!(files["files"][0]["path"], "docs/guide.md");
    assert!(
        files["files"][0]["patch"]
            .as_str()
            .unwrap()
            .contains("+Step one.")
    );

    let (ok, _, kind) = call(
        &client,
        "list_pull_request_files",
        json!({"repository": "demo/app", "number": 12}),
    )
    .await;
    assert!(!ok);
    assert_eq!(kind, "not_found");

    let (ok, file, _) = call(
        &client,
        "get_source_file",
        json!({"repository": "demo/app", "path": "docs/guide.md", "commit": s.source.squash_13}),
    )
    .await;
    assert!(ok);
    assert_eq!(file["content"], "# Guide\n\nStep one.\n");
    let (ok, file, _) = call(
        &client,
        "get_source_file",
        json!({"repository": "demo/app", "path": "Makefile"}),
    )
    .await;
    assert!(ok, "{file}");
    assert_eq!(file["commit"], s.source.head.as_str());

    // The range's base (PR #12's merge is its `before`, the first range
    // commit's parent) is readable, so a change can be read from both sides;
    // a commit further back is refused.
    let (ok, file, _) = call(
        &client,
        "get_source_file",
        json!({"repository": "demo/app", "path": "src/search.rs", "commit": s.source.merge_12}),
    )
    .await;
    assert!(ok, "{file}");
    assert_eq!(file["content"], "fn search() {}\nfn index() {}\n");
    let (ok, _, kind) = call(
        &client,
        "get_source_file",
        json!({"repository": "demo/app", "path": "README.md", "commit": s.source.base}),
    )
    .await;
    assert!(!ok);
    assert_eq!(kind, "permission_denied");
    let (ok, _, kind) = call(
        &client,
        "get_source_file",
        json!({"repository": "demo/app", "path": "nope.txt"}),
    )
    .await;
    assert!(!ok);
    assert_eq!(kind, "not_found");
    let (ok, _, kind) = call(
        &client,
        "get_job_evidence",
        json!({"repository": "demo/other"}),
    )
    .await;
    assert!(!ok);
    assert_eq!(kind, "permission_denied");

    // Heads: the first bytes of a file, whatever its size.
    let (ok, head, _) = call(
        &client,
        "get_source_file",
        json!({"repository": "demo/app", "path": "docs/guide.md", "max_bytes": 7}),
    )
    .await;
    assert!(ok, "{head}");
    assert_eq!(head["content"], "# Guide");
    assert_eq!(head["truncated"], true);
    let (ok, _, kind) = call(
        &client,
        "get_source_file",
        json!({"repository": "demo/app", "path": "README.md", "max_bytes": 70000}),
    )
    .await;
    assert!(!ok);
    assert_eq!(kind, "invalid_input");

    // Listings at the range's newest commit, as the git CLI has them.
    let entries = |listing: &Value| -> Vec<String> {
        listing["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                format!(
                    "{} {}",
                    e["type"].as_str().unwrap(),
                    e["path"].as_str().unwrap()
                )
            })
            .collect()
    };
    let (ok, root, _) = call(
        &client,
        "list_source_files",
        json!({"repository": "demo/app"}),
    )
    .await;
    assert!(ok, "{root}");
    assert_eq!(root["commit"], s.source.head.as_str());
    let by_git: Vec<String> = crate::harness::git::git(&s.source.dir, &["ls-tree", &s.source.head])
        .lines()
        .map(|line| {
            let (meta, path) = line.split_once('\t').unwrap();
            let kind = if meta.contains(" tree ") {
                "directory"
            } else {
                "file"
            };
            format!("{kind} {path}")
        })
        .collect();
    assert_eq!(entries(&root), by_git);
    let (ok, all, _) = call(
        &client,
        "list_source_files",
        json!({"repository": "demo/app", "directory": "/", "recursive": true}),
    )
    .await;
    assert!(ok, "{all}");
    let by_git: Vec<String> = crate::harness::git::git(
        &s.source.dir,
        &["ls-tree", "-r", "--name-only", &s.source.head],
    )
    .lines()
    .map(|path| format!("file {path}"))
    .collect();
    assert_eq!(entries(&all), by_git);
    assert_eq!(all["truncated"], false);
    let (ok, docs, _) = call(
        &client,
        "list_source_files",
        json!({"repository": "demo/app", "directory": "docs", "commit": s.source.squash_13}),
    )
    .await;
    assert!(ok, "{docs}");
    assert_eq!(entries(&docs), vec!["file docs/guide.md"]);
    for (args, want) in [
        (
            json!({"repository": "demo/app", "directory": "nope"}),
            "not_found",
        ),
        (
            json!({"repository": "demo/app", "directory": "README.md"}),
            "not_found",
        ),
        (
            json!({"repository": "demo/app", "directory": "../.."}),
            "invalid_input",
        ),
        (
            json!({"repository": "demo/app", "commit": s.source.base}),
            "permission_denied",
        ),
    ] {
        let (ok, _, kind) = call(&client, "list_source_files", args.clone()).await;
        assert!(!ok, "{args}");
        assert_eq!(kind, want, "{args}");
    }
    client.close().await;
}

#[tokio::test]
async fn file_heads_are_read_many_per_call_each_path_on_its_own() {
    let s = Setup::new();
    let (_broker, client) = writer(&s).await;
    let show = |path: &str| {
        crate::harness::git::git(
            &s.source.dir,
            &["show", &format!("{}:{path}", s.source.head)],
        )
    };

    // Every path answered in order: heads as git has them, a missing file
    // and an unclean path each an error of their own.
    let (ok, heads, _) = call(
        &client,
        "get_source_file_heads",
        json!({"repository": "demo/app", "paths": ["docs/guide.md", "nope.txt", "Makefile", "../x"], "max_bytes": 7}),
    )
    .await;
    assert!(ok, "{heads}");
    assert_eq!(heads["commit"], s.source.head.as_str());
    let files = heads["files"].as_array().unwrap();
    assert_eq!(files.len(), 4);
    assert_eq!(files[0]["path"], "docs/guide.md");
    assert_eq!(files[0]["content"], &show("docs/guide.md")[..7]);
    assert_eq!(files[0]["truncated"], true);
    assert_eq!(files[1]["path"], "nope.txt");
    assert_eq!(files[1]["error"]["type"], "not_found");
    assert!(files[1].get("content").is_none());
    let makefile = show("Makefile");
    assert_eq!(files[2]["content"], &makefile[..makefile.len().min(7)]);
    assert_eq!(files[3]["error"]["type"], "invalid_input");
    let (ok, whole, _) = call(
        &client,
        "get_source_file_heads",
        json!({"repository": "demo/app", "paths": ["docs/guide.md"], "max_bytes": 8192, "commit": s.source.squash_13}),
    )
    .await;
    assert!(ok, "{whole}");
    assert_eq!(whole["files"][0]["content"], "# Guide\n\nStep one.\n");
    assert_eq!(whole["files"][0]["truncated"], false);

    // Bounds and authorization refuse the whole call, naming what was wrong.
    let many: Vec<String> = (0..51).map(|i| format!("f{i}.txt")).collect();
    let seventeen = vec!["README.md"; 17];
    for (args, want, says) in [
        (
            json!({"repository": "demo/app", "paths": many, "max_bytes": 10}),
            "limit_exceeded",
            "1 to 50",
        ),
        (
            json!({"repository": "demo/app", "paths": [], "max_bytes": 10}),
            "limit_exceeded",
            "1 to 50",
        ),
        (
            json!({"repository": "demo/app", "paths": seventeen, "max_bytes": 8192}),
            "limit_exceeded",
            "131072-byte limit",
        ),
        (
            json!({"repository": "demo/app", "paths": ["README.md"], "max_bytes": 8193}),
            "invalid_input",
            "between 1 and 8192",
        ),
        (
            json!({"repository": "demo/app", "paths": ["README.md"], "max_bytes": 10, "commit": s.source.base}),
            "permission_denied",
            "not one of this job's evidence commits or their parents",
        ),
    ] {
        let envelope = client
            .call("get_source_file_heads", args.clone())
            .await
            .unwrap();
        assert!(!envelope.success, "{args}");
        assert_eq!(envelope.error_type, want, "{args}");
        let text = &envelope.error_message;
        assert!(text.contains(says), "{args}: {text}");
    }
    client.close().await;
}

#[tokio::test]
async fn github_patches_are_served_from_the_job_and_source_files_only_through_a_broker() {
    use teammem::forge::evidence::{
        BUNDLE_VERSION, ChangedFile, EvidenceBundle, FilePatch, FileStatus, PatchSet, PullRequest,
        SourceInfo, write_patches,
    };
    let tmp = tempfile::tempdir().unwrap();
    let config_path = tmp.path().join("teammem.toml");
    std::fs::write(
        &config_path,
        format!(
            "[server]\ndata_dir = \"{root}/data\"\n\n[github]\napi_url = \"http://127.0.0.1:9\"\ngit_url = \"http://127.0.0.1:9\"\napp_id = 1\nprivate_key = {{ file = \"{root}/app.pem\" }}\n\n[[sources]]\nrepository = \"octo/app\"\nwebhook_secret_env = \"TEAMMEM_SECRET_OCTO\"\n",
            root = tmp.path().display(),
        ),
    )
    .unwrap();
    let merge = "c".repeat(40);
    let file = |path: &str| ChangedFile {
        path: path.into(),
        status: FileStatus::Modified,
        additions: 1,
        deletions: 1,
        previous_path: None,
    };
    let bundle = EvidenceBundle {
        version: BUNDLE_VERSION,
        source: SourceInfo {
            repository: teammem::ids::RepoName::parse("octo/app").unwrap(),
            forge: teammem::forge::evidence::ForgeKind::Github,
            default_branch: "main".into(),
        },
        job: JobScope {
            job_id: 9,
            scope: teammem::ids::Scope::PullRequest {
                number: teammem::ids::PullNumber::new(7).unwrap(),
                merge_sha: teammem::ids::Sha::parse(&merge.clone()).unwrap(),
            },
        },
        commits: vec![],
        commits_truncated: false,
        pull_requests: vec![PullRequest {
            number: teammem::ids::PullNumber::new(7).unwrap(),
            title: "Seven".into(),
            body: String::new(),
            body_truncated: false,
            author: "alice".into(),
            labels: vec![],
            merged_at: "2026-11-30T00:00:00Z".into(),
            merge_sha: teammem::ids::Sha::parse(&merge).unwrap(),
            files: vec![file("logo.png"), file("src/a.rs")],
            files_truncated: false,
            arrived_through: None,
        }],
        pull_requests_truncated: false,
        stale_facts: Vec::new(),
        marker_rewrites: Default::default(),
        direct_changes: Vec::new(),
        direct_changes_truncated: false,
        tip_is_newest: true,
    };
    let dir = work_dir(&tmp.path().join("data"), 9);
    let path = write_bundle(&dir, &bundle).unwrap();
    let mut patches = PatchSet::default();
    patches.pulls.insert(
        teammem::ids::PullNumber::new(7).unwrap(),
        vec![
            FilePatch {
                path: "logo.png".into(),
                patch: None,
                patch_truncated: false,
            },
            FilePatch {
                path: "src/a.rs".into(),
                patch: Some("@@ -1 +1 @@\n-old\n+new\n".into()),
                patch_truncated: false,
            },
        ],
    );
    // The files on disk are what an agent could write; the writer must serve
    // the broker's copies instead.
    write_patches(&dir, &PatchSet::default()).unwrap();
    let launch = |broker| WriterLaunch {
        program: BIN.into(),
        config_path: config_path.clone(),
        source: "octo/app".into(),
        job_id: 9,
        range: bundle.job.scope.clone(),
        evidence: path.clone(),
        broker,
        agent_listener: None,
        path: std::env::var_os("PATH"),
        log_filter: Some("warn".into()),
    };
    // A writer started by hand, without the runner's broker, serves no
    // evidence at all, whatever the files on disk say.
    let by_hand = WriterClient::spawn(launch(None)).await.unwrap();
    for (tool, args) in [
        ("get_job_evidence", json!({"repository": "octo/app"})),
        (
            "list_pull_request_files",
            json!({"repository": "octo/app", "number": 7}),
        ),
    ] {
        let (ok, _, kind) = call(&by_hand, tool, args).await;
        assert!(!ok, "{tool}");
        assert_eq!(kind, "configuration_error", "{tool}");
    }
    by_hand.close().await;

    let config = teammem::config::Config::load(&config_path).unwrap();
    let source = config.source("octo/app").unwrap().clone();
    let (_broker, broker_end) = Broker::start(BrokerJob {
        destination: WriterDestination::of(&source, Some("http://127.0.0.1:9")).unwrap(),
        source,
        bundle: bundle.clone(),
        patches,
        forges: Default::default(),
        wiki_token: None,
    })
    .unwrap();
    let client = WriterClient::spawn(launch(Some(broker_end))).await.unwrap();

    let (ok, page, _) = call(
        &client,
        "list_pull_request_files",
        json!({"repository": "octo/app", "number": 7}),
    )
    .await;
    assert!(ok, "{page}");
    assert_eq!(page["total"], 2);
    assert_eq!(page["files"][0]["path"], "logo.png");
    assert!(page["files"][0]["patch"].is_null());
    assert_eq!(page["files"][1]["patch"], "@@ -1 +1 @@\n-old\n+new\n");
    let (ok, _, kind) = call(
        &client,
        "list_pull_request_files",
        json!({"repository": "octo/app", "number": 8}),
    )
    .await;
    assert!(!ok);
    assert_eq!(kind, "not_found");
    let (ok, _, kind) = call(
        &client,
        "get_source_file",
        json!({"repository": "octo/app", "path": "src/a.rs", "commit": merge}),
    )
    .await;
    // This broker holds no GitHub client, so it reads no file (the positive
    // path is in broker.rs).
    assert!(!ok);
    assert_eq!(kind, "invalid_input");
    client.close().await;
}

/// A broker for a GitHub job on `repository` over `before..after`, served
/// with the daemon's one `forge`, and a client on the writer's end of it.
fn github_job(
    config: &teammem::config::Config,
    forge: &std::sync::Arc<teammem::forge::github::GitHubForge>,
    repository: &str,
    (before, after): (&str, &str),
    job_id: i64,
) -> (
    teammem::runner::broker::Broker,
    teammem::writer_contract::broker::BrokerClient,
) {
    use std::os::fd::IntoRawFd;
    use teammem::forge::evidence::{BUNDLE_VERSION, CommitInfo, EvidenceBundle, SourceInfo};
    use teammem::runner::broker::{Broker, BrokerJob};
    use teammem::writer_contract::broker::{BrokerClient, WriterDestination};
    let source = config.source(repository).unwrap().clone();
    let git_url = &config.github.as_ref().unwrap().git_url;
    let bundle = EvidenceBundle {
        version: BUNDLE_VERSION,
        source: SourceInfo {
            repository: teammem::ids::RepoName::parse(repository).unwrap(),
            forge: teammem::forge::evidence::ForgeKind::Github,
            default_branch: "main".into(),
        },
        job: JobScope {
            job_id,
            scope: teammem::ids::Scope::Range {
                before: teammem::ids::Sha::parse(before).unwrap(),
                after: teammem::ids::Sha::parse(after).unwrap(),
            },
        },
        commits: vec![CommitInfo {
            sha: teammem::ids::Sha::parse(after).unwrap(),
            parents: vec![teammem::ids::Sha::parse(before).unwrap()],
            author: "Test".into(),
            committed_at: "2026-11-30T00:00:00Z".into(),
            subject: "work".into(),
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
    let (broker, child_end) = Broker::start(BrokerJob {
        destination: WriterDestination::of(&source, Some(git_url)).unwrap(),
        source,
        bundle,
        patches: Default::default(),
        forges: teammem::forge::Forges::with_github(Some(forge.clone())),
        wiki_token: None,
    })
    .unwrap();
    let client = BrokerClient::from_inherited(child_end.into_raw_fd()).unwrap();
    (broker, client)
}

/// The contents-API requests the fake GitHub saw for `path` of `repository`.
fn contents_reads(
    fake: &crate::harness::fake_github::FakeGitHub,
    repository: &str,
    path: &str,
) -> usize {
    let want = format!("GET /repos/{repository}/contents/{path}");
    fake.requests().iter().filter(|r| **r == want).count()
}

#[tokio::test]
async fn github_file_heads_are_read_once_per_blob_in_a_repository_and_failures_are_asked_again() {
    use crate::dispatch::config_text;
    use crate::harness::fake_github::{FakeGitHub, Fault, GitRepo};
    let fake = FakeGitHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let write = |git: &GitRepo, path: &str, text: &str| {
        std::fs::create_dir_all(git.dir.join("src")).unwrap();
        std::fs::write(git.dir.join(path), text).unwrap();
    };
    // octo/app: three files, then a commit that changes only src/b.rs.
    let app = GitRepo::init(&dir.path().join("app"));
    let root = app.commit("README.md", "root");
    write(&app, "src/a.rs", "//! The answer.\n");
    write(&app, "src/b.rs", "//! Version one.\n");
    write(&app, "src/c.rs", "//! Third.\n");
    let first = app.commit("CHANGES.md", "three files");
    write(&app, "src/b.rs", "//! Version two.\n");
    let second = app.commit("CHANGES.md", "b changes");
    fake.add_repo("octo/app", &app, "private", true);
    // octo/oidc holds the very same blobs under the same paths.
    let other = GitRepo::init(&dir.path().join("other"));
    let other_root = other.commit("README.md", "root");
    write(&other, "src/a.rs", "//! The answer.\n");
    write(&other, "src/b.rs", "//! Version one.\n");
    let other_tip = other.commit("README.md", "copy");
    fake.add_repo("octo/oidc", &other, "private", true);
    assert_eq!(
        app.git(&["rev-parse", &format!("{first}:src/a.rs")]),
        other.git(&["rev-parse", "HEAD:src/a.rs"]),
        "the same blob in both repositories"
    );

    let text = config_text(&fake, dir.path(), "");
    let config = teammem::config::Config::parse(&text).unwrap();
    let gh = config.github.as_ref().unwrap();
    let key = teammem::secrets::read_key_file(match &gh.private_key {
        teammem::config::PrivateKey::File { path } => path,
        _ => unreachable!(),
    })
    .unwrap();
    let forge = std::sync::Arc::new(teammem::forge::github::GitHubForge::new(gh, &key).unwrap());
    let files = ["src/a.rs", "src/b.rs", "src/c.rs"];
    let reads = |repository: &str| -> Vec<usize> {
        files
            .iter()
            .map(|f| contents_reads(&fake, repository, f))
            .collect()
    };

    // Job 1 lists src/ and reads each file's head: one read each.
    let (broker, client) = github_job(&config, &forge, "octo/app", (&root, &first), 1);
    let listing = client.source_tree(&first, "src", true).await.unwrap();
    assert_eq!(listing.entries.len(), 3);
    for f in files {
        client.source_file(&first, f, Some(4096)).await.unwrap();
    }
    let again = client
        .source_file(&first, "src/b.rs", Some(4096))
        .await
        .unwrap();
    assert_eq!(again.content, "//! Version one.\n");
    assert_eq!(reads("octo/app"), [1, 1, 1]);
    // A path no listing named is read, then known from that answer's sha.
    for _ in 0..2 {
        let readme = client
            .source_file(&first, "README.md", Some(4096))
            .await
            .unwrap();
        assert_eq!(readme.content, "root\n");
    }
    assert_eq!(contents_reads(&fake, "octo/app", "README.md"), 1);
    // A head of another size is another read.
    let short = client
        .source_file(&first, "src/a.rs", Some(4))
        .await
        .unwrap();
    assert_eq!((short.content.as_str(), short.truncated), ("//! ", true));
    assert_eq!(reads("octo/app"), [2, 1, 1]);
    drop(broker);

    // Job 2, at the next commit: only the changed file is read, and its
    // answer is the new text.
    let (broker, client) = github_job(&config, &forge, "octo/app", (&first, &second), 2);
    client.source_tree(&second, "src", true).await.unwrap();
    let mut heads = Vec::new();
    for f in files {
        heads.push(
            client
                .source_file(&second, f, Some(4096))
                .await
                .unwrap()
                .content,
        );
    }
    assert_eq!(
        heads,
        ["//! The answer.\n", "//! Version two.\n", "//! Third.\n"]
    );
    assert_eq!(reads("octo/app"), [2, 2, 1]);
    drop(broker);

    // Another repository with the same blobs is read from GitHub, not from
    // what octo/app's jobs read; a 5xx is not remembered.
    let (_broker, client) = github_job(&config, &forge, "octo/oidc", (&other_root, &other_tip), 3);
    client.source_tree(&other_tip, "src", true).await.unwrap();
    let a = client
        .source_file(&other_tip, "src/a.rs", Some(4096))
        .await
        .unwrap();
    assert_eq!(a.content, "//! The answer.\n");
    fake.inject_exact("/repos/octo/oidc/contents/src/b.rs", Fault::Status(502));
    let failed = client
        .source_file(&other_tip, "src/b.rs", Some(4096))
        .await
        .unwrap_err();
    assert_eq!(
        failed.kind,
        teammem::wiki::ErrorKind::UpstreamError,
        "{failed:?}"
    );
    let b = client
        .source_file(&other_tip, "src/b.rs", Some(4096))
        .await
        .unwrap();
    assert_eq!(b.content, "//! Version one.\n");
    let b = client
        .source_file(&other_tip, "src/b.rs", Some(4096))
        .await
        .unwrap();
    assert_eq!(b.content, "//! Version one.\n");
    assert_eq!(reads("octo/oidc"), [1, 2, 0]);
    assert_eq!(reads("octo/app"), [2, 2, 1]);
}
