//! The `teammem` command line: clap definitions and what each command does.
//!
//! Commands print results on stdout and problems on stderr. Exit codes: 0 done,
//! 1 the command ran but the answer is "no" or it failed, 2 bad usage or bad
//! configuration.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::Config;
use crate::queue::{Job, JobFilter, JobKind, JobState, Queue};
use crate::{daemon, db, mcp, tokens};

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

#[derive(Debug, Args)]
struct CheckConfigArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// Also ask GitHub (with the App) whether each GitHub source's wiki
    /// mapping keeps to the audience rule
    #[arg(long)]
    github: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon: HTTP API, workers and scheduler
    Serve(ConfigArg),
    /// Offline end-to-end demo: sample repositories, the real daemon, one signed dispatch
    Demo(DemoArgs),
    /// Apply pending database migrations and exit
    Migrate(ConfigArg),
    /// Validate a configuration file; prints "ok" or every problem found
    CheckConfig(CheckConfigArgs),
    /// Maintainer API tokens
    #[command(subcommand)]
    Tokens(TokensCommand),
    /// Inspect and steer the job queue
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// The sweep for missed pushes of `sweep = true` sources
    #[command(subcommand)]
    Sweep(SweepCommand),
    /// Serve MCP on stdin/stdout: the wiki read tools for coding agents, or
    /// (--wiki-writer) the job-bound writer the daemon spawns
    Mcp(McpArgs),
    /// Operator access to a source's wiki; prints the tool envelope as JSON
    Wiki(WikiArgs),
    /// Internal: run an agent in the kernel sandbox (policy from TEAMMEM_SANDBOX_POLICY)
    #[command(hide = true)]
    SandboxExec(SandboxExecArgs),
    /// Ask a running daemon to reconcile one merged pull request (token from TEAMMEM_TOKEN)
    Request(RequestArgs),
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
    /// Exit after the job: 0 only when the wiki was updated as expected
    #[arg(long)]
    once: bool,
    /// Loopback port of the daemon and dashboard (0: any free port)
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Where to put the sample repositories and the daemon's state (default: a new temporary directory)
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct RequestArgs {
    /// The daemon's URL, e.g. https://teammem.example.org
    #[arg(long, env = "TEAMMEM_URL")]
    server: String,
    /// The source repository (owner/name)
    #[arg(long)]
    repository: String,
    /// The merged pull request's number
    #[arg(long = "pr")]
    pull_number: u64,
    /// Follow the job until it ends; exit 0 only if it succeeded or had nothing to change
    #[arg(long)]
    wait: bool,
}

#[derive(Debug, Args)]
struct McpArgs {
    /// Path to teammem.toml (default: teammem.toml); not accepted with --wiki-writer
    #[arg(long)]
    config: Option<PathBuf>,
    /// Remove every write tool
    #[arg(long, conflicts_with = "wiki_writer")]
    read_only: bool,
    /// Internal: the job-bound writer; its binding comes only from TEAMMEM_* variables
    #[arg(long)]
    wiki_writer: bool,
    /// Relay MCP between stdin/stdout and the job's writer at this Unix socket
    /// (the endpoint an external agent's MCP configuration names)
    #[arg(long, value_name = "SOCKET", conflicts_with_all = ["wiki_writer", "read_only", "config"])]
    connect: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct SandboxExecArgs {
    /// The agent's program and arguments, after `--`
    #[arg(last = true, required = true)]
    argv: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
struct WikiArgs {
    /// Path to teammem.toml
    #[arg(
        long,
        global = true,
        env = "TEAMMEM_CONFIG",
        default_value = "teammem.toml"
    )]
    config: PathBuf,
    /// The source repository (owner/name) whose wiki to use
    #[arg(long, global = true)]
    repository: Option<String>,
    #[command(subcommand)]
    command: WikiCommand,
}

