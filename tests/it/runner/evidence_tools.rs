//! The writer's evidence tools through the real `teammem mcp --wiki-writer`
//! child: only the bound job's bundle and commits are reachable.

use serde_json::{Value, json};
use teammem::runner::evidence::{JobScope, work_dir, write_bundle};
use teammem::runner::local_source;
use teammem::runner::writer::{WriterClient, WriterLaunch};

use super::handler::{BIN, Setup};

async fn writer(s: &Setup) -> WriterClient {
    let scope = JobScope::Range {
        job_id: 5,
        before: s.source.merge_12.clone(),
        after: s.source.head.clone(),
    };
    let bundle = local_source::collect(&s.source.dir, "demo/app", &scope).unwrap();
    let path = write_bundle(&work_dir(&s.tmp.path().join("data"), 5), &bundle).unwrap();
    WriterClient::spawn(&WriterLaunch {
        program: BIN.into(),
        config_path: s.config_path.clone(),
        source: "demo/app".into(),
        job_id: 5,
        range: scope.describe(),
        evidence: path,
        token: None,
        path: std::env::var_os("PATH"),
        log_filter: None,
    })
    .await
    .unwrap()
}

async fn call(client: &WriterClient, tool: &str, args: Value) -> (bool, Value, String) {
    let envelope = client.call(tool, args).await.unwrap();
    (envelope.success, envelope.result, envelope.error_type)
}

#[tokio::test]
async fn evidence_tools_serve_only_the_bound_job() {
    let s = Setup::new();
    let client = writer(&s).await;

    let (ok, bundle, _) = call(
        &client,
        "get_job_evidence",
        json!({"repository": "demo/app"}),
    )
    .await;
    assert!(ok);
    let numbers: Vec<u64> = bundle["pull_requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["number"].as_u64().unwrap())
        .collect();
    // The range starts after PR #12's merge: only #13 is authorized.
    assert_eq!(numbers, vec![13]);
    assert_eq!(bundle["wiki_repository"], "demo/app");

    let (ok, files, _) = call(
        &client,
        "list_pull_request_files",
        json!({"repository": "demo/app", "number": 13, "per_page": 1, "page": 2}),
    )
    .await;
    assert!(ok);
    assert_eq!(files["total"], 2);
    assert_eq!(files["has_more"], false);
    assert_eq!(files["files"][0]["path"], "docs/guide.md");
    assert!(
        files["files"][0]["patch"]
            .as_str()
            .unwrap()
            .contains("+Step one.")
    );

    let (ok, _, kind) = call(
        &client,
        "list_pull_request_files",
        json!({"repository": "demo/app", "number": 12}),
    )
    .await;
    assert!(!ok);
    assert_eq!(kind, "not_found");

    let (ok, file, _) = call(
        &client,
        "get_source_file",
        json!({"repository": "demo/app", "path": "docs/guide.md", "commit": s.source.squash_13}),
    )
    .await;
    assert!(ok);
    assert_eq!(file["content"], "# Guide\n\nStep one.\n");
    let (ok, file, _) = call(
        &client,
        "get_source_file",
        json!({"repository": "demo/app", "path": "Makefile"}),
    )
    .await;
    assert!(ok, "{file}");
    assert_eq!(file["commit"], s.source.head.as_str());

    // A commit outside the range (PR #12's merge is its `before`) is refused.
    let (ok, _, kind) = call(
        &client,
        "get_source_file",
        json!({"repository": "demo/app", "path": "src/search.rs", "commit": s.source.merge_12}),
    )
    .await;
    assert!(!ok);
    assert_eq!(kind, "permission_denied");
    let (ok, _, kind) = call(
        &client,
        "get_source_file",
        json!({"repository": "demo/app", "path": "nope.txt"}),
    )
    .await;
    assert!(!ok);
    assert_eq!(kind, "not_found");
    let (ok, _, kind) = call(
        &client,
        "get_job_evidence",
        json!({"repository": "demo/other"}),
    )
    .await;
    assert!(!ok);
    assert_eq!(kind, "permission_denied");
    client.close().await;
}
