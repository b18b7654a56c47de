//! A long source history, generated: a git repository with N merged pull
//! requests (1,500 by default) over 22 top-level areas (some nested), built
//! with one `git fast-import` stream, deterministic from a seed.
//!
//! What it holds, as a busy years-old repository does: squash merges
//! (`Title (#N)`) and true merges (`Merge pull request #N from user/branch`,
//! the PR title and description in the merge commit's body, where the local
//! forge reads them); a `stable` maintenance branch that receives pull
//! requests and is merged back into `main` several times (`Merge branch
//! 'stable'`); octopus merges of branches each holding one squashed PR;
//! empty merges; a PR and its revert; file and directory deletions (a whole
//! area removed), file and directory renames; one PR touching 300 files;
//! descriptions written to a PR template (checklists, trailers, code spans)
//! and hostile ones (HTML, Markdown links and images, fake `<!-- teammem:`
//! markers); a non-UTF-8 path and subject; a symlink; a binary file;
//! submodules (gitlinks, tree mode 160000, with `.gitmodules`) added,
//! re-pinned, moved and one removed, the other kept to the tip;
//! `Cargo.toml`, `package.json` and `pyproject.toml` changing over time;
//! commit dates spread over three years.
//!
//! Invariants: the same spec gives the same repository, byte for byte (same
//! commit ids); every PR number is named by exactly one commit reachable from
//! `main`; each PR's `paths` are the paths its naming commit changed against
//! its first parent (the git CLI is the oracle when a test needs more).
//! Std only, so `bench/history/` builds this file by path.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What to generate.
#[derive(Debug, Clone)]
pub struct Spec {
    /// How many merged pull requests.
    pub prs: usize,
    pub seed: u64,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            prs: 1500,
            seed: 36,
        }
    }
}

/// How a pull request reached `main`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// One commit on main, `Title (#N)`.
    Squash,
    /// `Merge pull request #N from user/branch` on main.
    Merge,
    /// Squashed or merged into `stable`, arrived through `Merge branch 'stable'`.
    Stable,
    /// A `Title (#N)` commit on a branch merged with others in an octopus merge.
    Octopus,
    /// A true merge whose branch changed nothing.
    Empty,
}

/// One merged pull request.
#[derive(Debug, Clone)]
pub struct Pull {
    pub number: u64,
    /// The commit whose subject names it (its entry's merge sha).
    pub sha: String,
    pub title: String,
    pub how: How,
    /// Paths its commit changed against its first parent, lossy UTF-8.
    pub paths: BTreeSet<String>,
    /// Unix seconds of its commit.
    pub merged_at: i64,
}

impl Pull {
    /// The top-level folders of its paths (`root` for top-level files).
    pub fn areas(&self) -> BTreeSet<String> {
        self.paths
            .iter()
            .map(|p| match p.split_once('/') {
                Some((first, _)) => first.to_owned(),
                None => "root".to_owned(),
            })
            .collect()
    }
}

/// One push to `main`: the range a post-merge workflow would dispatch.
#[derive(Debug, Clone)]
pub struct Push {
    pub before: String,
    pub after: String,
    /// How many first-parent commits (merges) the push brings.
    pub merges: usize,
}

/// The generated repository.
#[derive(Debug, Clone)]
pub struct History {
    /// A non-bare repository whose `HEAD` is `main` (nothing checked out).
    pub dir: PathBuf,
    /// The first commit (not a pull request).
    pub root: String,
    pub pushes: Vec<Push>,
    /// Every pull request, by number.
    pub pulls: Vec<Pull>,
    /// Every top-level folder that ever held files.
    pub areas: BTreeSet<String>,
    /// Top-level folders removed whole.
    pub removed_areas: BTreeSet<String>,
    /// Each path a submodule ever had → every commit it pinned there.
    pub submodules: BTreeMap<String, Vec<String>>,
}

/// Tree mode of a submodule (a gitlink): the entry names a commit of
/// another repository.
const GITLINK: u32 = 0o160000;

/// The commit of another repository a submodule pins, made up from `seed`
/// (the superproject never holds it).
fn foreign_commit(seed: u64) -> String {
    let mut rng = Rng(seed ^ 0x5B_0D);
    format!(
        "{:016x}{:016x}{:08x}",
        rng.next(),
        rng.next(),
        rng.next() as u32
    )
}

/// `.gitmodules` naming `paths`.
fn gitmodules(paths: &[&str]) -> Vec<u8> {
    paths
        .iter()
        .map(|p| {
            let name = p.rsplit('/').next().unwrap_or(p);
            format!("[submodule \"{p}\"]\n\tpath = {p}\n\turl = https://example.org/{name}.git\n")
        })
        .collect::<String>()
        .into_bytes()
}

/// The areas of the initial tree; `legacy` is removed whole later.
pub const AREAS: [&str; 22] = [
    "api",
    "auth",
    "billing",
    "cli",
    "core",
    "db",
    "docs",
    "frontend",
    "infra",
    "jobs",
    "legacy",
    "mobile",
    "notifications",
    "payments",
    "search",
    "services",
    "storage",
    "telemetry",
    "tools",
    "web",
    "vendor",
    ".github",
];

/// The area removed whole, and when (a share of the history).
pub const REMOVED_AREA: &str = "legacy";
/// Areas whose `fixes/` folders only the maintenance branch writes.
const STABLE_AREAS: [&str; 4] = ["core", "db", "auth", "payments"];
/// The first commit's time: 2023-10-02T00:00:00Z.
const START: i64 = 1_696_204_800;
/// Three years.
const SPAN: i64 = 3 * 365 * 86_400;

/// splitmix64: small, deterministic, good enough for shapes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    mode: u32,
    data: Vec<u8>,
}

type Tree = BTreeMap<Vec<u8>, Entry>;

#[derive(Debug, Clone)]
enum Op {
    Modify(Vec<u8>, u32, Vec<u8>),
    Delete(Vec<u8>),
    Rename(Vec<u8>, Vec<u8>),
}

