//! Pull requests that reach the default branch through another branch (a
//! maintenance branch merged back twice, an octopus merge of two topic
//! branches, an empty merge), on both forges and through the real daemon.
//! The history is built with the git CLI; the local forge reads it directly,
//! the fake GitHub answers from the same repository, and the builtin agent
//! records what the local forge finds.
//!
//! Invariant checked: each pull request merged in a range is in that range's
//! evidence exactly once, with the first-parent merge it arrived through; a
//! cherry-pick, a backport of an earlier fix and a second subject naming the
//! same number are never recorded; odd items (an octopus merge, an empty
//! merge, a revert, a non-UTF-8 subject) give evidence, never a failed job.

use std::path::{Path, PathBuf};

use serde_json::json;
use teammem::config::{Config, Source};
use teammem::forge::evidence::{EvidenceBundle, JobScope};
use teammem::forge::github::GitHubForge;
use teammem::forge::github::merged_pulls::MAX_MERGED_IN_CALLS;
use teammem::ids::{Scope, Sha};
use teammem::secrets::read_key_file;

use crate::dispatch::config_text;
use crate::harness::fake_github::{FakeGitHub, FakePull, GitRepo};
use crate::harness::git::{git, git_as, git_command, git_trimmed};
use crate::runner::daemon_client::{entries, finished, post_dispatch, wait_for};
use crate::runner::fixture;

/// One expected pull request: number, merge (or squash) commit, and the
/// first-parent merge it arrived through (`None`: it is first-parent itself).
type Expected = (u64, String, Option<String>);

