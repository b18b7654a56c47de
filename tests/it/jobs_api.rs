//! `/v1/jobs*` over real HTTP against the in-process daemon: listing with
//! filters and cursor paging, detail with events, cancel and retry rules, token
//! scopes, and graceful shutdown of running jobs.

use serde_json::Value;
use teammem::config::Config;
use teammem::ids::{PullNumber, Sha};
use teammem::queue::{JobKind, NewJob, Origin};

use crate::harness::inproc;

fn config(dir: &std::path::Path, queue: &str) -> Config {
    Config::parse(&format!(
        r#"
[server]
listen = "127.0.0.1:0"
data_dir = "{}/data"

[[sources]]
repository = "octo/app"
local_path = "/srv/app.git"
local_wiki_path = "/srv/app.wiki.git"
webhook_secret_env = "S1"

[[sources]]
repository = "octo/lib"
local_path = "/srv/lib.git"
local_wiki_path = "/srv/lib.wiki.git"
webhook_secret_env = "S2"

[queue]
{queue}
"#,
        dir.display()
    ))
    .unwrap()
}

fn sha(n: u32) -> Sha {
    Sha::parse(&format!("{n:040x}")).unwrap()
}

fn pr_job(source: &str, number: i64) -> NewJob {
    NewJob {
        source: teammem::ids::RepoName::parse(source).unwrap(),
        destination: format!("local:/srv/{source}.wiki.git"),
        origin: Origin::Request,
        kind: JobKind::PullRequest {
            number: PullNumber::new(number as u64).unwrap(),
            merge_sha: sha(number as u32),
        },
        actor: "test".into(),
    }
}

