//! The functions behind `teammem wiki ...`: the same tools and the same envelope
//! for an operator; writes need an explicit full-sha base and carry the
//! operator's trailers instead of a job's.

use serde_json::json;
use teammem::mcp::operator::{self, Command, Request};

use super::fixture::{Fixture, HOME, SOURCE, TOPIC, error_type};

fn request(command: Command) -> Request {
    Request {
        repository: SOURCE.into(),
        token: None,
        command,
    }
}

#[tokio::test]
async fn operator_reads_answer_the_tool_envelope() {
    let fixture = Fixture::new();
    let tip = fixture.head();
    let snapshot = operator::run(fixture.config(), request(Command::Snapshot)).await;
    assert_eq!(snapshot["success"], true, "{snapshot}");
    assert_eq!(snapshot["result"]["sha"], tip);
    assert_eq!(snapshot["result"]["source_repository"], SOURCE);
    assert_eq!(operator::exit_code(&snapshot), 0);

    let page = operator::run(
        fixture.config(),
        request(Command::Get {
            path: "Home.md".into(),
            git_ref: tip.clone(),
        }),
    )
    .await;
    assert_eq!(page["result"]["content"], HOME);

    let history = operator::run(
        fixture.config(),
        request(Command::History {
            path: None,
            git_ref: "HEAD".into(),
            limit: 0,
        }),
    )
    .await;
    assert_eq!(error_type(&history), "invalid_input");
    assert_eq!(operator::exit_code(&history), 1);

    let unknown = operator::run(
        fixture.config(),
        Request {
            repository: "octo/unknown".into(),
            token: None,
            command: Command::Snapshot,
        },
    )
    .await;
    assert_eq!(error_type(&unknown), "not_found");
}

#[tokio::test]
async fn operator_writes_need_a_full_base_and_carry_operator_trailers() {
    let fixture = Fixture::new();
    let base = fixture.head();
    let head_base = operator::run(
        fixture.config(),
        request(Command::Write {
            expected_base: "HEAD".into(),
            expected_wiki_repository: None,
            message: "m".into(),
            pages: json!([{"path": "Home.md", "content": "x\n"}]),
        }),
    )
    .await;
    assert_eq!(error_type(&head_base), "invalid_input", "{head_base}");
    let bad_pages = operator::run(
        fixture.config(),
        request(Command::Write {
            expected_base: base.clone(),
            expected_wiki_repository: None,
            message: "m".into(),
            pages: json!({"Home.md": "x"}),
        }),
    )
    .await;
    assert_eq!(error_type(&bad_pages), "invalid_input", "{bad_pages}");
    let elsewhere = operator::run(
        fixture.config(),
        request(Command::Write {
            expected_base: base.clone(),
            expected_wiki_repository: Some("demo/elsewhere".into()),
            message: "m".into(),
            pages: json!([{"path": "Home.md", "content": "x\n"}]),
        }),
    )
    .await;
    assert_eq!(error_type(&elsewhere), "destination_changed");
    assert_eq!(fixture.head(), base);

    let written = operator::run(
        fixture.config(),
        request(Command::Write {
            expected_base: base.clone(),
            expected_wiki_repository: Some(SOURCE.into()),
            message: "Fix a typo by hand".into(),
            pages: json!([{"path": "Home.md", "content": "# Home\n"}]),
        }),
    )
    .await;
    assert_eq!(written["result"]["status"], "updated", "{written}");
    let first = written["result"]["sha"].as_str().unwrap().to_owned();
    assert_eq!(fixture.head(), first);
    assert_eq!(
        fixture.git(&["show", &format!("{first}:Home.md")]),
        "# Home\n"
    );
    let trailers = fixture.git(&["log", "-1", "--format=%(trailers:only,unfold)", &first]);
    assert_eq!(
        trailers.trim(),
        format!("Teammem-Source: {SOURCE}\nTeammem-Origin: operator")
    );

    let blob = fixture.git(&["rev-parse", &format!("{first}:area/Topic.md")]);
    let patched = operator::run(
        fixture.config(),
        request(Command::Patch {
            expected_base: first.clone(),
            expected_wiki_repository: None,
            message: "Patch by hand".into(),
            patches: json!({"area/Topic.md": {"expected_sha": blob.trim(),
                "replacements": [{"old": "Recent changes:", "new": "Latest changes:"}]}}),
        }),
    )
    .await;
    assert_eq!(patched["result"]["status"], "updated", "{patched}");
    let second = fixture.head();
    assert_eq!(
        fixture.git(&["show", &format!("{second}:area/Topic.md")]),
        TOPIC.replace("Recent changes:", "Latest changes:")
    );
    assert_eq!(
        fixture.git(&["log", "-1", "--format=%P", &second]).trim(),
        first
    );
    fixture.git(&["fsck", "--strict"]);
}

/// Runs `teammem wiki ...` and returns (exit code, the envelope it printed).
fn teammem_wiki(fixture: &Fixture, args: &[&str]) -> (i32, serde_json::Value) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_teammem"))
        .arg("wiki")
        .args(["--config", fixture.config_path.to_str().unwrap()])
        .args(args)
        .args(["--repository", SOURCE])
        .env_remove("TEAMMEM_WIKI_TOKEN")
        .output()
        .expect("run teammem wiki");
    let envelope = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "stdout is the envelope as JSON: {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().expect("an exit code"), envelope)
}

#[test]
fn the_teammem_wiki_command_prints_the_envelope_and_exits_by_success() {
    let fixture = Fixture::new();
    let base = fixture.head();
    let (code, snapshot) = teammem_wiki(&fixture, &["snapshot"]);
    assert_eq!(
        (code, &snapshot["result"]["sha"]),
        (0, &json!(base)),
        "{snapshot}"
    );

    let (code, refused) = teammem_wiki(&fixture, &["history", "--limit", "0"]);
    assert_eq!(code, 1);
    assert_eq!(error_type(&refused), "invalid_input");

    let pages = json!([{"path": "Cli.md", "content": "from the command line\n"}]).to_string();
    let (code, written) = teammem_wiki(
        &fixture,
        &[
            "write",
            "--expected-base",
            &base,
            "--message",
            "From the CLI",
            "--pages",
            &pages,
        ],
    );
    assert_eq!(code, 0, "{written}");
    assert_eq!(written["result"]["status"], "updated");
    assert_eq!(
        fixture.git(&["show", "master:Cli.md"]),
        "from the command line\n"
    );
    assert_eq!(
        fixture.git(&["log", "-1", "--format=%P", "master"]).trim(),
        base
    );

    // The same write on the old base again: nothing new to write.
    let (code, again) = teammem_wiki(
        &fixture,
        &[
            "write",
            "--expected-base",
            &base,
            "--message",
            "From the CLI",
            "--pages",
            &pages,
        ],
    );
    assert_eq!(
        (code, &again["result"]["status"]),
        (0, &json!("no-change")),
        "{again}"
    );
}