fn under(tree: &Tree, dir: &[u8]) -> Vec<Vec<u8>> {
    let mut prefix = dir.to_vec();
    prefix.push(b'/');
    tree.range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .map(|(k, _)| k.clone())
        .collect()
}

/// Applies `ops` to `tree`; returns the paths they touched (both sides of a
/// rename, every file of a folder).
fn apply(tree: &mut Tree, ops: &[Op]) -> BTreeSet<Vec<u8>> {
    let mut touched = BTreeSet::new();
    for op in ops {
        match op {
            Op::Modify(path, mode, data) => {
                tree.insert(
                    path.clone(),
                    Entry {
                        mode: *mode,
                        data: data.clone(),
                    },
                );
                touched.insert(path.clone());
            }
            Op::Delete(path) => {
                if tree.remove(path).is_some() {
                    touched.insert(path.clone());
                }
                for p in under(tree, path) {
                    tree.remove(&p);
                    touched.insert(p);
                }
            }
            Op::Rename(from, to) => {
                if let Some(e) = tree.remove(from) {
                    tree.insert(to.clone(), e);
                    touched.insert(from.clone());
                    touched.insert(to.clone());
                }
                for p in under(tree, from) {
                    let e = tree.remove(&p).unwrap();
                    let mut q = to.clone();
                    q.extend_from_slice(&p[from.len()..]);
                    touched.insert(p);
                    touched.insert(q.clone());
                    tree.insert(q, e);
                }
            }
        }
    }
    touched
}

struct Person {
    name: &'static str,
    login: &'static str,
}

const PEOPLE: [Person; 16] = [
    Person {
        name: "Ada Okafor",
        login: "ada",
    },
    Person {
        name: "Bruno Silva",
        login: "bsilva",
    },
    Person {
        name: "Chen Wei",
        login: "chenwei",
    },
    Person {
        name: "Dana Levi",
        login: "dlevi",
    },
    Person {
        name: "Emeka Obi",
        login: "emeka",
    },
    Person {
        name: "Freya Nilsson",
        login: "freya",
    },
    Person {
        name: "Gopal Rao",
        login: "gopal",
    },
    Person {
        name: "Hana Sato",
        login: "hsato",
    },
    Person {
        name: "Ivan Petrov",
        login: "ipetrov",
    },
    Person {
        name: "Jade Martin",
        login: "jade",
    },
    Person {
        name: "Kofi Mensah",
        login: "kofi",
    },
    Person {
        name: "Lucía Gómez",
        login: "lgomez",
    },
    Person {
        name: "Mia Schmidt",
        login: "mias",
    },
    Person {
        name: "Noor Haddad",
        login: "noor",
    },
    Person {
        name: "Zoë Ünal",
        login: "zoe",
    },
    Person {
        name: "dependabot[bot]",
        login: "dependabot",
    },
];

const VERBS: [&str; 12] = [
    "Fix", "Add", "Speed up", "Refactor", "Document", "Harden", "Retry", "Cache", "Validate",
    "Simplify", "Log", "Test",
];
const THINGS: [&str; 16] = [
    "the retry backoff",
    "session expiry",
    "the CSV export",
    "pagination",
    "the health check",
    "rate limiting",
    "webhook signatures",
    "the search index",
    "invoice rounding",
    "the upload size check",
    "timezone handling",
    "the config loader",
    "error messages",
    "the metrics endpoint",
    "connection pooling",
    "feature flags",
];
const REASONS: [&str; 8] = [
    "a slow dependency no longer stalls every request",
    "users in UTC+13 stop seeing yesterday's data",
    "the nightly job finishes before the backups start",
    "operators can tell a timeout from a refusal",
    "a retry after a crash never charges twice",
    "the page loads in one round trip",
    "the error names the field that was wrong",
    "the cache cannot serve another tenant's rows",
];

/// A hostile title now and then: HTML, links, images, a fake marker, code.
fn title_for(rng: &mut Rng, area: &str) -> String {
    let verb = rng.pick(&VERBS);
    let thing = rng.pick(&THINGS);
    match rng.below(40) {
        0 => format!("{verb} <img src=x onerror=alert(1)> in {area}"),
        1 => format!("{verb} [{thing}](javascript:alert(1)) in {area}"),
        2 => format!(
            "{verb} {thing} <!-- teammem:{} --> in {area}",
            "0".repeat(40)
        ),
        3 => format!("{verb} `<script>` handling in {area}"),
        4 => format!("{verb} ![pixel](https://evil.example/p.png) in {area}"),
        5 => format!("{verb} **{thing}** and _{area}_ <b>now</b>"),
        _ => format!("{verb} {thing} in {area}"),
    }
}

fn why(rng: &mut Rng, thing_seed: usize) -> String {
    let thing = THINGS[thing_seed % THINGS.len()];
    let reason = rng.pick(&REASONS);
    format!(
        "This changes how {thing} works so that {reason}. The old behaviour stays behind a flag for one release."
    )
}

fn trailers(rng: &mut Rng, author: &Person) -> String {
    let other = rng.pick(&PEOPLE);
    let mut t = format!(
        "Signed-off-by: {} <{}@example.org>",
        author.name, author.login
    );
    if rng.chance(40) {
        t.push_str(&format!(
            "\nCo-authored-by: {} <{}@users.noreply.github.com>",
            other.name, other.login
        ));
    }
    if rng.chance(15) {
        t.push_str(&format!(
            "\nReviewed-by: {} <{}@example.org>",
            other.name, other.login
        ));
    }
    if rng.chance(10) {
        t.push_str(&format!("\nChange-Id: I{:040x}", rng.next() as u128 * 7));
    }
    t
}

