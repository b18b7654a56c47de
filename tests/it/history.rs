//! A long history replayed through the real `teammem serve` (local forge,
//! builtin agent, two workers): the generated source of
//! `harness/history.rs` with 400 merged pull requests, one signed range
//! dispatch per push (some pushes bring several merges), the queue drained,
//! then the wiki judged with the git CLI as oracle.
//!
//! What "recorded exactly once" means here, from how the builtin writes
//! entries: an entry is the line ending `<!-- teammem:<merge sha> -->`. Pages
//! come in families: a current page (`Changelog.md`, `Area-<slug>.md`) and
//! its archive pages (`<name>-<YYYY>-Q<n>[-part].md`, `<name>-undated…`). A PR
//! belongs to the Changelog family and to the family of every top-level
//! folder its merge commit changed (`root` for top-level files). In each
//! family it belongs to its entry is present, at most once on the current
//! page and at most once across the archive pages (an archive keeps every
//! entry for good; the current page keeps the recent ones); in no family is
//! it on one kind of page twice.
//!
//! Invariants checked: no job failed; every PR recorded as above; every
//! entry on a page at most two links from Home; one wiki commit (its
//! `Teammem-Job` trailer) per succeeded job and none for any other state;
//! every file an area page's "What is here" lists exists at the source's
//! tip; no hostile text formed HTML or a marker; `git fsck --strict` clean.
//! Every check collects all its violations before any is asserted; job run
//! times (first and last third) are printed, judged by `bench/history.sh`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use crate::harness::history::{self, History, Pull, Spec};
use crate::runner::daemon_client::{finished, job, jobs_of_commits, post_dispatch, wait_for};
use crate::runner::fixture;

/// How many merged pull requests the replay covers (the benchmark,
/// `bench/history.sh`, replays 1,500).
const PRS: usize = 400;
const SEED: u64 = 36;
const SECRET: &str = "long-history dispatch secret, at least 32 bytes";

/// The checks: each collects every violation before any is asserted.
#[derive(Default)]
struct Report {
    /// (check, violations).
    checks: Vec<(&'static str, Vec<String>)>,
}

impl Report {
    fn check(&mut self, name: &'static str, violations: Vec<String>) {
        self.checks.push((name, violations));
    }

