//! The sweep for missed pushes. End to end through the real `teammem serve`
//! process (sweep every second) on the local forge and on the GitHub forge
//! (fake REST API, wiki behind `git http-backend`): a dispatched range
//! succeeds and sets the cursor, merges land without a dispatch, the sweep
//! enqueues `cursor..tip` with origin `sweep` and the runner writes it into
//! the wiki (read back with the git CLI); a force-pushed source enqueues
//! nothing until `teammem sweep reset`. In process, against a real queue: no
//! duplicate while the range is queued or running, a range tried before is
//! not tried again, forge faults change nothing and are retried. The sources
//! page's GitHub questions live here too, on the same hub: the lag, and the
//! stale facts counted on teammem's mirror without a fetch.
//!
//! The GitHub forge's setup is the runner tests' shared `github::Hub` with
//! `sweep = true` in the source table.
//!
//! Synchronisation is by polling the daemon's HTTP API and `/metrics` (the
//! sweep counts each source it checked by outcome) under a deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use teammem::config::Config;
use teammem::queue::{JobFilter, JobState, Queue};
use teammem::sweep::{Outcome, Sweep};

use super::daemon_client::{finished, post_dispatch};
use super::fixture::{self, Source};
use super::github::Hub;
use super::one_source::OneSource;
use crate::harness::daemon::{Daemon, Setup};
use crate::harness::fake_github::Fault;
use crate::harness::git::{git, git_trimmed};

const SECRET: &str = "sweep e2e dispatch secret, at least 32 bytes long";
const EVERY_SECOND: &str = "[schedule]\nsweep = \"* * * * * *\"\n";
const DEADLINE: Duration = Duration::from_secs(90);

/// Posts a signed range dispatch; returns the job id.
async fn dispatch(daemon: &Daemon, body: Value) -> i64 {
    let (status, answer) = post_dispatch(daemon, SECRET, &body).await;
    assert_eq!(status, 202, "{answer}");
    answer["job_id"].as_i64().unwrap()
}

