//! `teammem.toml`: read once, validated once, turned into typed configuration.
//!
//! Invariants:
//! - every problem is reported with the key path it concerns
//!   (`sources[1].repository: expected owner/name, got "octo"`), and all problems
//!   of a file are reported together, not one per run;
//! - unknown keys are errors (a typo must not silently fall back to a default);
//! - secrets are referenced, never inlined: an environment variable *name* for the
//!   dispatch secrets, Key Vault or a file for the GitHub App key. A value that
//!   looks like a secret (an inline `*_secret`, `token`, `api_key`, a PEM block) is
//!   refused.
//!
//! The rest of the daemon sees only [`Config`]; nothing else parses TOML.
//!
//! This file holds the typed values; `section` reads one TOML table key by
//! key, `read` the root and the small tables, `sources` and `agent` their
//! tables, `rules` the value checks they share.

use crate::ids::RepoName;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod agent;
mod database;
mod limits;
mod read;
mod rules;
mod section;
mod sources;

pub use database::DEFAULT_MAX_CONNECTIONS as DEFAULT_DATABASE_CONNECTIONS;
pub use database::plain_on_this_machine;
pub use limits::Limits;
use read::read_config;
pub use rules::{is_loopback_host, is_repository_name};

/// The validated configuration of one teammem deployment.
#[derive(Debug, Clone)]
pub struct Config {
    pub server: Server,
    /// `[database]`: SQLite in `data_dir` unless a PostgreSQL URL is given.
    pub database: Database,
    pub github: Option<GitHub>,
    pub sources: Vec<Source>,
    pub queue: QueueSection,
    pub schedule: Schedule,
    pub agent: Agent,
    /// What any agent's writes may change (`[agent] max_changed_bytes`).
    pub agent_limits: AgentLimits,
    pub api: Api,
    pub dashboard: Dashboard,
    /// `[limits]`: what one principal may use of the daemon at once.
    pub limits: Limits,
    /// The identity wiki commits are made with (`[github] bot_name/bot_email`).
    pub bot: BotIdentity,
}

#[derive(Debug, Clone)]
pub struct Server {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub public_url: Option<String>,
    /// A connection that has not sent a whole request head in this long is
    /// closed (slow clients; also idle keep-alive connections).
    pub header_timeout: Duration,
    /// A request whose answer has not begun in this long (body read
    /// included) is answered 408; an `/mcp` event stream then runs until
    /// `mcp_stream_lifetime`.
    pub request_timeout: Duration,
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Of `max_connections`, how many `/mcp` may never hold: dispatches,
    /// health checks and the other routes always find these.
    pub reserved_connections: usize,
    /// The longest one `/mcp` request or event stream lasts; then the
    /// server ends it and the client reconnects.
    pub mcp_stream_lifetime: Duration,
    /// How often the MCP servers compare the tip of a wiki some client
    /// subscribed to with the tip they last saw
    /// (`server.mcp_resource_poll_ms`; see `crate::mcp::resources`).
    pub mcp_resource_poll: Duration,
    /// This node's name among several sharing one database (`server.node_id`;
    /// the host name by default), shown in job events, metrics and the dashboard.
    pub node_id: String,
}

/// Where the queue and everything the nodes share are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// `{data_dir}/teammem.db`, one node (no `[database]` table).
    Sqlite,
    /// A PostgreSQL server any number of nodes share.
    Postgres(Postgres),
}

/// `[database]` with a PostgreSQL `url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Postgres {
    /// The connection URL; it never holds a password (checked when read).
    pub url: String,
    /// The environment variable holding the password, if the server asks for one.
    pub password_env: Option<String>,
    /// The pool's size on each node.
    pub max_connections: u32,
}

/// `[dashboard]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dashboard {
    /// Whether a loopback client (with a loopback `Host` and no forwarding
    /// headers) is the local operator. Default: on unless `server.public_url`
    /// names a non-loopback host.
    pub trust_loopback: bool,
    /// The longest a page waits on a forge (the sources page's lag lookups).
    pub forge_timeout: Duration,
    /// Where the key that signs dashboard logins comes from
    /// (`session_key_env` or `session_key_file`); required on PostgreSQL,
    /// else SQLite keeps one in `data_dir/session.key`.
    pub session_key: Option<SessionKeySource>,
}

