//! The audience rule (a private source never writes a public wiki) on the
//! paths past dispatch: a visibility change while a job is queued (the runner
//! in process against the fake GitHub and a real queue), a retry through the
//! real daemon's `POST /v1/jobs/{id}/retry`, and the sweep. Each refused path
//! ends `rejected` with `audience_mismatch` (the sweep enqueues nothing), the
//! wiki's git history is unchanged, and the fake GitHub minted no
//! `contents: write` token for the wiki's repository. Each test then opens the
//! gate (both repositories public) and sees the write token minted, so the
//! assertions can fail.
//!
//! `octo/app` (the fixture) maps to the wiki of `octo/memory`, served by
//! `git http-backend` beside `octo/app`'s own.

use std::sync::Arc;

use serde_json::Value;
use teammem::queue::{Completion, JobKind, JobState, NewJob, Origin};
use teammem::runner::Runner;
use teammem::sweep::{Outcome, Sweep};
use teammem::worker::JobHandler;

use super::daemon_client::{finished, wait_for};
use super::github::Hub;
use crate::harness::fake_github::GitRepo;
use crate::harness::git::{git, git_trimmed};

const BIN: &str = env!("CARGO_BIN_EXE_teammem");

/// The hub with `octo/app` (visibility `source`) mapped to the wiki of
/// `octo/memory` (public); the memory wiki's bare repository.
async fn mapped_hub(source: &str) -> (Hub, std::path::PathBuf) {
    let hub = Hub::with_source_keys("wiki_repository = \"octo/memory\"\nsweep = true", "").await;
    let served = hub.wiki.parent().unwrap().to_path_buf();
    let memory = served.join("memory.wiki.git");
    git(
        &served,
        &[
            "clone",
            "-q",
            "--bare",
            hub.wiki.to_str().unwrap(),
            memory.to_str().unwrap(),
        ],
    );
    hub.fake.add_repo(
        "octo/memory",
        &GitRepo {
            dir: hub.source.dir.clone(),
        },
        "public",
        true,
    );
    hub.fake.set_visibility("octo/app", source);
    (hub, memory)
}

fn tip(wiki: &std::path::Path) -> String {
    git_trimmed(wiki, &["rev-parse", "master"])
}

#[tokio::test]
async fn a_source_made_private_while_its_job_is_queued_is_rejected_before_any_token() {
    let (hub, memory) = mapped_hub("public").await;
    let config = Arc::new(hub.config());
    let forge = hub.forge();
    let source = config.sources[0].clone();
    let (before, after) = (hub.source.base.clone(), hub.source.head.clone());
    // Accepted while both are public, as a dispatch would be.
    let run = teammem::forge::RunRef { id: 91, attempt: 1 };
    hub.fake.add_run(
        "octo/app",
        91,
        1,
        crate::harness::fake_github::FakeRun {
            repository_id: hub.repository_id,
            event: "push".into(),
            path: source.dispatch_workflow.clone(),
            head_branch: "main".into(),
            head_sha: after.clone(),
        },
    );
    forge
        .verify_range(&source, run, &before, &after)
        .await
        .expect("public to public passes verification");
    let test = crate::queue::test_queue().await;
    let queue = test.queue.clone();
    let enqueued = queue
        .enqueue(
            NewJob {
                source: source.repository.clone(),
                destination: source.destination(),
                origin: Origin::Dispatch,
                kind: JobKind::Range {
                    before: teammem::ids::Sha::parse(&before).unwrap(),
                    after: teammem::ids::Sha::parse(&after).unwrap(),
                    run_id: Some(91),
                    run_attempt: Some(1),
                },
                actor: "test".into(),
            },
            None,
        )
        .await
        .unwrap();
    let start = tip(&memory);

    // Queued; then the source turns private.
    hub.fake.set_visibility("octo/app", "private");
    let runner = Runner::new(
        config.clone(),
        hub.setup.config.clone(),
        BIN.into(),
        teammem::forge::Forges::with_github(Some(forge.clone())),
    );
    let claimed = queue.claim("worker-1").await.unwrap().unwrap();
    assert_eq!(claimed.job.id, enqueued.job.id);
    let completion = runner
        .run(&claimed.job)
        .await
        .expect("a verdict, not a failure");
    let Completion::Rejected { reason } = &completion else {
        panic!("expected a rejection, got {completion:?}");
    };
    assert!(reason.starts_with("audience_mismatch: "), "{reason}");
    assert!(
        reason.contains("octo/app is private") && reason.contains("octo/memory is public"),
        "{reason}"
    );
    assert!(
        reason.contains("wiki_repository"),
        "says what to do: {reason}"
    );
    let job = queue.complete(&claimed.lease, completion).await.unwrap();
    assert_eq!(job.state, JobState::Rejected);
    assert_eq!(tip(&memory), start, "the wiki is unchanged");
    assert!(hub.fake.write_mints_for("memory").is_empty());
    assert!(hub.fake.write_mints_for("app").is_empty());

    // The gate opens again once both are public: the wiki token is minted
    // (for the wiki's repository alone).
    hub.fake.set_visibility("octo/app", "public");
    queue.retry(job.id, "test").await.unwrap();
    let claimed = queue.claim("worker-1").await.unwrap().unwrap();
    let _ = runner.run(&claimed.job).await;
    assert_eq!(
        hub.fake.write_mints_for("memory").len(),
        1,
        "{:?}",
        hub.fake.mints()
    );
}

