//! `POST /v1/dispatch` through the real HTTP router and a real SQLite queue,
//! against the fake GitHub: accepted, replayed and coalesced deliveries, and
//! every refusal with its status, JSON code and `Retry-After`, each shown to
//! leave the database unchanged by counting rows.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use serde_json::{Value, json};
use teammem::http::{AppState, router};
use teammem::ingest::signature;
use tokio::sync::Notify;

use crate::dispatch::{Fixture, SECRET, ingest_for, run};
use crate::harness::fake_github::{FakePull, FakeRun, Fault};

struct Server {
    f: Fixture,
    addr: SocketAddr,
    pool: sqlx::SqlitePool,
    wake: Arc<Notify>,
    http: reqwest::Client,
}

impl Server {
    async fn start() -> Server {
        let f = Fixture::new().await;
        let data = f.config.server.data_dir.clone();
        let pool = teammem::db::open(&data).await.unwrap();
        teammem::db::migrate(&pool).await.unwrap();
        let queue = teammem::queue::Queue::from_config(&f.config, pool.clone());
        let wake = Arc::new(Notify::new());
        let ingest = ingest_for(
            &f.config,
            f.forge.clone(),
            std::time::Duration::from_secs(3600),
        );
        let state = AppState::new(
            Arc::new(f.config.clone()),
            pool.clone(),
            queue,
            wake.clone(),
            Arc::new(AtomicUsize::new(1)),
            [7u8; 32],
        )
        .with_ingest(Arc::new(ingest));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(
                listener,
                router(state).into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
            .unwrap();
        });
        Server {
            f,
            addr,
            pool,
            wake,
            http: reqwest::Client::new(),
        }
    }

    async fn rows(&self) -> (i64, i64, i64, i64) {
        let count = |table: &'static str| {
            let pool = self.pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
                    "SELECT COUNT(*) FROM {table}"
                )))
                .fetch_one(&pool)
                .await
                .unwrap()
            }
        };
        (
            count("jobs").await,
            count("deliveries").await,
            count("job_identities").await,
            count("job_events").await,
        )
    }

    async fn post(&self, body: &[u8], headers: &[(&str, String)]) -> (u16, Option<String>, Value) {
        let mut req = self
            .http
            .post(format!("http://{}/v1/dispatch", self.addr))
            .body(body.to_vec());
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let retry = resp
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string());
        let json = resp.json().await.unwrap_or(Value::Null);
        (status, retry, json)
    }

    /// A correctly signed dispatch of `body` with delivery `delivery`.
    async fn signed(&self, body: &Value, delivery: &str) -> (u16, Option<String>, Value) {
        let raw = serde_json::to_vec(body).unwrap();
        self.post(
            &raw,
            &[
                ("content-type", "application/json".into()),
                ("x-hub-signature-256", signature::sign(SECRET, &raw)),
                ("x-teammem-delivery", delivery.into()),
            ],
        )
        .await
    }
}

