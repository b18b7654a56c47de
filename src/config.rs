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

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The validated configuration of one teammem deployment.
#[derive(Debug, Clone)]
pub struct Config {
    pub server: Server,
    pub github: Option<GitHub>,
    pub sources: Vec<Source>,
    pub queue: Queue,
    pub schedule: Schedule,
    pub agent: Agent,
    /// What any agent's writes may change (`[agent] max_changed_bytes`).
    pub agent_limits: AgentLimits,
    pub api: Api,
    pub dashboard: Dashboard,
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
    /// A request (body read included) that takes longer is answered 408;
    /// `/mcp` is exempt (its event streams are long-lived).
    pub request_timeout: Duration,
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
}

/// `[dashboard]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dashboard {
    /// Whether a loopback client (with a loopback `Host` and no forwarding
    /// headers) is the local operator. Default: on unless `server.public_url`
    /// names a non-loopback host.
    pub trust_loopback: bool,
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
    pub repository: String,
    /// `owner/name` of the repository whose wiki receives the memory.
    pub wiki_repository: String,
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

#[derive(Debug, Clone)]
pub struct Queue {
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
        if errors.is_empty() {
            Ok(config.expect("a config is built whenever no error was recorded"))
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// Checks what the file alone cannot tell: the referenced environment
    /// variables are set. `serve` and `check-config` both run it.
    pub fn check_environment(&self) -> Result<(), ConfigErrors> {
        let mut errors = Vec::new();
        for (i, source) in self.sources.iter().enumerate() {
            if crate::secrets::env_secret(&source.webhook_secret_env).is_none_or(|v| v.is_empty()) {
                errors.push(format!(
                    "sources[{i}].webhook_secret_env: environment variable {} is not set; set it to the dispatch secret of {}",
                    source.webhook_secret_env, source.repository
                ));
            }
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
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors(errors))
        }
    }
}

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
        let mut names: Vec<String> = self
            .sources
            .iter()
            .map(|s| s.webhook_secret_env.clone())
            .chain(match &self.agent {
                Agent::OpenAi {
                    api_key_env: Some(name),
                    ..
                } => Some(name.clone()),
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

// --- reading -------------------------------------------------------------------

/// One TOML table being read: remembers the key path for messages and which
/// keys were consumed, so leftovers can be reported as unknown.
struct Section<'a> {
    path: String,
    table: &'a toml::Table,
    seen: HashSet<&'static str>,
}

impl<'a> Section<'a> {
    fn new(path: impl Into<String>, table: &'a toml::Table) -> Self {
        Section {
            path: path.into(),
            table,
            seen: HashSet::new(),
        }
    }

    fn key(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn get(&mut self, key: &'static str) -> Option<&'a toml::Value> {
        self.seen.insert(key);
        self.table.get(key)
    }

    fn string(&mut self, key: &'static str, errors: &mut Vec<String>) -> Option<String> {
        match self.get(key)? {
            toml::Value::String(s) if looks_like_inline_secret(s) => {
                errors.push(format!(
                    "{}: looks like a secret; secrets are never written in the config, reference them (an environment variable name, a file, or Key Vault)",
                    self.key(key)
                ));
                None
            }
            toml::Value::String(s) => Some(s.clone()),
            other => {
                errors.push(format!(
                    "{}: expected a string, got {}",
                    self.key(key),
                    other.type_str()
                ));
                None
            }
        }
    }

    fn required_string(&mut self, key: &'static str, errors: &mut Vec<String>) -> Option<String> {
        if !self.table.contains_key(key) {
            self.seen.insert(key);
            errors.push(format!("{}: required key is missing", self.key(key)));
            return None;
        }
        self.string(key, errors)
    }

    fn bool(&mut self, key: &'static str, default: bool, errors: &mut Vec<String>) -> bool {
        match self.get(key) {
            None => default,
            Some(toml::Value::Boolean(b)) => *b,
            Some(other) => {
                errors.push(format!(
                    "{}: expected true or false, got {}",
                    self.key(key),
                    other.type_str()
                ));
                default
            }
        }
    }

    /// An integer within `range` (inclusive), or `default` when absent.
    fn int(
        &mut self,
        key: &'static str,
        default: i64,
        range: (i64, i64),
        errors: &mut Vec<String>,
    ) -> i64 {
        match self.get(key) {
            None => default,
            Some(toml::Value::Integer(n)) if (range.0..=range.1).contains(n) => *n,
            Some(toml::Value::Integer(n)) => {
                errors.push(format!(
                    "{}: expected a number from {} to {}, got {n}",
                    self.key(key),
                    range.0,
                    range.1
                ));
                default
            }
            Some(other) => {
                errors.push(format!(
                    "{}: expected an integer, got {}",
                    self.key(key),
                    other.type_str()
                ));
                default
            }
        }
    }

    /// An array of TCP port numbers (1-65535).
    fn ports(&mut self, key: &'static str, errors: &mut Vec<String>) -> Vec<u16> {
        match self.get(key) {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| match item {
                    toml::Value::Integer(n) if (1..=65_535).contains(n) => Some(*n as u16),
                    other => {
                        errors.push(format!(
                            "{}[{i}]: expected a TCP port from 1 to 65535, got {other:?}",
                            self.key(key)
                        ));
                        None
                    }
                })
                .collect(),
            Some(other) => {
                errors.push(format!(
                    "{}: expected an array of port numbers, got {}",
                    self.key(key),
                    other.type_str()
                ));
                Vec::new()
            }
        }
    }

    fn strings(&mut self, key: &'static str, errors: &mut Vec<String>) -> Vec<String> {
        match self.get(key) {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match item {
                        toml::Value::String(s) => out.push(s.clone()),
                        other => errors.push(format!(
                            "{}[{i}]: expected a string, got {}",
                            self.key(key),
                            other.type_str()
                        )),
                    }
                }
                out
            }
            Some(other) => {
                errors.push(format!(
                    "{}: expected an array of strings, got {}",
                    self.key(key),
                    other.type_str()
                ));
                Vec::new()
            }
        }
    }

    fn table(&mut self, key: &'static str, errors: &mut Vec<String>) -> Option<&'a toml::Table> {
        match self.get(key)? {
            toml::Value::Table(t) => Some(t),
            other => {
                errors.push(format!(
                    "{}: expected a table, got {}",
                    self.key(key),
                    other.type_str()
                ));
                None
            }
        }
    }

    /// Reports every key that no reader asked for.
    fn finish(self, errors: &mut Vec<String>) {
        for key in self.table.keys() {
            if !self.seen.contains(key.as_str()) {
                let hint = if is_secret_key(key) {
                    "; secrets are never written in the config (use an `*_env` key naming an environment variable)"
                } else {
                    ""
                };
                errors.push(format!("{}: unknown key{hint}", self.key(key)));
            }
        }
    }
}

fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["secret", "token", "password", "api_key", "apikey"]
        .iter()
        .any(|s| k.contains(s))
        && !k.ends_with("_env")
        && !k.ends_with("_uri")
}

