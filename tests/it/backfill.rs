//! Issue 36 through the real `teammem serve` process on the local forge (the
//! source and wiki made with the git CLI, the wiki read back with it):
//! - the reconciled commit never moves back: a maintainer's request for an
//!   old pull request and a re-run of an old range's workflow leave `as_of`
//!   (the real `teammem mcp`), the sources page's commit and lag and
//!   `teammem_source_lag` on `/metrics` at the newest reconciled commit;
//! - `teammem backfill`: cancellable before it ran, idempotent, its ranges run
//!   oldest first, and with an overlapping ordinary dispatch beside it every
//!   pull request is recorded exactly once; `--last N` counts merges, so it
//!   starts at the N-th last merge whatever direct commits lie between.
//!
//! Synchronisation is by polling the daemon's HTTP API under a deadline.

use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::harness::daemon::{Daemon, Setup};
use crate::harness::git::git_trimmed;
use crate::runner::daemon_client::{finished, jobs, post_dispatch, wait_for};
use crate::runner::fixture::{self, Source};

const SECRET: &str = "backfill e2e dispatch secret, at least 32 bytes long";

/// The source `demo/app` (fixture history) and its wiki, and a daemon setup.
struct Fixture {
    _repos: tempfile::TempDir,
    source: Source,
    wiki: std::path::PathBuf,
    setup: Setup,
}

impl Fixture {
    fn new() -> Fixture {
        let repos = tempfile::tempdir().unwrap();
        let source = Source::create(repos.path());
        let wiki = fixture::wiki(repos.path());
        let setup = Setup::new(&format!(
            "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n",
            source.dir.display(),
            wiki.display()
        ));
        Fixture {
            _repos: repos,
            source,
            wiki,
            setup,
        }
    }

    fn serve(&self) -> Daemon {
        self.setup.serve(&[("TEAMMEM_SECRET_DEMO", SECRET)])
    }

    /// `teammem ARGS --config …`: its exit success and stdout.
    fn cli(&self, args: &[&str]) -> (bool, String) {
        let out = self.setup.run(args);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        (out.status.success(), format!("{stdout}{stderr}"))
    }
}

/// A signed range dispatch of workflow run `run` (attempt `attempt`); the job id.
async fn dispatch(daemon: &Daemon, before: &str, after: &str, run: u64, attempt: u64) -> i64 {
    let (status, answer) = post_dispatch(
        daemon,
        SECRET,
        &json!({
            "source_repository": "demo/app", "kind": "range",
            "source_run_id": run, "source_run_attempt": attempt,
            "push_before": before, "push_after": after,
        }),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    answer["job_id"].as_i64().unwrap()
}

/// `as_of` of `get_wiki_snapshot` through the real `teammem mcp` (stdio).
async fn as_of(setup: &Setup) -> Value {
    let mut command = tokio::process::Command::new(crate::harness::daemon::BIN);
    command
        .arg("mcp")
        .arg("--config")
        .arg(&setup.config)
        .env("TEAMMEM_LOG", "warn");
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn teammem mcp");
    let client = ().serve(transport).await.expect("stdio handshake");
    let Value::Object(arguments) = json!({"repository": "demo/app"}) else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new("get_wiki_snapshot").with_arguments(arguments))
        .await
        .expect("tools/call");
    let envelope = result.structured_content.expect("structured content");
    assert_eq!(envelope["success"], true, "{envelope}");
    envelope["result"]["as_of"].clone()
}

