//! The local forge on real git repositories built with the `git` CLI: the same
//! ancestry cases as GitHub's compare checks, pull requests recognised from merge
//! and squash subjects, and the pipeline with a local source (run fields optional).

use serde_json::json;
use teammem::config::Config;
use teammem::forge::local::{verify_pull, verify_range};
use teammem::ingest::{DispatchHeaders, Ingest, VerifiedKind, signature};
use teammem::secrets::Secret;

use crate::harness::fake_github::GitRepo;

struct Local {
    _dir: tempfile::TempDir,
    git: GitRepo,
    before: String,
    after: String,
}

fn local() -> Local {
    let dir = tempfile::tempdir().unwrap();
    let git = GitRepo::init(&dir.path().join("src"));
    git.commits(2, "base");
    let before = git.head();
    git.commits(3, "pushed");
    let after = git.head();
    Local {
        _dir: dir,
        git,
        before,
        after,
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, teammem::forge::Refusal>) -> &'static str {
    r.expect_err("must be refused").code()
}

fn pull(number: u64) -> teammem::ids::PullNumber {
    teammem::ids::PullNumber::new(number).unwrap()
}

#[test]
fn a_fast_forward_on_the_default_branch_is_verified() {
    let l = local();
    let v = verify_range(&l.git.dir, &l.before, &l.after).unwrap();
    assert_eq!(v.default_branch, "main");
    assert_eq!(v.commits, 3);
}

#[test]
fn commits_pushed_after_the_first_verification_are_seen() {
    // The forge keeps repositories open between dispatches: later pushes (new
    // loose objects, then repacked ones, and a moved branch) must be visible.
    let l = local();
    verify_range(&l.git.dir, &l.before, &l.after).unwrap();
    l.git.commits(2, "later");
    let later = l.git.head();
    assert_eq!(
        verify_range(&l.git.dir, &l.after, &later).unwrap().commits,
        2
    );
    l.git.git(&["gc", "--quiet", "--prune=now"]);
    l.git.commits(1, "after gc");
    let latest = l.git.head();
    l.git.git(&["gc", "--quiet", "--prune=now"]);
    assert_eq!(
        verify_range(&l.git.dir, &later, &latest).unwrap().commits,
        1
    );
}

#[test]
fn ancestry_failures_are_refused() {
    let l = local();
    // Reversed.
    assert_eq!(
        code(verify_range(&l.git.dir, &l.after, &l.before)),
        "not_fast_forward"
    );
    // Side branch.
    l.git.git(&["checkout", "-q", "-b", "side", &l.before]);
    let side = l.git.commit("side.txt", "side");
    l.git.git(&["checkout", "-q", "main"]);
    assert_eq!(
        code(verify_range(&l.git.dir, &side, &l.after)),
        "not_fast_forward"
    );
    // Unknown commit.
    assert_eq!(
        code(verify_range(&l.git.dir, &"1".repeat(40), &l.after)),
        "unknown_commit"
    );
    // A commit on a branch that is not the default one.
    assert_eq!(
        code(verify_range(&l.git.dir, &l.before, &side)),
        "not_on_default_branch"
    );
    // Zero SHA and empty range.
    assert_eq!(
        code(verify_range(&l.git.dir, &"0".repeat(40), &l.after)),
        "zero_sha"
    );
    assert_eq!(
        code(verify_range(&l.git.dir, &l.after, &l.after)),
        "empty_range"
    );
}

#[test]
fn a_force_pushed_default_branch_is_refused() {
    let l = local();
    l.git.reset_main(&l.before);
    l.git.commit("x.txt", "rewritten");
    assert_eq!(
        code(verify_range(&l.git.dir, &l.before, &l.after)),
        "not_on_default_branch"
    );
}

#[test]
fn more_than_a_thousand_commits_is_too_large() {
    let l = local();
    let tip = l.git.fast_commits(1001);
    assert_eq!(
        code(verify_range(&l.git.dir, &l.after, &tip)),
        "range_too_large"
    );
    let exactly = l.git.git(&["rev-parse", "HEAD~1"]);
    assert_eq!(
        verify_range(&l.git.dir, &l.after, &exactly)
            .unwrap()
            .commits,
        1000
    );
}

