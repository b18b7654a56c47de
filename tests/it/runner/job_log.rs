//! The daemon's log at its default level, as an operator reads it: one real
//! range job through the real `teammem serve` (local forge, builtin agent,
//! its writer child logging into the same file) leaves exactly one line per
//! state change the queue recorded for it, each saying the state it moved
//! to, and no other line that names the job; what the job did on the way is
//! at DEBUG, below the default filter.

use serde_json::Value;

use super::daemon_client::{job, range_job_succeeds};
use super::fixture::{self, Source};
use crate::harness::daemon::Setup;

const SECRET: &str = "job log dispatch secret, at least 32 bytes long";

#[tokio::test]
async fn a_job_logs_one_line_per_state_change_and_nothing_else_at_info() {
    let repos = tempfile::tempdir().unwrap();
    let source = Source::create(repos.path());
    let wiki = fixture::wiki(repos.path());
    let setup = Setup::new(&format!(
        "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n",
        source.dir.display(),
        wiki.display()
    ));
    let token = setup.create_token("job-log", &[]);
    let log_path = setup.dir.path().join("daemon.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let daemon = setup.serve_logging_to(log, &[("TEAMMEM_SECRET_DEMO", SECRET)]);
    let done = range_job_succeeds(&daemon, &token, SECRET, 1, &source.base, &source.head).await;
    let id = done["id"].as_i64().unwrap();
    let (_, events) = job(&daemon, &token, id).await;
    // Stopped first, so that every line the job caused is in the file.
    assert!(daemon.terminate().success());
    let text = std::fs::read_to_string(&log_path).unwrap();

    let recorded: Vec<&str> = events.as_array().unwrap().iter().map(state_after).collect();
    assert_eq!(recorded, ["queued", "running", "succeeded"], "{events:#}");
    let naming: Vec<&str> = text.lines().filter(|line| names_job(line, id)).collect();
    let logged: Vec<Option<&str>> = naming.iter().map(|line| state_of(line)).collect();
    let expected: Vec<Option<&str>> = recorded.iter().copied().map(Some).collect();
    assert_eq!(
        logged,
        expected,
        "one line per state change of job {id}, in order, and no other line naming it:\n{}\n\nthe whole log:\n{text}",
        naming.join("\n")
    );
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
    assert!(
        naming.iter().all(|line| level(line) == Some("INFO")),
        "the state changes of a job that succeeded are INFO lines:\n{}",
        naming.join("\n")
    );
}

/// The state a job event moved its job into.
fn state_after(event: &Value) -> &str {
    match event["event"].as_str().unwrap() {
        "enqueued" => "queued",
        "claimed" => "running",
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