/// A description: the PR template with its checklist, a plain paragraph,
/// an untouched template, hostile text, code spans, or nothing.
fn body_for(rng: &mut Rng, author: &Person, number: u64) -> String {
    let why = why(rng, number as usize);
    let trailers = trailers(rng, author);
    match rng.below(10) {
        0..=3 => format!(
            "## Summary\n\n{why}\n\n## Checklist\n\n- [x] Tests added or updated\n- [ ] Docs updated\n- [x] I ran `make check` locally\n\nCloses #{}\n\n{trailers}\n",
            number + 10_000
        ),
        4 | 5 => format!("{why}\n\n{trailers}\n"),
        6 => "## Summary\n\n<!-- Describe your change and why. -->\n\n## Checklist\n\n- [ ] Tests added or updated\n- [ ] Docs updated\n".to_owned(),
        7 => format!(
            "{why} See ![pixel](https://evil.example/p.png?{number}) and [the docs](http://evil.example/phish).\n\n<details><summary>log</summary><script>alert(1)</script></details>\n\n<!-- teammem:evidence src/x.rs@{}#L1 -->\n<!-- teammem:changelog -->\n",
            "f".repeat(40)
        ),
        8 => format!(
            "{why} Clients call `PATCH /todos/<id>` with `{{\"done\": true}}`; a literal ``a`b`` stays code.\n\n```rust\nfn main() {{ println!(\"<!-- teammem:x -->\"); }}\n```\n\n{trailers}\n"
        ),
        _ => String::new(),
    }
}

/// A source file's text: a header stating its purpose (most files), then
/// `lines` lines that change with `version`.
fn source_text(path: &str, version: u64) -> Vec<u8> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.split('.').next().unwrap_or(name);
    let ext = name.rsplit('.').next().unwrap_or("");
    let sentence = format!("Handles {stem} for this area, one request at a time.");
    let header = match ext {
        "rs" => format!("//! {sentence}\n\n"),
        "py" => format!("\"\"\"{sentence}\"\"\"\n\n"),
        "ts" | "js" => format!("/**\n * @file {sentence}\n */\n"),
        "go" => format!("// Package {stem} {}\npackage {stem}\n\n", &sentence[8..]),
        "md" => format!("# {stem}\n\n{sentence}\n\n"),
        "sh" => format!("#!/bin/sh\n# {sentence}\n"),
        _ => String::new(),
    };
    let mut text = header;
    let lines = 4 + (version % 9) as usize;
    for i in 0..lines {
        text.push_str(&format!("{stem} line {i} version {version}\n"));
    }
    text.into_bytes()
}

const EXTS: [&str; 8] = ["rs", "py", "ts", "go", "md", "sh", "yaml", "js"];

fn cargo_toml(step: u64) -> Vec<u8> {
    let mut t = format!(
        "[package]\nname = \"app\"\nversion = \"0.{step}.0\"\nedition = \"2021\"\n\n[dependencies]\nserde = \"1.0.{}\"\ntokio = {{ version = \"1.{}\", features = [\"rt\"] }}\n",
        180 + step,
        30 + step / 3
    );
    if step >= 2 {
        t.push_str("serde_json = { version = \"1.0\", optional = true }\n");
    }
    if step >= 4 {
        t.push_str(&format!("regex = \"1.{}\"\n", step));
    }
    if step >= 3 {
        t.push_str("\n[target.'cfg(unix)'.dependencies]\nlibc = \"0.2\"\n");
    }
    if step >= 5 {
        t.push_str("\n[target.'cfg(windows)'.dependencies]\nwindows-sys = { version = \"0.59\", optional = true }\n");
    }
    t.push_str(&format!(
        "\n[dev-dependencies]\nproptest = \"1.{}\"\n",
        step % 6
    ));
    t.into_bytes()
}

fn package_json(step: u64) -> Vec<u8> {
    let mut deps = format!("    \"react\": \"^18.{}.0\"", step % 4);
    if step >= 2 {
        deps.push_str(",\n    \"zod\": \"^3.22.0\"");
    }
    format!(
        "{{\n  \"name\": \"web\",\n  \"version\": \"1.{step}.0\",\n  \"dependencies\": {{\n{deps}\n  }},\n  \"devDependencies\": {{\n    \"vitest\": \"1.{step}.0\"\n  }}\n}}\n"
    )
    .into_bytes()
}

fn pyproject(step: u64) -> Vec<u8> {
    let mut t = format!(
        "[project]\nname = \"tools\"\nversion = \"0.{step}\"\ndependencies = [\n    \"httpx>=0.{}\",\n    \"click\",\n]\n",
        24 + step
    );
    if step >= 2 {
        t.push_str("\n[project.optional-dependencies]\ncli = [\"rich>=13\"]\n");
    }
    if step >= 3 {
        t.push_str("\n[dependency-groups]\ntest = [\"pytest>=8\", \"coverage[toml]\"]\nlint = [\"ruff==0.6.9\", {include-group = \"test\"}]\n");
    }
    t.into_bytes()
}

/// A tiny PNG-looking binary: NUL bytes and invalid UTF-8.
fn binary(seed: u64) -> Vec<u8> {
    let mut data = vec![
        0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d,
    ];
    for i in 0..64u64 {
        data.push(((seed.wrapping_mul(31).wrapping_add(i * 7)) % 256) as u8);
        data.push(0);
    }
    data
}

/// The fast-import stream being written and the marks it names.
struct Stream {
    out: Vec<u8>,
    next_mark: u64,
}

