//! Evidence markers on a GitHub source: the fake GitHub, backed by a real git
//! history, serves compares with `git diff` patches, file histories and single
//! commits; the GitHub forge's verdict on every citation is checked against
//! the local forge's on the same repository (the oracle), and what GitHub
//! cannot answer completely (no patch past its diff limit, a compare cut at
//! 300 files, an outage) stays unchecked, never guessed. One dispatch through
//! the real daemon shows the verdicts land in the job's wiki commit.

use std::collections::BTreeMap;

use teammem::facts::Lines;
use teammem::forge::github::citations::MAX_HISTORY_CALLS;
use teammem::ids::Sha;
use teammem::staleness::{CitationState, Cited};

use super::daemon_client::{another_writer, finished, jobs_of_commits, wait_for};
use super::fixture::write;
use super::github::Hub;
use super::staleness::{commit, marker, numbered};
use crate::harness::fake_github::Fault;
use crate::harness::git::{git, git_trimmed};

fn cited(path: &str, commit: &str, start: u32, end: u32) -> Cited {
    Cited {
        path: path.into(),
        commit: Sha::parse(commit).unwrap(),
        lines: Lines::new(start, end).unwrap(),
    }
}

fn moved(path: &str, start: u32, end: u32) -> CitationState {
    CitationState::Moved {
        path: path.into(),
        lines: Lines::new(start, end).unwrap(),
    }
}

fn stale(changed_in: &str, deleted: bool) -> CitationState {
    CitationState::Stale {
        changed_in: Sha::parse(changed_in).unwrap(),
        deleted,
    }
}

/// A state without an unchecked reason's wording (the two forges word theirs
/// differently).
fn verdict(state: &CitationState) -> String {
    match state {
        CitationState::Unchecked { .. } => "unchecked".into(),
        other => format!("{other:?}"),
    }
}

async fn follow(hub: &Hub, cited: &[Cited], tip: &str) -> BTreeMap<Cited, CitationState> {
    let config = hub.config();
    let forges = teammem::forge::Forges::with_github(Some(hub.forge()));
    forges
        .of(&config.sources[0])
        .follow_citations(cited.to_vec(), &Sha::parse(tip).unwrap())
        .await
        .unwrap()
}

fn reason(states: &BTreeMap<Cited, CitationState>, citation: &Cited) -> String {
    match &states[citation] {
        CitationState::Unchecked { reason } => reason.clone(),
        other => panic!("{citation:?}: expected unchecked, got {other:?}"),
    }
}

