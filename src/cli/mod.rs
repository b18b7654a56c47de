//! The `teammem` command line: the clap definitions, the dispatch to each
//! command family, and what the families share.
//!
//! Commands print results on stdout and problems on stderr. Exit codes: 0 done,
//! 1 the command ran but the answer is "no" or it failed, 2 bad usage or bad
//! configuration.
//!
//! The families: `serve` (the daemon, migrations, configuration checks),
//! `jobs` (the job queue and the sweep cursor), `tokens`, `wiki` (the MCP
//! servers and operator wiki access), `request` (asking a running daemon),
//! `backfill` (a source's earlier history into the queue), `agents` (coding
//! agents' host configuration).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::Config;
use crate::db;
use crate::queue::Queue;

mod agents;
mod backfill;
mod database;
mod jobs;
mod request;
mod serve;
mod tokens;
mod wiki;

#[derive(Debug, Parser)]
#[command(
    name = "teammem",
    version,
    about = "Keeps a repository's team memory (its wiki) in step with what merges"
)]
struct Cli {
    /// Log format on stderr
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
struct ConfigArg {
    /// Path to teammem.toml
    #[arg(long, env = "TEAMMEM_CONFIG", default_value = "teammem.toml")]
    config: PathBuf,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon: HTTP API, workers and scheduler
    Serve(ConfigArg),
    /// Offline end-to-end demo: sample repositories, the real daemon, two signed dispatches
    Demo(DemoArgs),
    /// Apply pending database migrations and exit
    Migrate(ConfigArg),
    /// The database itself: moving a deployment to PostgreSQL
    #[command(subcommand)]
    Db(database::DbCommand),
    /// Validate a configuration file; prints "ok" or every problem found
    CheckConfig(serve::CheckConfigArgs),
    /// Maintainer API tokens
    #[command(subcommand)]
    Tokens(tokens::TokensCommand),
    /// Inspect and steer the job queue
    #[command(subcommand)]
    Jobs(jobs::JobsCommand),
    /// The sweep for missed pushes of `sweep = true` sources
    #[command(subcommand)]
    Sweep(jobs::SweepCommand),
    /// Serve MCP on stdin/stdout: the wiki read tools for coding agents, or
    /// (--wiki-writer) the job-bound writer the daemon spawns
    Mcp(wiki::McpArgs),
    /// Operator access to a source's wiki; prints the tool envelope as JSON
    Wiki(wiki::WikiArgs),
    /// Internal: run an agent in the kernel sandbox (policy from TEAMMEM_SANDBOX_POLICY)
    #[command(hide = true)]
    SandboxExec(SandboxExecArgs),
    /// Ask a running daemon to reconcile one merged pull request (token from TEAMMEM_TOKEN)
    Request(request::RequestArgs),
    /// Adopt a repository's history: enqueue its last N merges (or those since a commit or date) as ranges, oldest first; --status, --cancel
    Backfill(backfill::BackfillArgs),
    /// Wire coding agents (Claude Code, VS Code, Cursor, Codex) to a source's team memory
    #[command(subcommand)]
    Agents(agents::AgentsCommand),
    /// Check that the GitHub App is installed on repositories; exit 0 all, 1 some not, 2 config/auth failure
    CheckInstallations {
        #[command(flatten)]
        config: ConfigArg,
        /// Repositories (owner/name) to check
        #[arg(required = true)]
        repositories: Vec<String>,
    },
}

#[derive(Debug, Args)]
struct DemoArgs {
    /// Exit after both jobs: 0 only when the wiki was updated as expected
    #[arg(long)]
    once: bool,
    /// With --once: keep the temporary directory (removed by default; a --data-dir is always kept)
    #[arg(long, requires = "once")]
    keep: bool,
    /// Loopback port of the daemon and dashboard (0: any free port)
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Where to put the sample repositories and the daemon's state (default: a new temporary directory)
    #[arg(long)]
    data_dir: Option<PathBuf>,
}
#[derive(Debug, Args)]
struct SandboxExecArgs {
    /// Only check that this machine can build an agent's namespaces (exit 0 or 1)
    #[arg(long)]
    probe: bool,
    /// The agent's program and arguments, after `--`
    #[arg(last = true, required_unless_present = "probe")]
    argv: Vec<std::ffi::OsString>,
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::parse() {
        // Before tracing and the runtime: the trampoline forks, so it must
        // stay single-threaded.
        Cli {
            command: Command::SandboxExec(args),
            ..
        } if args.probe => return crate::sandbox::trampoline_probe_main(),
        Cli {
            command: Command::SandboxExec(args),
            ..
        } => return crate::sandbox::trampoline_main(args.argv),
        cli => cli,
    };
    // The demo prints its story on stdout; only warnings belong beside it,
    // also from the writer children it spawns (they inherit TEAMMEM_LOG).
    if matches!(cli.command, Command::Demo(_)) && std::env::var_os("TEAMMEM_LOG").is_none() {
        // SAFETY: no other thread exists yet; the runtime is built below.
        unsafe { std::env::set_var("TEAMMEM_LOG", "warn") };
    }
    init_tracing(cli.log_format);
    if let Command::Serve(c) = &cli.command
        && let Ok(config) = Config::load(&c.config)
    {
        // The daemon's secrets leave its environment (and the block
        // /proc/<pid>/environ shows) before any thread or child exists; a
        // config that does not load is reported by `serve` below.
        // SAFETY: no other thread exists yet; the runtime is built below.
        unsafe { crate::secrets::capture_env(&config.secret_env_names()) };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(run(cli.command))
}

/// The log filter when `TEAMMEM_LOG` is unset: teammem's own events at
/// `info`; the MCP library's per-session chatter (it logs every peer's full
/// capabilities at `info`, once per job) only from `warn` up.
const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn";

fn init_tracing(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("TEAMMEM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    // Colour codes only for a person at a terminal, not in a log file.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// A failed command: its message and exit code.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn usage(message: impl Into<String>) -> Self {
        Failure {
            code: 2,
            message: message.into(),
        }
    }
    fn runtime(message: impl Into<String>) -> Self {
        Failure {
            code: 1,
            message: message.into(),
        }
    }
}

/// How a lower layer's error becomes a command's [`Failure`], its message
/// kept: `or_runtime` (exit 1: the work failed) or `or_usage` (exit 2: the
/// configuration or arguments are wrong), for every error whose own message
/// says enough.
trait OrFail<T> {
    fn or_runtime(self) -> Result<T, Failure>;
    fn or_usage(self) -> Result<T, Failure>;
}

impl<T, E: std::fmt::Display> OrFail<T> for Result<T, E> {
    fn or_runtime(self) -> Result<T, Failure> {
        self.map_err(|e| Failure::runtime(e.to_string()))
    }

