//! Pages an agent reads cheaply, and org scope, through the real `teammem
//! mcp` process and the daemon's `/mcp` on the generated history: a page
//! comes folded (no teammem comment, lines kept) with its citations as data
//! (line, path, commit, lines, status, the stale one with its changing
//! commit), `format: "raw"` is byte for byte what `git show` prints, and
//! `search_wiki` and `get_context` without `repository` find only what the caller's token
//! may read, each hit and item naming its repository.

use serde_json::json;

use super::history::{OTHER, REPOSITORY, build_serving};
use super::questions::{call, spawn_mcp};
use crate::coordinator::{Era, connect_to, envelope};
use crate::harness::git::{git, git_trimmed};

#[tokio::test]
async fn folded_citations_raw_bytes_and_org_scope() {
    let history = build_serving(true).await;
    let client = spawn_mcp(&history.config).await;
    let folded = call(
        &client,
        "get_wiki_page",
        json!({"repository": REPOSITORY, "path": "Billing-notes.md"}),
    )
    .await;
    assert_eq!(folded["success"], true, "{folded}");
    let page = &folded["result"];
    assert_eq!(page["format"], "folded");
    let content = page["content"].as_str().unwrap();
    assert!(!content.contains("<!--"), "{content}");
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(
        lines[6],
        "Taxes are computed on the invoice total and rounded once."
    );
    assert_eq!(lines[7], "Invoice numbers restart every year.");
    assert_eq!(
        page["citations"],
        json!([
            {"line": 7, "path": "billing/invoice.py", "commit": history.cited, "lines": "L3-L4",
             "status": "stale", "changed_in": history.merged[12]},
            {"line": 8, "path": "billing/invoice.py", "commit": history.cited, "lines": "L6",
             "status": "current"},
        ]),
        "{page}"
    );
    assert_eq!(page["last_change"]["by"], "teammem", "{page}");

    let raw = call(
        &client,
        "get_wiki_page",
        json!({"repository": REPOSITORY, "path": "Billing-notes.md", "format": "raw"}),
    )
    .await;
    let raw = &raw["result"];
    assert_eq!(raw["format"], "raw");
    let commit = raw["ref"].as_str().unwrap();
    let shown = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(&history.wiki)
        .args(["show", &format!("{commit}:Billing-notes.md")])
        .output()
        .unwrap();
    assert!(shown.status.success());
    assert_eq!(
        raw["content"].as_str().unwrap().as_bytes(),
        &shown.stdout[..]
    );
    assert_eq!(raw["stale_facts"][0]["line"], 7);
    assert_eq!(page["sha"], raw["sha"]);
    assert_eq!(raw["last_change"], page["last_change"], "{raw}");
    // A job's agent that only edits asks for the page without the walk.
    let bare = call(
        &client,
        "get_wiki_page",
        json!({"repository": REPOSITORY, "path": "Billing-notes.md", "format": "raw", "last_change": false}),
    )
    .await;
    let bare = &bare["result"];
    assert!(bare.get("last_change").is_none(), "{bare}");
    assert_eq!(bare["content"], raw["content"]);
    assert_eq!(bare["sha"], raw["sha"]);
    client.cancel().await.unwrap();

    // A page on the other source's wiki, so both wikis answer a word.
    let other_wiki = history.wiki.parent().unwrap().join("other/app.wiki.git");
    let work = history.wiki.parent().unwrap().join("other-wiki-work");
    git(
        history.wiki.parent().unwrap(),
        &[
            "clone",
            "-q",
            other_wiki.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    std::fs::write(
        work.join("Invoices.md"),
        "# Invoices\n\nInvoice numbers are global here.\n",
    )
    .unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "Invoices"]);
    git(&work, &["push", "-q", "origin", "HEAD:master"]);
    let _ = git_trimmed(&work, &["rev-parse", "HEAD"]);

    let daemon = history.daemon.as_ref().unwrap();
    let shop = history.setup.create_token("shop-only", &[REPOSITORY]);
    let other = history.setup.create_token("other-only", &[OTHER]);
    let all = history.setup.create_token("all", &[]);
    for era in [Era::Handshake, Era::Stateless] {
        let mut seen = Vec::new();
        for token in [&shop, &other, &all] {
            let client = connect_to(daemon.url("/mcp"), token, era, false).await;
            let answer =
                envelope(&client, "search_wiki", json!({"query": "invoice numbers"})).await;
            assert_eq!(answer["success"], true, "{answer}");
            let mut repositories: Vec<String> = answer["result"]["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|hit| hit["repository"].as_str().unwrap().to_owned())
                .collect();
            repositories.sort();
            repositories.dedup();
            seen.push(repositories);
            // get_context without repository: only the wikis the token reads.
            let context = envelope(
                &client,
                "get_context",
                json!({"paths": ["billing/invoice.py"], "format": "json"}),
            )
            .await;
            assert_eq!(context["success"], true, "{context}");
            let result = &context["result"];
            let items = result["items"].as_array().unwrap();
            if *token == other {
                assert_eq!(
                    result["paths"],
                    json!([{"path": "billing/invoice.py", "kind": "unknown"}])
                );
                assert!(items.is_empty(), "{result}");
            } else {
                assert_eq!(result["paths"][0]["repository"], REPOSITORY, "{result}");
                assert!(!items.is_empty() && items.iter().all(|i| i["repository"] == REPOSITORY));
                assert!(items.iter().any(|i| i["status"] == "stale"), "{result}");
            }
            client.cancel().await.unwrap();
        }
        assert_eq!(seen[0], [REPOSITORY], "{era:?}");
        assert_eq!(seen[1], [OTHER], "{era:?}");
        let mut both = vec![OTHER, REPOSITORY];
        both.sort();
        assert_eq!(seen[2], both, "{era:?}");
    }
}
