//! Issue #5's end-to-end matrix on the local forge, through the real
//! `teammem serve` process: the source and the wiki are plain repositories
//! made with the git CLI, dispatches are signed over HTTP, jobs are followed
//! through `/v1/jobs` and the wiki is read back with the git CLI. Also the
//! openai and command agent backends inside the daemon (they are
//! forge-independent: the runner hands them the same writer child and
//! evidence on either forge, so the local forge stands for both).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::daemon_client::{finished, jobs_of_commits, post_dispatch, wait_for, wiki_tip};
use super::e2e::{self, Forge};
use super::fixture::{self, Source};
use super::{command, openai};
use crate::harness::daemon::{Daemon, Setup};
use crate::harness::git::git_trimmed;

const SECRET: &str = "local e2e dispatch secret, at least 32 bytes long";

/// `demo/app` on the local forge with its wiki, and a daemon configuration.
struct Local {
    _repos: tempfile::TempDir,
    source: Source,
    wiki: PathBuf,
    setup: Setup,
    runs: AtomicU64,
}

impl Forge for Local {
    async fn new(extra: &str) -> Local {
        let repos = tempfile::tempdir().unwrap();
        let source = Source::create(repos.path());
        let wiki = fixture::wiki(repos.path());
        let setup = Setup::new(&format!(
            "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n{extra}\n",
            source.dir.display(),
            wiki.display()
        ));
        Local {
            _repos: repos,
            source,
            wiki,
            setup,
            runs: AtomicU64::new(100),
        }
    }

    fn setup(&self) -> &Setup {
        &self.setup
    }

    fn source(&self) -> &Source {
        &self.source
    }

    fn wiki(&self) -> &Path {
        &self.wiki
    }

    fn serve(&self, envs: &[(&str, &str)]) -> Daemon {
        let mut all = vec![("TEAMMEM_SECRET_DEMO", SECRET)];
        all.extend_from_slice(envs);
        self.setup.serve(&all)
    }

    fn merge_pr(&self, number: u64, title: &str, path: &str) -> String {
        self.source.squash_pr(number, title, path)
    }

    async fn dispatch(&self, daemon: &Daemon, before: &str, after: &str) -> Value {
        // The workflow always sends its run; it makes a replayed range a new job.
        let run = self.runs.fetch_add(1, Ordering::SeqCst);
        let (status, answer) = post_dispatch(
            daemon,
            SECRET,
            &json!({
                "source_repository": "demo/app", "kind": "range",
                "source_run_id": run, "source_run_attempt": 1,
                "push_before": before, "push_after": after,
            }),
        )
        .await;
        assert_eq!(status, 202, "{answer}");
        answer
    }
}

#[tokio::test]
async fn local_dispatch_is_recorded_and_the_same_range_again_changes_nothing() {
    e2e::dispatch_then_replay::<Local>().await;
}

#[tokio::test]
async fn local_contiguous_dispatches_while_the_first_is_queued_become_one_job() {
    e2e::contiguous_dispatches_coalesce_while_queued::<Local>().await;
}

#[tokio::test]
async fn local_wiki_moved_by_another_writer_during_the_job_is_rebuilt_once() {
    e2e::a_wiki_moved_during_the_job_is_rebuilt_once::<Local>().await;
}

#[tokio::test]
async fn local_job_killed_with_the_daemon_is_rescued_and_recorded_once() {
    e2e::a_job_killed_with_the_daemon_is_rescued_after_restart::<Local>().await;
}

#[tokio::test]
async fn local_force_pushed_source_rejects_the_queued_job() {
    e2e::a_force_pushed_source_rejects_a_queued_job::<Local>().await;
}