/// Every job of `repository`, newest first.
async fn jobs(daemon: &Daemon, token: &str, repository: &str) -> Vec<Value> {
    let answer: Value = reqwest::Client::new()
        .get(daemon.url(&format!("/v1/jobs?repository={repository}&limit=100")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    answer["jobs"].as_array().cloned().unwrap_or_default()
}

/// Polls the jobs of `repository` until one satisfies `wanted`; returns it.
async fn wait_for_job(
    daemon: &Daemon,
    token: &str,
    repository: &str,
    what: &str,
    wanted: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let all = jobs(daemon, token, repository).await;
        if let Some(job) = all.iter().find(|job| wanted(job)) {
            return job.clone();
        }
        assert!(Instant::now() < deadline, "no job {what}: {all:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `teammem_sweep_checks_total{outcome="..."}` on the daemon's `/metrics`.
async fn sweep_checks(daemon: &Daemon, outcome: &str) -> u64 {
    let text = reqwest::get(daemon.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let text = crate::harness::without_node_label(&text);
    let series = format!("teammem_sweep_checks_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .map(|n| n.trim().parse().unwrap())
        .unwrap_or(0)
}

/// Waits until the sweep has counted `outcome` more than `seen` times.
async fn wait_for_sweep(daemon: &Daemon, outcome: &str, seen: u64) -> u64 {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let now = sweep_checks(daemon, outcome).await;
        if now > seen {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "the sweep never reported {outcome} after {seen}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn changelog(wiki: &std::path::Path) -> String {
    git_trimmed(wiki, &["show", "master:Changelog.md"])
}

fn sweep_jobs(all: &[Value]) -> Vec<Value> {
    all.iter()
        .filter(|job| job["origin"] == "sweep")
        .cloned()
        .collect()
}

fn sha(text: &str) -> teammem::ids::Sha {
    teammem::ids::Sha::parse(text).unwrap()
}

#[tokio::test]
async fn sweep_enqueues_a_missed_range_on_the_local_forge() {
    let one = OneSource::fixture(SECRET)
        .config("sweep = true\n")
        .config(EVERY_SECOND)
        .token("sweep")
        .start();
    let (source, wiki, daemon, token, setup) =
        (&one.source, &one.wiki, &one.daemon, &one.token, &one.setup);

    // A dispatched range succeeds: the cursor is its `after`.
    let id = dispatch(
        daemon,
        json!({
            "source_repository": "demo/app", "kind": "range",
            "push_before": source.base, "push_after": source.head,
        }),
    )
    .await;
    let job = wait_for_job(daemon, token, "demo/app", "dispatched", |job| {
        job["id"] == id && finished(job)
    })
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");

    // Two pull requests merge in one push (main moves once, so a sweep never
    // sees half of it); no dispatch is sent.
    git(&source.dir, &["checkout", "-q", "-b", "incoming"]);
    let sha_14 = source.squash_pr(14, "Cache the index", "src/cache.rs");
    let sha_15 = source.squash_pr(15, "Document the cache", "docs/cache.md");
    git(&source.dir, &["checkout", "-q", "main"]);
    git(&source.dir, &["merge", "-q", "--ff-only", "incoming"]);
    let swept = wait_for_job(daemon, token, "demo/app", "from the sweep", |job| {
        job["origin"] == "sweep" && finished(job)
    })
    .await;
    assert_eq!(swept["state"], "succeeded", "{swept}");
    assert_eq!(swept["kind"], "range", "{swept}");
    assert_eq!(swept["push_before"], source.head.as_str(), "{swept}");
    assert_eq!(swept["push_after"], sha_15.as_str(), "{swept}");
    assert_eq!(swept["actor"], "sweep", "{swept}");
    let text = changelog(wiki);
    for needle in ["#14", "#15", sha_14.as_str(), sha_15.as_str()] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }

    // Later sweeps find the cursor at the tip and enqueue nothing more.
    let up_to_date = sweep_checks(daemon, "up_to_date").await;
    wait_for_sweep(daemon, "up_to_date", up_to_date).await;
    let all = jobs(daemon, token, "demo/app").await;
    assert_eq!(sweep_jobs(&all).len(), 1, "{all:#?}");
    assert_eq!(all.len(), 2, "{all:#?}");

    // A force-push: main now holds a different #16 on top of the base. The
    // cursor (#15) is not in its history: nothing is enqueued.
    git(&source.dir, &["reset", "-q", "--hard", &source.base]);
    let rewritten = source.squash_pr(16, "Rewritten history", "src/other.rs");
    let seen = sweep_checks(daemon, "not_ancestor").await;
    wait_for_sweep(daemon, "not_ancestor", seen).await;
    let after_force_push = jobs(daemon, token, "demo/app").await;
    assert_eq!(after_force_push.len(), 2, "{after_force_push:#?}");

    // The operator resets the cursor; tracking restarts at the new tip, and
    // the next missed merge is swept again.
    let tracking = sweep_checks(daemon, "tracking_started").await;
    let reset = setup.run(&["sweep", "reset", "--repository", "demo/app"]);
    assert!(
        reset.status.success(),
        "{}",
        String::from_utf8_lossy(&reset.stderr)
    );
    let said = String::from_utf8_lossy(&reset.stdout);
    assert!(said.contains(&sha_15), "{said}");
    wait_for_sweep(daemon, "tracking_started", tracking).await;
    let sha_17 = source.squash_pr(17, "After the rewrite", "src/after.rs");
    let swept = wait_for_job(daemon, token, "demo/app", "after the reset", |job| {
        job["origin"] == "sweep" && job["push_after"] == sha_17.as_str() && finished(job)
    })
    .await;
    assert_eq!(swept["state"], "succeeded", "{swept}");
    assert_eq!(swept["push_before"], rewritten.as_str(), "{swept}");
    let text = changelog(wiki);
    assert!(text.contains(&sha_17) && text.contains("#17"), "{text}");
    assert!(!text.contains(&rewritten), "{text}");
    git(wiki, &["fsck", "--strict", "--no-progress"]);
    assert!(one.daemon.terminate().success());
}

#[tokio::test]
async fn sweep_reset_names_the_configured_sources_for_an_unknown_repository() {
    let setup = Setup::new(
        "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"/nonexistent/app\"\nlocal_wiki_path = \"/nonexistent/app.wiki\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n",
    );
    let out = setup.run(&["sweep", "reset", "--repository", "demo/other"]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("--repository: demo/other is not a configured source; configured: demo/app"),
        "{said}"
    );
    assert!(!said.trim_end().ends_with('.'), "{said}");
}

/// `octo/app` on the fake GitHub (the runner tests' shared hub) with
/// `sweep = true` in its source table and `extra` appended.
async fn github_hub(extra: &str) -> Hub {
    Hub::with_source_keys("sweep = true", extra).await
}

#[tokio::test]
async fn sweep_enqueues_a_missed_range_on_the_github_forge() {
    let hub = github_hub(EVERY_SECOND).await;
    let token = hub.setup.create_token("sweep", &[]);
    let daemon = hub.serve();

    let answer = hub
        .dispatch_range(&daemon, 91, &hub.source.base, &hub.source.head)
        .await;
    let id = answer["job_id"].as_i64().unwrap();
    let job = wait_for_job(&daemon, &token, "octo/app", "dispatched", |job| {
        job["id"] == id && finished(job)
    })
    .await;
    assert_eq!(job["state"], "succeeded", "{job}");

    // A merge lands on main; its post-merge dispatch never arrives.
    let sha_14 = hub.merge_pr(14, "Cache the index", "src/cache.rs");
    let swept = wait_for_job(&daemon, &token, "octo/app", "from the sweep", |job| {
        job["origin"] == "sweep" && finished(job)
    })
    .await;
    assert_eq!(swept["state"], "succeeded", "{swept}");
    assert_eq!(swept["push_before"], hub.source.head.as_str(), "{swept}");
    assert_eq!(swept["push_after"], sha_14.as_str(), "{swept}");
    assert!(swept["run_id"].is_null(), "{swept}");
    let text = changelog(&hub.wiki);
    assert!(text.contains("#14") && text.contains(&sha_14), "{text}");
    let requests = hub.fake.requests();
    assert!(
        requests
            .iter()
            .any(|r| r == "GET /repos/octo/app/git/ref/heads/main"),
        "{requests:?}"
    );

    // Force-pushed: nothing is enqueued.
    git(
        &hub.source.dir,
        &["reset", "-q", "--hard", &hub.source.base],
    );
    hub.merge_pr(16, "Rewritten history", "src/other.rs");
    let seen = sweep_checks(&daemon, "not_ancestor").await;
    wait_for_sweep(&daemon, "not_ancestor", seen).await;
    let all = jobs(&daemon, &token, "octo/app").await;
    assert_eq!(all.len(), 2, "{all:#?}");
    assert_eq!(sweep_jobs(&all).len(), 1, "{all:#?}");
    assert!(daemon.terminate().success());
}

/// Every job in the queue, oldest first.
async fn all_jobs(queue: &Queue) -> Vec<teammem::queue::Job> {
    let mut page = queue
        .list(&JobFilter {
            limit: 100,
            ..JobFilter::default()
        })
        .await
        .unwrap()
        .jobs;
    page.reverse();
    page
}

fn only(outcomes: Vec<(String, Outcome)>) -> Outcome {
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
    outcomes.into_iter().next().unwrap().1
}

/// The sweep's decisions on the local forge, one run at a time, against a
/// real queue with no workers: tracking starts at the tip; a missed range is
/// enqueued once and not again while it is queued or running; a range that
/// ended without moving the cursor is not retried by the sweep; a force-push
/// enqueues nothing.
#[tokio::test]
async fn a_queued_or_running_sweep_range_is_not_enqueued_twice() {
    let repos = tempfile::tempdir().unwrap();
    let source = Source::create(repos.path());
    let wiki = fixture::wiki(repos.path());
    let config = Config::parse(&format!(
        "[server]\ndata_dir = \"{data}\"\n[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{repo}\"\nlocal_wiki_path = \"{wiki}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\nsweep = true\n[[sources]]\nrepository = \"demo/quiet\"\nlocal_path = \"/nonexistent\"\nlocal_wiki_path = \"/nonexistent.wiki\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n",
        data = repos.path().join("data").display(),
        repo = source.dir.display(),
        wiki = wiki.display(),
    ))
    .unwrap();
    let test = crate::queue::test_queue().await;
    let queue = test.queue.clone();
    let sweep = Sweep::new(
        Arc::new(config),
        queue.clone(),
        teammem::forge::Forges::with_github(None),
    );

    // Only the `sweep = true` source is looked at; it starts being tracked.
    assert_eq!(
        only(sweep.run().await),
        Outcome::TrackingStarted {
            tip: sha(&source.head)
        }
    );
    assert_eq!(
        queue.cursor("demo/app").await.unwrap().unwrap().sha,
        source.head
    );
    assert_eq!(only(sweep.run().await), Outcome::UpToDate);
    assert!(all_jobs(&queue).await.is_empty());

    let sha_14 = source.squash_pr(14, "Cache the index", "src/cache.rs");
    let Outcome::Enqueued {
        job_id,
        before,
        after,
    } = only(sweep.run().await)
    else {
        panic!("expected a sweep job");
    };
    assert_eq!(
        (before.as_str(), after.as_str()),
        (source.head.as_str(), sha_14.as_str())
    );
    let job = queue.get(job_id).await.unwrap();
    assert_eq!(job.origin, teammem::queue::Origin::Sweep);
    assert_eq!(job.state, JobState::Queued);

    // Queued: the next run (even after another merge) enqueues nothing.
    assert_eq!(only(sweep.run().await), Outcome::InFlight { job_id });
    let sha_15 = source.squash_pr(15, "Document the cache", "docs/cache.md");
    assert_eq!(only(sweep.run().await), Outcome::InFlight { job_id });
    // Running: still nothing (a running job's range is fixed, so coalescing
    // could not have absorbed a duplicate).
    let claimed = queue.claim("worker-1").await.unwrap().unwrap();
    assert_eq!(claimed.job.id, job_id);
    assert_eq!(only(sweep.run().await), Outcome::InFlight { job_id });
    assert_eq!(all_jobs(&queue).await.len(), 1);

    // It succeeds: the cursor moves to its end, and the rest is swept next.
    queue
        .complete(
            &claimed.lease,
            teammem::queue::Completion::Succeeded {
                receipt: json!({"status": "updated"}),
            },
        )
        .await
        .unwrap();
    let Outcome::Enqueued {
        job_id: next,
        before,
        after,
    } = only(sweep.run().await)
    else {
        panic!("expected the rest of the range");
    };
    assert_eq!(
        (before.as_str(), after.as_str()),
        (sha_14.as_str(), sha_15.as_str())
    );

    // That one fails for good: the cursor stays, and the sweep does not
    // enqueue the same range again by itself.
    let claimed = queue.claim("worker-1").await.unwrap().unwrap();
    assert_eq!(claimed.job.id, next);
    queue
        .fail(&claimed.lease, "agent gave up", false)
        .await
        .unwrap();
    assert_eq!(
        only(sweep.run().await),
        Outcome::AlreadyTried {
            job_id: next,
            state: JobState::Failed
        }
    );
    assert_eq!(all_jobs(&queue).await.len(), 2);

    // Force-pushed: the cursor is not in main's history any more.
    git(&source.dir, &["reset", "-q", "--hard", &source.base]);
    let rewritten = source.squash_pr(16, "Rewritten history", "src/other.rs");
    assert_eq!(
        only(sweep.run().await),
        Outcome::NotAncestor {
            cursor: sha(&sha_14),
            branch: "main".into(),
            tip: sha(&rewritten),
        }
    );
    assert_eq!(all_jobs(&queue).await.len(), 2);
    assert_eq!(queue.cursor("demo/app").await.unwrap().unwrap().sha, sha_14);
}

/// On the GitHub forge, in process: a fault answering the tip leaves
/// everything as it was and the next run proceeds; a diverged cursor (compare
/// says `diverged`) enqueues nothing.
#[tokio::test]
async fn github_faults_change_nothing_and_are_retried_at_the_next_run() {
    let hub = github_hub("").await;
    let test = crate::queue::test_queue().await;
    let queue = test.queue.clone();
    let sweep = Sweep::new(
        Arc::new(hub.config()),
        queue.clone(),
        teammem::forge::Forges::with_github(Some(hub.forge())),
    );

    hub.fake.inject("/git/ref/heads/main", Fault::Status(502));
    let Outcome::ForgeUnavailable { message } = only(sweep.run().await) else {
        panic!("expected the fault to be reported");
    };
    assert!(message.contains("502"), "{message}");
    assert_eq!(queue.cursor("octo/app").await.unwrap(), None);

    assert_eq!(
        only(sweep.run().await),
        Outcome::TrackingStarted {
            tip: sha(&hub.source.head)
        }
    );
    let sha_14 = hub.merge_pr(14, "Cache the index", "src/cache.rs");
    hub.fake
        .inject("/compare/", Fault::Unavailable { retry_after: 1 });
    assert!(matches!(
        only(sweep.run().await),
        Outcome::ForgeUnavailable { .. }
    ));
    assert!(all_jobs(&queue).await.is_empty());
    let Outcome::Enqueued { after, .. } = only(sweep.run().await) else {
        panic!("expected a sweep job after the fault");
    };
    assert_eq!(after, sha_14);

    // A second source state: diverged history with nothing in flight.
    let claimed = queue.claim("worker-1").await.unwrap().unwrap();
    queue
        .complete(
            &claimed.lease,
            teammem::queue::Completion::NoChange {
                receipt: json!({"status": "no_change"}),
            },
        )
        .await
        .unwrap();
    git(
        &hub.source.dir,
        &["reset", "-q", "--hard", &hub.source.base],
    );
    let rewritten = hub.merge_pr(16, "Rewritten history", "src/other.rs");
    assert_eq!(
        only(sweep.run().await),
        Outcome::NotAncestor {
            cursor: sha(&sha_14),
            branch: "main".into(),
            tip: sha(&rewritten),
        }
    );
    assert_eq!(all_jobs(&queue).await.len(), 1);
}

/// The dashboard's lag question on the GitHub forge, answered from the fake's
/// real git repository: up to date, behind by the commits merged since (with
/// the oldest one's date), diverged after a force-push.
#[tokio::test]
async fn github_lag_counts_commits_after_the_cursor() {
    use teammem::forge::Lag;
    let hub = github_hub("").await;
    let config = hub.config();
    let forges = teammem::forge::Forges::with_github(Some(hub.forge()));
    let source = &config.sources[0];
    let cursor = sha(&hub.source.head);
    assert_eq!(
        forges.of(source).lag(&cursor).await.unwrap(),
        Lag::UpToDate {
            tip: cursor.clone()
        }
    );
    hub.merge_pr(14, "Cache the index", "src/cache.rs");
    let tip = hub.merge_pr(15, "Drop the cache", "src/cache.rs");
    let Lag::Behind {
        tip: seen,
        commits,
        counted_all: true,
        since: Some(_),
    } = forges.of(source).lag(&cursor).await.unwrap()
    else {
        panic!("expected the branch to be ahead of the cursor");
    };
    assert_eq!(seen, sha(&tip));
    let expected: u64 = git(
        &hub.source.dir,
        &[
            "rev-list",
            "--count",
            &format!("{}..{tip}", hub.source.head),
        ],
    )
    .trim()
    .parse()
    .unwrap();
    assert_eq!(commits, expected, "the git CLI's count");

    git(
        &hub.source.dir,
        &["reset", "-q", "--hard", &hub.source.base],
    );
    let rewritten = hub.merge_pr(16, "Rewritten history", "src/other.rs");
    assert_eq!(
        forges.of(source).lag(&sha(&tip)).await.unwrap(),
        Lag::Diverged {
            tip: sha(&rewritten)
        }
    );
}

/// The sources page never waits on a forge longer than its timeout: a hung
/// compare leaves the lag unknown, saying why, and the page answers.
#[tokio::test]
async fn a_hung_forge_leaves_the_lag_unknown_within_the_timeout() {
    use teammem::freshness::{Attention, Freshness, LagAnswer};
    let hub = github_hub("").await;
    let mut config = hub.config();
    config.dashboard.forge_timeout = std::time::Duration::from_secs(1);
    let forges = teammem::forge::Forges::with_github(Some(hub.forge()));
    let test = crate::queue::test_queue().await;
    test.queue
        .advance_cursor("octo/app", &sha(&hub.source.base))
        .await
        .unwrap();
    hub.fake.inject("/compare/", Fault::Hang);
    let freshness = Arc::new(Freshness::default());
    let started = std::time::Instant::now();
    let rows = freshness
        .sources(&config, &test.queue, &forges, |_| true)
        .await
        .unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "waited {:?}",
        started.elapsed()
    );
    let LagAnswer::Unknown(why) = &rows[0].lag else {
        panic!("expected an unknown lag, got {:?}", rows[0].lag);
    };
    assert!(why.contains("did not answer within 1 s"), "{why}");
    assert_eq!(rows[0].attention, Attention::Unknown);
}

/// A GitHub wiki's stale facts are counted on teammem's mirror alone: before
/// any fetch the count is unknown, saying why, and the page creates no
/// mirror; once a fetch (as a job's) brought the wiki, the mirror's tip is
/// counted; a wiki that moved on since is not fetched by the page, so the
/// count stays at what the mirror holds until the next fetch.
#[tokio::test]
async fn github_stale_facts_are_counted_on_the_mirror_without_fetching() {
    use teammem::forge::github::Permissions;
    use teammem::freshness::{Attention, FactsAnswer, Freshness};
    let hub = github_hub("").await;
    let config = hub.config();
    let source = &config.sources[0];
    let forges = teammem::forge::Forges::with_github(Some(hub.forge()));
    let test = crate::queue::test_queue().await;
    test.queue
        .advance_cursor("octo/app", &sha(&hub.source.head))
        .await
        .unwrap();
    let freshness = Arc::new(Freshness::default());
    let rows = freshness
        .sources(&config, &test.queue, &forges, |_| true)
        .await
        .unwrap();
    let FactsAnswer::Unknown(why) = &rows[0].facts else {
        panic!("expected an unknown count, got {:?}", rows[0].facts);
    };
    assert!(why.contains("no copy of this wiki yet"), "{why}");
    let mirror = teammem::wiki::WikiStore::new(config.server.data_dir.join("mirrors"))
        .mirror_path(&source.destination());
    assert!(!mirror.exists(), "the page must not create {mirror:?}");

    // A person records a stale fact on the wiki; a fetch brings it here.
    let seed = hub.wiki.parent().unwrap().join("wiki-seed");
    let head = &hub.source.head;
    let page = |stale: &str| {
        format!(
            "# Facts\n\n- The readme is short. <!-- teammem:evidence README.md@{head}#L1-L1{stale} -->\n"
        )
    };
    let edit = |content: &str| {
        fixture::write(&seed, "Facts.md", content);
        git(&seed, &["add", "-A"]);
        git(&seed, &["commit", "-q", "-m", "A person edits the wiki"]);
        git(&seed, &["push", "-q", "origin", "HEAD:master"]);
        git_trimmed(&seed, &["rev-parse", "HEAD"])
    };
    let stale_tip = edit(&page(&format!(" stale={head}")));
    let token = hub
        .forge()
        .installation_token(&source.wiki_repository, &Permissions::contents_read())
        .await
        .unwrap();

    let fetched = teammem::runner::fact_check::mirror_of(&config, source, Some(token), DEADLINE)
        .unwrap()
        .snapshot()
        .await
        .unwrap();
    assert_eq!(fetched.sha.as_deref(), Some(stale_tip.as_str()));
    let rows = freshness
        .sources(&config, &test.queue, &forges, |_| true)
        .await
        .unwrap();
    assert_eq!(
        rows[0].facts,
        FactsAnswer::Counted {
            commit: Some(stale_tip.clone()),
            stale: 1,
            truncated: false
        }
    );
    assert_eq!(rows[0].attention, Attention::StaleFacts);

    // The fact is fixed on GitHub; the page does not fetch, the mirror
    // still holds the stale commit.
    let fixed = edit(&page(""));
    let rows = freshness
        .sources(&config, &test.queue, &forges, |_| true)
        .await
        .unwrap();
    let FactsAnswer::Counted { commit, stale, .. } = &rows[0].facts else {
        panic!("{:?}", rows[0].facts);
    };
    assert_eq!((commit.as_deref(), *stale), (Some(stale_tip.as_str()), 1));

    // The next fetch brings the fix, and the new tip is counted.
    let token = hub
        .forge()
        .installation_token(&source.wiki_repository, &Permissions::contents_read())
        .await
        .unwrap();

    teammem::runner::fact_check::mirror_of(&config, source, Some(token), DEADLINE)
        .unwrap()
        .snapshot()
        .await
        .unwrap();
    let rows = freshness
        .sources(&config, &test.queue, &forges, |_| true)
        .await
        .unwrap();
    assert_eq!(
        rows[0].facts,
        FactsAnswer::Counted {
            commit: Some(fixed),
            stale: 0,
            truncated: false
        }
    );
    assert_eq!(rows[0].attention, Attention::UpToDate);
}
