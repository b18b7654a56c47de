//! The git CLI as the tests' oracle: fixtures are built with it and results are
//! read back with it, never with the code under test. Every call runs with no
//! user or system configuration, no terminal prompt and a fixed identity, so
//! no test depends on the machine's git setup; the checked variants never let
//! a failed git command pass unnoticed (they panic with git's stderr).

use std::path::Path;
use std::process::{Command, Output};

/// The identity every commit gets unless a test names another.
const AUTHOR: &str = "Fixture Author";

/// `git` in `dir` with no user or system configuration, no prompt and the
/// fixed identity; for callers that add environment or stdin of their own.
pub fn git_command(dir: &Path) -> Command {
    let mut command = Command::new("git");
    command
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0");
    set_identity(&mut command, AUTHOR);
    command
}

/// Runs `git ARGS` in `dir`; panics with git's stderr when it fails.
/// Returns stdout exactly as git printed it.
pub fn git(dir: &Path, args: &[&str]) -> String {
    checked_stdout(git_command(dir).args(args), args)
}

/// Like [`git`], with surrounding whitespace removed: for one-line answers
/// such as `rev-parse`.
pub fn git_trimmed(dir: &Path, args: &[&str]) -> String {
    git(dir, args).trim().to_owned()
}

/// Like [`git`], with `author` (and `author@example.org`, lowercased) as the
/// author and committer.
pub fn git_as(dir: &Path, author: &str, args: &[&str]) -> String {
    let mut command = git_command(dir);
    set_identity(&mut command, author);
    checked_stdout(command.args(args), args)
}

/// Like [`git`], with extra environment (dates, say) on top of the defaults.
pub fn git_with_env(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> String {
    let mut command = git_command(dir);
    command.envs(env.iter().copied());
    checked_stdout(command.args(args), args)
}

/// Runs `git ARGS` in `dir` without checking its status: for the cases where
/// git is expected to fail, or where failure is an answer.
pub fn git_output(dir: &Path, args: &[&str]) -> Output {
    git_command(dir).args(args).output().expect("run git")
}

fn set_identity(command: &mut Command, author: &str) {
    let email = format!("{}@example.org", author.to_lowercase().replace(' ', "."));
    command
        .env("GIT_AUTHOR_NAME", author)
        .env("GIT_AUTHOR_EMAIL", &email)
        .env("GIT_COMMITTER_NAME", author)
        .env("GIT_COMMITTER_EMAIL", &email);
}

fn checked_stdout(command: &mut Command, args: &[&str]) -> String {
    let output = command.output().expect("run git");
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("git prints UTF-8")
}
