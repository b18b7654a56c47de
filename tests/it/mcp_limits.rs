//! `/mcp` and the authenticated routes under attack by a token holder (issue
//! 34, finding 4 and the sessions item of finding 6), against the real daemon:
//! a read-only token holding 100 event streams and flooding `initialize`
//! while signed dispatches keep being accepted in their usual time and
//! `/healthz` answers; the connections `/mcp` may hold stop short of the
//! reserve; a principal over its request rate or its streams is answered
//! `429` + `Retry-After`; sessions are capped per principal, stored hashed
//! with a capped subset of `initialize`, and another principal's session
//! answers `404` exactly like an unknown one; an event stream ends at its
//! configured lifetime.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::Digest;

use crate::harness::daemon::Setup;
use crate::harness::fake_github::GitRepo;
use crate::harness::inproc::{self, Running};
use crate::requests::{local_sources, token};

/// The dispatch secret of the flood test's source (long enough for any rule).
const SECRET: &str = "mcp-limits-test-dispatch-secret-0123456789abcdef0123456789abcdef";

fn initialize_body(name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": name, "version": "1"}}})
}

/// `POST /mcp` with `body`, in `session` when given.
async fn post(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    session: Option<&str>,
    body: &Value,
) -> reqwest::Response {
    let mut request = http
        .post(format!("{url}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(body);
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
    }
    tokio::time::timeout(Duration::from_secs(20), request.send())
        .await
        .expect("an answer to POST /mcp within 20 s")
        .expect("POST /mcp")
}

/// `GET` (an event stream) or `DELETE` on `/mcp` in `session`.
async fn on_session(
    http: &reqwest::Client,
    url: &str,
    method: reqwest::Method,
    token: &str,
    session: &str,
) -> reqwest::Response {
    let request = http
        .request(method, format!("{url}/mcp"))
        .bearer_auth(token)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25");
    tokio::time::timeout(Duration::from_secs(20), request.send())
        .await
        .expect("an answer on /mcp within 20 s")
        .expect("/mcp request")
}

/// A handshake-era session of `token`: `initialize`, then `initialized`.
async fn open_session(http: &reqwest::Client, url: &str, token: &str, name: &str) -> String {
    let init = post(http, url, token, None, &initialize_body(name)).await;
    if init.status() != 200 {
        panic!(
            "initialize: {} {}",
            init.status(),
            init.text().await.unwrap()
        );
    }
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    init.text().await.unwrap();
    let initialized = post(
        http,
        url,
        token,
        Some(&session),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(initialized.status(), 202);
    initialized.text().await.unwrap();
    session
}

/// `tools/list` in `session`: the status, and the body read to its end.
async fn tools_list(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    session: &str,
) -> (u16, String) {
    let listed = post(
        http,
        url,
        token,
        Some(session),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    let status = listed.status().as_u16();
    (status, listed.text().await.unwrap())
}

/// A refusal by a limit: its status, its `Retry-After` (present, whole
/// seconds) and its JSON error code.
async fn limited(response: reqwest::Response) -> (u16, u64, String) {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .unwrap_or_else(|| panic!("{status} without Retry-After"))
        .to_str()
        .unwrap()
        .parse::<u64>()
        .expect("Retry-After in seconds");
    let body: Value = response.json().await.expect("a JSON error body");
    let code = body["error"]["code"]
        .as_str()
        .expect("error.code")
        .to_owned();
    assert!(
        !body["error"]["message"].as_str().unwrap().is_empty(),
        "{body}"
    );
    (status, retry_after, code)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Sends one signed range dispatch and returns its status and answer time.
async fn dispatch(http: &reqwest::Client, url: &str, before: &str, after: &str) -> (u16, Duration) {
    let body = serde_json::to_vec(&json!({
        "source_repository": "demo/app", "kind": "range",
        "push_before": before, "push_after": after,
    }))
    .unwrap();
    let started = Instant::now();
    let sent = http
        .post(format!("{url}/v1/dispatch"))
        .header("content-type", "application/json")
        .header(
            "x-hub-signature-256",
            teammem::ingest::signature::sign(SECRET.as_bytes(), &body),
        )
        .header("x-teammem-delivery", uuid::Uuid::new_v4().to_string())
        .body(body)
        .send();
    let response = tokio::time::timeout(Duration::from_secs(10), sent)
        .await
        .expect("a dispatch must be answered within 10 s whatever /mcp clients do")
        .expect("dispatch");
    let status = response.status().as_u16();
    response.text().await.unwrap();
    (status, started.elapsed())
}

/// The SQLite database's size as its connections see it (pages in use,
/// the WAL's included), which grows with what is stored, unlike the WAL
/// file, which grows with every write until a checkpoint.
async fn database_bytes(data_dir: &std::path::Path) -> i64 {
    let pool = teammem::db::open(data_dir).await.unwrap();
    let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
        .fetch_one(&pool)
        .await
        .unwrap();
    let size: i64 = sqlx::query_scalar("PRAGMA page_size")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    pages * size
}

/// Every stored session: (hash, principal, protocol, name, version).
async fn session_rows(data_dir: &std::path::Path) -> Vec<(String, String, String, String, String)> {
    let pool = teammem::db::open(data_dir).await.unwrap();
    let rows = sqlx::query_as(
        "SELECT session_sha256, principal, protocol_version, client_name, client_version \
         FROM mcp_sessions ORDER BY principal, created_at",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    rows
}

/// The attack: a read-only token for one repository tries to hold
/// 100 event streams while four more tokens take every `/mcp` connection
/// they can, and the first floods `initialize` with 64 KiB of client name
/// each. Signed dispatches stay within 5× of their idle median (at least
/// 50 ms: a generous bound for a busy 2-core host; without the limits they
/// are not answered at all), `/healthz` answers, and the sessions table
/// holds at most the cap of small rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_holding_streams_and_flooding_initialize_starves_no_dispatch() {
    let repos = tempfile::tempdir().unwrap();
    let app = GitRepo::init(&repos.path().join("app"));
    let shas = app.commits(16, "change");
    let wiki = crate::runner::fixture::wiki(repos.path());
    let setup = Setup::new(&format!(
        "max_connections = 40\nreserved_connections = 8\n\
         [queue]\nworkers = 1\n\
         [[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_FLOOD\"\n",
        app.dir.display(),
        wiki.display()
    ));
    let reader = setup.create_token("reader", &["demo/app"]);
    let others: Vec<String> = (1..=4)
        .map(|i| setup.create_token(&format!("reader-{i}"), &["demo/app"]))
        .collect();
    let daemon = setup.serve(&[("TEAMMEM_SECRET_FLOOD", SECRET)]);
    let url = daemon.url.clone();
    let mut ranges = (0..shas.len())
        .flat_map(|i| ((i + 1)..shas.len()).map(move |j| (i, j)))
        .map(|(i, j)| (shas[i].clone(), shas[j].clone()));
    let http = reqwest::Client::new();

    // Idle: the usual answer time of a dispatch.
    let mut idle = Vec::new();
    for _ in 0..15 {
        let (before, after) = ranges.next().unwrap();
        let (status, took) = dispatch(&http, &url, &before, &after).await;
        assert!(status == 202 || status == 200, "{status}");
        idle.push(took);
    }
    let idle_p50 = median(idle);
    let bytes_before = database_bytes(&setup.data_dir()).await;

    // The streams: each token opens a session, then tries to hold event
    // streams on it (the reader 100, the others 8 each), all at once.
    let attackers = reqwest::Client::new();
    let mut attempts = tokio::task::JoinSet::new();
    let mut sessions = Vec::new();
    for (token, streams) in std::iter::once((&reader, 100)).chain(others.iter().map(|t| (t, 8))) {
        sessions.push((
            token,
            streams,
            open_session(&attackers, &url, token, "attacker").await,
        ));
    }
    for (token, streams, session) in sessions {
        for _ in 0..streams {
            let (http, url, token, session) = (
                attackers.clone(),
                url.clone(),
                token.clone(),
                session.clone(),
            );
            attempts.spawn(async move {
                let response =
                    on_session(&http, &url, reqwest::Method::GET, &token, &session).await;
                (token, response)
            });
        }
    }
    let mut held = Vec::new();
    let mut held_by_reader = 0;
    let mut refusals = std::collections::BTreeMap::<(u16, String), usize>::new();
    let answered = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(attempt) = attempts.join_next().await {
            let (token, response) = attempt.unwrap();
            if response.status() == 200 {
                held_by_reader += usize::from(token == reader);
                held.push((token, response));
            } else {
                let (status, _, code) = limited(response).await;
                *refusals.entry((status, code)).or_default() += 1;
            }
        }
    })
    .await;
    assert!(
        answered.is_ok(),
        "every stream attempt must be answered (held or refused); the daemon stopped answering"
    );
    assert!(
        held_by_reader <= 8,
        "the reader holds {held_by_reader} streams; its limit is 8"
    );
    assert!(
        held.len() <= 32,
        "{} streams held; /mcp may hold 40 - 8 connections",
        held.len()
    );
    for (status, code) in refusals.keys() {
        assert!(
            matches!(
                (*status, code.as_str()),
                (429, "rate_limited" | "too_many_streams") | (503, "mcp_capacity")
            ),
            "{refusals:?}"
        );
    }

    // The flood: the reader posts initialize as fast as four connections go.
    let stop = tokio_util::sync::CancellationToken::new();
    let mut flood = tokio::task::JoinSet::new();
    let huge = initialize_body(&"x".repeat(64 * 1024));
    for _ in 0..4 {
        let (url, reader, huge, stop) = (url.clone(), reader.clone(), huge.clone(), stop.clone());
        flood.spawn(async move {
            let http = reqwest::Client::new();
            let mut sent = 0u64;
            while !stop.is_cancelled() {
                let send = http
                    .post(format!("{url}/mcp"))
                    .bearer_auth(&reader)
                    .header("accept", "application/json, text/event-stream")
                    .json(&huge)
                    .send();
                tokio::select! {
                    () = stop.cancelled() => break,
                    answer = send => {
                        if let Ok(answer) = answer {
                            let _ = answer.bytes().await;
                        }
                        sent += 1;
                    }
                }
            }
            sent
        });
    }
    let mut flooded = Vec::new();
    for _ in 0..15 {
        let (before, after) = ranges.next().unwrap();
        let (status, took) = dispatch(&http, &url, &before, &after).await;
        assert!(status == 202 || status == 200, "{status}");
        flooded.push(took);
        let health = tokio::time::timeout(
            Duration::from_secs(5),
            http.get(format!("{url}/healthz")).send(),
        )
        .await
        .expect("/healthz answers within 5 s under the flood")
        .unwrap();
        assert_eq!(health.status(), 200);
    }
    stop.cancel();
    let mut sent = 0;
    while let Some(n) = flood.join_next().await {
        sent += n.unwrap();
    }
    let flood_p50 = median(flooded);
    let bound = (idle_p50 * 5).max(Duration::from_millis(50));
    eprintln!(
        "dispatch p50 idle {idle_p50:?}, under the flood {flood_p50:?} ({sent} initialize sent, {} streams held, refusals {refusals:?})",
        held.len()
    );
    assert!(
        flood_p50 <= bound,
        "dispatch p50 under the flood {flood_p50:?} > {bound:?} (idle {idle_p50:?})"
    );
    drop(held);

    // The sessions table holds at most the cap per principal, in small rows.
    let rows = session_rows(&setup.data_dir()).await;
    let reader_rows = rows.iter().filter(|r| r.1 == "token:reader").count();
    assert!(reader_rows <= 32, "{reader_rows} sessions of the reader");
    for row in &rows {
        assert!(
            row.2.len() + row.3.len() + row.4.len() <= 3 * 256,
            "{row:?}"
        );
    }
    let grown = database_bytes(&setup.data_dir()).await - bytes_before;
    assert!(
        grown < 2 * 1024 * 1024,
        "the database grew by {grown} bytes during the attack"
    );
    assert!(daemon.terminate().success());
}

/// The connection reserve alone: with `max_connections = 4` and one
/// reserved, `/mcp` holds three connections; a fourth `/mcp` request is
/// answered `503 mcp_capacity` and its connection closed, and `/healthz`
/// still finds a connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_never_takes_the_reserved_connections() {
    let dir = tempfile::tempdir().unwrap();
    let (text, _, _) = local_sources(dir.path());
    let text = text.replace(
        "[api]",
        "max_connections = 4\nreserved_connections = 1\nheader_timeout_seconds = 30\n[api]",
    );
    let config = teammem::config::Config::parse(&text).unwrap();
    let daemon = inproc::start(config.clone()).await;
    let agent = token(&config, "agent", &[]).await;
    let url = format!("http://{}", daemon.addr);
    let http = reqwest::Client::new();
    let session = open_session(&http, &url, &agent, "reserve").await;
    // Three streams: the first on the connection the session was opened on.
    let mut streams = Vec::new();
    for _ in 0..3 {
        let stream = on_session(&http, &url, reqwest::Method::GET, &agent, &session).await;
        assert_eq!(stream.status(), 200);
        streams.push(stream);
    }
    let fourth = on_session(&http, &url, reqwest::Method::GET, &agent, &session).await;
    assert_eq!(
        fourth
            .headers()
            .get("connection")
            .map(|v| v.to_str().unwrap()),
        Some("close")
    );
    assert_eq!(limited(fourth).await, (503, 1, "mcp_capacity".to_string()));
    let health = tokio::time::timeout(
        Duration::from_secs(5),
        reqwest::Client::new().get(format!("{url}/healthz")).send(),
    )
    .await
    .expect("/healthz must find a reserved connection while /mcp holds the rest")
    .unwrap();
    assert_eq!(health.status(), 200);
    drop(streams);
    daemon.shutdown().await.unwrap();
}

/// A principal past its request rate is answered `429 rate_limited` with
/// `Retry-After` on every authenticated route (one bucket per principal,
/// another token keeps its own); past its open streams, `429
/// too_many_streams`. `/metrics` counts both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_over_a_limit_is_answered_429_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let (text, _, _) = local_sources(dir.path());
    let text = format!(
        "{text}\n[limits]\nrequests_per_second = 1\nrequest_burst = 5\nmcp_streams_per_principal = 2\n"
    );
    let config = teammem::config::Config::parse(&text).unwrap();
    let daemon = inproc::start(config.clone()).await;
    let busy = token(&config, "busy", &[]).await;
    let calm = token(&config, "calm", &[]).await;
    let url = format!("http://{}", daemon.addr);
    let http = reqwest::Client::new();

    // Requests 1-4: a session and two streams, the token's limit ...
    let session = open_session(&http, &url, &busy, "streams").await;
    let first = on_session(&http, &url, reqwest::Method::GET, &busy, &session).await;
    let second = on_session(&http, &url, reqwest::Method::GET, &busy, &session).await;
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    // ... so the fifth, a third stream, is refused for the streams it holds.
    let third = on_session(&http, &url, reqwest::Method::GET, &busy, &session).await;
    let (status, retry_after, code) = limited(third).await;
    assert_eq!(
        (status, retry_after, code.as_str()),
        (429, 1, "too_many_streams")
    );
    // The bucket is empty now: /mcp, the job routes and the request route
    // are refused for the rate, from the one bucket of the token.
    let fourth = on_session(&http, &url, reqwest::Method::GET, &busy, &session).await;
    let (status, retry_after, code) = limited(fourth).await;
    assert_eq!((status, code.as_str()), (429, "rate_limited"));
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    let jobs = http
        .get(format!("{url}/v1/jobs"))
        .bearer_auth(&busy)
        .send()
        .await
        .unwrap();
    assert_eq!(limited(jobs).await.2, "rate_limited");
    let requested = http
        .post(format!("{url}/v1/requests"))
        .bearer_auth(&busy)
        .json(&json!({"repository": "demo/app", "pull_number": 7}))
        .send()
        .await
        .unwrap();
    assert_eq!(limited(requested).await.2, "rate_limited");
    // Another token has its own bucket, and sees that nothing was enqueued.
    let own = http
        .get(format!("{url}/v1/jobs"))
        .bearer_auth(&calm)
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 200);
    let own: Value = own.json().await.unwrap();
    assert_eq!(own["jobs"], json!([]), "{own}");

    let metrics = http
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let metrics = crate::harness::without_node_label(&metrics);
    let count = |limit: &str| -> u64 {
        let series = format!("teammem_http_limited_total{{limit=\"{limit}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .map_or(0, |n| n.parse().unwrap())
    };
    assert!(count("rate") >= 3, "{metrics}");
    assert!(count("mcp_streams") >= 1, "{metrics}");
    drop((first, second));
    daemon.shutdown().await.unwrap();
}