#[tokio::test]
async fn the_openai_agent_in_the_daemon_survives_bad_tool_calls_and_is_checked() {
    // The scripted model reads the snapshot, makes a call that is not JSON and
    // one to a tool that does not exist, writes the Changelog, then answers
    // with an honest receipt.
    let (url, requests) = openai::start(openai::script(false)).await;
    let f = Local::new(&openai::agent_config(&url, 10)).await;
    let token = f.setup.create_token("e2e", &[]);
    let daemon = f.serve(&[]);
    let start = wiki_tip(&f.wiki);

    let answer = f.dispatch(&daemon, &f.source.base, &f.source.head).await;
    let id = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(
        job["receipt"]["wiki_sha"],
        wiki_tip(&f.wiki).as_str(),
        "{job}"
    );
    assert_eq!(jobs_of_commits(&f.wiki, &start), [Some(id)]);
    let changelog = git_trimmed(&f.wiki, &["show", "master:Changelog.md"]);
    for sha in [&f.source.merge_12, &f.source.squash_13] {
        assert_eq!(changelog.matches(sha.as_str()).count(), 1, "{changelog}");
    }
    {
        let requests = requests.lock().unwrap();
        assert_eq!(requests.len(), 4, "one request per step");
        let bad = &requests[2];
        assert!(
            openai::tool_answer(bad, "c2")["error"]
                .as_str()
                .unwrap()
                .contains("not a JSON object")
        );
        assert!(
            openai::tool_answer(bad, "c3")["error"]
                .as_str()
                .unwrap()
                .contains("unknown tool")
        );
    }
    let metrics = reqwest::get(daemon.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let metrics = crate::harness::without_node_label(&metrics);
    assert!(
        metrics.contains("teammem_agent_steps_total{agent=\"openai\"}"),
        "{metrics}"
    );
    assert!(daemon.terminate().success());
}

#[tokio::test]
async fn the_openai_agent_in_the_daemon_that_lies_in_its_receipt_fails_the_job() {
    // The same model, but its receipt names a wiki commit that does not exist.
    let (url, _) = openai::start(openai::script(true)).await;
    let f = Local::new(&openai::agent_config(&url, 10)).await;
    let token = f.setup.create_token("e2e", &[]);
    let daemon = f.serve(&[]);
    let start = wiki_tip(&f.wiki);

    let answer = f.dispatch(&daemon, &f.source.base, &f.source.head).await;
    let id = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "failed", "{job}");
    assert_eq!(job["attempts"], 1, "a lying receipt is not retried: {job}");
    let reason = job["last_error"].as_str().unwrap_or_default();
    assert!(
        reason.contains("receipt does not hold") && reason.contains("wiki_sha"),
        "{job}"
    );
    // The writes the writer staged were never published, and the reason
    // says so (a maintainer about to retry must know the wiki is as it was).
    assert_eq!(
        wiki_tip(&f.wiki),
        start,
        "a refused receipt publishes nothing"
    );
    assert!(
        reason.contains("staged") && reason.contains("nothing was published"),
        "{job}"
    );
    assert!(jobs_of_commits(&f.wiki, &start).is_empty());
    // What the agent claimed is kept with the failure for that review.
    assert_eq!(job["receipt"]["wiki_sha"], "1".repeat(40), "{job}");
    assert!(daemon.terminate().success());
}

#[tokio::test]
async fn the_command_agent_in_the_daemon_drives_the_writer_from_its_mcp_config() {
    // The test agent (command.rs), in the sandbox, reads the generated MCP
    // config, reaches the job's writer through the relay it names, writes
    // Team-log.md and hands back its receipt.
    let agent_dir = tempfile::tempdir().unwrap();
    let agent = agent_dir.path().join("agent.py");
    std::fs::write(&agent, command::AGENT).unwrap();
    let f = Local::new(&command::agent_table(&agent, &[], 60)).await;
    let token = f.setup.create_token("e2e", &[]);
    let daemon = f.serve(&[]);
    let start = wiki_tip(&f.wiki);

    let answer = f.dispatch(&daemon, &f.source.base, &f.source.head).await;
    let id = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(
        job["receipt"]["wiki_sha"],
        wiki_tip(&f.wiki).as_str(),
        "{job}"
    );
    assert_eq!(jobs_of_commits(&f.wiki, &start), [Some(id)]);
    let log = git_trimmed(&f.wiki, &["show", "master:Team-log.md"]);
    for (number, sha) in [(12, &f.source.merge_12), (13, &f.source.squash_13)] {
        assert_eq!(
            log.matches(&format!("- #{number} {sha}")).count(),
            1,
            "{log}"
        );
    }
    // The agent ran with the daemon's environment cleared (the dispatch
    // secret the daemon holds is not in it).
    let report = command::report(&git_trimmed(&f.wiki, &["show", "master:Agent-report.md"]));
    let names: Vec<String> = serde_json::from_value(report["env"].clone()).unwrap();
    assert!(
        !names.iter().any(|n| n.starts_with("TEAMMEM_")),
        "{names:?}"
    );
    assert!(daemon.terminate().success());
}

