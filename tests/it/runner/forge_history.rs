//! The first-parent history a backfill plans from (`forge/history.rs`), on
//! both forges over the same real repository (GitHub through the fake's
//! commit listing, paged), checked against `git rev-list --first-parent`:
//! the newest N, everything after a commit, nothing since a future date, a
//! start off the first-parent chain refused, and what a merge brought in
//! (local forge); `--last N` counts merges (two parents, or a subject naming
//! a pull request), not direct commits, the same on both forges.

use teammem::forge::history::{FirstParent, HistoryStart};
use teammem::forge::{Forges, Refusal};
use teammem::ids::Sha;

use super::github::Hub;
use crate::harness::git::git_trimmed;

fn sha(text: &str) -> Sha {
    Sha::parse(text).unwrap()
}

fn shas(history: &[FirstParent]) -> Vec<String> {
    history.iter().map(|c| c.sha.to_string()).collect()
}

#[tokio::test]
async fn both_forges_list_the_first_parent_history_the_git_cli_lists() {
    let hub = Hub::new().await;
    // Enough merges for GitHub's listing to take two pages of 100.
    let mut tip = String::new();
    for n in 0..110 {
        tip = hub.merge_pr(200 + n, &format!("Change {n}"), &format!("f{n}.rs"));
    }
    let config = hub.config();
    let forges = Forges::with_github(Some(hub.forge()));
    let github = forges.of(&config.sources[0]);
    let dir = &hub.source.dir;
    let mut expected: Vec<String> = git_trimmed(dir, &["rev-list", "--first-parent", &tip])
        .lines()
        .map(str::to_owned)
        .collect();
    expected.reverse();
    let end = sha(&tip);

    for start in [
        HistoryStart::Last(105),
        HistoryStart::After(sha(&hub.source.base)),
    ] {
        let want = match &start {
            HistoryStart::Last(n) => expected[expected.len() - n..].to_vec(),
            _ => expected[1..].to_vec(),
        };
        let local =
            teammem::forge::local::history::first_parent_history(dir, &tip, &start, 1_000).unwrap();
        let remote = github
            .first_parent_history(&end, &start, 1_000)
            .await
            .unwrap();
        assert_eq!(shas(&local), want, "{start:?}");
        assert_eq!(shas(&remote), want, "{start:?}");
        for history in [&local, &remote] {
            for pair in history.windows(2) {
                assert_eq!(pair[1].parent.as_ref(), Some(&pair[0].sha));
            }
        }
        // The merge of PR #12 brought its branch's commit with it.
        if let Some(merge) = local.iter().find(|c| c.sha.as_str() == hub.source.merge_12) {
            assert_eq!(merge.entered, Some(2));
        }
    }

    // Since a future date: nothing.
    let future = HistoryStart::Since(4_102_444_800);
    assert!(
        github
            .first_parent_history(&end, &future, 1_000)
            .await
            .unwrap()
            .is_empty()
    );
    // A commit of the merged branch is not on the first-parent chain.
    let side = git_trimmed(dir, &["rev-parse", &format!("{}^2", hub.source.merge_12)]);
    let off = HistoryStart::After(sha(&side));
    let refused = teammem::forge::local::history::first_parent_history(dir, &tip, &off, 1_000);
    assert!(
        matches!(
            refused,
            Err(Refusal::Rejected {
                code: "not_in_history",
                ..
            })
        ),
        "{refused:?}"
    );
    let refused = github.first_parent_history(&end, &off, 1_000).await;
    assert!(
        matches!(
            refused,
            Err(Refusal::Rejected {
                code: "not_in_history",
                ..
            })
        ),
        "{refused:?}"
    );
    // A history longer than the limit is refused, not cut.
    let refused = github
        .first_parent_history(&end, &HistoryStart::Last(50), 10)
        .await;
    assert!(
        matches!(
            refused,
            Err(Refusal::Rejected {
                code: "history_too_long",
                ..
            })
        ),
        "{refused:?}"
    );
}

/// Commits everything in `dir` directly on `main` (no pull request); its sha.
fn direct(dir: &std::path::Path, file: &str, subject: &str) -> String {
    crate::runner::fixture::write(dir, file, &format!("{subject}\n"));
    crate::harness::git::git(dir, &["add", "-A"]);
    crate::harness::git::git(dir, &["commit", "-q", "-m", subject]);
    git_trimmed(dir, &["rev-parse", "HEAD"])
}

#[tokio::test]
async fn last_n_counts_merges_on_both_forges_and_direct_commits_ride_along() {
    let hub = Hub::new().await;
    let dir = hub.source.dir.clone();
    let git = |args: &[&str]| crate::harness::git::git(&dir, args);
    // After the fixture (#12 merged, #13 squashed, a direct commit):
    let m1 = hub.merge_pr(300, "One", "one.rs");
    let d1 = direct(&dir, "typo.md", "Fix a typo");
    // A maintenance branch merged back: two parents, no pull request named.
    git(&["checkout", "-q", "-b", "stable"]);
    direct(&dir, "stable.md", "A fix on stable");
    git(&["checkout", "-q", "main"]);
    let d2 = direct(&dir, "tidy.md", "Tidy");
    git(&[
        "merge",
        "-q",
        "--no-ff",
        "stable",
        "-m",
        "Merge branch 'stable'",
    ]);
    let m2 = git_trimmed(&dir, &["rev-parse", "HEAD"]);
    let d3 = direct(&dir, "notes.md", "Notes");
    let m3 = hub.merge_pr(301, "Two", "two.rs");
    let d4 = direct(&dir, "after.md", "After the last merge");
    let config = hub.config();
    let forges = Forges::with_github(Some(hub.forge()));
    let github = forges.of(&config.sources[0]);
    let end = sha(&d4);
    let all: Vec<String> = {
        let mut all: Vec<String> = git_trimmed(&dir, &["rev-list", "--first-parent", &d4])
            .lines()
            .map(str::to_owned)
            .collect();
        all.reverse();
        all
    };
    for (n, want) in [
        (1, vec![&m3, &d4]),
        (2, vec![&m2, &d3, &m3, &d4]),
        (3, vec![&m1, &d1, &d2, &m2, &d3, &m3, &d4]),
    ] {
        let want: Vec<String> = want.into_iter().cloned().collect();
        let start = HistoryStart::Last(n);
        let local =
            teammem::forge::local::history::first_parent_history(&dir, &d4, &start, 1_000).unwrap();
        let remote = github
            .first_parent_history(&end, &start, 1_000)
            .await
            .unwrap();
        assert_eq!(shas(&local), want, "--last {n}, local");
        assert_eq!(shas(&remote), want, "--last {n}, GitHub");
        // The oldest's parent is where the first range starts.
        let before = all[all.iter().position(|s| *s == want[0]).unwrap() - 1].clone();
        assert_eq!(
            local[0].parent.as_ref().map(Sha::to_string),
            Some(before.clone())
        );
        assert_eq!(remote[0].parent.as_ref().map(Sha::to_string), Some(before));
    }
    // More merges asked for than there are: the whole history, root included.
    let start = HistoryStart::Last(1_000);
    let local =
        teammem::forge::local::history::first_parent_history(&dir, &d4, &start, 1_000).unwrap();
    let remote = github
        .first_parent_history(&end, &start, 1_000)
        .await
        .unwrap();
    assert_eq!(shas(&local), all);
    assert_eq!(shas(&remote), all);
}
