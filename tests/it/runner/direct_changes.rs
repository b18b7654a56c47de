//! A range that merges no pull request still moves what the wiki says about
//! the tip, through the real daemon on the local forge: direct pushes that
//! delete a file, change a dependency and a CI command get the range's job
//! `succeeded` (not skipped) with one wiki commit in which "What is here"
//! drops the file, Dependencies and How to work here cite the range's tip,
//! and the source's lag is 0; a range that changed no file is `skipped` and
//! writes nothing. The `git` CLI is the oracle for the wiki's history.

use serde_json::Value;

use super::daemon_client::range_job_succeeds;
use super::fixture::{self, Source, write};
use crate::harness::daemon::Setup;
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
    let repos = tempfile::tempdir().unwrap();
    let s = Source::create(repos.path());
    let wiki = fixture::wiki(repos.path());
    let setup = Setup::new(&format!(
        "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n",
        s.dir.display(),
        wiki.display()
    ));
    let token = setup.create_token("direct", &[]);
    let daemon = setup.serve(&[("TEAMMEM_SECRET_DEMO", SECRET)]);
    let show = |page: &str| git_trimmed(&wiki, &["show", &format!("master:{page}")]);

    // PR #20 adds two modules, a manifest and the CI workflow.
    write(&s.dir, "lib/keep.py", "\"\"\"Keeps things.\"\"\"\n");
    write(&s.dir, "lib/drop.py", "\"\"\"Drops things.\"\"\"\n");
    write(
        &s.dir,
        "pyproject.toml",
        "[project]\nname = \"app\"\ndependencies = [\"requests>=2\"]\n",
    );
    write(&s.dir, ".github/workflows/ci.yml", WORKFLOW);
    let pr = commit(&s.dir, "Add the library (#20)");
    range_job_succeeds(&daemon, &token, SECRET, 1, &s.head, &pr).await;
    let area = show("Area-lib.md");
    assert!(area.contains("- lib/drop.py"), "{area}");
    let before = wiki_commits(&wiki);

    // Direct pushes, no pull request: a file deleted, a dependency and the
    // test command changed.
    std::fs::remove_file(s.dir.join("lib/drop.py")).unwrap();
    commit(&s.dir, "Remove drop.py");
    write(
        &s.dir,
        "pyproject.toml",
        "[project]\nname = \"app\"\ndependencies = [\"requests>=2\", \"httpx>=0.27\"]\n",
    );
    write(
        &s.dir,
        ".github/workflows/ci.yml",
        &WORKFLOW.replace("pytest -q tests/", "pytest -q -x tests/"),
    );
    let direct = commit(&s.dir, "Use httpx and stop at the first failure");
    let job: Value = range_job_succeeds(&daemon, &token, SECRET, 2, &pr, &direct).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(wiki_commits(&wiki), before + 1, "one commit for the job");
    let area = show("Area-lib.md");
    assert!(!area.contains("- lib/drop.py"), "{area}");
    assert!(area.contains("lib/keep.py"), "{area}");
    let deps = show("Dependencies.md");
    assert!(deps.contains("httpx"), "{deps}");
    assert!(deps.contains(&format!("pyproject.toml@{direct}")), "{deps}");
    let how = show("How-to-work-here.md");
    assert!(how.contains("`pytest -q -x tests/`"), "{how}");
    assert!(how.contains(&format!("ci.yml@{direct}")), "{how}");
    assert!(!how.contains("`pytest -q tests/`"), "{how}");
    assert!(!how.contains("stale="), "{how}");
    // No pull request was recorded twice or invented.
    let changelog = show("Changelog.md");
    assert_eq!(changelog.matches("#20").count(), 1, "{changelog}");
    assert_eq!(
        crate::backfill::source_lag(&daemon).await,
        0,
        "teammem_source_lag"
    );

    // A range that changed no file: skipped, nothing written.
    let empty = commit(&s.dir, "An empty commit");
    let (status, answer) = super::daemon_client::post_dispatch(
        &daemon,
        SECRET,
        &serde_json::json!({
            "source_repository": "demo/app", "kind": "range",
            "source_run_id": 3, "source_run_attempt": 1,
            "push_before": direct, "push_after": empty,
        }),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["job_id"].as_i64().unwrap();
    let (job, events) =
        super::daemon_client::wait_for(&daemon, &token, id, super::daemon_client::finished).await;
    assert_eq!(job["state"], "skipped", "{job} {events}");
    assert_eq!(
        wiki_commits(&wiki),
        before + 1,
        "a skipped job writes nothing"
    );
    assert!(daemon.terminate().success());
}