fn looks_like_inline_secret(value: &str) -> bool {
    value.contains("-----BEGIN")
        || value.starts_with("ghp_")
        || value.starts_with("ghs_")
        || value.starts_with("github_pat_")
        || value.starts_with("tmm_")
}

fn read_config(root: &toml::Table, errors: &mut Vec<String>) -> Option<Config> {
    let mut top = Section::new("", root);
    let empty = toml::Table::new();

    let server_table = top.table("server", errors);
    if server_table.is_none() && !root.contains_key("server") {
        errors.push("server: required table is missing (it needs at least data_dir)".into());
    }
    let server = read_server(server_table.unwrap_or(&empty), errors);

    let github = top.table("github", errors).map(|t| read_github(t, errors));
    let bot = read_bot(root.get("github").and_then(|v| v.as_table()));

    let mut sources = Vec::new();
    match top.get("sources") {
        None => {}
        Some(toml::Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match item {
                    toml::Value::Table(t) => {
                        if let Some(s) = read_source(i, t, github.is_some(), errors) {
                            sources.push((i, s));
                        }
                    }
                    other => errors.push(format!(
                        "sources[{i}]: expected a table ([[sources]]), got {}",
                        other.type_str()
                    )),
                }
            }
        }
        Some(other) => errors.push(format!(
            "sources: expected an array of tables ([[sources]]), got {}",
            other.type_str()
        )),
    }
    let mut first_index: BTreeMap<String, usize> = BTreeMap::new();
    for (i, s) in &sources {
        if let Some(first) = first_index.insert(s.repository.to_ascii_lowercase(), *i) {
            errors.push(format!(
                "sources[{i}].repository: {} is already configured by sources[{first}]; each source may appear once",
                s.repository
            ));
        }
    }
    check_mappings(&sources, errors);

    let queue = read_queue(top.table("queue", errors).unwrap_or(&empty), errors);
    let schedule = read_schedule(top.table("schedule", errors).unwrap_or(&empty), errors);
    let (agent, agent_limits) = read_agent(top.table("agent", errors).unwrap_or(&empty), errors);
    let api = read_api(top.table("api", errors).unwrap_or(&empty), errors);
    let dashboard = read_dashboard(
        top.table("dashboard", errors).unwrap_or(&empty),
        server.as_ref().and_then(|s| s.public_url.as_deref()),
        errors,
    );
    top.finish(errors);

    Some(Config {
        server: server?,
        github: github.flatten(),
        sources: sources.into_iter().map(|(_, s)| s).collect(),
        queue,
        schedule: schedule?,
        agent: agent?,
        agent_limits,
        api,
        dashboard,
        bot,
    })
    .filter(|_| errors.is_empty())
}