/// The history, with what each range must record.
struct History {
    dir: PathBuf,
    base: String,
    /// The first `Merge branch 'stable'`: the end of range 1.
    m1: String,
    tip: String,
    range1: Vec<Expected>,
    range2: Vec<Expected>,
    /// Commits whose subject names a pull request that must not be recorded
    /// from them (cherry-picks, a backport, a second subject for one number).
    left_out: Vec<String>,
    /// (number, base branch, merge sha) of every pull request, for the fake.
    pulls: Vec<(u64, &'static str, String)>,
}

fn head(dir: &Path) -> String {
    git_trimmed(dir, &["rev-parse", "HEAD"])
}

/// Appends `subject` to `file` and commits it with that subject.
fn change(dir: &Path, file: &str, subject: &str) -> String {
    let path = dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    text.push_str(subject);
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", subject]);
    head(dir)
}

/// `git merge --no-ff` of `branches` with the given message paragraphs.
fn merge(dir: &Path, branches: &[&str], paragraphs: &[&str]) -> String {
    let mut args = vec!["merge", "-q", "--no-ff"];
    for p in paragraphs {
        args.extend(["-m", p]);
    }
    args.extend(branches);
    git(dir, &args);
    head(dir)
}

fn checkout(dir: &Path, branch: &str) {
    git(dir, &["checkout", "-q", branch]);
}

impl History {
    fn build(root: &Path) -> History {
        let dir = root.join("app");
        std::fs::create_dir_all(&dir).unwrap();
        git(&dir, &["init", "-q", "-b", "main"]);
        fixture::write(&dir, "README.md", "# app\n");
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-q", "-m", "Initial commit"]);
        let base = head(&dir);
        git(&dir, &["branch", "stable"]);

        // Range 1: three squash merges on main; on stable a merge-commit PR,
        // a squash PR and a cherry-pick of main's #7; stable merged back.
        let f30 = change(&dir, "app/feature.py", "Feature flag (#30)");
        let fix7 = change(&dir, "lib/crash.py", "Fix crash on start (#7)");
        let fix8 = change(&dir, "lib/null.py", "Guard against null (#8)");
        checkout(&dir, "stable");
        git(&dir, &["checkout", "-q", "-b", "fix-a"]);
        fixture::write(&dir, "lib/a.py", "def a(x):\n    return x or []\n");
        git_as(&dir, "Alice", &["add", "-A"]);
        git_as(&dir, "Alice", &["commit", "-q", "-m", "Handle empty input"]);
        checkout(&dir, "stable");
        let m21 = merge(
            &dir,
            &["fix-a"],
            &[
                "Merge pull request #21 from octo/fix-a",
                "Handle empty input in a",
            ],
        );
        let s22 = change(&dir, "lib/b.py", "Fix b rounding (#22)");
        git(&dir, &["cherry-pick", fix7.as_str()]);
        let cp7 = head(&dir);
        checkout(&dir, "main");
        let m1 = merge(&dir, &["stable"], &["Merge branch 'stable'"]);

        // Range 2: on stable a backport of #8 (merged to main in range 1), a
        // sync merge of main, a merge-commit PR and a second subject naming
        // it, a revert PR, a PR whose subject is Latin-1; a squash on main;
        // stable merged back; an octopus merge of two topic branches (one
        // squash PR, one merge-commit PR); an empty PR merged with an empty
        // merge commit.
        checkout(&dir, "stable");
        git(&dir, &["cherry-pick", fix8.as_str()]);
        let cp8 = head(&dir);
        merge(&dir, &["main"], &["Merge branch 'main' into stable"]);
        git(&dir, &["checkout", "-q", "-b", "fix-c"]);
        change(&dir, "lib/c.py", "Handle c");
        checkout(&dir, "stable");
        let m23 = merge(
            &dir,
            &["fix-c"],
            &["Merge pull request #23 from octo/fix-c", "Handle c"],
        );
        let tweak23 = change(&dir, "lib/c.py", "Tweak the docs of c (#23)");
        git(&dir, &["revert", "--no-commit", s22.as_str()]);
        git(
            &dir,
            &[
                "commit",
                "-q",
                "-m",
                "Revert \"Fix b rounding (#22)\" (#24)",
            ],
        );
        let r24 = head(&dir);
        fixture::write(&dir, "lib/menu.py", "MENU = 'café'\n");
        git(&dir, &["add", "-A"]);
        let message = dir.join("../latin1-message");
        std::fs::write(&message, b"Caf\xe9 menu (#25)\n").unwrap();
        let file = message.to_str().unwrap();
        let latin1 = ["-c", "i18n.commitEncoding=ISO-8859-1", "commit", "-q", "-F"];
        let mut args = latin1.to_vec();
        args.push(file);
        git(&dir, &args);
        let n25 = head(&dir);
        checkout(&dir, "main");
        let f32 = change(&dir, "docs/tidy.md", "Tidy the docs (#32)");
        let m2 = merge(&dir, &["stable"], &["Merge branch 'stable'"]);
        git(&dir, &["branch", "topic-a"]);
        git(&dir, &["branch", "topic-b"]);
        checkout(&dir, "topic-a");
        let ta26 = change(&dir, "lib/ta.py", "Topic a (#26)");
        checkout(&dir, "topic-b");
        git(&dir, &["checkout", "-q", "-b", "tb-work"]);
        change(&dir, "lib/tb.py", "Topic b work");
        checkout(&dir, "topic-b");
        let m27 = merge(
            &dir,
            &["tb-work"],
            &["Merge pull request #27 from octo/tb-work", "Topic b"],
        );
        checkout(&dir, "main");
        let octopus = merge(
            &dir,
            &["topic-a", "topic-b"],
            &["Merge branches 'topic-a' and 'topic-b'"],
        );
        git(&dir, &["checkout", "-q", "-b", "noop"]);
        git(
            &dir,
            &[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "Nothing to see (#29)",
            ],
        );
        let n29 = head(&dir);
        checkout(&dir, "main");
        let empty = merge(&dir, &["noop"], &["Merge branch 'noop'"]);
        let tip = head(&dir);

        let on = |n: u64, sha: &str, through: Option<&str>| -> Expected {
            (n, sha.to_owned(), through.map(str::to_owned))
        };
        History {
            range1: vec![
                on(30, &f30, None),
                on(7, &fix7, None),
                on(8, &fix8, None),
                on(21, &m21, Some(&m1)),
                on(22, &s22, Some(&m1)),
            ],
            range2: vec![
                on(32, &f32, None),
                on(23, &m23, Some(&m2)),
                on(24, &r24, Some(&m2)),
                on(25, &n25, Some(&m2)),
                on(26, &ta26, Some(&octopus)),
                on(27, &m27, Some(&octopus)),
                on(29, &n29, Some(&empty)),
            ],
            left_out: vec![cp7, cp8, tweak23],
            pulls: vec![
                (30, "main", f30),
                (7, "main", fix7),
                (8, "main", fix8),
                (21, "stable", m21),
                (22, "stable", s22),
                (32, "main", f32),
                (23, "stable", m23),
                (24, "stable", r24),
                (25, "stable", n25),
                (26, "topic-a", ta26),
                (27, "topic-b", m27),
                (29, "noop", n29),
            ],
            dir,
            base,
            m1,
            tip,
        }
    }
}

fn range(before: &str, after: &str) -> JobScope {
    JobScope {
        job_id: 1,
        scope: Scope::Range {
            before: Sha::parse(before).unwrap(),
            after: Sha::parse(after).unwrap(),
        },
    }
}

/// What a bundle recorded: (number, merge sha, arrived through), in order.
fn recorded(bundle: &EvidenceBundle) -> Vec<Expected> {
    bundle
        .pull_requests
        .iter()
        .map(|p| {
            (
                p.number.get(),
                p.merge_sha.to_string(),
                p.arrived_through.as_ref().map(|t| t.merge_sha.to_string()),
            )
        })
        .collect()
}

#[test]
fn the_local_forge_records_each_merged_in_pull_request_once_with_its_merge() {
    let root = tempfile::tempdir().unwrap();
    let h = History::build(root.path());
    let collect = |before: &str, after: &str| {
        teammem::forge::local::range_bundle::collect(
            &h.dir,
            &teammem::ids::RepoName::parse("demo/app").unwrap(),
            &range(before, after),
        )
        .unwrap()
    };

    let first = collect(&h.base, &h.m1);
    assert_eq!(recorded(&first), h.range1);
    let second = collect(&h.m1, &h.tip);
    assert_eq!(recorded(&second), h.range2);
    for bundle in [&first, &second] {
        assert!(!bundle.pull_requests_truncated);
        for sha in &h.left_out {
            // The commit is evidence of the range, never a pull request.
            assert!(bundle.pull_requests.iter().all(|p| &p.merge_sha != sha));
        }
    }
    assert!(second.commits.iter().any(|c| c.sha == h.left_out[1]));

    // A merged-in PR's files are its own, its author the branch's, and it
    // names the merge's subject.
    let p21 = first.pull(21).unwrap();
    let files: Vec<&str> = p21.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(files, ["lib/a.py"]);
    assert_eq!(p21.author, "Alice");
    assert_eq!(p21.title, "Handle empty input in a");
    let through = p21.arrived_through.as_ref().unwrap();
    assert_eq!(through.subject, "Merge branch 'stable'");
    let octopus = second.pull(27).unwrap().arrived_through.as_ref().unwrap();
    assert_eq!(octopus.subject, "Merge branches 'topic-a' and 'topic-b'");
    // The revert PR removes the file; the empty PR changed nothing; the
    // Latin-1 subject is read lossily, not refused.
    let p24 = second.pull(24).unwrap();
    assert_eq!(p24.files.len(), 1);
    assert_eq!(p24.files[0].path, "lib/b.py");
    assert!(second.pull(29).unwrap().files.is_empty());
    assert!(
        second.pull(25).unwrap().title.starts_with("Caf"),
        "{:?}",
        second.pull(25)
    );
    // First-parent PRs say nothing new on the wire.
    let raw = serde_json::to_value(first.pull(30).unwrap()).unwrap();
    assert!(raw.get("arrived_through").is_none(), "{raw}");

    // A maintainer's request for #23 names the commit a range records (its
    // merge on stable), not the later subject that names it again.
    let pull = |n| teammem::ids::PullNumber::new(n).unwrap();
    let verified = teammem::forge::local::verify_pull(&h.dir, pull(23)).unwrap();
    assert_eq!(verified.merge_sha.as_str(), h.range2[1].1);
    let verified = teammem::forge::local::verify_pull(&h.dir, pull(21)).unwrap();
    assert_eq!(verified.merge_sha.as_str(), h.range1[3].1);

    // The whole history as one range records every PR once, in order.
    let whole = collect(&h.base, &h.tip);
    let mut both = h.range1.clone();
    both.extend(h.range2.iter().cloned());
    assert_eq!(recorded(&whole), both);
}

/// The fake GitHub backed by `dir`, a GitHub forge and the `octo/app` source.
async fn github(dir: &Path, config_dir: &Path) -> (FakeGitHub, GitHubForge, Source) {
    let fake = FakeGitHub::start().await;
    fake.add_repo(
        "octo/app",
        &GitRepo {
            dir: dir.to_path_buf(),
        },
        "private",
        true,
    );
    let config = Config::parse(&config_text(&fake, config_dir, "")).unwrap();
    let gh = config.github.as_ref().unwrap();
    let key = read_key_file(match &gh.private_key {
        teammem::config::PrivateKey::File { path } => path,
        _ => unreachable!(),
    })
    .unwrap();
    let forge = GitHubForge::new(gh, &key).unwrap();
    let source = config.source("octo/app").unwrap().clone();
    (fake, forge, source)
}

fn merged(fake: &FakeGitHub, number: u64, base: &str, sha: &str) {
    fake.add_pull(
        "octo/app",
        number,
        FakePull {
            merged: true,
            base_ref: base.into(),
            merge_commit_sha: Some(sha.to_owned()),
            title: format!("Change {number}"),
        },
    );
}

#[tokio::test]
async fn the_github_forge_finds_the_same_pull_requests_through_the_api() {
    let root = tempfile::tempdir().unwrap();
    let h = History::build(root.path());
    let (fake, forge, source) = github(&h.dir, root.path()).await;
    for (number, base, sha) in &h.pulls {
        merged(&fake, *number, base, sha);
    }
    let collect = |before: &str, after: &str| {
        let (forge, source, scope) = (&forge, &source, range(before, after));
        async move { forge.collect_evidence(source, &scope, "main").await }
    };

    let (first, _) = collect(&h.base, &h.m1).await.unwrap();
    assert_eq!(recorded(&first), h.range1);
    let (second, patches) = collect(&h.m1, &h.tip).await.unwrap();
    assert_eq!(recorded(&second), h.range2);
    assert!(!first.pull_requests_truncated && !second.pull_requests_truncated);
    let p23 = second.pull(23).unwrap();
    assert_eq!(p23.files.len(), 1);
    assert_eq!(p23.files[0].path, "lib/c.py");
    assert!(
        patches.pulls[&teammem::ids::PullNumber::new(23).unwrap()][0]
            .patch
            .as_deref()
            .unwrap()
            .contains("+Handle c")
    );
    assert_eq!(
        p23.arrived_through.as_ref().unwrap().subject,
        "Merge branch 'stable'"
    );

    // A PR rebase-merged into stable leaves no number in any subject: only
    // the commit's associated pull requests find it.
    checkout(&h.dir, "stable");
    change(&h.dir, "lib/d.py", "Refactor d");
    let rebased = change(&h.dir, "lib/d.py", "Refactor d more");
    merged(&fake, 34, "stable", &rebased);
    checkout(&h.dir, "main");
    let m3 = merge(&h.dir, &["stable"], &["Merge branch 'stable'"]);
    let before = fake.requests().len();
    let (third, _) = collect(&h.tip, &m3).await.unwrap();
    assert_eq!(recorded(&third), [(34, rebased.clone(), Some(m3.clone()))]);
    let asked = &fake.requests()[before..];
    assert!(
        asked
            .iter()
            .any(|r| r.ends_with(&format!("/commits/{rebased}/pulls"))),
        "{asked:?}"
    );
}

#[tokio::test]
async fn the_github_forge_stops_asking_about_merged_in_commits_at_its_budget() {
    let root = tempfile::tempdir().unwrap();
    let git_repo = GitRepo::init(&root.path().join("app"));
    let base = git_repo.commit("README.md", "root");
    git_repo.git(&["checkout", "-q", "-b", "stable"]);
    // Direct commits on stable, no pull requests: each one is a question.
    let mut stream = String::new();
    for i in 0..MAX_MERGED_IN_CALLS + 5 {
        let msg = format!("direct {i}");
        stream.push_str(&format!(
            "commit refs/heads/stable\ncommitter Test <test@example.org> {} +0000\ndata {}\n{msg}\nM 100644 inline stable.txt\ndata {}\n{i}\n\n",
            1_767_225_600 + i,
            msg.len() + 1,
            i.to_string().len() + 1,
        ));
        if i == 0 {
            stream = stream.replacen("\nM 100644", &format!("\nfrom {base}\nM 100644"), 1);
        }
    }
    let mut child = git_command(&git_repo.dir)
        .args(["fast-import", "--quiet", "--force"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stream.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    git_repo.git(&["checkout", "-q", "-f", "main"]);
    let after = merge(&git_repo.dir, &["stable"], &["Merge branch 'stable'"]);
    let (fake, forge, source) = github(&git_repo.dir, root.path()).await;
    let (bundle, _) = forge
        .collect_evidence(&source, &range(&base, &after), "main")
        .await
        .unwrap();
    assert!(bundle.pull_requests.is_empty());
    assert!(bundle.pull_requests_truncated, "the cut is said");
    let asked = fake
        .requests()
        .iter()
        .filter(|r| r.ends_with("/pulls") && r.contains("/commits/"))
        .count();
    assert_eq!(asked, MAX_MERGED_IN_CALLS);
}

const SECRET: &str = "merged-branch e2e dispatch secret, at least 32 bytes";

#[tokio::test]
async fn the_builtin_agent_records_merged_in_pull_requests_once_on_the_changelog() {
    let root = tempfile::tempdir().unwrap();
    let h = History::build(root.path());
    let wiki = fixture::wiki(root.path());
    let setup = crate::harness::daemon::Setup::new(&format!(
        "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n",
        h.dir.display(),
        wiki.display()
    ));
    let token = setup.create_token("merged", &[]);
    let daemon = setup.serve(&[("TEAMMEM_SECRET_DEMO", SECRET)]);
    // A maintainer asks for merged-in #21 first: the range that brings it
    // later must not record it again.
    let answer = reqwest::Client::new()
        .post(daemon.url("/v1/requests"))
        .bearer_auth(&token)
        .json(&json!({"repository": "demo/app", "pull_number": 21}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 202);
    let answer: serde_json::Value = answer.json().await.unwrap();
    let id = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(entries(&wiki, "Changelog.md", &h.range1[3].1), 1);
    let mut run = 500;
    for (before, after) in [(&h.base, &h.m1), (&h.m1, &h.tip)] {
        run += 1;
        let (status, answer) = post_dispatch(
            &daemon,
            SECRET,
            &json!({
                "source_repository": "demo/app", "kind": "range",
                "source_run_id": run, "source_run_attempt": 1,
                "push_before": before, "push_after": after,
            }),
        )
        .await;
        assert_eq!(status, 202, "{answer}");
        let id = answer["job_id"].as_i64().unwrap();
        let (job, _) = wait_for(&daemon, &token, id, finished).await;
        assert_eq!(job["state"], "succeeded", "{job}");
    }
    let changelog = git_trimmed(&wiki, &["show", "master:Changelog.md"]);
    for (number, sha, _) in h.range1.iter().chain(&h.range2) {
        assert_eq!(
            entries(&wiki, "Changelog.md", sha),
            1,
            "#{number} {sha}:\n{changelog}"
        );
    }
    for sha in &h.left_out {
        assert_eq!(
            entries(&wiki, "Changelog.md", sha),
            0,
            "{sha}:\n{changelog}"
        );
    }
    // On the page of the files it changed.
    assert_eq!(entries(&wiki, "Area-lib.md", &h.range1[3].1), 1);
    assert!(daemon.terminate().success());
}