#[tokio::test]
async fn accepted_replayed_and_coalesced_dispatches() {
    let s = Server::start().await;
    let (status, _, body) = s.signed(&s.f.range("octo/app"), "delivery-1").await;
    assert_eq!(status, 202, "{body}");
    let job = body["job_id"].as_i64().unwrap();
    assert_eq!(body["state"], "queued");
    assert_eq!(body["coalesced_into"], Value::Null);
    // The workers were woken (the permit is stored, so this returns at once).
    s.wake.notified().await;
    assert_eq!(s.rows().await.0, 1);

    // A replayed delivery: 200, the same job, nothing new stored.
    let rows = s.rows().await;
    let (status, _, body) = s.signed(&s.f.range("octo/app"), "delivery-1").await;
    assert_eq!((status, body["job_id"].as_i64()), (200, Some(job)));
    assert_eq!(s.rows().await.0, rows.0);
    // The same run under a new delivery id is the same job too.
    let (status, _, body) = s.signed(&s.f.range("octo/app"), "delivery-2").await;
    assert_eq!((status, body["job_id"].as_i64()), (200, Some(job)));
    assert_eq!(s.rows().await.0, 1);

    // The next push, while the first job is still queued, coalesces into it.
    let next = s.f.git.commit("next.txt", "next push");
    s.f.fake.add_run("octo/app", 78, 1, run(s.f.app_id, &next));
    let body = json!({
        "source_repository": "octo/app", "kind": "range",
        "source_run_id": 78, "source_run_attempt": 1,
        "push_before": s.f.after, "push_after": next,
    });
    let (status, _, answer) = s.signed(&body, "delivery-3").await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["coalesced_into"].as_i64(), Some(job));
    assert_eq!(answer["job_id"].as_i64(), Some(job));
    assert_eq!(s.rows().await.0, 1);

    // Answers are counted by code (process-wide counters: at least these).
    let metrics = s
        .http
        .get(format!("http://{}/metrics", s.addr))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let metrics = crate::harness::without_node_label(&metrics);
    let count = |code: &str| {
        let prefix =
            format!("teammem_ingest_requests_total{{route=\"dispatch\",code=\"{code}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert!(
        count("accepted") >= 2 && count("duplicate") >= 2,
        "{metrics}"
    );
    // Their answer times and the queue's commits are measured too.
    let value = |name: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert!(
        value("teammem_ingest_request_seconds_count{route=\"dispatch\"}") >= 4,
        "{metrics}"
    );
    assert!(
        value("teammem_queue_commit_seconds_count") >= 2,
        "{metrics}"
    );
}

