//! A range too large for one job, through the real `teammem serve` (local
//! forge, builtin agent): one signed dispatch of 80 merged pull requests
//! becomes four contiguous jobs of at most 25 (`ingest/split.rs`), which run
//! in order, all succeed, each adds exactly one wiki commit and records its
//! own pull requests, and every pull request is on the wiki exactly once; a
//! redelivery answers with the first job. Contiguous dispatches while the
//! first is queued are merged only while the merged job stays within the
//! bound. The same split on the GitHub forge (the fake GitHub lists the
//! range's first-parent history): a dispatch of 30 pull requests is two
//! ordered jobs of 25 and 5. The git CLI is the oracle.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::daemon_client::{
    Holds, finished, job, jobs_of_commits, post_dispatch, wait_for, wiki_tip,
};
use super::fixture;
use crate::harness::daemon::{Daemon, Setup};
use crate::harness::git::{git, git_trimmed, git_with_env};

const SECRET: &str = "split dispatch secret, at least 32 bytes long";

/// A source repository with one commit, its wiki, and a daemon setup.
struct World {
    _repos: tempfile::TempDir,
    dir: std::path::PathBuf,
    wiki: std::path::PathBuf,
    setup: Setup,
    base: String,
    runs: AtomicU64,
}

impl World {
    fn new() -> World {
        let repos = tempfile::tempdir().unwrap();
        let dir = repos.path().join("app");
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        fixture::write(&dir, "README.md", "# app\n");
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-q", "-m", "Initial commit"]);
        let base = git_trimmed(&dir, &["rev-parse", "HEAD"]);
        let wiki = fixture::wiki(repos.path());
        let setup = Setup::new(&format!(
            "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n",
            dir.display(),
            wiki.display()
        ));
        World {
            _repos: repos,
            dir,
            wiki,
            setup,
            base,
            runs: AtomicU64::new(1),
        }
    }

    fn serve(&self, envs: &[(&str, &str)]) -> Daemon {
        let mut all = vec![("TEAMMEM_SECRET_DEMO", SECRET)];
        all.extend_from_slice(envs);
        self.setup.serve(&all)
    }

    /// Squash-merges pull requests `numbers` (each touching a file of one of
    /// four areas, all on 2026-01-05); their merge shas.
    fn merge(&self, numbers: std::ops::RangeInclusive<u64>) -> Vec<String> {
        let when = "2026-01-05T12:00:00+00:00";
        numbers
            .map(|n| {
                fixture::write(
                    &self.dir,
                    &format!("area{}/file{n}.txt", n % 4),
                    &format!("{n}\n"),
                );
                git(&self.dir, &["add", "-A"]);
                git_with_env(
                    &self.dir,
                    &[("GIT_AUTHOR_DATE", when), ("GIT_COMMITTER_DATE", when)],
                    &["commit", "-q", "-m", &format!("Change number {n} (#{n})")],
                );
                git_trimmed(&self.dir, &["rev-parse", "HEAD"])
            })
            .collect()
    }

    /// The body of a dispatch of `before..after` from a new workflow run.
    fn body(&self, before: &str, after: &str) -> Value {
        json!({
            "source_repository": "demo/app", "kind": "range",
            "source_run_id": self.runs.fetch_add(1, Ordering::SeqCst), "source_run_attempt": 1,
            "push_before": before, "push_after": after,
        })
    }
}

/// How many times the entry of `sha` is on the wiki's Changelog quarter
/// pages together (every entry is on its quarter page).
fn on_quarter_pages(wiki: &Path, sha: &str) -> usize {
    let pages = git_trimmed(wiki, &["ls-tree", "--name-only", "master"]);
    pages
        .lines()
        .filter(|page| page.starts_with("Changelog-") && page.ends_with(".md"))
        .map(|page| {
            git(wiki, &["show", &format!("master:{page}")])
                .matches(&format!("<!-- teammem:{sha} -->"))
                .count()
        })
        .sum()
}

fn pull_numbers(job: &Value) -> Vec<u64> {
    job["receipt"]["pull_requests"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|p| p["number"].as_u64().unwrap())
        .collect()
}