impl Stream {
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &mut self,
        branch: &str,
        author: (&str, &str),
        committer: (&str, &str),
        when: i64,
        message: &[u8],
        from: Option<u64>,
        merges: &[u64],
        ops: &[Op],
    ) -> u64 {
        self.next_mark += 1;
        let mark = self.next_mark;
        let o = &mut self.out;
        let _ = writeln!(o, "commit {branch}\nmark :{mark}");
        let _ = writeln!(o, "author {} <{}> {when} +0000", author.0, author.1);
        let _ = writeln!(
            o,
            "committer {} <{}> {when} +0000",
            committer.0, committer.1
        );
        let _ = writeln!(o, "data {}", message.len());
        o.extend_from_slice(message);
        o.push(b'\n');
        if let Some(from) = from {
            let _ = writeln!(o, "from :{from}");
        }
        for m in merges {
            let _ = writeln!(o, "merge :{m}");
        }
        for op in ops {
            match op {
                Op::Modify(path, GITLINK, commit) => {
                    let _ = write!(o, "M {GITLINK:o} ");
                    o.extend_from_slice(commit);
                    o.push(b' ');
                    o.extend_from_slice(path);
                    o.push(b'\n');
                }
                Op::Modify(path, mode, data) => {
                    let _ = write!(o, "M {mode:o} inline ");
                    o.extend_from_slice(path);
                    let _ = writeln!(o, "\ndata {}", data.len());
                    o.extend_from_slice(data);
                    o.push(b'\n');
                }
                Op::Delete(path) => {
                    o.extend_from_slice(b"D ");
                    o.extend_from_slice(path);
                    o.push(b'\n');
                }
                Op::Rename(from, to) => {
                    o.extend_from_slice(b"R ");
                    o.extend_from_slice(from);
                    o.push(b' ');
                    o.extend_from_slice(to);
                    o.push(b'\n');
                }
            }
        }
        o.push(b'\n');
        mark
    }
}

const GITHUB: (&str, &str) = ("GitHub", "noreply@github.com");

fn who(p: &Person) -> (&'static str, String) {
    (p.name, format!("{}@example.org", p.login))
}

/// A pull request being built, before its commit ids are known.
struct Pending {
    number: u64,
    title: String,
    how: How,
    mark: u64,
    paths: BTreeSet<Vec<u8>>,
    when: i64,
}

/// The generator's state.
struct Gen {
    rng: Rng,
    s: Stream,
    main: Tree,
    main_tip: u64,
    stable: Option<(Tree, u64)>,
    /// Paths the maintenance branch changed since it was last merged back.
    stable_dirty: BTreeSet<Vec<u8>>,
    pulls: Vec<Pending>,
    /// Main's first-parent commits after the root, in order.
    chain: Vec<u64>,
    number: u64,
    removed: BTreeSet<String>,
    renamed_dirs: Vec<(String, String)>,
    manifest_step: u64,
    /// The last squash PR's (number, title, ops' inverse) for the revert.
    revertable: Option<(String, Vec<Op>)>,
}

fn lossy(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

impl Gen {
    fn next_number(&mut self) -> u64 {
        // GitHub numbers issues and PRs together: gaps.
        self.number += 1 + (self.rng.below(3) as u64);
        self.number
    }

    fn alive_areas(&self) -> Vec<&'static str> {
        AREAS
            .iter()
            .copied()
            .filter(|a| !self.removed.contains(*a))
            .collect()
    }

    /// Files of `area` a regular PR may change (not the maintenance
    /// branch's, not special files).
    fn files_of(&self, area: &str) -> Vec<Vec<u8>> {
        under(&self.main, area.as_bytes())
            .into_iter()
            .filter(|p| {
                let s = lossy(p);
                !s.contains("/fixes/")
                    && self.main.get(p).is_some_and(|e| e.mode == 0o100644)
                    && !s.ends_with("Cargo.toml")
                    && !s.ends_with("package.json")
                    && !s.ends_with("pyproject.toml")
                    && !s.ends_with(".png")
                    && std::str::from_utf8(p).is_ok()
            })
            .collect()
    }

    /// 1-6 changes in 1-3 areas: modify, add, delete, rename.
    fn regular_ops(&mut self, number: u64) -> (Vec<Op>, String) {
        let alive = self.alive_areas();
        let count = match self.rng.below(20) {
            0 => 3,
            1..=5 => 2,
            _ => 1,
        };
        let mut ops = Vec::new();
        let mut first = String::new();
        let mut chosen = BTreeSet::new();
        for _ in 0..count {
            let area = *self.rng.pick(&alive);
            if !chosen.insert(area) {
                continue;
            }
            if first.is_empty() {
                first = area.to_owned();
            }
            let files = self.files_of(area);
            let changes = 1 + self.rng.below(3);
            let mut used = BTreeSet::new();
            for _ in 0..changes {
                let roll = self.rng.below(100);
                if files.is_empty() || roll < 20 {
                    let sub = if self.rng.chance(30) { "/sub" } else { "" };
                    let ext = *self.rng.pick(&EXTS);
                    let path = format!("{area}{sub}/new_{number}_{}.{ext}", used.len());
                    let data = source_text(&path, number);
                    used.insert(path.clone().into_bytes());
                    ops.push(Op::Modify(path.into_bytes(), 0o100644, data));
                    continue;
                }
                let path = self.rng.pick(&files).clone();
                if !used.insert(path.clone()) {
                    continue;
                }
                if roll < 27 && files.len() > 4 {
                    ops.push(Op::Delete(path));
                } else if roll < 34 && files.len() > 4 {
                    let s = lossy(&path);
                    let (dir, name) = s.rsplit_once('/').unwrap();
                    let to = format!("{dir}/renamed_{number}_{name}");
                    used.insert(to.clone().into_bytes());
                    ops.push(Op::Rename(path, to.into_bytes()));
                } else {
                    let data = source_text(&lossy(&path), number);
                    ops.push(Op::Modify(path, 0o100644, data));
                }
            }
        }
        (ops, first)
    }

    /// Lands `ops` on main as PR `number`: a squash or a true merge.
    #[allow(clippy::too_many_arguments)] // one PR's whole description, as the generator builds it
    fn land_on_main(
        &mut self,
        number: u64,
        title: &str,
        body: &str,
        author: &Person,
        when: i64,
        ops: Vec<Op>,
        merge: bool,
    ) {
        let author_id = who(author);
        let author_id = (author_id.0, author_id.1.as_str());
        let touched;
        let mark = if merge {
            // A branch of 1-2 commits off main's tip, then the merge.
            let branch = format!("{}/{}", author.login, slug(title));
            let mut feature_tree = self.main.clone();
            let split = if ops.len() > 1 && self.rng.chance(50) {
                ops.len() / 2
            } else {
                ops.len()
            };
            let mut tip = self.main_tip;
            for (i, part) in [&ops[..split], &ops[split..]].into_iter().enumerate() {
                if part.is_empty() && i == 1 {
                    continue;
                }
                apply(&mut feature_tree, part);
                tip = self.s.commit(
                    "refs/pr/tmp",
                    author_id,
                    author_id,
                    when - 3600 + i as i64,
                    format!("WIP {title} part {}", i + 1).as_bytes(),
                    Some(tip),
                    &[],
                    part,
                );
            }
            touched = apply(&mut self.main, &ops);
            let message =
                format!("Merge pull request #{number} from {branch}\n\n{title}\n\n{body}");
            self.s.commit(
                "refs/heads/main",
                GITHUB,
                GITHUB,
                when,
                message.as_bytes(),
                Some(self.main_tip),
                &[tip],
                &ops,
            )
        } else {
            touched = apply(&mut self.main, &ops);
            let message = format!("{title} (#{number})\n\n{body}");
            self.s.commit(
                "refs/heads/main",
                author_id,
                GITHUB,
                when,
                message.as_bytes(),
                Some(self.main_tip),
                &[],
                &ops,
            )
        };
        self.main_tip = mark;
        self.chain.push(mark);
        self.pulls.push(Pending {
            number,
            title: title.to_owned(),
            how: if merge { How::Merge } else { How::Squash },
            mark,
            paths: touched,
            when,
        });
    }
}

