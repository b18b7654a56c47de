//! What the how-to readers (`how_to_ci.rs`, `how_to_package.rs`,
//! `how_to_files.rs`) share: a [`HowToFact`] (a topic, the command to type
//! when there is one, and the lines it was read from), the [`Topic`]s
//! commands belong to, and the small text helpers every reader uses (cited
//! lines, shell lines as shown, text cut to a bound). It
//! sits below the readers and `how_to_sources.rs`, which hands each file to
//! its reader, so none of them imports another in a circle.
//!
//! Invariants: pure; a topic is read from words alone (a name, then the
//! command), never guessed past the lists here; a fact holds at most
//! [`RUN_LINES`] of the lines its command runs and counts the rest, and at
//! most [`WHAT_BYTES`] of description; a file yields at most
//! [`FACTS_PER_FILE`] facts, and each reader stops there, so what a reader
//! holds is bounded by the cap, not by how many targets, commands or lines a
//! hostile file repeats.

use crate::facts::Lines;

/// A command shows at most this many of the lines it runs.
pub(super) const RUN_LINES: usize = 4;
/// At most this many facts come from one file; each reader stops there.
pub const FACTS_PER_FILE: usize = 40;
/// Free text a reader shares between facts (a heading, a target's help, a
/// step's name) is cut to this many bytes before any fact copies it.
pub(super) const TEXT_BYTES: usize = 200;
/// A fact's description holds at most this many bytes.
pub(super) const WHAT_BYTES: usize = 400;

/// `text` cut to at most `max` bytes on a char boundary, `…` marking a cut.
pub(super) fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("{}…", text[..text.floor_char_boundary(max)].trim_end())
}

/// What a fact helps with; the page's sections, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Topic {
    Setup,
    Build,
    Test,
    Lint,
    Run,
    Other,
    Layout,
    Guide,
}

impl Topic {
    /// The section's heading (plain words: it is also read back by
    /// `get_context`).
    pub fn heading(self) -> &'static str {
        match self {
            Topic::Setup => "Set up",
            Topic::Build => "Build",
            Topic::Test => "Test",
            Topic::Lint => "Lint and format",
            Topic::Run => "Run",
            Topic::Other => "Other commands",
            Topic::Layout => "Project layout",
            Topic::Guide => "Contributing guide",
        }
    }
}

/// One thing the repository says about how to work on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HowToFact {
    pub topic: Topic,
    /// The file it was read from.
    pub path: String,
    /// The lines of that file that say it.
    pub lines: Lines,
    /// The command to type, when the fact is one.
    pub command: Option<String>,
    /// Where it comes from, or what it is (plain text).
    pub what: String,
    /// What the command runs, line by line (at most [`RUN_LINES`]).
    pub runs: Vec<String>,
    /// Lines it runs that are not in `runs`.
    pub more: usize,
}

/// The lines `from..=to` (0-based), as cited lines.
pub(super) fn cite(from: usize, to: usize) -> Option<Lines> {
    Lines::new(from as u32 + 1, to.max(from) as u32 + 1).ok()
}

/// Words of a text, lowercase, split at anything but letters and digits.
pub(super) fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The topic `hint` (a target's, script's or step's name) or, failing
/// that, `command` points at: lint before test before build, set-up and run,
/// so `cargo fmt --check` is lint and `npm run test` is test.
pub fn topic_of(hint: &str, command: &str) -> Option<Topic> {
    classify(&words(hint)).or_else(|| classify(&words(command)))
}

fn classify(w: &[String]) -> Option<Topic> {
    let has = |list: &[&str]| w.iter().any(|x| list.contains(&x.as_str()));
    let pair = |a: &str, b: &[&str]| {
        w.windows(2)
            .any(|p| p[0] == a && b.contains(&p[1].as_str()))
    };
    if has(&[
        "lint",
        "linter",
        "linting",
        "clippy",
        "fmt",
        "format",
        "formatting",
        "rustfmt",
        "ruff",
        "flake8",
        "eslint",
        "prettier",
        "mypy",
        "black",
        "isort",
        "pylint",
        "stylelint",
        "typecheck",
        "shellcheck",
        "golangci",
        "pyright",
        "biome",
        "style",
        "vet",
    ]) {
        return Some(Topic::Lint);
    }
    if has(&[
        "test",
        "tests",
        "testing",
        "pytest",
        "jest",
        "vitest",
        "mocha",
        "spec",
        "coverage",
        "nextest",
        "unittest",
        "ctest",
        "e2e",
        "tox",
        "nox",
        "playwright",
        "cypress",
        "bench",
    ]) {
        return Some(Topic::Test);
    }
    if has(&[
        "build", "compile", "webpack", "rollup", "esbuild", "dist", "bundle", "wheel", "sdist",
        "tsc", "package", "release",
    ]) {
        return Some(Topic::Build);
    }
    if has(&[
        "install",
        "postinstall",
        "preinstall",
        "prepare",
        "setup",
        "bootstrap",
        "deps",
        "dependencies",
        "sync",
        "ci",
        "rustup",
        "venv",
        "virtualenv",
        "init",
    ]) {
        return Some(Topic::Setup);
    }
    if has(&[
        "start", "serve", "server", "dev", "watch", "uvicorn", "gunicorn", "up",
    ]) || pair("cargo", &["run"])
        || pair("go", &["run"])
        || pair("flask", &["run"])
        || pair("docker", &["run"])
    {
        return Some(Topic::Run);
    }
    None
}

/// Shell lines as shown: comments and blanks dropped, `\` continuations
/// joined, a prompt (`$ `) taken off.
pub(super) fn shell_lines<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for line in lines {
        let t = line.trim();
        let t = t.strip_prefix("$ ").unwrap_or(t);
        if t.is_empty() || t.starts_with('#') {
            open = false;
            continue;
        }
        let (body, continues) = match t.strip_suffix('\\') {
            Some(body) => (body.trim_end(), true),
            None => (t, false),
        };
        match out.last_mut() {
            Some(last) if open => {
                last.push(' ');
                last.push_str(body);
            }
            _ => out.push(body.to_owned()),
        }
        open = continues;
    }
    out
}

/// A fact for a command whose lines run `runs` (its first [`RUN_LINES`]
/// kept, the rest counted), its description cut to [`WHAT_BYTES`].
pub(super) fn command_fact(
    path: &str,
    (topic, lines): (Topic, Lines),
    command: Option<String>,
    what: String,
    runs: Vec<String>,
) -> HowToFact {
    let more = runs.len().saturating_sub(RUN_LINES);
    let runs = if more > 0 {
        // A fresh vector: a truncated one would keep the whole recipe's capacity.
        runs.into_iter().take(RUN_LINES).collect()
    } else {
        runs
    };
    HowToFact {
        topic,
        path: path.to_owned(),
        lines,
        command,
        what: if what.len() > WHAT_BYTES {
            clip(&what, WHAT_BYTES)
        } else {
            what
        },
        runs,
        more,
    }
}
