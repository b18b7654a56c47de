//! Several `teammem serve` nodes on one real PostgreSQL server, each with its
//! own data directory: any node takes a dispatch and any node runs it; a
//! token made with one node's configuration authenticates on the others; a
//! dashboard login on one node is valid on another, and so is a
//! handshake-era MCP session; a replay sent to another
//! node answers with the same job; the wiki gets the job's one commit; one
//! node at a time holds the leader role, and it moves when that node dies;
//! three nodes lose nothing when one is SIGKILLed twice; an outage of the
//! database under load (every connection cut through a proxy, then refused)
//! and a crash of the database server under load answer `503` +
//! `Retry-After` and lose nothing acknowledged; a job enqueued on one node
//! wakes an idle worker on another through `LISTEN`/`NOTIFY`, also after the
//! listening connection was cut; a job that finishes while the database is
//! away records its outcome when it returns.

use serde_json::json;

use crate::harness::cut_proxy::CutProxy;
use crate::harness::daemon::{DASHBOARD_KEY_TOML, Setup};
use crate::harness::postgres;
use crate::runner::daemon_client::{finished, jobs_of_commits, post_dispatch, wait_for, wiki_tip};
use crate::runner::fixture;

const SECRET: &str = "cluster dispatch secret, at least 32 bytes long";

/// The configuration of one node: the shared database, its own node id, and
/// the shared sources.
fn node_config(url: &str, node: &str, source: &fixture::Source, wiki: &std::path::Path) -> String {
    format!(
        "node_id = \"{node}\"\n\
         [database]\nurl = \"{url}\"\n\
         [[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\n\
         webhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n{DASHBOARD_KEY_TOML}",
        source.dir.display(),
        wiki.display()
    )
}

/// The `[[sources]]` tables of `sources`, each with `extra` keys appended.
fn source_tables(sources: &[ClusterSource], extra: &str) -> String {
    sources
        .iter()
        .map(|source| {
            format!(
                "[[sources]]\nrepository = \"{}\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\n\
                 webhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n{extra}",
                source.name,
                source.dir.display(),
                source.wiki.display()
            )
        })
        .collect()
}