/// The sources page's row of `demo/app` (a loopback client of the daemon's
/// own user is the local operator).
async fn sources_row(daemon: &Daemon) -> String {
    let home = reqwest::Client::new()
        .get(daemon.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let start = home
        .find("<tr data-source=\"demo/app\"")
        .unwrap_or_else(|| panic!("no row: {home}"));
    let end = start + home[start..].find("</tr>").unwrap();
    home[start..end].to_owned()
}

/// The reconciled commit as the three readers see it: `as_of`, and the
/// sources page's commit and lag, once the lag is known.
async fn assert_reconciled_to(f: &Fixture, daemon: &Daemon, sha: &str) {
    assert_eq!(as_of(&f.setup).await, sha, "as_of");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let row = sources_row(daemon).await;
        assert!(row.contains(&format!("title=\"{sha}\"")), "{row}");
        if row.contains("<td>up to date</td>") {
            assert_eq!(source_lag(daemon).await, 0, "teammem_source_lag");
            return;
        }
        assert!(
            Instant::now() < deadline && row.contains("unknown"),
            "the lag is not 'up to date': {row}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `teammem_source_lag{source="demo/app"}` on the daemon's `/metrics`, once
/// it is known (polled under a deadline: the first scrape starts the lookup).
pub(crate) async fn source_lag(daemon: &Daemon) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = reqwest::get(daemon.url("/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let text = crate::harness::without_node_label(&text);
        if let Some(value) = text
            .lines()
            .find_map(|l| l.strip_prefix("teammem_source_lag{source=\"demo/app\"} "))
        {
            return value.parse().expect("a count of commits");
        }
        assert!(
            Instant::now() < deadline,
            "no teammem_source_lag sample:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until every job the daemon holds has finished; returns them.
async fn all_finished(daemon: &Daemon, token: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let all = jobs(daemon, token).await;
        if all.iter().all(finished) {
            return all;
        }
        assert!(Instant::now() < deadline, "jobs still running: {all:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many entries of merge commit `sha` each Changelog page of the wiki
/// holds (the current page and its period archives, which may both keep it).
fn changelog_entries(wiki: &std::path::Path, sha: &str) -> Vec<(String, usize)> {
    let listed = git_trimmed(wiki, &["ls-tree", "-r", "--name-only", "master"]);
    listed
        .lines()
        .filter(|path| path.starts_with("Changelog"))
        .map(|path| {
            let count = git_trimmed(wiki, &["show", &format!("master:{path}")])
                .matches(&format!("<!-- teammem:{sha} -->"))
                .count();
            (path.to_owned(), count)
        })
        .collect()
}

#[tokio::test]
async fn an_old_pull_request_or_a_rerun_old_range_leaves_the_newest_reconciled_commit() {
    let f = Fixture::new();
    let newer = f.source.squash_pr(20, "Newer change", "src/newer.rs");
    let token = f.setup.create_token("ops", &[]);
    let daemon = f.serve();

    let old = dispatch(&daemon, &f.source.base, &f.source.head, 100, 1).await;
    let (job, _) = wait_for(&daemon, &token, old, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    // Reconciled to the old head: the newer merge is one commit past it.
    assert_eq!(source_lag(&daemon).await, 1, "teammem_source_lag");
    let new = dispatch(&daemon, &f.source.head, &newer, 101, 1).await;
    let (job, _) = wait_for(&daemon, &token, new, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_reconciled_to(&f, &daemon, &newer).await;

    // A maintainer asks for the old pull request #12 again.
    let answer: Value = reqwest::Client::new()
        .post(daemon.url("/v1/requests"))
        .bearer_auth(&token)
        .json(&json!({"repository": "demo/app", "pull_number": 12}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let request = answer["job_id"].as_i64().expect("a job");
    let (job, _) = wait_for(&daemon, &token, request, finished).await;
    assert!(
        matches!(job["state"].as_str(), Some("succeeded" | "no_change")),
        "{job}"
    );
    assert_reconciled_to(&f, &daemon, &newer).await;

    // The old range's workflow is re-run (a new attempt is a new job): it
    // reconciles its range again and must not take the cursor back.
    let rerun = dispatch(&daemon, &f.source.base, &f.source.head, 100, 2).await;
    assert_ne!(rerun, old);
    let (job, _) = wait_for(&daemon, &token, rerun, finished).await;
    assert!(
        matches!(job["state"].as_str(), Some("succeeded" | "no_change")),
        "{job}"
    );
    assert_reconciled_to(&f, &daemon, &newer).await;
    daemon.terminate();
}

#[tokio::test]
async fn a_backfill_is_cancellable_idempotent_ordered_and_records_each_pr_once() {
    let f = Fixture::new();
    let mut prs: Vec<String> = (100..130)
        .map(|n| {
            f.source
                .squash_pr(n, &format!("Change {n}"), &format!("area{}/f{n}.rs", n % 3))
        })
        .collect();
    let token = f.setup.create_token("ops", &[]);

    // Bad input is refused and changes nothing.
    let (ok, out) = f.cli(&[
        "backfill",
        "--repository",
        "demo/app",
        "--since",
        "yesterday",
    ]);
    assert!(!ok && out.contains("neither a full commit id"), "{out}");
    let (ok, out) = f.cli(&["backfill", "--repository", "other/app", "--last", "5"]);
    assert!(!ok && out.contains("not a configured source"), "{out}");
    let (ok, out) = f.cli(&[
        "backfill",
        "--repository",
        "demo/app",
        "--since",
        &"f".repeat(40),
    ]);
    assert!(!ok && out.contains("unknown_commit"), "{out}");
    let (_, status) = f.cli(&["backfill", "--status"]);
    assert_eq!(status.trim(), "no backfills");

    // The whole history (33 first-parent commits after the root): 2 ranges.
    let (ok, out) = f.cli(&["backfill", "--repository", "demo/app", "--last", "40"]);
    assert!(ok && out.contains("2 range(s) queued"), "{out}");
    // Cancelled before any ran.
    let (ok, out) = f.cli(&["backfill", "--cancel", "--repository", "demo/app"]);
    assert!(
        ok && out.contains("cancelled 2 queued backfill range(s)"),
        "{out}"
    );
    let (_, status) = f.cli(&["backfill", "--status", "--repository", "demo/app"]);
    assert!(
        status.contains("0 of 2 ranges done") && status.contains("2 cancelled"),
        "{status}"
    );
    // Again: the cancelled ranges are queued again, nothing else.
    let (ok, out) = f.cli(&["backfill", "--repository", "demo/app", "--last", "40"]);
    assert!(ok && out.contains("2 range(s) queued"), "{out}");
    // And again: nothing.
    let (ok, out) = f.cli(&["backfill", "--repository", "demo/app", "--last", "40"]);
    assert!(ok && out.contains("nothing to backfill"), "{out}");

    // Two more merges, announced by a delayed dispatch whose range overlaps
    // the backfill's last range (it starts three merges back).
    prs.push(f.source.squash_pr(130, "Change 130", "area1/f130.rs"));
    prs.push(f.source.squash_pr(131, "Change 131", "area2/f131.rs"));
    let daemon = f.serve();
    let ordinary = dispatch(&daemon, &prs[26], &prs[31], 200, 1).await;
    let all = all_finished(&daemon, &token).await;
    for job in &all {
        assert!(
            matches!(
                job["state"].as_str(),
                Some("succeeded" | "no_change" | "skipped")
            ),
            "{job}"
        );
    }
    // Each pull request once on a page, whichever job got to it first.
    for sha in prs.iter().chain([&f.source.merge_12, &f.source.squash_13]) {
        let pages = changelog_entries(&f.wiki, sha);
        assert!(
            pages.iter().all(|(_, n)| *n <= 1) && pages.iter().any(|(_, n)| *n == 1),
            "{sha}: {pages:?}\n{}",
            git_trimmed(&f.wiki, &["show", "master:Changelog.md"])
        );
    }
    // The backfill's ranges ran oldest first; the ordinary job is its own.
    let mut backfilled: Vec<&Value> = all.iter().filter(|j| j["actor"] == "backfill").collect();
    backfilled.sort_by_key(|j| j["push_before"] == f.source.base.as_str());
    assert_eq!(backfilled.len(), 2, "{all:?}");
    let (oldest, newest) = (backfilled[1], backfilled[0]);
    assert_eq!(oldest["push_before"], f.source.base.as_str());
    assert_eq!(newest["push_before"], oldest["push_after"]);
    assert!(
        oldest["started_at"].as_i64() < newest["started_at"].as_i64(),
        "{all:?}"
    );
    let (job, _) = wait_for(&daemon, &token, ordinary, finished).await;
    assert_eq!(
        job["push_after"],
        prs[31].as_str(),
        "never coalesced into a backfill range"
    );
    let (_, status) = f.cli(&["backfill", "--status", "--repository", "demo/app"]);
    assert!(
        status.contains("2 of 2 ranges done") && status.contains("ended"),
        "{status}"
    );
    assert_reconciled_to(&f, &daemon, &prs[31]).await;
    daemon.terminate();
}

/// Commits everything in the source directly on `main` (no pull request).
fn direct(f: &Fixture, file: &str, subject: &str) -> String {
    fixture::write(&f.source.dir, file, &format!("{subject}\n"));
    crate::harness::git::git(&f.source.dir, &["add", "-A"]);
    crate::harness::git::git(&f.source.dir, &["commit", "-q", "-m", subject]);
    git_trimmed(&f.source.dir, &["rev-parse", "HEAD"])
}

#[tokio::test]
async fn last_n_starts_at_the_nth_last_merge_with_direct_commits_between() {
    let f = Fixture::new();
    // After the fixture (#12 merged, #13 squashed, a direct commit):
    let before_100 = f.source.head.clone();
    f.source.squash_pr(100, "Change 100", "src/a.rs");
    direct(&f, "typo.md", "Fix a typo");
    direct(&f, "tidy.md", "Tidy");
    f.source.squash_pr(101, "Change 101", "src/b.rs");
    let tip = direct(&f, "notes.md", "Notes after the last merge");

    // The last two merges are #100 and #101: the backfill starts right
    // before #100 (four first-parent commits back would start after it).
    let (ok, out) = f.cli(&["backfill", "--repository", "demo/app", "--last", "2"]);
    assert!(ok && out.contains("1 range(s) queued"), "{out}");
    let (ok, status) = f.cli(&["backfill", "--status", "--json", "--repository", "demo/app"]);
    assert!(ok, "{status}");
    let rows: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(rows[0]["first_sha"], before_100.as_str(), "{rows}");
    assert_eq!(rows[0]["last_sha"], tip.as_str(), "{rows}");
    assert_eq!(rows[0]["spec"], "--last 2", "{rows}");
    // Three: from #13 on (its parent #12's merge), the direct commit after
    // #13 riding along; the part already queued is not planned again.
    let (ok, out) = f.cli(&["backfill", "--repository", "demo/app", "--last", "3"]);
    assert!(ok && out.contains("1 range(s) queued"), "{out}");
    let (_, status) = f.cli(&["backfill", "--status", "--json", "--repository", "demo/app"]);
    let rows: Value = serde_json::from_str(&status).unwrap();
    let newest = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["spec"] == "--last 3")
        .unwrap_or_else(|| panic!("{rows}"));
    assert_eq!(newest["first_sha"], f.source.merge_12.as_str(), "{rows}");
    assert_eq!(newest["last_sha"], before_100.as_str(), "{rows}");
}
