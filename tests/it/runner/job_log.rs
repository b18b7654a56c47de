//! The daemon's log at its default level, as an operator reads it: one real
//! range job through the real `teammem serve` (local forge, builtin agent,
//! its writer child logging into the same file) leaves exactly one line per
//! state change the queue recorded for it, each saying the state it moved
//! to, and no other line that names the job; what the job did on the way is
//! at DEBUG, below the default filter. A maintainer's cancel and retry are
//! one line each too.

use serde_json::{Value, json};

use super::daemon_client::{Holds, finished, job, post_dispatch, wait_for};
use super::one_source::OneSource;

const SECRET: &str = "job log dispatch secret, at least 32 bytes long";

#[tokio::test]
async fn a_job_logs_one_line_per_state_change_and_nothing_else_at_info() {
    let one = OneSource::fixture(SECRET)
        .token("job-log")
        .logging()
        .start();
    let done = one.succeeds(1, &one.source.base, &one.source.head).await;
    let id = done["id"].as_i64().unwrap();
    let (_, events) = job(&one.daemon, &one.token, id).await;
    // Stopped first, so that every line the job caused is in the file.
    assert!(one.daemon.terminate().success());
    let text = std::fs::read_to_string(one.log.as_ref().unwrap()).unwrap();

    let recorded = assert_one_line_per_state_change(&text, id, &events);
    assert_eq!(recorded, ["queued", "running", "succeeded"], "{events:#}");
    // Nothing else ran meanwhile: a line between the job's first and last
    // that does not name it is the job's detail too (the writer child's
    // lines carry no job span), and belongs at DEBUG.
    let lines: Vec<&str> = text.lines().collect();
    let first = lines.iter().position(|line| names_job(line, id)).unwrap();
    let last = lines.iter().rposition(|line| names_job(line, id)).unwrap();
    let unnamed: Vec<&str> = lines[first..=last]
        .iter()
        .copied()
        .filter(|line| level(line).is_some() && !names_job(line, id))
        .collect();
    assert!(
        unnamed.is_empty(),
        "lines while job {id} ran that belong at DEBUG:\n{}",
        unnamed.join("\n")
    );
    let naming: Vec<&str> = lines
        .into_iter()
        .filter(|line| names_job(line, id))
        .collect();
    assert!(
        naming.iter().all(|line| level(line) == Some("INFO")),
        "the state changes of a job that succeeded are INFO lines:\n{}",
        naming.join("\n")
    );
}

/// A maintainer's cancel and retry through `/v1/jobs` are state changes too:
/// a job queued behind a running one (one running job per wiki) is
/// cancelled, retried, then runs; each step is one line naming the job.
#[tokio::test]
async fn a_cancel_and_a_retry_are_one_line_each() {
    let mut holds = Holds::new();
    let one = OneSource::fixture(SECRET)
        .token("job-log")
        .logging()
        .env(holds.env())
        .start();

    let dispatch = |before: &str, after: &str, run: u64| {
        json!({
            "source_repository": "demo/app", "kind": "range",
            "source_run_id": run, "source_run_attempt": 1,
            "push_before": before, "push_after": after,
        })
    };
    let (status, running) = post_dispatch(
        &one.daemon,
        SECRET,
        &dispatch(&one.source.base, &one.source.merge_12, 1),
    )
    .await;
    assert_eq!(status, 202, "{running}");
    let held = holds.next().await;
    let (status, queued) = post_dispatch(
        &one.daemon,
        SECRET,
        &dispatch(&one.source.merge_12, &one.source.head, 2),
    )
    .await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!(queued["state"], "queued", "{queued}");
    let behind = queued["job_id"].as_i64().unwrap();
    for action in ["cancel", "retry"] {
        let answer = reqwest::Client::new()
            .post(one.daemon.url(&format!("/v1/jobs/{behind}/{action}")))
            .bearer_auth(&one.token)
            .send()
            .await
            .unwrap();
        assert_eq!(
            answer.status(),
            200,
            "{action}: {}",
            answer.text().await.unwrap()
        );
    }
    held.release();
    holds.next().await.release();
    let first = running["job_id"].as_i64().unwrap();
    for id in [first, behind] {
        let (done, _) = wait_for(&one.daemon, &one.token, id, finished).await;
        assert_eq!(done["state"], "succeeded", "{done}");
    }
    let (_, first_events) = job(&one.daemon, &one.token, first).await;
    let (_, behind_events) = job(&one.daemon, &one.token, behind).await;
    assert!(one.daemon.terminate().success());
    let text = std::fs::read_to_string(one.log.as_ref().unwrap()).unwrap();

    let recorded = assert_one_line_per_state_change(&text, first, &first_events);
    assert_eq!(
        recorded,
        ["queued", "running", "succeeded"],
        "{first_events:#}"
    );
    let recorded = assert_one_line_per_state_change(&text, behind, &behind_events);
    assert_eq!(
        recorded,
        ["queued", "cancelled", "queued", "running", "succeeded"],
        "{behind_events:#}"
    );
}

/// Asserts that the lines of `text` naming job `id` are exactly one per
/// event the queue recorded for it, in order, each saying (`state=`) the
/// state the event moved the job to; those states.
fn assert_one_line_per_state_change<'a>(text: &str, id: i64, events: &'a Value) -> Vec<&'a str> {
    let recorded: Vec<&str> = events.as_array().unwrap().iter().map(state_after).collect();
    let naming: Vec<&str> = text.lines().filter(|line| names_job(line, id)).collect();
    let logged: Vec<Option<&str>> = naming.iter().map(|line| state_of(line)).collect();
    let expected: Vec<Option<&str>> = recorded.iter().copied().map(Some).collect();
    assert_eq!(
        logged,
        expected,
        "one line per state change of job {id}, in order, and no other line naming it:\n{}\n\nthe whole log:\n{text}",
        naming.join("\n")
    );
    recorded
}

/// The state a job event moved its job into.
fn state_after(event: &Value) -> &str {
    match event["event"].as_str().unwrap() {
        "enqueued" => "queued",
        "claimed" => "running",
        "retried" => "queued",
        terminal
        @ ("succeeded" | "no_change" | "skipped" | "failed" | "cancelled" | "rejected") => terminal,
        other => panic!("an event this test does not expect of one job: {other} in {event}"),
    }
}

/// `true` when `line` is a log line (`<time> <LEVEL> ...`, what the default
/// filter lets through) that names job `id`: in the job's span
/// (`job{id=N ...}`), as a field (`job=N`, `job_id=N`, `job="N"`), or in
/// words (`job N`, `job #N`, `jobs/N`).
fn names_job(line: &str, id: i64) -> bool {
    let id = id.to_string();
    level(line).is_some()
        && [
            "job{id=", "job=", "job_id=", "job=\"", "job ", "job #", "jobs/",
        ]
        .iter()
        .any(|prefix| {
            let named = format!("{prefix}{id}");
            line.match_indices(&named).any(|(at, _)| {
                let starts_a_word = line[..at]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
                let ends_the_number =
                    !line[at + named.len()..].starts_with(|c: char| c.is_ascii_digit());
                starts_a_word && ends_the_number
            })
        })
}

/// The level of a log line (`<time> <LEVEL> ...`); `None` for the
/// continuation of a message over several lines.
fn level(line: &str) -> Option<&str> {
    line.split_whitespace()
        .nth(1)
        .filter(|level| ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(level))
}

/// The value of the line's `state=` field, unquoted.
fn state_of(line: &str) -> Option<&str> {
    line.split_whitespace()
        .find_map(|field| field.strip_prefix("state="))
        .map(|state| state.trim_matches('"'))
}
