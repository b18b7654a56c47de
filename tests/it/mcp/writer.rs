//! The job-bound writer: its binding comes from the environment and covers one
//! source; writes are checked against the destination before anything else and
//! land as one commit on the base (git CLI as the oracle); the writer's token
//! never appears in a result.

use std::collections::HashMap;

use serde_json::{Value, json};
use teammem::mcp::{Binding, McpError};

use super::fixture::{Fixture, HOME, JOB, OTHER, SOURCE, TOKEN, TOPIC, error_type};
use crate::harness::git::git;

fn write_args(base: &str, pages: Value) -> Value {
    json!({
        "repository": SOURCE,
        "expected_wiki_repository": SOURCE,
        "expected_base": base,
        "message": "Record PR #7 (merge 0123456789abcdef0123456789abcdef01234567)",
        "pages": pages,
    })
}

#[tokio::test]
async fn the_binding_comes_only_from_a_complete_environment() {
    let fixture = Fixture::new();
    let full = fixture.writer_env();
    let without = |name: &str| {
        let mut env = full.clone();
        env.remove(name);
        env
    };
    let with = |name: &str, value: &str| {
        let mut env = full.clone();
        env.insert(name.into(), value.into());
        env
    };
    let cases: Vec<(HashMap<String, String>, &str)> = vec![
        (without("TEAMMEM_CONFIG"), "TEAMMEM_CONFIG"),
        (without("TEAMMEM_WRITER_SOURCE"), "TEAMMEM_WRITER_SOURCE"),
        (
            with("TEAMMEM_WRITER_SOURCE", "octo/unknown"),
            "not a configured source",
        ),
        (with("TEAMMEM_WRITER_SOURCE", "nonsense"), "owner/name"),
        (
            with("TEAMMEM_WRITER_JOB", "job\nInjected: trailer"),
            "TEAMMEM_WRITER_JOB",
        ),
        (
            with("TEAMMEM_CONFIG", "/nonexistent/teammem.toml"),
            "cannot read",
        ),
        // The job's broker and agent endpoint: only the descriptor numbers
        // the runner installs, and the broker never next to a token.
        (
            with("TEAMMEM_WRITER_BROKER_FD", "5"),
            "TEAMMEM_WRITER_BROKER_FD must be 3",
        ),
        (with("TEAMMEM_WRITER_BROKER_FD", "3"), "both set"),
        (
            with("TEAMMEM_WRITER_AGENT_FD", "0"),
            "TEAMMEM_WRITER_AGENT_FD must be 4",
        ),
    ];
    for (env, mentions) in cases {
        let error = Binding::writer_from_env(|name| env.get(name).cloned())
            .expect_err("an incomplete binding is refused");
        let text = error.to_string();
        assert!(text.contains(mentions), "{text}");
        assert!(!text.contains(TOKEN), "{text}");
        assert!(matches!(error, McpError::Binding(_) | McpError::Config(_)));
    }
    // The writer refuses --config: its configuration comes from the environment.
    let error = teammem::mcp::binding(
        Some(fixture.config_path.clone()),
        teammem::mcp::Mode::WikiWriter,
    )
    .expect_err("--config is refused in writer mode");
    assert!(error.to_string().contains("TEAMMEM_CONFIG"), "{error}");
}

#[tokio::test]
async fn another_repository_is_refused_with_permission_denied() {
    let fixture = Fixture::new();
    let writer = fixture.writer().await;
    let base = fixture.head();
    for (tool, arguments) in [
        ("get_wiki_snapshot", json!({"repository": OTHER})),
        ("list_wiki_pages", json!({"repository": "octo/unknown"})),
        ("write_wiki_pages", {
            let mut args = write_args(&base, json!([{"path": "Home.md", "content": "x\n"}]));
            args["repository"] = OTHER.into();
            args["expected_wiki_repository"] = OTHER.into();
            args
        }),
    ] {
        let envelope = writer.envelope(tool, arguments).await;
        assert_eq!(
            error_type(&envelope),
            "permission_denied",
            "{tool}: {envelope}"
        );
        assert_eq!(envelope["outcome"], "not_applied");
        let message = envelope["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(SOURCE),
            "names the bound source: {message}"
        );
    }
    // The bound source itself is served, whatever its case.
    let envelope = writer
        .envelope("get_wiki_snapshot", json!({"repository": "Demo/App"}))
        .await;
    assert_eq!(envelope["success"], true, "{envelope}");
    assert_eq!(fixture.head(), base);
    assert_eq!(
        git(&fixture.other_wiki, &["for-each-ref"]),
        "",
        "the other wiki is untouched"
    );
    writer.close().await;
}

