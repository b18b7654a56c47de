//! A long history through the real `teammem serve` (local forge, builtin
//! agent): 180 squash-merged pull requests over four quarters (commit dates
//! set with `GIT_AUTHOR_DATE`/`GIT_COMMITTER_DATE`), dispatched a push at a
//! time, fill the Changelog and one area page several times over, and a
//! folder and a file are deleted on the way. No job fails; every pull
//! request is on exactly one Changelog quarter page, the one of its merge
//! date, reachable from Home in two links (Home → Archive → quarter page)
//! and on exactly one quarter page of its area (Home → area page → quarter
//! page); no page exceeds 64 KiB; the deleted file leaves "What is here";
//! the removed folder's area moves to Home's "Removed areas" and its page
//! says which pull request removed it. The git CLI is the oracle.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;

use super::daemon_client::{finished, post_dispatch, wait_for};
use super::fixture;
use super::one_source::OneSource;
use crate::harness::daemon::Daemon;
use crate::harness::git::{git, git_trimmed, git_with_env};

const SECRET: &str = "archives dispatch secret, at least 32 bytes long";
const PAGE_LIMIT: usize = 64 * 1024;

/// Commits everything in `dir` as pull request `number` merged on `date`.
fn squash(dir: &Path, number: u64, date: &str) -> String {
    git(dir, &["add", "-A"]);
    let title = format!(
        "Rework the storage layer, step {number}, so that reads and writes take separate paths (#{number})"
    );
    let body = format!(
        "Step {number} of the storage rework: {}\n\nSigned-off-by: Ann <ann@example.com>",
        "the old code held one lock for reads and writes, so a slow write stalled every reader. "
            .repeat(2)
    );
    let when = format!("{date}T12:00:00+00:00");
    git_with_env(
        dir,
        &[("GIT_AUTHOR_DATE", &when), ("GIT_COMMITTER_DATE", &when)],
        &["commit", "-q", "-m", &title, "-m", &body],
    );
    git_trimmed(dir, &["rev-parse", "HEAD"])
}

fn page(wiki: &Path, path: &str) -> String {
    git(wiki, &["show", &format!("master:{path}")])
}