#[test]
fn pull_requests_are_found_from_merge_and_squash_subjects() {
    let l = local();
    // A merge commit.
    l.git.git(&["checkout", "-q", "-b", "feature"]);
    l.git.commit("f.txt", "feature work");
    l.git.git(&["checkout", "-q", "main"]);
    l.git.git(&[
        "merge",
        "-q",
        "--no-ff",
        "feature",
        "-m",
        "Merge pull request #12 from octo/feature",
    ]);
    let merge = l.git.head();
    // A squash merge.
    let squash = l.git.commit("s.txt", "Add the thing (#13)");
    // An unmerged PR's commit on another branch.
    l.git.git(&["checkout", "-q", "-b", "open"]);
    l.git.commit("o.txt", "Open work (#14)");
    l.git.git(&["checkout", "-q", "main"]);

    assert_eq!(verify_pull(&l.git.dir, pull(12)).unwrap().merge_sha, merge);
    assert_eq!(verify_pull(&l.git.dir, pull(13)).unwrap().merge_sha, squash);
    assert_eq!(code(verify_pull(&l.git.dir, pull(14))), "pull_not_merged");
    assert_eq!(code(verify_pull(&l.git.dir, pull(99))), "pull_not_merged");
}

#[tokio::test]
async fn the_pipeline_accepts_local_sources_without_run_fields() {
    let l = local();
    let wiki = l._dir.path().join("wiki");
    let text = format!(
        r#"
[server]
data_dir = "{}"

[[sources]]
repository = "demo/app"
local_path = "{}"
local_wiki_path = "{}"
webhook_secret_env = "TEAMMEM_TEST_LOCAL"
"#,
        l._dir.path().join("data").display(),
        l.git.dir.display(),
        wiki.display()
    );
    let config = Config::parse(&text).unwrap();
    let secret = b"local secret";
    let ingest = Ingest::new(
        vec![(config.sources[0].clone(), Secret::new(secret.to_vec()))],
        None,
        None,
    );
    let body = serde_json::to_vec(&json!({
        "source_repository": "demo/app", "kind": "range",
        "push_before": l.before, "push_after": l.after,
    }))
    .unwrap();
    let sig = signature::sign(secret, &body);
    let h = DispatchHeaders {
        content_type: Some("application/json"),
        signature: Some(&sig),
        delivery: Some("local-1"),
        authorization: None,
    };
    let v = ingest.ingest(&h, &body).await.unwrap();
    assert_eq!(v.destination, format!("local:{}", wiki.display()));
    assert_eq!(v.run, None);
    assert!(matches!(v.kind, VerifiedKind::Range { commits: 3, .. }));
    // The same body with a forced-away after.
    l.git.reset_main(&l.before);
    l.git.commit("y.txt", "rewritten");
    let e = ingest.ingest(&h, &body).await.unwrap_err();
    assert_eq!((status_of(&e), e.code), (409, "not_on_default_branch"));
}

/// A dispatch for a local source whose repository is gone is refused for
/// good (409, naming local_path), never "unavailable" (503), which the
/// workflow would retry six times to the same end (#35).
#[tokio::test]
async fn a_dispatch_for_a_missing_local_repository_is_a_conflict_naming_local_path() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("gone.git");
    let text = format!(
        "[server]\ndata_dir = \"{}\"\n[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_TEST_LOCAL\"\n",
        dir.path().join("data").display(),
        gone.display(),
        dir.path().join("wiki.git").display()
    );
    let config = Config::parse(&text).unwrap();
    let secret = b"local secret";
    let ingest = Ingest::new(
        vec![(config.sources[0].clone(), Secret::new(secret.to_vec()))],
        None,
        None,
    );
    let (before, after) = ("a".repeat(40), "b".repeat(40));
    for (n, body) in [
        json!({"source_repository": "demo/app", "kind": "range", "push_before": before, "push_after": after}),
        json!({"source_repository": "demo/app", "kind": "pull_request", "pull_number": 7}),
    ]
    .into_iter()
    .enumerate()
    {
        let body = serde_json::to_vec(&body).unwrap();
        let sig = signature::sign(secret, &body);
        let delivery = format!("gone-{n}");
        let h = DispatchHeaders {
            content_type: Some("application/json"),
            signature: Some(&sig),
            delivery: Some(&delivery),
            authorization: None,
        };
        let e = ingest.ingest(&h, &body).await.unwrap_err();
        assert_eq!((status_of(&e), e.code), (409, "source_repository_missing"), "{e}");
        assert!(
            e.message.contains("does not exist") && e.message.contains("local_path"),
            "{e}"
        );
    }
}

