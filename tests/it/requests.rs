//! `POST /v1/requests` over real HTTP against the in-process daemon: a local
//! source made with the git CLI (merge and squash commits naming PRs) and a
//! GitHub source behind the stateful fake (PR payloads, the token owner and the
//! collaborator role). Every answer code, both kinds of bearer token, and
//! `teammem request --wait` end to end. Refusals leave the queue as it was.

use std::path::Path;

use serde_json::{Value, json};
use teammem::config::Config;
use teammem::queue::{JobFilter, JobState};

use crate::harness::fake_github::{FakeGitHub, FakePull, Fault, GitRepo};
use crate::harness::inproc::{self, Running};

/// A local source `demo/app` whose `main` has PR #7 (merge commit) and PR #8
/// (squash), PR #9 merged only into `release`; `demo/other` beside it.
pub struct Local {
    pub dir: tempfile::TempDir,
    pub config: Config,
    pub merge_7: String,
    pub squash_8: String,
}

pub fn local_sources(dir: &Path) -> (String, String, String) {
    let git = GitRepo::init(&dir.join("app"));
    git.commit("README.md", "Initial commit");
    git.git(&["checkout", "-q", "-b", "feature"]);
    git.commit("feature.txt", "Add the feature");
    git.git(&["checkout", "-q", "main"]);
    git.git(&[
        "merge",
        "-q",
        "--no-ff",
        "feature",
        "-m",
        "Merge pull request #7 from demo/feature",
    ]);
    let merge_7 = git.head();
    let squash_8 = git.commit("notes.txt", "Document the notes (#8)");
    git.git(&["checkout", "-q", "-b", "release"]);
    git.commit("release.txt", "Merge pull request #9 from demo/hotfix");
    git.git(&["checkout", "-q", "main"]);
    let other = GitRepo::init(&dir.join("other"));
    other.commit("README.md", "Initial commit");
    for wiki in ["app.wiki.git", "other.wiki.git"] {
        crate::harness::git::git(dir, &["init", "-q", "--bare", wiki]);
    }
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
data_dir = "{root}/data"
public_url = "https://teammem.example.com"

[api]
allowed_origins = ["https://agents.example.com"]

[[sources]]
repository = "demo/app"
local_path = "{root}/app"
local_wiki_path = "{root}/app.wiki.git"
webhook_secret_env = "TEAMMEM_TEST_UNSET_SECRET"

[[sources]]
repository = "demo/other"
local_path = "{root}/other"
local_wiki_path = "{root}/other.wiki.git"
webhook_secret_env = "TEAMMEM_TEST_UNSET_SECRET"
"#,
        root = dir.display()
    );
    (text, merge_7, squash_8)
}

impl Local {
    pub fn new() -> Local {
        let dir = tempfile::tempdir().unwrap();
        let (text, merge_7, squash_8) = local_sources(dir.path());
        Local {
            config: Config::parse(&text).unwrap(),
            dir,
            merge_7,
            squash_8,
        }
    }
}

/// Creates an API token in the daemon's database.
pub async fn token(config: &Config, name: &str, repositories: &[&str]) -> String {
    let pool = teammem::db::open(&config.server.data_dir).await.unwrap();
    let repositories: Vec<String> = repositories.iter().map(|r| r.to_string()).collect();
    teammem::tokens::create(&pool.clone().into(), name, &repositories)
        .await
        .unwrap()
        .expose()
        .to_string()
}

pub async fn post(daemon: &Running, token: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(daemon.url("/v1/requests"))
        .json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let mut body: Value = response.json().await.unwrap();
    if let Some(r) = retry_after {
        body["retry_after_header"] = json!(r);
    }
    (status, body)
}

async fn all_jobs(daemon: &Running) -> Vec<(i64, String, Option<i64>, Option<String>)> {
    daemon
        .queue
        .list(&JobFilter {
            repository: None,
            allowed_repositories: None,
            state: None,
            limit: 100,
            cursor: None,
        })
        .await
        .unwrap()
        .jobs
        .into_iter()
        .map(|j| {
            (
                j.id,
                j.source.to_string(),
                j.kind.columns().pull_number.map(|n| n.get() as i64),
                j.kind.columns().merge_sha.cloned().map(String::from),
            )
        })
        .collect()
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("<none>")
}

