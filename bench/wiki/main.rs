//! Wiki round-trip benchmark driver (run by `bench/wiki.sh`, release build).
//! Serves the given bare wikis over loopback smart HTTP (`git http-backend` as
//! CGI, the same server for every contender) and times *snapshot + one-page
//! patch + publish* for teammem (warm and cold mirror), the git CLI (shallow
//! clone; kept clone) and Dulwich (a Python script, timed inside Python), each
//! contender running its iterations back to back after one warm-up. Prints
//! medians and ratios; it asserts every round trip really published.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use teammem::wiki::{
    CommitSpec, Committer, Destination, PagePatch, Remote, Replacement, WikiStore, WriteStatus,
};

/// The same smart-HTTP server the integration tests use (no auth here).
#[allow(dead_code)]
#[path = "../../tests/it/harness/git_http.rs"]
mod git_http;
/// The git CLI helpers `git_http` uses (as `super::git`).
#[allow(dead_code)]
#[path = "../../tests/it/harness/git.rs"]
mod git;

const PAGE: &str = "section-02/page-0042.md";

struct Args {
    root: PathBuf,
    repos: Vec<String>,
    iterations: usize,
    python: PathBuf,
    dulwich_script: PathBuf,
}

fn parse_args() -> Args {
    let mut args = std::env::args().skip(1);
    let mut parsed = Args {
        root: PathBuf::new(),
        repos: Vec::new(),
        iterations: 9,
        python: PathBuf::from("python3"),
        dulwich_script: PathBuf::new(),
    };
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--root" => parsed.root = value.into(),
            "--repos" => parsed.repos = value.split(',').map(str::to_owned).collect(),
            "--iterations" => parsed.iterations = value.parse().expect("iterations"),
            "--python" => parsed.python = value.into(),
            "--dulwich" => parsed.dulwich_script = value.into(),
            other => panic!("unknown flag {other}"),
        }
    }
    parsed
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = parse_args();
    let server = git_http::GitHttpServer::start(&args.root, None).await;

    let scratch = tempfile::tempdir().unwrap();
    let mut table = Vec::new();
    for repo in &args.repos {
        let url = server.url(repo);
        let pages = Command::new("git")
            .args([
                "-C",
                args.root.join(repo).to_str().unwrap(),
                "ls-tree",
                "-r",
                "--name-only",
                "master",
            ])
            .output()
            .unwrap()
            .stdout
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        let work = scratch.path().join(repo);
        std::fs::create_dir_all(&work).unwrap();
        let n = args.iterations;
        let warm = teammem_warm(&url, &work, n).await;
        // Requests of one more warm round trip, by kind.
        let store = WikiStore::new(work.join("warm-mirrors"));
        server.clear_requests();
        teammem_round_trip(&store, &url, "counted\n".into()).await;
        let requests: Vec<String> = server
            .requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.target))
            .collect();
        eprintln!(
            "{repo}: one warm round trip = {} requests: {requests:?}",
            requests.len()
        );
        let cold = teammem_cold(&url, &work, n).await;
        let shallow = time_blocking(n, |i| git_shallow_round_trip(&url, &work, i));
        let kept_dir = work.join("kept");
        git(
            &work,
            &["clone", "--quiet", &url, kept_dir.to_str().unwrap()],
        );
        let kept = time_blocking(n, |i| git_kept_round_trip(&kept_dir, i));
        let dulwich = time_blocking(n, |i| dulwich_round_trip(&args, &url, i));
        table.push((repo.clone(), pages, warm, cold, shallow, kept, dulwich));
    }

    println!();
    println!(
        "round trip = snapshot + one-page patch + publish, loopback smart HTTP (git http-backend), median of {} runs, ms",
        args.iterations
    );
    println!(
        "{:<14} {:>6} | {:>9} {:>9} | {:>11} {:>11} {:>11} | {:>8} {:>8} {:>8}",
        "wiki",
        "pages",
        "warm",
        "cold",
        "(a) clone1",
        "(b) kept",
        "(c) dulwich",
        "a/warm",
        "b/warm",
        "c/warm"
    );
    for (repo, pages, warm, cold, shallow, kept, dulwich) in &table {
        println!(
            "{:<14} {:>6} | {:>9.1} {:>9.1} | {:>11.1} {:>11.1} {:>11.1} | {:>7.1}x {:>7.1}x {:>7.1}x",
            repo,
            pages,
            ms(*warm),
            ms(*cold),
            ms(*shallow),
            ms(*kept),
            ms(*dulwich),
            ms(*shallow) / ms(*warm),
            ms(*kept) / ms(*warm),
            ms(*dulwich) / ms(*warm),
        );
    }
    if table.len() == 2 {
        println!(
            "warm {} / warm {}: {:.2}x (target: within 2x)",
            table[1].0,
            table[0].0,
            ms(table[1].2) / ms(table[0].2)
        );
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn spec(base: &str) -> CommitSpec {
    CommitSpec {
        expected_destination: Some("bench/wiki".into()),
        expected_base: base.into(),
        message: "bench: append one line".into(),
        identity: Committer {
            name: "teammem[bot]".into(),
            email: "bench@example.org".into(),
        },
        trailers: Vec::new(),
    }
}

async fn teammem_round_trip(store: &WikiStore, url: &str, line: String) {
    let wiki = store
        .wiki(&Destination {
            id: "bench/wiki".into(),
            remote: Remote::Http {
                url: url.to_owned(),
                token: None,
            },
        })
        .unwrap();
    let snapshot = wiki.snapshot().await.unwrap();
    let base = snapshot.sha.unwrap();
    let page = wiki.get_page(&base, PAGE).await.unwrap();
    let result = wiki
        .patch(
            &spec(&base),
            vec![PagePatch {
                path: PAGE.into(),
                expected_sha: page.sha,
                replacements: vec![Replacement {
                    old: String::new(),
                    new: line,
                }],
            }],
        )
        .await
        .unwrap();
    assert_eq!(result.status, WriteStatus::Updated);
}

async fn teammem_warm(url: &str, work: &Path, n: usize) -> Duration {
    let store = WikiStore::new(work.join("warm-mirrors"));
    teammem_round_trip(&store, url, "warm-up\n".into()).await;
    let mut samples = Vec::new();
    for i in 0..n {
        let start = Instant::now();
        teammem_round_trip(&store, url, format!("warm {i}\n")).await;
        samples.push(start.elapsed());
    }
    median(samples)
}

async fn teammem_cold(url: &str, work: &Path, n: usize) -> Duration {
    let mut samples = Vec::new();
    for i in 0..=n {
        let dir = work.join(format!("cold-{i}"));
        let start = Instant::now();
        let store = WikiStore::new(&dir);
        teammem_round_trip(&store, url, format!("cold {i}\n")).await;
        let elapsed = start.elapsed();
        if i > 0 {
            samples.push(elapsed);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    median(samples)
}

fn time_blocking(n: usize, mut round_trip: impl FnMut(usize) -> Option<Duration>) -> Duration {
    round_trip(usize::MAX);
    let mut samples = Vec::new();
    for i in 0..n {
        let start = Instant::now();
        let measured = round_trip(i);
        samples.push(measured.unwrap_or_else(|| start.elapsed()));
    }
    median(samples)
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.org")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.org")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

fn append(path: &Path, line: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(line.as_bytes()).unwrap();
}

/// (a) `clone --depth 1` + commit + push, in a fresh directory each time.
fn git_shallow_round_trip(url: &str, work: &Path, i: usize) -> Option<Duration> {
    let dir = work.join("shallow");
    let _ = std::fs::remove_dir_all(&dir);
    let start = Instant::now();
    git(
        work,
        &[
            "clone",
            "--quiet",
            "--depth",
            "1",
            url,
            dir.to_str().unwrap(),
        ],
    );
    append(&dir.join(PAGE), &format!("git shallow {i}\n"));
    git(
        &dir,
        &["commit", "--quiet", "-am", "bench: append one line"],
    );
    git(&dir, &["push", "--quiet", "origin", "HEAD:master"]);
    let elapsed = start.elapsed();
    std::fs::remove_dir_all(&dir).unwrap();
    Some(elapsed)
}

/// (b) a kept clone: fetch + reset + commit + push.
fn git_kept_round_trip(dir: &Path, i: usize) -> Option<Duration> {
    git(dir, &["fetch", "--quiet", "origin"]);
    git(dir, &["reset", "--quiet", "--hard", "origin/master"]);
    append(&dir.join(PAGE), &format!("git kept {i}\n"));
    git(dir, &["commit", "--quiet", "-am", "bench: append one line"]);
    git(dir, &["push", "--quiet", "origin", "HEAD:master"]);
    None
}

/// (c) Dulwich: whole branch history fetched into memory, commit, push; the
/// script times itself so interpreter start-up is not counted.
fn dulwich_round_trip(args: &Args, url: &str, i: usize) -> Option<Duration> {
    let output = Command::new(&args.python)
        .arg(&args.dulwich_script)
        .args([url, PAGE, &format!("dulwich {i}\n")])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "dulwich: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let millis: f64 = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .expect("dulwich prints ms");
    Some(Duration::from_secs_f64(millis / 1000.0))
}
