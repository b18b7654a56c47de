//! The end-to-end matrix of the job runner (issue #5), written once and run on
//! each forge by `e2e_local.rs` and `e2e_github.rs`: every scenario starts the
//! real `teammem serve` process, dispatches signed pushes over HTTP, follows
//! the jobs through `/v1/jobs` and reads the wiki back with the git CLI.
//!
//! Invariant: a scenario that must act while a job runs waits at the daemon's
//! hold point (`Holds`, cargo feature `test-hooks`), never on a sleep.

use std::path::Path;

use serde_json::Value;

use super::daemon_client::{
    Holds, another_writer, assert_each_entry_once, entries, finished, job, jobs, jobs_of_commits,
    wait_for, wiki_tip,
};
use super::fixture::{self, Source};
use crate::harness::daemon::{Daemon, Setup};
use crate::harness::git::{git, git_trimmed};

/// The area pages of the fixture's pull requests (#12 touches `src/`, #13
/// `docs/` and the root).
pub const AREAS_12: &[&str] = &["Area-src.md"];
pub const AREAS_13: &[&str] = &["Area-docs.md", "Area-root.md"];

/// A source with the fixture's history (merge #12, squash #13, a direct
/// commit) on one forge, its bare wiki on disk, and a daemon configuration.
pub trait Forge: Sized {
    /// With `extra` TOML appended to the daemon's configuration.
    async fn new(extra: &str) -> Self;
    fn setup(&self) -> &Setup;
    fn source(&self) -> &Source;
    /// The bare wiki repository the daemon writes (directly or over HTTP).
    fn wiki(&self) -> &Path;
    /// Starts `teammem serve` with the source's dispatch secret and `envs`.
    fn serve(&self, envs: &[(&str, &str)]) -> Daemon;
    /// Squash-merges pull request `number` touching `path` on `main` (and
    /// tells the forge about it); its merge sha.
    fn merge_pr(&self, number: u64, title: &str, path: &str) -> String;
    /// Dispatches the push `before..after` from a new workflow run, signed;
    /// asserts the answer is `202` and returns it.
    async fn dispatch(&self, daemon: &Daemon, before: &str, after: &str) -> Value;
}

pub fn id_of(answer: &Value) -> i64 {
    answer["job_id"].as_i64().unwrap()
}

fn pull_numbers(receipt: &Value) -> Vec<u64> {
    receipt["pull_requests"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|p| p["number"].as_u64().unwrap())
        .collect()
}

/// Dispatch → `succeeded` → each PR's number and full merge sha on the wiki;
/// the same range from another run → `no_change` and no new wiki commit.
pub async fn dispatch_then_replay<F: Forge>() {
    let f = F::new("").await;
    let (s, wiki) = (f.source(), f.wiki());
    let token = f.setup().create_token("e2e", &[]);
    let daemon = f.serve(&[]);
    let start = wiki_tip(wiki);

    let id = id_of(&f.dispatch(&daemon, &s.base, &s.head).await);
    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["receipt"]["status"], "updated", "{job}");
    assert_eq!(job["receipt"]["wiki_sha"], wiki_tip(wiki).as_str(), "{job}");
    assert_eq!(pull_numbers(&job["receipt"]), [12, 13], "{job}");
    let written = jobs_of_commits(wiki, &start);
    assert!(
        !written.is_empty() && written.iter().all(|j| *j == Some(id)),
        "every new wiki commit is the job's: {written:?}"
    );
    let changelog = git_trimmed(wiki, &["show", "master:Changelog.md"]);
    for needle in ["#12", "#13", s.merge_12.as_str(), s.squash_13.as_str()] {
        assert!(changelog.contains(needle), "{needle} missing:\n{changelog}");
    }
    assert_each_entry_once(wiki, &[(&s.merge_12, AREAS_12), (&s.squash_13, AREAS_13)]);
    let message = git_trimmed(wiki, &["log", "-1", "--format=%B", "master"]);
    assert!(message.contains(&format!("Teammem-Job: {id}")), "{message}");
    git(wiki, &["fsck", "--strict", "--no-progress"]);

    let tip = wiki_tip(wiki);
    let again = id_of(&f.dispatch(&daemon, &s.base, &s.head).await);
    assert_ne!(again, id, "another run is another job");
    let (job, _) = wait_for(&daemon, &token, again, finished).await;
    assert_eq!(job["state"], "no_change", "{job}");
    assert_eq!(job["receipt"]["status"], "no_change", "{job}");
    assert_eq!(wiki_tip(wiki), tip, "no new wiki commit");
    assert!(daemon.terminate().success());
}