/// Mappings the file alone shows to be wrong: a local source whose wiki is a
/// source repository (its own or another source's), where memory commits
/// would land among the code.
fn check_mappings(sources: &[(usize, Source)], errors: &mut Vec<String>) {
    let same = |a: &Path, b: &Path| a.components().eq(b.components());
    for (i, s) in sources {
        let Forge::Local { wiki, .. } = &s.forge else {
            continue;
        };
        for (j, other) in sources {
            let Forge::Local { repo, .. } = &other.forge else {
                continue;
            };
            if !same(wiki, repo) {
                continue;
            }
            errors.push(if i == j {
                format!(
                    "sources[{i}].local_wiki_path: is the source repository itself (local_path); give the wiki a repository of its own"
                )
            } else {
                format!(
                    "sources[{i}].local_wiki_path: is the source repository of sources[{j}] ({}); give {} a wiki repository of its own",
                    other.repository, s.repository
                )
            });
        }
    }
}

fn read_server(t: &toml::Table, errors: &mut Vec<String>) -> Option<Server> {
    let mut s = Section::new("server", t);
    let listen = s
        .string("listen", errors)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let listen = match listen.parse::<SocketAddr>() {
        Ok(a) => Some(a),
        Err(_) => {
            errors.push(format!(
                "server.listen: expected an address like 127.0.0.1:8080, got {listen:?}"
            ));
            None
        }
    };
    let data_dir = s.required_string("data_dir", errors).and_then(|d| {
        if d.trim().is_empty() {
            errors.push("server.data_dir: must not be empty".into());
            None
        } else {
            Some(PathBuf::from(d))
        }
    });
    let public_url = s.string("public_url", errors);
    if let Some(url) = &public_url {
        check_url("server.public_url", url, errors);
    }
    let header_timeout = s.int("header_timeout_seconds", 10, (1, 300), errors) as u64;
    let request_timeout = s.int("request_timeout_seconds", 60, (1, 3600), errors) as u64;
    let max_connections = s.int("max_connections", 1024, (1, 65_536), errors) as usize;
    s.finish(errors);
    Some(Server {
        listen: listen?,
        data_dir: data_dir?,
        public_url: public_url.map(|u| u.trim_end_matches('/').to_string()),
        header_timeout: Duration::from_secs(header_timeout),
        request_timeout: Duration::from_secs(request_timeout),
        max_connections,
    })
}

fn read_dashboard(
    t: &toml::Table,
    public_url: Option<&str>,
    errors: &mut Vec<String>,
) -> Dashboard {
    let mut s = Section::new("dashboard", t);
    let default = public_url.is_none_or(url_is_loopback);
    let trust_loopback = s.bool("trust_loopback", default, errors);
    s.finish(errors);
    Dashboard { trust_loopback }
}

/// Whether `host` (a `Host` header value or a URL's authority, port allowed)
/// names this machine's loopback interface: `127.0.0.1`, `[::1]` or
/// `localhost`.
pub fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((name, port)) if port.is_empty() || is_port(port) => name,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return false,
            None => host,
        }
    };
    name == "127.0.0.1" || name == "::1" || name.eq_ignore_ascii_case("localhost")
}