#[tokio::test]
async fn a_destination_mismatch_is_refused_before_anything_happens() {
    let fixture = Fixture::new();
    let writer = fixture.writer().await;
    let base = fixture.head();
    let mut args = write_args(&base, json!([{"path": "Home.md", "content": "x\n"}]));
    args["expected_wiki_repository"] = "demo/elsewhere".into();
    let envelope = writer.envelope("write_wiki_pages", args.clone()).await;
    assert_eq!(error_type(&envelope), "destination_changed", "{envelope}");
    assert_eq!(envelope["outcome"], "not_applied");
    assert_eq!(
        envelope["result"]["wiki_repository"], SOURCE,
        "names the actual wiki"
    );
    // Checked before the engine's own rules: a bad base does not mask it.
    args["expected_base"] = "HEAD".into();
    let envelope = writer.envelope("write_wiki_pages", args).await;
    assert_eq!(error_type(&envelope), "destination_changed");
    // Nothing was written, not even a mirror.
    assert_eq!(fixture.head(), base);
    assert!(!fixture.mirrors().exists());
    writer.close().await;
}

#[tokio::test]
async fn write_and_patch_land_as_single_commits_on_the_base() {
    let fixture = Fixture::new();
    let writer = fixture.writer().await;
    let snapshot = writer
        .envelope("get_wiki_snapshot", json!({"repository": SOURCE}))
        .await;
    let base = snapshot["result"]["sha"].as_str().unwrap().to_owned();
    assert_eq!(base, fixture.head());

    let new_page = "# Changelog\n\n- PR #7 `0123456789abcdef0123456789abcdef01234567`\n";
    let written = writer
        .envelope(
            "write_wiki_pages",
            write_args(
                &base,
                // area/Notes.md is teammem's own page, so a job may patch any of
                // its text (area/Topic.md is a person's: tests/it/mcp/confine.rs).
                json!([{"path": "Changelog.md", "content": new_page},
                       {"path": "area/Notes.md", "content": TOPIC}]),
            ),
        )
        .await;
    assert_eq!(written["success"], true, "{written}");
    let result = &written["result"];
    assert_eq!(result["status"], "updated");
    assert_eq!(result["branch"], "master");
    assert_eq!(result["source_repository"], SOURCE);
    assert_eq!(result["wiki_repository"], SOURCE);
    let first = result["sha"].as_str().unwrap().to_owned();
    assert_eq!(fixture.head(), first);
    assert_eq!(
        fixture.git(&["log", "-1", "--format=%P", &first]).trim(),
        base
    );
    assert_eq!(
        fixture.git(&["show", &format!("{first}:Changelog.md")]),
        new_page
    );
    assert_eq!(fixture.git(&["show", &format!("{first}:Home.md")]), HOME);
    let message = fixture.git(&["log", "-1", "--format=%B", &first]);
    assert!(message.starts_with("Record PR #7"), "{message}");
    let trailers = fixture.git(&["log", "-1", "--format=%(trailers:only,unfold)", &first]);
    assert_eq!(
        trailers.trim(),
        format!(
            "Teammem-Job: {JOB}\nTeammem-Source: {SOURCE}\nTeammem-Range: {}..{}",
            "a".repeat(40),
            "b".repeat(40)
        )
    );
    fixture.git(&["fsck", "--strict"]);

    // Patch, with the blob sha read through the tools.
    let page = writer
        .envelope(
            "get_wiki_page",
            json!({"repository": SOURCE, "path": "area/Notes.md", "ref": first}),
        )
        .await;
    let expected_sha = page["result"]["sha"].as_str().unwrap();
    let patched = writer
        .envelope(
            "patch_wiki_pages",
            json!({
                "repository": SOURCE,
                "expected_wiki_repository": SOURCE,
                "expected_base": first,
                "message": "Add an entry",
                "patches": {"area/Notes.md": {
                    "expected_sha": expected_sha,
                    "replacements": [
                        {"old": "- first entry\n", "new": "- first entry\n- second entry\n"},
                        {"old": "", "new": "Appended.\n"},
                    ],
                }},
            }),
        )
        .await;
    assert_eq!(patched["result"]["status"], "updated", "{patched}");
    let second = patched["result"]["sha"].as_str().unwrap().to_owned();
    assert_eq!(fixture.head(), second);
    assert_eq!(
        fixture.git(&["log", "-1", "--format=%P", &second]).trim(),
        first
    );
    let expected =
        TOPIC.replace("- first entry\n", "- first entry\n- second entry\n") + "Appended.\n";
    assert_eq!(
        fixture.git(&["show", &format!("{second}:area/Notes.md")]),
        expected
    );
    fixture.git(&["fsck", "--strict"]);

    // Repeating the first write on the old base changes nothing: no-change.
    let again = writer
        .envelope(
            "write_wiki_pages",
            write_args(
                &base,
                json!([{"path": "Changelog.md", "content": new_page}]),
            ),
        )
        .await;
    assert_eq!(again["result"]["status"], "no-change", "{again}");
    assert_eq!(fixture.head(), second);

    // A different change on the stale base is a conflict and changes nothing.
    let stale = writer
        .envelope(
            "write_wiki_pages",
            write_args(&base, json!([{"path": "Stale.md", "content": "stale\n"}])),
        )
        .await;
    assert_eq!(error_type(&stale), "conflict", "{stale}");
    assert_eq!(stale["outcome"], "not_applied");
    assert_eq!(fixture.head(), second);

    // A rule broken in a write is an envelope error and writes nothing.
    let bad = writer
        .envelope(
            "write_wiki_pages",
            write_args(&second, json!([{"path": "notes.txt", "content": "x"}])),
        )
        .await;
    assert_eq!(error_type(&bad), "invalid_input", "{bad}");
    let empty = writer
        .envelope("write_wiki_pages", write_args(&second, json!([])))
        .await;
    assert_eq!(error_type(&empty), "invalid_input", "{empty}");
    assert_eq!(fixture.head(), second);
    writer.close().await;
}

