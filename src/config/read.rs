//! The readers of `teammem.toml`'s tables: the root and every section but
//! `[[sources]]` and `[agent]`, each turned into its typed value.
//!
//! Invariant: a reader records every problem it finds and goes on, never
//! stopping at the first; no [`Config`] is built while any problem is recorded.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::agent::read_agent;
use super::database::{read_database, read_node_id};
use super::limits::{read_limits, read_reserved_connections, read_stream_lifetime};
use super::rules::{check_url, url_is_loopback};
use super::section::Section;
use super::sources::{check_mappings, read_source};
use super::{
    Api, BotIdentity, Config, Dashboard, GitHub, PrivateKey, QueueSection, Schedule, Server,
    SessionKeySource,
};

pub(super) fn read_config(root: &toml::Table, errors: &mut Vec<String>) -> Option<Config> {
    let mut top = Section::new("", root);
    let empty = toml::Table::new();

    let server_table = top.table("server", errors);
    if server_table.is_none() && !root.contains_key("server") {
        errors.push("server: required table is missing (it needs at least data_dir)".into());
    }
    let server = read_server(server_table.unwrap_or(&empty), errors);

    let database = read_database(top.table("database", errors), errors);
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
    let limits = read_limits(top.table("limits", errors).unwrap_or(&empty), errors);
    let dashboard = read_dashboard(
        top.table("dashboard", errors).unwrap_or(&empty),
        server.as_ref().and_then(|s| s.public_url.as_deref()),
        errors,
    );
    top.finish(errors);

    Some(Config {
        server: server?,
        database,
        github: github.flatten(),
        sources: sources.into_iter().map(|(_, s)| s).collect(),
        queue,
        schedule: schedule?,
        agent: agent?,
        agent_limits,
        api,
        dashboard,
        limits,
        bot,
    })
    .filter(|_| errors.is_empty())
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
    let reserved_connections = read_reserved_connections(&mut s, max_connections, errors);
    let mcp_stream_lifetime = read_stream_lifetime(&mut s, errors);
    let mcp_resource_poll =
        Duration::from_millis(
            s.int("mcp_resource_poll_ms", 5_000, (100, 3_600_000), errors) as u64,
        );
    let node_id = read_node_id(&mut s, errors);
    s.finish(errors);
    Some(Server {
        listen: listen?,
        data_dir: data_dir?,
        public_url: public_url.map(|u| u.trim_end_matches('/').to_string()),
        header_timeout: Duration::from_secs(header_timeout),
        request_timeout: Duration::from_secs(request_timeout),
        max_connections,
        reserved_connections,
        mcp_stream_lifetime,
        mcp_resource_poll,
        node_id,
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
    let forge_timeout = s.int("forge_timeout_seconds", 2, (1, 30), errors) as u64;
    let session_key = read_session_key(&mut s, errors);
    s.finish(errors);
    Dashboard {
        trust_loopback,
        forge_timeout: Duration::from_secs(forge_timeout),
        session_key,
    }
}

/// `dashboard.session_key_env` (a variable's name) or
/// `dashboard.session_key_file` (an absolute path), at most one of them.
fn read_session_key(s: &mut Section, errors: &mut Vec<String>) -> Option<SessionKeySource> {
    let env = s.string("session_key_env", errors);
    let file = s.string("session_key_file", errors);
    if let Some(name) = &env
        && !super::rules::is_env_name(name)
    {
        errors.push(format!(
            "dashboard.session_key_env: expected the NAME of an environment variable holding the key, got {name:?}"
        ));
        return None;
    }
    if let Some(path) = &file
        && !std::path::Path::new(path).is_absolute()
    {
        errors.push(format!(
            "dashboard.session_key_file: expected an absolute path, got {path:?}"
        ));
        return None;
    }
    match (env, file) {
        (Some(_), Some(_)) => {
            errors.push(
                "dashboard.session_key_env and dashboard.session_key_file: give one of them, not both"
                    .into(),
            );
            None
        }
        (Some(name), None) => Some(SessionKeySource::Env(name)),
        (None, Some(path)) => Some(SessionKeySource::File(PathBuf::from(path))),
        (None, None) => None,
    }
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
        s.mark_known("app_id");
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

fn read_queue(t: &toml::Table, errors: &mut Vec<String>) -> QueueSection {
    let mut s = Section::new("queue", t);
    let q = QueueSection {
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