/// A PR that bumps a dependency's version says "old → new" on its entry, and
/// Dependencies.md lists the new version citing the line that declares it at
/// the job's tip (the git CLI is the oracle for the line).
#[tokio::test]
async fn a_dependency_bump_is_named_on_its_entry_and_cited_on_the_dependencies_page() {
    let f = Local::new("").await;
    let (s, wiki) = (f.source(), f.wiki());
    let token = f.setup().create_token("e2e", &[]);
    let daemon = f.serve(&[]);
    let manifest = |tokio: &str| {
        format!(
            "[package]\nname = \"app\"\n\n[dependencies]\nserde = \"1.0\"\ntokio = \"{tokio}\"\n"
        )
    };
    let commit = |number: u64, title: &str, text: &str| {
        super::fixture::write(&s.dir, "Cargo.toml", text);
        crate::harness::git::git(&s.dir, &["add", "-A"]);
        crate::harness::git::git(
            &s.dir,
            &["commit", "-q", "-m", &format!("{title} (#{number})")],
        );
        git_trimmed(&s.dir, &["rev-parse", "HEAD"])
    };
    commit(20, "Add a manifest", &manifest("1.38"));
    let bump = commit(21, "Bump tokio", &manifest("1.40"));
    let id = e2e::id_of(&f.dispatch(&daemon, &s.head, &bump).await);
    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let changelog = git_trimmed(wiki, &["show", "master:Changelog.md"]);
    let entry = changelog
        .lines()
        .find(|l| l.contains("#21 Bump tokio"))
        .unwrap_or_else(|| panic!("{changelog}"));
    assert!(
        entry.contains("— dependencies: tokio 1.38 → 1.40 (Cargo.toml) —"),
        "{entry}"
    );
    // The range's first PR is read against the range's base: its manifest's
    // dependencies are named as added.
    let first = changelog
        .lines()
        .find(|l| l.contains("#20 Add a manifest"))
        .unwrap_or_else(|| panic!("{changelog}"));
    assert!(
        first.contains("— dependencies: + serde 1.0; + tokio 1.38 (Cargo.toml) —"),
        "{first}"
    );
    let shown = git_trimmed(&s.dir, &["show", &format!("{bump}:Cargo.toml")]);
    let line = shown
        .lines()
        .position(|l| l.starts_with("tokio = \"1.40\""))
        .unwrap()
        + 1;
    let page = git_trimmed(wiki, &["show", "master:Dependencies.md"]);
    assert!(
        page.contains(&format!(
            "- tokio — 1.40 <!-- teammem:evidence Cargo.toml@{bump}#L{line} -->"
        )),
        "{page}"
    );
    let home = git_trimmed(wiki, &["show", "master:Home.md"]);
    assert!(home.contains("[Dependencies](Dependencies)"), "{home}");

    // A maintainer's request for the older PR #20 (already recorded, its
    // merge commit behind the reconciled tip) changes nothing: it does not
    // set Dependencies.md or "What is here" back to its own commit.
    let tip = git_trimmed(wiki, &["rev-parse", "master"]);
    let answer: Value = reqwest::Client::new()
        .post(daemon.url("/v1/requests"))
        .bearer_auth(&token)
        .json(&json!({"repository": "demo/app", "pull_number": 20}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = answer["job_id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{answer}"));
    let (job, events) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "no_change", "{job} {events}");
    assert_eq!(git_trimmed(wiki, &["rev-parse", "master"]), tip);
    assert!(daemon.terminate().success());
}