fn slug(title: &str) -> String {
    let mut s: String = title
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    s.truncate(30);
    s.trim_matches('-').to_owned()
}

/// The initial tree: every area with 14 files (nested folders in some),
/// manifests, the PR template, a README.
fn initial_tree() -> Vec<Op> {
    let mut ops = Vec::new();
    for (a, area) in AREAS.iter().enumerate() {
        for i in 0..14 {
            let ext = EXTS[(a + i) % EXTS.len()];
            let sub = match (area, i % 5) {
                (&"services", 0) => "/mailer",
                (&"services", 1) => "/billing-worker/src",
                (&"infra", 0) => "/terraform/modules",
                (&"api", 0 | 1) => "/v1",
                (&"api", 2) => "/v2",
                (&"web", 0) => "/assets",
                (&"docs", 0 | 1) => "/guide",
                (&"tools", 0..=2) => "/scripts",
                _ => "",
            };
            let path = format!("{area}{sub}/{}_{i}.{ext}", area.trim_start_matches('.'));
            let data = source_text(&path, 0);
            ops.push(Op::Modify(path.into_bytes(), 0o100644, data));
        }
    }
    let root = [
        ("README.md", b"# app\n\nThe application and its tools.\n".to_vec()),
        ("Cargo.toml", cargo_toml(0)),
        ("web/package.json", package_json(0)),
        ("tools/pyproject.toml", pyproject(0)),
        (
            ".github/pull_request_template.md",
            b"## Summary\n\n<!-- Describe your change and why. -->\n\n## Checklist\n\n- [ ] Tests added or updated\n- [ ] Docs updated\n".to_vec(),
        ),
    ];
    for (path, data) in root {
        ops.push(Op::Modify(path.as_bytes().to_vec(), 0o100644, data));
    }
    ops
}

/// Where in the history (a share of `prs`) the one-off events happen.
fn at(prs: usize, share: f64) -> usize {
    ((prs as f64 * share) as usize).clamp(1, prs.max(1))
}

