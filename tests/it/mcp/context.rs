//! `get_context` through real MCP clients: the real `teammem mcp` process
//! (stdio) and the daemon's `/mcp` (both protocol eras), on the generated
//! history the real daemon recorded ([`super::history`]), and in process on
//! a hostile wiki. For a file several pull requests touched the answer holds
//! its purpose, its current and stale facts (from a page a person wrote)
//! with their commits, every pull request newest first, who knows its area
//! and `as_of`; a smaller budget keeps the most relevant items, names the
//! older pull requests in brief before it leaves any out, and says what it
//! left out; bad input is refused naming the problem, a repository a
//! token may not read is answered exactly like one that does not exist, a
//! path whose area pages lie past the index's scan budget is found by their
//! names, and a hostile wiki gets a bounded answer.

use serde_json::{Value, json};

use super::fixture::{Fixture, SOURCE, error_type};
use super::history::{OTHER, REPOSITORY, build, build_serving};
use super::questions::{call, spawn_mcp};
use crate::coordinator::{Era, connect_to, envelope};

fn items<'a>(answer: &'a Value, kind: &str) -> Vec<&'a Value> {
    answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["kind"] == kind)
        .collect()
}

#[tokio::test]
async fn a_file_several_pull_requests_touched() {
    let history = build().await;
    let client = spawn_mcp(&history.config).await;
    let envelope = call(
        &client,
        "get_context",
        json!({"repository": REPOSITORY, "paths": ["billing/invoice.py"], "format": "json"}),
    )
    .await;
    assert_eq!(envelope["success"], true, "{envelope}");
    let full = &envelope["result"];
    assert_eq!(full["as_of"], history.merged[15].as_str(), "{full}");
    assert_eq!(
        full["paths"],
        json!([{"path": "billing/invoice.py", "kind": "file", "area": "billing", "area_page": "Area-billing.md"}])
    );

    let purpose = items(full, "purpose");
    assert_eq!(purpose.len(), 1, "{full}");
    assert_eq!(
        purpose[0]["text"],
        "Invoices: totals, taxes and the PDF an order's customer receives."
    );
    assert_eq!(purpose[0]["status"], "current");
    assert_eq!(purpose[0]["page"], "Area-billing.md");
    assert_eq!(purpose[0]["lines"], "L1");

    // The person's page: one fact stale since #12, one current.
    let facts = items(full, "fact");
    assert_eq!(facts.len(), 2, "{full}");
    let stale = facts.iter().find(|f| f["status"] == "stale").unwrap();
    assert_eq!(
        stale["text"],
        "Taxes are computed on the invoice total and rounded once."
    );
    assert_eq!(stale["page"], "Billing-notes.md");
    assert_eq!(stale["line"], 7);
    // Commits in items as `git log --abbrev=12` shows them; `as_of` whole.
    assert_eq!(stale["cited_commit"], &history.cited[..12]);
    assert_eq!(stale["lines"], "L3-L4");
    assert_eq!(stale["changed_in"], &history.merged[12][..12]);
    let current = facts.iter().find(|f| f["status"] == "current").unwrap();
    assert_eq!(current["text"], "Invoice numbers restart every year.");
    assert_eq!(current["lines"], "L6");
    assert!(current.get("changed_in").is_none(), "{current}");

    // Every pull request that touched it, newest first, with its why.
    let changes = items(full, "change");
    let numbers: Vec<u64> = changes
        .iter()
        .map(|c| c["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [12, 6, 5], "{full}");
    assert_eq!(changes[0]["title"], "Round taxes per line, not per invoice");
    assert_eq!(changes[0]["author"], "Erin");
    assert_eq!(changes[0]["date"], "2026-05-05");
    assert_eq!(changes[0]["merge_commit"], &history.merged[12][..12]);
    assert!(
        changes[0]["why"]
            .as_str()
            .unwrap()
            .starts_with("Invoices disagreed with receipts by a cent"),
        "{}",
        changes[0]
    );
    // Its entry is on the Changelog, the area's page and its quarter page:
    // the one to read is the area's.
    assert_eq!(changes[0]["page"], "Area-billing.md", "{}", changes[0]);

    let people = items(full, "people");
    assert_eq!(people[0]["authors"], json!(["Erin (3)", "Alice (1)"]));
    // Each thing said once: nothing left out is `{"items": 0}`; no item
    // repeats in `about` the one path asked (nor a change the files it
    // names, nor people their area: `paths` map each path to its area); a
    // known `as_of` has no reason beside it; an index that read every page
    // does not say so.
    assert_eq!(full["left_out"], json!({"items": 0}), "{full}");
    assert!(
        full["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|item| item.get("about").is_none()),
        "{full}"
    );
    assert_eq!(full["paths"][0]["area"], "billing", "{full}");
    assert!(full.get("as_of_reason").is_none(), "{full}");
    assert!(full.get("truncated").is_none(), "{full}");
    let used = full["tokens"]["used"].as_u64().unwrap();
    assert!(used <= 2000 && used > 0);
    // The most relevant first: what the file is, then what no longer holds.
    assert_eq!(full["items"][0]["kind"], "purpose");
    assert_eq!(full["items"][1]["status"], "stale");

    // Deterministic: the same answer again.
    let again = call(
        &client,
        "get_context",
        json!({"repository": REPOSITORY, "paths": ["billing/invoice.py"], "format": "json"}),
    )
    .await;
    assert_eq!(again["result"], *full);

    // A smaller budget keeps the most relevant items and says what it left
    // out; a pull request whose whole entry does not fit is named in brief
    // (`#NUMBER TITLE`, then ` (AUTHOR, DATE)` and ` — WHY` as they fit)
    // before it is left out. At every budget each item of the full answer
    // is kept, named in brief or counted. The folder billing/ was touched by
    // four: past the three kept whole first, #5 goes brief (made whole
    // again only at full detail, as the reference answer asks).
    let folder = call(
        &client,
        "get_context",
        json!({"repository": REPOSITORY, "paths": ["billing/"], "detail": "full", "format": "json"}),
    )
    .await["result"]
        .clone();
    let brief_line = |change: &Value| {
        format!(
            "#{} {} ({}, {})",
            change["number"],
            change["title"].as_str().unwrap(),
            change["author"].as_str().unwrap(),
            change["date"].as_str().unwrap()
        )
    };
    let mut briefed = Vec::new();
    for (path, full, max_tokens) in (300..=1_000)
        .step_by(25)
        .flat_map(|n| [("billing/invoice.py", full, n), ("billing/", &folder, n)])
    {
        let all = full["items"].as_array().unwrap();
        let small = call(
            &client,
            "get_context",
            json!({"repository": REPOSITORY, "paths": [path], "max_tokens": max_tokens, "format": "json"}),
        )
        .await;
        let small = &small["result"];
        let kept = small["items"].as_array().unwrap();
        assert!(!kept.is_empty(), "{small}");
        assert_eq!(kept[0], all[0], "the most relevant first at {max_tokens}");
        // `used` counts the whole result the client reads, the fields the
        // envelope adds included.
        let used = small["tokens"]["used"].as_u64().unwrap();
        let whole = serde_json::to_string(small).unwrap().len().div_ceil(4) as u64;
        assert!(
            whole <= used && used <= max_tokens,
            "{whole} > {used}: {small}"
        );
        let lines: Vec<&str> = items(small, "earlier_changes")
            .iter()
            .flat_map(|list| list["changes"].as_array().unwrap())
            .map(|line| line.as_str().unwrap())
            .collect();
        let in_brief = |item: &Value| {
            if item["kind"] != "change" {
                return false;
            }
            let named = brief_line(item);
            let bare = format!("#{} {}", item["number"], item["title"].as_str().unwrap());
            lines.iter().any(|line| {
                *line == bare || *line == named || line.starts_with(&format!("{named} — "))
            })
        };
        let mut counted = 0;
        for item in all {
            if kept.contains(item) {
                continue;
            }
            if in_brief(item) {
                briefed.push(item["number"].as_u64().unwrap());
                continue;
            }
            counted += 1;
        }
        assert_eq!(
            small["left_out"]["items"].as_u64().unwrap() as usize,
            counted,
            "{small}"
        );
        let by_kind: u64 = small["left_out"]["by_kind"]
            .as_object()
            .map_or(0, |kinds| kinds.values().map(|n| n.as_u64().unwrap()).sum());
        assert_eq!(by_kind as usize, counted);
        let none = Vec::new();
        let read_more = small["left_out"]["read_more"].as_array().unwrap_or(&none);
        assert_eq!(read_more.is_empty(), counted == 0, "{small}");
        for page in read_more {
            assert!(
                all.iter()
                    .filter(|i| !kept.contains(i))
                    .any(|i| i["page"] == *page
                        || i["pages"]
                            .as_array()
                            .is_some_and(|p| p.first() == Some(page))),
                "{page} holds something left out"
            );
        }
        // Older changes go brief first: a whole change is never older than
        // one named in brief.
        let whole: Vec<u64> = items(small, "change")
            .iter()
            .map(|c| c["number"].as_u64().unwrap())
            .collect();
        for line in &lines {
            let number: u64 = line[1..line.find(' ').unwrap()].parse().unwrap();
            assert!(whole.iter().all(|w| *w > number), "{small}");
        }
    }
    // Some budget between named the oldest in brief and not whole.
    assert!(briefed.contains(&5), "{briefed:?}");
    assert_eq!(folder["left_out"]["items"], 0, "{folder}");
    client.cancel().await.unwrap();
}

/// What the text form must say of a JSON answer's item: each value an
/// agent acts on, in the words the text uses.
fn said_of(item: &Value) -> Vec<String> {
    let text = |key: &str| item[key].as_str().unwrap_or_default().to_owned();
    match item["kind"].as_str().unwrap() {
        "purpose" | "fact" | "how_to" => {
            let mut said = vec![
                text("text").trim_start_matches("- ").to_owned(),
                format!("[{}:{}, cites ", text("page"), item["line"]),
                format!(
                    "{} {}, {}",
                    text("cited_commit"),
                    text("lines"),
                    text("status")
                ),
            ];
            if item.get("changed_in").is_some() {
                said.push(format!("stale: changed in {}", text("changed_in")));
            }
            said
        }
        "change" => {
            let mut said = vec![
                format!(
                    "#{} {} ({}, {})",
                    item["number"],
                    text("title"),
                    text("author"),
                    text("date")
                ),
                format!("merge {} [{}]", text("merge_commit"), text("page")),
            ];
            if item.get("why").is_some() {
                said.push(format!("\n  why: {}\n", text("why")));
            }
            let files: Vec<&str> = item["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap())
                .collect();
            said.push(format!("  files: {}", files.join(", ")));
            said
        }
        "people" => item["authors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect(),
        "earlier_changes" => item["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|line| format!("\n{}", line.as_str().unwrap()))
            .collect(),
        other => panic!("a {other} item in this answer: {item}"),
    }
}

/// The default text form says everything the JSON form says, in fewer
/// tokens, within the same budget (where the budget cuts, each form is
/// packed by its own cost), the same on every call; for one wiki and for
/// every wiki the caller may read.
#[tokio::test]
async fn the_default_text_says_what_the_json_says_in_fewer_tokens() {
    let history = build().await;
    let client = spawn_mcp(&history.config).await;
    let mut cut = 0;
    for (paths, max_tokens, repository) in [
        (json!(["billing/invoice.py"]), 2_000, Some(REPOSITORY)),
        (json!(["billing/invoice.py"]), 200, Some(REPOSITORY)),
        (json!(["billing/", "README.md"]), 16_000, Some(REPOSITORY)),
        (json!(["billing/"]), 250, Some(REPOSITORY)),
        (json!(["billing/invoice.py"]), 2_000, None),
        (json!(["billing/"]), 200, None),
    ] {
        let mut arguments = json!({"paths": paths, "max_tokens": max_tokens});
        if let Some(repository) = repository {
            arguments["repository"] = json!(repository);
        }
        let text_call = call(&client, "get_context", arguments.clone()).await;
        assert_eq!(text_call["success"], true, "{text_call}");
        let again = call(&client, "get_context", arguments.clone()).await;
        assert_eq!(again, text_call, "the same text on every call");
        arguments["format"] = json!("json");
        let json_call = call(&client, "get_context", arguments).await;
        let (text_form, json_form) = (&text_call["result"], &json_call["result"]);
        let lines = text_form["text"].as_str().unwrap();
        assert!(text_form.get("items").is_none(), "{text_form}");
        for key in ["as_of", "ref", "source_repository"] {
            assert_eq!(text_form.get(key), json_form.get(key), "{key}");
        }
        assert!(
            !lines.contains("<!--") && !lines.contains("teammem:evidence"),
            "{lines}"
        );
        for path in json_form["paths"].as_array().unwrap() {
            let at = path["repository"]
                .as_str()
                .map(|r| format!("[{r}] "))
                .unwrap_or_default();
            let named = format!(
                "path {at}{}: {}",
                path["path"].as_str().unwrap(),
                path["kind"].as_str().unwrap()
            );
            assert!(lines.contains(&named), "{named} in {lines}");
        }
        // Where the budget cut neither, the text says every item; where it
        // cut, each form is packed by its own cost.
        let left = json_form["left_out"]["items"].as_u64().unwrap();
        for item in json_form["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|_| left == 0)
        {
            for said in said_of(item) {
                assert!(lines.contains(&said), "{said:?} of {item} in:\n{lines}");
            }
        }
        for wiki in json_form["wikis"].as_array().into_iter().flatten() {
            let line = format!(
                "wiki {}: ref {}",
                wiki["repository"].as_str().unwrap(),
                wiki["ref"].as_str().unwrap()
            );
            assert!(lines.contains(&line), "{line} in {lines}");
        }
        let text_left: u64 = lines.split_once("left out: ").map_or(0, |(_, rest)| {
            rest.split(' ').next().unwrap().parse().unwrap()
        });
        assert_eq!(text_left == 0, left == 0, "{lines}");
        if text_left > 0 {
            assert!(lines.contains("; read more: "), "{lines}");
        }
        cut += usize::from(left > 0);
        // `used` is the text result's own, with what the envelope adds; it
        // is within the budget for one wiki (an org answer's lines naming
        // each wiki read are outside it, as its `wikis` are), and below the
        // JSON form's whole size when that was not cut.
        let used = text_form["tokens"]["used"].as_u64().unwrap();
        let whole = serde_json::to_string(text_form).unwrap().len().div_ceil(4) as u64;
        assert_eq!(used, whole, "{text_form}");
        let json_whole = serde_json::to_string(json_form).unwrap().len().div_ceil(4) as u64;
        if left == 0 {
            assert!(
                used < json_whole,
                "{used} vs {json_whole}: {text_form} {json_form}"
            );
        }
        if repository.is_some() {
            assert!(used <= max_tokens, "{text_form}");
        }
    }
    assert_eq!(cut, 3, "the small budgets cut the answer");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn folders_manifests_and_questions() {
    let history = build().await;
    let client = spawn_mcp(&history.config).await;
    let ask = async |arguments: Value| {
        let mut arguments = arguments;
        arguments["format"] = json!("json");
        let envelope = call(&client, "get_context", arguments).await;
        assert_eq!(envelope["success"], true, "{envelope}");
        envelope["result"].clone()
    };

    // A folder: every pull request under it, and each file's purpose.
    let folder = ask(json!({"repository": REPOSITORY, "paths": ["billing/"]})).await;
    assert_eq!(folder["paths"][0]["kind"], "directory", "{folder}");
    assert_eq!(folder["paths"][0]["area"], "billing");
    let numbers: Vec<u64> = items(&folder, "change")
        .iter()
        .map(|c| c["number"].as_u64().unwrap())
        .collect();
    // A brief answer (the default) keeps the newest three whole and names
    // the older one; at full detail the budget left makes it whole too.
    assert_eq!(numbers, [12, 9, 6], "{folder}");
    let lines = items(&folder, "earlier_changes");
    assert_eq!(lines.len(), 1, "{folder}");
    assert!(
        lines[0]["changes"][0].as_str().unwrap().starts_with("#5 "),
        "{folder}"
    );
    let full =
        ask(json!({"repository": REPOSITORY, "paths": ["billing/"], "detail": "full"})).await;
    let numbers: Vec<u64> = items(&full, "change")
        .iter()
        .map(|c| c["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [12, 9, 6, 5], "{full}");
    assert!(items(&full, "earlier_changes").is_empty(), "{full}");
    let purposes: Vec<&str> = items(&folder, "purpose")
        .iter()
        .map(|p| p["path"].as_str().unwrap())
        .collect();
    assert_eq!(purposes.len(), 2, "{folder}");

    // A manifest: what it declares, and the pull requests that changed it.
    let manifest = ask(json!({"repository": REPOSITORY, "paths": ["pyproject.toml"]})).await;
    let declared: Vec<(&str, &str)> = items(&manifest, "dependency")
        .iter()
        .map(|d| {
            (
                d["name"].as_str().unwrap(),
                d["requirement"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        declared,
        [
            ("fastapi", "==0.110.0"),
            ("redis", "==5.0.1"),
            ("stripe", "==8.0.0")
        ],
        "{manifest}"
    );
    let numbers: Vec<u64> = items(&manifest, "change")
        .iter()
        .map(|c| c["number"].as_u64().unwrap())
        .collect();
    // The newest three whole, the oldest named in brief.
    assert_eq!(numbers, [15, 6, 3], "{manifest}");
    let lines = items(&manifest, "earlier_changes");
    assert!(
        lines[0]["changes"][0].as_str().unwrap().starts_with("#1 "),
        "{manifest}"
    );

    // With a question, what answers it comes first.
    let asked = ask(json!({"repository": REPOSITORY, "paths": ["pyproject.toml"], "query": "why was fastapi upgraded?"})).await;
    assert_eq!(asked["items"][0]["kind"], "change", "{asked}");
    assert_eq!(asked["items"][0]["number"], 15, "{asked}");

    // A question alone, and one that names a path.
    let question =
        ask(json!({"repository": REPOSITORY, "query": "Why are taxes rounded per line?"})).await;
    assert_eq!(question["items"][0]["kind"], "change", "{question}");
    assert_eq!(question["items"][0]["number"], 12);
    let who = ask(json!({"repository": REPOSITORY, "query": "Who knows the billing area?"})).await;
    assert_eq!(who["items"][0]["kind"], "people", "{who}");
    assert_eq!(who["items"][0]["area"], "billing");
    assert_eq!(who["items"][0]["authors"][0], "Erin (3)");
    let named =
        ask(json!({"repository": REPOSITORY, "query": "what should I know about web/cart.js"}))
            .await;
    assert_eq!(named["paths"][0]["path"], "web/cart.js", "{named}");
    assert!(
        items(&named, "change").iter().any(|c| c["number"] == 13),
        "{named}"
    );

    // A path the wiki does not know is said to be unknown, not guessed at.
    let unknown = ask(json!({"repository": REPOSITORY, "paths": ["nowhere/x.rs"]})).await;
    assert_eq!(unknown["paths"][0]["kind"], "unknown");
    assert_eq!(unknown["items"], json!([]));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn bad_input_and_other_repositories_are_refused() {
    let history = build_serving(true).await;
    let client = spawn_mcp(&history.config).await;
    let many: Vec<String> = (0..51).map(|i| format!("src/f{i}.rs")).collect();
    for (arguments, kind, says) in [
        (json!({"paths": ["../etc/passwd"]}), "invalid_input", "`..`"),
        (
            json!({"paths": ["/etc/passwd"]}),
            "invalid_input",
            "absolute",
        ),
        (
            json!({"paths": ["a\u{0}b"]}),
            "invalid_input",
            "control character",
        ),
        (json!({"paths": many}), "invalid_input", "at most 50"),
        (
            json!({"paths": ["a.py"], "max_tokens": 99}),
            "invalid_input",
            "between 100 and 16000",
        ),
        (
            json!({"paths": ["a.py"], "max_tokens": 16001}),
            "invalid_input",
            "between 100 and 16000",
        ),
        (
            json!({"paths": ["a.py"], "max_tokens": -1}),
            "invalid_input",
            "got -1",
        ),
        (
            json!({"query": "q".repeat(513)}),
            "limit_exceeded",
            "at most 512 bytes",
        ),
        (json!({}), "invalid_input", "name the paths"),
        (
            json!({"paths": ["a.py"], "ref": "main"}),
            "invalid_input",
            "ref",
        ),
    ] {
        let mut arguments = arguments;
        arguments["repository"] = json!(REPOSITORY);
        let answer = call(&client, "get_context", arguments.clone()).await;
        assert_eq!(error_type(&answer), kind, "{arguments}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{arguments}: {message}");
    }
    client.cancel().await.unwrap();

    // Over /mcp, a token for another repository learns nothing of this one:
    // the answer is the one for a repository that does not exist.
    let daemon = history.daemon.as_ref().unwrap();
    let scoped = history.setup.create_token("elsewhere", &["demo/elsewhere"]);
    let all = history.setup.create_token("everything", &[]);
    // A token for a source since removed: made with the source configured.
    let text = std::fs::read_to_string(&history.setup.config).unwrap();
    let other = text
        .find(&format!("[[sources]]\nrepository = \"{OTHER}\""))
        .unwrap();
    let entry = text[other..].replace(OTHER, "demo/gone");
    let with_gone = history.setup.dir.path().join("with-gone.toml");
    std::fs::write(&with_gone, format!("{text}\n{entry}")).unwrap();
    let made = std::process::Command::new(crate::harness::daemon::BIN)
        .args([
            "tokens",
            "create",
            "--name",
            "gone",
            "--repository",
            "demo/gone",
            "--config",
        ])
        .arg(&with_gone)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let gone = String::from_utf8(made.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_owned();
    for era in [Era::Handshake, Era::Stateless] {
        let client = connect_to(daemon.url("/mcp"), &scoped, era, false).await;
        let mut answers = Vec::new();
        for repository in [REPOSITORY, "nobody/nothing"] {
            let answer = envelope(
                &client,
                "get_context",
                json!({"repository": repository, "paths": ["billing/invoice.py"], "format": "json"}),
            )
            .await;
            assert_eq!(answer["success"], false, "{answer}");
            assert!(answer["result"].is_null());
            let message = answer["error"]["message"]
                .as_str()
                .unwrap()
                .replace(repository, "R");
            answers.push((answer["error"]["type"].clone(), message));
        }
        assert_eq!(answers[0], answers[1], "{era:?}");
        client.cancel().await.unwrap();

        // A token for a repository no longer configured is told so, and
        // learns no configured source's name.
        let client = connect_to(daemon.url("/mcp"), &gone, era, false).await;
        let answer = envelope(
            &client,
            "get_context",
            json!({"repository": "demo/gone", "paths": ["billing/invoice.py"]}),
        )
        .await;
        assert_eq!(answer["error"]["type"], "not_found", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("demo/gone is not a configured source")
                && !message.contains(REPOSITORY)
                && !message.contains(OTHER),
            "{era:?}: {message}"
        );
        client.cancel().await.unwrap();

        let client = connect_to(daemon.url("/mcp"), &all, era, false).await;
        let answer = envelope(
            &client,
            "get_context",
            json!({"repository": REPOSITORY, "paths": ["billing/invoice.py"], "max_tokens": 400, "format": "json"}),
        )
        .await;
        assert_eq!(answer["success"], true, "{era:?}: {answer}");
        assert_eq!(answer["result"]["as_of"], history.merged[15].as_str());
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_hostile_wiki_gets_a_bounded_answer() {
    let fixture = Fixture::new();
    let sha = "a".repeat(40);
    // 10,000 markers over four pages (one page of them would be over the
    // 256 KiB a page may have to be read), and one page past that bound.
    let many: Vec<(String, String)> = (0..4)
        .map(|page| {
            let mut text = format!("# Many {page}\n\n");
            for i in 0..2_500 {
                text.push_str(&format!(
                    "Fact {i}. <!-- teammem:evidence src/x.rs@{sha}#L{} -->\n",
                    i + 1
                ));
            }
            (format!("Many-{page}.md"), text)
        })
        .collect();
    let huge = format!("# Huge\n\n{}", "Fact word src/x.rs.\n".repeat(16_000));
    let long_line = format!(
        "# Long\n\n{} <!-- teammem:evidence src/x.rs@{sha}#L1 -->\n",
        "word ".repeat(13_000)
    );
    let broken = format!(
        "# Broken\n\nNot a marker <!-- teammem:evidence src/x.rs@nope#L1 -->\n<!-- teammem:evidence \n- #1 x (by y, z) — merge commit `{sha}` <!-- teammem:{sha} -->\n- #2 (by ) — merge commit ` <!-- teammem:{} -->\n",
        "b".repeat(40)
    );
    let mut pages: Vec<(&str, &str)> = many.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    pages.extend([
        ("Huge.md", huge.as_str()),
        ("Long.md", long_line.as_str()),
        ("Broken.md", broken.as_str()),
    ]);
    fixture.commit(&pages, "Hostile pages");
    let agent = fixture.agent(true).await;
    for max_tokens in [100, 2000, 16_000] {
        let answer = agent
            .envelope(
                "get_context",
                json!({"repository": SOURCE, "paths": ["src/x.rs", "src/"], "query": "fact word", "max_tokens": max_tokens, "format": "json"}),
            )
            .await;
        assert_eq!(answer["success"], true, "{answer}");
        let result = &answer["result"];
        // Within the budget, unless the paths alone do not fit it: then
        // the answer is its frame, without items.
        let used = result["tokens"]["used"].as_u64().unwrap();
        assert!(
            used <= max_tokens || result["items"].as_array().unwrap().is_empty(),
            "{result}"
        );
        let text = serde_json::to_string(result).unwrap();
        assert!(
            text.len() <= max_tokens as usize * 4 + 4096,
            "{} bytes",
            text.len()
        );
        assert_eq!(result["unreadable_markers"], 2, "{result:?}");
        assert!(result["left_out"]["items"].as_u64().unwrap() > 0);
        assert_eq!(
            result["truncated"], true,
            "the page over 256 KiB is not read"
        );
        assert!(!text.contains("Huge.md"), "{text}");
        assert!(!text.contains("<!--"), "no marker reaches the answer");
    }
    agent.close().await;
}

#[tokio::test]
async fn a_path_whose_area_pages_are_past_the_scan_budget_is_found_by_their_names() {
    let fixture = Fixture::new();
    // Pages a person wrote, 9 MB in all, sorting before the area pages: the
    // index's 8 MiB scan ends before it reaches them.
    let filler = "A line of a page a person wrote, long enough to fill it.\n".repeat(16_000);
    let entry = |n: u64, date: &str| {
        let sha = format!("{n:040x}");
        format!(
            "- #{n} Round taxes, step {n} (by Erin, {date}) — Invoices disagreed with receipts. — merge commit `{sha}` — billing/invoice.py <!-- teammem:{sha} -->\n"
        )
    };
    let mut pages: Vec<(String, String)> = (0..10)
        .map(|i| (format!("A-filler-{i}.md"), filler.clone()))
        .collect();
    pages.push((
        "Area-billing.md".into(),
        format!(
            "# Area: billing\n\n## Changes\n\n{}",
            entry(7, "2026-05-05")
        ),
    ));
    pages.push((
        "Area-billing-2026-Q1.md".into(),
        format!("# Area: billing, 2026 Q1\n\n{}", entry(3, "2026-02-02")),
    ));
    let pages: Vec<(&str, &str)> = pages
        .iter()
        .map(|(path, text)| (path.as_str(), text.as_str()))
        .collect();
    fixture.commit(&pages, "A wiki larger than the scan budget");
    let agent = fixture.agent(true).await;
    let answer = agent
        .envelope(
            "get_context",
            json!({"repository": SOURCE, "paths": ["billing/invoice.py", "nowhere/x.py"], "format": "json"}),
        )
        .await;
    assert_eq!(answer["success"], true, "{answer}");
    let result = &answer["result"];
    assert_eq!(result["truncated"], true, "{result}");
    assert_eq!(result["paths"][0]["kind"], "file", "{result}");
    assert_eq!(result["paths"][1]["kind"], "unknown", "{result}");
    let changes = items(result, "change");
    let numbers: Vec<u64> = changes
        .iter()
        .map(|c| c["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [7, 3], "{result}");
    assert_eq!(changes[0]["page"], "Area-billing.md");
    assert_eq!(changes[1]["page"], "Area-billing-2026-Q1.md");
    agent.close().await;
}