#[tokio::test]
async fn github_citations_are_judged_as_the_local_forge_judges_them() {
    let hub = Hub::new().await;
    let dir = hub.source.dir.clone();
    git(&dir, &["checkout", "-q", "main"]);
    write(&dir, "src/moved.rs", &numbered(1, 20, "moved"));
    write(&dir, "src/edited.rs", &numbered(1, 10, "edited"));
    write(&dir, "src/below.rs", &numbered(1, 10, "below"));
    write(&dir, "src/gone.rs", &numbered(1, 5, "gone"));
    write(&dir, "src/old_name.rs", &numbered(1, 12, "renamed"));
    write(&dir, "src/twice.rs", &numbered(1, 8, "twice"));
    write(&dir, "src/kept.rs", &numbered(1, 12, "kept"));
    let base = commit(&dir, "Add the cited sources");

    let mut reshaped = String::from("// one\n// two\n// three\n");
    reshaped.push_str(&numbered(1, 20, "moved"));
    write(&dir, "src/moved.rs", &reshaped);
    let edited = numbered(1, 10, "edited").replace("edited line 4\n", "edited line four\n");
    write(&dir, "src/edited.rs", &edited);
    write(
        &dir,
        "src/below.rs",
        &numbered(1, 10, "below").replace("below line 8\n", "below line eight\n"),
    );
    let reshape = commit(&dir, "Reshape the sources (#1)");
    std::fs::remove_file(dir.join("src/gone.rs")).unwrap();
    let deletion = commit(&dir, "Remove gone.rs");
    git(&dir, &["mv", "src/old_name.rs", "src/new_name.rs"]);
    git(&dir, &["mv", "src/twice.rs", "src/twice_new.rs"]);
    commit(&dir, "Rename two files without changing them (#2)");
    git(&dir, &["mv", "src/kept.rs", "src/kept_after.rs"]);
    write(
        &dir,
        "src/kept_after.rs",
        &numbered(1, 12, "kept").replace("kept line 2\n", "kept line two\n"),
    );
    let rename_edit = commit(&dir, "Rename kept.rs and edit its line 2 (#3)");
    write(
        &dir,
        "src/edited.rs",
        &edited.replace("edited line 9\n", "edited line nine\n"),
    );
    write(
        &dir,
        "src/twice_new.rs",
        &numbered(1, 8, "twice").replace("twice line 3\n", "twice line three\n"),
    );
    let late_edit = commit(&dir, "Edit edited.rs line 9 and twice_new.rs line 3 (#4)");
    let tip = git_trimmed(&dir, &["rev-parse", "HEAD"]);
    git(&dir, &["checkout", "-q", "-b", "side"]);
    write(&dir, "src/side.rs", "side line 1\n");
    let side = commit(&dir, "A commit that never reached main");
    git(&dir, &["checkout", "-q", "main"]);

    let expected = [
        (
            cited("src/moved.rs", &base, 10, 12),
            moved("src/moved.rs", 13, 15),
        ),
        (cited("src/edited.rs", &base, 3, 4), stale(&reshape, false)),
        // The walk passes #1 (it changed line 4, above) and names #4.
        (
            cited("src/edited.rs", &base, 8, 9),
            stale(&late_edit, false),
        ),
        (cited("src/below.rs", &base, 2, 3), CitationState::Current),
        (cited("src/gone.rs", &base, 1, 2), stale(&deletion, true)),
        (
            cited("src/old_name.rs", &base, 5, 6),
            moved("src/new_name.rs", 5, 6),
        ),
        // Renamed in #2, changed in #4: the walk follows the rename.
        (cited("src/twice.rs", &base, 3, 3), stale(&late_edit, false)),
        (
            cited("src/kept.rs", &base, 5, 6),
            moved("src/kept_after.rs", 5, 6),
        ),
        (
            cited("src/kept.rs", &base, 1, 2),
            stale(&rename_edit, false),
        ),
        (
            cited("src/moved.rs", &deletion, 13, 15),
            CitationState::Current,
        ),
        (
            cited("src/edited.rs", &reshape, 8, 9),
            stale(&late_edit, false),
        ),
        (cited("src/edited.rs", &tip, 1, 2), CitationState::Current),
    ];
    let off_main = cited("src/side.rs", &side, 1, 1);
    let mut all: Vec<Cited> = expected.iter().map(|(c, _)| c.clone()).collect();
    all.push(off_main.clone());

    let before = hub.fake.requests().len();
    let github = follow(&hub, &all, &tip).await;
    let calls = hub.fake.requests()[before..].to_vec();
    for (citation, state) in &expected {
        assert_eq!(&github[citation], state, "{citation:?}");
    }
    assert!(
        reason(&github, &off_main).contains("not in the history of the default branch's tip"),
        "{github:?}"
    );
    assert_eq!(github.len(), all.len());

    let local =
        teammem::forge::local::citations::follow(&dir, &all, &Sha::parse(&tip).unwrap()).unwrap();
    for citation in &all {
        assert_eq!(
            verdict(&github[citation]),
            verdict(&local[citation]),
            "the forges disagree on {citation:?}"
        );
    }

    // One compare per distinct cited commit; the rest are the histories of
    // the changed files and their commits, each read once.
    let compares = calls.iter().filter(|c| c.contains("/compare/")).count();
    assert_eq!(compares, 5, "{calls:#?}");
    let history = calls.iter().filter(|c| c.contains("/commits")).count();
    assert!(history <= MAX_HISTORY_CALLS, "{calls:#?}");
    let single: Vec<&String> = calls.iter().filter(|c| c.contains("/commits/")).collect();
    let mut once = single.clone();
    once.sort();
    once.dedup();
    assert_eq!(
        single.len(),
        once.len(),
        "a commit was read twice: {single:#?}"
    );
}

