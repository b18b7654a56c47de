//! A renamed file keeps its history, through the real `teammem serve` (local
//! forge, builtin agent) and the real `teammem mcp`: a pull request that
//! moves `src/store.rs` to `lib/kv.rs` (found by git's rename detection on
//! the merge's first-parent diff) is recorded on both areas' pages naming
//! `src/store.rs → lib/kv.rs`; "What is here" lists the file under its new
//! path with its purpose, cited there, and no longer under the old one; and
//! `get_context` for the new path finds the pull requests that touched the
//! old path before the rename — not a later one that made a new file at the
//! old path. The git CLI is the oracle.

use std::path::Path;
use std::process::Stdio;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use super::fixture::{self, page, squash};
use super::one_source::OneSource;
use crate::harness::git::{git, git_trimmed};

const SECRET: &str = "renames dispatch secret, at least 32 bytes long";

/// `get_context` for `paths` through the real `teammem mcp` (stdio).
async fn get_context(config: &Path, paths: &[&str]) -> Value {
    let mut command = tokio::process::Command::new(crate::harness::daemon::BIN);
    command
        .arg("mcp")
        .arg("--config")
        .arg(config)
        .env("TEAMMEM_LOG", "warn");
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn teammem mcp");
    let client = ().serve(transport).await.expect("stdio handshake");
    let Value::Object(arguments) =
        json!({"repository": "demo/app", "paths": paths, "format": "json"})
    else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new("get_context").with_arguments(arguments))
        .await
        .expect("tools/call");
    let envelope = result.structured_content.expect("structured content");
    assert_eq!(envelope["success"], true, "{envelope}");
    envelope["result"].clone()
}

fn change_numbers(answer: &Value) -> Vec<u64> {
    answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["kind"] == "change")
        .map(|item| item["number"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_renamed_file_keeps_its_purpose_and_its_history() {
    let repos = tempfile::tempdir().unwrap();
    let dir = repos.path().join("app");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    fixture::write(&dir, "README.md", "# app\n");
    let store =
        "//! The key-value store: one file per key, written atomically.\n\npub fn get() {}\n";
    fixture::write(&dir, "src/store.rs", store);
    fixture::write(
        &dir,
        "src/main.rs",
        "//! The command line.\n\nfn main() {}\n",
    );
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "Initial commit"]);
    let base = git_trimmed(&dir, &["rev-parse", "HEAD"]);
    fixture::write(&dir, "src/store.rs", &format!("{store}pub fn put() {{}}\n"));
    let first = squash(&dir, 1, "Store writes");
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    git(&dir, &["mv", "src/store.rs", "lib/kv.rs"]);
    let moved = squash(&dir, 2, "Move the store into lib");
    fixture::write(
        &dir,
        "lib/kv.rs",
        &format!("{store}pub fn put() {{}}\npub fn delete() {{}}\n"),
    );
    let after = squash(&dir, 3, "Store deletes");
    fixture::write(&dir, "src/store.rs", "//! A new, unrelated file.\n");
    let reused = squash(&dir, 4, "A new file at the old path");

    let one = OneSource::of(repos, &dir, SECRET).token("renames").start();
    let wiki = &one.wiki;
    // One push a job, so the rename's job is its own.
    for (run, (before, after)) in [(&base, &first), (&first, &moved), (&moved, &after)]
        .into_iter()
        .enumerate()
    {
        one.succeeds(run as u64 + 1, before, after).await;
    }

    // The rename's entry names both paths, on the new area's page and on the
    // old one's.
    let lib = page(wiki, "Area-lib.md");
    let named = format!("— src/store.rs → lib/kv.rs <!-- teammem:{moved} -->");
    assert!(lib.contains(&named), "{lib}");
    let src = page(wiki, "Area-src.md");
    assert!(src.contains(&named), "{src}");
    // "What is here": the file under its new path, with its purpose cited
    // there (at the rename's commit: the next job's change left the cited
    // line as it was, so its line was kept); gone from the old area's list.
    assert!(
        lib.contains(&format!(
            "- lib/kv.rs — The key-value store: one file per key, written atomically. <!-- teammem:evidence lib/kv.rs@{moved}#L1 -->"
        )),
        "{lib}"
    );
    assert!(src.contains("- src/main.rs — The command line."), "{src}");
    assert!(!src.contains("- src/store.rs"), "{src}");

    // The history of the old path is found by the new one.
    let answer = get_context(&one.setup.config, &["lib/kv.rs"]).await;
    assert_eq!(change_numbers(&answer), [3, 2, 1], "{answer}");

    // A new file at the old path later is not the renamed file's history.
    one.succeeds(4, &after, &reused).await;
    let answer = get_context(&one.setup.config, &["lib/kv.rs"]).await;
    assert_eq!(change_numbers(&answer), [3, 2, 1], "{answer}");
    let answer = get_context(&one.setup.config, &["src/store.rs"]).await;
    assert_eq!(change_numbers(&answer), [4, 2, 1], "{answer}");
    git(wiki, &["fsck", "--strict", "--no-progress"]);
    assert!(one.daemon.terminate().success());
}