/// A flood of `initialize`, each with 200 KiB of client name and
/// capabilities, within a generous rate: the principal keeps its newest
/// four sessions (the oldest ends: `404`), each row holds the session id's
/// hash and at most 256 bytes of each kept field, and the database hardly
/// grows (it grew by the whole parameters before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_capped_per_principal_and_stored_small() {
    let dir = tempfile::tempdir().unwrap();
    let (text, _, _) = local_sources(dir.path());
    let text = format!(
        "{text}\n[limits]\nrequests_per_second = 100000\nrequest_burst = 100000\nmcp_sessions_per_principal = 4\n"
    );
    let config = teammem::config::Config::parse(&text).unwrap();
    let data_dir = config.server.data_dir.clone();
    let daemon = inproc::start(config.clone()).await;
    let agent = token(&config, "agent", &[]).await;
    let url = format!("http://{}", daemon.addr);
    let http = reqwest::Client::new();
    let before = database_bytes(&data_dir).await;

    let name = "n".repeat(100 * 1024);
    let mut body = initialize_body(&name);
    body["params"]["clientInfo"]["version"] = json!("v".repeat(50 * 1024));
    body["params"]["capabilities"]["experimental"] = json!({"junk": {"x": "j".repeat(50 * 1024)}});
    let mut sessions = Vec::new();
    for _ in 0..60 {
        let init = post(&http, &url, &agent, None, &body).await;
        assert_eq!(init.status(), 200);
        sessions.push(
            init.headers()["mcp-session-id"]
                .to_str()
                .unwrap()
                .to_owned(),
        );
        init.text().await.unwrap();
    }
    let grown = database_bytes(&data_dir).await - before;
    assert!(
        grown < 64 * 1024,
        "60 sessions grew the database by {grown} bytes"
    );
    let rows = session_rows(&data_dir).await;
    assert_eq!(rows.len(), 4, "{rows:?}");
    let newest = sessions.last().unwrap();
    let hash = hex::encode(sha2::Sha256::digest(newest.as_bytes()));
    assert!(rows.iter().any(|r| r.0 == hash));
    for (stored_hash, principal, protocol, name, version) in &rows {
        for id in &sessions {
            for field in [stored_hash, principal, protocol, name, version] {
                assert!(!field.contains(id.as_str()), "a session id in clear");
            }
        }
        assert_eq!(principal, "token:agent");
        assert_eq!(protocol, "2025-11-25");
        assert_eq!((name.len(), version.len()), (256, 256));
    }
    // The newest work, the oldest ended.
    let (status, listed) = tools_list(&http, &url, &agent, newest).await;
    assert_eq!(status, 200, "{listed}");
    assert!(listed.contains("search_wiki"), "{listed}");
    let (status, _) = tools_list(&http, &url, &agent, &sessions[0]).await;
    assert_eq!(status, 404);
    daemon.shutdown().await.unwrap();
}