/// Two contiguous dispatches while the first of them is still queued (behind
/// a running job of the same wiki, held before its write) become one job
/// covering both pushes, which records both pull requests in one commit.
pub async fn contiguous_dispatches_coalesce_while_queued<F: Forge>() {
    let f = F::new("").await;
    let (s, wiki) = (f.source(), f.wiki());
    let token = f.setup().create_token("e2e", &[]);
    let mut holds = Holds::new();
    let daemon = f.serve(&[holds.env()]);
    let start = wiki_tip(wiki);

    let running = id_of(&f.dispatch(&daemon, &s.base, &s.head).await);
    let held = holds.next().await;
    assert_eq!(job(&daemon, &token, running).await.0["state"], "running");

    let pr14 = f.merge_pr(14, "Tune the index", "src/index.rs");
    let pr15 = f.merge_pr(15, "Explain the index", "docs/index.md");
    let first = f.dispatch(&daemon, &s.head, &pr14).await;
    assert_eq!(first["state"], "queued", "{first}");
    assert_eq!(first["coalesced_into"], Value::Null, "{first}");
    let queued = id_of(&first);
    let second = f.dispatch(&daemon, &pr14, &pr15).await;
    assert_eq!(id_of(&second), queued, "{second}");
    assert_eq!(second["coalesced_into"], queued, "{second}");

    assert_eq!(jobs(&daemon, &token).await.len(), 2, "no third job");
    let (covering, _) = job(&daemon, &token, queued).await;
    assert_eq!(covering["state"], "queued", "{covering}");
    assert_eq!(covering["push_before"], s.head.as_str(), "{covering}");
    assert_eq!(covering["push_after"], pr15.as_str(), "{covering}");
    assert_eq!(covering["coalesced_count"], 1, "{covering}");

    held.release();
    let (job1, _) = wait_for(&daemon, &token, running, finished).await;
    assert_eq!(job1["state"], "succeeded", "{job1}");
    holds.next().await.release();
    let (covering, _) = wait_for(&daemon, &token, queued, finished).await;
    assert_eq!(covering["state"], "succeeded", "{covering}");
    assert_eq!(pull_numbers(&covering["receipt"]), [14, 15], "{covering}");
    let mut written = jobs_of_commits(wiki, &start);
    written.dedup();
    assert_eq!(
        written,
        [Some(queued), Some(running)],
        "the covering job's commits on the first job's"
    );
    assert_each_entry_once(
        wiki,
        &[
            (&s.merge_12, AREAS_12),
            (&s.squash_13, AREAS_13),
            (&pr14, &["Area-src.md"]),
            (&pr15, &["Area-docs.md"]),
        ],
    );
    assert!(daemon.terminate().success());
}

/// Another writer moves the wiki between the builtin agent's snapshot and its
/// write: the write conflicts, the agent rebuilds once on a fresh snapshot,
/// the person's page stays, and each entry is on the wiki exactly once.
pub async fn a_wiki_moved_during_the_job_is_rebuilt_once<F: Forge>() {
    let f = F::new("").await;
    let (s, wiki) = (f.source(), f.wiki());
    let token = f.setup().create_token("e2e", &[]);
    let mut holds = Holds::new();
    let daemon = f.serve(&[holds.env()]);
    let start = wiki_tip(wiki);

    let id = id_of(&f.dispatch(&daemon, &s.base, &s.head).await);
    let held = holds.next().await;
    assert_eq!(held.attempt, 0);
    another_writer(wiki, "Notes.md", "# Notes\n\nWritten by a person.\n");
    held.release();
    let rebuilt = holds.next().await;
    assert_eq!(rebuilt.attempt, 1, "the agent rebuilds on a fresh snapshot");
    rebuilt.release();

    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["attempts"], 1, "recovered within the attempt: {job}");
    let summary = job["receipt"]["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("rebuild"), "{job}");
    assert_eq!(job["receipt"]["wiki_sha"], wiki_tip(wiki).as_str(), "{job}");
    assert_eq!(
        git_trimmed(wiki, &["show", "master:Notes.md"]),
        "# Notes\n\nWritten by a person."
    );
    let mut written = jobs_of_commits(wiki, &start);
    written.dedup();
    assert_eq!(
        written,
        [Some(id), None],
        "the job's commits on the person's, none before it"
    );
    assert_each_entry_once(wiki, &[(&s.merge_12, AREAS_12), (&s.squash_13, AREAS_13)]);
    git(wiki, &["fsck", "--strict", "--no-progress"]);
    assert!(daemon.terminate().success());
}