/// Where the dashboard's session key is read from; never the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionKeySource {
    /// `dashboard.session_key_env`: the environment variable holding it.
    Env(String),
    /// `dashboard.session_key_file`: a file only teammem's user may read.
    File(PathBuf),
}

/// The fewest bytes a configured dashboard session key may have.
pub const MIN_SESSION_KEY_BYTES: usize = 32;

impl SessionKeySource {
    /// The key's bytes, or why there are none (naming the key and what to do,
    /// never the value).
    pub fn load(&self) -> Result<crate::secrets::Secret, String> {
        const HOW: &str = "at least 32 random bytes, the same on every node (for example the output of `openssl rand -hex 32`)";
        let (key, what) = match self {
            SessionKeySource::Env(name) => (
                crate::secrets::env_secret(name).ok_or_else(|| {
                    format!(
                        "dashboard.session_key_env: environment variable {name} is not set; set it to {HOW}"
                    )
                })?,
                format!("dashboard.session_key_env: environment variable {name}"),
            ),
            SessionKeySource::File(path) => {
                use std::os::unix::fs::PermissionsExt;
                let key_name = format!("dashboard.session_key_file: {}", path.display());
                let meta = std::fs::metadata(path)
                    .map_err(|e| format!("{key_name}: cannot read it: {e}; write {HOW} to it"))?;
                if !meta.is_file() {
                    return Err(format!("{key_name}: not a regular file"));
                }
                let mode = meta.permissions().mode();
                if mode & 0o077 != 0 {
                    return Err(format!(
                        "{key_name}: readable by group or others (mode {:o}); run chmod 600 on it",
                        mode & 0o777
                    ));
                }
                let bytes =
                    std::fs::read(path).map_err(|e| format!("{key_name}: cannot read it: {e}"))?;
                (crate::secrets::Secret::new(bytes), key_name)
            }
        };
        if key.expose().trim_ascii().len() < MIN_SESSION_KEY_BYTES {
            return Err(format!(
                "{what} holds {} bytes; the dashboard's session key needs {HOW}",
                key.expose().trim_ascii().len()
            ));
        }
        Ok(key)
    }
}

#[derive(Debug, Clone)]
pub struct GitHub {
    pub api_url: String,
    pub git_url: String,
    pub app_id: u64,
    pub private_key: PrivateKey,
    pub oidc_issuer: String,
    pub verify_timeout: Duration,
}

/// Where the GitHub App private key is read from. Never the key itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrivateKey {
    KeyVault { secret_uri: String },
    File { path: PathBuf },
}

/// The identity wiki commits are made with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotIdentity {
    pub name: String,
    pub email: String,
}

#[derive(Debug, Clone)]
pub struct Source {
    /// `owner/name` of the source repository; the key every request names.
    pub repository: RepoName,
    /// `owner/name` of the repository whose wiki receives the memory.
    pub wiki_repository: RepoName,
    pub dispatch_workflow: String,
    pub request_workflow: String,
    /// Name of the environment variable holding the dispatch HMAC secret.
    pub webhook_secret_env: String,
    pub oidc_audience: Option<String>,
    pub policy_path: Option<String>,
    pub sweep: bool,
    pub forge: Forge,
    /// Pages an agent may patch (between teammem's markers) but never replace
    /// whole; `Home.md`, `_Sidebar.md`, `_Footer.md` unless configured.
    pub protected_pages: Vec<String>,
}

/// Where a source and its wiki live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forge {
    GitHub,
    /// Plain git repositories on this machine (the demo, tests, mirrors).
    Local {
        repo: PathBuf,
        wiki: PathBuf,
    },
}

impl Source {
    /// A stable id of the wiki destination; the queue allows one running job per id.
    pub fn destination(&self) -> String {
        match &self.forge {
            Forge::GitHub => format!("github:{}.wiki", self.wiki_repository),
            Forge::Local { wiki, .. } => format!("local:{}", wiki.display()),
        }
    }
}

/// The `[queue]` section (the queue's own handle is [`crate::queue::Queue`]).
#[derive(Debug, Clone)]
pub struct QueueSection {
    pub workers: usize,
    pub max_attempts: u32,
    pub lease: Duration,
    pub retention: Duration,
    pub job_timeout: Duration,
    pub shutdown_grace: Duration,
    /// How many steps nicer than the daemon the job threads (and the writer
    /// children and agent processes they start) run; 0 keeps the same priority.
    pub job_nice: i32,
}