#[derive(Debug, Subcommand)]
enum WikiCommand {
    /// Default branch, tip sha, initialized
    Snapshot,
    /// Pages at a ref
    List {
        #[arg(long = "ref", default_value = "HEAD")]
        git_ref: String,
    },
    /// One page's content
    Get {
        #[arg(long)]
        path: String,
        #[arg(long = "ref", default_value = "HEAD")]
        git_ref: String,
    },
    /// Pages containing a text (case-insensitive)
    Search {
        #[arg(long)]
        query: String,
        #[arg(long = "ref", default_value = "HEAD")]
        git_ref: String,
    },
    /// Commits, optionally touching one page
    History {
        #[arg(long)]
        path: Option<String>,
        #[arg(long = "ref", default_value = "HEAD")]
        git_ref: String,
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
    /// Unified diff between two refs
    Diff {
        #[arg(long)]
        from: String,
        #[arg(long, default_value = "HEAD")]
        to: String,
    },
    /// Write whole pages: --pages '[{"path": "Home.md", "content": "..."}]' or @file.json
    Write {
        #[arg(long)]
        expected_base: String,
        #[arg(long)]
        expected_wiki_repository: Option<String>,
        #[arg(long)]
        message: String,
        #[arg(long)]
        pages: String,
    },
    /// Exact-anchor replacements: --patches '{"Home.md": {"expected_sha": ..., "replacements": [...]}}' or @file.json
    Patch {
        #[arg(long)]
        expected_base: String,
        #[arg(long)]
        expected_wiki_repository: Option<String>,
        #[arg(long)]
        message: String,
        #[arg(long)]
        patches: String,
    },
}

#[derive(Debug, Subcommand)]
enum TokensCommand {
    /// Create a token; it is printed once, as the last line
    Create {
        #[command(flatten)]
        config: ConfigArg,
        /// A name to recognise and revoke the token by
        #[arg(long)]
        name: String,
        /// Limit the token to these source repositories (owner/name); repeatable
        #[arg(long = "repository")]
        repositories: Vec<String>,
    },
    /// List tokens (names and scopes, never the tokens)
    List {
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Revoke a token by name
    Revoke {
        #[command(flatten)]
        config: ConfigArg,
        name: String,
    },
}

#[derive(Debug, Subcommand)]
enum JobsCommand {
    /// List jobs, newest first
    List {
        #[command(flatten)]
        config: ConfigArg,
        #[arg(long)]
        repository: Option<String>,
        #[arg(long)]
        state: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: u32,
        #[arg(long)]
        json: bool,
    },
    /// Show one job with its events and receipt
    Show {
        #[command(flatten)]
        config: ConfigArg,
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Cancel a queued or running job
    Cancel {
        #[command(flatten)]
        config: ConfigArg,
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Queue a failed, cancelled or rejected job again
    Retry {
        #[command(flatten)]
        config: ConfigArg,
        id: i64,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum SweepCommand {
    /// Forget a source's cursor (after a force-push): the next sweep starts
    /// tracking at the tip of its default branch and enqueues nothing for it
    Reset {
        #[command(flatten)]
        config: ConfigArg,
        /// The source repository (owner/name)
        #[arg(long)]
        repository: String,
    },
}

/// Runs the command line and returns the process exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::parse() {
        // Before tracing and the runtime: the trampoline forks, so it must
        // stay single-threaded.
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

async fn run(command: Command) -> ExitCode {
    let result = match command {
        Command::Serve(c) => serve(&c.config).await,
        Command::Demo(d) => crate::demo::run(crate::demo::DemoOptions {
            once: d.once,
            port: d.port,
            data_dir: d.data_dir,
        })
        .await
        .map_err(|e| Failure {
            code: e.exit_code(),
            message: e.message().to_owned(),
        }),
        Command::Migrate(c) => migrate(&c.config).await,
        Command::CheckConfig(c) => check_config(&c.config.config, c.github).await,
        Command::Tokens(t) => run_tokens(t).await,
        Command::Jobs(j) => run_jobs(j).await,
        Command::Sweep(s) => run_sweep(s).await,
        Command::Mcp(m) => run_mcp(m).await,
        Command::Wiki(w) => run_wiki(w).await,
        Command::Request(r) => run_request(r).await,
        Command::SandboxExec(_) => Err(Failure::usage(
            "sandbox-exec runs before the async runtime starts",
        )),
        Command::CheckInstallations {
            config,
            repositories,
        } => check_installations(&config.config, &repositories).await,
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
    Config::load(path).map_err(|e| Failure::usage(format!("invalid configuration\n{e}")))
}

async fn check_config(path: &Path, github: bool) -> Result<(), Failure> {
    let config = load_config(path)?;
    config
        .check_environment()
        .map_err(|e| Failure::usage(format!("invalid configuration\n{e}")))?;
    if github {
        check_audiences(&config).await?;
    }
    println!("ok");
    Ok(())
}

/// `check-config --github`: the audience rule for every GitHub source, asked
/// of GitHub now. A mapping across audiences is an invalid configuration
/// (exit 2); GitHub not answering is exit 1.
async fn check_audiences(config: &Config) -> Result<(), Failure> {
    use crate::forge::Refusal;
    let sources: Vec<_> = config
        .sources
        .iter()
        .filter(|s| matches!(s.forge, crate::config::Forge::GitHub))
        .collect();
    let Some(gh) = config.github.as_ref().filter(|_| !sources.is_empty()) else {
        return Ok(());
    };
    let key = crate::forge::github::load_app_key(gh)
        .await
        .map_err(|e| Failure::usage(format!("github.private_key: {e}")))?;
    let forge = crate::forge::github::GitHubForge::new(gh, &key).map_err(Failure::usage)?;
    let (mut wrong, mut unknown) = (Vec::new(), Vec::new());
    for (i, source) in config.sources.iter().enumerate() {
        if !matches!(source.forge, crate::config::Forge::GitHub) {
            continue;
        }
        match forge.check_audience(source).await {
            Ok(()) => {}
            Err(Refusal::Rejected { code, message }) => {
                wrong.push(format!("sources[{i}].wiki_repository: {code}: {message}"))
            }
            Err(Refusal::Unavailable { message, .. }) => unknown.push(format!(
                "sources[{i}]: the audience of {} could not be checked: {message}",
                source.repository
            )),
        }
    }
    if !wrong.is_empty() {
        wrong.extend(unknown);
        return Err(Failure::usage(format!(
            "invalid configuration\n{}",
            wrong.join("\n")
        )));
    }
    if !unknown.is_empty() {
        return Err(Failure::runtime(unknown.join("\n")));
    }
    Ok(())
}

async fn serve(path: &Path) -> Result<(), Failure> {
    // Before anything secret is read: the daemon's memory and /proc entries
    // (environ, mem, fd) stay closed to other processes of its user.
    crate::sandbox::make_non_dumpable().map_err(|e| {
        Failure::runtime(format!(
            "cannot make the daemon non-dumpable (prctl PR_SET_DUMPABLE): {e}"
        ))
    })?;
    let config = load_config(path)?;
    config
        .check_environment()
        .map_err(|e| Failure::usage(format!("invalid configuration\n{e}")))?;
    let config = Arc::new(config);
    daemon::run(
        config.clone(),
        daemon::default_handler(config, path),
        daemon::shutdown_signal(),
    )
    .await
    .map_err(|e| Failure::runtime(e.to_string()))
}

async fn migrate(path: &Path) -> Result<(), Failure> {
    let config = load_config(path)?;
    let pool = db::open(&config.server.data_dir)
        .await
        .map_err(|e| Failure::runtime(e.to_string()))?;
    let pending = db::migrations_pending(&pool)
        .await
        .map_err(|e| Failure::runtime(e.to_string()))?;
    db::migrate(&pool)
        .await
        .map_err(|e| Failure::runtime(e.to_string()))?;
    let what = if pending {
        "applied"
    } else {
        "nothing to apply"
    };
    println!("migrations up to date ({what})");
    Ok(())
}

/// Opens the database of a configuration, migrated, for the offline commands.
async fn open_db(path: &Path) -> Result<(Config, sqlx::SqlitePool), Failure> {
    let config = load_config(path)?;
    let pool = db::open(&config.server.data_dir)
        .await
        .map_err(|e| Failure::runtime(e.to_string()))?;
    db::migrate(&pool)
        .await
        .map_err(|e| Failure::runtime(e.to_string()))?;
    Ok((config, pool))
}

async fn run_tokens(command: TokensCommand) -> Result<(), Failure> {
    match command {
        TokensCommand::Create {
            config,
            name,
            repositories,
        } => {
            let (cfg, pool) = open_db(&config.config).await?;
            for r in &repositories {
                if cfg.source(r).is_none() {
                    return Err(Failure::usage(format!(
                        "--repository {r}: not a configured source; configured: {}",
                        source_names(&cfg)
                    )));
                }
            }
            let token = tokens::create(&pool, &name, &repositories)
                .await
                .map_err(|e| Failure::usage(e.to_string()))?;
            let scope = if repositories.is_empty() {
                "all sources".to_string()
            } else {
                repositories.join(", ")
            };
            println!("created token {name:?} for {scope}; it is shown once, store it now:");
            println!("{}", token.expose());
            Ok(())
        }
        TokensCommand::List { config } => {
            let (_, pool) = open_db(&config.config).await?;
            let list = tokens::list(&pool)
                .await
                .map_err(|e| Failure::runtime(e.to_string()))?;
            if list.is_empty() {
                println!("no tokens; create one with `teammem tokens create --name NAME`");
            }
            for t in list {
                let scope = if t.repositories.is_empty() {
                    "all sources".to_string()
                } else {
                    t.repositories.join(", ")
                };
                let state = if t.revoked { "revoked" } else { "active" };
                println!("{}\t{}\t{}\t{}", t.name, state, scope, t.created_at);
            }
            Ok(())
        }
        TokensCommand::Revoke { config, name } => {
            let (_, pool) = open_db(&config.config).await?;
            tokens::revoke(&pool, &name)
                .await
                .map_err(|e| Failure::usage(e.to_string()))?;
            println!("revoked {name}");
            Ok(())
        }
    }
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
    Ok(daemon::queue_for(&config, pool))
}

async fn run_sweep(command: SweepCommand) -> Result<(), Failure> {
    match command {
        SweepCommand::Reset { config, repository } => {
            let (config, pool) = open_db(&config.config).await?;
            let Some(source) = config
                .sources
                .iter()
                .find(|s| s.repository.eq_ignore_ascii_case(&repository))
            else {
                return Err(Failure::usage(format!(
                    "--repository: {repository} is not a configured source; configured: {}",
                    source_names(&config)
                )));
            };
            let queue = daemon::queue_for(&config, pool);
            let forgotten = queue
                .forget_cursor(&source.repository)
                .await
                .map_err(|e| Failure::runtime(e.to_string()))?;
            match forgotten {
                Some(sha) => println!(
                    "forgot the cursor of {} (it was {sha}); the next sweep starts tracking at the tip of its default branch",
                    source.repository
                ),
                None => println!(
                    "{} has no cursor; the next sweep starts tracking at the tip of its default branch",
                    source.repository
                ),
            }
            if !source.sweep {
                println!(
                    "note: {} has sweep = false; the sweep does not look at it",
                    source.repository
                );
            }
            Ok(())
        }
    }
}

async fn run_jobs(command: JobsCommand) -> Result<(), Failure> {
    match command {
        JobsCommand::List {
            config,
            repository,
            state,
            limit,
            json,
        } => {
            let queue = open_queue(&config.config).await?;
            let state = match state {
                None => None,
                Some(s) => Some(
                    s.parse::<JobState>()
                        .map_err(|e| Failure::usage(e.to_string()))?,
                ),
            };
            if !(1..=100).contains(&limit) {
                return Err(Failure::usage(format!(
                    "--limit: expected 1 to 100, got {limit}"
                )));
            }
            let page = queue
                .list(&JobFilter {
                    repository,
                    state,
                    limit,
                    ..JobFilter::default()
                })
                .await
                .map_err(|e| Failure::runtime(e.to_string()))?;
            if json {
                print_json(&page.jobs);
            } else if page.jobs.is_empty() {
                println!("no jobs");
            } else {
                println!(
                    "{:>6}  {:<10}  {:<24}  {:<30}  {:>8}",
                    "ID", "STATE", "SOURCE", "WHAT", "ATTEMPTS"
                );
                for job in &page.jobs {
                    println!(
                        "{:>6}  {:<10}  {:<24}  {:<30}  {:>8}",
                        job.id,
                        job.state.as_str(),
                        job.source,
                        describe(job),
                        job.attempts
                    );
                }
            }
            Ok(())
        }
        JobsCommand::Show { config, id, json } => {
            let queue = open_queue(&config.config).await?;
            let job = queue
                .get(id)
                .await
                .map_err(|e| Failure::runtime(e.to_string()))?;
            let events = queue
                .events(id)
                .await
                .map_err(|e| Failure::runtime(e.to_string()))?;
            if json {
                print_json(&serde_json::json!({"job": job, "events": events}));
            } else {
                println!("job {}: {}", job.id, job.state.as_str());
                println!("  source      {}", job.source);
                println!("  destination {}", job.destination);
                println!("  what        {}", describe(&job));
                println!("  origin      {}", job.origin.as_str());
                println!("  attempts    {}/{}", job.attempts, job.max_attempts);
                if let Some(e) = &job.last_error {
                    println!("  last error  {e}");
                }
                if let Some(r) = &job.receipt {
                    println!(
                        "  receipt     {}",
                        serde_json::to_string(r).unwrap_or_default()
                    );
                }
                println!("  events:");
                for e in events {
                    println!(
                        "    {}  {:<10} {:<16} {}",
                        format_time(e.at),
                        e.actor,
                        e.event,
                        e.detail.as_deref().unwrap_or("")
                    );
                }
            }
            Ok(())
        }
        JobsCommand::Cancel { config, id, json } => {
            let queue = open_queue(&config.config).await?;
            let job = queue
                .cancel(id, "cli")
                .await
                .map_err(|e| Failure::runtime(e.to_string()))?;
            if json {
                print_json(&job);
            } else {
                println!("job {} is now {}", job.id, job.state.as_str());
            }
            Ok(())
        }
        JobsCommand::Retry { config, id, json } => {
            let queue = open_queue(&config.config).await?;
            let job = queue
                .retry(id, "cli")
                .await
                .map_err(|e| Failure::runtime(e.to_string()))?;
            if json {
                print_json(&job);
            } else {
                println!("job {} is now {}", job.id, job.state.as_str());
            }
            Ok(())
        }
    }
}

async fn run_mcp(args: McpArgs) -> Result<(), Failure> {
    if let Some(socket) = &args.connect {
        // Exit here: tokio's stdin reader may still be blocked in a read the
        // runtime would wait for on the way out.
        match crate::relay::relay(socket).await {
            Ok(()) => std::process::exit(0),
            Err(e) => {
                eprintln!("teammem: {e}");
                std::process::exit(1)
            }
        }
    }
    let mode = if args.wiki_writer {
        mcp::Mode::WikiWriter
    } else {
        mcp::Mode::Agent {
            read_only: args.read_only,
        }
    };
    mcp::run_stdio(args.config, mode)
        .await
        .map_err(|e| match e {
            mcp::McpError::Transport(_) => Failure::runtime(e.to_string()),
            _ => Failure::usage(e.to_string()),
        })
}

async fn check_installations(path: &Path, repositories: &[String]) -> Result<(), Failure> {
    let config = load_config(path)?;
    let (lines, code) =
        crate::forge::github::check_installations_command(&config, repositories).await;
    for line in &lines {
        println!("{line}");
    }
    match code {
        0 => Ok(()),
        code => Err(Failure {
            code: code.clamp(1, 2) as u8,
            message: if code == 1 {
                "the GitHub App is not installed on every repository listed".into()
            } else {
                "could not check the installations".into()
            },
        }),
    }
}

async fn run_request(args: RequestArgs) -> Result<(), Failure> {
    let token = std::env::var("TEAMMEM_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| {
            Failure::usage(
                "set TEAMMEM_TOKEN to a teammem API token (or a GitHub token, when the daemon allows them); tokens are never taken as arguments",
            )
        })?;
    if !crate::config::is_repository_name(&args.repository) {
        return Err(Failure::usage(format!(
            "--repository: expected owner/name, got {:?}",
            args.repository
        )));
    }
    let server = args.server.trim_end_matches('/').to_string();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .map_err(|e| Failure::runtime(format!("cannot build an HTTP client: {e}")))?;
    let answer = http
        .post(format!("{server}/v1/requests"))
        .bearer_auth(token.trim())
        .json(&serde_json::json!({
            "repository": args.repository,
            "pull_number": args.pull_number,
        }))
        .send()
        .await
        .map_err(|e| Failure::runtime(format!("cannot reach {server}: {e}")))?;
    let status = answer.status();
    let body: serde_json::Value = answer.json().await.unwrap_or_default();
    if !status.is_success() {
        return Err(Failure::runtime(format!(
            "the daemon refused the request ({status}): {}",
            body["error"]["message"]
                .as_str()
                .unwrap_or("no explanation given")
        )));
    }
    let id = body["job_id"]
        .as_i64()
        .ok_or_else(|| Failure::runtime(format!("unexpected answer from the daemon: {body}")))?;
    let duplicate = if status.as_u16() == 200 {
        " (requested before)"
    } else {
        ""
    };
    println!(
        "job {id}: {}{duplicate}",
        body["state"].as_str().unwrap_or("?")
    );
    if !args.wait {
        return Ok(());
    }
    let mut last_state = String::new();
    loop {
        let r = http
            .get(format!("{server}/v1/jobs/{id}"))
            .bearer_auth(token.trim())
            .send()
            .await
            .map_err(|e| Failure::runtime(format!("cannot reach {server}: {e}")))?;
        if !r.status().is_success() {
            return Err(Failure::runtime(format!(
                "reading job {id} failed with {}",
                r.status()
            )));
        }
        let doc: serde_json::Value = r.json().await.unwrap_or_default();
        let state = doc["job"]["state"].as_str().unwrap_or("").to_string();
        if state != last_state {
            println!("job {id}: {state}");
            last_state = state.clone();
        }
        match state.as_str() {
            "succeeded" | "no_change" => {
                if let Some(sha) = doc["job"]["receipt"]["wiki_sha"].as_str() {
                    println!("wiki at {sha}");
                }
                return Ok(());
            }
            "failed" | "rejected" | "cancelled" | "skipped" => {
                let why = doc["job"]["last_error"].as_str().unwrap_or("");
                return Err(Failure::runtime(format!("job {id} ended {state} {why}")));
            }
            _ => tokio::time::sleep(std::time::Duration::from_secs(2)).await,
        }
    }
}

/// Reads a JSON argument given inline or as `@path`.
fn json_arg(flag: &str, value: &str) -> Result<serde_json::Value, Failure> {
    let text = match value.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| Failure::usage(format!("{flag}: cannot read {path}: {e}")))?,
        None => value.to_string(),
    };
    serde_json::from_str(&text).map_err(|e| Failure::usage(format!("{flag}: not valid JSON: {e}")))
}

async fn run_wiki(args: WikiArgs) -> Result<(), Failure> {
    let config = load_config(&args.config)?;
    let repository = args.repository.ok_or_else(|| {
        Failure::usage(format!(
            "--repository: required (one of: {})",
            source_names(&config)
        ))
    })?;
    let command = match args.command {
        WikiCommand::Snapshot => mcp::operator::Command::Snapshot,
        WikiCommand::List { git_ref } => mcp::operator::Command::List { git_ref },
        WikiCommand::Get { path, git_ref } => mcp::operator::Command::Get { path, git_ref },
        WikiCommand::Search { query, git_ref } => mcp::operator::Command::Search { query, git_ref },
        WikiCommand::History {
            path,
            git_ref,
            limit,
        } => mcp::operator::Command::History {
            path,
            git_ref,
            limit,
        },
        WikiCommand::Diff { from, to } => mcp::operator::Command::Diff { from, to },
        WikiCommand::Write {
            expected_base,
            expected_wiki_repository,
            message,
            pages,
        } => mcp::operator::Command::Write {
            expected_base,
            expected_wiki_repository,
            message,
            pages: json_arg("--pages", &pages)?,
        },
        WikiCommand::Patch {
            expected_base,
            expected_wiki_repository,
            message,
            patches,
        } => mcp::operator::Command::Patch {
            expected_base,
            expected_wiki_repository,
            message,
            patches: json_arg("--patches", &patches)?,
        },
    };
    let token = std::env::var("TEAMMEM_WIKI_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .map(mcp::envelope::Secret::new);
    let envelope = mcp::operator::run(
        config,
        mcp::operator::Request {
            repository,
            token,
            command,
        },
    )
    .await;
    print_json(&envelope);
    match mcp::operator::exit_code(&envelope) {
        0 => Ok(()),
        code => Err(Failure {
            code,
            message: envelope["error"]["message"]
                .as_str()
                .unwrap_or("the wiki operation failed")
                .to_string(),
        }),
    }
}

/// One line saying what a job reconciles.
fn describe(job: &Job) -> String {
    match job.job_kind() {
        JobKind::Range { before, after, .. } => {
            format!("range {}..{}", short(&before), short(&after))
        }
        JobKind::PullRequest { number, merge_sha } => {
            format!("PR #{number} ({})", short(&merge_sha))
        }
    }
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
}

/// Unix milliseconds as RFC 3339 UTC.
fn format_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| ms.to_string())
}

fn print_json(value: &impl serde::Serialize) {
    println!(
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