#[tokio::test]
async fn an_older_range_run_after_a_newer_one_leaves_the_tip_pages_as_they_are() {
    let repos = tempfile::tempdir().unwrap();
    let s = Source::create(repos.path());
    let wiki = fixture::wiki(repos.path());
    let setup = Setup::new(&format!(
        "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n",
        s.dir.display(),
        wiki.display()
    ));
    let token = setup.create_token("older", &[]);
    let daemon = setup.serve(&[("TEAMMEM_SECRET_DEMO", SECRET)]);
    let show = |page: &str| git_trimmed(&wiki, &["show", &format!("master:{page}")]);
    let manifest = |deps: &str| format!("[project]\nname = \"app\"\ndependencies = [{deps}]\n");

    write(&s.dir, "pyproject.toml", &manifest("\"requests>=2\""));
    let pr = commit(&s.dir, "Add the manifest (#20)");
    range_job_succeeds(&daemon, &token, SECRET, 1, &s.head, &pr).await;
    write(&s.dir, "pyproject.toml", &manifest("\"olddep>=1\""));
    let older = commit(&s.dir, "Try olddep");
    write(&s.dir, "pyproject.toml", &manifest("\"newdep>=1\""));
    let newer = commit(&s.dir, "Use newdep instead");

    // The newer push's range runs first, then the older one's.
    range_job_succeeds(&daemon, &token, SECRET, 2, &older, &newer).await;
    let deps = show("Dependencies.md");
    assert!(deps.contains("newdep"), "{deps}");
    let (status, answer) = super::daemon_client::post_dispatch(
        &daemon,
        SECRET,
        &serde_json::json!({
            "source_repository": "demo/app", "kind": "range",
            "source_run_id": 3, "source_run_attempt": 1,
            "push_before": pr, "push_after": older,
        }),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["job_id"].as_i64().unwrap();
    let (job, events) =
        super::daemon_client::wait_for(&daemon, &token, id, super::daemon_client::finished).await;
    assert!(
        matches!(job["state"].as_str(), Some("succeeded" | "no_change")),
        "{job} {events}"
    );
    assert_eq!(
        show("Dependencies.md"),
        deps,
        "the older tip does not describe the source"
    );
    assert_eq!(
        crate::backfill::source_lag(&daemon).await,
        0,
        "teammem_source_lag"
    );
    assert!(daemon.terminate().success());
}

#[tokio::test]
async fn a_job_whose_agent_writes_nothing_still_publishes_its_marker_rewrites() {
    let repos = tempfile::tempdir().unwrap();
    let s = Source::create(repos.path());
    let wiki = fixture::wiki(repos.path());
    write(&s.dir, "tools/gen.py", "print('one')\nprint('two')\n");
    let cited = commit(&s.dir, "Add a generator");
    // A person's page cites the generator's second line.
    let fact =
        format!("- The generator prints two. <!-- teammem:evidence tools/gen.py@{cited}#L2 -->");
    super::daemon_client::another_writer(&wiki, "Notes.md", &format!("# Notes\n\n{fact}\n"));
    let setup = Setup::new(&format!(
        "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_DEMO\"\n",
        s.dir.display(),
        wiki.display()
    ));
    let token = setup.create_token("rewrites", &[]);
    let daemon = setup.serve(&[("TEAMMEM_SECRET_DEMO", SECRET)]);
    let show = |page: &str| git_trimmed(&wiki, &["show", &format!("master:{page}")]);
    // A first job writes the pages teammem keeps.
    write(&s.dir, "lib/keep.py", "\"\"\"Keeps things.\"\"\"\n");
    let pr = commit(&s.dir, "Add the library (#20)");
    range_job_succeeds(&daemon, &token, SECRET, 1, &cited, &pr).await;
    let before = wiki_commits(&wiki);

    // A direct push rewrites the cited line; no page the builtin keeps
    // describes `tools/` (no area page, no manifest, no CI file).
    write(&s.dir, "tools/gen.py", "print('one')\nprint('deux')\n");
    let changed = commit(&s.dir, "Say it in French");
    let job = range_job_succeeds(&daemon, &token, SECRET, 2, &pr, &changed).await;
    assert_eq!(wiki_commits(&wiki), before + 1, "one commit: {job}");
    let notes = show("Notes.md");
    assert!(
        notes.contains(&format!(
            "<!-- teammem:evidence tools/gen.py@{cited}#L2 stale={changed} -->"
        )),
        "{notes}"
    );
    assert!(show("Stale.md").contains("tools/gen.py"));
    let tip = git_trimmed(&wiki, &["rev-parse", "master"]);
    assert_eq!(
        job["receipt"]["marker_rewrites_commit"],
        tip.as_str(),
        "{job}"
    );
    assert!(daemon.terminate().success());
}