#[derive(Debug, Clone)]
pub struct Schedule {
    pub sweep: cron::Schedule,
    pub rescue: cron::Schedule,
    pub retention: cron::Schedule,
}

#[derive(Debug, Clone)]
pub enum Agent {
    Builtin,
    OpenAi {
        base_url: String,
        model: String,
        api_key_env: Option<String>,
        max_steps: u32,
        max_output_tokens: u32,
        timeout: Duration,
    },
    Command {
        argv: Vec<String>,
        timeout: Duration,
        env_allow: Vec<String>,
        /// `agent.sandbox`: the kernel sandbox (`"on"`, the default) or none.
        sandbox: bool,
        /// `agent.read_paths`: absolute paths the sandboxed CLI may read and
        /// execute besides the system directories (its own installation).
        read_paths: Vec<PathBuf>,
        /// `agent.connect_ports`: the TCP ports the sandboxed CLI may connect
        /// to (its LLM endpoint); every other outbound TCP port is refused.
        connect_ports: Vec<u16>,
        /// `agent.max_processes`: the most processes the agent's tree may
        /// hold at once.
        max_processes: u32,
        /// `agent.max_memory_mb`: the most private writable memory one agent
        /// process may map, in MiB (0: no limit).
        max_memory_mb: u64,
    },
}

/// Limits on an agent's wiki writes, whatever its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentLimits {
    /// The most bytes one job's writer may change in the wiki, summed over
    /// its writes (see `wiki::confine::changed_bytes` for the measure).
    pub max_changed_bytes: u64,
}

/// The pages a source protects when `protected_pages` is not given.
pub const DEFAULT_PROTECTED_PAGES: [&str; 3] = ["Home.md", "_Sidebar.md", "_Footer.md"];

/// The default of `agent.max_changed_bytes` (256 KiB).
pub const DEFAULT_MAX_CHANGED_BYTES: u64 = 256 * 1024;

#[derive(Debug, Clone)]
pub struct Api {
    pub allow_github_tokens: bool,
    /// Extra `Origin`s browsers may call `/mcp` from (the public URL is always allowed).
    pub allowed_origins: Vec<String>,
}

/// Why `path` is not a git repository this process can read (`None`: it
/// is one): missing, not a directory, or neither a bare repository nor a
/// work tree (no `HEAD` and `objects`, or no `.git`).
fn not_a_repository(path: &std::path::Path) -> Option<&'static str> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some("does not exist"),
        Err(_) => Some("cannot be read by this process"),
        Ok(meta) if !meta.is_dir() => Some("is not a directory"),
        Ok(_) => {
            let bare = path.join("HEAD").is_file() && path.join("objects").is_dir();
            (!bare && !path.join(".git").exists()).then_some("is not a git repository")
        }
    }
}

impl Config {
    pub fn source(&self, repository: &str) -> Option<&Source> {
        self.sources
            .iter()
            .find(|s| s.repository.eq_ignore_ascii_case(repository))
    }