/// The daemon is killed with SIGKILL while a job is held mid-run; after a
/// restart (without the hold) the expired lease is rescued, the job runs
/// again and the range is on the wiki exactly once. The rescued job waits out
/// the retry backoff of its killed attempt (15-30 s) first.
pub async fn a_job_killed_with_the_daemon_is_rescued_after_restart<F: Forge>() {
    let f = F::new("\n[queue]\nlease_seconds = 5\n\n[schedule]\nrescue = \"* * * * * *\"\n").await;
    let (s, wiki) = (f.source(), f.wiki());
    let token = f.setup().create_token("e2e", &[]);
    let mut holds = Holds::new();
    let mut daemon = f.serve(&[holds.env()]);
    let start = wiki_tip(wiki);

    let id = id_of(&f.dispatch(&daemon, &s.base, &s.head).await);
    let held = holds.next().await;
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    drop(held);
    assert_eq!(wiki_tip(wiki), start, "nothing was written before the kill");

    let daemon = f.serve(&[]);
    let (job, events) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(job["attempts"], 2, "the killed attempt counts: {job}");
    assert!(events.to_string().contains("lease_expired"), "{events}");
    let written = jobs_of_commits(wiki, &start);
    assert!(
        !written.is_empty() && written.iter().all(|j| *j == Some(id)),
        "{written:?}"
    );
    assert_each_entry_once(wiki, &[(&s.merge_12, AREAS_12), (&s.squash_13, AREAS_13)]);
    assert!(daemon.terminate().success());
}

/// A push that is force-pushed away while its job is still queued: the job is
/// `rejected` when it runs, with the reason, and its PR is not on the wiki.
pub async fn a_force_pushed_source_rejects_a_queued_job<F: Forge>() {
    let f = F::new("").await;
    let (s, wiki) = (f.source(), f.wiki());
    let token = f.setup().create_token("e2e", &[]);
    let mut holds = Holds::new();
    let daemon = f.serve(&[holds.env()]);
    let start = wiki_tip(wiki);

    let running = id_of(&f.dispatch(&daemon, &s.base, &s.head).await);
    let held = holds.next().await;
    let pr14 = f.merge_pr(14, "Tune the index", "src/index.rs");
    let queued = f.dispatch(&daemon, &s.head, &pr14).await;
    assert_eq!(queued["state"], "queued", "{queued}");
    let queued = id_of(&queued);

    // The force push: main is reset behind #14 and moves on without it.
    git(&s.dir, &["reset", "-q", "--hard", &s.head]);
    fixture::write(&s.dir, "rewritten.txt", "history was rewritten\n");
    git(&s.dir, &["add", "-A"]);
    git(&s.dir, &["commit", "-q", "-m", "Rewritten history"]);

    held.release();
    let (job1, _) = wait_for(&daemon, &token, running, finished).await;
    assert_eq!(job1["state"], "succeeded", "{job1}");
    let (rejected, events) = wait_for(&daemon, &token, queued, finished).await;
    assert_eq!(rejected["state"], "rejected", "{rejected}");
    assert_eq!(
        rejected["attempts"], 1,
        "a rejection is not retried: {rejected}"
    );
    let reason = rejected["last_error"].as_str().unwrap_or_default();
    assert!(reason.contains("no longer on main"), "{rejected}");
    assert!(events.to_string().contains("rejected"), "{events}");
    assert_eq!(entries(wiki, "Changelog.md", &pr14), 0);
    let written = jobs_of_commits(wiki, &start);
    assert!(
        !written.is_empty() && written.iter().all(|j| *j == Some(running)),
        "only the first job wrote: {written:?}"
    );
    assert!(daemon.terminate().success());
}