#[tokio::test]
async fn nodes_on_one_postgres_share_jobs_tasks_tokens_and_dashboard_sessions() {
    let url = postgres::server().fresh_database().await;
    let repos = tempfile::tempdir().unwrap();
    let source = fixture::Source::create(repos.path());
    let wiki = fixture::wiki(repos.path());
    let start = wiki_tip(&wiki);
    let a = Setup::new(&node_config(&url, "node-a", &source, &wiki));
    let b = Setup::new(&node_config(&url, "node-b", &source, &wiki));
    let token = a.create_token("cluster", &[]);
    let node_a = a.serve(&[("TEAMMEM_SECRET_DEMO", SECRET)]);
    let node_b = b.serve(&[("TEAMMEM_SECRET_DEMO", SECRET)]);

    let dispatch = json!({
        "source_repository": "demo/app", "kind": "range",
        "source_run_id": 7, "source_run_attempt": 1,
        "push_before": source.base, "push_after": source.head,
    });
    let (status, answer) = post_dispatch(&node_a, SECRET, &dispatch).await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["job_id"].as_i64().unwrap();
    // Node A's token, read through node B.
    let (job, events) = wait_for(&node_b, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job} {events}");
    assert_eq!(jobs_of_commits(&wiki, &start), [Some(id)]);

    // The same delivery sent to node B is the same job, not a second one.
    let (status, replay) = post_dispatch(&node_b, SECRET, &dispatch).await;
    assert!(status == 200 || status == 202, "{status} {replay}");
    assert_eq!(replay["job_id"].as_i64(), Some(id), "{replay}");
    assert_eq!(jobs_of_commits(&wiki, &start), [Some(id)]);

    // A dashboard login on node A is a session on node B. The forwarding
    // header makes the dashboard ask for a login even from loopback.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = http
        .post(node_a.url("/login"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("X-Forwarded-For", "203.0.113.7")
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 303);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_string();
    let session = cookie.split(';').next().unwrap().to_string();
    let page = |node: &crate::harness::daemon::Daemon, session: Option<&str>| {
        let mut request = http
            .get(node.url(&format!("/jobs/{id}")))
            .header("X-Forwarded-For", "203.0.113.7");
        if let Some(session) = session {
            request = request.header("Cookie", session);
        }
        request.send()
    };
    assert_eq!(page(&node_b, None).await.unwrap().status(), 303);
    let on_b = page(&node_b, Some(&session)).await.unwrap();
    assert_eq!(on_b.status(), 200);
    let html = on_b.text().await.unwrap();
    assert!(html.contains("succeeded"), "{html}");
    // The attempts table names the node that ran the attempt.
    let ran_on = job_worker(&job);
    assert!(
        ran_on.starts_with("node-a/worker-") || ran_on.starts_with("node-b/worker-"),
        "{job}"
    );
    assert!(html.contains(&format!("<td>{ran_on}</td>")), "{html}");

    // An MCP task created through node A is followed to its end on node B.
    use crate::coordinator::{Era, connect_to, task_id, until_settled};
    let on_a = connect_to(node_a.url("/mcp"), &token, Era::Stateless, true).await;
    let task = task_id(&on_a, "demo/app", 12).await;
    on_a.cancel().await.unwrap();
    let on_b = connect_to(node_b.url("/mcp"), &token, Era::Stateless, true).await;
    let done = until_settled(&on_b, &task).await;
    assert_eq!(done.task.task.status, rmcp::model::TaskStatus::Completed);
    let rmcp::model::TaskPayload::Completed { result } = &done.task.payload else {
        panic!("a completed task carries its result")
    };
    let envelope = &result["structuredContent"];
    assert_eq!(envelope["success"], true, "{result:?}");
    // PR #12 is on the wiki already (the range above recorded it).
    assert_eq!(envelope["result"]["state"], "no_change", "{result:?}");
    on_b.cancel().await.unwrap();

    // Revoked through node B's configuration: refused by node A at once.
    let out = b.run(&["tokens", "revoke", "cluster"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refused = reqwest::Client::new()
        .get(node_a.url(&format!("/v1/jobs/{id}")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(page(&node_a, Some(&session)).await.unwrap().status(), 303);

    // A handshake-era MCP session opened on node A continues on node B
    // (which replays its stored initialize) and lists the same tools.
    let agent = a.create_token("agent", &[]);
    let session = legacy_mcp_session(&node_a, &agent).await;
    let mut tools = Vec::new();
    for node in [&node_b, &node_a] {
        let initialized = legacy_mcp_post(
            node,
            &agent,
            &session,
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        assert_eq!(initialized.status(), 202, "{}", node.url("/mcp"));
        let listed = legacy_mcp_post(
            node,
            &agent,
            &session,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        )
        .await;
        assert_eq!(listed.status(), 200, "{}", node.url("/mcp"));
        tools.push(mcp_tool_names(&listed.text().await.unwrap()));
    }
    assert!(tools[0].contains(&"search_wiki".to_string()), "{tools:?}");
    assert_eq!(tools[0], tools[1]);

    // Both nodes hear job notifications.
    for node in [&node_a, &node_b] {
        loop_until(|| async { (readyz_says(node, "wakeups").await == "notify").then_some(()) })
            .await;
    }

    // One leader; when it dies, the other node takes over.
    let (leader, follower) = loop_until(|| async {
        match (role(&node_a).await.as_str(), role(&node_b).await.as_str()) {
            ("leader", "follower") => Some(("node-a", "node-b")),
            ("follower", "leader") => Some(("node-b", "node-a")),
            _ => None,
        }
    })
    .await;
    assert_eq!(lock_holders(&url).await, [format!("teammem {leader}")]);
    let (stopping, staying) = if leader == "node-a" {
        (node_a, node_b)
    } else {
        (node_b, node_a)
    };
    // It dies without a word (SIGKILL): the server drops its lock with its
    // connection, and the other node takes the role at its next campaign.
    let mut dying = stopping;
    dying.child.kill().unwrap();
    dying.child.wait().unwrap();
    loop_until(|| async { (role(&staying).await == "leader").then_some(()) }).await;
    assert_eq!(lock_holders(&url).await, [format!("teammem {follower}")]);
}

/// Opens a 2025-11-25 (handshake-era) MCP session on `node` and returns its
/// `Mcp-Session-Id`.
pub(crate) async fn legacy_mcp_session(
    node: &crate::harness::daemon::Daemon,
    token: &str,
) -> String {
    let init = reqwest::Client::new()
        .post(node.url("/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "cluster-test", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(init.status(), 200);
    init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// Posts `message` on `node`'s `/mcp` in the handshake-era `session`.
pub(crate) async fn legacy_mcp_post(
    node: &crate::harness::daemon::Daemon,
    token: &str,
    session: &str,
    message: serde_json::Value,
) -> reqwest::Response {
    reqwest::Client::new()
        .post(node.url("/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&message)
        .send()
        .await
        .unwrap()
}

/// The tool names of a `tools/list` answer, sent as JSON or as one SSE
/// `data:` event.
pub(crate) fn mcp_tool_names(body: &str) -> Vec<String> {
    let json = body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .find(|data| !data.is_empty())
        .unwrap_or(body);
    let answer: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {body}"));
    let mut names: Vec<String> = answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {answer}"))
        .iter()
        .filter_map(|tool| tool["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// The role `/readyz` reports.
async fn role(node: &crate::harness::daemon::Daemon) -> String {
    readyz_says(node, "role").await
}

/// What `/readyz` reports as `field`.
async fn readyz_says(node: &crate::harness::daemon::Daemon, field: &str) -> String {
    let body: serde_json::Value = reqwest::get(node.url("/readyz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body[field].as_str().unwrap_or_default().to_string()
}

/// The application names of the connections holding the leader lock.
async fn lock_holders(url: &str) -> Vec<String> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query_scalar(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
         WHERE l.locktype = 'advisory' AND l.granted \
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
           AND ((l.classid::bigint << 32) | l.objid::bigint) = $1",
    )
    .bind(teammem::cluster::LEADER_LOCK)
    .fetch_all(&mut conn)
    .await
    .unwrap()
}

/// Polls `check` until it answers (bounded by a deadline).
async fn loop_until<T, F, Fut>(check: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(answer) = check().await {
            return answer;
        }
        assert!(std::time::Instant::now() < deadline, "never got there");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// One source of the three-node test: a repository with `PRS` squash-merged
/// pull requests on `main` after `base`, and its bare wiki.
struct ClusterSource {
    name: String,
    dir: std::path::PathBuf,
    wiki: std::path::PathBuf,
    /// `base`, then each PR's commit, in order.
    commits: Vec<String>,
}

const SOURCES: usize = 30;
const PRS: usize = 10;

fn cluster_source(root: &std::path::Path, n: usize) -> ClusterSource {
    use crate::harness::git::{git, git_trimmed};
    let root = root.join(format!("s{n}"));
    std::fs::create_dir_all(&root).unwrap();
    let wiki = fixture::wiki(&root);
    let dir = root.join("app");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    fixture::write(&dir, "README.md", &format!("# app {n}\n"));
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "Initial commit"]);
    let mut commits = vec![git_trimmed(&dir, &["rev-parse", "HEAD"])];
    for pr in 1..=PRS {
        fixture::write(
            &dir,
            &format!("src/part{pr}.rs"),
            &format!("// part {pr}\n"),
        );
        git(&dir, &["add", "-A"]);
        git(
            &dir,
            &[
                "commit",
                "-q",
                "-m",
                &format!("Part {pr} of app {n} (#{pr})"),
            ],
        );
        commits.push(git_trimmed(&dir, &["rev-parse", "HEAD"]));
    }
    ClusterSource {
        name: format!("demo/app{n}"),
        dir,
        wiki,
        commits,
    }
}

/// Every PR of every source is cited exactly once on its wiki's
/// `Changelog.md`, and `git fsck --strict` finds each wiki clean.
fn assert_every_pr_cited_once(sources: &[ClusterSource]) {
    for source in sources {
        for sha in &source.commits[1..] {
            assert_eq!(
                crate::runner::daemon_client::entries(&source.wiki, "Changelog.md", sha),
                1,
                "{} {sha} on Changelog.md",
                source.name
            );
        }
        crate::harness::git::git(&source.wiki, &["fsck", "--strict"]);
    }
}

/// Everything seen by the sampler: the most jobs running at once for one
/// wiki, and the most connections holding the leader lock at once.
#[derive(Debug, Default)]
struct Sampled {
    samples: u64,
    most_running_per_wiki: i64,
    most_leaders: usize,
}

/// Three nodes, one PostgreSQL, 30 sources: 300 dispatches sent round-robin
/// (to the next node when one is down) while one node is SIGKILLed twice and
/// restarted. Every accepted dispatch's job ends `succeeded` or `no_change`,
/// every PR is cited exactly once on its wiki, `git fsck --strict` is clean on
/// every wiki, and the database, sampled throughout, never shows two running
/// jobs for one wiki or two holders of the leader lock (which runs the sweep).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_lose_nothing_when_one_is_killed_twice() {
    use sqlx::Connection;
    use std::sync::{Arc, Mutex};

    let url = postgres::server().fresh_database().await;
    let repos = tempfile::tempdir().unwrap();
    let sources: Vec<ClusterSource> = (0..SOURCES)
        .map(|n| cluster_source(repos.path(), n))
        .collect();
    let mut shared = format!(
        "[database]\nurl = \"{url}\"\n{DASHBOARD_KEY_TOML}\
         [queue]\nlease_seconds = 5\n\
         [schedule]\nrescue = \"* * * * * *\"\nsweep = \"*/2 * * * * *\"\n"
    );
    shared.push_str(&source_tables(&sources, "sweep = true\n"));
    let setups: Vec<Setup> = ["node-a", "node-b", "node-c"]
        .iter()
        .map(|node| Setup::new(&format!("node_id = \"{node}\"\n{shared}")))
        .collect();
    let token = setups[0].create_token("cluster", &[]);
    let env = [("TEAMMEM_SECRET_DEMO", SECRET)];
    let mut nodes: Vec<Option<crate::harness::daemon::Daemon>> =
        setups.iter().map(|setup| Some(setup.serve(&env))).collect();

    // The sampler: its own connection, as often as it can, until told to stop.
    let sampled = Arc::new(Mutex::new(Sampled::default()));
    let stop = tokio_util::sync::CancellationToken::new();
    let sampler = {
        let (url, sampled, stop) = (url.clone(), sampled.clone(), stop.clone());
        tokio::spawn(async move {
            let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
            while !stop.is_cancelled() {
                let running: i64 = sqlx::query_scalar(
                    "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM jobs \
                     WHERE state = 'running' GROUP BY destination) AS per_wiki",
                )
                .fetch_one(&mut conn)
                .await
                .unwrap();
                let leaders: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND granted \
                     AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
                     AND ((classid::bigint << 32) | objid::bigint) = $1",
                )
                .bind(teammem::cluster::LEADER_LOCK)
                .fetch_one(&mut conn)
                .await
                .unwrap();
                let mut seen = sampled.lock().unwrap();
                seen.samples += 1;
                seen.most_running_per_wiki = seen.most_running_per_wiki.max(running);
                seen.most_leaders = seen.most_leaders.max(leaders as usize);
            }
        })
    };

    // 300 dispatches: PR by PR, each source's next range in turn.
    let mut accepted: Vec<i64> = Vec::new();
    let mut sent = 0usize;
    for pr in 1..=PRS {
        for source in &sources {
            let dispatch = json!({
                "source_repository": source.name, "kind": "range",
                "source_run_id": sent + 1, "source_run_attempt": 1,
                "push_before": source.commits[pr - 1], "push_after": source.commits[pr],
            });
            let mut answered = None;
            for offset in 0..nodes.len() {
                if let Some(node) = &nodes[(sent + offset) % nodes.len()] {
                    answered = Some(post_dispatch(node, SECRET, &dispatch).await);
                    break;
                }
            }
            let (status, answer) = answered.expect("a node is up");
            assert!(status == 202 || status == 200, "{status} {answer}");
            accepted.push(answer["job_id"].as_i64().unwrap());
            sent += 1;
            // Node C is killed (SIGKILL) after 100 and 200 dispatches, and
            // restarted 30 dispatches later.
            if sent == 100 || sent == 200 {
                let mut killed = nodes[2].take().unwrap();
                killed.child.kill().unwrap();
                killed.child.wait().unwrap();
            }
            if sent == 130 || sent == 230 {
                nodes[2] = Some(setups[2].serve(&env));
            }
        }
    }

    // Every accepted dispatch's job ends once, reconciled.
    accepted.sort_unstable();
    accepted.dedup();
    let reader = nodes[0].as_ref().unwrap();
    for id in &accepted {
        let (job, events) = wait_for(reader, &token, *id, finished).await;
        assert!(
            job["state"] == "succeeded" || job["state"] == "no_change",
            "{job} {events}"
        );
    }
    stop.cancel();
    sampler.await.unwrap();
    let sampled = sampled.lock().unwrap();
    assert!(sampled.samples > 10, "{sampled:?}");
    assert!(sampled.most_running_per_wiki <= 1, "{sampled:?}");
    assert_eq!(sampled.most_leaders, 1, "{sampled:?}");

    assert_every_pr_cited_once(&sources);
    for node in nodes.into_iter().flatten() {
        assert!(node.terminate().success());
    }
}

/// Posts one dispatch under `delivery` until a node accepts it, as the
/// shipped workflow does: a `503` must carry `Retry-After`, and the same
/// delivery is sent again (to the other node) after a short pause. Returns
/// the job id and how many `503`s it met.
async fn dispatch_until_accepted(
    nodes: &[&crate::harness::daemon::Daemon],
    first: usize,
    body: &serde_json::Value,
    delivery: &str,
) -> (i64, usize) {
    let body = serde_json::to_vec(body).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut unavailable = 0;
    for attempt in 0.. {
        let node = nodes[(first + attempt) % nodes.len()];
        let answer = reqwest::Client::new()
            .post(node.url("/v1/dispatch"))
            .header("Content-Type", "application/json")
            .header(
                "X-Hub-Signature-256",
                crate::runner::daemon_client::signature(SECRET, &body),
            )
            .header("X-TeamMem-Delivery", delivery)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let status = answer.status().as_u16();
        if status == 503 {
            assert!(
                answer.headers().contains_key("retry-after"),
                "{:?}",
                answer.headers()
            );
            unavailable += 1;
            assert!(std::time::Instant::now() < deadline, "never accepted");
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            continue;
        }
        let answer: serde_json::Value = answer.json().await.unwrap();
        assert!(status == 202 || status == 200, "{status} {answer}");
        return (answer["job_id"].as_i64().unwrap(), unavailable);
    }
    unreachable!()
}

/// The database goes away under load (every connection cut, new ones
/// refused, for six seconds) and comes back: dispatches meanwhile answer
/// `503` with `Retry-After` and are accepted when sent again; no
/// acknowledged dispatch is lost; both nodes carry on without a restart;
/// every PR is cited once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_outage_under_load_loses_nothing_and_the_nodes_recover() {
    let direct = postgres::server().fresh_database().await;
    let name = direct.rsplit('/').next().unwrap().to_string();
    let proxy = std::sync::Arc::new(CutProxy::start(postgres::server().port()).await);
    let url = format!("postgres://teammem_test@127.0.0.1:{}/{name}", proxy.port);
    dispatch_through_an_outage(&url, Outage::Cut(proxy)).await;
}

/// The database server crashes under load (an immediate shutdown: every
/// connection cut, nothing checkpointed) and starts again eight seconds
/// later, recovering from its WAL: what it acknowledged survives, so every
/// dispatch a node accepted runs and every PR is cited once; dispatches sent
/// meanwhile answer `503` with `Retry-After` and are accepted when sent
/// again; both nodes carry on without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_database_crash_under_load_loses_no_acknowledged_dispatch() {
    let server = std::sync::Arc::new(postgres::own_durable_server());
    let url = server.fresh_database().await;
    dispatch_through_an_outage(&url, Outage::Crash(server)).await;
}

/// How the database goes away in [`dispatch_through_an_outage`].
enum Outage {
    /// For six seconds every connection through the proxy is cut and new
    /// ones are refused; the server behind it keeps running.
    Cut(std::sync::Arc<CutProxy>),
    /// The server crashes, and eight seconds later (longer than a node
    /// waits for a connection, with room for a slow host) starts again on
    /// the same data.
    Crash(std::sync::Arc<postgres::PgServer>),
}

impl Outage {
    /// Starts the outage; the task ends when the database is back.
    fn start(&self) -> tokio::task::JoinHandle<()> {
        match self {
            Outage::Cut(proxy) => {
                proxy.cut();
                let proxy = proxy.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
                    proxy.restore();
                })
            }
            Outage::Crash(server) => {
                tokio::task::block_in_place(|| server.crash());
                let server = server.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_secs(8)).await;
                    let restart = move || server.start_again();
                    tokio::task::spawn_blocking(restart).await.unwrap();
                })
            }
        }
    }
}

/// Two nodes on database `url` take dispatches for four sources, sent one
/// after another, alternating between the nodes; from the 13th on they meet
/// `outage`. Asserts that some dispatch met it (`503` with `Retry-After`,
/// then accepted when sent again), that every accepted dispatch's job ends
/// `succeeded` or `no_change`, that both nodes are ready again without a
/// restart, and that every PR is cited once on a wiki `git fsck --strict`
/// finds clean.
async fn dispatch_through_an_outage(url: &str, outage: Outage) {
    let repos = tempfile::tempdir().unwrap();
    let sources: Vec<ClusterSource> = (0..4).map(|n| cluster_source(repos.path(), n)).collect();
    let mut shared = format!(
        "[database]\nurl = \"{url}\"\n{DASHBOARD_KEY_TOML}[queue]\nlease_seconds = 5\n\
         [schedule]\nrescue = \"* * * * * *\"\n"
    );
    shared.push_str(&source_tables(&sources, ""));
    let a = Setup::new(&format!("node_id = \"node-a\"\n{shared}"));
    let b = Setup::new(&format!("node_id = \"node-b\"\n{shared}"));
    let token = a.create_token("outage", &[]);
    let env = [("TEAMMEM_SECRET_DEMO", SECRET)];
    let (node_a, node_b) = (a.serve(&env), b.serve(&env));
    let nodes = [&node_a, &node_b];

    let mut accepted = Vec::new();
    let mut unavailable = 0;
    let mut ongoing = None;
    let mut sent = 0usize;
    for pr in 1..=PRS {
        for source in &sources {
            if sent == 12 {
                // The outage starts while dispatches keep coming.
                ongoing = Some(outage.start());
            }
            let body = json!({
                "source_repository": source.name, "kind": "range",
                "source_run_id": sent + 1, "source_run_attempt": 1,
                "push_before": source.commits[pr - 1], "push_after": source.commits[pr],
            });
            let delivery = uuid::Uuid::new_v4().to_string();
            let (id, refused) = dispatch_until_accepted(&nodes, sent, &body, &delivery).await;
            accepted.push(id);
            unavailable += refused;
            sent += 1;
        }
    }
    ongoing.expect("the outage ran").await.unwrap();
    assert!(unavailable > 0, "no dispatch met the outage");

    accepted.sort_unstable();
    accepted.dedup();
    for id in &accepted {
        let (job, events) = wait_for(&node_b, &token, *id, finished).await;
        assert!(
            job["state"] == "succeeded" || job["state"] == "no_change",
            "{job} {events}"
        );
    }
    for node in nodes {
        let ready = reqwest::get(node.url("/readyz")).await.unwrap();
        assert_eq!(ready.status(), 200, "{}", ready.text().await.unwrap());
    }
    assert_every_pr_cited_once(&sources);
    assert!(node_a.terminate().success());
    assert!(node_b.terminate().success());
}

/// The worker that held the job's lease last (`<node>/worker-<n>`).
fn job_worker(job: &serde_json::Value) -> String {
    job["lease_owner"].as_str().unwrap_or_default().to_string()
}

/// The backend pids of connections listening for job notifications on the
/// database of `pool` (other than the asking one).
async fn listening_backends(pool: &sqlx::PgPool) -> Vec<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() \
           AND query LIKE 'LISTEN %teammem_jobs%'",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// A job enqueued through one node's queue wakes an idle worker of another
/// node through `LISTEN`/`NOTIFY` (nothing here polls: without the
/// notification the wake-up never comes), and that node says `notify`; while
/// its path to the database is cut it says `polling`, and once the path is
/// back the listener connects again by itself and the next job wakes it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_enqueued_on_one_node_wakes_an_idle_worker_on_another() {
    use std::sync::Arc;
    use teammem::queue::{Queue, SystemClock};

    let url = postgres::server().fresh_database().await;
    let name = url.rsplit('/').next().unwrap().to_string();
    let proxy = CutProxy::start(postgres::server().port()).await;
    let through_proxy = format!("postgres://teammem_test@127.0.0.1:{}/{name}", proxy.port);
    let connect = |url: String| async move {
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .connect(&url)
            .await
            .expect("connect to the test database")
    };
    let node_a = connect(url.clone()).await;
    let node_b = connect(through_proxy).await;
    teammem::db::migrate_postgres(&node_a)
        .await
        .expect("migrate");
    let queue_a = Queue::new(
        node_a.clone(),
        Arc::new(SystemClock),
        crate::queue::settings(),
    );
    let wake_b = Arc::new(tokio::sync::Notify::new());
    let stop = tokio_util::sync::CancellationToken::new();
    let wakeups_b =
        teammem::cluster::wake_on_notifications(node_b.clone(), wake_b.clone(), stop.clone());
    let says = |expected: &'static str| {
        let wakeups_b = wakeups_b.clone();
        async move { loop_until(|| async { (wakeups_b.as_str() == expected).then_some(()) }).await }
    };

    for number in 1..=2 {
        says("notify").await;
        let listeners = listening_backends(&node_a).await;
        assert_eq!(listeners.len(), 1, "{listeners:?}");
        let woken = wake_b.notified();
        queue_a
            .enqueue(
                crate::queue::pull_request("octo/app", "octo/wiki", number),
                None,
            )
            .await
            .expect("enqueue on node A");
        tokio::time::timeout(std::time::Duration::from_secs(20), woken)
            .await
            .unwrap_or_else(|_| panic!("job {number} never woke node B"));
        if number == 1 {
            // Node B loses the database; its listener must come back alone.
            proxy.cut();
            says("polling").await;
            proxy.restore();
        }
    }
    stop.cancel();
}

/// A job whose handler finishes while the database is unreachable keeps its
/// real outcome: the worker records it again once the database is back
/// (within the lease), so the job ends `succeeded` at its first attempt with
/// the handler's receipt, instead of staying `running` until the rescuer
/// runs it a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_finished_during_an_outage_records_its_outcome_when_the_database_returns() {
    let direct = postgres::server().fresh_database().await;
    let name = direct.rsplit('/').next().unwrap().to_string();
    let proxy = std::sync::Arc::new(CutProxy::start(postgres::server().port()).await);
    let dir = tempfile::tempdir().unwrap();
    let config = teammem::config::Config::parse(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\nnode_id = \"node-a\"\n\
         [database]\nurl = \"postgres://teammem_test@127.0.0.1:{}/{name}\"\n\
         [[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/srv/app.git\"\n\
         local_wiki_path = \"/srv/app.wiki.git\"\nwebhook_secret_env = \"S1\"\n\
         [queue]\nworkers = 1\nlease_seconds = 60\n\
         [dashboard]\nsession_key_file = \"{}\"\n",
        dir.path().join("data").display(),
        proxy.port,
        crate::harness::daemon::dashboard_key_file(dir.path()).display()
    ))
    .unwrap();
    let mut daemon = crate::harness::inproc::start(config).await;
    let enqueued = daemon
        .queue
        .enqueue(crate::queue::pull_request("octo/app", "octo/app", 7), None)
        .await
        .expect("enqueue");
    let id = enqueued.job.id;
    assert_eq!(daemon.started.recv().await, Some(id));

    // The database goes away, then the handler finishes the job; the
    // database comes back once the worker has found it unavailable.
    // (The count is read in process: `/metrics` itself waits for the database.)
    let retries = || teammem::metrics::OUTCOME_RETRIES.get(&["pull_request"]);
    let before = retries();
    proxy.cut();
    daemon.permits.add_permits(1);
    loop_until(|| async { (retries() > before).then_some(()) }).await;
    proxy.restore();

    let job = loop_until(|| async {
        let job = daemon.queue.get(id).await.ok()?;
        (job.state != teammem::queue::JobState::Running).then_some(job)
    })
    .await;
    assert_eq!(job.state, teammem::queue::JobState::Succeeded, "{job:?}");
    assert_eq!(job.attempts, 1, "{job:?}");
    assert_eq!(
        job.receipt,
        Some(json!({"status": "updated", "job": id})),
        "{job:?}"
    );
    daemon.shutdown().await.expect("the daemon stops");
}
