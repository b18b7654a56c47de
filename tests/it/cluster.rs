//! Several `teammem serve` nodes on one real PostgreSQL server, each with its
//! own data directory: any node takes a dispatch and any node runs it; a
//! token made with one node's configuration authenticates on the others; a
//! dashboard login on one node is valid on another; a replay sent to another
//! node answers with the same job; the wiki gets the job's one commit; one
//! node at a time holds the leader role, and it moves when that node stops.

use serde_json::json;

use crate::harness::daemon::Setup;
use crate::harness::postgres;
use crate::runner::daemon_client::{finished, jobs_of_commits, post_dispatch, wait_for, wiki_tip};
use crate::runner::fixture;

const SECRET: &str = "cluster dispatch secret";

/// The configuration of one node: the shared database, its own node id, and
/// the shared sources.
fn node_config(url: &str, node: &str, source: &fixture::Source, wiki: &std::path::Path) -> String {
    format!(
        "node_id = \"{node}\"\n\
         [database]\nurl = \"{url}\"\n\
         [[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\n\
         webhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n",
        source.dir.display(),
        wiki.display()
    )
}

#[tokio::test]
async fn nodes_on_one_postgres_share_jobs_tokens_and_dashboard_sessions() {
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
    assert!(on_b.text().await.unwrap().contains("succeeded"));

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

    // One leader; when it stops, the other node takes over.
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
    assert!(stopping.terminate().success());
    loop_until(|| async { (role(&staying).await == "leader").then_some(()) }).await;
    assert_eq!(lock_holders(&url).await, [format!("teammem {follower}")]);
}

/// The role `/readyz` reports.
async fn role(node: &crate::harness::daemon::Daemon) -> String {
    let body: serde_json::Value = reqwest::get(node.url("/readyz"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["role"].as_str().unwrap_or_default().to_string()
}

/// The application names of the connections holding the leader lock.
async fn lock_holders(url: &str) -> Vec<String> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query_scalar(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
         WHERE l.locktype = 'advisory' AND l.granted \
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
