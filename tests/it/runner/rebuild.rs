//! The builtin agent's rebuild after a conflict between two of its own
//! writer calls, with the real runner, the real writer child and the git CLI
//! as the oracle: the job still succeeds with ONE wiki commit, and its
//! receipt says `updated` for what that commit holds.
//!
//! How a job's second call conflicts with its first: the first call of a
//! job carries the runner's evidence-marker rewrites, on every page they
//! touch (here `Dependencies.md`, whose cited `Cargo.toml` lines the range
//! moved). The builtin's later call patches that page with the blob sha it
//! read before the first call, which is a conflict, so it reads its staged
//! state again and rebuilds: the pull request its first call recorded is
//! this job's (`updated`), not "already recorded" (`no_change`).
//! (A wiki tip that moves between two staged calls cannot do this: the
//! second call builds on the job's own staged tip; the move is a conflict at
//! the publish, and the runner starts the agent again on the new tip, which
//! `one_commit.rs` covers.)
//!
//! And a job whose one commit holds only current-state sections (every pull
//! request already recorded, Home's topics brought back) says `updated`,
//! each pull request `no_change`: the receipt's status is what the commit
//! holds.

use teammem::queue::Completion;
use teammem::worker::JobHandler;

use super::fixture::{squash, write};
use super::handler::Setup;
use crate::harness::git::{git, git_trimmed};

/// The areas the first job records besides the fixture's `src`, `docs` and
/// the root: with those, nine areas, so a change to all of them patches
/// nine area pages and their nine quarter pages, then the Changelog and its
/// quarter page: 20 pages, one writer call; `Dependencies.md` is the next
/// call.
const MORE_AREAS: [&str; 6] = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"];

const CARGO: &str = "[package]\nname = \"app\"\nversion = \"0.1.0\"\n\n[dependencies]\nserde = \"1\"\nregex = \"1.10\"\n";

/// The commits on the wiki's branch after `start`: (sha, full message).
fn commits_after(s: &Setup, start: &str) -> Vec<(String, String)> {
    let log = s.wiki_git(&["log", "--format=%H%x00%B%x01", &format!("{start}..master")]);
    log.split('\u{1}')
        .filter(|entry| !entry.trim().is_empty())
        .map(|entry| {
            let (sha, message) = entry.trim_start().split_once('\0').unwrap();
            (sha.to_owned(), message.to_owned())
        })
        .collect()
}

fn receipt(done: &Completion) -> &serde_json::Value {
    match done {
        Completion::Succeeded { receipt } => receipt,
        other => panic!("expected the job to succeed, got {other:?}"),
    }
}

/// The fixture's history, then PR #14 (`Cargo.toml` and one file in each of
/// [`MORE_AREAS`]), recorded by job 1; then PR #20, which moves every line
/// of `Cargo.toml` down by one and changes a file in each of the nine
/// areas. Returns the setup, job 1's end and #20's sha.
async fn recorded_then_moved() -> (Setup, String, String) {
    let s = Setup::new();
    let dir = &s.source.dir;
    write(dir, "Cargo.toml", CARGO);
    for area in MORE_AREAS {
        write(dir, &format!("{area}/lib.rs"), "pub fn one() {}\n");
    }
    let first_end = squash(dir, 14, "Manifest and six areas");
    let first = s.range_job(1, &s.source.base, &first_end);
    let done = s.runner().run(&first).await.unwrap();
    receipt(&done);
    let dependencies = s.page("Dependencies.md");
    assert!(
        dependencies.contains("Cargo.toml@") && dependencies.contains("serde"),
        "{dependencies}"
    );

    write(
        dir,
        "Cargo.toml",
        &format!("# The app's manifest.\n{CARGO}"),
    );
    for area in ["src", "docs"].into_iter().chain(MORE_AREAS) {
        write(dir, &format!("{area}/more.rs"), "pub fn two() {}\n");
    }
    let pr_20 = squash(dir, 20, "Touch every area");
    (s, first_end, pr_20)
}

