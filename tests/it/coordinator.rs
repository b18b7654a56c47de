//! The coordinator MCP server through rmcp's own client: over Streamable HTTP at
//! the in-process daemon's `/mcp` in both protocol eras (handshake 2025-11-25
//! sessions and stateless 2026-07-28 with `server/discover`), and over stdio
//! from the real `teammem mcp --config FILE` process. Tasks map to queue jobs
//! and survive a daemon restart; token scope, `--read-only`, `Origin` and bad
//! arguments are each refused without changing anything.

use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, ProtocolVersion, TaskStatus,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService, ServiceError,
};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};
use teammem::queue::JobState;

use crate::harness::inproc::{self, Running};
use crate::requests::{Local, token};

pub(crate) type Client = RunningService<RoleClient, ClientConfig>;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Era {
    /// `initialize` at 2025-11-25, a session.
    Handshake,
    /// `server/discover`, stateless 2026-07-28 requests.
    Stateless,
}

fn client_info(tasks: bool) -> ClientConfig {
    let capabilities = if tasks {
        ClientCapabilities::builder().enable_tasks().build()
    } else {
        ClientCapabilities::default()
    };
    ClientConfig::new(capabilities, Implementation::new("teammem-tests", "1"))
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
}

pub(crate) async fn connect(daemon: &Running, token: &str, era: Era, tasks: bool) -> Client {
    connect_to(daemon.url("/mcp"), token, era, tasks).await
}

/// [`connect`] to the MCP endpoint at `url` (a daemon of any kind).
pub(crate) async fn connect_to(url: String, token: &str, era: Era, tasks: bool) -> Client {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    let lifecycle = match era {
        Era::Handshake => ClientLifecycleMode::Initialize,
        Era::Stateless => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    };
    client_info(tasks)
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .unwrap_or_else(|e| panic!("{era:?} connection: {e}"))
}

fn args(value: Value) -> CallToolRequestParams {
    let Value::Object(_) = &value else {
        panic!("an object")
    };
    let mut parts = value.as_object().unwrap().clone();
    let name = parts.remove("tool").unwrap();
    let Some(Value::Object(arguments)) = parts.remove("arguments") else {
        panic!("arguments")
    };
    CallToolRequestParams::new(name.as_str().unwrap().to_owned()).with_arguments(arguments)
}