#[tokio::test]
async fn the_writer_token_never_leaves_in_a_result() {
    let fixture = Fixture::new();
    // A human put the token into a page; reading it back must not reveal it.
    let tip = fixture.commit(&[("Leak.md", &format!("token: {TOKEN}\n"))], "Oops");
    let writer = fixture.writer().await;
    let page = writer
        .envelope(
            "get_wiki_page",
            json!({"repository": SOURCE, "path": "Leak.md"}),
        )
        .await;
    assert_eq!(error_type(&page), "internal_error", "{page}");
    let search = writer
        .envelope(
            "search_wiki",
            json!({"repository": SOURCE, "query": "token"}),
        )
        .await;
    assert_eq!(error_type(&search), "internal_error");
    // A write whose own result would carry it is withheld, and may have happened.
    let written = writer
        .envelope(
            "write_wiki_pages",
            json!({"repository": SOURCE, "expected_wiki_repository": SOURCE, "expected_base": tip,
                   "message": "m", "pages": [{"path": format!("{TOKEN}.md"), "content": "x\n"}]}),
        )
        .await;
    assert_eq!(error_type(&written), "internal_error", "{written}");
    assert_eq!(written["outcome"], "unknown");
    // The agent server holds no token, so the same page reads normally there.
    let agent = fixture.agent(false).await;
    let page = agent
        .envelope(
            "get_wiki_page",
            json!({"repository": SOURCE, "path": "Leak.md", "ref": tip}),
        )
        .await;
    assert_eq!(page["success"], true);
    agent.close().await;
    writer.close().await;
}

