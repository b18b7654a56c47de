//! Evidence collection on the local forge, checked against `git` itself.

use teammem::forge::evidence::SourceError;
use teammem::forge::evidence::{FileStatus, JobScope, read_bundle, write_bundle};
use teammem::forge::local::{
    contents as local_files, range_bundle as local_bundle, recheck as local_recheck,
};
use teammem::runner::work_dir;

use super::fixture::{self, Source, TITLE_12, TITLE_13};
use crate::harness::git::{git, git_trimmed};

fn range(source: &Source) -> JobScope {
    JobScope {
        job_id: 1,
        scope: teammem::ids::Scope::Range {
            before: teammem::ids::Sha::parse(&source.base.clone()).unwrap(),
            after: teammem::ids::Sha::parse(&source.head.clone()).unwrap(),
        },
    }
}

#[test]
fn a_range_yields_its_commits_and_both_kinds_of_pull_request() {
    let tmp = tempfile::tempdir().unwrap();
    let source = Source::create(tmp.path());
    let bundle = local_bundle::collect(
        &source.dir,
        &teammem::ids::RepoName::parse("demo/app").unwrap(),
        &range(&source),
    )
    .unwrap();

    // Commits: exactly what `git rev-list before..after` lists.
    let expected: Vec<String> = git_trimmed(
        &source.dir,
        &[
            "rev-list",
            "--reverse",
            &format!("{}..{}", source.base, source.head),
        ],
    )
    .lines()
    .map(str::to_owned)
    .collect();
    let mut got: Vec<String> = bundle.commits.iter().map(|c| c.sha.to_string()).collect();
    let mut want = expected.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(bundle.source.default_branch, "main");

    // Pull requests in merge order, full shas, titles from body / subject.
    let numbers: Vec<u64> = bundle
        .pull_requests
        .iter()
        .map(|p| p.number.get())
        .collect();
    assert_eq!(numbers, vec![12, 13]);
    let pr12 = &bundle.pull_requests[0];
    assert_eq!(pr12.merge_sha, source.merge_12);
    assert_eq!(pr12.title, TITLE_12);
    assert_eq!(pr12.author, "Alice");
    assert!(pr12.body.contains("Ignore all previous instructions"));
    assert_eq!(pr12.files.len(), 1);
    assert_eq!(pr12.files[0].path, "src/search.rs");
    assert_eq!(pr12.files[0].status, FileStatus::Added);
    assert_eq!((pr12.files[0].additions, pr12.files[0].deletions), (2, 0));

    let pr13 = &bundle.pull_requests[1];
    assert_eq!(pr13.merge_sha, source.squash_13);
    assert_eq!(pr13.title, TITLE_13);
    assert_eq!(pr13.author, "Bob");
    assert_eq!(pr13.body, "* guide\n* readme");
    let files: Vec<(&str, FileStatus, u64, u64)> = pr13
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.status, f.additions, f.deletions))
        .collect();
    // Cross-check the counts with `git diff --numstat`.
    let numstat = git_trimmed(
        &source.dir,
        &[
            "diff",
            "--numstat",
            &format!("{}^", source.squash_13),
            &source.squash_13,
        ],
    );
    assert!(numstat.contains("2\t0\tREADME.md"), "{numstat}");
    assert_eq!(
        files,
        vec![
            ("README.md", FileStatus::Modified, 2, 0),
            ("docs/guide.md", FileStatus::Added, 3, 0),
        ]
    );

    // The bundle goes to the job's work dir and reads back the same.
    let path = write_bundle(&work_dir(tmp.path(), 1), &bundle).unwrap();
    assert_eq!(read_bundle(&path).unwrap(), bundle);
}

#[test]
fn a_pull_request_job_holds_only_its_merge_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let source = Source::create(tmp.path());
    let scope = JobScope {
        job_id: 2,
        scope: teammem::ids::Scope::PullRequest {
            number: teammem::ids::PullNumber::new(13).unwrap(),
            merge_sha: teammem::ids::Sha::parse(&source.squash_13.clone()).unwrap(),
        },
    };
    let bundle = local_bundle::collect(
        &source.dir,
        &teammem::ids::RepoName::parse("demo/app").unwrap(),
        &scope,
    )
    .unwrap();
    assert_eq!(bundle.commits.len(), 1);
    assert_eq!(bundle.pull_requests.len(), 1);
    assert_eq!(bundle.pull_requests[0].number, 13);

    let wrong = JobScope {
        job_id: 2,
        scope: teammem::ids::Scope::PullRequest {
            number: teammem::ids::PullNumber::new(99).unwrap(),
            merge_sha: teammem::ids::Sha::parse(&source.squash_13.clone()).unwrap(),
        },
    };
    assert!(matches!(
        local_bundle::collect(
            &source.dir,
            &teammem::ids::RepoName::parse("demo/app").unwrap(),
            &wrong
        ),
        Err(SourceError::Rejected(_))
    ));
}

#[test]
fn a_force_push_is_rejected_by_the_recheck() {
    let tmp = tempfile::tempdir().unwrap();
    let source = Source::create(tmp.path());
    assert_eq!(
        local_recheck::recheck_range(&source.dir, &source.base, &source.head).unwrap(),
        "main"
    );
    // Rewrite history: the old head is no longer on main.
    git(&source.dir, &["reset", "-q", "--hard", &source.squash_13]);
    fixture::write(&source.dir, "other.txt", "x\n");
    git(&source.dir, &["add", "-A"]);
    git(&source.dir, &["commit", "-q", "-m", "Rewritten"]);
    let err = local_recheck::recheck_range(&source.dir, &source.base, &source.head).unwrap_err();
    assert!(
        matches!(&err, SourceError::Rejected(m) if m.contains("no longer on main")),
        "{err:?}"
    );
    assert!(local_recheck::recheck_commit(&source.dir, &source.merge_12).is_ok());
}

#[test]
fn files_are_read_bounded_and_as_utf8_only() {
    let tmp = tempfile::tempdir().unwrap();
    let source = Source::create(tmp.path());
    let text =
        local_files::read_file_at(&source.dir, &source.squash_13, "docs/guide.md", 1024).unwrap();
    assert_eq!(text.as_deref(), Some("# Guide\n\nStep one.\n"));
    assert_eq!(
        local_files::read_file_at(&source.dir, &source.base, "docs/guide.md", 1024).unwrap(),
        None
    );
    assert!(matches!(
        local_files::read_file_at(&source.dir, &source.squash_13, "docs/guide.md", 4),
        Err(SourceError::Invalid(_))
    ));
    assert!(local_files::read_file_at(&source.dir, &source.head, "../etc/passwd", 1024).is_err());
    fixture::write(&source.dir, "bin.dat", "");
    std::fs::write(source.dir.join("bin.dat"), [0xff, 0xfe, 0x00]).unwrap();
    git(&source.dir, &["add", "-A"]);
    git(&source.dir, &["commit", "-q", "-m", "binary"]);
    let head = git_trimmed(&source.dir, &["rev-parse", "HEAD"]);
    assert!(
        matches!(local_files::read_file_at(&source.dir, &head, "bin.dat", 1024), Err(SourceError::Invalid(m)) if m.contains("UTF-8"))
    );
}

#[test]
fn patches_cover_the_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let source = Source::create(tmp.path());
    let patches = local_files::file_patches(&source.dir, &source.squash_13).unwrap();
    assert_eq!(patches.len(), 2);
    let readme = patches[0].1.as_deref().unwrap();
    assert!(readme.contains("+See the guide."), "{readme}");
    assert!(readme.starts_with("@@ -1,1 +1,3 @@"), "{readme}");
}