fn is_port(text: &str) -> bool {
    text.strip_prefix(':')
        .unwrap_or(text)
        .parse::<u16>()
        .is_ok()
}

/// Whether an http(s) URL's host is a loopback host.
fn url_is_loopback(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    is_loopback_host(authority)
}

fn read_github(t: &toml::Table, errors: &mut Vec<String>) -> Option<GitHub> {
    let mut s = Section::new("github", t);
    let api_url = s
        .string("api_url", errors)
        .unwrap_or_else(|| "https://api.github.com".into());
    check_url("github.api_url", &api_url, errors);
    let git_url = s
        .string("git_url", errors)
        .unwrap_or_else(|| "https://github.com".into());
    check_url("github.git_url", &git_url, errors);
    let oidc_issuer = s
        .string("oidc_issuer", errors)
        .unwrap_or_else(|| "https://token.actions.githubusercontent.com".into());
    check_url("github.oidc_issuer", &oidc_issuer, errors);
    let app_id = if t.contains_key("app_id") {
        s.int("app_id", 0, (1, i64::MAX), errors)
    } else {
        s.seen.insert("app_id");
        errors.push("github.app_id: required key is missing (the GitHub App's id)".into());
        0
    };
    let verify_timeout = s.int("verify_timeout_seconds", 20, (1, 120), errors);
    // Read by read_bot; mark them known here.
    s.string("bot_name", errors);
    s.string("bot_email", errors);

    let private_key = match s.get("private_key") {
        None => {
            errors.push(
                "github.private_key: required; give { key_vault_secret_uri = \"https://NAME.vault.azure.net/secrets/NAME\" } or { file = \"/path/app.pem\" }"
                    .into(),
            );
            None
        }
        Some(toml::Value::Table(k)) => read_private_key(k, errors),
        Some(toml::Value::String(_)) => {
            errors.push(
                "github.private_key: the key itself is never accepted in the config; give { key_vault_secret_uri = ... } or { file = ... }"
                    .into(),
            );
            None
        }
        Some(other) => {
            errors.push(format!(
                "github.private_key: expected a table, got {}",
                other.type_str()
            ));
            None
        }
    };
    s.finish(errors);
    Some(GitHub {
        api_url: api_url.trim_end_matches('/').to_string(),
        git_url: git_url.trim_end_matches('/').to_string(),
        app_id: app_id as u64,
        private_key: private_key?,
        oidc_issuer: oidc_issuer.trim_end_matches('/').to_string(),
        verify_timeout: Duration::from_secs(verify_timeout as u64),
    })
}

fn read_private_key(t: &toml::Table, errors: &mut Vec<String>) -> Option<PrivateKey> {
    let mut s = Section::new("github.private_key", t);
    let uri = s.string("key_vault_secret_uri", errors);
    let file = s.string("file", errors);
    s.finish(errors);
    match (uri, file) {
        (Some(uri), None) => {
            if !uri.starts_with("https://") || !uri.contains("/secrets/") {
                errors.push(format!(
                    "github.private_key.key_vault_secret_uri: expected https://NAME.vault.azure.net/secrets/NAME, got {uri:?}"
                ));
                return None;
            }
            Some(PrivateKey::KeyVault { secret_uri: uri })
        }
        (None, Some(file)) => Some(PrivateKey::File {
            path: PathBuf::from(file),
        }),
        (Some(_), Some(_)) => {
            errors.push(
                "github.private_key: give either key_vault_secret_uri or file, not both".into(),
            );
            None
        }
        (None, None) => {
            errors.push("github.private_key: give key_vault_secret_uri or file".into());
            None
        }
    }
}