#[tokio::test]
async fn every_refusal_has_its_status_and_code_and_stores_nothing() {
    let s = Server::start().await;
    // One accepted job first, so "unchanged" is measured against a non-empty database.
    assert_eq!(s.signed(&s.f.range("octo/app"), "ok-1").await.0, 202);
    s.f.fake.add_pull(
        "octo/app",
        5,
        FakePull {
            merged: false,
            base_ref: "main".into(),
            merge_commit_sha: None,
            title: "open".into(),
        },
    );
    let before = s.rows().await;

    let good = serde_json::to_vec(&s.f.range("octo/app")).unwrap();
    let good_sig = signature::sign(SECRET, &good);
    let hdrs = |ct: &str, sig: Option<&str>, delivery: Option<&str>| {
        let mut h = vec![("content-type", ct.to_string())];
        if let Some(sig) = sig {
            h.push(("x-hub-signature-256", sig.to_string()));
        }
        if let Some(d) = delivery {
            h.push(("x-teammem-delivery", d.to_string()));
        }
        h
    };
    let json_ct = "application/json";

    // Raw-request refusals.
    let mut tampered = good.clone();
    let last = tampered.len() - 2;
    tampered[last] ^= 1;
    let big = vec![b' '; 64 * 1024 + 1];
    type Case<'a> = (Vec<u8>, Vec<(&'a str, String)>, u16, &'a str);
    let raw_cases: Vec<Case> = vec![
        (
            tampered.clone(),
            hdrs(json_ct, Some(&good_sig), Some("x-1")),
            401,
            "bad_signature",
        ),
        (
            good.clone(),
            hdrs(json_ct, None, Some("x-2")),
            401,
            "missing_signature",
        ),
        (
            good.clone(),
            hdrs("text/plain", Some(&good_sig), Some("x-3")),
            415,
            "unsupported_media_type",
        ),
        (
            big,
            hdrs(json_ct, Some(&good_sig), Some("x-4")),
            413,
            "body_too_large",
        ),
        (
            b"{not json".to_vec(),
            hdrs(json_ct, Some(&good_sig), Some("x-5")),
            400,
            "invalid_json",
        ),
        (
            good.clone(),
            hdrs(json_ct, Some(&good_sig), None),
            400,
            "invalid_delivery",
        ),
    ];
    for (body, headers, status, code) in raw_cases {
        let (got, _, answer) = s.post(&body, &headers).await;
        assert_eq!(
            (got, answer["error"]["code"].as_str()),
            (status, Some(code)),
            "{answer}"
        );
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
        assert_eq!(s.rows().await, before, "{code} stored something");
    }

    // Signed requests that fail later checks.
    let mut cases: Vec<(Value, u16, &str)> = Vec::new();
    cases.push((s.f.range("octo/unknown"), 403, "unknown_source"));
    let mut b = s.f.range("octo/app");
    b["push_after"] = json!("xyz");
    cases.push((b, 422, "invalid_field"));
    let mut b = s.f.range("octo/app");
    b["source_run_id"] = json!(4040);
    cases.push((b, 409, "run_not_found"));
    s.f.fake.add_run(
        "octo/app",
        4041,
        1,
        FakeRun {
            event: "schedule".into(),
            ..run(s.f.app_id, &s.f.after)
        },
    );
    let mut b = s.f.range("octo/app");
    b["source_run_id"] = json!(4041);
    cases.push((b, 409, "run_mismatch"));
    let mut b = s.f.range("octo/app");
    b["push_before"] = json!("0".repeat(40));
    cases.push((b, 409, "zero_sha"));
    let mut b = s.f.range("octo/app");
    b["push_before"] = json!(s.f.after);
    cases.push((b, 409, "empty_range"));
    cases.push((
        json!({"source_repository": "octo/app", "kind": "pull_request",
               "source_run_id": 88, "source_run_attempt": 2, "pull_number": 5}),
        409,
        "pull_not_merged",
    ));
    cases.push((s.f.range("octo/oidc"), 401, "oidc_missing"));
    for (i, (body, status, code)) in cases.into_iter().enumerate() {
        let (got, _, answer) = s.signed(&body, &format!("refused-{i}")).await;
        assert_eq!(
            (got, answer["error"]["code"].as_str()),
            (status, Some(code)),
            "{answer}"
        );
        assert_eq!(s.rows().await, before, "{code} stored something");
    }

    // Not a fast-forward, and a force-pushed branch.
    s.f.git.git(&["checkout", "-q", "-b", "side", &s.f.before]);
    let side = s.f.git.commit("side.txt", "side");
    s.f.git.git(&["checkout", "-q", "main"]);
    let mut b = s.f.range("octo/app");
    b["push_before"] = json!(side);
    let (got, _, answer) = s.signed(&b, "nff").await;
    assert_eq!(
        (got, answer["error"]["code"].as_str()),
        (409, Some("not_fast_forward"))
    );

    // GitHub down: 503 with Retry-After, nothing queued.
    s.f.fake
        .inject("/compare/", Fault::TooManyRequests { retry_after: 42 });
    let (got, retry, answer) = s.signed(&s.f.range("octo/app"), "limited").await;
    assert_eq!(
        (got, answer["error"]["code"].as_str()),
        (503, Some("upstream_unavailable"))
    );
    assert_eq!(retry.as_deref(), Some("42"));
    assert_eq!(s.rows().await, before);

    s.f.git.reset_main(&s.f.before);
    s.f.git.commit("rewrite.txt", "rewritten");
    let (got, _, answer) = s.signed(&s.f.range("octo/app"), "forced").await;
    assert_eq!(
        (got, answer["error"]["code"].as_str()),
        (409, Some("not_on_default_branch"))
    );
    assert_eq!(s.rows().await, before);
}

#[tokio::test]
async fn an_oidc_source_is_accepted_over_http_with_its_token() {
    let s = Server::start().await;
    let raw = serde_json::to_vec(&s.f.range("octo/oidc")).unwrap();
    let token =
        s.f.fake
            .mint_oidc(crate::harness::fake_github::OIDC_KID_1, &s.f.claims());
    let (status, _, body) = s
        .post(
            &raw,
            &[
                ("content-type", "application/json".into()),
                ("x-hub-signature-256", signature::sign(SECRET, &raw)),
                ("x-teammem-delivery", "oidc-1".into()),
                ("authorization", format!("Bearer {token}")),
            ],
        )
        .await;
    assert_eq!(status, 202, "{body}");
}
