//! Where a repository says how to work on it, read line by line (the
//! readers are in `how_to_ci.rs`, `how_to_package.rs` and `how_to_files.rs`,
//! the facts they make and the topics commands belong to in
//! `how_to_facts.rs`; this file says which files are read and hands each to
//! its reader): CI workflow
//! `run:` steps (`.github/workflows/*.yml`), `package.json` scripts,
//! `Makefile` and `justfile` targets, a Cargo workspace's members, `tox.ini`
//! environments, `noxfile.py` sessions, `pyproject.toml` tool sections and
//! scripts, and the headings and shell commands of `CONTRIBUTING.md`. Each
//! becomes a [`HowToFact`]: a topic (set up, build, test, lint, run, …), the
//! command to type when there is one, and the lines it was read from.
//!
//! Invariants: pure (text in, facts out, no I/O); every fact cites lines that
//! exist in the text it came from and hold what it states (so a change to
//! them makes the fact stale); a file yields at most [`FACTS_PER_FILE`]
//! facts; nothing is guessed: a shape the light readers here do not
//! recognize yields no fact, never a wrong one. The text comes back plain,
//! for the caller to escape.

use super::how_to_facts::{FACTS_PER_FILE, HowToFact};
/// At most this many files are read for `How-to-work-here.md` per job
/// (`read_how_to.rs` reads them; the page says how many were left out).
pub const MAX_HOW_TO_FILES: usize = 16;
/// The kinds of files read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Workflow,
    Contributing,
    Makefile,
    Justfile,
    PackageJson,
    Tox,
    Nox,
    Pyproject,
    Cargo,
}

/// The kind of `path` (repository-relative), if it is one read here: files
/// at the root, workflows in `.github/workflows/`, and `CONTRIBUTING.md` at
/// the root, in `.github/` or in `docs/`.
pub fn kind_of(path: &str) -> Option<Kind> {
    let (folder, name) = path.rsplit_once('/').unwrap_or(("", path));
    if folder == ".github/workflows" {
        return (name.ends_with(".yml") || name.ends_with(".yaml")).then_some(Kind::Workflow);
    }
    if name.eq_ignore_ascii_case("CONTRIBUTING.md") {
        return ["", ".github", "docs"]
            .contains(&folder)
            .then_some(Kind::Contributing);
    }
    if !folder.is_empty() {
        return None;
    }
    Some(match name {
        "Makefile" | "makefile" | "GNUmakefile" => Kind::Makefile,
        "justfile" | "Justfile" | ".justfile" => Kind::Justfile,
        "package.json" => Kind::PackageJson,
        "tox.ini" => Kind::Tox,
        "noxfile.py" => Kind::Nox,
        "pyproject.toml" => Kind::Pyproject,
        "Cargo.toml" => Kind::Cargo,
        _ => return None,
    })
}