/// Issue #20's page limits, through the daemon: an area of 320 files and a
/// history of 105 long-described pull requests on it. Every page stays within
/// 64 KiB, the area's "What is here" says how many files it did not list,
/// and the current pages that dropped their oldest entries still reach each
/// of them on a quarter page they link (issue 36).
#[tokio::test]
async fn a_large_area_and_a_long_history_stay_within_64_kib_and_say_what_they_left_out() {
    const PAGE_LIMIT: usize = 64 * 1024;
    let f = Local::new("").await;
    let (s, wiki) = (f.source(), f.wiki());
    let token = f.setup().create_token("e2e", &[]);
    let daemon = f.serve(&[]);
    let commit = |number: u64, files: &[(String, String)]| {
        for (path, text) in files {
            super::fixture::write(&s.dir, path, text);
        }
        crate::harness::git::git(&s.dir, &["add", "-A"]);
        let title = format!(
            "Rework the *big* module number {number} so that `its` handling of [edge] cases <is> clearer | {}",
            "and much longer than a title needs to be ".repeat(3)
        );
        let body = format!(
            "This change {number} explains at length why the module needed a rework: {}\n\nFixes #{}",
            "the old code read every record twice and nobody could tell why. ".repeat(6),
            number + 1000
        );
        crate::harness::git::git(
            &s.dir,
            &[
                "commit",
                "-q",
                "-m",
                &format!("{title} (#{number})"),
                "-m",
                &body,
            ],
        );
        git_trimmed(&s.dir, &["rev-parse", "HEAD"])
    };
    let module = |i: usize, version: u64| {
        (
            format!("big/module_with_a_rather_long_name_{i:03}.py"),
            format!(
                "\"\"\"Module {i}: reads the records of kind {i} and writes their summaries.\"\"\"\n\nVERSION = {version}\n"
            ),
        )
    };
    let everything: Vec<_> = (0..320).map(|i| module(i, 0)).collect();
    let mut merged = vec![commit(100, &everything)];
    for number in 101..195 {
        merged.push(commit(number, &[module(number as usize % 320, number)]));
    }
    let first_tip = merged.last().unwrap().clone();
    let id = e2e::id_of(&f.dispatch(&daemon, &s.head, &first_tip).await);
    let (job, events) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job} {events}");
    for number in 195..205 {
        merged.push(commit(number, &[module(number as usize % 320, number)]));
    }
    let id = e2e::id_of(
        &f.dispatch(&daemon, &first_tip, merged.last().unwrap())
            .await,
    );
    let (job, events) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job} {events}");

    let tree = git_trimmed(wiki, &["ls-tree", "-r", "-l", "master"]);
    for line in tree.lines() {
        let (meta, path) = line.split_once('\t').unwrap();
        let size: usize = meta.split_whitespace().nth(3).unwrap().parse().unwrap();
        assert!(size <= PAGE_LIMIT, "{path} holds {size} bytes");
    }
    for (page, base) in [("Changelog.md", "Changelog"), ("Area-big.md", "Area-big")] {
        let text = git_trimmed(wiki, &["show", &format!("master:{page}")]);
        assert!(
            !text.contains("<!-- teammem:trimmed -->"),
            "{page}:\n{text}"
        );
        assert!(text.contains(merged.last().unwrap()), "{page}");
        assert!(!text.contains(&merged[0]), "{page}");
        // Every PR is on exactly one quarter page of the page's, which it links.
        let quarters: Vec<String> = tree
            .lines()
            .filter_map(|line| line.split_once('\t').map(|(_, path)| path))
            .filter(|path| path.starts_with(&format!("{base}-20")))
            .map(|path| git_trimmed(wiki, &["show", &format!("master:{path}")]))
            .collect();
        for (number, sha) in (100..).zip(&merged) {
            let on = quarters.iter().filter(|q| q.contains(sha.as_str())).count();
            assert_eq!(on, 1, "{page}: #{number} is on {on} quarter pages");
        }
        assert!(
            text.contains(&format!("]({base}-20")),
            "{page} links its quarters"
        );
    }
    let area = git_trimmed(wiki, &["show", "master:Area-big.md"]);
    let listed = area
        .lines()
        .filter(|l| l.starts_with("- big/module_with_a_rather_long_name_"))
        .count();
    assert!(listed > 0 && listed < 320, "{listed} files listed:\n{area}");
    assert!(
        area.contains(&format!("{} more files are not listed", 320 - listed)),
        "{area}"
    );
    assert!(daemon.terminate().success());
}

