//! Talking to a real `teammem serve` process from the runner tests: signed
//! dispatches, following a job through `GET /v1/jobs`, the builtin agent's
//! hold point (cargo feature `test-hooks`, see `src/runner/test_hooks.rs`),
//! and the wiki read back with the git CLI (entries counted by their markers,
//! commits counted on the branch).
//!
//! Invariant: every helper observes the daemon from outside — over HTTP, or
//! through the files and repositories it writes — never through its library.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use teammem::runner::test_hooks::HOLD_DIR;

use super::fixture;
use crate::harness::daemon::Daemon;
use crate::harness::git::{git, git_trimmed};

/// How long a test follows one job before it fails (a rescued job waits out
/// its 15-30 s retry backoff inside this).
const JOB_DEADLINE: Duration = Duration::from_secs(90);

/// How long a test waits for the daemon to reach its hold point.
const HOLD_DEADLINE: Duration = Duration::from_secs(60);

/// How often a condition is looked at again while waiting for it: under the
/// daemon's default rate per token (`limits.requests_per_second`, 20/s).
const POLL: Duration = Duration::from_millis(60);

/// `GET path` with `token`, as a well-behaved client: a `429` is asked
/// again after the `Retry-After` it names (several waiters may share a token).
async fn get_json(daemon: &Daemon, token: &str, path: &str) -> Value {
    let deadline = Instant::now() + JOB_DEADLINE;
    loop {
        let answer = reqwest::Client::new()
            .get(daemon.url(path))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        if answer.status() == 429 && Instant::now() < deadline {
            let wait = answer
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                .unwrap_or(1);
            tokio::time::sleep(Duration::from_secs(wait)).await;
            continue;
        }
        return answer.json().await.unwrap();
    }
}

/// The `X-Hub-Signature-256` header of `body` under `secret`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Posts `body` to `/v1/dispatch`, signed with `secret`, under a new delivery
/// id; the status and the JSON answer.
pub async fn post_dispatch(daemon: &Daemon, secret: &str, body: &Value) -> (u16, Value) {
    let body = serde_json::to_vec(body).unwrap();
    let answer = reqwest::Client::new()
        .post(daemon.url("/v1/dispatch"))
        .header("Content-Type", "application/json")
        .header("X-Hub-Signature-256", signature(secret, &body))
        .header("X-TeamMem-Delivery", uuid::Uuid::new_v4().to_string())
        .body(body)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    (status, answer.json().await.unwrap())
}

/// `GET /v1/jobs/{id}`: the job and its events.
pub async fn job(daemon: &Daemon, token: &str, id: i64) -> (Value, Value) {
    let answer = get_json(daemon, token, &format!("/v1/jobs/{id}")).await;
    assert!(answer["job"].is_object(), "job {id}: {answer}");
    (answer["job"].clone(), answer["events"].clone())
}

/// Every job the daemon holds, newest first (`GET /v1/jobs`, one page).
pub async fn jobs(daemon: &Daemon, token: &str) -> Vec<Value> {
    let answer = get_json(daemon, token, "/v1/jobs?limit=100").await;
    assert_eq!(answer["next_cursor"], Value::Null, "{answer}");
    answer["jobs"].as_array().cloned().unwrap_or_default()
}