#[tokio::test]
async fn what_github_cannot_answer_completely_stays_unchecked() {
    let hub = Hub::new().await;
    let dir = hub.source.dir.clone();
    git(&dir, &["checkout", "-q", "main"]);
    write(&dir, "a.rs", &numbered(1, 10, "a"));
    write(&dir, "p.rs", &numbered(1, 6, "p"));
    write(&dir, "z.rs", &numbered(1, 6, "z"));
    let base = commit(&dir, "Add a, p and z");
    write(
        &dir,
        "a.rs",
        &numbered(1, 10, "a").replace("a line 5\n", "a line five\n"),
    );
    git(&dir, &["mv", "p.rs", "q.rs"]);
    let tip = commit(&dir, "Edit a.rs, rename p.rs");
    let a_edited = cited("a.rs", &base, 5, 5);
    let a_above = cited("a.rs", &base, 1, 2);
    let renamed = cited("p.rs", &base, 2, 3);
    let untouched = cited("z.rs", &base, 1, 1);
    let all = [
        a_edited.clone(),
        a_above.clone(),
        renamed.clone(),
        untouched.clone(),
    ];

    // Past GitHub's diff limit a changed file comes without a patch and
    // with zero changes: neither stale nor current can be told.
    hub.fake.set_patch_line_limit(0);
    let states = follow(&hub, &all, &tip).await;
    for citation in [&a_edited, &a_above] {
        assert!(
            reason(&states, citation).contains("GitHub gave no patch of a.rs"),
            "{states:?}"
        );
    }
    // A rename without a patch is a move only when the blob is the same.
    assert_eq!(states[&renamed], moved("q.rs", 2, 3));
    assert_eq!(states[&untouched], CitationState::Current);

    // With patches, the same citations are judged.
    hub.fake.set_patch_line_limit(20_000);
    let states = follow(&hub, &all, &tip).await;
    assert_eq!(states[&a_edited], stale(&tip, false));
    assert_eq!(states[&a_above], CitationState::Current);

    // A compare lists at most 300 files: a file not among them may have
    // changed.
    for n in 0..300 {
        write(&dir, &format!("gen/f{n:03}.txt"), "generated\n");
    }
    let wide = commit(&dir, "Add 300 generated files");
    let states = follow(&hub, &all, &wide).await;
    assert!(
        reason(&states, &untouched).contains("more than 300 files changed"),
        "{states:?}"
    );
    assert_eq!(
        states[&a_edited],
        stale(&tip, false),
        "a.rs sorts before gen/"
    );

    // GitHub unavailable: the follow stops at the first refusal and nothing
    // is judged.
    hub.fake
        .inject("/compare/", Fault::Unavailable { retry_after: 60 });
    let before = hub.fake.requests().len();
    let mixed = [untouched.clone(), cited("z.rs", &tip, 1, 1)];
    let states = follow(&hub, &mixed, &tip).await;
    for citation in &mixed {
        assert!(
            reason(&states, citation).contains("GitHub did not answer"),
            "{states:?}"
        );
    }
    let compares = hub.fake.requests()[before..]
        .iter()
        .filter(|c| c.contains("/compare/"))
        .count();
    assert_eq!(compares, 1, "no compare after the outage");
}

#[tokio::test]
async fn a_github_job_marks_changed_facts_stale_in_its_one_wiki_commit() {
    let hub = Hub::new().await;
    let dir = hub.source.dir.clone();
    git(&dir, &["checkout", "-q", "main"]);
    let base = git_trimmed(&dir, &["rev-parse", "HEAD"]);
    write(&dir, "src/lib.rs", &numbered(1, 10, "lib"));
    let added = hub.merge_pr(20, "Add the library", "src/other.txt");
    let cited_at = git_trimmed(&dir, &["rev-parse", "HEAD"]);
    assert_eq!(added, cited_at);
    write(
        &dir,
        "src/lib.rs",
        &numbered(1, 10, "lib").replace("lib line 2\n", "lib line two\n"),
    );
    let changed = hub.merge_pr(21, "Rewrite line 2 of the library", "src/more.txt");

    let page = format!(
        "# Facts\n\n- The library starts with line 1. {}\n- The library ends with line 10. {}\n",
        marker("src/lib.rs", &cited_at, "L1-L2"),
        marker("src/lib.rs", &cited_at, "L9-L10"),
    );
    another_writer(&hub.wiki, "Facts.md", &page);
    let start = git_trimmed(&hub.wiki, &["rev-parse", "master"]);

    let token = hub.setup.create_token("staleness", &[]);
    let daemon = hub.serve();
    let answer = hub.dispatch_range(&daemon, 77, &base, &changed).await;
    let id = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(jobs_of_commits(&hub.wiki, &start), [Some(id)]);
    let facts = git_trimmed(&hub.wiki, &["show", "master:Facts.md"]);
    assert!(
        facts.contains(&format!(
            "The library starts with line 1. <!-- teammem:evidence src/lib.rs@{cited_at}#L1-L2 stale={changed} -->"
        )),
        "{facts}"
    );
    assert!(
        facts.contains(&format!(
            "The library ends with line 10. {}",
            marker("src/lib.rs", &cited_at, "L9-L10")
        )),
        "{facts}"
    );
    let stale_page = git_trimmed(&hub.wiki, &["show", "master:Stale.md"]);
    assert!(stale_page.contains("`src/lib.rs` L1-L2"), "{stale_page}");
    assert!(daemon.terminate().success());
}