/// Builds the repository at `dir` (created; must not exist or be empty).
pub fn generate(dir: &Path, spec: &Spec) -> History {
    std::fs::create_dir_all(dir).expect("create the history's directory");
    run_git(dir, &["init", "-q", "-b", "main"], None);
    let mut g = Gen {
        rng: Rng(spec.seed ^ 0x7EA3_3E3E),
        s: Stream {
            out: Vec::with_capacity(16 << 20),
            next_mark: 0,
        },
        main: Tree::new(),
        main_tip: 0,
        stable: None,
        stable_dirty: BTreeSet::new(),
        pulls: Vec::new(),
        chain: Vec::new(),
        number: 0,
        removed: BTreeSet::new(),
        renamed_dirs: Vec::new(),
        manifest_step: 0,
        revertable: None,
    };
    let ops = initial_tree();
    apply(&mut g.main, &ops);
    let first = who(&PEOPLE[0]);
    g.main_tip = g.s.commit(
        "refs/heads/main",
        (first.0, &first.1),
        (first.0, &first.1),
        START,
        b"Initial import\n",
        None,
        &[],
        &ops,
    );
    let root_mark = g.main_tip;

    let n = spec.prs;
    // One-off events by PR index (1-based).
    let symlink_at = at(n, 0.08);
    let binary_at = at(n, 0.10);
    let stable_from = at(n, 0.12);
    let latin1_at = at(n, 0.18);
    let nested_delete_at = at(n, 0.30);
    let dir_rename_at = at(n, 0.40);
    let revert_of = at(n, 0.44);
    let revert_at = at(n, 0.46);
    let big_at = at(n, 0.50);
    let removal_at = at(n, 0.70);
    let octopus_at = [at(n, 0.25), at(n, 0.55), at(n, 0.85)];
    // Submodules: added, re-pinned, moved, one removed (shares chosen off
    // the manifest bumps' multiples for 400 and 1,500 PRs).
    let submodule_at = [at(n, 0.15), at(n, 0.34), at(n, 0.48), at(n, 0.76)];
    let mut submodules: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let empty_at = [at(n, 0.35), at(n, 0.65)];
    let manifest_every = (n / 12).max(7);
    // The indexes a one-off event owns: never taken by a stable PR.
    let special: BTreeSet<usize> = [
        symlink_at,
        binary_at,
        latin1_at,
        nested_delete_at,
        dir_rename_at,
        revert_of,
        revert_at,
        big_at,
        removal_at,
    ]
    .into_iter()
    .chain(octopus_at)
    .chain(empty_at)
    .chain(submodule_at)
    .collect();

    let mut landed = 0usize;
    while landed < n {
        let when = START + (SPAN as f64 * (landed as f64 + 1.0) / n as f64) as i64
            - g.rng.below(3600) as i64;
        let when = when.max(START + landed as i64 + 1);
        let author = &PEOPLE[g.rng.below(PEOPLE.len())];
        let i = landed + 1;

        // The maintenance branch: created once, receives ~15% of the PRs
        // after that, merged back every ~50 PRs and at the end.
        if i == stable_from && g.stable.is_none() {
            g.s.out.extend_from_slice(
                format!("reset refs/heads/stable\nfrom :{}\n\n", g.main_tip).as_bytes(),
            );
            g.stable = Some((g.main.clone(), g.main_tip));
        }
        let merge_back_due = g.stable.is_some()
            && !g.stable_dirty.is_empty()
            && (i.is_multiple_of(50) || landed + 1 == n);
        if merge_back_due {
            merge_back(&mut g, when - 60);
        }
        if octopus_at.contains(&i) && landed + 3 <= n {
            landed += octopus(&mut g, when);
            continue;
        }
        if g.stable.is_some()
            && i > stable_from
            && !special.contains(&i)
            && landed + 2 < n
            && g.rng.chance(15)
        {
            stable_pull(&mut g, author, when);
            landed += 1;
            continue;
        }
        let number = g.next_number();
        let (title, body, ops, merge, how) = if let Some(step) =
            submodule_at.iter().position(|at| *at == i)
        {
            let pin = foreign_commit(number);
            let mut note = |path: &str| {
                submodules
                    .entry(path.to_owned())
                    .or_default()
                    .push(pin.clone());
            };
            let link = |path: &str| {
                Op::Modify(path.as_bytes().to_vec(), GITLINK, pin.clone().into_bytes())
            };
            let modules =
                |paths: &[&str]| Op::Modify(b".gitmodules".to_vec(), 0o100644, gitmodules(paths));
            let (title, ops) = match step {
                0 => {
                    note("vendor/zlib");
                    note("docs-theme");
                    (
                        "Vendor zlib and the docs theme as submodules",
                        vec![
                            modules(&["vendor/zlib", "docs-theme"]),
                            link("vendor/zlib"),
                            link("docs-theme"),
                        ],
                    )
                }
                1 => {
                    note("vendor/zlib");
                    ("Bump zlib to its latest release", vec![link("vendor/zlib")])
                }
                2 => {
                    let kept = submodules["docs-theme"].last().unwrap().clone();
                    submodules
                        .entry("docs/theme".to_owned())
                        .or_default()
                        .push(kept);
                    (
                        "Move the docs theme under docs/",
                        vec![
                            Op::Rename(b"docs-theme".to_vec(), b"docs/theme".to_vec()),
                            modules(&["vendor/zlib", "docs/theme"]),
                        ],
                    )
                }
                _ => (
                    "Drop the docs theme submodule",
                    vec![
                        Op::Delete(b"docs/theme".to_vec()),
                        modules(&["vendor/zlib"]),
                    ],
                ),
            };
            (
                title.to_owned(),
                "Submodules pin another repository's commit.\n".to_owned(),
                ops,
                step == 1,
                How::Squash,
            )
        } else if i == symlink_at {
            (
                "Point docs/latest at the current guide".to_owned(),
                "A symlink, so old links keep working.\n".to_owned(),
                vec![Op::Modify(
                    b"docs/latest".to_vec(),
                    0o120000,
                    b"guide/docs_0.md".to_vec(),
                )],
                false,
                How::Squash,
            )
        } else if i == binary_at {
            (
                "Add the logo".to_owned(),
                "The PNG the web page shows.\n".to_owned(),
                vec![Op::Modify(
                    b"web/assets/logo.png".to_vec(),
                    0o100644,
                    binary(number),
                )],
                false,
                How::Squash,
            )
        } else if i == latin1_at {
            // A Latin-1 path and subject (not UTF-8).
            let title = b"R\xe9sum\xe9 export for caf\xe9 owners".to_vec();
            let path = b"docs/caf\xe9.md".to_vec();
            let data = b"# caf\xe9\n\nLatin-1 text.\n".to_vec();
            let ops = vec![Op::Modify(path, 0o100644, data)];
            let touched = apply(&mut g.main, &ops);
            let mut message = title.clone();
            message.extend_from_slice(format!(" (#{number})\n\nWritten in Latin-1.\n").as_bytes());
            let a = who(author);
            let mark = g.s.commit(
                "refs/heads/main",
                (a.0, &a.1),
                GITHUB,
                when,
                &message,
                Some(g.main_tip),
                &[],
                &ops,
            );
            g.main_tip = mark;
            g.chain.push(mark);
            g.pulls.push(Pending {
                number,
                title: String::from_utf8_lossy(&title).into_owned(),
                how: How::Squash,
                mark,
                paths: touched,
                when,
            });
            landed += 1;
            continue;
        } else if i == nested_delete_at {
            (
                "Remove the v1 API".to_owned(),
                "## Summary\n\nv1 has had no traffic for a year.\n\n## Checklist\n\n- [x] Tests\n"
                    .to_owned(),
                vec![Op::Delete(b"api/v1".to_vec())],
                true,
                How::Merge,
            )
        } else if i == dir_rename_at {
            g.renamed_dirs
                .push(("tools/scripts".into(), "tools/bin".into()));
            (
                "Move tools/scripts to tools/bin".to_owned(),
                "Everything executable in one place.\n\nSigned-off-by: Ada Okafor <ada@example.org>\n".to_owned(),
                vec![Op::Rename(b"tools/scripts".to_vec(), b"tools/bin".to_vec())],
                false,
                How::Squash,
            )
        } else if i == big_at {
            // One PR touching 300 files across every area.
            let mut files: Vec<Vec<u8>> =
                g.alive_areas().iter().flat_map(|a| g.files_of(a)).collect();
            files.truncate(300);
            assert_eq!(files.len(), 300, "the tree holds 300 files for the big PR");
            let ops = files
                .into_iter()
                .map(|p| {
                    let mut data = b"// SPDX-License-Identifier: Apache-2.0\n".to_vec();
                    data.extend_from_slice(&source_text(&lossy(&p), number));
                    Op::Modify(p, 0o100644, data)
                })
                .collect();
            (
                "Add SPDX license headers everywhere".to_owned(),
                "## Summary\n\nEvery source file now starts with its SPDX line.\n\n## Checklist\n\n- [x] Tests\n- [x] Docs\n\nSigned-off-by: Gopal Rao <gopal@example.org>\n".to_owned(),
                ops,
                true,
                How::Merge,
            )
        } else if i == removal_at {
            g.removed.insert(REMOVED_AREA.to_owned());
            (
                format!("Remove the {REMOVED_AREA} module"),
                "Nothing has imported it since the rewrite.\n".to_owned(),
                vec![Op::Delete(REMOVED_AREA.as_bytes().to_vec())],
                false,
                How::Squash,
            )
        } else if empty_at.contains(&i) {
            // A merge whose branch changed nothing.
            let branch = format!("{}/noop-{number}", author.login);
            let a = who(author);
            let tip = g.s.commit(
                "refs/pr/tmp",
                (a.0, &a.1),
                (a.0, &a.1),
                when - 600,
                b"Empty commit to retrigger CI\n",
                Some(g.main_tip),
                &[],
                &[],
            );
            let title = "Retrigger the release pipeline".to_owned();
            let message = format!("Merge pull request #{number} from {branch}\n\n{title}\n");
            let mark = g.s.commit(
                "refs/heads/main",
                GITHUB,
                GITHUB,
                when,
                message.as_bytes(),
                Some(g.main_tip),
                &[tip],
                &[],
            );
            g.main_tip = mark;
            g.chain.push(mark);
            g.pulls.push(Pending {
                number,
                title,
                how: How::Empty,
                mark,
                paths: BTreeSet::new(),
                when,
            });
            landed += 1;
            continue;
        } else if i == revert_at && g.revertable.is_some() {
            let (title, ops) = g.revertable.take().unwrap();
            (
                format!("Revert \"{title}\""),
                format!(
                    "Reverts the change: it broke the nightly export.\n\nThis reverts #{}.\n",
                    number - 1
                ),
                ops,
                false,
                How::Squash,
            )
        } else if i.is_multiple_of(manifest_every) {
            g.manifest_step += 1;
            let step = g.manifest_step;
            let (path, data) = match step % 3 {
                0 => ("Cargo.toml", cargo_toml(step / 3 + 1)),
                1 => ("web/package.json", package_json(step / 3 + 1)),
                _ => ("tools/pyproject.toml", pyproject(step / 3 + 1)),
            };
            (
                format!("Bump dependencies in {path}"),
                format!(
                    "Bumps the {path} dependencies.\n\nSigned-off-by: dependabot[bot] <support@github.com>\n"
                ),
                vec![Op::Modify(path.as_bytes().to_vec(), 0o100644, data)],
                false,
                How::Squash,
            )
        } else {
            let (mut ops, area) = g.regular_ops(number);
            let title = title_for(&mut g.rng, &area);
            let body = body_for(&mut g.rng, author, number);
            if i == revert_of {
                // The PR that is reverted later: adds a file, changes one.
                let added = format!("{area}/export_flag_{number}.rs").into_bytes();
                ops = vec![Op::Modify(
                    added.clone(),
                    0o100644,
                    source_text(&lossy(&added), number),
                )];
                let target = g.files_of(&area).into_iter().next();
                let mut inverse = vec![Op::Delete(added)];
                if let Some(t) = target {
                    let old = g.main[&t].data.clone();
                    ops.push(Op::Modify(
                        t.clone(),
                        0o100644,
                        source_text(&lossy(&t), number + 1),
                    ));
                    inverse.push(Op::Modify(t, 0o100644, old));
                }
                g.revertable = Some((title.clone(), inverse));
            }
            let merge = g.rng.chance(35);
            (
                title,
                body,
                ops,
                merge,
                if merge { How::Merge } else { How::Squash },
            )
        };
        let _ = how;
        g.land_on_main(number, &title, &body, author, when, ops, merge);
        landed += 1;
    }
    if !g.stable_dirty.is_empty() {
        merge_back(&mut g, START + SPAN + 60);
    }

    // Import, then read the marks back.
    let marks_file = dir.join(".git/history-marks");
    run_git(
        dir,
        &[
            "fast-import",
            "--quiet",
            "--force",
            &format!("--export-marks={}", marks_file.display()),
        ],
        Some(&g.s.out),
    );
    let marks_text = std::fs::read_to_string(&marks_file).expect("read the marks");
    let _ = std::fs::remove_file(&marks_file);
    let mut marks: BTreeMap<u64, String> = BTreeMap::new();
    for line in marks_text.lines() {
        let (m, sha) = line.split_once(' ').expect("a mark line");
        marks.insert(m.trim_start_matches(':').parse().unwrap(), sha.to_owned());
    }
    run_git(dir, &["update-ref", "-d", "refs/pr/tmp"], None);
    run_git(dir, &["commit-graph", "write", "--reachable"], None);

    // Pushes: mostly one merge, sometimes 2-4.
    let mut rng = Rng(spec.seed ^ 0x9E5);
    let mut pushes = Vec::new();
    let mut before = root_mark;
    let mut k = 0;
    while k < g.chain.len() {
        let size = if rng.chance(20) { 2 + rng.below(3) } else { 1 };
        let end = (k + size).min(g.chain.len());
        let after = g.chain[end - 1];
        pushes.push(Push {
            before: marks[&before].clone(),
            after: marks[&after].clone(),
            merges: end - k,
        });
        before = after;
        k = end;
    }
    let mut pulls: Vec<Pull> = g
        .pulls
        .iter()
        .map(|p| Pull {
            number: p.number,
            sha: marks[&p.mark].clone(),
            title: p.title.clone(),
            how: p.how,
            paths: p.paths.iter().map(|x| lossy(x)).collect(),
            merged_at: p.when,
        })
        .collect();
    pulls.sort_by_key(|p| p.number);
    History {
        dir: dir.to_path_buf(),
        root: marks[&root_mark].clone(),
        pushes,
        pulls,
        areas: AREAS
            .iter()
            .map(|a| (*a).to_owned())
            .chain(["root".to_owned()])
            .collect(),
        removed_areas: g.removed.clone(),
        submodules,
    }
}