/// The facts `text` (the file at `path`) states, in file order, at most
/// [`FACTS_PER_FILE`].
pub fn read(path: &str, text: &str) -> Vec<HowToFact> {
    let lines: Vec<&str> = text.lines().collect();
    use super::how_to_ci::workflow;
    use super::how_to_files::{cargo, contributing, justfile, makefile, nox, pyproject, tox};
    use super::how_to_package::package_json;
    let mut facts = match kind_of(path) {
        Some(Kind::Workflow) => workflow(path, &lines),
        Some(Kind::Contributing) => contributing(path, &lines),
        Some(Kind::Makefile) => makefile(path, &lines),
        Some(Kind::Justfile) => justfile(path, &lines),
        Some(Kind::PackageJson) => package_json(path, text, &lines),
        Some(Kind::Tox) => tox(path, &lines),
        Some(Kind::Nox) => nox(path, &lines),
        Some(Kind::Pyproject) => pyproject(path, &lines),
        Some(Kind::Cargo) => cargo(path, &lines),
        None => Vec::new(),
    };
    // Each reader stops at the bound; this keeps it if one did not.
    facts.truncate(FACTS_PER_FILE);
    facts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::builtin::how_to_facts::*;

    /// (topic, command, first line, last line, what, runs) of each fact.
    type Shown = (Topic, Option<String>, u32, u32, String, Vec<String>);

    fn shown(path: &str, text: &str) -> Vec<Shown> {
        read(path, text)
            .into_iter()
            .map(|f| {
                (
                    f.topic,
                    f.command,
                    f.lines.start(),
                    f.lines.end(),
                    f.what,
                    f.runs,
                )
            })
            .collect()
    }

    fn fact(
        topic: Topic,
        command: Option<&str>,
        lines: (u32, u32),
        what: &str,
        runs: &[&str],
    ) -> Shown {
        (
            topic,
            command.map(str::to_owned),
            lines.0,
            lines.1,
            what.to_owned(),
            runs.iter().map(|r| (*r).to_owned()).collect(),
        )
    }

    const WORKFLOW: &str = r#"name: CI
on:
  push:
    branches: [main]
  pull_request:

defaults:
  run:
    shell: bash

jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: Format
        run: cargo fmt --all -- --check
      - run: "cargo clippy --all-targets -- -D warnings"
  test:
    name: Tests (${{ matrix.os }})
    strategy:
      matrix:
        include:
          - os: ubuntu-latest
          - os: macos-latest
    runs-on: ${{ matrix.os }}
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
      - name: Install dependencies
        run: |
          python -m pip install --upgrade pip
          pip install -e ".[dev]"
      - name: Run the tests
        env:
          RUST_BACKTRACE: 1
        run: |
          # the whole suite
          cargo test --locked \
            --all-features
          pytest -q tests/

      - name: Say hello
        run: echo hello
      - name: Release notes
        run: >
          ./scripts/build-release.sh
          --notes CHANGES.md
"#;

    #[test]
    fn a_workflow_gives_each_run_step_with_its_job_and_name() {
        assert_eq!(
            shown(".github/workflows/ci.yml", WORKFLOW),
            vec![
                fact(
                    Topic::Lint,
                    Some("cargo fmt --all -- --check"),
                    (17, 17),
                    "CI: workflow ci.yml, job lint, step “Format”",
                    &[]
                ),
                fact(
                    Topic::Lint,
                    Some("cargo clippy --all-targets -- -D warnings"),
                    (18, 18),
                    "CI: workflow ci.yml, job lint",
                    &[]
                ),
                fact(
                    Topic::Setup,
                    None,
                    (32, 34),
                    "CI: workflow ci.yml, job test, step “Install dependencies”",
                    &[
                        "python -m pip install --upgrade pip",
                        "pip install -e \".[dev]\""
                    ]
                ),
                fact(
                    Topic::Test,
                    None,
                    (38, 42),
                    "CI: workflow ci.yml, job test, step “Run the tests”",
                    &["cargo test --locked --all-features", "pytest -q tests/"]
                ),
                fact(
                    Topic::Build,
                    Some("./scripts/build-release.sh --notes CHANGES.md"),
                    (47, 49),
                    "CI: workflow ci.yml, job test, step “Release notes”",
                    &[]
                ),
            ]
        );
        // Each cited range holds what the fact states.
        let lines: Vec<&str> = WORKFLOW.lines().collect();
        assert!(lines[16].contains("cargo fmt"));
        assert!(lines[37].trim() == "run: |" && lines[41].contains("pytest"));
        // The `run:` under `defaults:` is no step; nor is anything outside `jobs:`.
        assert!(
            shown(
                ".github/workflows/x.yml",
                "defaults:\n  run:\n    shell: bash\n"
            )
            .is_empty()
        );
        // Not a workflow where it is not one.
        assert!(read("ci/ci.yml", WORKFLOW).is_empty());
    }

    #[test]
    fn package_json_scripts_are_npm_run_commands_on_their_lines() {
        let text = r#"{
  "name": "web",
  "version": "1.0.0",
  "scripts": {
    "dev": "vite",
    "build": "tsc && vite build",
    "test": "vitest run",
    "lint": "eslint . --ext ts,tsx",
    "storybook": "storybook dev -p 6006",
    "postinstall": "patch-package"
  },
  "devDependencies": { "vite": "^5.0.0" }
}
"#;
        assert_eq!(
            shown("package.json", text),
            vec![
                fact(
                    Topic::Run,
                    Some("npm run dev"),
                    (5, 5),
                    "package.json script dev",
                    &["vite"]
                ),
                fact(
                    Topic::Build,
                    Some("npm run build"),
                    (6, 6),
                    "package.json script build",
                    &["tsc && vite build"]
                ),
                fact(
                    Topic::Test,
                    Some("npm run test"),
                    (7, 7),
                    "package.json script test",
                    &["vitest run"]
                ),
                fact(
                    Topic::Lint,
                    Some("npm run lint"),
                    (8, 8),
                    "package.json script lint",
                    &["eslint . --ext ts,tsx"]
                ),
                fact(
                    Topic::Run,
                    Some("npm run storybook"),
                    (9, 9),
                    "package.json script storybook",
                    &["storybook dev -p 6006"]
                ),
                fact(
                    Topic::Setup,
                    Some("npm run postinstall"),
                    (10, 10),
                    "package.json script postinstall",
                    &["patch-package"]
                ),
            ]
        );
        // Not JSON, or no scripts: nothing.
        assert!(read("package.json", "{ \"scripts\": ").is_empty());
        assert!(read("package.json", "{\"name\": \"x\"}").is_empty());
    }

    #[test]
    fn makefile_and_justfile_targets_carry_their_recipes() {
        let makefile = ".PHONY: all test lint\nVERSION := 1.0\n\nall: build ## Build everything\n\nbuild:\n\tcargo build --release\n\ntest: build\n\t@cargo test\n\t-pytest -q\n\nlint fmt:\n\tcargo clippy\n\n%.o: %.c\n\tcc -c $<\n\ndist/app: build\n\tcp target/release/app dist/\n";
        assert_eq!(
            shown("Makefile", makefile),
            vec![
                fact(
                    Topic::Build,
                    Some("make all"),
                    (4, 4),
                    "Makefile target: Build everything",
                    &[]
                ),
                fact(
                    Topic::Build,
                    Some("make build"),
                    (6, 7),
                    "Makefile target",
                    &["cargo build --release"]
                ),
                fact(
                    Topic::Test,
                    Some("make test"),
                    (9, 11),
                    "Makefile target",
                    &["cargo test", "pytest -q"]
                ),
                fact(
                    Topic::Lint,
                    Some("make lint"),
                    (13, 14),
                    "Makefile target",
                    &["cargo clippy"]
                ),
                fact(
                    Topic::Lint,
                    Some("make fmt"),
                    (13, 14),
                    "Makefile target",
                    &["cargo clippy"]
                ),
            ]
        );
        let justfile = "set dotenv-load\nversion := \"1.0\"\n\n# Run the test suite\ntest *args:\n    cargo nextest run {{args}}\n\n[private]\nhelper:\n    echo hi\n\n_hidden:\n    echo no\n\n@serve port=\"8080\": build\n    ./target/debug/app --port {{port}}\n\nalias t := test\n";
        assert_eq!(
            shown("justfile", justfile),
            vec![
                fact(
                    Topic::Test,
                    Some("just test"),
                    (5, 6),
                    "justfile recipe: Run the test suite",
                    &["cargo nextest run {{args}}"]
                ),
                fact(
                    Topic::Run,
                    Some("just serve"),
                    (15, 16),
                    "justfile recipe",
                    &["./target/debug/app --port {{port}}"]
                ),
            ]
        );
    }

    #[test]
    fn cargo_workspaces_tox_and_nox_are_read() {
        let cargo = "[workspace]\nresolver = \"2\"\nmembers = [\n    \"crates/core\",\n    \"crates/cli\",\n]\ndefault-members = [\"crates/cli\"]\n\n[workspace.dependencies]\nserde = \"1\"\n";
        assert_eq!(
            shown("Cargo.toml", cargo),
            vec![
                fact(
                    Topic::Layout,
                    None,
                    (3, 6),
                    "Cargo workspace members: crates/core, crates/cli",
                    &[]
                ),
                fact(
                    Topic::Layout,
                    None,
                    (7, 7),
                    "Cargo workspace default members: crates/cli",
                    &[]
                ),
            ]
        );
        // A package's Cargo.toml names no workspace: nothing.
        assert!(read("Cargo.toml", "[package]\nname = \"x\"\n").is_empty());
        let tox = "[tox]\nenvlist = py311, py312,\n    lint\n\n[testenv]\ndeps = pytest\ncommands =\n    pytest {posargs}\n\n[testenv:lint]\nskip_install = true\ncommands = ruff check src\n\n[flake8]\nmax-line-length = 100\n";
        assert_eq!(
            shown("tox.ini", tox),
            vec![
                fact(
                    Topic::Test,
                    Some("tox"),
                    (2, 3),
                    "tox runs the environments py311, py312, lint",
                    &[]
                ),
                fact(
                    Topic::Test,
                    Some("tox"),
                    (5, 8),
                    "tox, in each environment",
                    &["pytest {posargs}"]
                ),
                fact(
                    Topic::Lint,
                    Some("tox -e lint"),
                    (10, 12),
                    "tox environment lint",
                    &["ruff check src"]
                ),
            ]
        );
        let nox = "import nox\n\n\n@nox.session(python=[\"3.11\", \"3.12\"])\ndef tests(session):\n    session.install(\"-e\", \".[test]\")\n    session.run(\"pytest\", \"-q\")\n\n\n@nox.session(name=\"docs-build\")\ndef docs(session):\n    session.run(\"sphinx-build\", \"docs\", \"build\")\n\n\ndef helper():\n    pass\n";
        assert_eq!(
            shown("noxfile.py", nox),
            vec![
                fact(
                    Topic::Test,
                    Some("nox -s tests"),
                    (4, 7),
                    "nox session",
                    &["pytest -q"]
                ),
                fact(
                    Topic::Build,
                    Some("nox -s docs-build"),
                    (10, 12),
                    "nox session",
                    &["sphinx-build docs build"]
                ),
            ]
        );
    }

    #[test]
    fn pyproject_tools_and_scripts_are_read() {
        let text = "[project]\nname = \"todo\"\n\n[project.scripts]\ntodo = \"todo.cli:main\"\n\n[tool.pytest.ini_options]\naddopts = \"-q\"\ntestpaths = [\"tests\"]\n\n[tool.ruff]\nline-length = 100\n\n[tool.ruff.lint]\nselect = [\"E\", \"F\"]\n\n[tool.hatch.envs.default.scripts]\ncov = \"pytest --cov\"\n\n[tool.setuptools]\npackages = [\"todo\"]\n";
        assert_eq!(
            shown("pyproject.toml", text),
            vec![
                fact(
                    Topic::Run,
                    Some("todo"),
                    (5, 5),
                    "console script ([project.scripts]), calls todo.cli:main",
                    &[]
                ),
                fact(
                    Topic::Test,
                    None,
                    (7, 7),
                    "pytest is configured in pyproject.toml ([tool.pytest.ini_options])",
                    &[]
                ),
                fact(
                    Topic::Lint,
                    None,
                    (11, 11),
                    "ruff is configured in pyproject.toml ([tool.ruff])",
                    &[]
                ),
                fact(
                    Topic::Test,
                    Some("hatch run cov"),
                    (18, 18),
                    "pyproject.toml script ([tool.hatch.envs.default.scripts])",
                    &["pytest --cov"]
                ),
            ]
        );
    }

    #[test]
    fn contributing_gives_its_outline_and_shell_commands() {
        let text = "# Contributing\n\nThanks!\n\n## Development setup\n\n```bash\n# make a virtualenv first\npython -m venv .venv\npip install -e '.[dev]'\n```\n\n## Running the tests\n\n```console\n$ pytest -q\n5 passed\n```\n\n```python\nimport todo\n```\n\n### Style\n\n~~~sh\nruff check . \\\n  --fix\n~~~\n";
        assert_eq!(
            shown("CONTRIBUTING.md", text),
            vec![
                fact(
                    Topic::Guide,
                    None,
                    (5, 5),
                    "CONTRIBUTING.md: Development setup",
                    &[]
                ),
                fact(
                    Topic::Setup,
                    Some("python -m venv .venv"),
                    (9, 9),
                    "CONTRIBUTING.md, under “Development setup”",
                    &[]
                ),
                fact(
                    Topic::Setup,
                    Some("pip install -e '.[dev]'"),
                    (10, 10),
                    "CONTRIBUTING.md, under “Development setup”",
                    &[]
                ),
                fact(
                    Topic::Guide,
                    None,
                    (13, 13),
                    "CONTRIBUTING.md: Running the tests",
                    &[]
                ),
                fact(
                    Topic::Test,
                    Some("pytest -q"),
                    (16, 16),
                    "CONTRIBUTING.md, under “Running the tests”",
                    &[]
                ),
                fact(Topic::Guide, None, (24, 24), "CONTRIBUTING.md: Style", &[]),
                fact(
                    Topic::Lint,
                    Some("ruff check . --fix"),
                    (27, 28),
                    "CONTRIBUTING.md, under “Style”",
                    &[]
                ),
            ]
        );
        assert_eq!(kind_of(".github/CONTRIBUTING.md"), Some(Kind::Contributing));
        assert_eq!(kind_of("src/CONTRIBUTING.md"), None);
        assert_eq!(kind_of("sub/Makefile"), None);
    }

    /// The bytes of heap a fact holds (what it keeps, not what it shows).
    fn held(f: &HowToFact) -> usize {
        f.path.capacity()
            + f.what.capacity()
            + f.command.as_ref().map_or(0, String::capacity)
            + f.runs.capacity() * std::mem::size_of::<String>()
            + f.runs.iter().map(String::capacity).sum::<usize>()
    }

    #[test]
    fn a_hostile_file_is_read_in_bounded_memory() {
        // One rule naming 16,000 targets over a 10,800-line recipe (64 KiB):
        // each target once copied the whole recipe (4 GB at peak).
        let makefile = format!("{}:\n{}", "a ".repeat(16_000), "\tx\n".repeat(10_800));
        // A 32 KB heading over 16,000 commands: each copied the heading.
        let contributing = format!(
            "## {}\n\n```sh\n{}```\n",
            "ü".repeat(16_000),
            "ls\n".repeat(16_000)
        );
        for (path, text) in [("Makefile", &makefile), ("CONTRIBUTING.md", &contributing)] {
            let facts = read(path, text);
            assert_eq!(facts.len(), FACTS_PER_FILE, "{path}");
            for f in &facts {
                let shown = f.command.as_ref().map_or(0, String::len)
                    + f.what.len()
                    + f.runs.iter().map(String::len).sum::<usize>();
                assert!(shown <= 512, "{path}: a fact shows {shown} bytes");
                assert!(held(f) <= 1024, "{path}: a fact holds {} bytes", held(f));
            }
        }
        // The recipe's first lines are kept and the rest counted.
        let first = read("Makefile", &makefile).remove(0);
        assert_eq!(first.command.as_deref(), Some("make a"));
        assert_eq!((first.lines.start(), first.lines.end()), (1, 10_801));
        assert_eq!(
            (first.runs.len(), first.more),
            (RUN_LINES, 10_800 - RUN_LINES)
        );
        // The heading is cut on a char boundary, and says it was.
        let guide = read("CONTRIBUTING.md", &contributing).remove(0);
        assert!(
            guide.what.starts_with("CONTRIBUTING.md: üü"),
            "{}",
            guide.what
        );
        assert!(guide.what.ends_with("ü…"), "{}", guide.what);
    }

    #[test]
    fn package_json_scripts_cite_the_keys_of_the_top_level_scripts_object() {
        let text = r#"{
  "name": "web",
  "keywords": ["scripts"],
  "jest": {"test": "not a script", "lint": {"x": "}"}},
  "description": "\"scripts\": {\"dev\": 1}",
  "scripts": {
    "test": "jest",
    "build": "tsc",
    "dev":
      "vite --port 3000",
    "build": "vite build",
    "lint": "eslint ."
  }
}
"#;
        // `build` is written twice: a parser runs the second, a reviewer
        // reads the first, so neither is cited.
        assert_eq!(
            shown("package.json", text),
            vec![
                fact(
                    Topic::Test,
                    Some("npm run test"),
                    (7, 7),
                    "package.json script test",
                    &["jest"]
                ),
                fact(
                    Topic::Run,
                    Some("npm run dev"),
                    (9, 10),
                    "package.json script dev",
                    &["vite --port 3000"]
                ),
                fact(
                    Topic::Lint,
                    Some("npm run lint"),
                    (12, 12),
                    "package.json script lint",
                    &["eslint ."]
                ),
            ]
        );
        // Two `scripts` objects, or one nested deeper: nothing.
        assert!(
            read(
                "package.json",
                r#"{"scripts": {"a": "x"}, "scripts": {"b": "y"}}"#
            )
            .is_empty()
        );
        assert!(read("package.json", r#"{"config": {"scripts": {"t": "x"}}}"#).is_empty());
    }

    #[test]
    fn a_workflow_run_continued_on_more_indented_lines_is_folded_or_left_out() {
        let text = "jobs:
  test:
    steps:
      - run: cargo test
          --features slow-and-dangerous
      - name: Quoted over two lines
        run: \"cargo clippy
          --all-targets\"
      - name: Lint
        run: 'cargo fmt --check' # formatting
      - name: Commented
        run: cargo build
          # release too
          --release
      - run: cargo test --doc
";
        assert_eq!(
            shown(".github/workflows/ci.yml", text),
            vec![
                fact(
                    Topic::Test,
                    Some("cargo test --features slow-and-dangerous"),
                    (4, 5),
                    "CI: workflow ci.yml, job test",
                    &[]
                ),
                fact(
                    Topic::Lint,
                    Some("cargo fmt --check"),
                    (10, 10),
                    "CI: workflow ci.yml, job test, step “Lint”",
                    &[]
                ),
                fact(
                    Topic::Test,
                    Some("cargo test --doc"),
                    (15, 15),
                    "CI: workflow ci.yml, job test",
                    &[]
                ),
            ]
        );
    }

    #[test]
    fn makefile_assignments_and_define_blocks_are_no_targets() {
        let text = "CFLAGS ::= -O2
LDFLAGS :::= -s
CC ?= cc:x
X != echo a:b
Y += c:d
Z := e:f
test: CFLAGS = -g
vpath %.c src:lib
define USAGE
usage: make test
endef
export define NOTE
note: nested
define INNER
inner: x
endef
after: still inside
endef
check:: ## Run the checks
\tcargo test
";
        assert_eq!(
            shown("Makefile", text),
            vec![fact(
                Topic::Test,
                Some("make check"),
                (19, 20),
                "Makefile target: Run the checks",
                &["cargo test"]
            )]
        );
    }

    #[test]
    fn a_file_gives_at_most_its_bound_of_facts() {
        let many: String = (0..100).map(|n| format!("t{n}:\n\techo {n}\n")).collect();
        assert_eq!(read("Makefile", &many).len(), FACTS_PER_FILE);
    }
}
