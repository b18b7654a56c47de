//! `teammem demo` as the real process: `--once` builds the sample repositories,
//! runs both jobs and exits 0, the git CLI (the oracle) finds every merged
//! pull request of the sample cited in the wiki, and the pages equal the
//! reviewed golden copies in `snapshots/demo_wiki/`, each area page listing
//! its area's files with purposes whose markers cite lines that hold them; without `--once` it serves the
//! dashboard until Ctrl-C; a busy port or a data directory that cannot be made
//! fails with one sentence and writes nothing. The sample itself is checked
//! against the local forge and the git CLI.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::harness::daemon::BIN;
use crate::harness::git::git;

/// The demo wiki's pages after both dispatches, as reviewed. After an
/// intended change to what the builtin agent writes, regenerate them with
/// `TEAMMEM_UPDATE_SNAPSHOTS=1 cargo test --test it demo_once` and review the
/// diff.
const GOLDEN_WIKI: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/snapshots/demo_wiki");

/// Every page on the wiki's `master` equals its golden copy, and the golden
/// directory holds no page the wiki lacks.
fn assert_pages_match_the_golden_wiki(wiki: &Path) {
    let golden = Path::new(GOLDEN_WIKI);
    let listed = git(wiki, &["ls-tree", "-r", "--name-only", "master"]);
    let pages: Vec<&str> = listed.lines().collect();
    if std::env::var_os("TEAMMEM_UPDATE_SNAPSHOTS").is_some() {
        let _ = std::fs::remove_dir_all(golden);
        for page in &pages {
            let path = golden.join(page);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, git(wiki, &["show", &format!("master:{page}")])).unwrap();
        }
    }
    let mut kept = Vec::new();
    let mut stack = vec![golden.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("the golden wiki exists") {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                kept.push(
                    path.strip_prefix(golden)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    kept.sort();
    let mut sorted = pages.clone();
    sorted.sort();
    assert_eq!(
        kept, sorted,
        "the wiki's pages are the golden ones ({GOLDEN_WIKI})"
    );
    for page in pages {
        let actual = git(wiki, &["show", &format!("master:{page}")]);
        let expected = std::fs::read_to_string(golden.join(page)).unwrap();
        assert_eq!(
            actual, expected,
            "{page} differs from {GOLDEN_WIKI}/{page}; if intended, regenerate with TEAMMEM_UPDATE_SNAPSHOTS=1"
        );
    }
}

/// Text as a CommonMark renderer shows it (escapes and entities resolved).
fn rendered(markdown: &str) -> String {
    use pulldown_cmark::{Event, Parser};
    let mut out = String::new();
    for event in Parser::new(markdown) {
        if let Event::Text(text) | Event::Code(text) = event {
            out.push_str(&text);
        }
    }
    out
}

/// Every area page's "What is here" section lists exactly the files of its
/// area at the commit it names (the git CLI's `ls-tree`), and each purpose's
/// marker cites a line that holds the purpose as the page renders it
/// (`git show`), at that commit.
fn assert_area_pages_say_what_is_here(source: &Path, wiki: &Path) {
    let pages = git(wiki, &["ls-tree", "-r", "--name-only", "master"]);
    let mut purposes = 0;
    // Area pages, not their quarter pages (`Area-api-2026-Q1.md`).
    let is_area_page = |p: &&str| {
        p.starts_with("Area-")
            && !p
                .trim_end_matches(".md")
                .rsplit('-')
                .next()
                .is_some_and(|last| last.starts_with('Q'))
    };
    for page in pages.lines().filter(is_area_page) {
        let text = git(wiki, &["show", &format!("master:{page}")]);
        let area = page.trim_start_matches("Area-").trim_end_matches(".md");
        let summary = text
            .lines()
            .find(|l| l.ends_with("<!-- teammem:what-is-here -->"))
            .unwrap_or_else(|| panic!("{page} says what is here:\n{text}"));
        let commit = summary
            .split_once("at commit `")
            .and_then(|(_, rest)| rest.get(..40))
            .unwrap_or_else(|| panic!("{summary}"));
        assert_eq!(commit.len(), 40, "{summary}");
        let listed: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.ends_with("<!-- teammem:what-is-here -->"))
            .skip(1)
            .take_while(|l| *l != "<!-- teammem:what-is-here-end -->")
            .collect();
        let tree = if area == "root" {
            git(source, &["ls-tree", "--name-only", commit])
                .lines()
                .filter(|p| !p.contains('/'))
                .filter(|p| {
                    git(source, &["cat-file", "-t", &format!("{commit}:{p}")]).trim() == "blob"
                })
                .map(str::to_owned)
                .collect::<Vec<_>>()
        } else {
            git(
                source,
                &["ls-tree", "-r", "--name-only", commit, &format!("{area}/")],
            )
            .lines()
            .map(str::to_owned)
            .collect()
        };
        let paths: Vec<String> = listed
            .iter()
            .map(|l| {
                l.trim_start_matches("- ")
                    .split(' ')
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(paths, tree, "{page} lists its area's files at {commit}");
        for line in listed {
            let Some((statement, marker)) = line.split_once(" <!-- teammem:evidence ") else {
                assert!(line.ends_with(" <!-- teammem:file -->"), "{page}: {line}");
                continue;
            };
            let cited = marker.strip_suffix(" -->").unwrap();
            let (located, lines) = cited.rsplit_once('#').unwrap();
            let (path, at) = located.rsplit_once('@').unwrap();
            // Cited where it was read: at the section's commit, or at an
            // earlier one whose cited line the section's commit still holds
            // as it was (a line that still holds is kept).
            assert!(
                Command::new("git")
                    .arg("-C")
                    .arg(source)
                    .args(["merge-base", "--is-ancestor", at, commit])
                    .status()
                    .unwrap()
                    .success(),
                "{line} cites {at}, not in the history of {commit}"
            );
            let n: usize = lines.trim_start_matches('L').parse().unwrap();
            let file = git(source, &["show", &format!("{at}:{path}")]);
            let cited_line = file.lines().nth(n - 1).unwrap();
            let now = git(source, &["show", &format!("{commit}:{path}")]);
            assert_eq!(now.lines().nth(n - 1), Some(cited_line), "{line}");
            let purpose = rendered(statement.split_once(" — ").unwrap().1);
            assert!(
                !purpose.is_empty() && cited_line.contains(&purpose),
                "{page}: {path} line {n} {cited_line:?} holds {purpose:?}"
            );
            purposes += 1;
        }
    }
    assert!(purposes >= 6, "the sample states purposes: {purposes}");
}

fn demo(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("demo")
        .args(args)
        .env_remove("TEAMMEM_LOG")
        .output()
        .expect("run teammem demo")
}

/// (number, merge sha) of every pull request on `main`, read with the git CLI
/// from the subjects GitHub writes (`Merge pull request #N from ...`, `Title (#N)`).
fn merged_pulls(source: &Path) -> Vec<(u64, String)> {
    let log = git(source, &["log", "--first-parent", "--format=%H %s", "main"]);
    let mut pulls = Vec::new();
    for line in log.lines() {
        let (sha, subject) = line.split_once(' ').unwrap();
        let number = if let Some(rest) = subject.strip_prefix("Merge pull request #") {
            rest.split(' ').next().and_then(|n| n.parse().ok())
        } else {
            subject
                .strip_suffix(')')
                .and_then(|s| s.rsplit_once("(#"))
                .and_then(|(_, n)| n.parse().ok())
        };
        if let Some(n) = number {
            pulls.push((n, sha.to_owned()));
        }
    }
    pulls
}

#[test]
fn demo_once_runs_both_jobs_and_the_wiki_cites_every_merged_pull_request() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo");
    let out = demo(&[
        "--once",
        "--port",
        "0",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "demo failed ({:?})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(stdout.contains("demo ok"), "{stdout}");
    assert!(stdout.contains("job 1: succeeded"), "{stdout}");
    assert!(stdout.contains("job 2: succeeded"), "{stdout}");
    assert!(
        stdout.contains("the dashboard served this run at http://127.0.0.1:")
            && stdout.contains("it stops with --once"),
        "{stdout}"
    );
    // A --data-dir is kept, and the configuration can be served again with
    // a secret of the user's own (the run's secret is never printed).
    assert!(
        stdout.contains(&format!(
            "TEAMMEM_DEMO_SECRET=\"$(head -c 32 /dev/urandom | base64)\" teammem serve --config {}",
            data.join("teammem-demo.toml").display()
        )),
        "{stdout}"
    );
    // The demo's own logging stays quiet, the writer child's included.
    assert!(!stderr.contains("INFO"), "{stderr}");

    let source = data.join("repos/todo.git");
    let wiki = data.join("repos/todo.wiki.git");
    let pulls = merged_pulls(&source);
    assert_eq!(
        pulls.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        [6, 5, 4, 3, 2, 1],
        "the sample has six merged pull requests"
    );

    let changelog = git(&wiki, &["show", "master:Changelog.md"]);
    for (number, sha) in &pulls {
        assert!(changelog.contains(sha.as_str()), "#{number}: {changelog}");
        assert!(
            stdout.contains(sha.as_str()),
            "the receipt printed cites #{number}"
        );
    }
    let pages = git(&wiki, &["ls-tree", "-r", "--name-only", "master"]);
    for page in [
        "Home.md",
        "Changelog.md",
        "Area-api.md",
        "Area-docs.md",
        "Area-storage.md",
        "Area-web.md",
    ] {
        assert!(pages.lines().any(|p| p == page), "{page} in {pages}");
    }
    // The wiki's log, as printed, is the git log's: one commit per job on top
    // of the initial page.
    let log = git(&wiki, &["log", "--format=%H %s", "master"]);
    assert_eq!(log.lines().count(), 3, "{log}");
    assert!(log.lines().last().unwrap().ends_with("Initial Home page"));
    for line in log.lines() {
        assert!(stdout.contains(&line[..10]), "{line} printed: {stdout}");
    }
    assert!(
        log.lines().next().unwrap().contains("(job 2)"),
        "the newest wiki commit is the second job's: {log}"
    );
    git(&source, &["fsck", "--strict", "--no-progress"]);
    git(&wiki, &["fsck", "--strict", "--no-progress"]);
    assert_pages_match_the_golden_wiki(&wiki);
    assert_area_pages_say_what_is_here(&source, &wiki);

    // A second run in the same directory replaces the earlier demo.
    let again = demo(&[
        "--once",
        "--port",
        "0",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

#[test]
fn demo_on_a_busy_port_says_what_to_do_and_writes_nothing() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo");
    let out = demo(&[
        "--once",
        "--port",
        &port,
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one sentence: {stderr}");
    assert!(
        stderr.contains(&format!("port {port}")) && stderr.contains("already in use"),
        "{stderr}"
    );
    assert!(stderr.contains("--port"), "says what to do: {stderr}");
    assert!(!stderr.trim_end().ends_with('.'), "{stderr}");
    assert!(!data.exists(), "nothing written");
}

#[test]
fn demo_with_a_data_dir_that_cannot_be_made_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let under_file = file.join("demo");
    let out = demo(&[
        "--once",
        "--port",
        "0",
        "--data-dir",
        under_file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "one sentence: {stderr}");
    assert!(stderr.contains("--data-dir"), "{stderr}");

    // A directory with someone else's files is refused, and left alone.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    let out = demo(&[
        "--once",
        "--port",
        "0",
        "--data-dir",
        other.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not empty"), "{stderr}");
    assert_eq!(
        std::fs::read_dir(&other).unwrap().count(),
        1,
        "nothing added"
    );
}

#[tokio::test]
async fn demo_keeps_serving_the_dashboard_until_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo");
    let mut child = Command::new(BIN)
        .args(["demo", "--port", "0", "--data-dir", data.to_str().unwrap()])
        .env_remove("TEAMMEM_LOG")
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn teammem demo");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut dashboard = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("dashboard: ") {
            dashboard = rest.split(' ').next().map(str::to_owned);
        }
        if line == "serving until Ctrl-C" {
            break;
        }
    }
    let dashboard = dashboard.expect("the dashboard URL is printed before serving");
    std::thread::spawn(move || for _ in lines {});

    // From loopback the dashboard needs no login; the sources page links the
    // demo's last job.
    let page = reqwest::get(&dashboard).await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("href=\"/jobs/2\""), "{html}");
    assert!(
        html.contains("succeeded") && html.contains("demo/todo"),
        "{html}"
    );
    // The job's page: its attempt, its receipt as a table, and the wiki
    // commit it made as a diff read from the mirror.
    let job = reqwest::get(format!("{}/jobs/1", dashboard.trim_end_matches('/')))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for expected in [
        "<table class=attempts>",
        "<table class=receipt>",
        "<pre class=diff>",
        "+++ b/Changelog.md",
        "<span class=\"add\">+",
        "<details><summary>Raw receipt</summary>",
        "<a href=\"/wiki/demo/todo/Changelog.md\">",
    ] {
        assert!(job.contains(expected), "{expected:?} in {job}");
    }
    // A local wiki's page is shown by teammem itself, from its mirror.
    let base = dashboard.trim_end_matches('/');
    let page = reqwest::get(format!("{base}/wiki/demo/todo/Changelog.md"))
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let page = page.text().await.unwrap();
    // Rendered from its Markdown: headings and lists, teammem's markers
    // hidden, links between pages to the dashboard's own pages.
    for expected in [
        "<article class=wiki>",
        "<h1>Changelog</h1>",
        "<li>2026-01-05 — #1 Store to-dos in SQLite",
        "<a href=\"/wiki/demo/todo/\">wiki of demo/todo</a>",
    ] {
        assert!(page.contains(expected), "{expected:?} in {page}");
    }
    assert!(!page.contains("teammem:"), "no marker shows: {page}");
    // A page by its name, as the pages link each other, is the same page.
    let by_name = reqwest::get(format!("{base}/wiki/demo/todo/Changelog"))
        .await
        .unwrap();
    assert_eq!(by_name.status().as_u16(), 200);
    assert!(by_name.text().await.unwrap().contains("<h1>Changelog</h1>"));
    // The wiki's index, with and without the slash, links every page.
    for index in ["/wiki/demo/todo/", "/wiki/demo/todo"] {
        let answer = reqwest::get(format!("{base}{index}")).await.unwrap();
        assert_eq!(answer.status().as_u16(), 200, "{index}");
        let html = answer.text().await.unwrap();
        assert!(
            html.contains("<ul class=pages><li><a href=\"/wiki/demo/todo/Home\">Home</a></li>"),
            "Home comes first: {html}"
        );
        for link in [
            "<a href=\"/wiki/demo/todo/Home\">Home</a>",
            "<a href=\"/wiki/demo/todo/Changelog\">Changelog</a>",
            "<a href=\"/wiki/demo/todo/Area-api\">Area-api</a>",
        ] {
            assert!(html.contains(link), "{link:?} in {index}: {html}");
        }
    }
    let no_index = reqwest::get(format!("{base}/wiki/octo/secret/"))
        .await
        .unwrap();
    assert_eq!(no_index.status().as_u16(), 404);
    // The sources page links the wiki's index.
    let home = reqwest::get(&dashboard)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        home.contains("<a class=wiki-link href=\"/wiki/demo/todo/\">wiki</a>"),
        "{home}"
    );
    let missing = reqwest::get(format!("{base}/wiki/demo/todo/No-such-page.md"))
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    let escape = reqwest::get(format!("{base}/wiki/demo/todo/..%2F..%2Fetc%2Fpasswd"))
        .await
        .unwrap();
    assert_eq!(
        escape.status().as_u16(),
        404,
        "paths are the wiki engine's to check"
    );
    let other = reqwest::get(format!("{base}/wiki/octo/secret/Home.md"))
        .await
        .unwrap();
    assert_eq!(other.status().as_u16(), 404);

    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "Ctrl-C ends the demo with 0: {status:?}");
}

#[test]
fn the_sample_is_what_the_local_forge_recognises() {
    use teammem::forge::local::{self, sample};
    use teammem::wiki::{Committer, PageWrite, create_local_wiki};

    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("todo.git");
    let built = sample::create_sample_source(&source).unwrap();
    let range = local::verify_range(&source, &built.base, &built.head).unwrap();
    assert_eq!(range.default_branch, "main");
    // Three merge pull requests carry a branch commit each; plus three
    // squashes and one direct commit.
    assert_eq!(range.commits, 10);
    let first = local::verify_range(&source, &built.base, &built.first_head).unwrap();
    assert_eq!(
        first.commits, 7,
        "the first dispatch: #1-#4 and the direct commit"
    );
    assert_eq!(
        built
            .pulls
            .iter()
            .map(|p| (p.number, p.dispatch))
            .collect::<Vec<_>>(),
        [(1, 1), (2, 1), (3, 1), (4, 1), (5, 2), (6, 2)]
    );
    for pull in &built.pulls {
        let verified =
            local::verify_pull(&source, teammem::ids::PullNumber::new(pull.number).unwrap())
                .unwrap();
        assert_eq!(verified.merge_sha, pull.merge_sha, "#{}", pull.number);
    }
    // The same history every time: fixed authors and dates.
    let again = sample::create_sample_source(&dir.path().join("again.git")).unwrap();
    assert_eq!(again, built);
    // An existing, non-empty directory is never touched.
    assert!(sample::create_sample_source(&source).is_err());

    let wiki = dir.path().join("todo.wiki.git");
    let page = PageWrite {
        path: "Home.md".into(),
        content: "# Home\n".into(),
    };
    let who = Committer {
        name: "t".into(),
        email: "t@example.org".into(),
    };
    let first =
        create_local_wiki(&wiki, "master", std::slice::from_ref(&page), "First", &who).unwrap();
    assert_eq!(git(&wiki, &["rev-parse", "HEAD"]).trim(), first);
    assert_eq!(
        git(&wiki, &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/master"
    );
    assert_eq!(git(&wiki, &["show", "master:Home.md"]), "# Home\n");
    git(&wiki, &["fsck", "--strict", "--no-progress"]);
    assert!(
        create_local_wiki(&wiki, "master", &[page], "Again", &who).is_err(),
        "an existing wiki is never overwritten"
    );
}

/// `--once` without `--data-dir` removes the temporary directory it made;
/// `--keep` keeps it, and says how to serve it.
#[test]
fn demo_once_removes_its_temporary_directory_unless_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["demo", "--once", "--port", "0"];
        args.extend(extra);
        std::process::Command::new(crate::harness::daemon::BIN)
            .args(&args)
            .env("TMPDIR", tmp.path())
            .env("TEAMMEM_LOG", "warn")
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("(--keep keeps it)"), "{stdout}");
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "nothing left behind"
    );

    let out = run(&["--keep"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let kept: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(kept.len(), 1, "{stdout}");
    let dir = kept[0].as_ref().unwrap().path();
    assert!(dir.join("teammem-demo.toml").is_file());
    assert!(stdout.contains("teammem serve --config"), "{stdout}");
}