    fn or_usage(self) -> Result<T, Failure> {
        self.map_err(|e| Failure::usage(e.to_string()))
    }
}

async fn run(command: Command) -> ExitCode {
    let result = match command {
        Command::Serve(c) => serve::serve(&c.config).await,
        Command::Demo(d) => crate::demo::run(crate::demo::DemoOptions {
            once: d.once,
            keep: d.keep,
            port: d.port,
            data_dir: d.data_dir,
        })
        .await
        .map_err(|e| Failure {
            code: e.exit_code(),
            message: e.message().to_owned(),
        }),
        Command::Migrate(c) => serve::migrate(&c.config).await,
        Command::Db(d) => database::run_db(d).await,
        Command::CheckConfig(c) => serve::check_config(c).await,
        Command::Tokens(t) => tokens::run_tokens(t).await,
        Command::Jobs(j) => jobs::run_jobs(j).await,
        Command::Sweep(s) => jobs::run_sweep(s).await,
        Command::Mcp(m) => wiki::run_mcp(m).await,
        Command::Wiki(w) => wiki::run_wiki(w).await,
        Command::Request(r) => request::run_request(r).await,
        Command::Backfill(b) => backfill::run_backfill(b).await,
        Command::Agents(a) => agents::run_agents(a).await,
        Command::SandboxExec(_) => Err(Failure::usage(
            "sandbox-exec runs before the async runtime starts",
        )),
        Command::CheckInstallations {
            config,
            repositories,
        } => serve::check_installations(&config.config, &repositories).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn load_config(path: &Path) -> Result<Config, Failure> {
    Config::load(path).map_err(invalid_configuration)
}

/// A configuration's problems (one a line) as the usage failure every
/// command that reads one ends with.
fn invalid_configuration(problems: impl std::fmt::Display) -> Failure {
    Failure::usage(format!("invalid configuration\n{problems}"))
}

/// Opens the database of a configuration, migrated, for the offline commands.
async fn open_db(path: &Path) -> Result<(Config, db::Pool), Failure> {
    let config = load_config(path)?;
    let pool = db::open_configured(&config).await.or_usage()?;
    Ok((config, pool))
}

fn source_names(config: &Config) -> String {
    if config.sources.is_empty() {
        return "none".into();
    }
    config
        .sources
        .iter()
        .map(|s| s.repository.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

async fn open_queue(path: &Path) -> Result<Queue, Failure> {
    let (config, pool) = open_db(path).await?;
    Ok(Queue::from_config(&config, pool))
}

fn print_json(value: &impl serde::Serialize) {
    crate::outln!(
        "{}",
        serde_json::to_string_pretty(value).expect("job data serializes")
    );
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    /// What a subscriber with the default filter writes for one `info` event
    /// of the MCP library and one of teammem's.
    #[test]
    fn the_default_filter_keeps_teammem_info_and_drops_the_mcp_librarys() {
        let written = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = written.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                super::DEFAULT_LOG_FILTER,
            ))
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "rmcp::service", "Service initialized as client");
            tracing::warn!(target: "rmcp::service", "transport closed with an error");
            tracing::info!(target: "teammem::worker", "job started");
        });
        let text = String::from_utf8(written.lock().unwrap().clone()).unwrap();
        assert!(text.contains("job started"), "{text}");
        assert!(text.contains("transport closed with an error"), "{text}");
        assert!(!text.contains("Service initialized"), "{text}");
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
