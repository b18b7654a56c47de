//! A source with git submodules, through the real `teammem serve` (local
//! forge, builtin agent): pull requests that add a submodule (a gitlink,
//! tree mode 160000, and its `.gitmodules` entry), move its pin, move it to
//! another folder and remove it are each recorded like any other change,
//! and no job fails on the gitlink (it is not a blob: the superproject does
//! not hold the commit it points at). "What is here" lists a submodule as
//! one, with the commit it pins at the job's tip and no purpose; an area
//! that holds only a submodule is not "removed". The git CLI builds the
//! source and reads the wiki back.

use std::path::Path;

use super::daemon_client::assert_each_entry_once;
use super::fixture::{self, page};
use super::one_source::OneSource;
use crate::harness::git::{git, git_trimmed};

const SECRET: &str = "submodules dispatch secret, at least 32 bytes long";

/// A commit of another repository (the submodule's), made with the git CLI
/// in `dir`: the superproject never holds it.
fn foreign_commit(dir: &Path, text: &str) -> String {
    fixture::write(dir, "zlib.c", text);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", text]);
    git_trimmed(dir, &["rev-parse", "HEAD"])
}

/// Stages a gitlink at `path` pinning `commit`.
fn pin(dir: &Path, path: &str, commit: &str) {
    git(
        dir,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{commit},{path}"),
        ],
    );
}

fn gitmodules(paths: &[&str]) -> String {
    paths
        .iter()
        .map(|p| {
            format!("[submodule \"{p}\"]\n\tpath = {p}\n\turl = https://example.org/{p}.git\n")
        })
        .collect()
}

/// Commits what is staged, and `.gitmodules` as it is in the work tree, as
/// pull request `number` (the submodules are not checked out: `git add -A`
/// would stage their removal).
fn squash(dir: &Path, number: u64, title: &str) -> String {
    git(dir, &["add", "-A", "--", ".gitmodules"]);
    git(
        dir,
        &["commit", "-q", "-m", &format!("{title} (#{number})")],
    );
    git_trimmed(dir, &["rev-parse", "HEAD"])
}

#[tokio::test]
async fn submodules_added_moved_and_removed_are_recorded_and_listed_as_submodules() {
    let repos = tempfile::tempdir().unwrap();
    let upstream = repos.path().join("zlib");
    std::fs::create_dir_all(&upstream).unwrap();
    git(&upstream, &["init", "-q", "-b", "main"]);
    let v1 = foreign_commit(&upstream, "v1");
    let v2 = foreign_commit(&upstream, "v2");

    let dir = repos.path().join("app");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    fixture::write(&dir, "README.md", "# app\n");
    fixture::write(
        &dir,
        "src/main.rs",
        "//! The command line.\n\nfn main() {}\n",
    );
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "Initial commit"]);
    let base = git_trimmed(&dir, &["rev-parse", "HEAD"]);

    // #1: a submodule in a folder of its own, and one at the root.
    fixture::write(&dir, ".gitmodules", &gitmodules(&["vendor/zlib", "theme"]));
    pin(&dir, "vendor/zlib", &v1);
    pin(&dir, "theme", &v1);
    let added = squash(&dir, 1, "Vendor zlib and the docs theme");
    // #2: the pin moves.
    pin(&dir, "vendor/zlib", &v2);
    let bumped = squash(&dir, 2, "Bump zlib");
    // #3: the submodule moves to another folder.
    git(&dir, &["rm", "-q", "--cached", "vendor/zlib"]);
    pin(&dir, "third_party/zlib", &v2);
    fixture::write(
        &dir,
        ".gitmodules",
        &gitmodules(&["third_party/zlib", "theme"]),
    );
    let moved = squash(&dir, 3, "Move zlib to third_party");
    // #4: both are removed.
    git(&dir, &["rm", "-q", "--cached", "third_party/zlib", "theme"]);
    std::fs::remove_file(dir.join(".gitmodules")).unwrap();
    let removed = squash(&dir, 4, "Drop the submodules");
    let tree = git(&dir, &["ls-tree", "-r", &moved]);
    assert!(
        tree.contains(&format!("160000 commit {v2}\tthird_party/zlib")),
        "{tree}"
    );

    let one = OneSource::of(repos, &dir, SECRET)
        .token("submodules")
        .start();
    let wiki = &one.wiki;

    let line = |path: &str, pin: &str| {
        format!(
            "- {path} — a submodule: another repository's commit `{pin}`, its files not read here <!-- teammem:submodule -->\n"
        )
    };
    let listed = |page: &str| -> Vec<String> {
        let start = page.find("<!-- teammem:what-is-here -->").unwrap();
        let end = page.find("<!-- teammem:what-is-here-end -->").unwrap();
        page[start..end]
            .lines()
            .skip(1)
            .map(str::to_owned)
            .collect()
    };

    // Added: listed as submodules with their pins; an area holding only a
    // submodule is there, not removed.
    one.succeeds(1, &base, &added).await;
    let vendor = page(wiki, "Area-vendor.md");
    assert!(vendor.contains(&line("vendor/zlib", &v1)), "{vendor}");
    assert_eq!(listed(&vendor).len(), 1, "{vendor}");
    assert!(!vendor.contains("Removed"), "{vendor}");
    let root = page(wiki, "Area-root.md");
    assert!(root.contains(&line("theme", &v1)), "{root}");
    assert!(
        root.contains("- .gitmodules <!-- teammem:file -->"),
        "{root}"
    );
    let home = page(wiki, "Home.md");
    assert!(
        home.contains("- [vendor](Area-vendor) <!-- teammem:area:vendor -->"),
        "{home}"
    );
    assert!(!home.contains("Removed areas"), "{home}");

    // The pin moves: the list follows it.
    one.succeeds(2, &added, &bumped).await;
    let vendor = page(wiki, "Area-vendor.md");
    assert!(vendor.contains(&line("vendor/zlib", &v2)), "{vendor}");
    assert!(!vendor.contains(&v1), "{vendor}");

    // Moved to another folder: listed there; its old folder is gone.
    one.succeeds(3, &bumped, &moved).await;
    let third = page(wiki, "Area-third_party.md");
    assert!(third.contains(&line("third_party/zlib", &v2)), "{third}");
    assert!(third.contains("vendor/zlib → third_party/zlib"), "{third}");
    let vendor = page(wiki, "Area-vendor.md");
    assert!(vendor.contains("It was removed by #3"), "{vendor}");

    // Removed: its folder is gone, and the root lists it no more.
    one.succeeds(4, &moved, &removed).await;
    let third = page(wiki, "Area-third_party.md");
    assert!(third.contains("It was removed by #4"), "{third}");
    let root = page(wiki, "Area-root.md");
    assert!(!root.contains("- theme "), "{root}");
    // Only README.md is left at the root (its purpose cited at whichever
    // commit its line was read).
    let left = listed(&root);
    assert!(
        left.len() == 1
            && left[0].starts_with("- README.md — app <!-- teammem:evidence README.md@"),
        "{root}"
    );
    assert_each_entry_once(
        wiki,
        &[
            (&added, &["Area-vendor.md", "Area-root.md"]),
            (&bumped, &["Area-vendor.md"]),
            (
                &moved,
                &["Area-vendor.md", "Area-third_party.md", "Area-root.md"],
            ),
            (&removed, &["Area-third_party.md", "Area-root.md"]),
        ],
    );
    git(wiki, &["fsck", "--strict", "--no-progress"]);
    assert!(one.daemon.terminate().success());
}
