//! The read tools end to end on a wiki the `git` CLI made: every result names
//! the source and the wiki, agrees with what git says, and stays within the
//! result-size limit.

use serde_json::json;

use super::fixture::{CAFE, Fixture, HOME, OTHER, SOURCE, TOPIC, error_type};

#[tokio::test]
async fn read_tools_answer_what_git_says_with_the_source_and_wiki_named() {
    let fixture = Fixture::new();
    let agent = fixture.agent(false).await;
    let tip = fixture.head();

    let snapshot = agent
        .envelope("get_wiki_snapshot", json!({"repository": SOURCE}))
        .await;
    let reason = snapshot["result"]["as_of_reason"].clone();
    assert!(
        reason.as_str().unwrap().contains("no job queue"),
        "{snapshot}"
    );
    assert_eq!(
        snapshot["result"],
        json!({"source_repository": SOURCE, "wiki_repository": SOURCE,
               "branch": "master", "sha": tip, "initialized": true,
               "stale_facts": 0, "as_of": null, "as_of_reason": reason})
    );

    let list = agent
        .envelope("list_wiki_pages", json!({"repository": SOURCE, "ref": tip}))
        .await;
    let pages: Vec<(&str, &str)> = list["result"]["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["path"].as_str().unwrap(), p["sha"].as_str().unwrap()))
        .collect();
    let mut expected: Vec<(String, String)> = ["Home.md", "area/Topic.md", "Ünïcode/Café.md"]
        .iter()
        .map(|path| {
            let sha = fixture.git(&["rev-parse", &format!("{tip}:{path}")]);
            (path.to_string(), sha.trim().to_owned())
        })
        .collect();
    expected.sort();
    let mut actual: Vec<(String, String)> = pages
        .iter()
        .map(|(p, s)| (p.to_string(), s.to_string()))
        .collect();
    actual.sort();
    assert_eq!(actual, expected);
    assert_eq!(list["result"]["source_repository"], SOURCE);

    for (path, content) in [
        ("Home.md", HOME),
        ("area/Topic.md", TOPIC),
        ("Ünïcode/Café.md", CAFE),
    ] {
        let page = agent
            .envelope(
                "get_wiki_page",
                json!({"repository": SOURCE, "path": path, "ref": tip}),
            )
            .await;
        assert_eq!(page["result"]["content"], content, "{path}");
        assert_eq!(page["result"]["path"], path);
        assert_eq!(page["result"]["wiki_repository"], SOURCE);
    }

    let search = agent
        .envelope(
            "search_wiki",
            json!({"repository": SOURCE, "query": "CAFÉ"}),
        )
        .await;
    let hits: Vec<&str> = search["result"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["path"].as_str().unwrap())
        .collect();
    assert_eq!(hits, ["Ünïcode/Café.md"], "{search}");

    let second = fixture.commit(&[("Home.md", "# Home\n\nRewritten.\n")], "Rewrite home");
    let history = agent
        .envelope(
            "list_wiki_history",
            json!({"repository": SOURCE, "path": "Home.md", "limit": 5}),
        )
        .await;
    let commits: Vec<&str> = history["result"]["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["sha"].as_str().unwrap())
        .collect();
    assert_eq!(commits, [second.as_str(), tip.as_str()], "{history}");

    let diff = agent
        .envelope(
            "get_wiki_diff",
            json!({"repository": SOURCE, "from": tip, "to": second}),
        )
        .await;
    let text = diff["result"]["diff"].as_str().unwrap();
    assert!(
        text.contains("-Welcome to the team memory.") && text.contains("+Rewritten."),
        "{text}"
    );
    agent.close().await;
}

#[tokio::test]
async fn an_empty_wiki_is_reported_uninitialized_and_reads_say_so() {
    let fixture = Fixture::new();
    let agent = fixture.agent(false).await;
    let snapshot = agent
        .envelope("get_wiki_snapshot", json!({"repository": OTHER}))
        .await;
    assert_eq!(snapshot["result"]["initialized"], false, "{snapshot}");
    assert!(snapshot["result"]["sha"].is_null());
    assert_eq!(snapshot["result"]["wiki_repository"], OTHER);
    let list = agent
        .envelope("list_wiki_pages", json!({"repository": OTHER}))
        .await;
    assert_eq!(error_type(&list), "not_found");
    // A failure about a resolved source still names it.
    assert_eq!(list["result"]["source_repository"], OTHER);
    agent.close().await;
}

#[tokio::test]
async fn a_result_over_384_kib_becomes_limit_exceeded() {
    let fixture = Fixture::new();
    let agent = fixture.agent(false).await;
    let before = fixture.head();
    // Seven 60 KB pages: a diff of about 430 KB, under the engine's 512 KiB diff
    // limit but over the 384 KiB result limit once in the envelope.
    let line = format!("{}\n", "x".repeat(59));
    let body = line.repeat(1000);
    let pages: Vec<(String, String)> = (0..7)
        .map(|i| (format!("Big{i}.md"), body.clone()))
        .collect();
    let refs: Vec<(&str, &str)> = pages
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let after = fixture.commit(&refs, "Big pages");

    let envelope = agent
        .envelope(
            "get_wiki_diff",
            json!({"repository": SOURCE, "from": before, "to": after}),
        )
        .await;
    assert_eq!(
        error_type(&envelope),
        "limit_exceeded",
        "{}",
        &envelope["error"]
    );
    assert_eq!(envelope["outcome"], "not_applied");
    assert_eq!(envelope["result"]["wiki_repository"], SOURCE);

    // One page of the same diff fits.
    let small = fixture.commit(&[("Small.md", "small\n")], "Small page");
    let envelope = agent
        .envelope(
            "get_wiki_diff",
            json!({"repository": SOURCE, "from": after, "to": small}),
        )
        .await;
    assert_eq!(envelope["success"], true);
    agent.close().await;
}