#[tokio::test]
async fn local_source_requests_answer_every_code_and_store_only_accepted_jobs() {
    let local = Local::new();
    let daemon = inproc::start(local.config.clone()).await;
    let all = token(&local.config, "all", &[]).await;
    let only_other = token(&local.config, "other-only", &["demo/other"]).await;
    let pr = |n: Value| json!({"repository": "demo/app", "pull_number": n});

    // 401: no token, a wrong token, a non-bearer scheme.
    let (s, b) = post(&daemon, None, pr(json!(7))).await;
    assert_eq!((s, code(&b)), (401, "unauthorized"));
    let (s, _) = post(&daemon, Some("tmm_not_a_real_token"), pr(json!(7))).await;
    assert_eq!(s, 401);
    // 422: bad fields (zero, negative, huge, fractional, string, missing, extra).
    for bad in [
        pr(json!(0)),
        pr(json!(-3)),
        pr(json!(1u64 << 40)),
        pr(json!(7.5)),
        pr(json!("7")),
        json!({"repository": "demo/app"}),
        json!({"repository": "demo", "pull_number": 7}),
        json!({"repository": "demo/app", "pull_number": 7, "extra": true}),
    ] {
        let (s, b) = post(&daemon, Some(&all), bad.clone()).await;
        assert_eq!((s, code(&b)), (422, "invalid_field"), "{bad}: {b}");
        let message = b["error"]["message"].as_str().unwrap();
        assert!(!message.ends_with('.'), "{message}");
    }
    // 403: a token for another repository; it does not learn whether a
    // repository outside its scope is configured.
    let (s, b) = post(&daemon, Some(&only_other), pr(json!(7))).await;
    assert_eq!((s, code(&b)), (403, "forbidden_repository"));
    let (s, b) = post(
        &daemon,
        Some(&only_other),
        json!({"repository": "nobody/else", "pull_number": 7}),
    )
    .await;
    assert_eq!((s, code(&b)), (403, "forbidden_repository"));
    // 404: an unknown source.
    let (s, b) = post(
        &daemon,
        Some(&all),
        json!({"repository": "nobody/else", "pull_number": 7}),
    )
    .await;
    assert_eq!((s, code(&b)), (404, "unknown_source"));
    // 409: a PR no commit of main merges; one merged only into another branch.
    for n in [99, 9] {
        let (s, b) = post(&daemon, Some(&all), pr(json!(n))).await;
        assert_eq!((s, code(&b)), (409, "pull_not_merged"), "#{n}: {b}");
    }
    assert!(all_jobs(&daemon).await.is_empty(), "refusals store nothing");

    // 202 new (merge commit and squash), 200 the same job again.
    let (s, first) = post(&daemon, Some(&all), pr(json!(7))).await;
    assert_eq!(s, 202, "{first}");
    assert_eq!(first["state"], "queued");
    assert_eq!(first["merge_sha"], local.merge_7.as_str());
    let (s, again) = post(&daemon, Some(&all), pr(json!(7))).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["job_id"], first["job_id"]);
    let (s, squash) = post(&daemon, Some(&all), pr(json!(8))).await;
    assert_eq!(s, 202);
    assert_eq!(squash["merge_sha"], local.squash_8.as_str());
    let mut jobs = all_jobs(&daemon).await;
    jobs.sort();
    assert_eq!(
        jobs,
        vec![
            (
                first["job_id"].as_i64().unwrap(),
                "demo/app".to_string(),
                Some(7),
                Some(local.merge_7.clone())
            ),
            (
                squash["job_id"].as_i64().unwrap(),
                "demo/app".to_string(),
                Some(8),
                Some(local.squash_8.clone())
            ),
        ]
    );
    let job = daemon
        .queue
        .get(first["job_id"].as_i64().unwrap())
        .await
        .unwrap();
    assert_eq!(job.actor, "token:all");
    daemon.permits.add_permits(16);
    daemon.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_request_command_waits_for_the_job_to_finish() {
    let local = Local::new();
    let mut daemon = inproc::start(local.config.clone()).await;
    let all = token(&local.config, "cli", &["demo/app"]).await;
    let child = tokio::process::Command::new(crate::harness::daemon::BIN)
        .args([
            "request",
            "--server",
            &daemon.url(""),
            "--repository",
            "demo/app",
            "--pr",
            "7",
            "--wait",
        ])
        .env("TEAMMEM_TOKEN", &all)
        .env("TEAMMEM_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The job runs (the gate announces it) and may finish only now.
    let started = daemon.started.recv().await.expect("the job starts");
    daemon.permits.add_permits(1);
    let out = child.wait_with_output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(&format!("job {started}")), "{stdout}");
    assert_eq!(
        daemon.queue.get(started).await.unwrap().state,
        JobState::Succeeded
    );
    // A refused request exits non-zero and says why.
    let out = tokio::process::Command::new(crate::harness::daemon::BIN)
        .args([
            "request",
            "--server",
            &daemon.url(""),
            "--repository",
            "demo/app",
            "--pr",
            "99",
        ])
        .env("TEAMMEM_TOKEN", &all)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("pull request #99"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    daemon.shutdown().await.unwrap();
}

/// `octo/app` on the fake: PR #5 merged into main, #6 open, #7 merged into
/// `release`, #8 merged with a merge commit no longer on main. People: alice
/// (maintain), carol (admin), bob (write), a bot with admin.
pub struct Hub {
    pub fake: FakeGitHub,
    pub _dir: tempfile::TempDir,
    pub config: Config,
    pub merge_5: String,
}

impl Hub {
    pub async fn new() -> Hub {
        let fake = FakeGitHub::start().await;
        let dir = tempfile::tempdir().unwrap();
        let git = GitRepo::init(&dir.path().join("app"));
        git.commits(2, "base");
        let merge_5 = git.head();
        git.git(&["checkout", "-q", "-b", "side"]);
        let off_main = git.commit("side.txt", "Merge pull request #8 from octo/side");
        git.git(&["checkout", "-q", "main"]);
        fake.add_repo("octo/app", &git, "private", true);
        let pull = |merged: bool, base: &str, sha: Option<&str>| FakePull {
            merged,
            base_ref: base.into(),
            merge_commit_sha: sha.map(str::to_string),
            title: "A change".into(),
        };
        fake.add_pull("octo/app", 5, pull(true, "main", Some(&merge_5)));
        fake.add_pull("octo/app", 6, pull(false, "main", None));
        fake.add_pull("octo/app", 7, pull(true, "release", Some(&merge_5)));
        fake.add_pull("octo/app", 8, pull(true, "main", Some(&off_main)));
        for (token, login, kind) in [
            ("ghp_alice", "alice", "User"),
            ("ghp_carol", "carol", "User"),
            ("ghp_bob", "bob", "User"),
            ("ghp_bot", "deploy-bot[bot]", "Bot"),
        ] {
            fake.add_user(token, login, kind);
        }
        fake.set_role("octo/app", "alice", "write", "maintain");
        fake.set_role("octo/app", "carol", "admin", "admin");
        fake.set_role("octo/app", "bob", "write", "write");
        fake.set_role("octo/app", "deploy-bot[bot]", "admin", "admin");
        let key = dir.path().join("app.pem");
        std::fs::write(&key, &fake.app_key_pem).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let text = format!(
            r#"
[server]
listen = "127.0.0.1:0"
data_dir = "{data}"

[api]
allow_github_tokens = true

[github]
api_url = "{url}"
git_url = "{url}"
app_id = {app_id}
private_key = {{ file = "{key}" }}
verify_timeout_seconds = 5

[[sources]]
repository = "octo/app"
webhook_secret_env = "TEAMMEM_TEST_UNSET_SECRET"
"#,
            data = dir.path().join("data").display(),
            url = fake.url,
            app_id = fake.app_id,
            key = key.display(),
        );
        Hub {
            config: Config::parse(&text).unwrap(),
            fake,
            _dir: dir,
            merge_5,
        }
    }
}

#[tokio::test]
async fn github_source_requests_with_github_and_api_tokens() {
    let hub = Hub::new().await;
    let daemon = inproc::start(hub.config.clone()).await;
    let api = token(&hub.config, "maint", &["octo/app"]).await;
    let pr = |n: i64| json!({"repository": "octo/app", "pull_number": n});

    // 401: a token neither teammem nor GitHub knows.
    let (s, b) = post(&daemon, Some("ghp_unknown"), pr(5)).await;
    assert_eq!((s, code(&b)), (401, "unauthorized"), "{b}");
    // 403: write is not maintain; a bot is refused even with admin.
    for refused in ["ghp_bob", "ghp_bot"] {
        let (s, b) = post(&daemon, Some(refused), pr(5)).await;
        assert_eq!((s, code(&b)), (403, "not_a_maintainer"), "{refused}: {b}");
    }
    // 404 / 409: unknown PR, open PR, other base, merge commit not on main.
    let (s, b) = post(&daemon, Some("ghp_alice"), pr(404)).await;
    assert_eq!((s, code(&b)), (404, "pull_not_found"), "{b}");
    let (s, b) = post(&daemon, Some("ghp_alice"), pr(6)).await;
    assert_eq!((s, code(&b)), (409, "pull_not_merged"), "{b}");
    let (s, b) = post(&daemon, Some("ghp_alice"), pr(7)).await;
    assert_eq!((s, code(&b)), (409, "not_on_default_branch"), "{b}");
    let (s, b) = post(&daemon, Some(&api), pr(8)).await;
    assert_eq!(s, 409, "{b}");
    // 503 + Retry-After when GitHub answers 502.
    hub.fake.inject("/pulls/5", Fault::Status(502));
    let (s, b) = post(&daemon, Some("ghp_carol"), pr(5)).await;
    assert_eq!((s, code(&b)), (503, "upstream_unavailable"), "{b}");
    assert!(b["retry_after_header"].is_string(), "{b}");
    assert!(all_jobs(&daemon).await.is_empty(), "refusals store nothing");

    // 202 with a maintainer's GitHub token, 200 for the same PR with an API token.
    let (s, first) = post(&daemon, Some("ghp_alice"), pr(5)).await;
    assert_eq!(s, 202, "{first}");
    assert_eq!(first["merge_sha"], hub.merge_5.as_str());
    let (s, again) = post(&daemon, Some(&api), pr(5)).await;
    assert_eq!((s, &again["job_id"]), (200, &first["job_id"]));
    let job = daemon
        .queue
        .get(first["job_id"].as_i64().unwrap())
        .await
        .unwrap();
    assert_eq!(job.actor, "github:alice");
    // The GitHub token went only to GET /user, never into a stored row.
    assert!(!format!("{job:?}").contains("ghp_alice"));
    daemon.permits.add_permits(16);
    daemon.shutdown().await.unwrap();
}
