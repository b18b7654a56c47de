//! The shipped workflows' `run:` scripts, taken from `workflows/*.yml` as they
//! are (never copied here) and run with bash the way GitHub Actions runs a
//! `shell: bash` step, with the step's `env:` evaluated from a context like the
//! one Actions provides, against the real `teammem serve` on the local forge.
//! A fault-injecting proxy in front of the daemon answers 503 on demand and
//! records what reached it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use crate::harness::daemon::{Daemon, Setup};
use crate::runner::fixture::{self, Source};

const SECRET: &str = "workflow test dispatch secret, at least 32 bytes long";

/// One `shell: bash` step of a workflow: its `env:` (unevaluated) and script.
struct Step {
    env: Vec<(String, String)>,
    script: String,
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The workflow's only step with a `run: |` block: the block scalar, dedented,
/// and the step's `env:` mapping above it.
fn step_of(workflow: &str) -> Step {
    let path = format!("{}/workflows/{workflow}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("workflow file");
    let lines: Vec<&str> = text.lines().collect();
    let run_at = lines
        .iter()
        .position(|l| l.trim() == "run: |")
        .expect("a run: | block");
    assert_eq!(
        lines.iter().filter(|l| l.trim() == "run: |").count(),
        1,
        "one run step in {workflow}"
    );
    let key_indent = indentation(lines[run_at]);
    let block: Vec<&str> = lines[run_at + 1..]
        .iter()
        .take_while(|l| l.trim().is_empty() || indentation(l) > key_indent)
        .copied()
        .collect();
    let block_indent = block
        .iter()
        .find(|l| !l.trim().is_empty())
        .map(|l| indentation(l))
        .expect("a non-empty script");
    let script: String = block
        .iter()
        .map(|l| {
            if l.trim().is_empty() {
                "\n".to_owned()
            } else {
                format!("{}\n", &l[block_indent..])
            }
        })
        .collect();

    let env_at = lines[..run_at]
        .iter()
        .rposition(|l| l.trim() == "env:")
        .expect("the step's env:");
    let env_indent = indentation(lines[env_at]);
    let env = lines[env_at + 1..run_at]
        .iter()
        .take_while(|l| indentation(l) > env_indent)
        .map(|l| {
            let (k, v) = l.trim().split_once(": ").expect("KEY: value");
            (k.to_owned(), v.to_owned())
        })
        .collect();
    Step { env, script }
}

/// The Actions context a run would have; a missing `vars.`/`secrets.` entry
/// evaluates to the empty string, like on GitHub.
struct Context(HashMap<&'static str, String>);

impl Context {
    fn evaluate(&self, value: &str) -> String {
        let Some(expr) = value.strip_prefix("${{").and_then(|v| v.strip_suffix("}}")) else {
            return value.to_owned();
        };
        let expr = expr.trim();
        match self.0.get(expr) {
            Some(v) => v.clone(),
            None if expr.starts_with("vars.") || expr.starts_with("secrets.") => String::new(),
            None => panic!("the test gives no value for {expr}; add it to the context"),
        }
    }
}

/// Runs the step like Actions' `shell: bash`; returns (exit code, stdout + stderr).
async fn run_step(step: &Step, context: &Context) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("step.sh");
    std::fs::write(&script, &step.script).unwrap();
    let runner_temp = dir.path().join("runner-temp");
    std::fs::create_dir(&runner_temp).unwrap();
    let out = tokio::process::Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail"])
        .arg(&script)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("CI", "true")
        .env("GITHUB_ACTIONS", "true")
        .env("RUNNER_TEMP", &runner_temp)
        .envs(step.env.iter().map(|(k, v)| (k, context.evaluate(v))))
        .output()
        .await
        .expect("bash runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// A local-forge daemon with one source (`demo/app`) and its wiki.
struct Fixture {
    _repos: tempfile::TempDir,
    source: Source,
    setup: Setup,
    daemon: Daemon,
    token: String,
}

fn start() -> Fixture {
    let repos = tempfile::tempdir().unwrap();
    let source = Source::create(repos.path());
    let wiki = fixture::wiki(repos.path());
    let setup = Setup::new(&format!(
        "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n",
        source.dir.display(),
        wiki.display()
    ));
    let token = setup.create_token("workflows", &[]);
    let daemon = setup.serve(&[("TEAMMEM_SECRET_DEMO", SECRET)]);
    Fixture {
        _repos: repos,
        source,
        setup,
        daemon,
        token,
    }
}

impl Fixture {
    fn push_context(&self, url: &str, before: &str, after: &str) -> Context {
        Context(HashMap::from([
            ("vars.TEAMMEM_URL", url.to_owned()),
            ("secrets.TEAMMEM_WEBHOOK_SECRET", SECRET.to_owned()),
            ("github.repository", "demo/app".to_owned()),
            ("github.run_id", "4242".to_owned()),
            ("github.run_attempt", "1".to_owned()),
            ("github.event.before", before.to_owned()),
            ("github.sha", after.to_owned()),
        ]))
    }

    async fn job(&self, id: i64) -> Value {
        reqwest::Client::new()
            .get(self.daemon.url(&format!("/v1/jobs/{id}")))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()["job"]
            .clone()
    }
}

/// The job id in "teammem accepted the dispatch: job N (...)".
fn accepted_job(output: &str) -> i64 {
    let rest = output
        .split("teammem accepted the dispatch: job ")
        .nth(1)
        .unwrap_or_else(|| panic!("not accepted: {output}"));
    rest.split(' ').next().unwrap().parse().unwrap()
}

/// What the proxy saw: each request's delivery id.
#[derive(Default)]
struct Seen {
    outages_left: AtomicUsize,
    deliveries: std::sync::Mutex<Vec<String>>,
}

/// A proxy in front of `upstream` that answers `503` + `Retry-After: 0` to the
/// first `outages` requests and forwards the rest unchanged.
async fn proxy(upstream: String, outages: usize) -> (String, Arc<Seen>) {
    use axum::body::Bytes;
    use axum::http::{HeaderMap, StatusCode, Uri};
    use axum::response::IntoResponse;

    let seen = Arc::new(Seen::default());
    seen.outages_left.store(outages, Ordering::SeqCst);
    let state = seen.clone();
    let http = reqwest::Client::new();
    let handler = move |uri: Uri, headers: HeaderMap, body: Bytes| {
        let seen = state.clone();
        let http = http.clone();
        let upstream = upstream.clone();
        async move {
            let delivery = headers
                .get("x-teammem-delivery")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            seen.deliveries.lock().unwrap().push(delivery);
            let outage = seen
                .outages_left
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if outage {
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [("retry-after", "0"), ("content-type", "application/json")],
                    r#"{"error":{"code":"upstream_unavailable","message":"injected outage"}}"#
                        .to_owned(),
                )
                    .into_response();
            }
            let mut request = http.post(format!("{upstream}{}", uri.path()));
            for (name, value) in headers.iter() {
                if name != "host" && name != "content-length" {
                    request = request.header(name.as_str(), value.as_bytes());
                }
            }
            let answer = request.body(body).send().await.expect("daemon answers");
            let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
            let text = answer.text().await.unwrap();
            (status, [("content-type", "application/json")], text).into_response()
        }
    };
    let app = axum::Router::new().fallback(axum::routing::any(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_merge_step_sends_a_dispatch_the_daemon_accepts() {
    let f = start();
    let step = step_of("team-memory-post-merge.yml");
    let context = f.push_context(&f.daemon.url, &f.source.base, &f.source.head);
    let (code, output) = run_step(&step, &context).await;
    assert_eq!(code, 0, "{output}");
    let id = accepted_job(&output);
    let job = f.job(id).await;
    assert_eq!(job["source"], "demo/app", "{job}");
    assert_eq!(job["run_id"], 4242, "the run is the workflow's: {job}");
    let text = job.to_string();
    assert!(
        text.contains(&f.source.base) && text.contains(&f.source.head),
        "the job covers the pushed range: {job}"
    );
    assert!(!output.contains(SECRET), "the secret never printed");

    // The job runs (builtin agent); its wiki publishes are counted on /metrics.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let job = f.job(id).await;
        if !["queued", "running"].contains(&job["state"].as_str().unwrap_or_default()) {
            assert_eq!(job["state"], "succeeded", "{job}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "job {id} never ended");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let metrics = reqwest::get(f.daemon.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let metrics = crate::harness::without_node_label(&metrics);
    let updated = metrics
        .lines()
        .find_map(|l| l.strip_prefix("teammem_wiki_publishes_total{outcome=\"updated\"} "))
        .unwrap_or_else(|| panic!("no updated publishes counted:\n{metrics}"));
    assert!(updated.parse::<u64>().unwrap() >= 1, "{metrics}");
    assert!(
        metrics.contains("teammem_ingest_requests_total{route=\"dispatch\",code=\"accepted\"} 1"),
        "{metrics}"
    );
    drop(f.setup);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_merge_step_retries_503_with_the_same_delivery_and_then_succeeds() {
    let f = start();
    let (url, seen) = proxy(f.daemon.url.clone(), 2).await;
    let step = step_of("team-memory-post-merge.yml");
    let (code, output) =
        run_step(&step, &f.push_context(&url, &f.source.base, &f.source.head)).await;
    assert_eq!(code, 0, "{output}");
    assert_eq!(
        output.matches("::warning::attempt").count(),
        2,
        "two failed attempts reported: {output}"
    );
    assert!(
        output.contains("HTTP 503) upstream_unavailable: injected outage; retrying in 0s"),
        "Retry-After is honoured and the daemon's reason shown: {output}"
    );
    accepted_job(&output);
    let deliveries = seen.deliveries.lock().unwrap().clone();
    assert_eq!(deliveries.len(), 3, "{deliveries:?}");
    assert!(
        deliveries.iter().all(|d| d == &deliveries[0]) && !deliveries[0].is_empty(),
        "a retry is the same delivery: {deliveries:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_merge_step_fails_with_the_daemons_message_on_409_without_retrying() {
    let f = start();
    let (url, seen) = proxy(f.daemon.url.clone(), 0).await;
    let step = step_of("team-memory-post-merge.yml");
    // A range backwards: not a fast-forward.
    let (code, output) =
        run_step(&step, &f.push_context(&url, &f.source.head, &f.source.base)).await;
    assert_eq!(code, 1, "{output}");
    assert!(
        output.contains("::error::teammem refused the dispatch (409) not_fast_forward: "),
        "{output}"
    );
    assert_eq!(
        seen.deliveries.lock().unwrap().len(),
        1,
        "no retry of a 4xx"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_without_the_secret_or_the_url_fails_saying_what_to_set() {
    let f = start();
    let (url, seen) = proxy(f.daemon.url.clone(), 0).await;
    for workflow in ["team-memory-post-merge.yml", "team-memory-request.yml"] {
        let step = step_of(workflow);
        let mut context = f.push_context(&url, &f.source.base, &f.source.head);
        context.0.insert("inputs.pull_number", "12".into());
        context.0.remove("secrets.TEAMMEM_WEBHOOK_SECRET");
        let (code, output) = run_step(&step, &context).await;
        assert_eq!(code, 1, "{workflow}: {output}");
        assert!(
            output.contains("::error::set the repository secret TEAMMEM_WEBHOOK_SECRET"),
            "{workflow}: {output}"
        );

        let mut context = f.push_context("", &f.source.base, &f.source.head);
        context.0.insert("inputs.pull_number", "12".into());
        context.0.remove("vars.TEAMMEM_URL");
        let (code, output) = run_step(&step, &context).await;
        assert_eq!(code, 1, "{workflow}: {output}");
        assert!(
            output.contains("::error::set the repository variable TEAMMEM_URL"),
            "{workflow}: {output}"
        );
    }
    assert!(
        seen.deliveries.lock().unwrap().is_empty(),
        "nothing was sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_step_asks_for_one_merged_pull_request() {
    let f = start();
    let step = step_of("team-memory-request.yml");
    let mut context = f.push_context(&f.daemon.url, &f.source.base, &f.source.head);
    context.0.insert("inputs.pull_number", "12".into());
    let (code, output) = run_step(&step, &context).await;
    assert_eq!(code, 0, "{output}");
    let job = f.job(accepted_job(&output)).await;
    assert_eq!(job["pull_number"], 12, "{job}");
    assert!(job.to_string().contains(&f.source.merge_12), "{job}");

    context.0.insert("inputs.pull_number", "99".into());
    let (code, output) = run_step(&step, &context).await;
    assert_eq!(code, 1, "{output}");
    assert!(
        output.contains("::error::teammem refused the dispatch (409) pull_not_merged: "),
        "{output}"
    );
}