fn read_bot(github: Option<&toml::Table>) -> BotIdentity {
    let get = |k: &str| {
        github
            .and_then(|t| t.get(k))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    BotIdentity {
        name: get("bot_name").unwrap_or_else(|| "teammem[bot]".into()),
        email: get("bot_email").unwrap_or_else(|| "teammem[bot]@users.noreply.localhost".into()),
    }
}

fn read_source(
    i: usize,
    t: &toml::Table,
    have_github: bool,
    errors: &mut Vec<String>,
) -> Option<Source> {
    let before = errors.len();
    let mut s = Section::new(format!("sources[{i}]"), t);
    let repository = s.required_string("repository", errors);
    if let Some(r) = &repository {
        check_repository(&s.key("repository"), r, errors);
    }
    let wiki_repository = s.string("wiki_repository", errors);
    if let Some(r) = &wiki_repository {
        check_repository(&s.key("wiki_repository"), r, errors);
    }
    let dispatch_workflow = s
        .string("dispatch_workflow", errors)
        .unwrap_or_else(|| ".github/workflows/team-memory-post-merge.yml".into());
    let request_workflow = s
        .string("request_workflow", errors)
        .unwrap_or_else(|| ".github/workflows/team-memory-request.yml".into());
    for (key, wf) in [
        ("dispatch_workflow", &dispatch_workflow),
        ("request_workflow", &request_workflow),
    ] {
        if !wf.starts_with(".github/workflows/") || !(wf.ends_with(".yml") || wf.ends_with(".yaml"))
        {
            errors.push(format!(
                "{}: expected a path like .github/workflows/NAME.yml, got {wf:?}",
                s.key(key)
            ));
        }
    }
    let webhook_secret_env = s.required_string("webhook_secret_env", errors);
    if let Some(name) = &webhook_secret_env
        && !is_env_name(name)
    {
        errors.push(format!(
            "{}: expected the NAME of an environment variable (A-Z, 0-9, _), got {name:?}; the secret itself never goes in the config",
            s.key("webhook_secret_env")
        ));
    }
    let oidc_audience = s.string("oidc_audience", errors);
    if oidc_audience.as_deref() == Some("") {
        errors.push(format!("{}: must not be empty", s.key("oidc_audience")));
    }
    let policy_path = s.string("policy_path", errors);
    if let Some(p) = &policy_path
        && (p.is_empty() || p.starts_with('/') || p.split('/').any(|seg| seg == ".."))
    {
        errors.push(format!(
            "{}: expected a path inside the repository like .github/team-memory.md, got {p:?}",
            s.key("policy_path")
        ));
    }
    let sweep = s.bool("sweep", false, errors);
    let protected_pages = match s.get("protected_pages") {
        None => DEFAULT_PROTECTED_PAGES.map(str::to_owned).to_vec(),
        Some(_) => s.strings("protected_pages", errors),
    };
    for (n, page) in protected_pages.iter().enumerate() {
        if let Err(why) = crate::wiki::paths::check_page_path(page) {
            errors.push(format!(
                "{}[{n}]: {page:?} is not a wiki page path: {why}; name pages like \"Home.md\" or \"Areas/Team.md\"",
                s.key("protected_pages")
            ));
        }
    }
    let local_path = s.string("local_path", errors);
    let local_wiki_path = s.string("local_wiki_path", errors);
    let forge = match (local_path, local_wiki_path) {
        (None, None) => {
            if !have_github {
                errors.push(format!(
                    "{}: a GitHub source needs a [github] section (or give local_path and local_wiki_path for a local source)",
                    s.key("repository")
                ));
            }
            Some(Forge::GitHub)
        }
        (Some(repo), Some(wiki)) => {
            for (key, p) in [("local_path", &repo), ("local_wiki_path", &wiki)] {
                if !Path::new(p).is_absolute() {
                    errors.push(format!(
                        "{}: expected an absolute path, got {p:?}",
                        s.key(key)
                    ));
                }
            }
            if wiki_repository.is_some() {
                errors.push(format!(
                    "{}: not used by a local source (its wiki is local_wiki_path)",
                    s.key("wiki_repository")
                ));
            }
            if oidc_audience.is_some() {
                errors.push(format!(
                    "{}: local sources have no Actions runs to vouch for them; remove it",
                    s.key("oidc_audience")
                ));
            }
            Some(Forge::Local {
                repo: PathBuf::from(repo),
                wiki: PathBuf::from(wiki),
            })
        }
        (Some(_), None) => {
            errors.push(format!(
                "{}: required with local_path",
                s.key("local_wiki_path")
            ));
            None
        }
        (None, Some(_)) => {
            errors.push(format!(
                "{}: required with local_wiki_path",
                s.key("local_path")
            ));
            None
        }
    };
    s.finish(errors);
    if errors.len() > before {
        return None;
    }
    let repository = repository?;
    Some(Source {
        wiki_repository: wiki_repository.unwrap_or_else(|| repository.clone()),
        repository,
        dispatch_workflow,
        request_workflow,
        webhook_secret_env: webhook_secret_env?,
        oidc_audience,
        policy_path,
        sweep,
        forge: forge?,
        protected_pages,
    })
}

fn read_queue(t: &toml::Table, errors: &mut Vec<String>) -> Queue {
    let mut s = Section::new("queue", t);
    let q = Queue {
        workers: s.int("workers", 2, (1, 64), errors) as usize,
        max_attempts: s.int("max_attempts", 8, (1, 100), errors) as u32,
        lease: Duration::from_secs(s.int("lease_seconds", 60, (5, 3600), errors) as u64),
        retention: Duration::from_secs(
            s.int("retention_days", 30, (1, 3650), errors) as u64 * 86_400,
        ),
        job_timeout: Duration::from_secs(
            s.int("job_timeout_seconds", 900, (10, 86_400), errors) as u64
        ),
        shutdown_grace: Duration::from_secs(
            s.int("shutdown_grace_seconds", 30, (0, 3600), errors) as u64
        ),
        job_nice: s.int("job_nice", 10, (0, 19), errors) as i32,
    };
    s.finish(errors);
    q
}

fn read_schedule(t: &toml::Table, errors: &mut Vec<String>) -> Option<Schedule> {
    let mut s = Section::new("schedule", t);
    let mut cron_at = |key: &'static str, default: &str| {
        let expr = s.string(key, errors).unwrap_or_else(|| default.into());
        match expr.parse::<cron::Schedule>() {
            Ok(c) => Some(c),
            Err(e) => {
                let why = e.to_string();
                let why = why.lines().last().unwrap_or_default().trim_end_matches('.');
                errors.push(format!(
                    "schedule.{key}: not a cron expression with seconds (like \"0 */15 * * * *\"), got {expr:?}: {why}"
                ));
                None
            }
        }
    };
    let sweep = cron_at("sweep", "0 */15 * * * *");
    let rescue = cron_at("rescue", "*/15 * * * * *");
    let retention = cron_at("retention", "0 0 3 * * *");
    s.finish(errors);
    Some(Schedule {
        sweep: sweep?,
        rescue: rescue?,
        retention: retention?,
    })
}