    fn finish(self) {
        let mut enforced_failures = Vec::new();
        for (name, violations) in &self.checks {
            if violations.is_empty() {
                eprintln!("history check passed: {name}");
                continue;
            }
            eprintln!(
                "history check FAILED: {name}: {} violations; first ones:",
                violations.len()
            );
            for v in violations.iter().take(8) {
                eprintln!("  - {v}");
            }
            enforced_failures.push(format!(
                "{name}: {} violations (first: {})",
                violations.len(),
                violations[0]
            ));
        }
        assert!(
            enforced_failures.is_empty(),
            "the long history broke: {enforced_failures:#?}"
        );
    }
}

/// Every `.md` page at the wiki's `master`, by path, read with one `git
/// cat-file --batch`.
fn wiki_pages(wiki: &Path) -> BTreeMap<String, String> {
    let listing = history::run_git(
        wiki,
        &["ls-tree", "-r", "-z", "--name-only", "master"],
        None,
    );
    let paths: Vec<String> = listing
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .filter(|p| p.ends_with(".md"))
        .collect();
    let input: String = paths.iter().map(|p| format!("master:{p}\n")).collect();
    let out = history::run_git(wiki, &["cat-file", "--batch"], Some(input.as_bytes()));
    let mut pages = BTreeMap::new();
    let mut rest = &out[..];
    for path in paths {
        let header_end = rest.iter().position(|b| *b == b'\n').unwrap();
        let header = String::from_utf8_lossy(&rest[..header_end]).into_owned();
        let size: usize = header.rsplit(' ').next().unwrap().parse().expect(&header);
        let body = &rest[header_end + 1..header_end + 1 + size];
        pages.insert(path, String::from_utf8_lossy(body).into_owned());
        rest = &rest[header_end + 1 + size + 1..];
    }
    pages
}

/// A page's family and whether it is an archive: `Changelog-2025-Q3-2.md`
/// → (`Changelog`, true); `Area-api.md` → (`Area-api`, false).
fn family_of(path: &str) -> (String, bool) {
    let stem = path.strip_suffix(".md").unwrap_or(path);
    let quarter = |s: &str| -> Option<usize> {
        // `-YYYY-Qn` or `-undated` at the end of `s`: where it starts.
        if let Some(base) = s.strip_suffix("-undated") {
            return Some(base.len());
        }
        let b = s.as_bytes();
        let n = b.len();
        (n > 8
            && b[n - 8] == b'-'
            && b[n - 7..n - 3].iter().all(u8::is_ascii_digit)
            && b[n - 3] == b'-'
            && (b[n - 2] == b'Q' || b[n - 2] == b'q')
            && (b'1'..=b'4').contains(&b[n - 1]))
        .then(|| n - 8)
    };
    if let Some(at) = quarter(stem) {
        return (stem[..at].to_owned(), true);
    }
    if let Some((head, part)) = stem.rsplit_once('-')
        && !part.is_empty()
        && part.bytes().all(|b| b.is_ascii_digit())
        && let Some(at) = quarter(head)
    {
        return (head[..at].to_owned(), true);
    }
    (stem.to_owned(), false)
}

/// The family an area's page belongs to, whichever layout the builtin uses
/// (`Area-<slug>.md` flat, or `Areas/<slug>.md`).
fn area_family(families: &BTreeSet<String>, area: &str) -> Option<String> {
    [format!("Area-{area}"), format!("Areas/{area}")]
        .into_iter()
        .find(|f| families.contains(f))
}

/// The pages a page links to: Markdown links `[text](target)` and wiki
/// links `[[target]]` / `[[text|target]]`, resolved as GitHub's wiki does (by
/// page name, case-insensitively, `.md` optional, an anchor dropped).
fn links(text: &str, by_name: &HashMap<String, String>) -> BTreeSet<String> {
    let mut targets = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        if let Some(end) = after.find(')') {
            targets.push(after[..end].to_owned());
        }
        rest = after;
    }
    let mut rest = text;
    while let Some(at) = rest.find("[[") {
        let after = &rest[at + 2..];
        if let Some(end) = after.find("]]") {
            let inner = &after[..end];
            targets.push(inner.rsplit('|').next().unwrap_or(inner).to_owned());
        }
        rest = after;
    }
    targets
        .into_iter()
        .filter(|t| !t.contains("://") && !t.starts_with("mailto:"))
        .filter_map(|t| {
            let t = t
                .split('#')
                .next()
                .unwrap_or("")
                .trim()
                .trim_start_matches("./");
            let t = t.strip_suffix(".md").unwrap_or(t);
            let name = t.rsplit('/').next().unwrap_or(t).to_lowercase();
            by_name
                .get(&t.to_lowercase())
                .or_else(|| by_name.get(&name))
                .cloned()
        })
        .collect()
}

