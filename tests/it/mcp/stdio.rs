//! The real `teammem mcp` process over stdio: rmcp's child-process client
//! against the writer started with a cleared environment carrying only its
//! binding, the agent server's stdout checked to carry JSON-RPC lines only, and
//! a writer without a binding refusing to start.

use std::process::Stdio;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::fixture::{Fixture, OTHER, SOURCE, check_shape, error_type};

const BINARY: &str = env!("CARGO_BIN_EXE_teammem");

fn object(value: Value) -> serde_json::Map<String, Value> {
    let Value::Object(object) = value else {
        panic!("an object")
    };
    object
}

#[tokio::test]
async fn the_writer_process_serves_its_binding_over_stdio() {
    let fixture = Fixture::new();
    let mut command = tokio::process::Command::new(BINARY);
    command
        .args(["mcp", "--wiki-writer"])
        .env_clear()
        .envs(fixture.writer_env())
        .env("TEAMMEM_LOG", "debug");
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn teammem mcp --wiki-writer");
    let client = ().serve(transport).await.expect("handshake over stdio");

    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .iter()
        .map(|tool| tool.name.to_string())
        .collect();
    assert!(tools.contains(&"write_wiki_pages".to_string()), "{tools:?}");

    let call = |name: &'static str, arguments: Value| {
        let client = &client;
        async move {
            let result = client
                .call_tool(CallToolRequestParams::new(name).with_arguments(object(arguments)))
                .await
                .expect("tools/call");
            check_shape(&result)
        }
    };
    let snapshot = call("get_wiki_snapshot", json!({"repository": SOURCE})).await;
    let base = snapshot["result"]["sha"].as_str().unwrap().to_owned();
    assert_eq!(base, fixture.head());
    let refused = call("get_wiki_snapshot", json!({"repository": OTHER})).await;
    assert_eq!(error_type(&refused), "permission_denied");
    let written = call(
        "write_wiki_pages",
        json!({"repository": SOURCE, "expected_wiki_repository": SOURCE, "expected_base": base,
               "message": "Over stdio", "pages": [{"path": "Stdio.md", "content": "over stdio\n"}]}),
    )
    .await;
    assert_eq!(written["result"]["status"], "updated", "{written}");
    assert_eq!(fixture.git(&["show", "master:Stdio.md"]), "over stdio\n");
    assert_eq!(
        fixture.git(&["log", "-1", "--format=%P", "master"]).trim(),
        base
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn the_agent_server_writes_only_json_rpc_to_stdout() {
    let fixture = Fixture::new();
    let mut child = tokio::process::Command::new(BINARY)
        .args(["mcp", "--config", fixture.config_path.to_str().unwrap()])
        .env("TEAMMEM_LOG", "trace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn teammem mcp");
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "stdio-test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "get_wiki_snapshot", "arguments": {"repository": SOURCE}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "write_wiki_pages", "arguments": {"repository": SOURCE}}}),
    ];
    let mut stdin = child.stdin.take().unwrap();
    let mut input = String::new();
    for request in &requests {
        input.push_str(&request.to_string());
        input.push('\n');
    }
    stdin.write_all(input.as_bytes()).await.unwrap();
    // Read until every request with an id has its answer, then close stdin.
    let mut stdout = child.stdout.take().unwrap();
    let mut seen = String::new();
    let mut buffer = [0u8; 65536];
    while seen.lines().filter(|line| line.contains("\"id\"")).count() < 4 {
        let n = stdout.read(&mut buffer).await.unwrap();
        assert!(n > 0, "the server closed stdout early: {seen}");
        seen.push_str(std::str::from_utf8(&buffer[..n]).unwrap());
    }
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).await.unwrap();
    seen.push_str(&rest);
    let status = child.wait().await.unwrap();
    assert!(
        status.success(),
        "exits cleanly when stdin closes: {status}"
    );

    let mut answers = std::collections::BTreeMap::new();
    for line in seen.lines() {
        let message: Value = serde_json::from_str(line)
            .unwrap_or_else(|_| panic!("stdout carries JSON-RPC only, got {line:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        if let Some(id) = message["id"].as_i64() {
            answers.insert(id, message);
        }
    }
    assert_eq!(answers.keys().copied().collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert_eq!(answers[&3]["result"]["structuredContent"]["success"], true);
    assert_eq!(
        answers[&4]["error"]["code"], -32602,
        "writes are unknown here"
    );
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .await
        .unwrap();
    assert!(stderr.contains("tool call"), "logs go to stderr: {stderr}");
}

#[tokio::test]
async fn a_writer_without_its_binding_refuses_to_start() {
    let output = tokio::process::Command::new(BINARY)
        .args(["mcp", "--wiki-writer"])
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run teammem mcp --wiki-writer");
    assert!(!output.status.success());
    assert!(output.stdout.is_empty(), "nothing on stdout");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("TEAMMEM_CONFIG"), "{stderr}");
}
