//! A wiki a person edited heavily between two jobs, through the real
//! `teammem serve` (local forge, builtin agent), the person's edits made
//! with the git CLI in a clone of the wiki: pages teammem keeps moved into a
//! folder, renamed, renamed in case only; the Changelog's anchor deleted; a
//! section's end marker removed and a person's paragraph put inside
//! another; Home's topics anchor mangled; a quarter page deleted and
//! another moved into a folder; an area page copied into two folders and
//! deleted at the root (two pages of one name).
//!
//! Invariants checked: the next job succeeds and records its pull request
//! once on each page family it belongs to; every line the person wrote is
//! still there, and the pages the person moved or renamed are left exactly
//! as the person left them; what teammem owns and can find is repaired
//! (a missing anchor or section comes back at the end of its page) and
//! what a person changed inside teammem's sections is left alone, with a
//! note in the job's receipt; `git fsck --strict` is clean. And a page a
//! person filled past the 64 KiB page limit is left alone, the job
//! succeeding, instead of the write being refused.

use std::path::Path;

use super::fixture::{self, page, squash};
use super::one_source::OneSource;
use crate::harness::git::{git, git_trimmed};

const SECRET: &str = "person edits dispatch secret, at least 32 bytes";

fn pages(wiki: &Path) -> Vec<String> {
    git(wiki, &["ls-tree", "-r", "--name-only", "master"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// How many times the entry of `sha` is on the pages whose paths `pick`
/// accepts.
fn count(wiki: &Path, sha: &str, pick: impl Fn(&str) -> bool) -> usize {
    pages(wiki)
        .iter()
        .filter(|p| pick(p))
        .map(|p| {
            page(wiki, p)
                .matches(&format!("<!-- teammem:{sha} -->"))
                .count()
        })
        .sum()
}

/// Edits `file` in `clone` with `edit` (the whole text in, the whole text out).
fn edit(clone: &Path, file: &str, edit: impl FnOnce(String) -> String) {
    let path = clone.join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    std::fs::write(&path, edit(text)).unwrap();
}

#[tokio::test]
async fn a_heavily_edited_wiki_is_repaired_where_teammem_owns_it_and_left_alone_elsewhere() {
    let repos = tempfile::tempdir().unwrap();
    let dir = repos.path().join("app");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    fixture::write(&dir, "README.md", "# app\n\nThe app.\n");
    fixture::write(&dir, "src/lib.rs", "//! The library.\n\npub fn a() {}\n");
    fixture::write(&dir, "docs/guide.md", "# Guide\n\nHow to use it.\n");
    fixture::write(&dir, "web/app.js", "// The web client.\n");
    fixture::write(&dir, "lib/x.rs", "//! The x library.\n");
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "Initial commit"]);
    let base = git_trimmed(&dir, &["rev-parse", "HEAD"]);
    let touch = |n: u64| {
        fixture::write(
            &dir,
            "src/lib.rs",
            &format!("//! The library.\n\npub fn a{n}() {{}}\n"),
        );
        fixture::write(&dir, "docs/guide.md", &format!("# Guide\n\nStep {n}.\n"));
        fixture::write(&dir, "README.md", &format!("# app\n\nThe app, {n}.\n"));
        fixture::write(&dir, "web/app.js", &format!("// The web client.\n// {n}\n"));
        fixture::write(&dir, "lib/x.rs", &format!("//! The x library.\n// {n}\n"));
    };
    touch(1);
    let first = squash(&dir, 1, "First change");
    touch(2);
    let second = squash(&dir, 2, "Second change");
    touch(3);
    let third = squash(&dir, 3, "Third change");

    let one = OneSource::of(repos, &dir, SECRET)
        .token("person-edits")
        .start();
    let wiki = &one.wiki;
    one.succeeds(1, &base, &first).await;
    let before = pages(wiki);
    for p in [
        "Area-src.md",
        "Area-docs.md",
        "Area-root.md",
        "Area-web.md",
        "Changelog.md",
        "Archive.md",
    ] {
        assert!(before.iter().any(|x| x == p), "{p} in {before:?}");
    }
    let quarter_of = |family: &str| {
        before
            .iter()
            .find(|p| p.starts_with(&format!("{family}-")) && p.ends_with(".md"))
            .unwrap_or_else(|| panic!("a {family} quarter page in {before:?}"))
            .clone()
    };
    let quarter = quarter_of("Changelog");
    let web_quarter = quarter_of("Area-web");

    // A person edits the wiki heavily, in one commit.
    let work = tempfile::tempdir().unwrap();
    let clone = work.path().join("wiki");
    git(
        work.path(),
        &[
            "clone",
            "-q",
            wiki.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    std::fs::create_dir_all(clone.join("Guides")).unwrap();
    git(&clone, &["mv", "Area-src.md", "Guides/Area-src.md"]);
    git(&clone, &["mv", "Area-docs.md", "Documentation.md"]);
    git(&clone, &["mv", "Area-root.md", "area-ROOT.md"]);
    git(&clone, &["rm", "-q", &quarter]);
    std::fs::create_dir_all(clone.join("Old")).unwrap();
    git(&clone, &["mv", &web_quarter, &format!("Old/{web_quarter}")]);
    for folder in ["A", "B"] {
        std::fs::create_dir_all(clone.join(folder)).unwrap();
        std::fs::copy(
            clone.join("Area-lib.md"),
            clone.join(folder).join("Area-lib.md"),
        )
        .unwrap();
    }
    git(&clone, &["rm", "-q", "Area-lib.md"]);
    edit(&clone, "Changelog.md", |t| {
        let t = t.replace("<!-- teammem:changelog -->\n", "");
        t.replacen(
            "# Changelog\n",
            "# Changelog\n\nCurated by the team: ask Ada first.\n",
            1,
        )
    });
    edit(&clone, "Area-web.md", |t| {
        let t = t.replace("<!-- teammem:who-knows-end -->\n", "");
        t.replace(
            "<!-- teammem:what-is-here -->\n",
            "<!-- teammem:what-is-here -->\nA person's note: the client is being rewritten.\n",
        )
    });
    edit(&clone, "Guides/Area-src.md", |t| {
        t.replace("<!-- teammem:archives -->", "<!-- teammem:archivez -->")
    });
    edit(&clone, "area-ROOT.md", |t| {
        let start = t.find("## Who knows this area").unwrap();
        let end = t.find("## Recent changes").unwrap();
        format!("{}{}", &t[..start], &t[end..])
    });
    edit(&clone, "Home.md", |t| {
        let t = t.replace("<!-- teammem:topics -->", "<!-- teammem:topicz -->");
        format!("{t}\nOur own notes, kept by hand.\n")
    });
    edit(&clone, "Archive.md", |t| {
        t.replace("<!-- teammem:archive-index-end -->\n", "Older ones: ask.\n")
    });
    git(&clone, &["add", "-A"]);
    git(
        &clone,
        &["commit", "-q", "-m", "A person reorganises the wiki"],
    );
    git(&clone, &["push", "-q", "origin", "HEAD:master"]);
    let person: std::collections::BTreeMap<String, String> = pages(wiki)
        .into_iter()
        .map(|p| {
            let text = page(wiki, &p);
            (p, text)
        })
        .collect();

    let job = one.succeeds(2, &first, &second).await;
    let summary = job["receipt"]["summary"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let after = pages(wiki);

    // Nothing the person wrote is gone: every line without a teammem
    // marker on each page the person left is still on it.
    for (path, text) in &person {
        let now = page(wiki, path);
        for line in text.lines().filter(|l| !l.contains("<!-- teammem:")) {
            assert!(
                now.lines().any(|l| l == line),
                "{path} lost {line:?}:\n{now}"
            );
        }
    }
    // A page moved into a folder, or renamed in case only, is still the
    // page: patched where the person put it, no second page of its name.
    let entry = |sha: &str| format!("<!-- teammem:{sha} -->");
    for (moved, gone) in [
        ("Guides/Area-src.md", "Area-src.md"),
        ("area-ROOT.md", "Area-root.md"),
    ] {
        assert!(
            !after.iter().any(|p| p == gone),
            "{gone} written again: {after:?}"
        );
        let text = page(wiki, moved);
        assert_eq!(text.matches(&entry(&second)).count(), 1, "{text}");
        assert_eq!(text.matches(&entry(&first)).count(), 1, "{text}");
    }
    // A mangled archives line: a new one comes back above the entries, and
    // the entries already on quarter pages are not said to predate them.
    let src = page(wiki, "Guides/Area-src.md");
    assert_eq!(src.matches("<!-- teammem:archives -->").count(), 1, "{src}");
    assert!(!src.contains("<!-- teammem:before-archives -->"), "{src}");
    // A kept section a person deleted whole comes back at the page's end.
    let root = page(wiki, "area-ROOT.md");
    assert_eq!(
        root.matches("<!-- teammem:who-knows -->").count(),
        1,
        "{root}"
    );
    assert!(
        root.find("<!-- teammem:who-knows-end -->") > root.find(&entry(&second)),
        "{root}"
    );
    // A quarter page moved into a folder gets its new entry there.
    assert!(!after.contains(&web_quarter), "{web_quarter} written again");
    let moved_quarter = page(wiki, &format!("Old/{web_quarter}"));
    assert_eq!(
        moved_quarter.matches(&entry(&second)).count(),
        1,
        "{moved_quarter}"
    );
    // Two pages of one name: neither is touched, no third is written, and
    // the receipt says so; the entry is on the area's quarter page.
    assert!(!after.iter().any(|p| p == "Area-lib.md"), "{after:?}");
    for copy in ["A/Area-lib.md", "B/Area-lib.md"] {
        assert_eq!(page(wiki, copy), person[copy]);
    }
    assert!(
        summary.contains("Area-lib.md was not written: the wiki already has a page of that name (A/Area-lib.md, B/Area-lib.md)"),
        "{summary}"
    );
    assert_eq!(count(wiki, &second, |p| p.starts_with("Area-lib-")), 1);
    // A page renamed to another name is the person's: left exactly as it
    // was; the area gets a new page of teammem's name.
    assert_eq!(page(wiki, "Documentation.md"), person["Documentation.md"]);
    assert_eq!(
        page(wiki, "Area-docs.md").matches(&entry(&second)).count(),
        1
    );
    // The Changelog without its anchor gets it back at its end, once.
    let changelog = page(wiki, "Changelog.md");
    assert_eq!(
        changelog.matches("<!-- teammem:changelog -->").count(),
        1,
        "{changelog}"
    );
    assert!(
        changelog.trim_end().ends_with(&entry(&second)),
        "{changelog}"
    );
    assert_eq!(changelog.matches(&entry(&first)).count(), 1, "{changelog}");
    // The deleted quarter page comes back with the new entry.
    assert_eq!(page(wiki, &quarter).matches(&entry(&second)).count(), 1);
    // Sections a person changed inside are left as they are, and the
    // receipt says so; the entry still lands on the page.
    let web = page(wiki, "Area-web.md");
    let web_before = &person["Area-web.md"];
    let section = |t: &str| {
        let a = t.find("## What is here").unwrap();
        let b = t.find("## Recent changes").unwrap();
        t[a..b].to_owned()
    };
    assert_eq!(section(&web), section(web_before), "{web}");
    assert_eq!(web.matches(&entry(&second)).count(), 1, "{web}");
    for note in [
        "the What is here section of Area-web.md",
        "the Who knows this area section of Area-web.md",
        "the archive index section of Archive.md",
    ] {
        assert!(summary.contains(note), "{note:?} not in {summary}");
    }
    // Home: the person's text and the mangled line stay; the topics list
    // is back under its anchor.
    let home = page(wiki, "Home.md");
    assert_eq!(home.matches("<!-- teammem:topics -->").count(), 1, "{home}");
    assert!(
        home.contains("- [src](Area-src) <!-- teammem:area:src -->"),
        "{home}"
    );

    // The next job builds on the repaired pages: every entry once per page.
    let job = one.succeeds(3, &second, &third).await;
    assert!(
        job["receipt"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("Area-web.md")),
        "{job}"
    );
    for sha in [&first, &second, &third] {
        for (current, pick) in [
            ("Changelog.md", "Changelog-"),
            ("Guides/Area-src.md", "Area-src-"),
            ("area-ROOT.md", "Area-root-"),
            ("Area-web.md", "Area-web-"),
        ] {
            let on_current = page(wiki, current).matches(&entry(sha)).count();
            let on_quarters = count(wiki, sha, |p| p.starts_with(pick));
            assert!(
                on_current <= 1 && on_quarters <= 1,
                "{sha} on {current}: {on_current}, quarters {on_quarters}"
            );
        }
        assert_eq!(count(wiki, sha, |p| p == "Changelog.md"), 1, "{sha}");
    }
    git(wiki, &["fsck", "--strict", "--no-progress"]);
    assert!(one.daemon.terminate().success());
}

/// A person fills an area page past what a page may hold (64 KiB) with
/// text of their own: the next job leaves that page alone, says so in its
/// receipt, and records its pull request everywhere else (the area's
/// quarter page included), instead of failing.
#[tokio::test]
async fn a_page_a_person_filled_past_the_page_limit_is_left_alone_and_the_job_succeeds() {
    let repos = tempfile::tempdir().unwrap();
    let dir = repos.path().join("app");
    std::fs::create_dir_all(&dir).unwrap();
    git(&dir, &["init", "-q", "-b", "main"]);
    fixture::write(&dir, "src/lib.rs", "//! The library.\n");
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "Initial commit"]);
    let base = git_trimmed(&dir, &["rev-parse", "HEAD"]);
    fixture::write(&dir, "src/lib.rs", "//! The library.\n// 1\n");
    let first = squash(&dir, 1, "First change");
    fixture::write(&dir, "src/lib.rs", "//! The library.\n// 2\n");
    let second = squash(&dir, 2, "Second change");

    let one = OneSource::of(repos, &dir, SECRET)
        .token("person-edits")
        .start();
    let wiki = &one.wiki;
    one.succeeds(1, &base, &first).await;

    let work = tempfile::tempdir().unwrap();
    let clone = work.path().join("wiki");
    git(
        work.path(),
        &[
            "clone",
            "-q",
            wiki.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    let notes: String = (0..1200)
        .map(|i| format!("Design note {i}: keep the library small and its errors plain.\n"))
        .collect();
    assert!(notes.len() > 64 * 1024);
    edit(&clone, "Area-src.md", |t| format!("{t}\n{notes}"));
    git(&clone, &["commit", "-q", "-am", "A person's design notes"]);
    git(&clone, &["push", "-q", "origin", "HEAD:master"]);
    let person = page(wiki, "Area-src.md");

    let job = one.succeeds(2, &first, &second).await;
    let summary = job["receipt"]["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("Area-src.md"), "{summary}");
    assert_eq!(page(wiki, "Area-src.md"), person);
    let entry = format!("<!-- teammem:{second} -->");
    assert_eq!(page(wiki, "Changelog.md").matches(&entry).count(), 1);
    assert_eq!(count(wiki, &second, |p| p.starts_with("Area-src-")), 1);
    git(wiki, &["fsck", "--strict", "--no-progress"]);
    assert!(one.daemon.terminate().success());
}