#[test]
fn a_range_through_a_merge_counts_what_git_counts() {
    let l = local();
    l.git.git(&["checkout", "-q", "-b", "feature", &l.after]);
    l.git.commit("f1.txt", "feature one");
    l.git.commit("f2.txt", "feature two");
    l.git.git(&["checkout", "-q", "main"]);
    l.git.commit("m.txt", "main moves on");
    l.git.git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.org",
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "Merge pull request #9 from o/feature",
        "feature",
    ]);
    let merge = l.git.head();
    let expected: u64 = l
        .git
        .git(&["rev-list", "--count", &format!("{}..{merge}", l.after)])
        .trim()
        .parse()
        .unwrap();
    assert_eq!(expected, 4);
    assert_eq!(
        verify_range(&l.git.dir, &l.after, &merge).unwrap().commits,
        expected
    );
    // The feature branch's first commit is in the merge's history but not
    // an ancestor of main's own commit before the merge.
    let feature_one = l.git.git(&["rev-parse", "feature~1"]).trim().to_string();
    let main_before_merge = l.git.git(&["rev-parse", "HEAD^1"]).trim().to_string();
    assert_eq!(
        code(verify_range(&l.git.dir, &feature_one, &main_before_merge)),
        "not_fast_forward"
    );
    let expected: u64 = l
        .git
        .git(&["rev-list", "--count", &format!("{feature_one}..{merge}")])
        .trim()
        .parse()
        .unwrap();
    assert_eq!(expected, 3);
    assert_eq!(
        verify_range(&l.git.dir, &feature_one, &merge)
            .unwrap()
            .commits,
        expected
    );
}

#[test]
fn a_long_range_from_a_commit_off_the_branch_is_not_a_fast_forward() {
    let l = local();
    l.git.git(&["checkout", "-q", "-b", "side", &l.before]);
    let side = l.git.commit("side.txt", "side");
    l.git.git(&["checkout", "-q", "main"]);
    let tip = l.git.fast_commits(1001);
    // More than the limit is reachable from `tip` but not from `side`: the
    // answer is still about ancestry, not size.
    assert_eq!(
        code(verify_range(&l.git.dir, &side, &tip)),
        "not_fast_forward"
    );
}

/// The status a refusal is answered with, through the one error→HTTP mapping.
fn status_of(e: &teammem::ingest::IngestError) -> u16 {
    teammem::http::ApiError::from(e.clone()).status.as_u16()
}

#[test]
fn lag_counts_the_commits_after_the_cursor_and_sees_a_force_push() {
    use teammem::forge::Lag;
    use teammem::forge::local::lag;
    let l = local();
    let tip = teammem::ids::Sha::parse(&l.after).unwrap();
    assert_eq!(
        lag(&l.git.dir, &l.after).unwrap(),
        Lag::UpToDate { tip: tip.clone() }
    );

    let oldest = l.git.git(&[
        "rev-list",
        "--reverse",
        &format!("{}..{}", l.before, l.after),
    ]);
    let oldest = oldest.lines().next().unwrap();
    let since: i64 = l
        .git
        .git(&["log", "-1", "--format=%ct", oldest])
        .parse()
        .unwrap();
    assert_eq!(
        lag(&l.git.dir, &l.before).unwrap(),
        Lag::Behind {
            tip: tip.clone(),
            commits: 3,
            counted_all: true,
            since: Some(since),
        },
        "the git CLI counts three commits after the cursor"
    );

    // A cursor the branch no longer holds: force-pushed away, or unknown.
    l.git.reset_main(&l.before);
    l.git.commits(1, "rewritten");
    let rewritten = teammem::ids::Sha::parse(&l.git.head()).unwrap();
    assert_eq!(
        lag(&l.git.dir, &l.after).unwrap(),
        Lag::Diverged {
            tip: rewritten.clone()
        }
    );
    assert_eq!(
        lag(&l.git.dir, &"1".repeat(40)).unwrap(),
        Lag::Diverged { tip: rewritten }
    );
}

/// A local source repository that is gone fails its job for good, naming
/// local_path: no retry can bring it back.
#[test]
fn a_missing_local_repository_is_a_permanent_failure_naming_local_path() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("gone");
    let sha = "a".repeat(40);
    let error =
        teammem::forge::local::recheck::recheck_range(&gone, &sha, &"b".repeat(40)).unwrap_err();
    assert!(
        matches!(&error, teammem::forge::evidence::SourceError::Invalid(reason)
            if reason.contains("does not exist") && reason.contains("local_path")),
        "{error:?}"
    );
}