fn read_agent(t: &toml::Table, errors: &mut Vec<String>) -> (Option<Agent>, AgentLimits) {
    let mut s = Section::new("agent", t);
    let limits = AgentLimits {
        max_changed_bytes: s.int(
            "max_changed_bytes",
            DEFAULT_MAX_CHANGED_BYTES as i64,
            (1, 1 << 30),
            errors,
        ) as u64,
    };
    let kind = s.string("kind", errors).unwrap_or_else(|| "builtin".into());
    let agent = match kind.as_str() {
        "builtin" => Some(Agent::Builtin),
        "openai" => {
            let base_url = s.required_string("base_url", errors);
            if let Some(u) = &base_url {
                check_url("agent.base_url", u, errors);
            }
            let model = s.required_string("model", errors);
            let api_key_env = s.string("api_key_env", errors);
            if let Some(name) = &api_key_env
                && !is_env_name(name)
            {
                errors.push(format!(
                    "agent.api_key_env: expected the NAME of an environment variable, got {name:?}"
                ));
            }
            let max_steps = s.int("max_steps", 30, (1, 500), errors) as u32;
            let max_output_tokens =
                s.int("max_output_tokens", 4096, (64, 1_000_000), errors) as u32;
            let timeout = s.int("timeout_seconds", 600, (10, 86_400), errors) as u64;
            base_url.zip(model).map(|(base_url, model)| Agent::OpenAi {
                base_url: base_url.trim_end_matches('/').to_string(),
                model,
                api_key_env,
                max_steps,
                max_output_tokens,
                timeout: Duration::from_secs(timeout),
            })
        }
        "command" => {
            let argv = s.strings("argv", errors);
            if argv.is_empty() {
                errors.push(
                    "agent.argv: required for kind = \"command\" (the agent CLI and its arguments, with {mcp_config} and {receipt} placeholders)"
                        .into(),
                );
            }
            let timeout = s.int("timeout_seconds", 600, (10, 86_400), errors) as u64;
            let env_allow = s.strings("env_allow", errors);
            for (i, name) in env_allow.iter().enumerate() {
                if !is_env_name(name) {
                    errors.push(format!(
                        "agent.env_allow[{i}]: expected an environment variable name, got {name:?}"
                    ));
                }
            }
            let sandbox = match s.string("sandbox", errors).as_deref() {
                None | Some("on") => true,
                Some("off") => false,
                Some(other) => {
                    errors.push(format!(
                        "agent.sandbox: expected \"on\" or \"off\", got {other:?}"
                    ));
                    true
                }
            };
            let read_paths: Vec<PathBuf> = s
                .strings("read_paths", errors)
                .into_iter()
                .enumerate()
                .filter_map(|(i, p)| {
                    let path = PathBuf::from(&p);
                    if path.is_absolute() {
                        Some(path)
                    } else {
                        errors.push(format!(
                            "agent.read_paths[{i}]: expected an absolute path, got {p:?}"
                        ));
                        None
                    }
                })
                .collect();
            let connect_ports = s.ports("connect_ports", errors);
            Some(Agent::Command {
                argv,
                timeout: Duration::from_secs(timeout),
                env_allow,
                sandbox,
                read_paths,
                connect_ports,
            })
        }
        other => {
            errors.push(format!(
                "agent.kind: expected builtin, openai or command, got {other:?}"
            ));
            None
        }
    };
    s.finish(errors);
    (agent, limits)
}