#[tokio::test]
async fn a_rebuild_after_the_jobs_own_first_call_reports_what_the_one_commit_records() {
    let (s, first_end, pr_20) = recorded_then_moved().await;
    let start = s.tip();
    let done = s
        .runner()
        .run(&s.range_job(2, &first_end, &pr_20))
        .await
        .unwrap();
    let receipt = receipt(&done);
    let summary = receipt["summary"].as_str().unwrap();
    // The scenario happened: the second call conflicted and the agent rebuilt.
    // (If not, the planner's pages moved the cut between the two calls:
    // change the number of areas so that Dependencies.md is the 21st page.)
    assert!(
        summary.contains("after one rebuild"),
        "no rebuild: Dependencies.md was not patched in a second writer call: {receipt}"
    );
    assert_eq!(receipt["status"], "updated", "{receipt}");
    let pulls = receipt["pull_requests"].as_array().unwrap();
    assert_eq!(pulls.len(), 1, "{receipt}");
    assert_eq!(pulls[0]["number"], 20, "{receipt}");
    assert_eq!(pulls[0]["status"], "updated", "{receipt}");

    // Exactly one new wiki commit, the job's, the receipt's.
    let commits = commits_after(&s, &start);
    assert_eq!(commits.len(), 1, "{commits:?}");
    let (sha, message) = &commits[0];
    assert!(message.contains("Teammem-Job: 2"), "{message}");
    assert!(message.contains("#20"), "{message}");
    assert_eq!(receipt["wiki_sha"], sha.as_str(), "{receipt}");
    // #20 recorded once on the Changelog and on each area page it touched.
    let changelog = s.page("Changelog.md");
    assert!(changelog.contains("Touch every area"), "{changelog}");
    assert_eq!(
        changelog
            .matches(&format!("<!-- teammem:{pr_20} -->"))
            .count(),
        1,
        "{changelog}"
    );
    for area in MORE_AREAS {
        let page = s.page(&format!("Area-{area}.md"));
        assert!(page.contains(&pr_20), "Area-{area}.md: {page}");
    }
    // Dependencies.md cites the declaring lines where they are now.
    let dependencies = s.page("Dependencies.md");
    let serde_line = CARGO.lines().position(|l| l.starts_with("serde")).unwrap() + 2;
    assert!(
        dependencies.contains(&format!("Cargo.toml@{pr_20}#L{serde_line}")),
        "{dependencies}"
    );
    git(&s.wiki, &["fsck", "--strict", "--no-progress"]);
    // The job's commit is the only parent step from where the job started.
    assert_eq!(
        git_trimmed(&s.wiki, &["rev-parse", &format!("{sha}^")]),
        start
    );
}

#[tokio::test]
async fn a_job_whose_one_commit_holds_only_sections_says_updated() {
    let s = Setup::new();
    let done = s.runner().run(&s.full_range(1)).await.unwrap();
    receipt(&done);
    // A person makes Home their own, without teammem's topics.
    s.human_edit("Home.md", "# Welcome\n\nOur own page.\n");
    let start = s.tip();

    // The range again (a retry): every pull request is recorded, and the
    // job's one commit brings Home's topics back.
    let done = s.runner().run(&s.full_range(2)).await.unwrap();
    let receipt = receipt(&done);
    assert_eq!(receipt["status"], "updated", "{receipt}");
    let pulls = receipt["pull_requests"].as_array().unwrap();
    assert_eq!(pulls.len(), 2, "{receipt}");
    assert!(
        pulls.iter().all(|p| p["status"] == "no_change"),
        "{receipt}"
    );
    assert!(
        receipt["summary"]
            .as_str()
            .unwrap()
            .contains("already recorded"),
        "{receipt}"
    );
    let commits = commits_after(&s, &start);
    assert_eq!(commits.len(), 1, "{commits:?}");
    let (sha, message) = &commits[0];
    assert!(message.contains("Teammem-Job: 2"), "{message}");
    assert_eq!(receipt["wiki_sha"], sha.as_str(), "{receipt}");
    let changed = git_trimmed(&s.wiki, &["show", "--format=", "--name-only", sha.as_str()]);
    assert_eq!(changed, "Home.md", "{changed}");
    let home = s.page("Home.md");
    assert!(
        home.starts_with("# Welcome\n\nOur own page.\n") && home.contains("(Changelog)"),
        "{home}"
    );
}
