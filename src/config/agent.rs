//! `[agent]`: which agent writes the wiki, and the limits on its writes.
//!
//! Invariants: the agent's secrets are referenced by environment variable
//! name, never inlined; `agent.env_allow` never names a variable any `*_env`
//! key of the file names (a secret the daemon holds never reaches the agent).

use std::path::PathBuf;
use std::time::Duration;

use super::rules::{check_url, is_env_name};
use super::section::Section;
use super::{Agent, AgentLimits, DEFAULT_MAX_CHANGED_BYTES};

pub(super) fn read_agent(
    t: &toml::Table,
    errors: &mut Vec<String>,
) -> (Option<Agent>, AgentLimits) {
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
            let max_processes = s.int(
                "max_processes",
                i64::from(crate::sandbox::DEFAULT_MAX_PROCESSES),
                (i64::from(crate::sandbox::MIN_MAX_PROCESSES), 65_536),
                errors,
            ) as u32;
            let max_memory_mb = s.int("max_memory_mb", 4096, (0, 1 << 20), errors) as u64;
            Some(Agent::Command {
                max_processes,
                max_memory_mb,
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

/// Refuses an `agent.env_allow` entry that names a variable some `*_env` key
/// anywhere in the file names (`sources[i].webhook_secret_env`,
/// `database.password_env`, `agent.api_key_env`, and any such key added
/// later): that secret would stay in the environment and reach the agent.
/// Reads the TOML itself, so every section's keys count, whichever reader
/// parsed them.
pub(super) fn check_env_allow(root: &toml::Table, errors: &mut Vec<String>) {
    let Some(allowed) = root
        .get("agent")
        .and_then(|a| a.get("env_allow"))
        .and_then(|v| v.as_array())
    else {
        return;
    };
    let mut secret_keys = Vec::new();
    secret_env_keys(root, "", &mut secret_keys);
    for (i, name) in allowed.iter().enumerate() {
        let Some(name) = name.as_str() else { continue };
        for (key, _) in secret_keys.iter().filter(|(_, var)| var == name) {
            errors.push(format!(
                "agent.env_allow[{i}]: {name} is the secret {key} names; the agent must never be given it: remove {name} from agent.env_allow (give the agent CLI a credential of its own in another variable)"
            ));
        }
    }
}

/// Every string value of a key ending in `_env`, with its key path
/// (`sources[1].webhook_secret_env`), in tables and arrays of tables.
fn secret_env_keys(table: &toml::Table, path: &str, out: &mut Vec<(String, String)>) {
    for (key, value) in table {
        let here = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        match value {
            toml::Value::String(var) if key.ends_with("_env") => out.push((here, var.clone())),
            toml::Value::Table(t) => secret_env_keys(t, &here, out),
            toml::Value::Array(items) => {
                for (n, item) in items.iter().enumerate() {
                    if let toml::Value::Table(t) = item {
                        secret_env_keys(t, &format!("{here}[{n}]"), out);
                    }
                }
            }
            _ => {}
        }
    }
}