/// A PR into `stable`: adds or changes a file under a stable area's
/// `fixes/` folder, as a squash or a merge.
fn stable_pull(g: &mut Gen, author: &Person, when: i64) {
    let number = g.next_number();
    let area = *g.rng.pick(&STABLE_AREAS);
    let (mut tree, tip) = g.stable.take().expect("stable exists");
    let existing = under(&tree, format!("{area}/fixes").as_bytes());
    let path = if !existing.is_empty() && g.rng.chance(40) {
        g.rng.pick(&existing).clone()
    } else {
        format!("{area}/fixes/fix_{number}.md").into_bytes()
    };
    let ops = vec![Op::Modify(
        path.clone(),
        0o100644,
        source_text(&lossy(&path), number),
    )];
    let title = format!(
        "Backport-safe fix for {} in {area}",
        THINGS[number as usize % THINGS.len()]
    );
    let body = body_for(&mut g.rng, author, number);
    let a = who(author);
    let merge = g.rng.chance(50);
    let mark = if merge {
        let mut feature = tree.clone();
        apply(&mut feature, &ops);
        let head = g.s.commit(
            "refs/pr/tmp",
            (a.0, &a.1),
            (a.0, &a.1),
            when - 1800,
            format!("{title}\n").as_bytes(),
            Some(tip),
            &[],
            &ops,
        );
        let message = format!(
            "Merge pull request #{number} from {}/fix-{number}\n\n{title}\n\n{body}",
            author.login
        );
        g.s.commit(
            "refs/heads/stable",
            GITHUB,
            GITHUB,
            when,
            message.as_bytes(),
            Some(tip),
            &[head],
            &ops,
        )
    } else {
        g.s.commit(
            "refs/heads/stable",
            (a.0, &a.1),
            GITHUB,
            when,
            format!("{title} (#{number})\n\n{body}").as_bytes(),
            Some(tip),
            &[],
            &ops,
        )
    };
    let touched = apply(&mut tree, &ops);
    g.stable_dirty.extend(touched.iter().cloned());
    g.stable = Some((tree, mark));
    g.pulls.push(Pending {
        number,
        title,
        how: How::Stable,
        mark,
        paths: touched,
        when,
    });
}