#[tokio::test]
async fn a_retry_of_a_job_whose_source_turned_private_ends_rejected_in_the_daemon() {
    let (hub, memory) = mapped_hub("public").await;
    let token = hub.setup.create_token("ops", &[]);
    // The first attempt fails for another reason: no contents:write yet.
    hub.fake.withhold_permission("contents", "write");
    let daemon = hub.serve();
    let start = tip(&memory);
    let answer = hub
        .dispatch_range(&daemon, 92, &hub.source.base, &hub.source.head)
        .await;
    let id = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "failed", "{job}");

    // The App gets contents:write, the source turns private, an operator retries.
    hub.fake.grant_all_permissions();
    hub.fake.set_visibility("octo/app", "private");
    let retry = |id: i64| {
        let url = daemon.url(&format!("/v1/jobs/{id}/retry"));
        let token = token.clone();
        async move {
            reqwest::Client::new()
                .post(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
        }
    };
    let answer = retry(id).await;
    assert_eq!(answer.status().as_u16(), 200);
    let (job, events) = wait_for(&daemon, &token, id, |job: &Value| {
        finished(job) && job["attempts"] == 1 && job["state"] != "failed"
    })
    .await;
    assert_eq!(job["state"], "rejected", "{job}");
    let reason = job["last_error"].as_str().unwrap_or_default();
    assert!(reason.starts_with("audience_mismatch: "), "{job}");
    assert!(events.to_string().contains("retried"), "{events}");
    assert_eq!(tip(&memory), start, "the wiki is unchanged");
    assert!(
        hub.fake.write_mints_for("memory").is_empty(),
        "{:?}",
        hub.fake.mints()
    );

    // Public again: the next retry mints the wiki's write token and succeeds.
    hub.fake.set_visibility("octo/app", "public");
    assert_eq!(retry(id).await.status().as_u16(), 200);
    let (job, _) = wait_for(&daemon, &token, id, |job: &Value| {
        finished(job) && job["state"] != "rejected"
    })
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(hub.fake.write_mints_for("memory").len(), 1);
    assert_ne!(tip(&memory), start);
    assert!(daemon.terminate().success());
}

#[tokio::test]
async fn the_sweep_enqueues_nothing_for_a_private_source_mapped_to_a_public_wiki() {
    let (hub, memory) = mapped_hub("private").await;
    let test = crate::queue::test_queue().await;
    let queue = test.queue.clone();
    let sweep = Sweep::new(
        Arc::new(hub.config()),
        queue.clone(),
        teammem::forge::Forges::with_github(Some(hub.forge())),
    );
    let only = |mut all: Vec<(String, Outcome)>| {
        assert_eq!(all.len(), 1, "{all:?}");
        all.pop().unwrap().1
    };
    assert!(matches!(
        only(sweep.run().await),
        Outcome::TrackingStarted { .. }
    ));
    let start = tip(&memory);
    hub.merge_pr(14, "Cache the index", "src/cache.rs");
    let outcome = only(sweep.run().await);
    let Outcome::AudienceMismatch { message } = &outcome else {
        panic!("expected an audience refusal, got {outcome:?}");
    };
    assert!(message.starts_with("audience_mismatch: "), "{message}");
    assert!(message.contains("octo/app is private"), "{message}");
    assert_eq!(outcome.label(), "audience_mismatch");
    let all = queue
        .list(&teammem::queue::JobFilter {
            repository: None,
            allowed_repositories: None,
            state: None,
            limit: 100,
            cursor: None,
        })
        .await
        .unwrap();
    assert!(all.jobs.is_empty(), "nothing enqueued: {:?}", all.jobs);
    assert!(hub.fake.write_mints_for("memory").is_empty());
    assert_eq!(tip(&memory), start);

    // Public: the same sweep enqueues the missed range.
    hub.fake.set_visibility("octo/app", "public");
    assert!(matches!(only(sweep.run().await), Outcome::Enqueued { .. }));
}

#[tokio::test]
async fn check_config_with_github_refuses_a_mapping_across_audiences() {
    let (hub, _memory) = mapped_hub("private").await;
    // Async: the fake GitHub answers on this test's runtime.
    let config = hub.setup.config.clone();
    let check_with = |github: bool| {
        let config = config.clone();
        async move {
            let flags: &[&str] = if github { &["--github"] } else { &[] };
            tokio::process::Command::new(BIN)
                .arg("check-config")
                .args(flags)
                .arg("--config")
                .arg(&config)
                .env("TEAMMEM_SECRET_OCTO", "x".repeat(32))
                .env("TEAMMEM_LOG", "warn")
                .output()
                .await
                .unwrap()
        }
    };
    let out = check_with(true).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("sources[0].wiki_repository: audience_mismatch: octo/app is private"),
        "{stderr}"
    );
    assert!(hub.fake.write_mints_for("memory").is_empty());

    // Without --github nothing is asked of GitHub; with both public it passes.
    let requests = hub.fake.requests().len();
    let offline = check_with(false).await;
    assert_eq!(offline.status.code(), Some(0));
    assert_eq!(hub.fake.requests().len(), requests);
    hub.fake.set_visibility("octo/app", "public");
    let out = check_with(true).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
}
