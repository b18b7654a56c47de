//! Reads (snapshot, list, get, search, history, diff) on wikis the git CLI made,
//! compared with what the git CLI itself reports.

use teammem::wiki::{ErrorKind, Outcome};

use super::{Fixture, TOKEN, add_files_that_are_not_pages, files_containing, spec};
use crate::harness::git::git;
use crate::harness::git_http::tip;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_reports_branch_and_full_tip() {
    let fixture = Fixture::sample().await;
    let snapshot = fixture.wiki().snapshot().await.unwrap();
    assert_eq!(snapshot.branch.as_deref(), Some("master"));
    assert_eq!(
        snapshot.sha.as_deref(),
        Some(tip(&fixture.bare, "master").as_str())
    );
    assert!(snapshot.initialized);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_get_match_git_including_unicode_and_nested_paths() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    let listed = wiki.list_pages("HEAD").await.unwrap();
    let oracle = git(&fixture.bare, &["ls-tree", "-r", "-l", "-z", "master"]);
    let mut expected: Vec<(String, String, u64)> = oracle
        .split('\0')
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (meta, path) = line.split_once('\t').unwrap();
            let fields: Vec<&str> = meta.split_whitespace().collect();
            (
                path.to_owned(),
                fields[2].to_owned(),
                fields[3].parse().unwrap(),
            )
        })
        .collect();
    expected.sort();
    let got: Vec<(String, String, u64)> = listed
        .pages
        .iter()
        .map(|page| (page.path.clone(), page.sha.clone(), page.size))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(listed.commit, tip(&fixture.bare, "master"));
    assert!(!listed.truncated);
    assert!(got.iter().any(|(path, _, _)| path == "Ünïcode/日本語.md"));

    for (path, sha, _) in &expected {
        let page = wiki.get_page(&listed.commit, path).await.unwrap();
        assert_eq!(
            page.content,
            git(&fixture.bare, &["show", &format!("master:{path}")])
        );
        assert_eq!(&page.sha, sha);
        assert_eq!(page.commit, listed.commit);
    }

    // An older commit by full sha.
    let first = git(&fixture.bare, &["rev-list", "--max-parents=0", "master"])
        .trim()
        .to_owned();
    let old_home = wiki
        .get_page(&first.to_uppercase(), "Home.md")
        .await
        .unwrap();
    assert_eq!(old_home.content, "# Home\n\nWelcome to the wiki.\n");
    let missing = wiki
        .get_page(&first, "Ünïcode/日本語.md")
        .await
        .unwrap_err();
    assert_eq!(missing.kind, ErrorKind::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refs_must_be_head_or_a_known_full_sha() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    for bad in ["master", "HEAD~1", "abc123", "head"] {
        let err = wiki.list_pages(bad).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput, "{bad}");
        assert_eq!(err.outcome, Outcome::NotApplied);
    }
    let unknown = wiki.list_pages(&"0".repeat(40)).await.unwrap_err();
    assert_eq!(unknown.kind, ErrorKind::NotFound);
    let not_a_page = wiki.get_page("HEAD", "img/logo.png").await.unwrap_err();
    assert_eq!(not_a_page.kind, ErrorKind::InvalidInput);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_is_case_insensitive_and_ranked() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    let result = wiki.search("HEAD", "GRÜSSE").await.unwrap();
    assert!(result.hits.is_empty(), "ß does not fold to ss");
    let result = wiki.search("HEAD", "GRÜẞE").await.unwrap();
    assert_eq!(result.hits.len(), 1);
    let result = wiki.search("HEAD", "welcome TO").await.unwrap();
    let paths: Vec<&str> = result.hits.iter().map(|hit| hit.path.as_str()).collect();
    assert_eq!(paths, ["Home.md"]);
    assert_eq!(result.hits[0].line, 3);
    assert_eq!(result.hits[0].snippet, "Welcome to the wiki.");
    assert_eq!(result.hits[0].heading.as_deref(), Some("Home v2"));
    assert!(result.hits[0].score > 0.0);
    assert!(!result.truncated);
    let too_long = wiki.search("HEAD", &"q".repeat(513)).await.unwrap_err();
    assert_eq!(too_long.kind, ErrorKind::LimitExceeded);
    assert!(
        wiki.search("HEAD", &"q".repeat(512))
            .await
            .unwrap()
            .hits
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_matches_git_log_with_and_without_path() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    let all = wiki.history("HEAD", None, 100).await.unwrap();
    let oracle: Vec<String> = git(&fixture.bare, &["log", "--format=%H", "master"])
        .lines()
        .map(str::to_owned)
        .collect();
    let got: Vec<String> = all.commits.iter().map(|c| c.sha.clone()).collect();
    assert_eq!(got, oracle);
    assert_eq!(all.commits[0].message, "Update home");
    assert!(all.commits[0].time.ends_with('Z'));

    let home = wiki.history("HEAD", Some("Home.md"), 100).await.unwrap();
    let oracle: Vec<String> = git(
        &fixture.bare,
        &["log", "--format=%H", "master", "--", "Home.md"],
    )
    .lines()
    .map(str::to_owned)
    .collect();
    let got: Vec<String> = home.commits.iter().map(|c| c.sha.clone()).collect();
    assert_eq!(got, oracle);
    assert_eq!(got.len(), 2);

    assert_eq!(
        wiki.history("HEAD", None, 1).await.unwrap().commits.len(),
        1
    );
    for bad in [0, 101] {
        assert_eq!(
            wiki.history("HEAD", None, bad).await.unwrap_err().kind,
            ErrorKind::InvalidInput
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_applies_with_git_apply_to_reproduce_the_target_tree() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    let first = git(&fixture.bare, &["rev-list", "--max-parents=0", "master"])
        .trim()
        .to_owned();
    let last = tip(&fixture.bare, "master");
    let diff = wiki.diff(&first, "HEAD").await.unwrap();
    assert_eq!(diff.from, first);
    assert_eq!(diff.to, last);
    assert!(
        diff.diff.contains("+++ b/Ünïcode/日本語.md"),
        "{}",
        diff.diff
    );
    assert!(diff.diff.contains("-# Home\n+# Home v2\n"), "{}", diff.diff);

    // Oracle: applying the diff to the first commit gives the last tree.
    let work = fixture.dir.path().join("apply");
    git(
        fixture.dir.path(),
        &[
            "clone",
            "--quiet",
            fixture.bare.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    git(&work, &["checkout", "--quiet", &first]);
    std::fs::write(work.join("change.diff"), &diff.diff).unwrap();
    git(&work, &["apply", "change.diff"]);
    std::fs::remove_file(work.join("change.diff")).unwrap();
    git(&work, &["add", "--all"]);
    assert_eq!(
        git(&work, &["write-tree"]).trim(),
        git(&fixture.bare, &["rev-parse", "master^{tree}"]).trim()
    );

    let empty = wiki.diff("HEAD", &last).await.unwrap();
    assert_eq!(empty.diff, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_wiki_is_uninitialized_and_refuses_writes() {
    let fixture = Fixture::with_commits(&[]).await;
    let wiki = fixture.wiki();
    let snapshot = wiki.snapshot().await.unwrap();
    assert!(!snapshot.initialized);
    assert_eq!(snapshot.sha, None);
    let err = wiki
        .write(
            &spec(&"a".repeat(40)),
            vec![teammem::wiki::PageWrite {
                path: "Home.md".into(),
                content: "hi".into(),
            }],
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert!(err.message.contains("no pages yet"), "{}", err.message);
    assert_eq!(err.outcome, Outcome::NotApplied);
    let list = wiki.list_pages("HEAD").await.unwrap_err();
    assert_eq!(list.kind, ErrorKind::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wiki_with_a_rejected_page_path_is_reported_not_half_read() {
    let fixture = Fixture::with_commits(&[(
        "Pages and a bad page name",
        &[("Home.md", "# Home\n"), ("notes/aux.md", "device name\n")],
    )])
    .await;
    let wiki = fixture.wiki();
    for err in [
        wiki.list_pages("HEAD").await.unwrap_err(),
        wiki.get_page("HEAD", "Home.md").await.unwrap_err(),
        wiki.search("HEAD", "home").await.unwrap_err(),
    ] {
        assert_eq!(err.kind, ErrorKind::UpstreamError);
        assert!(err.message.contains("notes/aux.md"), "{}", err.message);
    }
    let clash = Fixture::with_commits(&[("Clash", &[("Home.md", "a"), ("home.md", "b")])]).await;
    let err = clash.wiki().list_pages("HEAD").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::UpstreamError);
    assert!(
        err.message.contains("Home.md") && err.message.contains("home.md"),
        "{}",
        err.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_that_are_not_pages_are_ignored_by_every_read() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    let before = wiki.snapshot().await.unwrap().sha.unwrap();
    let others = add_files_that_are_not_pages(&fixture);
    assert_eq!(others.len(), 5, "{others:?}");
    assert!(
        others.iter().any(|line| line.starts_with("100755")),
        "{others:?}"
    );
    assert!(
        others.iter().any(|line| line.starts_with("120000")),
        "{others:?}"
    );
    let snapshot = wiki.snapshot().await.unwrap();
    let tip_sha = tip(&fixture.bare, "master");
    assert_eq!(snapshot.sha.as_deref(), Some(tip_sha.as_str()));

    let listed = wiki.list_pages("HEAD").await.unwrap();
    let pages: Vec<&str> = listed.pages.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(pages, ["Home.md", "guides/Setup.md", "Ünïcode/日本語.md"]);
    assert_eq!(listed.total, 3);
    assert_eq!(
        wiki.get_page("HEAD", "Home.md").await.unwrap().content,
        git(&fixture.bare, &["show", "master:Home.md"])
    );
    let err = wiki.get_page("HEAD", "images/logo.png").await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidInput, "{err:?}");
    assert!(err.message.contains(".md"), "{}", err.message);
    let found = wiki.search("HEAD", "NEEDLE").await.unwrap();
    assert_eq!(found.hits, Vec::new(), "only pages are searched");
    let found = wiki.search("HEAD", "cargo").await.unwrap();
    assert_eq!(found.hits.len(), 1);
    // The attachments commit changed no page: its diff is empty.
    assert_eq!(wiki.diff(&before, "HEAD").await.unwrap().diff, "");
    let history = wiki.history("HEAD", None, 10).await.unwrap();
    assert_eq!(history.commits[0].sha, tip_sha);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_config_holds_neither_url_nor_token_and_bad_tokens_are_refused() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    wiki.snapshot().await.unwrap();
    wiki.list_pages("HEAD").await.unwrap();
    let mirror = fixture.store.mirror_path(super::DESTINATION);
    assert!(
        mirror.join("HEAD").exists(),
        "the mirror lives at {}",
        mirror.display()
    );
    assert_eq!(
        files_containing(&fixture.mirrors_dir(), TOKEN.as_bytes()),
        Vec::<std::path::PathBuf>::new()
    );
    let host_port = format!("127.0.0.1:{}", fixture.server.port());
    assert_eq!(
        files_containing(&fixture.mirrors_dir(), host_port.as_bytes()),
        Vec::<std::path::PathBuf>::new()
    );
    let config = std::fs::read_to_string(mirror.join("config")).unwrap();
    assert!(!config.contains("[remote"), "{config}");

    let wrong = fixture
        .store
        .wiki(&fixture.destination_with_token(Some("nope")))
        .unwrap();
    let err = wrong.snapshot().await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::AuthenticationError, "{err:?}");
    let anonymous = fixture
        .store
        .wiki(&fixture.destination_with_token(None))
        .unwrap();
    assert_eq!(
        anonymous.snapshot().await.unwrap_err().kind,
        ErrorKind::AuthenticationError
    );
}
