//! What each server mode lists and how it answers calls it cannot run, in the
//! handshake era and in the stateless 2026-07-28 era.
//!
//! The tool lists (names, titles, descriptions, schemas, annotations) of every
//! mode are compared exactly with `tests/it/snapshots/mcp_tools.json`. After an
//! intended change, regenerate it with `TEAMMEM_UPDATE_SNAPSHOTS=1 cargo test --test it mcp`
//! and review the diff.

use serde_json::{Value, json};

use super::fixture::{Fixture, OTHER, SOURCE, error_type};

const SNAPSHOT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/it/snapshots/mcp_tools.json"
);

const READS: [&str; 7] = [
    "get_wiki_snapshot",
    "list_wiki_pages",
    "get_wiki_page",
    "search_wiki",
    "list_wiki_history",
    "get_wiki_diff",
    "get_context",
];
const WRITES: [&str; 3] = [
    "write_wiki_pages",
    "patch_wiki_pages",
    "publish_job_changes",
];
/// The writer's evidence tools (read-only, served only in writer mode).
const EVIDENCE: [&str; 5] = [
    "get_job_evidence",
    "list_pull_request_files",
    "list_source_files",
    "get_source_file",
    "get_source_file_heads",
];
/// The coordinator tools the agent server adds (tests/it/coordinator.rs covers them).
const COORDINATOR: [&str; 3] = ["request_pr_reconciliation", "get_job", "list_jobs"];

fn agent_tools() -> Vec<&'static str> {
    READS.iter().chain(&COORDINATOR).copied().collect()
}

fn listed(tools: &[rmcp::model::Tool]) -> Value {
    serde_json::to_value(tools).expect("tools serialize")
}

#[tokio::test]
async fn tools_list_of_every_mode_matches_the_snapshot() {
    let fixture = Fixture::new();
    let agent = fixture.agent(false).await;
    let read_only = fixture.agent(true).await;
    let writer = fixture.writer().await;
    let actual = json!({
        "agent": listed(&agent.tools().await),
        "agent_read_only": listed(&read_only.tools().await),
        "wiki_writer": listed(&writer.tools().await),
    });
    let pretty = serde_json::to_string_pretty(&actual).unwrap() + "\n";
    if std::env::var_os("TEAMMEM_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(SNAPSHOT, &pretty).expect("write snapshot");
    }
    let expected = std::fs::read_to_string(SNAPSHOT).expect("the snapshot file exists");
    assert_eq!(
        pretty, expected,
        "tools/list changed; if intended, regenerate {SNAPSHOT}"
    );
    for client in [agent, read_only, writer] {
        client.close().await;
    }
}

#[tokio::test]
async fn each_mode_lists_exactly_its_tools_with_explicit_annotations() {
    let fixture = Fixture::new();
    let agent = fixture.agent(false).await;
    let writer = fixture.writer().await;

    let names = |tools: &[rmcp::model::Tool]| -> Vec<String> {
        tools.iter().map(|tool| tool.name.to_string()).collect()
    };
    let listed = agent.tools().await;
    assert_eq!(names(&listed), agent_tools());
    let writer_tools = writer.tools().await;
    let mut expected: Vec<&str> = READS.to_vec();
    expected.extend(WRITES);
    expected.extend(EVIDENCE);
    assert_eq!(names(&writer_tools), expected);

    for tool in &writer_tools {
        let annotations = tool.annotations.as_ref().expect("annotations");
        let write = WRITES.contains(&tool.name.as_ref());
        assert_eq!(annotations.read_only_hint, Some(!write), "{}", tool.name);
        assert_eq!(annotations.destructive_hint, Some(write), "{}", tool.name);
        assert_eq!(annotations.idempotent_hint, Some(true), "{}", tool.name);
        assert_eq!(annotations.open_world_hint, Some(false), "{}", tool.name);
        assert_eq!(tool.input_schema["additionalProperties"], false);
    }
    agent.close().await;
    writer.close().await;
}

#[tokio::test]
async fn write_tools_outside_writer_mode_are_unknown_tools_and_change_nothing() {
    let fixture = Fixture::new();
    let base = fixture.head();
    let arguments = json!({
        "repository": SOURCE,
        "expected_wiki_repository": SOURCE,
        "expected_base": base,
        "message": "should never be written",
        "pages": [{"path": "Home.md", "content": "overwritten\n"}],
    });
    for read_only in [false, true] {
        let agent = fixture.agent(read_only).await;
        let error = agent.rpc_error("write_wiki_pages", arguments.clone()).await;
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(error.message.contains("unknown tool"), "{}", error.message);
        let error = agent
            .rpc_error(
                "patch_wiki_pages",
                json!({"repository": SOURCE, "expected_wiki_repository": SOURCE,
                       "expected_base": base, "message": "m", "patches": {}}),
            )
            .await;
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        agent.close().await;
    }
    assert_eq!(fixture.head(), base, "the wiki must be unchanged");
}

