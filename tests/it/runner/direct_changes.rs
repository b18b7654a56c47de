//! A range that merges no pull request still moves what the wiki says about
//! the tip, through the real daemon on the local forge: direct pushes that
//! delete a file, change a dependency and a CI command get the range's job
//! `succeeded` (not skipped) with one wiki commit in which "What is here"
//! drops the file, Dependencies and How to work here cite the range's tip,
//! and the source's lag is 0; a range that changed no file is `skipped` and
//! writes nothing. An older range run after a newer one leaves those pages
//! as the newer tip left them; and a job whose agent writes nothing still
//! publishes the runner's marker rewrites (a fact gone stale on a person's
//! page) as its one commit. The `git` CLI is the oracle for the wiki.

use super::fixture::write;
use super::one_source::OneSource;
use crate::harness::git::{git, git_trimmed};

const SECRET: &str = "direct-changes dispatch secret, at least 32 bytes long";

const WORKFLOW: &str = "name: CI\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - name: Run the tests\n        run: pytest -q tests/\n";

fn commit(dir: &std::path::Path, message: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", message]);
    git_trimmed(dir, &["rev-parse", "HEAD"])
}

fn wiki_commits(wiki: &std::path::Path) -> usize {
    git_trimmed(wiki, &["rev-list", "--count", "master"])
        .parse()
        .unwrap()
}

#[tokio::test]
async fn direct_pushes_refresh_the_pages_of_the_tip_and_an_empty_range_is_skipped() {
    let r = OneSource::fixture(SECRET).token("direct").start();
    let dir = &r.source.dir;

    // PR #20 adds two modules, a manifest and the CI workflow.
    write(dir, "lib/keep.py", "\"\"\"Keeps things.\"\"\"\n");
    write(dir, "lib/drop.py", "\"\"\"Drops things.\"\"\"\n");
    write(
        dir,
        "pyproject.toml",
        "[project]\nname = \"app\"\ndependencies = [\"requests>=2\"]\n",
    );
    write(dir, ".github/workflows/ci.yml", WORKFLOW);
    let pr = commit(dir, "Add the library (#20)");
    r.succeeds(1, &r.source.head, &pr).await;
    assert!(r.show("Area-lib.md").contains("- lib/drop.py"));
    let before = wiki_commits(&r.wiki);

    // Direct pushes, no pull request: a file deleted, a dependency and the
    // test command changed.
    std::fs::remove_file(dir.join("lib/drop.py")).unwrap();
    commit(dir, "Remove drop.py");
    write(
        dir,
        "pyproject.toml",
        "[project]\nname = \"app\"\ndependencies = [\"requests>=2\", \"httpx>=0.27\"]\n",
    );
    write(
        dir,
        ".github/workflows/ci.yml",
        &WORKFLOW.replace("pytest -q tests/", "pytest -q -x tests/"),
    );
    let direct = commit(dir, "Use httpx and stop at the first failure");
    r.succeeds(2, &pr, &direct).await;
    assert_eq!(wiki_commits(&r.wiki), before + 1, "one commit for the job");
    let area = r.show("Area-lib.md");
    assert!(!area.contains("- lib/drop.py"), "{area}");
    assert!(area.contains("- lib/keep.py"), "{area}");
    let deps = r.show("Dependencies.md");
    assert!(deps.contains("httpx"), "{deps}");
    assert!(deps.contains(&format!("pyproject.toml@{direct}")), "{deps}");
    let how = r.show("How-to-work-here.md");
    assert!(how.contains("`pytest -q -x tests/`"), "{how}");
    assert!(how.contains(&format!("ci.yml@{direct}")), "{how}");
    assert!(!how.contains("`pytest -q tests/`"), "{how}");
    assert!(!how.contains("stale="), "{how}");
    // No pull request was recorded twice or invented.
    let changelog = r.show("Changelog.md");
    assert_eq!(changelog.matches("#20").count(), 1, "{changelog}");
    assert_eq!(
        crate::backfill::source_lag(&r.daemon).await,
        0,
        "teammem_source_lag"
    );

    // A range that changed no file: skipped, nothing written.
    let empty = commit(dir, "An empty commit");
    let (job, events) = r.range(3, &direct, &empty).await;
    assert_eq!(job["state"], "skipped", "{job} {events}");
    assert_eq!(
        wiki_commits(&r.wiki),
        before + 1,
        "a skipped job writes nothing"
    );
    assert!(r.daemon.terminate().success());
}