/// A job that changes 20 existing area pages needs more replacements than
/// one writer call takes (40): the builtin agent splits its patches into
/// calls within the writer's limits, and the job succeeds.
#[tokio::test]
async fn a_job_touching_twenty_existing_areas_stays_within_the_writers_call_limits() {
    let f = Local::new("").await;
    let (s, wiki) = (f.source(), f.wiki());
    let token = f.setup().create_token("e2e", &[]);
    let daemon = f.serve(&[]);
    let change_every_area = |number: u64| {
        for area in 0..20 {
            super::fixture::write(
                &s.dir,
                &format!("area{area:02}/lib.py"),
                &format!("\"\"\"Area {area}.\"\"\"\nVERSION = {number}\n"),
            );
        }
        crate::harness::git::git(&s.dir, &["add", "-A"]);
        crate::harness::git::git(
            &s.dir,
            &[
                "commit",
                "-q",
                "-m",
                &format!("Change every area (#{number})"),
            ],
        );
        git_trimmed(&s.dir, &["rev-parse", "HEAD"])
    };
    let mut before = s.head.clone();
    for number in [40, 41] {
        let after = change_every_area(number);
        let id = e2e::id_of(&f.dispatch(&daemon, &before, &after).await);
        let (job, events) = wait_for(&daemon, &token, id, finished).await;
        assert_eq!(job["state"], "succeeded", "#{number}: {job} {events}");
        for area in 0..20 {
            let page = git_trimmed(wiki, &["show", &format!("master:Area-area{area:02}.md")]);
            assert!(
                page.contains(&after),
                "#{number} is not on area{area:02}:\n{page}"
            );
        }
        before = after;
    }
    assert!(daemon.terminate().success());
}

/// Four areas of 200 files each need 800 file heads, more than one job reads
/// (600): the first job fills three areas' "What is here" sections, and the
/// next job, touching the same areas, fills the one left without instead of
/// re-reading the same three.
#[tokio::test]
async fn an_area_left_out_by_the_head_budget_gets_its_section_on_the_next_job() {
    use teammem::runner::builtin::{WHAT_IS_HERE_ANCHOR, WHAT_IS_HERE_FILES};
    assert_eq!(
        teammem::runner::builtin::HEADS_PER_JOB / WHAT_IS_HERE_FILES,
        3
    );
    let f = Local::new("").await;
    let (s, wiki) = (f.source(), f.wiki());
    for area in 0..4 {
        for file in 0..WHAT_IS_HERE_FILES {
            super::fixture::write(
                &s.dir,
                &format!("area{area}/m{file:03}.py"),
                &format!("\"\"\"Module {file} of area {area}.\"\"\"\n"),
            );
        }
    }
    let commit = |message: &str| {
        crate::harness::git::git(&s.dir, &["add", "-A"]);
        crate::harness::git::git(&s.dir, &["commit", "-q", "-m", message]);
        git_trimmed(&s.dir, &["rev-parse", "HEAD"])
    };
    let mut before = commit("Add four areas");
    let token = f.setup().create_token("e2e", &[]);
    let daemon = f.serve(&[]);
    let with_section = |wiki: &std::path::Path| -> Vec<bool> {
        (0..4)
            .map(|area| {
                git_trimmed(wiki, &["show", &format!("master:Area-area{area}.md")])
                    .contains(WHAT_IS_HERE_ANCHOR)
            })
            .collect()
    };
    for (number, expected) in [(50, [true, true, true, false]), (51, [true; 4])] {
        for area in 0..4 {
            super::fixture::write(
                &s.dir,
                &format!("area{area}/m000.py"),
                &format!("\"\"\"Module 0 of area {area}, changed by #{number}.\"\"\"\n"),
            );
        }
        let after = commit(&format!("Change every area (#{number})"));
        let id = e2e::id_of(&f.dispatch(&daemon, &before, &after).await);
        let (job, events) = wait_for(&daemon, &token, id, finished).await;
        assert_eq!(job["state"], "succeeded", "#{number}: {job} {events}");
        assert_eq!(with_section(wiki), expected, "after #{number}");
        before = after;
    }
    let page = git_trimmed(wiki, &["show", "master:Area-area3.md"]);
    assert!(
        page.contains("Module 0 of area 3, changed by #51."),
        "{page}"
    );
    assert!(daemon.terminate().success());
}
