//! One source `demo/app` on the local forge, its wiki, and a real
//! `teammem serve` keeping it: the setup most runner tests share, built
//! once here. [`OneSource::fixture`] starts from [`fixture::Source`];
//! [`OneSource::of`] from a source the test made itself. The builder seeds
//! the wiki, adds configuration, names the token and can log to a file
//! before [`OneSourceBuilder::start`] starts the daemon.
//!
//! Invariant: a [`OneSource`] owns the repositories' temp dir and the
//! daemon's data dir, and drops the daemon (killing it) before either, so
//! the data lives at least as long as the daemon that reads it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::daemon_client::{range_job, range_job_succeeds};
use super::fixture::{self, Source};
use crate::harness::daemon::{Daemon, Setup};
use crate::harness::git::git_trimmed;

/// The variable every source here names for its dispatch secret.
const SECRET_ENV: &str = "TEAMMEM_SECRET_DEMO";

/// A source (`S`: the fixture [`Source`], or the path of the test's own),
/// its wiki and the daemon serving them.
pub struct OneSource<S> {
    /// First, so that it is dropped (and killed) before the data it reads.
    pub daemon: Daemon,
    pub source: S,
    /// The bare wiki repository (branch `master`).
    pub wiki: PathBuf,
    /// An unscoped API token.
    pub token: String,
    secret: &'static str,
    /// Where the daemon logs, when started with [`OneSourceBuilder::logging`].
    pub log: Option<PathBuf>,
    /// The daemon's configuration and data directory.
    pub setup: Setup,
    _repos: tempfile::TempDir,
}

/// A [`OneSource`] before its daemon starts.
#[must_use = "nothing is served until start()"]
pub struct OneSourceBuilder<S> {
    repos: tempfile::TempDir,
    source: S,
    dir: PathBuf,
    wiki: PathBuf,
    secret: &'static str,
    config: String,
    token_name: String,
    envs: Vec<(String, String)>,
    logging: bool,
}

impl OneSource<Source> {
    /// [`fixture::Source`] and [`fixture::wiki`] in a new temp dir; dispatches
    /// are signed with `secret`.
    pub fn fixture(secret: &'static str) -> OneSourceBuilder<Source> {
        let repos = tempfile::tempdir().unwrap();
        let source = Source::create(repos.path());
        let dir = source.dir.clone();
        OneSourceBuilder::new(repos, source, dir, secret)
    }
}

impl OneSource<PathBuf> {
    /// The source the test built at `dir` inside `repos` (which this takes
    /// over), with [`fixture::wiki`] added beside it.
    pub fn of(
        repos: tempfile::TempDir,
        dir: &Path,
        secret: &'static str,
    ) -> OneSourceBuilder<PathBuf> {
        OneSourceBuilder::new(repos, dir.to_path_buf(), dir.to_path_buf(), secret)
    }
}

impl<S> OneSourceBuilder<S> {
    fn new(repos: tempfile::TempDir, source: S, dir: PathBuf, secret: &'static str) -> Self {
        let wiki = fixture::wiki(repos.path());
        OneSourceBuilder {
            repos,
            source,
            dir,
            wiki,
            secret,
            config: String::new(),
            token_name: "one-source".to_string(),
            envs: Vec::new(),
            logging: false,
        }
    }

    /// Runs `seed` on the source and the bare wiki before the daemon starts.
    pub fn seed(self, seed: impl FnOnce(&S, &Path)) -> Self {
        seed(&self.source, &self.wiki);
        self
    }

    /// Appends `lines` (TOML) right after the `[[sources]]` table: a key for
    /// the source first, then any tables.
    pub fn config(mut self, lines: &str) -> Self {
        self.config.push_str(lines);
        self
    }

    /// Names the API token (`tokens create --name`).
    pub fn token(mut self, name: &str) -> Self {
        self.token_name = name.to_string();
        self
    }

    /// One more environment variable for the daemon.
    pub fn env(mut self, (name, value): (&str, &str)) -> Self {
        self.envs.push((name.to_string(), value.to_string()));
        self
    }

    /// Logs as an operator's daemon does ([`Setup::serve_logging_to`]) into
    /// `daemon.log` in the data directory; [`OneSource::log`] names it.
    pub fn logging(mut self) -> Self {
        self.logging = true;
        self
    }

    /// Writes the configuration, creates the token and starts the daemon.
    pub fn start(self) -> OneSource<S> {
        let setup = Setup::new(&format!(
            "[[sources]]\nrepository = \"demo/app\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"{SECRET_ENV}\"\n{}",
            self.dir.display(),
            self.wiki.display(),
            self.config
        ));
        let token = setup.create_token(&self.token_name, &[]);
        let mut envs = vec![(SECRET_ENV, self.secret)];
        envs.extend(self.envs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let (daemon, log) = if self.logging {
            let path = setup.dir.path().join("daemon.log");
            let file = std::fs::File::create(&path).unwrap();
            (setup.serve_logging_to(file, &envs), Some(path))
        } else {
            (setup.serve(&envs), None)
        };
        OneSource {
            daemon,
            source: self.source,
            wiki: self.wiki,
            token,
            secret: self.secret,
            log,
            setup,
            _repos: self.repos,
        }
    }
}

impl<S> OneSource<S> {
    /// The text of `page` at the wiki's `master`, trimmed.
    pub fn show(&self, page: &str) -> String {
        git_trimmed(&self.wiki, &["show", &format!("master:{page}")])
    }

    /// Dispatches `before..after` as workflow run `run` and waits for its
    /// job to end: the job and its events.
    pub async fn range(&self, run: u64, before: &str, after: &str) -> (Value, Value) {
        range_job(&self.daemon, &self.token, self.secret, run, before, after).await
    }

    /// [`Self::range`], which must end `succeeded`; the job.
    pub async fn succeeds(&self, run: u64, before: &str, after: &str) -> Value {
        range_job_succeeds(&self.daemon, &self.token, self.secret, run, before, after).await
    }
}
