//! Issue #5's end-to-end matrix on the GitHub forge, through the real
//! `teammem serve` process: the fake GitHub (backed by the fixture's real git
//! history) verifies dispatches, serves the evidence and mints the tokens; the
//! wiki is a bare repository behind `git http-backend` that accepts only the
//! wiki write token the fake minted for it; the git CLI reads it back.
//! The SIGKILL rescue on this forge is `github.rs`'s
//! `a_daemon_killed_mid_job_is_rescued_after_restart_and_records_each_entry_once`
//! (held inside a GitHub call; it is not repeated here because a rescued job
//! waits out a 15-30 s backoff). Also the command agent on this forge: its
//! writer gets the wiki token from the job's broker, and no file holds it.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::command;
use super::daemon_client::{finished, jobs_of_commits, wait_for, wiki_tip};
use super::e2e::{self, Forge};
use super::fixture::Source;
use super::github::Hub;
use crate::harness::daemon::{Daemon, Setup};
use crate::harness::git::git_trimmed;

/// The hub and the next workflow run id to dispatch with.
struct GitHub {
    hub: Hub,
    runs: AtomicU64,
}

impl Forge for GitHub {
    async fn new(extra: &str) -> GitHub {
        GitHub {
            hub: Hub::with_config(extra).await,
            runs: AtomicU64::new(100),
        }
    }

    fn setup(&self) -> &Setup {
        &self.hub.setup
    }

    fn source(&self) -> &Source {
        &self.hub.source
    }

    fn wiki(&self) -> &Path {
        &self.hub.wiki
    }

    fn serve(&self, envs: &[(&str, &str)]) -> Daemon {
        self.hub.serve_with(envs)
    }

    fn merge_pr(&self, number: u64, title: &str, path: &str) -> String {
        self.hub.merge_pr(number, title, path)
    }

    async fn dispatch(&self, daemon: &Daemon, before: &str, after: &str) -> Value {
        let run = self.runs.fetch_add(1, Ordering::SeqCst);
        self.hub.dispatch_range(daemon, run, before, after).await
    }
}

#[tokio::test]
async fn github_dispatch_is_recorded_and_the_same_range_again_changes_nothing() {
    e2e::dispatch_then_replay::<GitHub>().await;
}

#[tokio::test]
async fn github_contiguous_dispatches_while_the_first_is_queued_become_one_job() {
    e2e::contiguous_dispatches_coalesce_while_queued::<GitHub>().await;
}

#[tokio::test]
async fn github_wiki_moved_by_another_writer_during_the_job_is_rebuilt_once() {
    e2e::a_wiki_moved_during_the_job_is_rebuilt_once::<GitHub>().await;
}

#[tokio::test]
async fn github_force_pushed_source_rejects_the_queued_job() {
    e2e::a_force_pushed_source_rejects_a_queued_job::<GitHub>().await;
}

#[tokio::test]
async fn the_command_agent_in_the_daemon_drives_the_writer_for_a_github_wiki_through_the_broker() {
    // The test agent (command.rs) reaches the job's writer through the relay
    // its generated MCP config names; the writer holds the wiki token from
    // the job's broker and reads a source file through it.
    let agent_dir = tempfile::tempdir().unwrap();
    let agent = agent_dir.path().join("agent.py");
    std::fs::write(&agent, command::AGENT).unwrap();
    let f = GitHub::new(&command::agent_table(&agent, &["probe"], 60)).await;
    let (s, wiki) = (f.source(), f.wiki());
    let token = f.setup().create_token("e2e", &[]);
    let daemon = f.serve(&[]);
    let start = wiki_tip(wiki);

    let answer = f.dispatch(&daemon, &s.base, &s.head).await;
    let id = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["receipt"]["wiki_sha"], wiki_tip(wiki).as_str(), "{job}");
    assert_eq!(jobs_of_commits(wiki, &start), [Some(id)]);
    let log = git_trimmed(wiki, &["show", "master:Team-log.md"]);
    for (number, sha) in [(12, &s.merge_12), (13, &s.squash_13)] {
        assert_eq!(
            log.matches(&format!("- #{number} {sha}")).count(),
            1,
            "{log}"
        );
    }
    // The push went through git http-backend, which takes only a wiki token
    // the fake minted: the writer had one, from the broker.
    let wiki_mints: Vec<_> = f
        .hub
        .fake
        .mints()
        .into_iter()
        .filter(|m| m.permissions == [("contents".to_owned(), "write".to_owned())])
        .collect();
    assert!(!wiki_mints.is_empty(), "a wiki token was minted");

    let report = git_trimmed(wiki, &["show", "master:Agent-report.md"]);
    let probe: Value = command::report(&report);
    assert_eq!(probe["source_file"]["success"], true, "{probe}");
    assert_eq!(
        probe["source_file"]["result"]["content"],
        "# Guide\n\nStep one.\n"
    );
    assert_eq!(probe["source_file"]["result"]["commit"], s.head.as_str());
    let config = probe["mcp_config"].as_str().unwrap();
    assert!(
        config.contains("--connect") && !config.contains("TEAMMEM_"),
        "{config}"
    );

    // Nothing the agent saw or wrote holds a token the fake minted.
    let minted = f.hub.fake.minted_tokens();
    assert!(!minted.is_empty());
    for token in &minted {
        assert!(
            !report.contains(token.as_str()),
            "the report holds a minted token"
        );
    }
    // The job's wiki token was revoked when the job ended.
    let revoked = f.hub.fake.revoked_tokens();
    let wiki_mints = f.hub.fake.write_mints_for("octo/app");
    assert_eq!(wiki_mints.len(), 1, "one wiki token for the one job");
    for mint in wiki_mints {
        assert!(
            revoked.contains(&mint.token),
            "a wiki token outlived its job"
        );
    }

    // The job is over: its work directory, endpoint included, is gone, and
    // nothing answers there.
    let work = f.setup().data_dir().join("jobs").join(id.to_string());
    let socket = std::path::PathBuf::from(probe["socket"].as_str().unwrap());
    assert!(socket.starts_with(&work), "{}", socket.display());
    assert!(!work.exists(), "the job's work directory outlived it");
    assert!(std::os::unix::net::UnixStream::connect(&socket).is_err());
    assert!(daemon.terminate().success());
}

/// `serve` holds one GitHub client: dispatch verification and the job's
/// evidence reads share one installation-token cache, so no read token is
/// minted twice for one dispatch (two clients would each mint their own).
#[tokio::test]
async fn the_daemon_mints_each_read_token_once_for_ingest_and_runner() {
    let f = GitHub::new("").await;
    let s = f.source();
    let token = f.setup().create_token("e2e", &[]);
    let daemon = f.serve(&[]);
    let id = e2e::id_of(&f.dispatch(&daemon, &s.base, &s.head).await);
    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let reads: Vec<_> = f
        .hub
        .fake
        .mints()
        .into_iter()
        .filter(|m| !m.permissions.iter().any(|(_, level)| level == "write"))
        .collect();
    assert!(!reads.is_empty(), "ingest verified with a read token");
    for mint in &reads {
        let same = reads
            .iter()
            .filter(|m| m.repositories == mint.repositories && m.permissions == mint.permissions)
            .count();
        assert_eq!(same, 1, "minted twice: {mint:?} among {reads:?}");
    }
    assert!(daemon.terminate().success());
}
