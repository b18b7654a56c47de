//! Writes and patches over smart HTTP: byte-exact results, one commit on the
//! base, trailers, fsck; conflicts, no-change, races, lost answers, request
//! counts, every limit at its boundary, and the token never leaking.

use teammem::wiki::{ErrorKind, Outcome, PagePatch, PageWrite, Replacement, WriteStatus};

use super::{
    DESTINATION, Fixture, TOKEN, add_files_that_are_not_pages, files_containing, other_files, spec,
};
use crate::harness::git::git;
use crate::harness::git_http::{Fault, tip};

fn page(path: &str, content: &str) -> PageWrite {
    PageWrite {
        path: path.into(),
        content: content.into(),
    }
}

fn replace(old: &str, new: &str) -> Replacement {
    Replacement {
        old: old.into(),
        new: new.into(),
    }
}

fn fsck(bare: &std::path::Path) {
    git(bare, &["fsck", "--strict", "--no-progress"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_makes_one_commit_on_the_base_with_exact_bytes_and_trailers() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    let base = wiki.snapshot().await.unwrap().sha.unwrap();
    let tricky = "Line one\r\nTrailing spaces   \n\ttab\n\u{feff}BOM-like\nno final newline";
    let result = wiki
        .write(
            &spec(&base),
            vec![
                page("Home.md", "# Home v3\n"),
                page("deploy/Ünïcode Steps.md", tricky),
            ],
        )
        .await
        .unwrap();
    assert_eq!(result.status, WriteStatus::Updated);
    assert_eq!(result.branch, "master");
    assert_eq!(result.sha, tip(&fixture.bare, "master"));
    assert_eq!(
        git(&fixture.bare, &["show", "master:Home.md"]),
        "# Home v3\n"
    );
    assert_eq!(
        git(&fixture.bare, &["show", "master:deploy/Ünïcode Steps.md"]),
        tricky
    );
    let parents = git(
        &fixture.bare,
        &["rev-list", "--parents", "-n", "1", "master"],
    );
    assert_eq!(parents.trim(), format!("{} {base}", result.sha));
    let message = git(&fixture.bare, &["log", "-1", "--format=%B", "master"]);
    assert!(
        message.starts_with("Record the deploy steps\n\n"),
        "{message}"
    );
    assert!(message.contains("Teammem-Job: job-42\n"), "{message}");
    assert!(message.contains("Teammem-Source: octo/app\n"), "{message}");
    assert!(
        message.contains(&format!(
            "Teammem-Range: {}..{}\n",
            "1".repeat(40),
            "2".repeat(40)
        )),
        "{message}"
    );
    let trailers = git(
        &fixture.bare,
        &[
            "log",
            "-1",
            "--format=%(trailers:key=Teammem-Job,valueonly)",
            "master",
        ],
    );
    assert_eq!(trailers.trim(), "job-42");
    assert_eq!(
        git(
            &fixture.bare,
            &["log", "-1", "--format=%an <%ae>|%cn <%ce>", "master"]
        )
        .trim(),
        "teammem[bot] <12345+teammem[bot]@users.noreply.github.com>|teammem[bot] <12345+teammem[bot]@users.noreply.github.com>"
    );
    // Untouched pages keep their blobs.
    assert_eq!(
        git(&fixture.bare, &["rev-parse", "master:guides/Setup.md"]),
        git(
            &fixture.bare,
            &["rev-parse", &format!("{base}:guides/Setup.md")]
        )
    );
    let pages: Vec<(&str, String)> = result
        .pages
        .iter()
        .map(|p| (p.path.as_str(), p.sha.clone()))
        .collect();
    assert_eq!(
        pages[1].1,
        git(
            &fixture.bare,
            &["rev-parse", "master:deploy/Ünïcode Steps.md"]
        )
        .trim()
    );
    fsck(&fixture.bare);

    // The engine reads its own write back.
    let read = wiki
        .get_page("HEAD", "deploy/Ünïcode Steps.md")
        .await
        .unwrap();
    assert_eq!(read.content, tricky);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_replaces_anchors_and_preserves_every_other_byte() {
    let original = "# Runbook\r\n\r\nStep 1: build   \n\tStep 2: deploy\nFooter ✓";
    let fixture = Fixture::with_commits(&[(
        "Runbook",
        &[("ops/Runbook.md", original), ("Home.md", "home\n")],
    )])
    .await;
    let wiki = fixture.wiki();
    let base = wiki.snapshot().await.unwrap().sha.unwrap();
    let blob = wiki.get_page("HEAD", "ops/Runbook.md").await.unwrap().sha;
    let result = wiki
        .patch(
            &spec(&base),
            vec![PagePatch {
                path: "ops/Runbook.md".into(),
                expected_sha: blob,
                replacements: vec![
                    replace("Step 2: deploy", "Step 2: deploy with care"),
                    replace("# Runbook", "# Run book"),
                    replace("", "\nappended"),
                ],
            }],
        )
        .await
        .unwrap();
    assert_eq!(result.status, WriteStatus::Updated);
    assert_eq!(
        git(&fixture.bare, &["show", "master:ops/Runbook.md"]),
        "# Run book\r\n\r\nStep 1: build   \n\tStep 2: deploy with care\nFooter ✓\nappended"
    );
    let parents = git(
        &fixture.bare,
        &["rev-list", "--parents", "-n", "1", "master"],
    );
    assert_eq!(parents.trim(), format!("{} {base}", result.sha));
    fsck(&fixture.bare);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_refusals_name_the_problem_and_change_nothing() {
    let fixture = Fixture::with_commits(&[(
        "Pages",
        &[("A.md", "alpha beta alpha\n"), ("B.md", "bee\n")],
    )])
    .await;
    let wiki = fixture.wiki();
    let base = wiki.snapshot().await.unwrap().sha.unwrap();
    let blob = wiki.get_page("HEAD", "A.md").await.unwrap().sha;
    let patch = |path: &str, expected_sha: &str, replacements: Vec<Replacement>| PagePatch {
        path: path.into(),
        expected_sha: expected_sha.into(),
        replacements,
    };
    let cases = [
        (
            patch("A.md", &blob, vec![replace("gamma", "x")]),
            ErrorKind::InvalidInput,
            "does not occur",
        ),
        (
            patch("A.md", &blob, vec![replace("alpha", "x")]),
            ErrorKind::InvalidInput,
            "occurs 2 times",
        ),
        (
            patch(
                "A.md",
                &blob,
                vec![replace("alpha beta", "x"), replace("beta alpha", "y")],
            ),
            ErrorKind::InvalidInput,
            "overlap",
        ),
        (
            patch("A.md", &"0".repeat(40), vec![replace("beta", "x")]),
            ErrorKind::Conflict,
            "expected_sha",
        ),
        (
            patch("C.md", &blob, vec![replace("beta", "x")]),
            ErrorKind::NotFound,
            "does not exist",
        ),
    ];
    for (bad, kind, words) in cases {
        let err = wiki.patch(&spec(&base), vec![bad]).await.unwrap_err();
        assert_eq!(err.kind, kind, "{err:?}");
        assert_eq!(err.outcome, Outcome::NotApplied);
        assert!(err.message.contains(words), "{}", err.message);
        assert!(!err.message.ends_with('.'), "{}", err.message);
    }
    assert_eq!(tip(&fixture.bare, "master"), base);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_keep_files_that_are_not_pages_and_never_clash_with_them() {
    let fixture = Fixture::sample().await;
    let others = add_files_that_are_not_pages(&fixture);
    let wiki = fixture.wiki();
    let base = wiki.snapshot().await.unwrap().sha.unwrap();

    // A new page inside the images folder and an edit of an existing page.
    let written = wiki
        .write(
            &spec(&base),
            vec![
                page("images/Gallery.md", "# Gallery\n"),
                page(
                    "guides/Setup.md",
                    "Install with cargo, then run setup.sh.\n",
                ),
            ],
        )
        .await
        .unwrap();
    assert_eq!(written.status, WriteStatus::Updated);
    assert_eq!(
        other_files(&fixture.bare),
        others,
        "untouched, modes included"
    );
    assert_eq!(
        git(&fixture.bare, &["show", "master:images/Gallery.md"]),
        "# Gallery\n"
    );
    fsck(&fixture.bare);

    // A patch next to them keeps them as well.
    let setup = wiki
        .get_page(&written.sha, "guides/Setup.md")
        .await
        .unwrap();
    let patched = wiki
        .patch(
            &spec(&written.sha),
            vec![PagePatch {
                path: "guides/Setup.md".into(),
                expected_sha: setup.sha,
                replacements: vec![replace("cargo", "cargo install")],
            }],
        )
        .await
        .unwrap();
    assert_eq!(patched.status, WriteStatus::Updated);
    assert_eq!(other_files(&fixture.bare), others);
    fsck(&fixture.bare);

    // New pages that would collide with a file, or put a folder where a file
    // is, are refused before anything is sent.
    fixture.server.clear_requests();
    for (path, shown) in [
        ("images/logo.png/About.md", "images/logo.png"),
        ("LICENSE/Terms.md", "LICENSE"),
        ("logo-link/x.md", "logo-link"),
    ] {
        let err = wiki
            .write(&spec(&patched.sha), vec![page(path, "x\n")])
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput, "{path}: {err:?}");
        assert_eq!(err.outcome, Outcome::NotApplied);
        assert!(
            err.message.contains(shown) && err.message.contains("not a page"),
            "{}",
            err.message
        );
    }
    assert_eq!(fixture.server.requests(), Vec::new());
    assert_eq!(tip(&fixture.bare, "master"), patched.sha);
    assert_eq!(other_files(&fixture.bare), others);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_base_is_a_conflict_and_leaves_the_ref_alone() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    let base = wiki.snapshot().await.unwrap().sha.unwrap();
    // Someone else writes with the git CLI.
    let work = fixture.dir.path().join("other");
    git(
        fixture.dir.path(),
        &[
            "clone",
            "--quiet",
            fixture.bare.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    std::fs::write(work.join("Home.md"), "# Human edit\n").unwrap();
    git(&work, &["commit", "--quiet", "-am", "Human edit"]);
    git(&work, &["push", "--quiet", "origin", "master"]);
    let moved = tip(&fixture.bare, "master");

    let err = wiki
        .write(&spec(&base), vec![page("Home.md", "# Bot edit\n")])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict);
    assert_eq!(err.outcome, Outcome::NotApplied);
    assert!(
        err.message.contains("read a fresh snapshot"),
        "{}",
        err.message
    );
    assert_eq!(tip(&fixture.bare, "master"), moved);

    // The same write on a base that is not in the wiki at all.
    let err = wiki
        .write(&spec(&"ab".repeat(20)), vec![page("Home.md", "x\n")])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict);
    assert_eq!(tip(&fixture.bare, "master"), moved);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matching_pages_are_no_change_on_the_base_and_on_a_newer_tip() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    let base = wiki.snapshot().await.unwrap().sha.unwrap();
    let written = wiki
        .write(&spec(&base), vec![page("Notes.md", "notes\n")])
        .await
        .unwrap();
    assert_eq!(written.status, WriteStatus::Updated);

    // Same content again on the same tip.
    let again = wiki
        .write(&spec(&written.sha), vec![page("Notes.md", "notes\n")])
        .await
        .unwrap();
    assert_eq!(again.status, WriteStatus::NoChange);
    assert_eq!(again.sha, written.sha);

    // A human commit on top touching another page.
    let work = fixture.dir.path().join("other");
    git(
        fixture.dir.path(),
        &[
            "clone",
            "--quiet",
            fixture.bare.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    std::fs::write(work.join("guides/Setup.md"), "changed\n").unwrap();
    git(&work, &["commit", "--quiet", "-am", "Human edit"]);
    git(&work, &["push", "--quiet", "origin", "master"]);
    let newer = tip(&fixture.bare, "master");
    let commits_before = git(&fixture.bare, &["rev-list", "--count", "master"]);

    let result = wiki
        .write(&spec(&written.sha), vec![page("Notes.md", "notes\n")])
        .await
        .unwrap();
    assert_eq!(result.status, WriteStatus::NoChange);
    assert_eq!(result.sha, newer);
    assert_eq!(tip(&fixture.bare, "master"), newer);
    assert_eq!(
        git(&fixture.bare, &["rev-list", "--count", "master"]),
        commits_before
    );

    // A partly matching batch on the newer tip is a conflict.
    let err = wiki
        .write(
            &spec(&written.sha),
            vec![page("Notes.md", "notes\n"), page("Other.md", "new\n")],
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict);

    // The mirror is at the base and the page differs there, so the write goes
    // straight to the push; meanwhile a human wrote the very same page. The
    // server's compare-and-swap refuses the push, and the newer tip already
    // has the page: no-change, no new commit.
    let base = wiki.snapshot().await.unwrap().sha.unwrap();
    git(&work, &["pull", "--quiet", "--ff-only", "origin", "master"]);
    std::fs::write(work.join("Same.md"), "same words\n").unwrap();
    git(&work, &["add", "Same.md"]);
    git(&work, &["commit", "--quiet", "-m", "Human writes it first"]);
    git(&work, &["push", "--quiet", "origin", "master"]);
    let human = tip(&fixture.bare, "master");
    fixture.server.clear_requests();
    let result = wiki
        .write(&spec(&base), vec![page("Same.md", "same words\n")])
        .await
        .unwrap();
    assert_eq!(result.status, WriteStatus::NoChange);
    assert_eq!(result.sha, human);
    assert_eq!(tip(&fixture.bare, "master"), human);
    assert_eq!(
        fixture.server.requests()[0].target,
        "/wiki.git/git-receive-pack",
        "the push went first"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_writers_on_one_base_one_wins_three_conflict() {
    let fixture = Fixture::sample().await;
    let base = fixture.wiki().snapshot().await.unwrap().sha.unwrap();
    // Four independent stores (own mirrors, own locks): they race at the server.
    let stores: Vec<_> = (0..4)
        .map(|i| fixture.other_store(&format!("mirrors-{i}")))
        .collect();
    let wikis: Vec<_> = stores
        .iter()
        .map(|store| store.wiki(&fixture.destination()).unwrap())
        .collect();
    for wiki in &wikis {
        wiki.snapshot().await.unwrap();
    }
    let mut tasks = Vec::new();
    for (i, wiki) in wikis.into_iter().enumerate() {
        let base = base.clone();
        tasks.push(tokio::spawn(async move {
            wiki.write(
                &spec(&base),
                vec![page("Home.md", &format!("writer {i}\n"))],
            )
            .await
        }));
    }
    let mut updated = Vec::new();
    let mut conflicts = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(result) => {
                assert_eq!(result.status, WriteStatus::Updated);
                updated.push(result.sha);
            }
            Err(err) => {
                assert_eq!(err.kind, ErrorKind::Conflict, "{err:?}");
                assert_eq!(err.outcome, Outcome::NotApplied);
                conflicts += 1;
            }
        }
    }
    assert_eq!(updated.len(), 1);
    assert_eq!(conflicts, 3);
    assert_eq!(tip(&fixture.bare, "master"), updated[0]);
    fsck(&fixture.bare);

    // Four writers through one store are serialized: still one winner.
    let wiki = fixture.wiki();
    let base = wiki.snapshot().await.unwrap().sha.unwrap();
    let mut tasks = Vec::new();
    for i in 0..4 {
        let wiki = wiki.clone();
        let base = base.clone();
        tasks.push(tokio::spawn(async move {
            wiki.write(&spec(&base), vec![page("Home.md", &format!("again {i}\n"))])
                .await
        }));
    }
    let mut kinds = Vec::new();
    for task in tasks {
        kinds.push(task.await.unwrap().map(|r| r.status).map_err(|e| e.kind));
    }
    assert_eq!(
        kinds
            .iter()
            .filter(|k| matches!(k, Ok(WriteStatus::Updated)))
            .count(),
        1,
        "{kinds:?}"
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| matches!(k, Err(ErrorKind::Conflict)))
            .count(),
        3,
        "{kinds:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_after_the_pack_left_is_outcome_unknown() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    let base = wiki.snapshot().await.unwrap().sha.unwrap();

    fixture.server.inject(Fault::DropReceivePackAnswer);
    let err = wiki
        .write(&spec(&base), vec![page("Home.md", "lost\n")])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::OutcomeUnknown, "{err:?}");
    assert_eq!(err.outcome, Outcome::Unknown);
    assert_eq!(tip(&fixture.bare, "master"), base);

    // The server applies the update and the answer is lost: still unknown to
    // the caller, and the message says where the wiki is now.
    fixture.server.inject(Fault::ApplyThenDropReceivePackAnswer);
    let err = wiki
        .write(&spec(&base), vec![page("Home.md", "landed\n")])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::OutcomeUnknown, "{err:?}");
    assert_eq!(err.outcome, Outcome::Unknown);
    let now = tip(&fixture.bare, "master");
    assert_ne!(now, base);
    assert!(err.message.contains(&now), "{}", err.message);
    fsck(&fixture.bare);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_failures_map_to_error_types() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    let base = wiki.snapshot().await.unwrap().sha.unwrap();
    for (status, kind) in [
        (403, ErrorKind::PermissionDenied),
        (404, ErrorKind::NotFound),
        (429, ErrorKind::RateLimited),
        (500, ErrorKind::UpstreamError),
    ] {
        fixture.server.inject(Fault::Status {
            suffix: "info/refs?service=git-upload-pack".into(),
            status,
        });
        let err = wiki.snapshot().await.unwrap_err();
        assert_eq!((status, err.kind), (status, kind), "{err:?}");
        assert_eq!(err.outcome, Outcome::NotApplied);
    }
    // A write whose pages already match asks the remote for its tip first.
    let home = git(&fixture.bare, &["show", "master:Home.md"]);
    fixture.server.inject(Fault::Status {
        suffix: "info/refs?service=git-receive-pack".into(),
        status: 403,
    });
    let err = wiki
        .write(&spec(&base), vec![page("Home.md", &home)])
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind, err.outcome),
        (ErrorKind::PermissionDenied, Outcome::NotApplied),
        "{err:?}"
    );
    // Refusals of the POST itself are known not to have been applied; a 5xx
    // after the pack left is not.
    for (status, kind, outcome) in [
        (403, ErrorKind::PermissionDenied, Outcome::NotApplied),
        (429, ErrorKind::RateLimited, Outcome::NotApplied),
        (502, ErrorKind::OutcomeUnknown, Outcome::Unknown),
    ] {
        fixture.server.inject(Fault::Status {
            suffix: "/git-receive-pack".into(),
            status,
        });
        let err = wiki
            .write(&spec(&base), vec![page("Home.md", "x\n")])
            .await
            .unwrap_err();
        assert_eq!(
            (status, err.kind, err.outcome),
            (status, kind, outcome),
            "{err:?}"
        );
    }
    assert_eq!(tip(&fixture.bare, "master"), base);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_write_costs_two_requests_and_no_fetch() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    let base = wiki.snapshot().await.unwrap().sha.unwrap();
    let blob = wiki.get_page(&base, "Home.md").await.unwrap().sha;
    fixture.server.clear_requests();
    let result = wiki
        .patch(
            &spec(&base),
            vec![PagePatch {
                path: "Home.md".into(),
                expected_sha: blob,
                replacements: vec![replace("v2", "v3")],
            }],
        )
        .await
        .unwrap();
    assert_eq!(result.status, WriteStatus::Updated);
    let seen: Vec<String> = fixture
        .server
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.target))
        .collect();
    assert_eq!(
        seen,
        [
            "POST /wiki.git/git-receive-pack",
            "GET /wiki.git/info/refs?service=git-upload-pack",
        ]
    );
    // The next snapshot finds the new tip in the mirror: one request, no fetch.
    fixture.server.clear_requests();
    assert_eq!(wiki.snapshot().await.unwrap().sha.unwrap(), result.sha);
    let seen: Vec<String> = fixture
        .server
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.target))
        .collect();
    assert_eq!(seen, ["GET /wiki.git/info/refs?service=git-upload-pack"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_at_their_exact_boundaries_before_any_request() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    let base = wiki.snapshot().await.unwrap().sha.unwrap();
    let full = "x".repeat(64 * 1024);
    fixture.server.clear_requests();

    let refusals: Vec<(Vec<PageWrite>, ErrorKind)> = vec![
        (
            vec![page("Big.md", &format!("{full}y"))],
            ErrorKind::LimitExceeded,
        ),
        (
            (0..21).map(|i| page(&format!("p{i}.md"), "x")).collect(),
            ErrorKind::LimitExceeded,
        ),
        (vec![], ErrorKind::InvalidInput),
        (vec![page("notes.txt", "x")], ErrorKind::InvalidInput),
        (vec![page("a/../b.md", "x")], ErrorKind::InvalidInput),
        (vec![page(".git/config.md", "x")], ErrorKind::InvalidInput),
        (vec![page("con.md", "x")], ErrorKind::InvalidInput),
        (vec![page("a\u{200b}b.md", "x")], ErrorKind::InvalidInput),
        (
            vec![page(&format!("{}.md", "p".repeat(238)), "x")],
            ErrorKind::InvalidInput,
        ),
        (
            (0..5).map(|i| page(&format!("p{i}.md"), &full)).collect(),
            ErrorKind::LimitExceeded,
        ),
        (
            vec![page("Same.md", "1"), page("same.md", "2")],
            ErrorKind::InvalidInput,
        ),
    ];
    for (pages, kind) in refusals {
        let err = wiki.write(&spec(&base), pages).await.unwrap_err();
        assert_eq!(err.kind, kind, "{err:?}");
        assert_eq!(err.outcome, Outcome::NotApplied);
    }
    let mut long_message = spec(&base);
    long_message.message = "m".repeat(513);
    assert_eq!(
        wiki.write(&long_message, vec![page("a.md", "x")])
            .await
            .unwrap_err()
            .kind,
        ErrorKind::LimitExceeded
    );
    let mut other_destination = spec(&base);
    other_destination.expected_destination = Some("octo/other".into());
    assert_eq!(
        wiki.write(&other_destination, vec![page("a.md", "x")])
            .await
            .unwrap_err()
            .kind,
        ErrorKind::DestinationChanged
    );
    assert_eq!(
        fixture.server.requests(),
        Vec::new(),
        "refusals must not touch the network"
    );

    // The exact boundaries pass and publish.
    let mut max_message = spec(&base);
    max_message.message = "m".repeat(512);
    let result = wiki
        .write(
            &max_message,
            vec![
                page("Big.md", &full),
                page(&format!("{}.md", "p".repeat(237)), "x"),
            ],
        )
        .await
        .unwrap();
    assert_eq!(result.status, WriteStatus::Updated);
    assert_eq!(
        git(&fixture.bare, &["cat-file", "-s", "master:Big.md"]).trim(),
        "65536"
    );
    let twenty: Vec<PageWrite> = (0..20)
        .map(|i| page(&format!("many/p{i}.md"), "x"))
        .collect();
    let result = wiki.write(&spec(&result.sha), twenty).await.unwrap();
    assert_eq!(result.status, WriteStatus::Updated);
    let four_full: Vec<PageWrite> = (0..4)
        .map(|i| page(&format!("full/p{i}.md"), &full))
        .collect();
    let result = wiki.write(&spec(&result.sha), four_full).await.unwrap();
    assert_eq!(result.status, WriteStatus::Updated);
    fsck(&fixture.bare);

    // New paths may not clash with existing ones.
    for clash in ["home.md", "Home.md/Sub.md", "GUIDES/setup.md"] {
        let err = wiki
            .write(&spec(&result.sha), vec![page(clash, "x")])
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidInput, "{clash}: {err:?}");
    }
    let _ = DESTINATION;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_never_appears_in_results_errors_or_the_mirror() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    let snapshot = wiki.snapshot().await.unwrap();
    let base = snapshot.sha.clone().unwrap();
    let mut outputs = vec![serde_json::to_string(&snapshot).unwrap()];
    outputs.push(serde_json::to_string(&wiki.list_pages("HEAD").await.unwrap()).unwrap());
    outputs.push(serde_json::to_string(&wiki.history("HEAD", None, 10).await.unwrap()).unwrap());
    let written = wiki
        .write(&spec(&base), vec![page("T.md", "t\n")])
        .await
        .unwrap();
    outputs.push(serde_json::to_string(&written).unwrap());
    let conflict = wiki
        .write(&spec(&base), vec![page("T.md", "u\n")])
        .await
        .unwrap_err();
    outputs.push(serde_json::to_string(&conflict).unwrap());
    fixture.server.inject(Fault::DropReceivePackAnswer);
    let lost = wiki
        .write(&spec(&written.sha), vec![page("T.md", "v\n")])
        .await
        .unwrap_err();
    outputs.push(serde_json::to_string(&lost).unwrap());
    outputs.push(format!("{lost:?} {lost} {:?}", fixture.destination()));
    fixture.server.inject(Fault::Status {
        suffix: "service=git-upload-pack".into(),
        status: 500,
    });
    let failed = wiki.snapshot().await.unwrap_err();
    outputs.push(serde_json::to_string(&failed).unwrap());
    for output in &outputs {
        assert!(!output.contains(TOKEN), "{output}");
    }
    assert!(
        outputs[4].contains("\"type\":\"conflict\""),
        "{}",
        outputs[4]
    );
    assert!(
        outputs[4].contains("\"outcome\":\"not_applied\""),
        "{}",
        outputs[4]
    );
    assert!(
        outputs[3].contains("\"status\":\"updated\""),
        "{}",
        outputs[3]
    );
    assert_eq!(
        files_containing(&fixture.mirrors_dir(), TOKEN.as_bytes()),
        Vec::<std::path::PathBuf>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_end_calls_and_say_whether_the_update_may_have_left() {
    let fixture = Fixture::sample().await;
    let base = fixture.wiki().snapshot().await.unwrap().sha.unwrap();
    let store = fixture
        .other_store("short-deadline")
        .with_deadline(std::time::Duration::from_secs(4));
    let wiki = store.wiki(&fixture.destination()).unwrap();
    wiki.snapshot().await.unwrap();

    // A hanging read: timeout, nothing written.
    fixture.server.inject(Fault::Hang {
        suffix: "service=git-upload-pack".into(),
    });
    let err = wiki.snapshot().await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout, "{err:?}");
    assert_eq!(err.outcome, Outcome::NotApplied);

    // A write whose receive-pack never answers: the pack left, so unknown.
    fixture.server.inject(Fault::Hang {
        suffix: "/git-receive-pack".into(),
    });
    let err = wiki
        .write(&spec(&base), vec![page("Home.md", "slow\n")])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::OutcomeUnknown, "{err:?}");
    assert_eq!(err.outcome, Outcome::Unknown);
    assert_eq!(tip(&fixture.bare, "master"), base);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_not_followed_and_plain_http_needs_loopback() {
    let fixture = Fixture::sample().await;
    let wiki = fixture.wiki();
    fixture.server.inject(Fault::Redirect {
        suffix: "service=git-upload-pack".into(),
        location: fixture
            .server
            .url("elsewhere.git/info/refs?service=git-upload-pack"),
    });
    let err = wiki.snapshot().await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::ConfigurationError, "{err:?}");
    assert!(
        err.message.contains("does not follow redirects"),
        "{}",
        err.message
    );
    assert!(
        fixture
            .server
            .requests()
            .iter()
            .all(|r| !r.target.contains("elsewhere")),
        "{:?}",
        fixture.server.requests()
    );

    for url in [
        "http://example.org/wiki.git",
        "ftp://127.0.0.1/wiki.git",
        "https://user:pw@example.org/w.git",
    ] {
        let destination = teammem::wiki::Destination {
            id: DESTINATION.into(),
            remote: teammem::wiki::Remote::Http {
                url: url.into(),
                token: Some(teammem::wiki::Secret::new(TOKEN)),
            },
        };
        let err = fixture.store.wiki(&destination).err().expect("refused");
        assert_eq!(err.kind, ErrorKind::ConfigurationError, "{url}");
        assert!(!err.message.contains(TOKEN));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_sharing_a_mirror_are_serialized_by_its_file_lock() {
    let fixture = Fixture::sample().await;
    // Two stores on one mirrors dir stand for the daemon and a writer child:
    // separate in-process locks, one mirror on disk.
    let first = fixture.store.wiki(&fixture.destination()).unwrap();
    let second_store = teammem::wiki::WikiStore::new(fixture.mirrors_dir());
    let second = second_store.wiki(&fixture.destination()).unwrap();
    let work = fixture.dir.path().join("other");
    git(
        fixture.dir.path(),
        &[
            "clone",
            "--quiet",
            fixture.bare.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    for round in 0..4 {
        // New commits arrive, then both fetch at once.
        std::fs::write(work.join("Home.md"), format!("round {round}\n")).unwrap();
        git(&work, &["commit", "--quiet", "-am", "Human edit"]);
        git(&work, &["push", "--quiet", "origin", "master"]);
        let (a, b) = tokio::join!(first.snapshot(), second.snapshot());
        let expected = tip(&fixture.bare, "master");
        assert_eq!(a.unwrap().sha.unwrap(), expected);
        assert_eq!(b.unwrap().sha.unwrap(), expected);
        // And both write at once on that base: one wins, one conflicts.
        let on_expected = spec(&expected);
        let (a, b) = tokio::join!(
            first.write(&on_expected, vec![page(&format!("A{round}.md"), "a\n")]),
            second.write(&on_expected, vec![page(&format!("B{round}.md"), "b\n")]),
        );
        let kinds = [
            a.map(|r| r.status).map_err(|e| e.kind),
            b.map(|r| r.status).map_err(|e| e.kind),
        ];
        assert_eq!(
            kinds
                .iter()
                .filter(|k| matches!(k, Ok(WriteStatus::Updated)))
                .count(),
            1,
            "{kinds:?}"
        );
        assert_eq!(
            kinds
                .iter()
                .filter(|k| matches!(k, Err(ErrorKind::Conflict)))
                .count(),
            1,
            "{kinds:?}"
        );
        git(&work, &["pull", "--quiet", "--ff-only", "origin", "master"]);
    }
    fsck(&fixture.bare);
}