/// Token B uses token A's session: `GET`, `POST` and `DELETE` are each
/// answered exactly as for a session id nobody opened, and A's session goes
/// on working; A may end it itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principals_session_is_answered_like_an_unknown_one() {
    let local = crate::requests::Local::new();
    let data_dir = local.config.server.data_dir.clone();
    let daemon: Running = inproc::start(local.config.clone()).await;
    let a = token(&local.config, "a", &[]).await;
    let b = token(&local.config, "b", &[]).await;
    let url = format!("http://{}", daemon.addr);
    let http = reqwest::Client::new();
    let session = open_session(&http, &url, &a, "owner").await;
    let unknown = uuid::Uuid::new_v4().to_string();

    async fn answer(response: reqwest::Response) -> (u16, Option<String>, String) {
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned());
        // A request that was served (an event stream) would never end.
        let body = tokio::time::timeout(Duration::from_secs(10), response.text())
            .await
            .expect("an answer, not a stream that another principal was served")
            .unwrap();
        (status, content_type, body)
    }
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let foreign = answer(on_session(&http, &url, method.clone(), &b, &session).await).await;
        let nobody = answer(on_session(&http, &url, method.clone(), &b, &unknown).await).await;
        assert_eq!(foreign.0, 404, "{method} {foreign:?}");
        assert_eq!(foreign, nobody, "{method}");
    }
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let foreign = answer(post(&http, &url, &b, Some(&session), &list).await).await;
    let nobody = answer(post(&http, &url, &b, Some(&unknown), &list).await).await;
    assert_eq!(foreign.0, 404, "{foreign:?}");
    assert_eq!(foreign, nobody);

    // A's session survived B's DELETE; its row names A and holds no id.
    let (status, listed) = tools_list(&http, &url, &a, &session).await;
    assert_eq!(status, 200, "{listed}");
    let rows = session_rows(&data_dir).await;
    assert_eq!(rows.len(), 1);
    let (hash, principal, protocol, name, version) = &rows[0];
    assert_eq!(hash, &hex::encode(sha2::Sha256::digest(session.as_bytes())));
    assert_eq!(
        (
            principal.as_str(),
            protocol.as_str(),
            name.as_str(),
            version.as_str()
        ),
        ("token:a", "2025-11-25", "owner", "1")
    );
    // A ends it; then it is gone for A too.
    let deleted = on_session(&http, &url, reqwest::Method::DELETE, &a, &session).await;
    assert_eq!(deleted.status(), 202);
    let (status, _) = tools_list(&http, &url, &a, &session).await;
    assert_eq!(status, 404);
    assert!(session_rows(&data_dir).await.is_empty());
    daemon.shutdown().await.unwrap();
}

