//! Starts the real `teammem` binary (or runs its commands) against a temp data
//! directory. The daemon listens on port 0 and announces its address on stdout,
//! which is how a test learns it without guessing or sleeping.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_teammem");

/// The dashboard session key every daemon started here is given (in
/// [`DASHBOARD_KEY_ENV`]): nodes of one test share it, as an operator's
/// nodes share theirs, so a login on one is valid on the others.
pub const DASHBOARD_KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// The variable [`DASHBOARD_KEY`] is in; a PostgreSQL node's configuration
/// names it with [`DASHBOARD_KEY_TOML`].
pub const DASHBOARD_KEY_ENV: &str = "TEAMMEM_TEST_DASHBOARD_KEY";
/// The `[dashboard]` table that points a node at [`DASHBOARD_KEY_ENV`].
pub const DASHBOARD_KEY_TOML: &str =
    "[dashboard]\nsession_key_env = \"TEAMMEM_TEST_DASHBOARD_KEY\"\n";

/// A data directory with a config file in it.
pub struct Setup {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
}

impl Setup {
    /// A config listening on port 0, with `extra` TOML appended (sources, queue settings).
    pub fn new(extra: &str) -> Setup {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("teammem.toml");
        let text = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n{extra}",
            dir.path().join("data").display()
        );
        std::fs::write(&config, text).expect("write config");
        Setup { dir, config }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Runs `teammem ARGS --config <this config>` to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .env("TEAMMEM_LOG", "warn")
            .output()
            .expect("run teammem")
    }

    /// Creates an API token and returns it (the last line of the command's output).
    pub fn create_token(&self, name: &str, repositories: &[&str]) -> String {
        let mut args = vec!["tokens", "create", "--name", name];
        for r in repositories {
            args.push("--repository");
            args.push(r);
        }
        let out = self.run(&args);
        assert!(
            out.status.success(),
            "tokens create: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .last()
            .unwrap()
            .to_string()
    }

    pub fn serve(&self, envs: &[(&str, &str)]) -> Daemon {
        Daemon::start(&self.config, envs)
    }

    /// As [`Setup::serve`], logging as an operator's daemon does: the
    /// default filter (`TEAMMEM_LOG` unset) into `log`, a file (plain text,
    /// no colour); the writer children it starts log there too.
    pub fn serve_logging_to(&self, log: std::fs::File, envs: &[(&str, &str)]) -> Daemon {
        let mut command = Daemon::command(&self.config, envs);
        command.env_remove("TEAMMEM_LOG").stderr(log);
        Daemon::spawn(command)
    }
}

/// A running `teammem serve`; killed on drop if the test did not stop it.
pub struct Daemon {
    pub child: Child,
    pub url: String,
}

impl Daemon {
    pub fn start(config: &Path, envs: &[(&str, &str)]) -> Daemon {
        Daemon::spawn(Daemon::command(config, envs))
    }

    /// `teammem serve` on `config`, logging warnings and errors to the
    /// test's stderr.
    fn command(config: &Path, envs: &[(&str, &str)]) -> Command {
        let mut command = Command::new(BIN);
        command
            .arg("serve")
            .arg("--config")
            .arg(config)
            .env("TEAMMEM_LOG", "warn")
            .env(DASHBOARD_KEY_ENV, DASHBOARD_KEY)
            .envs(envs.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        command
    }

    /// Starts `command` and waits until it announces its address.
    fn spawn(mut command: Command) -> Daemon {
        let mut child = command.spawn().expect("spawn teammem serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let url = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(url) = line.strip_prefix("teammem listening on ") {
                        break url.to_string();
                    }
                }
                _ => panic!("teammem serve exited before listening: {:?}", child.wait()),
            }
        };
        // Keep draining stdout so the daemon never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Daemon { child, url }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        self.child.wait().expect("wait")
    }
}

impl Daemon {
    /// Sends SIGTERM and waits at most `limit` for the process to exit: its
    /// status, or `None` (the process is then killed) when it did not.
    pub fn terminate_within(
        mut self,
        limit: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes [`DASHBOARD_KEY`] to `dir/dashboard.key` (mode 0600) for a daemon
/// run in process, which cannot be given an environment of its own.
pub fn dashboard_key_file(dir: &Path) -> PathBuf {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("dashboard.key");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .expect("create the dashboard key file");
    std::io::Write::write_all(&mut file, DASHBOARD_KEY.as_bytes()).expect("write the key");
    path
}