fn read_api(t: &toml::Table, errors: &mut Vec<String>) -> Api {
    let mut s = Section::new("api", t);
    let allow_github_tokens = s.bool("allow_github_tokens", false, errors);
    let allowed_origins = s.strings("allowed_origins", errors);
    for (i, o) in allowed_origins.iter().enumerate() {
        check_url(&format!("api.allowed_origins[{i}]"), o, errors);
    }
    s.finish(errors);
    Api {
        allow_github_tokens,
        allowed_origins,
    }
}

// --- value rules -----------------------------------------------------------------

/// `owner/name` as GitHub allows it: one slash, letters, digits, `-`, `_`, `.`.
pub fn is_repository_name(r: &str) -> bool {
    let Some((owner, name)) = r.split_once('/') else {
        return false;
    };
    let ok = |part: &str, max: usize| {
        !part.is_empty()
            && part.len() <= max
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
            && part != "."
            && part != ".."
    };
    ok(owner, 39) && ok(name, 100)
}

fn check_repository(key: &str, r: &str, errors: &mut Vec<String>) {
    if !is_repository_name(r) {
        errors.push(format!("{key}: expected owner/name, got {r:?}"));
    }
}

/// An `https` URL, or `http` to this machine only (`127.0.0.1`, `[::1]`,
/// `localhost`): teammem sends tokens, keys and private memory to these URLs,
/// and plain `http` to another host would carry them in the clear.
fn check_url(key: &str, url: &str, errors: &mut Vec<String>) {
    let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        (false, "")
    };
    if rest.is_empty() || rest.starts_with('/') || url.contains('@') {
        errors.push(format!(
            "{key}: expected an https URL (plain http only to 127.0.0.1, [::1] or localhost) without credentials, got {url:?}"
        ));
        return;
    }
    if !https && !is_loopback_authority(rest) {
        errors.push(format!(
            "{key}: plain http is allowed only to this machine (127.0.0.1, [::1], localhost), got {url:?}; use https://"
        ));
    }
}

/// `rest` (a URL after its scheme) names a loopback host: `127.0.0.1`,
/// `[::1]` or `localhost`, with or without a port.
fn is_loopback_authority(rest: &str) -> bool {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((host, after)) if after.is_empty() || after.starts_with(':') => host,
            _ => return false,
        }
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    let port_ok = match authority
        .rsplit_once(']')
        .map(|(_, p)| p)
        .unwrap_or(authority)
        .split_once(':')
    {
        None => true,
        Some((_, port)) => port.parse::<u16>().is_ok(),
    };
    port_ok && (host == "127.0.0.1" || host == "::1" || host.eq_ignore_ascii_case("localhost"))
}

fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_uppercase() || b == b'_')
        && bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}