/// With `mcp_stream_lifetime_seconds = 1`, an event stream that would never
/// end by itself is ended by the server after a second (the client would
/// reconnect), and `/metrics` counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_ends_at_its_lifetime() {
    let dir = tempfile::tempdir().unwrap();
    let (text, _, _) = local_sources(dir.path());
    let text = text.replace("[api]", "mcp_stream_lifetime_seconds = 1\n[api]");
    let config = teammem::config::Config::parse(&text).unwrap();
    let daemon = inproc::start(config.clone()).await;
    let agent = token(&config, "agent", &[]).await;
    let url = format!("http://{}", daemon.addr);
    let http = reqwest::Client::new();
    let session = open_session(&http, &url, &agent, "lifetime").await;
    let started = Instant::now();
    let mut stream = on_session(&http, &url, reqwest::Method::GET, &agent, &session).await;
    assert_eq!(stream.status(), 200);
    let ended = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(_chunk) = stream.chunk().await.expect("a clean end, not an error") {}
    })
    .await;
    assert!(ended.is_ok(), "the event stream outlived its lifetime");
    let lived = started.elapsed();
    assert!(lived >= Duration::from_millis(900), "{lived:?}");
    // The session itself goes on: the client reconnects.
    let again = on_session(&http, &url, reqwest::Method::GET, &agent, &session).await;
    assert_eq!(again.status(), 200);
    drop(again);
    let metrics = http
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let metrics = crate::harness::without_node_label(&metrics);
    let expired = metrics
        .lines()
        .find_map(|l| l.strip_prefix("teammem_mcp_streams_expired_total "))
        .map_or(0, |n| n.parse::<u64>().unwrap());
    assert!(expired >= 1, "{metrics}");
    daemon.shutdown().await.unwrap();
}