/// `Merge branch 'stable'` into main: main's tree with the maintenance
/// branch's versions of the paths it changed since the last merge-back.
fn merge_back(g: &mut Gen, when: i64) {
    let (tree, tip) = g.stable.clone().expect("stable exists");
    let ops: Vec<Op> = std::mem::take(&mut g.stable_dirty)
        .into_iter()
        .map(|p| match tree.get(&p) {
            Some(e) => Op::Modify(p, e.mode, e.data.clone()),
            None => Op::Delete(p),
        })
        .collect();
    apply(&mut g.main, &ops);
    let maintainer = who(&PEOPLE[3]);
    let mark = g.s.commit(
        "refs/heads/main",
        (maintainer.0, &maintainer.1),
        (maintainer.0, &maintainer.1),
        when,
        b"Merge branch 'stable'\n",
        Some(g.main_tip),
        &[tip],
        &ops,
    );
    g.main_tip = mark;
    g.chain.push(mark);
}

/// An octopus merge of three branches, each one squashed PR; returns 3.
fn octopus(g: &mut Gen, when: i64) -> usize {
    let mut heads = Vec::new();
    let mut all_ops = Vec::new();
    let mut names = Vec::new();
    let alive = g.alive_areas();
    for k in 0..3 {
        let number = g.next_number();
        let author = &PEOPLE[g.rng.below(PEOPLE.len())];
        let area = alive[(number as usize + k * 7) % alive.len()];
        let path = format!("{area}/octopus_{number}.rs").into_bytes();
        let ops = vec![Op::Modify(
            path.clone(),
            0o100644,
            source_text(&lossy(&path), number),
        )];
        let title = title_for(&mut g.rng, area);
        let body = body_for(&mut g.rng, author, number);
        let a = who(author);
        let t = when - 900 + k as i64;
        let head = g.s.commit(
            "refs/pr/tmp",
            (a.0, &a.1),
            GITHUB,
            t,
            format!("{title} (#{number})\n\n{body}").as_bytes(),
            Some(g.main_tip),
            &[],
            &ops,
        );
        heads.push(head);
        names.push(format!("'{}/topic-{number}'", author.login));
        g.pulls.push(Pending {
            number,
            title,
            how: How::Octopus,
            mark: head,
            paths: ops
                .iter()
                .filter_map(|o| match o {
                    Op::Modify(p, ..) => Some(p.clone()),
                    _ => None,
                })
                .collect(),
            when: t,
        });
        all_ops.extend(ops);
    }
    apply(&mut g.main, &all_ops);
    let subject = format!(
        "Merge branches {}, {} and {}\n",
        names[0], names[1], names[2]
    );
    let maintainer = who(&PEOPLE[2]);
    let mark = g.s.commit(
        "refs/heads/main",
        (maintainer.0, &maintainer.1),
        (maintainer.0, &maintainer.1),
        when,
        subject.as_bytes(),
        Some(g.main_tip),
        &heads,
        &all_ops,
    );
    g.main_tip = mark;
    g.chain.push(mark);
    3
}

/// `git ARGS` in `dir` with no user or system configuration, `stdin` fed
/// when given; panics with git's stderr when it fails.
pub fn run_git(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Vec<u8> {
    let mut child = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run git");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        let input = input.to_vec();
        // Written from a thread so a full stdout pipe cannot deadlock us.
        let writer = std::thread::spawn(move || pipe.write_all(&input));
        let out = child.wait_with_output().expect("wait for git");
        writer.join().unwrap().expect("feed git");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return out.stdout;
    }
    let out = child.wait_with_output().expect("wait for git");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
