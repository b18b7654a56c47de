//! The local bare-repository remote (the local forge): the same reads, writes,
//! conflicts and races, with a ref transaction in place of receive-pack.

use teammem::wiki::{
    Destination, ErrorKind, Outcome, PagePatch, PageWrite, Remote, Replacement, WikiStore,
    WriteStatus,
};

use teammem::staleness::PageEvidence;

use super::{DESTINATION, sample_history, spec};
use crate::harness::git::git;
use crate::harness::git_http::{bare_with_commits, init_bare, tip};

struct LocalFixture {
    dir: tempfile::TempDir,
    bare: std::path::PathBuf,
}

impl LocalFixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bare = bare_with_commits(dir.path(), "wiki.git", &sample_history());
        Self { dir, bare }
    }

    fn store(&self, name: &str) -> WikiStore {
        WikiStore::new(self.dir.path().join(name))
    }

    fn destination(&self) -> Destination {
        Destination {
            id: DESTINATION.into(),
            remote: Remote::LocalBare {
                path: self.bare.clone(),
            },
        }
    }
}

fn page(path: &str, content: &str) -> PageWrite {
    PageWrite {
        path: path.into(),
        content: content.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_write_and_patch_publish_one_commit_each() {
    let fixture = LocalFixture::new();
    let store = fixture.store("m");
    let wiki = store.wiki(&fixture.destination()).unwrap();
    let snapshot = wiki.snapshot().await.unwrap();
    assert_eq!(snapshot.branch.as_deref(), Some("master"));
    let base = snapshot.sha.unwrap();
    assert_eq!(base, tip(&fixture.bare, "master"));

    let result = wiki
        .write(&spec(&base), vec![page("new/Page.md", "body\r\n")])
        .await
        .unwrap();
    assert_eq!(result.status, WriteStatus::Updated);
    assert_eq!(tip(&fixture.bare, "master"), result.sha);
    assert_eq!(
        git(&fixture.bare, &["show", "master:new/Page.md"]),
        "body\r\n"
    );
    let parents = git(
        &fixture.bare,
        &["rev-list", "--parents", "-n", "1", "master"],
    );
    assert_eq!(parents.trim(), format!("{} {base}", result.sha));
    assert!(git(&fixture.bare, &["log", "-1", "--format=%B"]).contains("Teammem-Job: job-42"));

    let blob = wiki.get_page("HEAD", "Home.md").await.unwrap().sha;
    let patched = wiki
        .patch(
            &spec(&result.sha),
            vec![PagePatch {
                path: "Home.md".into(),
                expected_sha: blob,
                replacements: vec![Replacement {
                    old: "Setup guide".into(),
                    new: "setup guide".into(),
                }],
            }],
        )
        .await
        .unwrap();
    assert_eq!(
        git(&fixture.bare, &["show", "master:Home.md"]),
        "# Home v2\n\nWelcome to the wiki.\nSee the setup guide.\n"
    );
    assert_eq!(tip(&fixture.bare, "master"), patched.sha);
    git(&fixture.bare, &["fsck", "--strict", "--no-progress"]);
    // No mirror is made for a local remote: the store's directory holds at
    // most the page facts it shares with this node's other processes.
    let made: Vec<String> = std::fs::read_dir(fixture.dir.path().join("m"))
        .map(|dir| {
            dir.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        made.iter().all(|name| name.ends_with(".page-facts")),
        "{made:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_stale_base_conflicts_and_matching_pages_are_no_change() {
    let fixture = LocalFixture::new();
    let store = fixture.store("m");
    let wiki = store.wiki(&fixture.destination()).unwrap();
    let base = wiki.snapshot().await.unwrap().sha.unwrap();
    let first = wiki
        .write(&spec(&base), vec![page("A.md", "a\n")])
        .await
        .unwrap();

    let err = wiki
        .write(&spec(&base), vec![page("A.md", "other\n")])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict);
    assert_eq!(err.outcome, Outcome::NotApplied);
    assert_eq!(tip(&fixture.bare, "master"), first.sha);

    let same = wiki
        .write(&spec(&base), vec![page("A.md", "a\n")])
        .await
        .unwrap();
    assert_eq!(same.status, WriteStatus::NoChange);
    assert_eq!(same.sha, first.sha);
    assert_eq!(tip(&fixture.bare, "master"), first.sha);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_four_writers_one_wins() {
    let fixture = LocalFixture::new();
    let base = tip(&fixture.bare, "master");
    let stores: Vec<WikiStore> = (0..4).map(|i| fixture.store(&format!("m{i}"))).collect();
    let mut tasks = Vec::new();
    for (i, store) in stores.iter().enumerate() {
        let wiki = store.wiki(&fixture.destination()).unwrap();
        let base = base.clone();
        tasks.push(tokio::spawn(async move {
            wiki.write(
                &spec(&base),
                vec![page("Home.md", &format!("writer {i}\n"))],
            )
            .await
        }));
    }
    let mut updated = 0;
    let mut conflicts = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(result) => {
                assert_eq!(result.status, WriteStatus::Updated);
                updated += 1;
            }
            Err(err) => {
                assert_eq!(err.kind, ErrorKind::Conflict, "{err:?}");
                conflicts += 1;
            }
        }
    }
    assert_eq!((updated, conflicts), (1, 3));
    git(&fixture.bare, &["fsck", "--strict", "--no-progress"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_empty_repository_is_uninitialized() {
    let dir = tempfile::tempdir().unwrap();
    let bare = init_bare(dir.path(), "empty.git");
    let store = WikiStore::new(dir.path().join("m"));
    let wiki = store
        .wiki(&Destination {
            id: DESTINATION.into(),
            remote: Remote::LocalBare { path: bare },
        })
        .unwrap();
    let snapshot = wiki.snapshot().await.unwrap();
    assert!(!snapshot.initialized);
    assert_eq!(snapshot.branch.as_deref(), Some("master"));
    let err = wiki
        .write(&spec(&"a".repeat(40)), vec![page("Home.md", "x")])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::NotFound);
}

/// The whole-wiki scans (the snapshot's stale count, the runner's pages with
/// evidence markers and their parsed evidence) remember each page blob's
/// facts so that a job reads only the pages that changed: a warm handle must
/// answer exactly as a cold one, and as parsing the page at that commit, at
/// every commit, as pages gain, change and lose stale markers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remembered_page_facts_answer_as_a_fresh_read_at_every_commit() {
    let fixture = LocalFixture::new();
    let warm = fixture.store("warm").wiki(&fixture.destination()).unwrap();
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let current = |path: &str| format!("- a fact <!-- teammem:evidence {path}@{sha}#L1-L2 -->\n");
    let stale =
        |path: &str| format!("- a fact <!-- teammem:evidence {path}@{sha}#L1-L2 stale={sha} -->\n");
    let steps: Vec<Vec<(&str, String)>> = vec![
        vec![("A.md", current("a.rs")), ("B.md", "no markers\n".into())],
        vec![("A.md", stale("a.rs"))],
        vec![("B.md", format!("{}{}", stale("b.rs"), stale("c.rs")))],
        vec![("A.md", current("a.rs"))],
        vec![("B.md", "no markers again\n".into())],
    ];
    let expected_stale = [0usize, 1, 3, 2, 0];
    let expected_evidence: [&[&str]; 5] = [
        &["A.md"],
        &["A.md"],
        &["A.md", "B.md"],
        &["A.md", "B.md"],
        &["A.md"],
    ];
    for (at, pages) in steps.into_iter().enumerate() {
        let base = warm.snapshot().await.unwrap().sha.unwrap();
        let result = warm
            .write(
                &spec(&base),
                pages
                    .into_iter()
                    .map(|(path, content)| page(path, &content))
                    .collect(),
            )
            .await
            .unwrap();
        assert_eq!(result.status, WriteStatus::Updated, "step {at}");
        // A handle from a fresh store has nothing remembered.
        let cold = fixture
            .store(&format!("cold-{at}"))
            .wiki(&fixture.destination())
            .unwrap();
        let (warm_snapshot, cold_snapshot) = (
            warm.snapshot().await.unwrap(),
            cold.snapshot().await.unwrap(),
        );
        assert_eq!(warm_snapshot.sha.as_deref(), Some(result.sha.as_str()));
        assert_eq!(warm_snapshot.stale_facts, expected_stale[at], "step {at}");
        assert_eq!(cold_snapshot.stale_facts, expected_stale[at], "step {at}");
        let (warm_pages, warm_cut) = warm.evidence_scan(&result.sha).await.unwrap();
        let (cold_pages, _) = cold.evidence_scan(&result.sha).await.unwrap();
        assert!(!warm_cut);
        assert_eq!(warm_pages, cold_pages, "step {at}");
        let names: Vec<String> = warm_pages.iter().map(|p| p.path.clone()).collect();
        assert_eq!(names, expected_evidence[at], "step {at}");
        // Each page's evidence and text are the ones at this commit, not
        // remembered ones: A.md changes blob at steps 1 and 3, B.md at 2.
        let texts = warm.page_texts(&result.sha, names.clone()).await.unwrap();
        for (page, (path, text)) in warm_pages.iter().zip(&texts) {
            let at_commit = git(&fixture.bare, &["show", &format!("master:{path}")]);
            assert_eq!(text, &at_commit, "step {at}");
            assert_eq!(
                *page.evidence,
                PageEvidence::of_text(&at_commit),
                "step {at}: {path}"
            );
        }
    }
    let missing = warm
        .page_texts(
            &warm.snapshot().await.unwrap().sha.unwrap(),
            vec!["Gone.md".into()],
        )
        .await
        .unwrap_err();
    assert_eq!(missing.kind, ErrorKind::NotFound);
    assert!(missing.message.contains("Gone.md"), "{}", missing.message);
}