fn ids(answer: &Value) -> Vec<i64> {
    answer["split_into"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|id| id.as_i64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_dispatch_of_80_pull_requests_is_four_ordered_jobs_of_one_commit_each() {
    let w = World::new();
    let shas = w.merge(1..=80);
    let token = w.setup.create_token("split", &[]);
    let daemon = w.serve(&[]);
    let start = wiki_tip(&w.wiki);

    let body = w.body(&w.base, &shas[79]);
    let (status, answer) = post_dispatch(&daemon, SECRET, &body).await;
    assert_eq!(status, 202, "{answer}");
    let parts = ids(&answer);
    assert_eq!(
        parts.len(),
        4,
        "80 pull requests, at most 25 a job: {answer}"
    );
    assert_eq!(answer["job_id"], parts[0], "{answer}");
    // The same run again: the first part, nothing new.
    let (status, again) = post_dispatch(&daemon, SECRET, &body).await;
    assert_eq!(
        (status, &again["job_id"]),
        (200, &answer["job_id"]),
        "{again}"
    );

    let mut started = Vec::new();
    for (i, id) in parts.iter().enumerate() {
        let (job, _) = wait_for(&daemon, &token, *id, finished).await;
        assert_eq!(job["state"], "succeeded", "{job}");
        let (from, to) = (i * 25, (i * 25 + 25).min(80));
        let before = if i == 0 { &w.base } else { &shas[from - 1] };
        assert_eq!(job["push_before"], before.as_str(), "{job}");
        assert_eq!(job["push_after"], shas[to - 1].as_str(), "{job}");
        let expected: Vec<u64> = (from as u64 + 1..=to as u64).collect();
        let mut got = pull_numbers(&job);
        got.sort_unstable();
        assert_eq!(
            got,
            expected,
            "part {} records its own pull requests",
            i + 1
        );
        started.push(job["started_at"].as_i64().unwrap());
    }
    assert!(
        started.windows(2).all(|w| w[0] <= w[1]),
        "in order: {started:?}"
    );
    // One wiki commit per job, in the parts' order (the log is newest first).
    let mut newest_first = parts.clone();
    newest_first.reverse();
    let written: Vec<i64> = jobs_of_commits(&w.wiki, &start)
        .into_iter()
        .map(|j| j.expect("every commit is a job's"))
        .collect();
    assert_eq!(written, newest_first);
    for (n, sha) in shas.iter().enumerate() {
        assert_eq!(on_quarter_pages(&w.wiki, sha), 1, "#{} once", n + 1);
    }
    git(&w.wiki, &["fsck", "--strict", "--no-progress"]);
    assert!(daemon.terminate().success());
}

#[tokio::test]
async fn contiguous_dispatches_are_merged_only_while_the_merged_job_stays_within_the_bound() {
    let w = World::new();
    let token = w.setup.create_token("split", &[]);
    let mut holds = Holds::new();
    let daemon = w.serve(&[holds.env()]);
    let start = wiki_tip(&w.wiki);

    // A running job holds the wiki; the next dispatches queue behind it.
    let first = w.merge(1..=1);
    let (_, running) = post_dispatch(&daemon, SECRET, &w.body(&w.base, &first[0])).await;
    let held = holds.next().await;

    let a = w.merge(2..=21);
    let (_, queued) = post_dispatch(&daemon, SECRET, &w.body(&first[0], &a[19])).await;
    assert_eq!(queued["state"], "queued", "{queued}");
    // 20 + 10 would be 30 pull requests in one job: a job of its own.
    let b = w.merge(22..=31);
    let (_, own) = post_dispatch(&daemon, SECRET, &w.body(&a[19], &b[9])).await;
    assert_eq!(own["coalesced_into"], Value::Null, "{own}");
    assert_ne!(own["job_id"], queued["job_id"], "{own}");
    // 10 + 3 fit: merged into that job.
    let c = w.merge(32..=34);
    let (_, merged) = post_dispatch(&daemon, SECRET, &w.body(&b[9], &c[2])).await;
    assert_eq!(merged["coalesced_into"], own["job_id"], "{merged}");

    held.release();
    holds.next().await.release();
    holds.next().await.release();
    let mut order = Vec::new();
    for (answer, numbers) in [(&running, 1..=1), (&queued, 2..=21), (&own, 22..=34)] {
        let id = answer["job_id"].as_i64().unwrap();
        let (job, _) = wait_for(&daemon, &token, id, finished).await;
        assert_eq!(job["state"], "succeeded", "{job}");
        let mut got = pull_numbers(&job);
        got.sort_unstable();
        assert_eq!(got, numbers.collect::<Vec<u64>>(), "{job}");
        order.push(id);
    }
    order.reverse();
    let written: Vec<i64> = jobs_of_commits(&w.wiki, &start)
        .into_iter()
        .map(|j| j.expect("every commit is a job's"))
        .collect();
    assert_eq!(written, order, "one commit per job, in order");
    for sha in first.iter().chain(&a).chain(&b).chain(&c) {
        assert_eq!(on_quarter_pages(&w.wiki, sha), 1, "{sha} once");
    }
    let (job, _) = job(&daemon, &token, own["job_id"].as_i64().unwrap()).await;
    assert_eq!(job["coalesced_count"], 1, "{job}");
    assert!(daemon.terminate().success());
}

/// The sweep finds 30 pull requests no dispatch announced: two sweep jobs in
/// order (25 and 5), and while the first is queued the next run enqueues
/// nothing more.
#[tokio::test]
async fn a_missed_range_larger_than_one_job_is_swept_in_ordered_parts() {
    use std::sync::Arc;
    use teammem::config::Config;
    use teammem::sweep::{Outcome, Sweep};

    let w = World::new();
    let config = Config::parse(&format!(
        "[server]\ndata_dir = \"{data}\"\n[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{repo}\"\nlocal_wiki_path = \"{wiki}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\nsweep = true\n",
        data = w.dir.parent().unwrap().join("data").display(),
        repo = w.dir.display(),
        wiki = w.wiki.display(),
    ))
    .unwrap();
    let test = crate::queue::test_queue().await;
    let sweep = Sweep::new(
        Arc::new(config),
        test.queue.clone(),
        teammem::forge::Forges::with_github(None),
    );
    let run = async || {
        let mut outcomes = sweep.run().await;
        assert_eq!(outcomes.len(), 1, "{outcomes:?}");
        outcomes.remove(0).1
    };
    assert!(matches!(run().await, Outcome::TrackingStarted { .. }));
    let shas = w.merge(1..=30);
    let Outcome::Split {
        job_ids,
        before,
        after,
    } = run().await
    else {
        panic!("expected the missed range in parts");
    };
    assert_eq!(
        (before.as_str(), after.as_str()),
        (w.base.as_str(), shas[29].as_str())
    );
    assert_eq!(job_ids.len(), 2, "{job_ids:?}");
    let first = test.queue.get(job_ids[0]).await.unwrap();
    let second = test.queue.get(job_ids[1]).await.unwrap();
    assert_eq!(first.kind.columns().push_after.unwrap().as_str(), shas[24]);
    assert_eq!(
        second.kind.columns().push_before.unwrap().as_str(),
        shas[24]
    );
    assert_eq!(run().await, Outcome::InFlight { job_id: job_ids[0] });
}

/// The GitHub forge's split through the daemon: the verification counts 30
/// commits, the forge's first-parent history (the fake's commit listing) cuts
/// them into 25 and 5, and the parts run in order, each one wiki commit
/// recording its own pull requests.
#[tokio::test]
async fn a_github_dispatch_of_30_pull_requests_is_two_ordered_jobs() {
    let hub = super::github::Hub::new().await;
    let base = hub.source.head.clone();
    let shas: Vec<String> = (101..=130)
        .map(|n| {
            hub.merge_pr(
                n,
                &format!("Change number {n}"),
                &format!("area{}/f{n}.txt", n % 3),
            )
        })
        .collect();
    let token = hub.setup.create_token("split", &[]);
    let daemon = hub.serve();
    let start = wiki_tip(&hub.wiki);

    let answer = hub.dispatch_range(&daemon, 500, &base, &shas[29]).await;
    let parts = ids(&answer);
    assert_eq!(
        parts.len(),
        2,
        "30 pull requests, at most 25 a job: {answer}"
    );
    assert_eq!(answer["job_id"], parts[0], "{answer}");
    assert!(
        hub.fake
            .requests_with_query()
            .iter()
            .any(|r| r.contains("/repos/octo/app/commits?sha=")),
        "the split walked GitHub's commit listing"
    );

    let mut started = Vec::new();
    for (i, (id, (from, to))) in parts.iter().zip([(0, 25), (25, 30)]).enumerate() {
        let (job, _) = wait_for(&daemon, &token, *id, finished).await;
        assert_eq!(job["state"], "succeeded", "{job}");
        let before = if i == 0 { &base } else { &shas[from - 1] };
        assert_eq!(job["push_before"], before.as_str(), "{job}");
        assert_eq!(job["push_after"], shas[to - 1].as_str(), "{job}");
        let mut got = pull_numbers(&job);
        got.sort_unstable();
        let expected: Vec<u64> = (101 + from as u64..=100 + to as u64).collect();
        assert_eq!(
            got,
            expected,
            "part {} records its own pull requests",
            i + 1
        );
        started.push(job["started_at"].as_i64().unwrap());
    }
    assert!(started[0] <= started[1], "in order: {started:?}");
    let written: Vec<i64> = jobs_of_commits(&hub.wiki, &start)
        .into_iter()
        .map(|j| j.expect("every commit is a job's"))
        .collect();
    assert_eq!(
        written,
        vec![parts[1], parts[0]],
        "one commit per part, in order"
    );
    for (n, sha) in shas.iter().enumerate() {
        assert_eq!(on_quarter_pages(&hub.wiki, sha), 1, "#{} once", n + 101);
    }
    git(&hub.wiki, &["fsck", "--strict", "--no-progress"]);
    assert!(daemon.terminate().success());
}