#[tokio::test]
async fn an_older_range_run_after_a_newer_one_leaves_the_tip_pages_as_they_are() {
    let r = OneSource::fixture(SECRET).token("direct").start();
    let dir = &r.source.dir;
    let manifest = |deps: &str| format!("[project]\nname = \"app\"\ndependencies = [{deps}]\n");
    write(dir, "pyproject.toml", &manifest("\"requests>=2\""));
    let pr = commit(dir, "Add the manifest (#20)");
    r.succeeds(1, &r.source.head, &pr).await;
    write(dir, "pyproject.toml", &manifest("\"olddep>=1\""));
    let older = commit(dir, "Try olddep");
    write(dir, "pyproject.toml", &manifest("\"newdep>=1\""));
    let newer = commit(dir, "Use newdep instead");

    // The newer push's range runs first, then the older one's.
    r.succeeds(2, &older, &newer).await;
    let deps = r.show("Dependencies.md");
    assert!(deps.contains("newdep"), "{deps}");
    let (job, events) = r.range(3, &pr, &older).await;
    assert!(
        matches!(job["state"].as_str(), Some("succeeded" | "no_change")),
        "{job} {events}"
    );
    assert_eq!(
        r.show("Dependencies.md"),
        deps,
        "the older tip does not describe the source"
    );
    assert_eq!(
        crate::backfill::source_lag(&r.daemon).await,
        0,
        "teammem_source_lag"
    );
    assert!(r.daemon.terminate().success());
}

#[tokio::test]
async fn a_job_whose_agent_writes_nothing_still_publishes_its_marker_rewrites() {
    let mut cited = String::new();
    let r = OneSource::fixture(SECRET)
        .token("direct")
        .seed(|s, wiki| {
            write(&s.dir, "tools/gen.py", "print('one')\nprint('two')\n");
            cited = commit(&s.dir, "Add a generator");
            // A person's page cites the generator's second line.
            let fact = format!(
                "- The generator prints two. <!-- teammem:evidence tools/gen.py@{cited}#L2 -->"
            );
            super::daemon_client::another_writer(wiki, "Notes.md", &format!("# Notes\n\n{fact}\n"));
        })
        .start();
    let dir = &r.source.dir;
    // A first job writes the pages teammem keeps.
    write(dir, "lib/keep.py", "\"\"\"Keeps things.\"\"\"\n");
    let pr = commit(dir, "Add the library (#20)");
    r.succeeds(1, &cited, &pr).await;
    let before = wiki_commits(&r.wiki);

    // A direct push rewrites the cited line; no page the builtin keeps
    // describes `tools/` (no area page, no manifest, no CI file).
    write(dir, "tools/gen.py", "print('one')\nprint('deux')\n");
    let changed = commit(dir, "Say it in French");
    let job = r.succeeds(2, &pr, &changed).await;
    assert_eq!(wiki_commits(&r.wiki), before + 1, "one commit: {job}");
    let notes = r.show("Notes.md");
    assert!(
        notes.contains(&format!(
            "<!-- teammem:evidence tools/gen.py@{cited}#L2 stale={changed} -->"
        )),
        "{notes}"
    );
    assert!(r.show("Stale.md").contains("tools/gen.py"));
    let tip = git_trimmed(&r.wiki, &["rev-parse", "master"]);
    assert_eq!(
        job["receipt"]["marker_rewrites_commit"],
        tip.as_str(),
        "{job}"
    );
    assert!(r.daemon.terminate().success());
}