    pub fn database_path(&self) -> PathBuf {
        self.server.data_dir.join("teammem.db")
    }

    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigErrors(vec![format!(
                "{}: cannot read the configuration file: {e}",
                path.display()
            )])
        })?;
        Config::parse(&text)
    }

    /// Validates configuration text. All problems are returned together.
    pub fn parse(text: &str) -> Result<Config, ConfigErrors> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            ConfigErrors(vec![format!(
                "not valid TOML: {}",
                e.message().trim_end_matches('.')
            )])
        })?;
        let mut errors = Vec::new();
        let config = read_config(&table, &mut errors);
        agent::check_env_allow(&table, &mut errors);
        if errors.is_empty() {
            Ok(config.expect("a config is built whenever no error was recorded"))
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// The local sources' repositories that are not there: one sentence
    /// each, naming the key and the fix. `check-config` refuses them; the
    /// daemon starts anyway (other sources work) and logs each, and a job of
    /// such a source fails for good.
    pub fn missing_local_repositories(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (i, source) in self.sources.iter().enumerate() {
            if let Forge::Local { repo, wiki } = &source.forge {
                for (key, path, what) in [
                    ("local_path", repo, "the source's git repository"),
                    ("local_wiki_path", wiki, "the wiki's git repository"),
                ] {
                    if let Some(why) = not_a_repository(path) {
                        problems.push(format!(
                            "sources[{i}].{key}: {} {why}; it must be {what} (create it, or fix the path)",
                            path.display()
                        ));
                    }
                }
            }
        }
        problems
    }

    /// Checks what the file alone cannot tell: the referenced environment
    /// variables are set, and each dispatch secret is long enough; warns
    /// (in the log, never quoting a value) of one secret shared by several
    /// sources. `serve` and `check-config` both run it.
    pub fn check_environment(&self) -> Result<(), ConfigErrors> {
        let mut errors = Vec::new();
        for (i, source) in self.sources.iter().enumerate() {
            match crate::secrets::env_secret(&source.webhook_secret_env).filter(|v| !v.is_empty()) {
                None => errors.push(format!(
                    "sources[{i}].webhook_secret_env: environment variable {} is not set; set it to the dispatch secret of {}",
                    source.webhook_secret_env, source.repository
                )),
                Some(secret) => errors.extend(
                    crate::secrets::short_dispatch_secret(&source.webhook_secret_env, &secret)
                        .map(|why| format!("sources[{i}].webhook_secret_env: {why}")),
                ),
            }
        }
        for warning in self.shared_dispatch_secrets() {
            tracing::warn!("{warning}");
        }
        if let Agent::OpenAi {
            api_key_env: Some(name),
            ..
        } = &self.agent
            && crate::secrets::env_secret(name).is_none()
        {
            errors.push(format!(
                "agent.api_key_env: environment variable {name} is not set"
            ));
        }
        match (&self.dashboard.session_key, &self.database) {
            (Some(source), _) => {
                if let Err(why) = source.load() {
                    errors.push(why);
                }
            }
            (None, Database::Postgres(_)) => errors.push(SESSION_KEY_REQUIRED.into()),
            (None, Database::Sqlite) => {}
        }
        if let Database::Postgres(Postgres {
            password_env: Some(name),
            ..
        }) = &self.database
            && crate::secrets::env_secret(name).is_none()
        {
            errors.push(format!(
                "database.password_env: environment variable {name} is not set; set it to the database password"
            ));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors(errors))
        }
    }
}

/// Why a PostgreSQL node does not start without a dashboard session key.
pub const SESSION_KEY_REQUIRED: &str = "dashboard.session_key_env: required with a PostgreSQL [database] \
(the key that signs dashboard logins is not kept in the database, where whoever reads a backup could sign any login): \
set dashboard.session_key_env to the name of an environment variable holding at least 32 random bytes, \
the same on every node (for example `openssl rand -hex 32`), or dashboard.session_key_file to a file of them \
that only teammem's user may read";

impl Config {
    /// The environment variables holding secrets the daemon reads itself,
    /// to move out of its environment at start-up
    /// ([`crate::secrets::capture_env`]): every source's
    /// `webhook_secret_env` and `agent.api_key_env`. Never a name in
    /// `agent.env_allow` (the agent CLI is given those).
    pub fn secret_env_names(&self) -> Vec<String> {
        let allowed: &[String] = match &self.agent {
            Agent::Command { env_allow, .. } => env_allow,
            _ => &[],
        };
        let database_password = match &self.database {
            Database::Postgres(Postgres {
                password_env: Some(name),
                ..
            }) => Some(name.clone()),
            _ => None,
        };
        let mut names: Vec<String> = self
            .sources
            .iter()
            .map(|s| s.webhook_secret_env.clone())
            .chain(database_password)
            .chain(match &self.agent {
                Agent::OpenAi {
                    api_key_env: Some(name),
                    ..
                } => Some(name.clone()),
                _ => None,
            })
            .chain(match &self.dashboard.session_key {
                Some(SessionKeySource::Env(name)) => Some(name.clone()),
                _ => None,
            })
            .filter(|n| !allowed.contains(n))
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// Every problem found in a configuration, each naming its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<String>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("\n"))
    }
}

impl std::error::Error for ConfigErrors {}