async fn get(url: &str, token: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn post(url: &str, token: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn token(config: &Config, name: &str, repos: &[String]) -> String {
    let pool = teammem::db::open(&config.server.data_dir).await.unwrap();
    teammem::tokens::create(&pool.clone().into(), name, repos)
        .await
        .unwrap()
        .expose()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_cancel_retry_and_scopes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "workers = 1");
    let mut d = inproc::start(cfg.clone()).await;
    let admin = token(&cfg, "admin", &[]).await;
    let app_only = token(&cfg, "app", &["octo/app".into()]).await;

    // One job runs (the gate holds it); the rest stay queued.
    let mut ids = Vec::new();
    for n in 1..=5 {
        ids.push(
            d.queue
                .enqueue(pr_job("octo/app", n), None)
                .await
                .unwrap()
                .job
                .id,
        );
    }
    for n in 1..=3 {
        ids.push(
            d.queue
                .enqueue(pr_job("octo/lib", 100 + n), None)
                .await
                .unwrap()
                .job
                .id,
        );
    }
    let running = d.started.recv().await.unwrap();

    // Paging with a small limit visits every job once, newest first.
    let mut seen = Vec::new();
    let mut url = d.url("/v1/jobs?limit=3");
    loop {
        let (status, body) = get(&url, &admin).await;
        assert_eq!(status, 200, "{body}");
        let jobs = body["jobs"].as_array().unwrap();
        assert!(jobs.len() <= 3);
        seen.extend(jobs.iter().map(|j| j["id"].as_i64().unwrap()));
        match body["next_cursor"].as_str() {
            Some(c) => url = d.url(&format!("/v1/jobs?limit=3&cursor={c}")),
            None => break,
        }
    }
    let mut expected = ids.clone();
    expected.reverse();
    assert_eq!(seen, expected);

    let (_, body) = get(&d.url("/v1/jobs?repository=octo/lib"), &admin).await;
    assert_eq!(body["jobs"].as_array().unwrap().len(), 3);
    let (_, body) = get(&d.url("/v1/jobs?state=running"), &admin).await;
    let jobs = body["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0]["id"], running);

    for bad in ["limit=0", "limit=101", "limit=x", "state=bogus"] {
        let (status, body) = get(&d.url(&format!("/v1/jobs?{bad}")), &admin).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().len() > 10);
    }

    // Detail carries the event trail.
    let (status, body) = get(&d.url(&format!("/v1/jobs/{running}")), &admin).await;
    assert_eq!(status, 200);
    assert_eq!(body["job"]["state"], "running");
    assert!(body["events"].as_array().unwrap().len() >= 2, "{body}");
    let (status, body) = get(&d.url("/v1/jobs/99999"), &admin).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("job_not_found"))
    );
    let (status, _) = get(&d.url("/v1/jobs/abc"), &admin).await;
    assert_eq!(status, 400);

    // Cancel a queued job; a second cancel is refused and changes nothing.
    let queued = *ids.iter().find(|id| **id != running).unwrap();
    let (status, body) = post(&d.url(&format!("/v1/jobs/{queued}/cancel")), &admin).await;
    assert_eq!(
        (status, body["job"]["state"].as_str()),
        (200, Some("cancelled"))
    );
    let events_before = d.queue.events(queued).await.unwrap().len();
    let (status, body) = post(&d.url(&format!("/v1/jobs/{queued}/cancel")), &admin).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("invalid_transition"))
    );
    assert_eq!(d.queue.events(queued).await.unwrap().len(), events_before);

    // Retry: allowed for the cancelled job, refused for running and queued ones.
    let (status, body) = post(&d.url(&format!("/v1/jobs/{running}/retry")), &admin).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("invalid_transition"))
    );
    let (status, body) = post(&d.url(&format!("/v1/jobs/{queued}/retry")), &admin).await;
    assert_eq!(
        (status, body["job"]["state"].as_str()),
        (200, Some("queued"))
    );
    let (status, _) = post(&d.url(&format!("/v1/jobs/{queued}/retry")), &admin).await;
    assert_eq!(status, 409);
    let (status, _) = post(&d.url("/v1/jobs/99999/retry"), &admin).await;
    assert_eq!(status, 404);

    // A token limited to octo/app sees and steers only octo/app.
    let (_, body) = get(&d.url("/v1/jobs?limit=100"), &app_only).await;
    let jobs = body["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 5);
    assert!(jobs.iter().all(|j| j["source"] == "octo/app"));
    let lib_job = ids[6];
    let (status, _) = get(&d.url(&format!("/v1/jobs/{lib_job}")), &app_only).await;
    assert_eq!(status, 404);
    let (status, _) = post(&d.url(&format!("/v1/jobs/{lib_job}/cancel")), &app_only).await;
    assert_eq!(status, 404);
    assert_eq!(d.queue.get(lib_job).await.unwrap().state.as_str(), "queued");
    let (status, body) = get(&d.url("/v1/jobs?repository=octo/lib"), &app_only).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden_repository"))
    );

    d.permits.add_permits(100);
    d.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_a_job_that_does_not_finish_in_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "workers = 1\nshutdown_grace_seconds = 0");
    let mut d = inproc::start(cfg).await;
    let id = d
        .queue
        .enqueue(pr_job("octo/app", 7), None)
        .await
        .unwrap()
        .job
        .id;
    assert_eq!(d.started.recv().await, Some(id));
    let queue = d.queue.clone();
    d.shutdown().await.unwrap();

    let job = queue.get(id).await.unwrap();
    assert_eq!(job.state.as_str(), "queued", "released back to the queue");
    assert_eq!(job.attempts, 0, "a released attempt does not count");
    let events = queue.events(id).await.unwrap();
    assert!(events.iter().any(|e| e.event == "released"), "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_a_running_job_finish_within_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "workers = 1\nshutdown_grace_seconds = 600");
    let mut d = inproc::start(cfg).await;
    let id = d
        .queue
        .enqueue(pr_job("octo/app", 8), None)
        .await
        .unwrap()
        .job
        .id;
    assert_eq!(d.started.recv().await, Some(id));
    let queue = d.queue.clone();
    let permits = d.permits.clone();
    let stopping = tokio::spawn(d.shutdown());
    // The job finishes after shutdown began; the daemon waits for it.
    permits.add_permits(1);
    stopping.await.unwrap().unwrap();
    assert_eq!(queue.get(id).await.unwrap().state.as_str(), "succeeded");
    // Metrics are process-wide and tests share the process: at least this one.
    assert!(teammem::metrics::JOBS_FINISHED.get(&["pull_request", "succeeded"]) >= 1);
}
