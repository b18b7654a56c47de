//! Issue #5's end-to-end matrix on the GitHub forge, through the real
//! `teammem serve` process: the fake GitHub (backed by the fixture's real git
//! history) verifies dispatches, serves the evidence and mints the tokens; the
//! wiki is a bare repository behind `git http-backend` that accepts only the
//! wiki write token the fake minted for it; the git CLI reads it back.
//! The SIGKILL rescue on this forge is `github.rs`'s
//! `a_daemon_killed_mid_job_is_rescued_after_restart_and_records_each_entry_once`
//! (held inside a GitHub call; it is not repeated here because a rescued job
//! waits out a 15-30 s backoff).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::e2e::{self, Forge};
use super::fixture::Source;
use super::github::Hub;
use crate::harness::daemon::{Daemon, Setup};

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
