//! Grounded facts on real git histories, through the real daemon: a wiki page
//! cites source lines with evidence markers, the source moves on, and the
//! job's one wiki commit re-anchors the facts whose lines only moved, marks
//! stale those whose lines changed or whose file went away (naming the
//! commit), follows a rename, leaves the rest and a malformed marker alone,
//! and lists what is stale on `Stale.md`. The git CLI builds and reads
//! everything.

use std::path::Path;

use serde_json::json;

use super::daemon_client::{finished, jobs_of_commits, post_dispatch, wait_for, wiki_tip};
use super::fixture::write;
use super::one_source::OneSource;
use crate::harness::git::{git, git_trimmed};

const SECRET: &str = "staleness dispatch secret, at least 32 bytes long";

pub(super) fn numbered(from: u32, to: u32, tag: &str) -> String {
    (from..=to).map(|n| format!("{tag} line {n}\n")).collect()
}

pub(super) fn commit(dir: &Path, message: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git_trimmed(dir, &["rev-parse", "HEAD"])
}

pub(super) fn marker(path: &str, sha: &str, lines: &str) -> String {
    format!("<!-- teammem:evidence {path}@{sha}#{lines} -->")
}

#[tokio::test]
async fn a_job_re_anchors_moved_facts_and_marks_changed_ones_stale_in_its_one_commit() {
    let repos = tempfile::tempdir().unwrap();
    let dir = repos.path().join("app");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    write(&dir, "src/moved.rs", &numbered(1, 20, "moved"));
    write(&dir, "src/edited.rs", &numbered(1, 10, "edited"));
    write(&dir, "src/below.rs", &numbered(1, 10, "below"));
    write(&dir, "src/gone.rs", &numbered(1, 5, "gone"));
    write(&dir, "src/old_name.rs", &numbered(1, 12, "renamed"));
    let base = commit(&dir, "Initial commit");

    // PR #1: three lines inserted above moved.rs's cited lines; the cited
    // line 4 of edited.rs rewritten; below.rs edited under its cited lines.
    let mut moved = String::from("// one\n// two\n// three\n");
    moved.push_str(&numbered(1, 20, "moved"));
    write(&dir, "src/moved.rs", &moved);
    write(
        &dir,
        "src/edited.rs",
        &numbered(1, 10, "edited").replace("edited line 4\n", "edited line four, rewritten\n"),
    );
    write(
        &dir,
        "src/below.rs",
        &numbered(1, 10, "below").replace("below line 8\n", "below line eight\n"),
    );
    let pr_1 = commit(&dir, "Reshape the sources (#1)");
    // A commit without a PR deletes gone.rs.
    std::fs::remove_file(dir.join("src/gone.rs")).unwrap();
    let deletion = commit(&dir, "Remove gone.rs");
    // PR #2 renames old_name.rs.
    git(&dir, &["mv", "src/old_name.rs", "src/new_name.rs"]);
    let head = commit(&dir, "Rename old_name.rs (#2)");

    let page = format!(
        "# Facts\n\n\
         - Moved keeps its lines. {}\n\
         - Edited says <i>line 4</i> | x. {}\n\
         - Below is untouched above line 8. {}\n\
         - Gone exists. {}\n\
         - Renamed keeps its name. {}\n\
         - Broken <!-- teammem:evidence src/moved.rs@nothex#L1 -->\n",
        marker("src/moved.rs", &base, "L10-L12"),
        marker("src/edited.rs", &base, "L3-L4"),
        marker("src/below.rs", &base, "L2-L3"),
        marker("src/gone.rs", &base, "L1-L2"),
        marker("src/old_name.rs", &base, "L5-L6"),
    );
    let mut start = String::new();
    let one = OneSource::of(repos, &dir, SECRET)
        .token("staleness")
        .seed(|_, wiki| {
            super::daemon_client::another_writer(wiki, "Facts.md", &page);
            start = wiki_tip(wiki);
        })
        .start();
    let (wiki, daemon, token) = (&one.wiki, &one.daemon, &one.token);
    let dispatch = |run: u64| {
        json!({
            "source_repository": "demo/app", "kind": "range",
            "source_run_id": run, "source_run_attempt": 1,
            "push_before": base, "push_after": head,
        })
    };
    let (status, answer) = post_dispatch(daemon, SECRET, &dispatch(1)).await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(daemon, token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");

    assert_eq!(
        jobs_of_commits(wiki, &start),
        [Some(id)],
        "the job is exactly one wiki commit, fact updates included"
    );
    let facts = git_trimmed(wiki, &["show", "master:Facts.md"]);
    let expect = |needle: &str| assert!(facts.contains(needle), "{needle} missing:\n{facts}");
    expect(&format!(
        "Moved keeps its lines. {}",
        marker("src/moved.rs", &head, "L13-L15")
    ));
    expect(&format!(
        "Edited says <i>line 4</i> | x. <!-- teammem:evidence src/edited.rs@{base}#L3-L4 stale={pr_1} -->"
    ));
    expect(&format!(
        "Below is untouched above line 8. {}",
        marker("src/below.rs", &base, "L2-L3")
    ));
    expect(&format!(
        "Gone exists. <!-- teammem:evidence src/gone.rs@{base}#L1-L2 stale={deletion} deleted -->"
    ));
    expect(&format!(
        "Renamed keeps its name. {}",
        marker("src/new_name.rs", &head, "L5-L6")
    ));
    expect("Broken <!-- teammem:evidence src/moved.rs@nothex#L1 -->");

    let stale = git_trimmed(wiki, &["show", "master:Stale.md"]);
    assert!(
        stale.contains(&format!(
            "| Edited says &lt;i&gt;line 4&lt;/i&gt; \\| x. | `src/edited.rs` L3-L4 | {} |",
            &pr_1[..7]
        )),
        "{stale}"
    );
    assert!(
        stale.contains(&format!(
            "| Gone exists. | `src/gone.rs` L1-L2 | {} (deleted) |",
            &deletion[..7]
        )),
        "{stale}"
    );
    assert!(
        !stale.contains("Moved keeps"),
        "a moved fact is not stale:\n{stale}"
    );
    assert!(
        !stale.contains("Below is"),
        "an edit below is not stale:\n{stale}"
    );
    assert!(stale.contains("Unreadable evidence markers"), "{stale}");
    assert_eq!(
        stale.matches("| [Facts](Facts) | ").count(),
        3,
        "two stale facts and the malformed marker, each once:\n{stale}"
    );
    assert!(stale.contains("| [Facts](Facts) | 8 | "), "{stale}");

    // The job's stale facts are kept with it for the job page.
    let stale_facts = job["receipt"]["stale_facts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut paths: Vec<&str> = stale_facts
        .iter()
        .filter_map(|f| f["path"].as_str())
        .collect();
    paths.sort();
    assert_eq!(paths, ["src/edited.rs", "src/gone.rs"], "{job}");

    // The job page shows them, escaped.
    let page = reqwest::get(daemon.url(&format!("/jobs/{id}")))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("<h3>Stale facts (2)</h3>"), "{page}");
    assert!(
        page.contains("Edited says &lt;i&gt;line 4&lt;/i&gt; | x."),
        "{page}"
    );
    assert!(!page.contains("<i>line 4"), "{page}");
    assert!(page.contains("(file deleted)"), "{page}");
    assert!(page.contains(&pr_1[..7]), "{page}");

    // The same range again: the facts already hold what the job found, so
    // nothing is written.
    let tip = wiki_tip(wiki);
    let (status, answer) = post_dispatch(daemon, SECRET, &dispatch(2)).await;
    assert_eq!(status, 202, "{answer}");
    let again = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(daemon, token, again, finished).await;
    assert_eq!(job["state"], "no_change", "{job}");
    assert_eq!(wiki_tip(wiki), tip);

    // A person adds a fact citing a line PR #1 changed, cited nowhere
    // before: the page is a new blob, and the daemon, which remembers each
    // page version's evidence between jobs, must judge this version, not
    // the last one.
    // (Every PR of the range is recorded: the job's one commit holds the
    // runner's marker rewrites alone, and its receipt names what it found.)
    let edited = format!(
        "{}- Edited still says line 4. {}\n",
        git(wiki, &["show", "master:Facts.md"]),
        marker("src/edited.rs", &base, "L4")
    );
    super::daemon_client::another_writer(wiki, "Facts.md", &edited);
    let (status, answer) = post_dispatch(daemon, SECRET, &dispatch(3)).await;
    assert_eq!(status, 202, "{answer}");
    let third = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(daemon, token, third, finished).await;
    let found: Vec<(&str, &str)> = job["receipt"]["stale_facts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| Some((f["fact"].as_str()?, f["changed_in"].as_str()?)))
        .collect();
    assert!(
        found.contains(&("Edited still says line 4.", pr_1.as_str())),
        "{job}"
    );
    assert_eq!(job["state"], "succeeded", "{job}");
    let facts = git(wiki, &["show", "master:Facts.md"]);
    assert!(
        facts.contains(&format!(
            "- Edited still says line 4. <!-- teammem:evidence src/edited.rs@{base}#L4 stale={pr_1} -->"
        )),
        "{facts}"
    );
    git(wiki, &["fsck", "--strict", "--no-progress"]);
    assert!(one.daemon.terminate().success());
}

/// Lines cited from many large pages move: the runner's marker rewrites reach
/// every one of them (here 330 KB of pages, more than one write call may
/// carry), and the job still succeeds as one commit with every fact
/// re-anchored. Before, the job failed on the call's size, and so did every
/// later job that had to rewrite the same markers.
#[tokio::test]
async fn rewrites_on_more_pages_than_one_call_may_carry_land_in_one_commit() {
    let repos = tempfile::tempdir().unwrap();
    let dir = repos.path().join("app");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    write(&dir, "src/moved.rs", &numbered(1, 20, "moved"));
    let base = commit(&dir, "Initial commit");
    let mut moved = String::from("// one\n// two\n// three\n");
    moved.push_str(&numbered(1, 20, "moved"));
    write(&dir, "src/moved.rs", &moved);
    let head = commit(&dir, "Three lines on top (#1)");

    let filler: String = (0..1_000)
        .map(|n| format!("- Note {n}: nothing cited here, just words.\n"))
        .collect();
    assert!(filler.len() > 40_000 && filler.len() < 60_000);
    let mut start = String::new();
    let one = OneSource::of(repos, &dir, SECRET)
        .token("staleness")
        .seed(|_, wiki| {
            for n in 0..6 {
                let page = format!(
                    "# Notes {n}\n\n- Moved keeps its lines. {}\n\n{filler}",
                    marker("src/moved.rs", &base, "L10-L12")
                );
                super::daemon_client::another_writer(wiki, &format!("Notes-{n}.md"), &page);
            }
            start = wiki_tip(wiki);
        })
        .start();
    let (wiki, daemon, token) = (&one.wiki, &one.daemon, &one.token);
    let (status, answer) = post_dispatch(
        daemon,
        SECRET,
        &json!({
            "source_repository": "demo/app", "kind": "range",
            "source_run_id": 1, "source_run_attempt": 1,
            "push_before": base, "push_after": head,
        }),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    let id = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(daemon, token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_eq!(jobs_of_commits(wiki, &start), [Some(id)]);
    for n in 0..6 {
        let page = git_trimmed(wiki, &["show", &format!("master:Notes-{n}.md")]);
        assert!(
            page.contains(&format!(
                "Moved keeps its lines. {}",
                marker("src/moved.rs", &head, "L13-L15")
            )),
            "Notes-{n}.md was not re-anchored"
        );
    }
    git(wiki, &["fsck", "--strict", "--no-progress"]);
    assert!(one.daemon.terminate().success());
}