#[tokio::test]
async fn unknown_tools_and_unparseable_arguments_are_json_rpc_errors() {
    let fixture = Fixture::new();
    let agent = fixture.agent(false).await;
    let invalid_params = rmcp::model::ErrorCode::INVALID_PARAMS;

    let error = agent
        .rpc_error("delete_wiki", json!({"repository": SOURCE}))
        .await;
    assert_eq!(error.code, invalid_params);
    assert!(error.message.contains("unknown tool"), "{}", error.message);

    for (tool, arguments, mentions) in [
        ("get_wiki_page", json!({"repository": SOURCE}), "path"),
        ("get_wiki_snapshot", json!({}), "repository"),
        (
            "get_wiki_snapshot",
            json!({"repository": 7}),
            "invalid type",
        ),
        (
            "list_wiki_history",
            json!({"repository": SOURCE, "limit": "ten"}),
            "invalid type",
        ),
        (
            "list_wiki_history",
            json!({"repository": SOURCE, "limit": 2.5}),
            "invalid type",
        ),
        (
            "list_wiki_pages",
            json!({"repository": SOURCE, "url": "https://evil.example/x.git"}),
            "unknown field",
        ),
        (
            "search_wiki",
            json!({"repository": SOURCE, "query": ["a"]}),
            "invalid type",
        ),
    ] {
        let error = agent.rpc_error(tool, arguments.clone()).await;
        assert_eq!(error.code, invalid_params, "{tool} {arguments}");
        assert!(
            error.message.contains(mentions) && error.message.contains(tool),
            "{tool} {arguments}: {}",
            error.message
        );
    }
    agent.close().await;
}

#[tokio::test]
async fn arguments_that_parse_but_break_a_rule_are_envelope_errors() {
    let fixture = Fixture::new();
    let agent = fixture.agent(false).await;
    for (tool, arguments, expected) in [
        (
            "list_wiki_history",
            json!({"repository": SOURCE, "limit": 0}),
            "invalid_input",
        ),
        (
            "list_wiki_history",
            json!({"repository": SOURCE, "limit": 101}),
            "invalid_input",
        ),
        (
            "list_wiki_history",
            json!({"repository": SOURCE, "limit": -1}),
            "invalid_input",
        ),
        (
            "list_wiki_history",
            json!({"repository": SOURCE, "limit": 1_u64 << 40}),
            "invalid_input",
        ),
        (
            "get_wiki_page",
            json!({"repository": SOURCE, "path": "../etc/passwd.md"}),
            "invalid_input",
        ),
        (
            "get_wiki_page",
            json!({"repository": SOURCE, "path": "Home.txt"}),
            "invalid_input",
        ),
        (
            "get_wiki_page",
            json!({"repository": SOURCE, "path": "Home.md", "ref": "main"}),
            "invalid_input",
        ),
        (
            "get_wiki_page",
            json!({"repository": SOURCE, "path": "Missing.md"}),
            "not_found",
        ),
        (
            "search_wiki",
            json!({"repository": SOURCE, "query": ""}),
            "invalid_input",
        ),
        (
            "search_wiki",
            json!({"repository": SOURCE, "query": "q".repeat(513)}),
            "limit_exceeded",
        ),
        (
            "get_wiki_snapshot",
            json!({"repository": "octo/unknown"}),
            "not_found",
        ),
        (
            "get_wiki_snapshot",
            json!({"repository": "not a repository"}),
            "invalid_input",
        ),
    ] {
        let envelope = agent.envelope(tool, arguments.clone()).await;
        assert_eq!(
            error_type(&envelope),
            expected,
            "{tool} {arguments}: {envelope}"
        );
        assert_eq!(envelope["outcome"], "not_applied");
    }
    // A rule broken right at the boundary passes on the other side of it.
    for limit in [1, 100] {
        let envelope = agent
            .envelope(
                "list_wiki_history",
                json!({"repository": SOURCE, "limit": limit}),
            )
            .await;
        assert_eq!(envelope["success"], true, "limit {limit}: {envelope}");
    }
    // An unknown source names the configured ones so the agent can correct itself.
    let envelope = agent
        .envelope("get_wiki_snapshot", json!({"repository": "octo/unknown"}))
        .await;
    let message = envelope["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(SOURCE) && message.contains(OTHER),
        "{message}"
    );
    assert!(envelope["result"].is_null(), "no source was resolved");
    agent.close().await;
}

#[test]
fn nothing_under_src_mcp_writes_to_stdout() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/src/mcp");
    let mut stack = vec![std::path::PathBuf::from(root)];
    let mut files = 0;
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        for forbidden in [
            "println!",
            "print!(",
            "dbg!",
            "std::io::stdout",
            "io::stdout()",
        ] {
            assert!(
                !text.contains(forbidden),
                "{} uses {forbidden}; stdout carries MCP framing only",
                path.display()
            );
        }
    }
    assert!(files >= 5, "the scan found the mcp sources");
}

#[tokio::test]
async fn the_stateless_2026_era_gets_the_same_tools_and_envelopes() {
    use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceExt, model::ProtocolVersion};

    let fixture = Fixture::new();
    let binding = teammem::mcp::Binding::agent(fixture.config(), false);
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let server = tokio::spawn(async move {
        let running = teammem::mcp::WikiServer::new(binding)
            .serve(server_io)
            .await
            .expect("server starts");
        let _ = running.waiting().await;
    });
    let client = ()
        .serve_with_lifecycle(
            client_io,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover handshake");
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .iter()
        .map(|tool| tool.name.to_string())
        .collect();
    assert_eq!(names, agent_tools());
    let result = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("get_wiki_snapshot")
                .with_arguments(json!({"repository": SOURCE}).as_object().unwrap().clone()),
        )
        .await
        .expect("tools/call");
    let envelope = super::fixture::check_shape(&result);
    assert_eq!(envelope["result"]["sha"], fixture.head());
    let error = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("write_wiki_pages")
                .with_arguments(json!({"repository": SOURCE}).as_object().unwrap().clone()),
        )
        .await
        .expect_err("unknown tool");
    assert!(
        matches!(&error, rmcp::service::ServiceError::McpError(e) if e.code == rmcp::model::ErrorCode::INVALID_PARAMS),
        "{error:?}"
    );
    client.cancel().await.expect("close");
    server.await.expect("server ends");
}