#[tokio::test]
async fn the_runner_side_environment_round_trips_into_the_same_binding() {
    let fixture = Fixture::new();
    let env = fixture.writer_env();
    let binding = Binding::writer_from_env(|name| env.get(name).cloned()).expect("binding");
    let writer = binding.writer.as_ref().expect("a writer binding");
    let rebuilt: HashMap<String, String> = writer
        .environment(&fixture.config_path)
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect();
    assert_eq!(rebuilt, env);
}

#[tokio::test]
async fn four_writers_on_one_base_give_one_update_and_three_conflicts() {
    let fixture = Fixture::new();
    let base = fixture.head();
    // Four writer servers, each with its own store and locks, as four children would be.
    let mut writers = Vec::new();
    for _ in 0..4 {
        writers.push(fixture.writer().await);
    }
    let calls = writers.iter().enumerate().map(|(i, writer)| {
        let base = base.clone();
        async move {
            writer
                .envelope(
                    "write_wiki_pages",
                    write_args(
                        &base,
                        json!([{"path": "Race.md", "content": format!("writer {i}\n")}]),
                    ),
                )
                .await
        }
    });
    let results = futures_util::future::join_all(calls).await;
    let updated: Vec<&Value> = results
        .iter()
        .filter(|e| e["success"] == true && e["result"]["status"] == "updated")
        .collect();
    let conflicts = results
        .iter()
        .filter(|e| e["success"] == false && e["error"]["type"] == "conflict")
        .count();
    assert_eq!((updated.len(), conflicts), (1, 3), "{results:#?}");
    let winner = updated[0]["result"]["sha"].as_str().unwrap();
    assert_eq!(fixture.head(), winner);
    assert_eq!(
        fixture.git(&["log", "-1", "--format=%P", winner]).trim(),
        base
    );
    assert_eq!(
        fixture
            .git(&["rev-list", "--count", &format!("{base}..master")])
            .trim(),
        "1"
    );
    fixture.git(&["fsck", "--strict"]);
    for writer in writers {
        writer.close().await;
    }
}

/// One call writes a page and patches another as one commit on the base; a
/// page named in both, or patches without pages, are refused untouched.
#[tokio::test]
async fn a_write_with_patches_is_one_commit() {
    let fixture = Fixture::new();
    let writer = fixture.writer().await;
    let base = fixture.head();
    let home = writer
        .envelope(
            "get_wiki_page",
            json!({"repository": SOURCE, "path": "Home.md", "ref": base}),
        )
        .await;
    let home_sha = home["result"]["sha"].as_str().unwrap().to_owned();
    let patches = json!({"Home.md": {
        "expected_sha": home_sha,
        "replacements": [{"old": "", "new": "- [Changelog](Changelog) <!-- teammem:changelog-link -->\n"}],
    }});
    let new_page = "# Changelog\n\n- PR #7\n";

    let mut both = write_args(&base, json!([{"path": "Home.md", "content": "x"}]));
    both["patches"] = patches.clone();
    let refused = writer.envelope("write_wiki_pages", both).await;
    assert_eq!(error_type(&refused), "invalid_input", "{refused}");
    let mut only_patches = write_args(&base, json!([]));
    only_patches["patches"] = patches.clone();
    let refused = writer.envelope("write_wiki_pages", only_patches).await;
    assert_eq!(error_type(&refused), "invalid_input", "{refused}");
    assert_eq!(fixture.head(), base, "refused calls change nothing");

    let mut args = write_args(
        &base,
        json!([{"path": "Changelog.md", "content": new_page}]),
    );
    args["patches"] = patches;
    let written = writer.envelope("write_wiki_pages", args).await;
    assert_eq!(written["result"]["status"], "updated", "{written}");
    let tip = written["result"]["sha"].as_str().unwrap().to_owned();
    assert_eq!(fixture.head(), tip);
    assert_eq!(
        fixture.git(&["log", "-1", "--format=%P", &tip]).trim(),
        base,
        "one commit on the base"
    );
    assert_eq!(
        fixture.git(&["show", &format!("{tip}:Changelog.md")]),
        new_page
    );
    assert_eq!(
        fixture.git(&["show", &format!("{tip}:Home.md")]),
        format!("{HOME}- [Changelog](Changelog) <!-- teammem:changelog-link -->\n")
    );
    fixture.git(&["fsck", "--strict"]);
    writer.close().await;
}