async fn call(
    client: &Client,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResponse, ServiceError> {
    client
        .call_tool_once(args(json!({"tool": tool, "arguments": arguments})))
        .await
}

/// A tool call that must answer with an envelope (not a task, not an error).
pub(crate) async fn envelope(client: &Client, tool: &str, arguments: Value) -> Value {
    match call(client, tool, arguments).await {
        Ok(CallToolResponse::Complete(result)) => {
            let envelope = result
                .structured_content
                .clone()
                .expect("structuredContent");
            assert_eq!(
                result.is_error == Some(true),
                envelope["success"] == json!(false),
                "{envelope}"
            );
            envelope
        }
        other => panic!("{tool} should answer an envelope, got {other:?}"),
    }
}

pub(crate) async fn task_id(client: &Client, repository: &str, pull: i64) -> String {
    match call(
        client,
        "request_pr_reconciliation",
        json!({"repository": repository, "pull_number": pull}),
    )
    .await
    {
        Ok(CallToolResponse::Task(created)) => {
            assert_eq!(created.task.status, TaskStatus::Working);
            assert!(created.task.poll_interval_ms.is_some());
            created.task.task_id.clone()
        }
        other => panic!("a task was expected, got {other:?}"),
    }
}

/// Polls `tasks/get` (as a client honoring pollIntervalMs would, faster) until
/// the task leaves `working`.
pub(crate) async fn until_settled(client: &Client, id: &str) -> rmcp::model::GetTaskResult {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = client
            .get_task(GetTaskParams::new(id.to_string()))
            .await
            .expect("tasks/get");
        if got.task.task.status != TaskStatus::Working {
            return got;
        }
        assert!(Instant::now() < deadline, "task {id} stayed working");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn rpc_code(result: Result<impl std::fmt::Debug, ServiceError>) -> i32 {
    match result {
        Err(ServiceError::McpError(e)) => e.code.0,
        other => panic!("a JSON-RPC error was expected, got {other:?}"),
    }
}

const COORDINATOR: [&str; 3] = ["request_pr_reconciliation", "get_job", "list_jobs"];

#[tokio::test]
async fn http_both_eras_list_read_request_and_follow_a_task_across_a_restart() {
    let local = Local::new();
    let mut daemon = inproc::start(local.config.clone()).await;
    let all = token(&local.config, "agent", &[]).await;

    for era in [Era::Handshake, Era::Stateless] {
        let client = connect(&daemon, &all, era, true).await;
        let tools: Vec<String> = client
            .list_all_tools()
            .await
            .unwrap()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        for name in COORDINATOR
            .iter()
            .chain(&["get_wiki_snapshot", "search_wiki"])
        {
            assert!(tools.contains(&name.to_string()), "{era:?}: {tools:?}");
        }
        assert!(!tools.contains(&"write_wiki_pages".to_string()));
        let request = client
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .find(|t| t.name == "request_pr_reconciliation")
            .unwrap();
        let hints = request.annotations.unwrap();
        assert_eq!(
            (
                hints.read_only_hint,
                hints.destructive_hint,
                hints.idempotent_hint,
                hints.open_world_hint
            ),
            (Some(false), Some(false), Some(true), Some(true))
        );
        let snapshot = envelope(
            &client,
            "get_wiki_snapshot",
            json!({"repository": "demo/app"}),
        )
        .await;
        assert_eq!(snapshot["success"], true, "{era:?}: {snapshot}");
        client.cancel().await.unwrap();
    }

    // A handshake-era client that declared the tasks extension gets a
    // synchronous answer with the job id and state, never a task.
    let legacy = connect(&daemon, &all, Era::Handshake, true).await;
    let sync = envelope(
        &legacy,
        "request_pr_reconciliation",
        json!({"repository": "demo/app", "pull_number": 8}),
    )
    .await;
    assert_eq!(sync["success"], true, "{sync}");
    let sync_job = sync["result"]["job_id"].as_i64().expect("job_id");
    assert_eq!(sync["result"]["state"], "queued");
    let started = daemon.started.recv().await.unwrap();
    assert_eq!(started, sync_job);
    daemon.permits.add_permits(1);
    legacy.cancel().await.unwrap();

    // A 2026-07-28 client with the extension gets a task mapped to the job.
    let modern = connect(&daemon, &all, Era::Stateless, true).await;
    let id = task_id(&modern, "demo/app", 7).await;
    let job = daemon.started.recv().await.unwrap();
    assert_eq!(id, format!("job-{job}"));
    let working = modern
        .get_task(GetTaskParams::new(id.clone()))
        .await
        .unwrap();
    assert_eq!(working.task.task.status, TaskStatus::Working);
    // The same PR again is the same job (idempotent), still a task.
    assert_eq!(task_id(&modern, "demo/app", 7).await, id);
    modern.cancel().await.unwrap();

    // Restart the daemon on the same data directory: the task is still there.
    daemon.permits.add_permits(1);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !daemon.queue.get(job).await.unwrap().state.is_terminal() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    daemon.shutdown().await.unwrap();
    let daemon = inproc::start(local.config.clone()).await;
    let modern = connect(&daemon, &all, Era::Stateless, true).await;
    let done = until_settled(&modern, &id).await;
    assert_eq!(done.task.task.status, TaskStatus::Completed);
    let rmcp::model::TaskPayload::Completed { result } = &done.task.payload else {
        panic!("completed carries the result")
    };
    let envelope = &result["structuredContent"];
    assert_eq!(envelope["success"], true, "{result:?}");
    assert_eq!(envelope["result"]["state"], "succeeded");
    assert_eq!(envelope["result"]["receipt"]["job"], job);
    let got = envelope_of(&modern, "get_job", json!({"job_id": job})).await;
    assert_eq!(got["result"]["state"], "succeeded");
    modern.cancel().await.unwrap();
    daemon.shutdown().await.unwrap();
}

async fn envelope_of(client: &Client, tool: &str, arguments: Value) -> Value {
    envelope(client, tool, arguments).await
}

#[tokio::test]
async fn tasks_cancel_cancels_the_job_and_unknown_tasks_are_invalid_params() {
    let local = Local::new();
    let mut daemon = inproc::start(local.config.clone()).await;
    let all = token(&local.config, "agent", &[]).await;
    let modern = connect(&daemon, &all, Era::Stateless, true).await;
    let id = task_id(&modern, "demo/app", 8).await;
    let job = daemon.started.recv().await.unwrap();
    modern
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .expect("tasks/cancel");
    assert_eq!(
        daemon.queue.get(job).await.unwrap().state,
        JobState::Cancelled
    );
    let got = modern
        .get_task(GetTaskParams::new(id.clone()))
        .await
        .unwrap();
    assert_eq!(got.task.task.status, TaskStatus::Cancelled);
    // Cancelling a finished task is refused and changes nothing.
    let again = modern.cancel_task(CancelTaskParams::new(id.clone())).await;
    assert_eq!(rpc_code(again), -32602);
    for unknown in ["job-999999", "nonsense", "job-0"] {
        let result = modern
            .get_task(GetTaskParams::new(unknown.to_string()))
            .await;
        assert_eq!(rpc_code(result), -32602, "{unknown}");
    }
    daemon.permits.add_permits(8);
    modern.cancel().await.unwrap();
    daemon.shutdown().await.unwrap();
}

#[tokio::test]
async fn token_scope_origin_and_bad_arguments_are_refused_without_changes() {
    let local = Local::new();
    let daemon = inproc::start(local.config.clone()).await;
    let all = token(&local.config, "agent", &[]).await;
    let other = token(&local.config, "other-only", &["demo/other"]).await;

    // A job of demo/app, created by the unscoped token.
    let full = connect(&daemon, &all, Era::Stateless, false).await;
    let created = envelope(
        &full,
        "request_pr_reconciliation",
        json!({"repository": "demo/app", "pull_number": 7}),
    )
    .await;
    let job = created["result"]["job_id"].as_i64().unwrap();
    // Without the extension declared, a 2026-07-28 client gets the synchronous answer.
    assert_eq!(created["result"]["state"], "queued");

    // Bad arguments: envelope errors for rule breaks, -32602 for schema breaks.
    for (pull, kind) in [
        (0, "invalid_input"),
        (-4, "invalid_input"),
        (1_i64 << 40, "invalid_input"),
    ] {
        let e = envelope(
            &full,
            "request_pr_reconciliation",
            json!({"repository": "demo/app", "pull_number": pull}),
        )
        .await;
        assert_eq!(e["error"]["type"], kind, "{pull}: {e}");
    }
    for (repository, pull, kind) in [
        ("nobody/else", 7, "not_found"),
        ("demo/app", 99, "conflict"),
        ("demo/app", 9, "conflict"),
    ] {
        let e = envelope(
            &full,
            "request_pr_reconciliation",
            json!({"repository": repository, "pull_number": pull}),
        )
        .await;
        assert_eq!(e["error"]["type"], kind, "{repository}#{pull}: {e}");
    }
    let schema = call(
        &full,
        "request_pr_reconciliation",
        json!({"repository": "demo/app", "pull_number": "7"}),
    )
    .await;
    assert_eq!(rpc_code(schema), -32602);
    full.cancel().await.unwrap();

    // A token for demo/other sees nothing of demo/app.
    for era in [Era::Handshake, Era::Stateless] {
        let scoped = connect(&daemon, &other, era, true).await;
        let denied = envelope(
            &scoped,
            "request_pr_reconciliation",
            json!({"repository": "demo/app", "pull_number": 7}),
        )
        .await;
        assert_eq!(denied["error"]["type"], "permission_denied", "{denied}");
        let read = envelope(
            &scoped,
            "get_wiki_snapshot",
            json!({"repository": "demo/app"}),
        )
        .await;
        assert_eq!(read["error"]["type"], "permission_denied", "{read}");
        let listed = envelope(&scoped, "list_jobs", json!({})).await;
        assert_eq!(listed["result"]["jobs"], json!([]), "{listed}");
        let named = envelope(&scoped, "list_jobs", json!({"repository": "demo/app"})).await;
        assert_eq!(named["error"]["type"], "permission_denied");
        let hidden = envelope(&scoped, "get_job", json!({"job_id": job})).await;
        assert_eq!(hidden["error"]["type"], "not_found");
        if let Era::Stateless = era {
            let task = scoped
                .get_task(GetTaskParams::new(format!("job-{job}")))
                .await;
            assert_eq!(rpc_code(task), -32602);
        }
        scoped.cancel().await.unwrap();
    }
    assert_eq!(daemon.queue.get(job).await.unwrap().actor, "token:agent");

    // HTTP-level refusals: no token, a bad token, an Origin not allowed.
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"}}});
    let post = |token: Option<&str>, origin: Option<&str>| {
        let mut r = http
            .post(daemon.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        r.send()
    };
    assert_eq!(post(None, None).await.unwrap().status(), 401);
    assert_eq!(post(Some("tmm_bogus"), None).await.unwrap().status(), 401);
    let evil = post(Some(&all), Some("https://evil.example"))
        .await
        .unwrap();
    assert_eq!(evil.status(), 403);
    let body: Value = evil.json().await.unwrap();
    assert_eq!(body["error"]["code"], "origin_not_allowed");
    for allowed in ["https://teammem.example.com", "https://agents.example.com"] {
        let ok = post(Some(&all), Some(allowed)).await.unwrap();
        assert_eq!(ok.status(), 200, "{allowed}");
    }
    assert_eq!(post(Some(&all), None).await.unwrap().status(), 200);
    daemon.permits.add_permits(8);
    daemon.shutdown().await.unwrap();
}

#[tokio::test]
async fn stdio_serves_the_coordinator_and_read_only_removes_the_request_tool() {
    let local = Local::new();
    let config_path = local.dir.path().join("teammem.toml");
    let (text, _, _) = crate::requests::local_sources(&local.dir.path().join("again"));
    std::fs::write(&config_path, text).unwrap();
    let spawn = |read_only: bool| {
        let mut command = tokio::process::Command::new(crate::harness::daemon::BIN);
        command.arg("mcp").arg("--config").arg(&config_path);
        if read_only {
            command.arg("--read-only");
        }
        command.env("TEAMMEM_LOG", "warn");
        let (transport, _) = TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn teammem mcp");
        transport
    };
    let client = ().serve(spawn(false)).await.expect("stdio handshake");
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    for name in COORDINATOR {
        assert!(tools.contains(&name.to_string()), "{tools:?}");
    }
    let answer = client
        .call_tool(
            CallToolRequestParams::new("request_pr_reconciliation").with_arguments(
                json!({"repository": "demo/app", "pull_number": 7})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    let envelope = answer.structured_content.unwrap();
    assert_eq!(envelope["success"], true, "{envelope}");
    let job = envelope["result"]["job_id"].as_i64().unwrap();
    let listed = client
        .call_tool(CallToolRequestParams::new("list_jobs").with_arguments(Default::default()))
        .await
        .unwrap()
        .structured_content
        .unwrap();
    assert_eq!(listed["result"]["jobs"][0]["job_id"], job);
    client.cancel().await.unwrap();

    let read_only = ().serve(spawn(true)).await.expect("stdio handshake");
    let tools: Vec<String> = read_only
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(!tools.contains(&"request_pr_reconciliation".to_string()));
    assert!(tools.contains(&"get_job".to_string()));
    let refused = read_only
        .call_tool(
            CallToolRequestParams::new("request_pr_reconciliation").with_arguments(
                json!({"repository": "demo/app", "pull_number": 8})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await;
    assert_eq!(rpc_code(refused), -32602);
    read_only.cancel().await.unwrap();
    // Only the one request of the writable server reached the database.
    let pool = teammem::db::open(&local.dir.path().join("again/data"))
        .await
        .unwrap();
    let queue = teammem::queue::Queue::from_config(
        &teammem::config::Config::load(&config_path).unwrap(),
        pool,
    );
    let page = queue
        .list(&teammem::queue::JobFilter {
            repository: None,
            allowed_repositories: None,
            state: None,
            limit: 10,
            cursor: None,
        })
        .await
        .unwrap();
    assert_eq!(page.jobs.len(), 1);
}

/// SIGTERM while a handshake-era client holds its session's event stream open
/// (`GET /mcp`, which never ends by itself): the daemon ends the session and
/// exits 0 promptly instead of waiting for the client to hang up.
#[tokio::test]
async fn sigterm_ends_open_mcp_sessions_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let (text, _, _) = crate::requests::local_sources(dir.path());
    let config = dir.path().join("teammem.toml");
    std::fs::write(&config, text).unwrap();
    let created = std::process::Command::new(crate::harness::daemon::BIN)
        .args(["tokens", "create", "--name", "agent", "--config"])
        .arg(&config)
        .env("TEAMMEM_LOG", "warn")
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    let token = String::from_utf8(created.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_owned();
    let daemon = crate::harness::daemon::Daemon::start(
        &config,
        &[(
            "TEAMMEM_TEST_UNSET_SECRET",
            "s3cret dispatch secret, at least 32 bytes",
        )],
    );

    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<&str>| {
        let mut request = http
            .post(daemon.url("/mcp"))
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request.send()
    };
    let init = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "shutdown-test", "version": "1"}}}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(init.status(), 200);
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    drop(init);
    let initialized = post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(&session),
    )
    .await
    .unwrap();
    assert_eq!(initialized.status(), 202);
    let mut stream = http
        .get(daemon.url("/mcp"))
        .bearer_auth(&token)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    assert!(
        stream.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );

    let status =
        tokio::task::spawn_blocking(move || daemon.terminate_within(Duration::from_secs(10)))
            .await
            .unwrap()
            .expect("the daemon must exit within 10 s of SIGTERM although an MCP session was open");
    assert!(status.success(), "{status:?}");
    // The stream ended with the daemon (end of body or a broken connection).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match tokio::time::timeout(Duration::from_secs(5), stream.chunk()).await {
            Ok(Ok(Some(_))) => assert!(Instant::now() < deadline, "the stream kept sending"),
            Ok(Ok(None)) | Ok(Err(_)) => break,
            Err(_) => panic!("the event stream stayed open after the daemon exited"),
        }
    }
}

/// Fails the job of PR 7 (permanently) and rejects the job of PR 8, as the
/// runner does when an agent gives up or the merge left the default branch.
struct Verdicts;

const FAILURE_REASON: &str = "the agent stopped without a receipt after 3 steps";
const REJECTION_REASON: &str = "the merge commit is no longer in the default branch";

impl teammem::worker::JobHandler for Verdicts {
    fn run<'a>(&'a self, job: &'a teammem::queue::Job) -> teammem::worker::JobFuture<'a> {
        Box::pin(async move {
            match job.kind.columns().pull_number.map(|n| n.get()) {
                Some(8) => Ok(teammem::queue::Completion::Rejected {
                    reason: REJECTION_REASON.into(),
                }),
                _ => Err(teammem::worker::JobFailure {
                    reason: FAILURE_REASON.into(),
                    retryable: false,
                    receipt: None,
                }),
            }
        })
    }
}

/// A failed or rejected job's task is `completed` (SEP-2663: a tool result with
/// `isError` is a completed task; `failed` is for JSON-RPC errors) and its
/// result is an error envelope naming the job, its state and the reason.
#[tokio::test]
async fn failed_and_rejected_jobs_complete_their_tasks_with_an_error_result() {
    let local = Local::new();
    let daemon = inproc::start_with(local.config.clone(), std::sync::Arc::new(Verdicts)).await;
    let all = token(&local.config, "agent", &[]).await;
    let modern = connect(&daemon, &all, Era::Stateless, true).await;
    for (pull, state, kind, outcome, reason) in [
        (7, "failed", "upstream_error", "unknown", FAILURE_REASON),
        (8, "rejected", "conflict", "not_applied", REJECTION_REASON),
    ] {
        let id = task_id(&modern, "demo/app", pull).await;
        let done = until_settled(&modern, &id).await;
        let task = &done.task.task;
        assert_eq!(task.status, TaskStatus::Completed, "{pull}: {task:?}");
        let job = id.trim_start_matches("job-");
        assert_eq!(
            task.status_message.as_deref(),
            Some(format!("job {job} is {state}").as_str())
        );
        let rmcp::model::TaskPayload::Completed { result } = &done.task.payload else {
            panic!("a completed task carries the tool result: {done:?}")
        };
        assert_eq!(result["isError"], true, "{result:?}");
        let envelope = &result["structuredContent"];
        assert_eq!(envelope["success"], false, "{envelope}");
        assert_eq!(envelope["outcome"], outcome, "{envelope}");
        assert_eq!(envelope["error"]["type"], kind, "{envelope}");
        assert_eq!(
            envelope["result"]["wiki_repository"], "demo/app",
            "{envelope}"
        );
        let message = envelope["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("job {job} {state}: {reason}")),
            "{message}"
        );
        // The text content carries the same envelope.
        let text: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(&text, envelope);
        // get_job agrees.
        let got = envelope_of(
            &modern,
            "get_job",
            json!({"job_id": job.parse::<i64>().unwrap()}),
        )
        .await;
        assert_eq!(got["result"]["state"], state, "{got}");
        assert_eq!(got["result"]["last_error"], reason, "{got}");
    }
    modern.cancel().await.unwrap();
    daemon.shutdown().await.unwrap();
}