#[tokio::test]
async fn a_long_history_is_archived_by_quarter_and_nothing_is_lost_or_left_listed() {
    let repos = tempfile::tempdir().unwrap();
    let dir = repos.path().join("app");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    fixture::write(&dir, "README.md", "# app\n");
    fixture::write(&dir, "old/legacy.py", "\"\"\"The legacy store.\"\"\"\n");
    fixture::write(&dir, "src/gone.bin", "no purpose stated\n");
    fixture::write(&dir, ".github/workflows/ci.yml", "# CI\n");
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "Initial commit"]);
    let base = git_trimmed(&dir, &["rev-parse", "HEAD"]);
    let one = OneSource::of(repos, &dir, SECRET).token("archives").start();
    let (wiki, daemon, token) = (&one.wiki, &one.daemon, &one.token);
    let runs = AtomicU64::new(1);
    let dispatch = async |daemon: &Daemon, before: &str, after: &str| {
        let (status, answer) = post_dispatch(
            daemon,
            SECRET,
            &json!({
                "source_repository": "demo/app", "kind": "range",
                "source_run_id": runs.fetch_add(1, Ordering::SeqCst), "source_run_attempt": 1,
                "push_before": before, "push_after": after,
            }),
        )
        .await;
        assert_eq!(status, 202, "{answer}");
        let id = answer["job_id"].as_i64().unwrap();
        let (job, events) = wait_for(daemon, token, id, finished).await;
        assert_eq!(job["state"], "succeeded", "{job} {events}");
    };

    // 180 pull requests, 45 a quarter through 2025, 12 a push; #150 removes
    // the folder `old/` and #151 the file `src/gone.bin`; #5 touches
    // `.github/` and the root.
    let mut merged: Vec<(u64, String, String)> = Vec::new();
    let mut before = base.clone();
    for number in 1..=180u64 {
        let index = number - 1;
        let month = index / 15 + 1;
        let date = format!("2025-{month:02}-{:02}", index % 15 + 1);
        match number {
            150 => git(&dir, &["rm", "-q", "-r", "old"]),
            151 => git(&dir, &["rm", "-q", "src/gone.bin"]),
            5 => {
                fixture::write(&dir, ".github/workflows/ci.yml", "# CI, faster\n");
                fixture::write(&dir, "README.md", "# app\n\nStorage.\n");
                String::new()
            }
            _ => {
                fixture::write(
                    &dir,
                    &format!("src/store_{:02}.rs", number % 40),
                    &format!("//! Storage part {number}.\n"),
                );
                String::new()
            }
        };
        let sha = squash(&dir, number, &date);
        merged.push((number, sha.clone(), date));
        if number % 12 == 0 {
            dispatch(daemon, &before, &sha).await;
            before = sha;
        }
    }

    // No page over 64 KiB.
    let tree = git_trimmed(wiki, &["ls-tree", "-r", "-l", "master"]);
    let mut paths = Vec::new();
    for line in tree.lines() {
        let (meta, path) = line.split_once('\t').unwrap();
        let size: usize = meta.split_whitespace().nth(3).unwrap().parse().unwrap();
        assert!(size <= PAGE_LIMIT, "{path} holds {size} bytes");
        assert!(!path.contains('/'), "{path}: the wiki is flat");
        paths.push(path.to_owned());
    }
    let home = page(wiki, "Home.md");
    let index = page(wiki, "Archive.md");
    let area = page(wiki, "Area-src.md");
    assert!(
        home.contains("- [Archive](Archive) <!-- teammem:archive-link -->"),
        "{home}"
    );
    assert!(
        home.contains("- [src](Area-src) <!-- teammem:area:src -->"),
        "{home}"
    );
    assert!(
        page(wiki, "Changelog.md").len() > PAGE_LIMIT - 4096,
        "the Changelog filled up"
    );

    // Every pull request: on exactly one Changelog quarter page, the one of
    // its merge date, linked from Archive; on exactly one quarter page of
    // `src`, linked from the area page.
    let quarter_pages = |base: &str| -> Vec<(String, String)> {
        paths
            .iter()
            .filter(|p| {
                p.strip_prefix(base)
                    .and_then(|rest| rest.strip_prefix("-2025-Q"))
                    .is_some()
            })
            .map(|p| (p.clone(), page(wiki, p)))
            .collect()
    };
    let changelog_quarters = quarter_pages("Changelog");
    let src_quarters = quarter_pages("Area-src");
    assert!(changelog_quarters.len() >= 4, "{paths:?}");
    for (number, sha, date) in &merged {
        let month: u32 = date[5..7].parse().unwrap();
        let quarter = format!("2025-Q{}", (month - 1) / 3 + 1);
        let holding: Vec<&String> = changelog_quarters
            .iter()
            .filter(|(_, text)| text.contains(sha.as_str()))
            .map(|(p, _)| p)
            .collect();
        assert_eq!(holding.len(), 1, "#{number} is on {holding:?}");
        assert!(
            holding[0].starts_with(&format!("Changelog-{quarter}")),
            "#{number} of {date} is on {}",
            holding[0]
        );
        let name = holding[0].trim_end_matches(".md");
        assert!(
            index.contains(&format!("]({name})")),
            "Archive lacks {name}"
        );
        if ![5, 150].contains(number) {
            let holding: Vec<&String> = src_quarters
                .iter()
                .filter(|(_, text)| text.contains(sha.as_str()))
                .map(|(p, _)| p)
                .collect();
            assert_eq!(holding.len(), 1, "#{number} is on {holding:?} of src");
            let name = holding[0].trim_end_matches(".md");
            assert!(
                area.contains(&format!("]({name})")),
                "Area-src lacks {name}"
            );
        }
    }

    // The deleted file is no longer listed; the removed folder's area moved
    // to "Removed areas" and its page says by which pull request.
    let (what, _) = area.split_once("## Who knows").unwrap();
    assert!(what.contains("src/store_"), "{what}");
    assert!(!what.contains("src/gone.bin"), "{what}");
    let (topics, removed) = home
        .split_once("## Removed areas")
        .expect("a Removed areas list");
    assert!(!topics.contains("(Area-old)"), "{home}");
    assert!(
        removed.contains("- [old](Area-old) <!-- teammem:removed:old -->"),
        "{home}"
    );
    let old = page(wiki, "Area-old.md");
    assert!(
        old.contains(&format!(
            "Removed: no files under `old/` at commit `{}`. It was removed by #150 (merge commit `{}`).",
            merged[155].1, merged[149].1
        )),
        "{old}"
    );
    // Topics in one order, `.github` named as in the tree; then what coding
    // agents do.
    let (topics, agents) = topics
        .split_once("## For coding agents")
        .expect("a For coding agents list");
    assert!(
        agents.contains("](How-to-work-here) <!-- teammem:agents:get-context -->"),
        "{home}"
    );
    let order: Vec<&str> = topics
        .lines()
        .filter_map(|l| l.strip_prefix("- [")?.split(']').next())
        .collect();
    assert_eq!(
        order,
        [
            "Changelog",
            "Dependencies",
            "How to work here",
            "Archive",
            ".github",
            "root",
            "src"
        ][..]
            .iter()
            .filter(|t| **t != "Dependencies" || topics.contains("(Dependencies)"))
            .copied()
            .collect::<Vec<_>>()
    );

    // The dashboard's wiki view opens a page by the name the pages link.
    let view = reqwest::get(daemon.url("/wiki/demo/app/Archive"))
        .await
        .unwrap();
    assert_eq!(view.status(), 200);
    assert!(view.text().await.unwrap().contains("Changelog, 2025 Q1"));
    assert!(one.daemon.terminate().success());
}