/// CommonMark backslash escapes and the entities the builtin writes, undone.
fn unescape(text: &str) -> String {
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(next) = chars.peek()
            && next.is_ascii_punctuation()
        {
            out.push(*next);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}

/// The paths an area page's "What is here" section lists.
fn listed_files(page: &str) -> Vec<String> {
    let Some(start) = page.find("<!-- teammem:what-is-here -->") else {
        return Vec::new();
    };
    let section = &page[start..];
    let end = section
        .find("<!-- teammem:what-is-here-end -->")
        .unwrap_or(section.len());
    section[..end]
        .lines()
        .skip(1)
        .filter_map(|line| line.strip_prefix("- "))
        .map(|line| {
            let cut = [line.find(" — "), line.find(" <!-- ")]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(line.len());
            unescape(line[..cut].trim().trim_matches('`'))
        })
        .collect()
}

/// Sends one signed range dispatch per push; waits until each push's job
/// has left `queued` before the next push (so jobs are one per push, as
/// pushes minutes apart would be). The job ids, in push order.
async fn replay(daemon: &crate::harness::daemon::Daemon, token: &str, h: &History) -> Vec<i64> {
    let mut ids = Vec::new();
    for (k, push) in h.pushes.iter().enumerate() {
        let (status, answer) = post_dispatch(
            daemon,
            SECRET,
            &json!({
                "source_repository": "history/app", "kind": "range",
                "source_run_id": 10_000 + k, "source_run_attempt": 1,
                "push_before": push.before, "push_after": push.after,
            }),
        )
        .await;
        assert!(
            status == 202 || status == 200,
            "push {k}: {status} {answer}"
        );
        let id = answer["coalesced_into"]
            .as_i64()
            .or_else(|| answer["job_id"].as_i64())
            .unwrap_or_else(|| panic!("push {k}: no job id in {answer}"));
        if ids.last() != Some(&id) {
            ids.push(id);
        }
        left_queue(daemon, token, &ids).await;
    }
    ids
}

/// Waits until the newest of `ids` has left `queued`; if it has not within
/// ten minutes, fails naming every job's state and last error (a job stuck
/// behind another is the usual cause).
async fn left_queue(daemon: &crate::harness::daemon::Daemon, token: &str, ids: &[i64]) {
    let newest = *ids.last().unwrap();
    let deadline = Instant::now() + std::time::Duration::from_secs(600);
    loop {
        let (newest_job, _) = job(daemon, token, newest).await;
        if newest_job["state"] != "queued" {
            return;
        }
        if Instant::now() > deadline {
            let mut lines = Vec::new();
            for id in ids.iter().rev().take(6) {
                let (j, events) = job(daemon, token, *id).await;
                lines.push(format!(
                    "job {id}: {} attempts {} run_after {} last_error {} events {}",
                    j["state"],
                    j["attempts"],
                    j["run_after"],
                    j["last_error"],
                    events.to_string().chars().take(1500).collect::<String>()
                ));
            }
            panic!("job {newest} stayed queued:\n{}", lines.join("\n"));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_generated_history_is_recorded_once_reachable_and_bounded() {
    let started = Instant::now();
    let root = tempfile::tempdir().unwrap();
    let h = history::generate(
        &root.path().join("src"),
        &Spec {
            prs: PRS,
            seed: SEED,
        },
    );
    assert_eq!(h.pulls.len(), PRS);
    let generated = started.elapsed();
    let wiki = fixture::wiki(root.path());
    let seed_tip = String::from_utf8(history::run_git(&wiki, &["rev-parse", "master"], None))
        .unwrap()
        .trim()
        .to_owned();
    let setup = crate::harness::daemon::Setup::new(&format!(
        "[[sources]]\nrepository = \"history/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"TEAMMEM_SECRET_HISTORY\"\n\n[queue]\nworkers = 2\n\n[limits]\nrequests_per_second = 100000\nrequest_burst = 100000\n",
        h.dir.display(),
        wiki.display()
    ));
    let token = setup.create_token("history", &[]);
    let daemon = setup.serve(&[("TEAMMEM_SECRET_HISTORY", SECRET)]);
    let ids = replay(&daemon, &token, &h).await;
    let mut states: BTreeMap<i64, Value> = BTreeMap::new();
    for id in &ids {
        let (j, _) = wait_for(&daemon, &token, *id, finished).await;
        states.insert(*id, j);
    }
    let replayed = started.elapsed();
    let mut by_state: BTreeMap<String, usize> = BTreeMap::new();
    for j in states.values() {
        *by_state
            .entry(j["state"].as_str().unwrap_or("?").to_owned())
            .or_default() += 1;
    }
    eprintln!(
        "history: {} PRs, {} pushes, {} jobs {by_state:?}; generated in {generated:?}, replayed in {:?}",
        h.pulls.len(),
        h.pushes.len(),
        ids.len(),
        replayed - generated
    );
    let mut report = Report::default();

    // A job's cost does not grow with history: the run times (claimed to
    // finished) of the last third of the jobs against the first third's.
    let runs: Vec<i64> = states
        .values()
        .filter_map(|j| Some(j["finished_at"].as_i64()? - j["started_at"].as_i64()?))
        .collect();
    let third = (runs.len() / 3).max(1);
    let p50 = |xs: &[i64]| {
        let mut xs = xs.to_vec();
        xs.sort_unstable();
        xs[xs.len() / 2]
    };
    let (early, late) = (p50(&runs[..third]), p50(&runs[runs.len() - third..]));
    eprintln!(
        "history: job run time p50 first third {early} ms, last third {late} ms ({:.2}x)",
        late as f64 / early.max(1) as f64
    );
    // Timing is the benchmark's to judge (bench/history.sh): a test on a
    // shared host only prints it.

    // No job failed.
    report.check(
        "no job failed",
        states
            .iter()
            .filter(|(_, j)| j["state"] == "failed")
            .map(|(id, j)| {
                let error: String = j["last_error"]
                    .as_str()
                    .unwrap_or("")
                    .chars()
                    .take(300)
                    .collect();
                format!("job {id} failed: {error}")
            })
            .collect(),
    );

    // Entries by family and kind.
    let pages = wiki_pages(&wiki);
    let families: BTreeSet<String> = pages.keys().map(|p| family_of(p).0).collect();
    let mut duplicates = Vec::new();
    let mut unrecorded = Vec::new();
    let mut missing_on_area = Vec::new();
    for pull in &h.pulls {
        let marker = format!("<!-- teammem:{} -->", pull.sha);
        let mut counts: BTreeMap<(String, bool), usize> = BTreeMap::new();
        for (path, text) in &pages {
            let n = text.matches(&marker).count();
            if n > 0 {
                *counts.entry(family_of(path)).or_default() += n;
            }
        }
        for ((family, archive), n) in &counts {
            if *n > 1 {
                duplicates.push(format!(
                    "#{} {} is {n} times on the {} pages of {family}",
                    pull.number,
                    pull.sha,
                    if *archive { "archive" } else { "current" }
                ));
            }
        }
        let in_family = |f: &str| counts.iter().any(|((family, _), _)| family == f);
        if !in_family("Changelog") {
            unrecorded.push(describe(pull));
        }
        for area in pull.areas() {
            let plain = area
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !plain {
                continue;
            }
            match area_family(&families, &area) {
                Some(f) if in_family(&f) => {}
                Some(f) => missing_on_area.push(format!("{} not on {f}", describe(pull))),
                None => {
                    missing_on_area.push(format!("{}: no page for area {area}", describe(pull)))
                }
            }
        }
    }
    report.check("every PR is on the Changelog family", unrecorded);
    report.check(
        "every PR is on the family of each area it changed",
        missing_on_area,
    );
    report.check("no entry twice on one kind of page of a family", duplicates);

    // Reachable from Home in at most two links.
    let by_name: HashMap<String, String> = pages
        .keys()
        .flat_map(|p| {
            let stem = p.strip_suffix(".md").unwrap_or(p);
            let name = stem.rsplit('/').next().unwrap_or(stem);
            [
                (stem.to_lowercase(), p.clone()),
                (name.to_lowercase(), p.clone()),
            ]
        })
        .collect();
    let mut near: BTreeSet<String> = BTreeSet::from(["Home.md".to_owned()]);
    let first = links(pages.get("Home.md").map_or("", String::as_str), &by_name);
    near.extend(first.iter().cloned());
    for page in &first {
        near.extend(links(&pages[page], &by_name));
    }
    let near_text: Vec<&String> = near.iter().filter_map(|p| pages.get(p)).collect();
    report.check(
        "every entry is at most two links from Home",
        h.pulls
            .iter()
            .filter(|p| {
                let marker = format!("<!-- teammem:{} -->", p.sha);
                pages.values().any(|t| t.contains(&marker))
                    && !near_text.iter().any(|t| t.contains(&marker))
            })
            .map(describe)
            .collect(),
    );

    // One wiki commit per succeeded job, none for the others.
    let commits = jobs_of_commits(&wiki, &seed_tip);
    let mut per_job: BTreeMap<i64, usize> = BTreeMap::new();
    let mut foreign = 0;
    for c in &commits {
        match c {
            Some(id) => *per_job.entry(*id).or_default() += 1,
            None => foreign += 1,
        }
    }
    let mut commit_violations = Vec::new();
    if foreign > 0 {
        commit_violations.push(format!(
            "{foreign} wiki commits carry no Teammem-Job trailer"
        ));
    }
    for (id, j) in &states {
        let n = per_job.get(id).copied().unwrap_or(0);
        let state = j["state"].as_str().unwrap_or("?");
        let want = usize::from(state == "succeeded");
        if n != want {
            commit_violations.push(format!(
                "job {id} ({state}) made {n} wiki commits, not {want}"
            ));
        }
    }
    for id in per_job.keys() {
        if !states.contains_key(id) {
            commit_violations.push(format!("job {id}, not one of the replay's, committed"));
        }
    }
    report.check(
        "one wiki commit per succeeded job, none otherwise",
        commit_violations,
    );

    // What is here lists only files present at the tip.
    let tip_files: BTreeSet<String> = history::run_git(
        &h.dir,
        &["ls-tree", "-r", "-z", "--name-only", "main"],
        None,
    )
    .split(|b| *b == 0)
    .filter(|p| !p.is_empty())
    .map(|p| String::from_utf8_lossy(p).into_owned())
    .collect();
    let mut absent = Vec::new();
    let mut listed = 0;
    for (path, text) in &pages {
        let (family, archive) = family_of(path);
        if archive || !(family.starts_with("Area-") || family.starts_with("Areas/")) {
            continue;
        }
        for file in listed_files(text) {
            listed += 1;
            if !tip_files.contains(&file) {
                absent.push(format!("{path} lists {file}, absent at the tip"));
            }
        }
    }
    eprintln!("history: {listed} files listed under What is here");
    report.check("What is here lists only files at the tip", absent);

    // Submodules are listed as such, each with a commit the source pinned
    // at its path (the newest pin where the section is current).
    let mut submodule_lines = 0;
    let mut wrong_pins = Vec::new();
    for (path, text) in &pages {
        for line in text
            .lines()
            .filter(|l| l.ends_with("<!-- teammem:submodule -->"))
        {
            submodule_lines += 1;
            let listed = line
                .trim_start_matches("- ")
                .split(" — ")
                .next()
                .unwrap_or("");
            let pin = line.split('`').nth(1).unwrap_or("");
            if !h
                .submodules
                .get(&unescape(listed))
                .is_some_and(|pins| pins.iter().any(|p| p == pin))
            {
                wrong_pins.push(format!("{path}: {line}"));
            }
        }
    }
    if submodule_lines == 0 {
        wrong_pins.push("no page lists vendor/zlib as a submodule".to_owned());
    }
    report.check(
        "submodules are listed with a commit they pinned",
        wrong_pins,
    );

    // Hostile text stays text: rendered as CommonMark (as GitHub and the
    // dashboard render it), no page forms an element or a script link from
    // a title or description; no page holds a marker teammem did not write.
    let fake_marker = format!("<!-- teammem:{} -->", "0".repeat(40));
    let mut hostile = Vec::new();
    for (path, text) in &pages {
        let mut html = String::new();
        pulldown_cmark::html::push_html(&mut html, pulldown_cmark::Parser::new(text));
        for bad in ["<script", "<img", "<details", "<b>", "href=\"javascript:"] {
            if html.contains(bad) {
                hostile.push(format!("{path} renders {bad:?}"));
            }
        }
        for bad in [fake_marker.as_str(), "<!-- teammem:evidence src/x.rs@"] {
            if text.contains(bad) {
                hostile.push(format!("{path} holds {bad:?}"));
            }
        }
    }
    report.check("no hostile text forms HTML or a marker", hostile);

    // The wiki's objects are sound.
    let fsck = crate::harness::git::git_output(&wiki, &["fsck", "--strict"]);
    report.check(
        "git fsck --strict is clean on the wiki",
        if fsck.status.success() {
            Vec::new()
        } else {
            vec![String::from_utf8_lossy(&fsck.stderr).into_owned()]
        },
    );

    eprintln!(
        "history: {} wiki pages, {} wiki commits; whole test {:?}",
        pages.len(),
        commits.len(),
        started.elapsed()
    );
    assert!(daemon.terminate().success());
    report.finish();
}

fn describe(pull: &Pull) -> String {
    format!(
        "#{} {} ({:?}, {} paths)",
        pull.number,
        pull.sha,
        pull.how,
        pull.paths.len()
    )
}

#[test]
fn page_families_links_and_listings_are_read_as_the_builtin_writes_them() {
    assert_eq!(family_of("Changelog.md"), ("Changelog".into(), false));
    assert_eq!(
        family_of("Changelog-2026-Q3.md"),
        ("Changelog".into(), true)
    );
    assert_eq!(
        family_of("Changelog-2026-Q3-2.md"),
        ("Changelog".into(), true)
    );
    assert_eq!(family_of("Area-api-undated.md"), ("Area-api".into(), true));
    assert_eq!(family_of("Area-v2-3.md"), ("Area-v2-3".into(), false));
    assert_eq!(family_of("Home.md"), ("Home".into(), false));
    assert_eq!(family_of("A.md"), ("A".into(), false));
    let by_name: HashMap<String, String> = [
        ("changelog", "Changelog.md"),
        ("area-api", "Area-api.md"),
        ("areas/web", "Areas/web.md"),
        ("web", "Areas/web.md"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let found = links(
        "[Changelog](Changelog) [[API|Area-api]] [w](Areas/web.md#top) [x](https://example.org/Changelog) [[Nothing]]",
        &by_name,
    );
    assert_eq!(
        found,
        BTreeSet::from([
            "Changelog.md".into(),
            "Area-api.md".into(),
            "Areas/web.md".into()
        ])
    );
    let page = "# Area\n\nThe files. <!-- teammem:what-is-here -->\n- api/a\\_b.py — Handles it. <!-- teammem:evidence api/a_b.py@x#L1 -->\n- api/c&lt;d.rs <!-- teammem:file -->\n<!-- teammem:what-is-here-end -->\n- api/not-listed.rs\n";
    assert_eq!(listed_files(page), vec!["api/a_b.py", "api/c<d.rs"]);
}

/// The generator keeps its promises, checked with the git CLI: a fixed seed
/// gives the same commits; each PR's paths are what its commit changed;
/// the shapes the long-history test relies on are all there.
#[test]
fn the_generated_history_has_the_shapes_it_promises() {
    let root = tempfile::tempdir().unwrap();
    let spec = Spec::default();
    let h = history::generate(&root.path().join("a"), &spec);
    let again = history::generate(&root.path().join("b"), &spec);
    assert_eq!(
        h.pushes.last().unwrap().after,
        again.pushes.last().unwrap().after
    );
    assert_eq!(h.pulls.len(), 1500);
    let git =
        |args: &[&str]| String::from_utf8_lossy(&history::run_git(&h.dir, args, None)).into_owned();

    // Every PR named by exactly one commit reachable from main.
    let subjects = git(&["log", "--format=%H %s", "main"]);
    let mut named: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for line in subjects.lines() {
        let (sha, subject) = line.split_once(' ').unwrap();
        let number = subject
            .strip_prefix("Merge pull request #")
            .and_then(|r| r.split_once(' '))
            .map(|(n, _)| n)
            .or_else(|| {
                subject
                    .strip_suffix(')')
                    .and_then(|s| s.rsplit_once("(#"))
                    .map(|(_, n)| n)
            })
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(n) = number {
            named.entry(n).or_default().push(sha.to_owned());
        }
    }
    assert_eq!(named.len(), 1500);
    for pull in &h.pulls {
        assert_eq!(
            named[&pull.number],
            vec![pull.sha.clone()],
            "#{}",
            pull.number
        );
    }

    // Each PR's paths are its commit's changes against its first parent.
    let parents: BTreeMap<String, String> = git(&["log", "--format=%H %P", "--all"])
        .lines()
        .filter_map(|l| {
            let mut ids = l.split(' ');
            Some((ids.next()?.to_owned(), ids.next()?.to_owned()))
        })
        .collect();
    let mut input = String::new();
    for pull in &h.pulls {
        input.push_str(&format!("{} {}\n", parents[&pull.sha], pull.sha));
    }
    let diffs = history::run_git(
        &h.dir,
        &[
            "diff-tree",
            "--always",
            "--stdin",
            "-r",
            "-z",
            "--name-only",
            "--no-renames",
        ],
        Some(input.as_bytes()),
    );
    // Output (with --always): for each line given, its first id and a NUL,
    // then the paths changed, each NUL-ended; in the order given.
    let mut changed: Vec<BTreeSet<String>> = Vec::new();
    for field in diffs.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let text = String::from_utf8_lossy(field).into_owned();
        let text = text.trim_start_matches('\n');
        if text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            changed.push(BTreeSet::new());
        } else {
            changed.last_mut().unwrap().insert(text.to_owned());
        }
    }
    assert_eq!(changed.len(), h.pulls.len());
    for (pull, changed) in h.pulls.iter().zip(&changed) {
        assert_eq!(changed, &pull.paths, "#{} {}", pull.number, pull.sha);
    }

    // The shapes.
    let merges = git(&[
        "log",
        "--merges",
        "--first-parent",
        "--format=%P%x09%s",
        "main",
    ]);
    assert!(
        merges
            .lines()
            .filter(|l| l.ends_with("Merge branch 'stable'"))
            .count()
            >= 5
    );
    assert!(
        merges
            .lines()
            .any(|l| l.split('\t').next().unwrap().split(' ').count() >= 3)
    );
    let all_subjects = git(&["log", "--format=%s", "main"]);
    assert!(all_subjects.lines().any(|s| s.starts_with("Revert \"")));
    assert!(
        h.pulls
            .iter()
            .any(|p| p.how == history::How::Empty && p.paths.is_empty())
    );
    assert!(h.pulls.iter().any(|p| p.paths.len() == 300));
    assert!(
        h.pulls
            .iter()
            .filter(|p| p.how == history::How::Stable)
            .count()
            >= 50
    );
    let areas_ever: BTreeSet<String> = h.pulls.iter().flat_map(Pull::areas).collect();
    assert!(areas_ever.len() >= 20, "{areas_ever:?}");
    let tip = git(&["ls-tree", "-r", "--full-tree", "main"]);
    assert!(tip.lines().any(|l| l.starts_with("120000 ")), "a symlink");
    let zlib = h.submodules["vendor/zlib"].last().unwrap();
    assert!(
        tip.contains(&format!("160000 commit {zlib}\tvendor/zlib")),
        "a submodule at the tip, re-pinned"
    );
    assert!(h.submodules["vendor/zlib"].len() == 2 && h.submodules.contains_key("docs/theme"));
    assert!(
        !tip.contains("\tdocs/theme"),
        "the moved submodule is removed"
    );
    assert!(!tip.contains("\tlegacy/"), "the removed area is gone");
    assert!(tip.contains("\tweb/assets/logo.png"));
    let raw = history::run_git(
        &h.dir,
        &["ls-tree", "-r", "-z", "--name-only", "main"],
        None,
    );
    assert!(
        raw.split(|b| *b == 0)
            .any(|p| std::str::from_utf8(p).is_err()),
        "a non-UTF-8 path"
    );
    let dates = git(&["log", "--first-parent", "--format=%at", "main"]);
    let dates: Vec<i64> = dates.lines().map(|d| d.parse().unwrap()).collect();
    let span_days = (dates.first().unwrap() - dates.last().unwrap()) / 86_400;
    assert!(span_days > 1000, "{span_days} days");
    assert!(h.pushes.iter().any(|p| p.merges > 1));
    let fsck = crate::harness::git::git_output(&h.dir, &["fsck", "--strict"]);
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
}
