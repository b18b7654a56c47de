//! The real `teammem serve` process: readiness, metrics, authentication of the
//! job routes, a clean exit on SIGTERM, and MCP sessions kept across a restart. Also the offline commands
//! (`check-config`, `migrate`, `tokens`).

use crate::harness::daemon::Setup;

/// A handshake-era MCP session outlives the daemon: after a restart on the
/// same data directory, the same `Mcp-Session-Id` goes on working (the
/// stored `initialize` is replayed), where it used to be answered `404`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_session_survives_a_restart() {
    use crate::cluster::{legacy_mcp_post, legacy_mcp_session, mcp_tool_names};
    use serde_json::json;

    let setup = Setup::new("");
    let token = setup.create_token("agent", &[]);
    let first = setup.serve(&[]);
    let session = legacy_mcp_session(&first, &token).await;
    assert!(first.terminate().success());

    let second = setup.serve(&[]);
    let initialized = legacy_mcp_post(
        &second,
        &token,
        &session,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(initialized.status(), 202);
    let listed = legacy_mcp_post(
        &second,
        &token,
        &session,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert_eq!(listed.status(), 200);
    let tools = mcp_tool_names(&listed.text().await.unwrap());
    assert!(tools.contains(&"search_wiki".to_string()), "{tools:?}");

    // A session id nobody opened is still unknown.
    let unknown = legacy_mcp_post(
        &second,
        &token,
        "not-a-session",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(unknown.status(), 404);
    assert!(second.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_is_ready_exposes_metrics_guards_jobs_and_exits_0_on_sigterm() {
    let setup = Setup::new("node_id = \"node-x\"\n[queue]\nworkers = 3\n");
    let daemon = setup.serve(&[]);
    let http = reqwest::Client::new();

    let health = http.get(daemon.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);

    let ready = http.get(daemon.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(body["status"], "ready");
    assert_eq!(body["workers"], 3);
    // The one SQLite node runs the cluster's duties.
    assert_eq!(body["node"], "node-x");
    assert_eq!(body["database"], "sqlite");
    assert_eq!(body["role"], "leader");
    assert_eq!(body["wakeups"], "in_process");

    let metrics = http.get(daemon.url("/metrics")).send().await.unwrap();
    assert_eq!(metrics.status(), 200);
    assert!(
        metrics.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let raw = metrics.text().await.unwrap();
    assert!(
        raw.lines().any(
            |l| l == "teammem_node_info{node=\"node-x\",database=\"sqlite\",leader=\"true\"} 1"
        ),
        "{raw}"
    );
    assert!(
        raw.contains("teammem_jobs{node=\"node-x\",state=\"queued\"} 0"),
        "{raw}"
    );
    assert!(
        raw.contains("teammem_queue_rescues_total{node=\"node-x\"} 0"),
        "{raw}"
    );
    let text = crate::harness::without_node_label(&raw);
    for line in [
        "# TYPE teammem_jobs gauge",
        "teammem_jobs{state=\"queued\"} 0",
        "teammem_jobs{state=\"failed\"} 0",
        "# TYPE teammem_queue_claims_total counter",
        "teammem_queue_rescues_total 0",
        "teammem_queue_retries_total 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }

    // The job routes demand a token.
    for (method, path) in [
        ("GET", "/v1/jobs"),
        ("GET", "/v1/jobs/1"),
        ("POST", "/v1/jobs/1/cancel"),
        ("POST", "/v1/jobs/1/retry"),
    ] {
        let r = http
            .request(method.parse().unwrap(), daemon.url(path))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{method} {path}");
        assert_eq!(r.headers()["www-authenticate"], "Bearer realm=\"teammem\"");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized");
    }
    let wrong = http
        .get(daemon.url("/v1/jobs"))
        .bearer_auth("tmm_not-a-real-token")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);

    // A token created while the daemon runs works at once.
    let token = setup.create_token("ops", &[]);
    assert!(token.starts_with("tmm_"));
    let ok = http
        .get(daemon.url("/v1/jobs"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let body: serde_json::Value = ok.json().await.unwrap();
    assert_eq!(body["jobs"], serde_json::json!([]));

    let status = daemon.terminate();
    assert_eq!(
        status.code(),
        Some(0),
        "teammem serve must exit 0 on SIGTERM"
    );
}

#[test]
fn check_config_prints_ok_or_every_error_with_exit_2() {
    let good = Setup::new("");
    let out = good.run(&["check-config"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");

    let bad = Setup::new("[queue]\nworkers = 0\n[nonsense]\n");
    let out = bad.run(&["check-config"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("queue.workers: expected a number from 1 to 64, got 0"),
        "{err}"
    );
    assert!(err.contains("nonsense: unknown key"), "{err}");

    // A local source whose repositories are not there: named, with the fix.
    let gone = good.dir.path().join("gone");
    let wiki = good.dir.path().join("wiki.git");
    crate::harness::git::git(
        good.dir.path(),
        &["init", "-q", "--bare", wiki.to_str().unwrap()],
    );
    let absent = Setup::new(&format!(
        "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_TEST_ABSENT_SECRET\"\n",
        gone.display(),
        wiki.display()
    ));
    let out = std::process::Command::new(crate::harness::daemon::BIN)
        .args(["check-config", "--config"])
        .arg(&absent.config)
        .env("TEAMMEM_TEST_ABSENT_SECRET", "s".repeat(40))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "sources[0].local_path: {} does not exist",
            gone.display()
        )) && err.contains("create it, or fix the path")
            && !err.contains("local_wiki_path"),
        "{err}"
    );

    let missing = good.dir.path().join("nope.toml");
    let out = std::process::Command::new(crate::harness::daemon::BIN)
        .args(["check-config", "--config"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the configuration file"));
}

/// `/readyz` checks each local source's repository and wiki on every probe
/// (#35): one missing or not a git repository is named by its key, and the
/// node is ready again once it is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_names_a_local_sources_missing_repository_until_it_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("app.git");
    let wiki = dir.path().join("not-a-wiki");
    std::fs::create_dir(&wiki).unwrap();
    let setup = Setup::new(&format!(
        "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_TEST_READY_SECRET\"\n",
        repo.display(),
        wiki.display()
    ));
    let secret = "s".repeat(40);
    let daemon = setup.serve(&[("TEAMMEM_TEST_READY_SECRET", secret.as_str())]);
    let ready = reqwest::get(daemon.url("/readyz")).await.unwrap();
    assert_eq!(ready.status(), 503);
    let body: serde_json::Value = ready.json().await.unwrap();
    let problems = body["problems"].to_string();
    assert!(
        problems.contains(&format!(
            "sources[0].local_path: {} does not exist",
            repo.display()
        )),
        "{body}"
    );
    assert!(
        problems.contains(&format!(
            "sources[0].local_wiki_path: {} is not a git repository",
            wiki.display()
        )),
        "{body}"
    );

    for path in [&repo, &wiki] {
        crate::harness::git::git(
            dir.path(),
            &["init", "-q", "--bare", path.to_str().unwrap()],
        );
    }
    let ready = reqwest::get(daemon.url("/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200, "{}", ready.text().await.unwrap());
    assert!(daemon.terminate().success());
}

#[test]
fn migrate_creates_the_database_and_is_idempotent() {
    let setup = Setup::new("");
    let first = setup.run(&["migrate"]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(setup.data_dir().join("teammem.db").exists());
    let again = setup.run(&["migrate"]);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("(nothing to apply)"));
}

#[test]
fn tokens_are_shown_once_stored_hashed_listed_and_revoked() {
    let setup = Setup::new(
        "[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/srv/a.git\"\nlocal_wiki_path = \"/srv/a.wiki.git\"\nwebhook_secret_env = \"S\"\n",
    );
    let token = setup.create_token("ci", &["octo/app"]);
    assert!(token.starts_with("tmm_") && token.len() > 40, "{token}");

    // Only the hash is on disk.
    let db = std::fs::read(setup.data_dir().join("teammem.db")).unwrap();
    let wal = std::fs::read(setup.data_dir().join("teammem.db-wal")).unwrap_or_default();
    for bytes in [&db, &wal] {
        assert!(!bytes.windows(token.len()).any(|w| w == token.as_bytes()));
    }

    let dup = setup.run(&["tokens", "create", "--name", "ci"]);
    assert_eq!(dup.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&dup.stderr).contains("already in use"));

    let unknown_repo = setup.run(&[
        "tokens",
        "create",
        "--name",
        "x",
        "--repository",
        "octo/other",
    ]);
    assert_eq!(unknown_repo.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown_repo.stderr).contains("not a configured source"));

    let list = setup.run(&["tokens", "list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains("ci\tactive\tocto/app"), "{text}");
    assert!(!text.contains(&token));

    assert!(setup.run(&["tokens", "revoke", "ci"]).status.success());
    let again = setup.run(&["tokens", "revoke", "ci"]);
    assert_eq!(again.status.code(), Some(2));
    let list = setup.run(&["tokens", "list"]);
    assert!(String::from_utf8_lossy(&list.stdout).contains("ci\trevoked"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_commands_show_steer_and_refuse_bad_transitions() {
    use teammem::queue::{JobKind, NewJob, Origin};
    let setup = Setup::new(
        "[[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/srv/a.git\"\nlocal_wiki_path = \"/srv/a.wiki.git\"\nwebhook_secret_env = \"S\"\n",
    );
    assert!(setup.run(&["migrate"]).status.success());
    let config = teammem::config::Config::load(&setup.config).unwrap();
    let pool = teammem::db::open(&config.server.data_dir).await.unwrap();
    let queue = teammem::queue::Queue::from_config(&config, pool);
    let job = queue
        .enqueue(
            NewJob {
                source: teammem::ids::RepoName::parse("octo/app").unwrap(),
                destination: "local:/srv/a.wiki.git".into(),
                origin: Origin::Dispatch,
                kind: JobKind::Range {
                    before: teammem::ids::Sha::parse(&"a".repeat(40)).unwrap(),
                    after: teammem::ids::Sha::parse(&"b".repeat(40)).unwrap(),
                    run_id: Some(5),
                    run_attempt: Some(1),
                },
                actor: "test".into(),
            },
            Some("delivery-1"),
        )
        .await
        .unwrap()
        .job;
    let id = job.id.to_string();

    let list = setup.run(&["jobs", "list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.contains("queued") && text.contains("range aaaaaaaaaa..bbbbbbbbbb"),
        "{text}"
    );

    let json = setup.run(&["jobs", "list", "--json", "--state", "queued"]);
    let page: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(page["jobs"][0]["id"], job.id);
    assert_eq!(page["next_cursor"], serde_json::Value::Null);

    // Paging: a newer job, one per page, the older one behind the cursor.
    let newer = queue
        .enqueue(
            NewJob {
                source: teammem::ids::RepoName::parse("octo/app").unwrap(),
                destination: "local:/srv/a.wiki.git".into(),
                origin: Origin::Dispatch,
                kind: JobKind::Range {
                    before: teammem::ids::Sha::parse(&"c".repeat(40)).unwrap(),
                    after: teammem::ids::Sha::parse(&"d".repeat(40)).unwrap(),
                    run_id: Some(6),
                    run_attempt: Some(1),
                },
                actor: "test".into(),
            },
            Some("delivery-2"),
        )
        .await
        .unwrap()
        .job;
    let first = setup.run(&["jobs", "list", "--limit", "1", "--json"]);
    let first: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(first["jobs"][0]["id"], newer.id);
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let text = setup.run(&["jobs", "list", "--limit", "1"]);
    assert!(
        String::from_utf8_lossy(&text.stdout)
            .contains(&format!("older jobs: add --cursor {cursor}"))
    );
    let second = setup.run(&[
        "jobs", "list", "--limit", "1", "--json", "--cursor", &cursor,
    ]);
    let second: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
    assert_eq!(second["jobs"][0]["id"], job.id);
    assert_eq!(second["next_cursor"], serde_json::Value::Null);
    let bad = setup.run(&["jobs", "list", "--cursor", "nonsense"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--cursor: not a cursor"));

    let bad_state = setup.run(&["jobs", "list", "--state", "done"]);
    assert_eq!(bad_state.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_state.stderr).contains("unknown job state \"done\""));

    let show = setup.run(&["jobs", "show", &id]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains(&format!("job {id}: queued")) && text.contains("enqueued"),
        "{text}"
    );

    let missing = setup.run(&["jobs", "show", "4242"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("job 4242 not found"));

    let retry = setup.run(&["jobs", "retry", &id]);
    assert_eq!(retry.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&retry.stderr).contains("cannot retry job"));
    assert_eq!(queue.get(job.id).await.unwrap().state.as_str(), "queued");

    let cancel = setup.run(&["jobs", "cancel", &id, "--json"]);
    assert!(cancel.status.success());
    let cancelled: serde_json::Value = serde_json::from_slice(&cancel.stdout).unwrap();
    assert_eq!(cancelled["state"], "cancelled");
    let again = setup.run(&["jobs", "cancel", &id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("cannot cancel job"));

    let retry = setup.run(&["jobs", "retry", &id]);
    assert!(retry.status.success());
    assert!(String::from_utf8_lossy(&retry.stdout).contains("is now queued"));
}

/// With its log going to a file (not a terminal) and no `TEAMMEM_LOG`, the
/// daemon writes its `info` events as plain text: no terminal colour codes.
#[test]
fn a_daemon_logging_to_a_file_writes_plain_text() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let setup = Setup::new("");
    let log_path = setup.dir.path().join("daemon.log");
    let log = std::fs::File::create(&log_path).expect("create log file");
    let mut child = Command::new(crate::harness::daemon::BIN)
        .arg("serve")
        .arg("--config")
        .arg(&setup.config)
        .env_remove("TEAMMEM_LOG")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn teammem serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
    let listening = lines.any(|line| line.starts_with("teammem listening on "));
    assert!(listening, "teammem serve exited before listening");
    // Keep reading stdout: a closed pipe would fail what the daemon prints
    // as it stops.
    std::thread::spawn(move || lines.for_each(drop));
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    assert!(child.wait().expect("wait").success());
    let text = std::fs::read_to_string(&log_path).expect("read log");
    assert!(
        text.contains("teammem started"),
        "no info event logged: {text}"
    );
    assert!(
        !text.contains('\x1b'),
        "colour codes in a log file: {text:?}"
    );
}
