//! `How-to-work-here.md` through the real daemon on the local forge: a pull
//! request that adds a CI workflow and a Makefile gets the page written at
//! the job's tip, each command citing the lines that hold it (the git CLI is
//! the oracle for the lines), linked from Home with its "For coding agents"
//! list; a later direct push that rewrites the cited `run:` line (in a range
//! whose only pull request touches another file) has the page read again at
//! the range's tip, current, with nothing marked stale; a pull request that
//! touches nothing it cites leaves it as it is; the next pull request that
//! touches the workflow rewrites the page at its tip.

use super::fixture::write;
use super::one_source::OneSource;
use crate::harness::git::{git, git_trimmed};

const SECRET: &str = "how-to-work dispatch secret, at least 32 bytes long";

const WORKFLOW: &str = "name: CI\non: [push, pull_request]\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - name: Install\n        run: |\n          python -m pip install --upgrade pip\n          pip install -e .\n      - name: Run the tests\n        run: pytest -q tests/\n";

fn commit(dir: &std::path::Path, message: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git_trimmed(dir, &["rev-parse", "HEAD"])
}

/// The 1-based line of `path` at `commit` that contains `needle`.
fn line_of(dir: &std::path::Path, commit: &str, path: &str, needle: &str) -> usize {
    let text = git_trimmed(dir, &["show", &format!("{commit}:{path}")]);
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[tokio::test]
async fn the_page_cites_the_ci_goes_stale_on_a_direct_push_and_is_rewritten_by_the_next_pr() {
    let one = OneSource::fixture(SECRET).token("how-to").start();
    let (s, wiki) = (&one.source, &one.wiki);
    let show = |page: &str| git_trimmed(wiki, &["show", &format!("master:{page}")]);

    // PR #30 adds the workflow and a Makefile target.
    write(&s.dir, ".github/workflows/ci.yml", WORKFLOW);
    write(&s.dir, "Makefile", "all:\n\ntest:\n\tpytest -q\n");
    let added = commit(&s.dir, "Add CI (#30)");
    one.succeeds(1, &s.head, &added).await;
    let page = show("How-to-work-here.md");
    let ci = ".github/workflows/ci.yml";
    let test_line = line_of(&s.dir, &added, ci, "run: pytest");
    let tests_fact = format!(
        "- `pytest -q tests/` — CI: workflow ci.yml, job test, step “Run the tests” <!-- teammem:evidence {ci}@{added}#L{test_line} -->"
    );
    assert!(page.contains(&tests_fact), "{page}");
    let install = line_of(&s.dir, &added, ci, "name: Install") + 1;
    assert!(
        page.contains(&format!(
            "— runs `python -m pip install --upgrade pip`, then `pip install -e .` <!-- teammem:evidence {ci}@{added}#L{install}-L{}",
            install + 2
        )),
        "{page}"
    );
    assert!(
        page.contains(&format!(
            "- `make test` — Makefile target — runs `pytest -q` <!-- teammem:evidence Makefile@{added}#L3-L4 -->"
        )),
        "{page}"
    );
    let home = show("Home.md");
    assert!(
        home.contains("- [How to work here](How-to-work-here) <!-- teammem:how-to-work-link -->"),
        "{home}"
    );
    assert!(
        home.contains("## For coding agents\n\n<!-- teammem:coding-agents -->\n"),
        "{home}"
    );

    // A direct push rewrites the cited line; PR #31 changes something else.
    write(
        &s.dir,
        ci,
        &WORKFLOW.replace("run: pytest -q tests/", "run: pytest -q -x tests/"),
    );
    commit(&s.dir, "Stop at the first failure");
    let other = s.squash_pr(31, "Tune search", "src/search.rs");
    one.succeeds(2, &added, &other).await;
    let page = show("How-to-work-here.md");
    let line = line_of(&s.dir, &other, ci, "run: pytest");
    assert!(
        page.contains(&format!(
            "- `pytest -q -x tests/` — CI: workflow ci.yml, job test, step “Run the tests” <!-- teammem:evidence {ci}@{other}#L{line} -->"
        )),
        "{page}"
    );
    assert!(!page.contains("`pytest -q tests/`"), "{page}");
    assert!(!page.contains("stale="), "{page}");

    // PR #33 touches nothing the page cites: the page stays as it is.
    let tuned = s.squash_pr(33, "Tune search again", "src/search.rs");
    one.succeeds(4, &other, &tuned).await;
    assert_eq!(
        show("How-to-work-here.md"),
        page,
        "nothing it cites changed"
    );

    // PR #32 touches the workflow: the page is read again at its tip.
    write(
        &s.dir,
        ci,
        &WORKFLOW.replace("run: pytest -q tests/", "run: pytest -q -n auto tests/"),
    );
    let fixed = commit(&s.dir, "Run the tests in parallel (#32)");
    one.succeeds(3, &tuned, &fixed).await;
    let page = show("How-to-work-here.md");
    let line = line_of(&s.dir, &fixed, ci, "run: pytest");
    assert!(
        page.contains(&format!(
            "- `pytest -q -n auto tests/` — CI: workflow ci.yml, job test, step “Run the tests” <!-- teammem:evidence {ci}@{fixed}#L{line} -->"
        )),
        "{page}"
    );
    assert!(!page.contains("stale="), "{page}");
    assert!(one.daemon.terminate().success());
}
