//! Ranked search and the currency of reads through the real `teammem mcp`
//! process, on a 1,000-page wiki the `git` CLI made: the topic page ranks
//! first, the order is the same twice and after a restart, snippets and
//! headings are right, `as_of` is the source's cursor, and a page's stale
//! marker is listed with its fields while a malformed one breaks nothing.

use std::process::Stdio;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use super::fixture::{Fixture, SOURCE, check_shape};

const WORDS: &[&str] = &[
    "queue",
    "worker",
    "lease",
    "cursor",
    "dashboard",
    "sweep",
    "token",
    "mirror",
    "deploy",
    "config",
    "invoice",
    "retries",
    "schema",
    "render",
    "cache",
    "parser",
    "session",
    "limit",
];

const TOPIC_PATH: &str = "Billing/Invoice_Retries.md";

/// 999 filler pages (each mentioning a few words, some "invoice" or
/// "retries" alone) and the one page about invoice retries.
fn pages(cited: &str, changed: &str) -> Vec<(String, String)> {
    let mut pages: Vec<(String, String)> = (0..999)
        .map(|i| {
            let body: Vec<&str> = (0..40)
                .map(|k| WORDS[(i * 7 + k * 5 + k * k) % WORDS.len()])
                .collect();
            (
                format!("notes/Page{i:04}.md"),
                format!("# Notes {i}\n\n## Section\n\n{}\n", body.join(" ")),
            )
        })
        .collect();
    pages.push((
        TOPIC_PATH.into(),
        format!(
            "# Invoice retries\n\nHow billing retries work.\n\n## Backoff\n\nFailed invoice retries use exponential backoff. \
             <!-- teammem:evidence src/billing.rs@{cited}#L10-L24 stale={changed} -->\n\
             Broken citation here. <!-- teammem:evidence not a marker -->\n"
        ),
    ));
    pages
}

async fn spawn(fixture: &Fixture) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(crate::harness::daemon::BIN);
    command
        .arg("mcp")
        .arg("--config")
        .arg(&fixture.config_path)
        .env("TEAMMEM_LOG", "warn");
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn teammem mcp");
    ().serve(transport).await.expect("stdio handshake")
}

async fn call(
    client: &RunningService<RoleClient, ()>,
    name: &'static str,
    arguments: Value,
) -> Value {
    let Value::Object(arguments) = arguments else {
        panic!("an object")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(name).with_arguments(arguments))
        .await
        .expect("tools/call");
    let envelope = check_shape(&result);
    assert_eq!(envelope["success"], true, "{envelope}");
    envelope["result"].clone()
}

#[tokio::test]
async fn ranked_search_on_a_thousand_pages_with_as_of_and_stale_facts() {
    let fixture = Fixture::new();
    for bare in ["app.git", "other.git"] {
        crate::harness::git::git(fixture.dir.path(), &["init", "-q", "--bare", bare]);
    }
    let cited = "c".repeat(40);
    let changed = "d".repeat(40);
    let generated = pages(&cited, &changed);
    let refs: Vec<(&str, &str)> = generated
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let tip = fixture.commit(&refs, "A thousand pages");

    let config = fixture.config();
    let pool = teammem::db::open(&config.server.data_dir).await.unwrap();
    let queue = teammem::queue::Queue::from_config(&config, pool);
    let cursor = teammem::ids::Sha::parse(&"e".repeat(40)).unwrap();

    let client = spawn(&fixture).await;
    let snapshot = call(&client, "get_wiki_snapshot", json!({"repository": SOURCE})).await;
    assert_eq!(snapshot["sha"], tip.as_str());
    assert_eq!(snapshot["as_of"], Value::Null, "{snapshot}");
    assert_eq!(
        snapshot["as_of_reason"],
        "no job has reconciled this source yet"
    );
    assert_eq!(
        snapshot["stale_facts"], 1,
        "one stale marker; the malformed one is not counted"
    );

    queue.advance_cursor(SOURCE, &cursor).await.unwrap();
    let query = json!({"repository": SOURCE, "query": "invoice retries", "ref": tip});
    let first = call(&client, "search_wiki", query.clone()).await;
    assert_eq!(first["as_of"], cursor.to_string());
    assert_eq!(first["as_of_reason"], Value::Null);
    let top = &first["hits"][0];
    assert_eq!(top["path"], TOPIC_PATH, "{first}");
    assert_eq!(top["heading"], "Backoff");
    assert_eq!(top["line"], 7);
    assert_eq!(
        top["snippet"],
        "Failed invoice retries use exponential backoff."
    );
    assert!(first["hits"].as_array().unwrap().len() <= 20);
    assert!(
        first["total"].as_u64().unwrap() > 20,
        "filler pages match a word too"
    );
    let again = call(&client, "search_wiki", query.clone()).await;
    assert_eq!(again["hits"], first["hits"]);

    let page = call(
        &client,
        "get_wiki_page",
        json!({"repository": SOURCE, "path": TOPIC_PATH, "format": "raw"}),
    )
    .await;
    assert_eq!(
        page["stale_facts"],
        json!([{
            "line": 7,
            "fact": "Failed invoice retries use exponential backoff.",
            "path": "src/billing.rs",
            "lines": "L10-L24",
            "cited_commit": cited,
            "changed_in": changed,
            "deleted": false,
        }])
    );
    client.cancel().await.unwrap();

    let restarted = spawn(&fixture).await;
    let after = call(&restarted, "search_wiki", query).await;
    assert_eq!(after["hits"], first["hits"], "same order after a restart");
    restarted.cancel().await.unwrap();
}