/// Polls `GET /v1/jobs/{id}` until `done(job)` holds (bounded by a deadline).
pub async fn wait_for(
    daemon: &Daemon,
    token: &str,
    id: i64,
    done: impl Fn(&Value) -> bool,
) -> (Value, Value) {
    let deadline = Instant::now() + JOB_DEADLINE;
    loop {
        let (job, events) = job(daemon, token, id).await;
        if done(&job) {
            return (job, events);
        }
        assert!(
            Instant::now() < deadline,
            "job {id} did not get there: {job} {events}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// The job left `queued` and `running` for good.
/// Sends a signed range dispatch for `demo/app` (`before..after`, run
/// `run`), waits for its job and asserts it succeeded; the job.
pub async fn range_job_succeeds(
    daemon: &Daemon,
    token: &str,
    secret: &str,
    run: u64,
    before: &str,
    after: &str,
) -> Value {
    let (job, events) = range_job(daemon, token, secret, run, before, after).await;
    assert_eq!(job["state"], "succeeded", "{job} {events}");
    job
}

/// Dispatches `before..after` of `demo/app` as workflow run `run` and waits
/// for its job to end: the job and its events.
pub async fn range_job(
    daemon: &Daemon,
    token: &str,
    secret: &str,
    run: u64,
    before: &str,
    after: &str,
) -> (Value, Value) {
    let (status, answer) = post_dispatch(
        daemon,
        secret,
        &json!({
            "source_repository": "demo/app", "kind": "range",
            "source_run_id": run, "source_run_attempt": 1,
            "push_before": before, "push_after": after,
        }),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["job_id"].as_i64().unwrap();
    wait_for(daemon, token, id, finished).await
}

pub fn finished(job: &Value) -> bool {
    !matches!(job["state"].as_str(), Some("queued" | "running"))
}

/// The hold point of a daemon started with [`Holds::env`]: its builtin agent
/// stops before every wiki write until the test releases it.
pub struct Holds {
    dir: tempfile::TempDir,
    seen: u64,
}

/// One hold the daemon is waiting in; [`Held::release`] lets it write.
#[must_use = "a held job waits until it is released"]
pub struct Held {
    release: PathBuf,
    /// The builtin agent's write attempt: 0, or 1 when it rebuilds after a conflict.
    pub attempt: u32,
}

impl Holds {
    pub fn new() -> Holds {
        Holds {
            dir: tempfile::tempdir().unwrap(),
            seen: 0,
        }
    }

    /// The environment variable that switches the hold point on.
    pub fn env(&self) -> (&'static str, &str) {
        (HOLD_DIR, self.dir.path().to_str().unwrap())
    }

    /// Waits until the daemon is held at its next write (bounded).
    pub async fn next(&mut self) -> Held {
        self.seen += 1;
        let held = self.dir.path().join(format!("held-{}", self.seen));
        let deadline = Instant::now() + HOLD_DEADLINE;
        while !held.exists() {
            assert!(
                Instant::now() < deadline,
                "the daemon never reached hold {}",
                self.seen
            );
            tokio::time::sleep(POLL).await;
        }
        Held {
            release: self.dir.path().join(format!("release-{}", self.seen)),
            attempt: std::fs::read_to_string(&held).unwrap().parse().unwrap(),
        }
    }
}

impl Held {
    pub fn release(self) {
        std::fs::write(&self.release, "").unwrap();
    }
}

/// How many times the entry of merge commit `sha` is on `page` of the wiki's
/// `master` (its `<!-- teammem:<sha> -->` marker; 0 when the page is absent).
pub fn entries(wiki: &Path, page: &str, sha: &str) -> usize {
    let listed = git_trimmed(wiki, &["ls-tree", "--name-only", "master", page]);
    if listed.is_empty() {
        return 0;
    }
    git_trimmed(wiki, &["show", &format!("master:{page}")])
        .matches(&format!("<!-- teammem:{sha} -->"))
        .count()
}

/// Asserts that each `(sha, pages)` entry is on the Changelog and on each of
/// its area pages exactly once, citing the full sha.
pub fn assert_each_entry_once(wiki: &Path, expected: &[(&str, &[&str])]) {
    for (sha, areas) in expected {
        for page in std::iter::once(&"Changelog.md").chain(areas.iter()) {
            assert_eq!(
                entries(wiki, page, sha),
                1,
                "{sha} on {page}:\n{}",
                git_trimmed(wiki, &["show", &format!("master:{page}")])
            );
        }
    }
}

/// For each commit on the wiki's `master` after `since`, newest first, the job
/// its `Teammem-Job` trailer names (`None`: a commit not made by a job).
pub fn jobs_of_commits(wiki: &Path, since: &str) -> Vec<Option<i64>> {
    let log = git_trimmed(
        wiki,
        &[
            "log",
            "--format=commit %(trailers:key=Teammem-Job,valueonly,separator=%x2C)",
            &format!("{since}..master"),
        ],
    );
    log.lines()
        .filter_map(|line| line.strip_prefix("commit"))
        .map(|job| job.trim().parse().ok())
        .collect()
}

/// The wiki's `master` tip.
pub fn wiki_tip(wiki: &Path) -> String {
    git_trimmed(wiki, &["rev-parse", "master"])
}

/// Another writer: a clone of the bare wiki on disk commits `file` and pushes
/// to `master`, as a person editing the wiki would.
pub fn another_writer(wiki: &Path, file: &str, content: &str) {
    let work = tempfile::tempdir().unwrap();
    let clone = work.path().join("wiki");
    git(
        work.path(),
        &[
            "clone",
            "-q",
            wiki.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    fixture::write(&clone, file, content);
    git(&clone, &["add", "-A"]);
    git(&clone, &["commit", "-q", "-m", "A person edits the wiki"]);
    git(&clone, &["push", "-q", "origin", "HEAD:master"]);
}
