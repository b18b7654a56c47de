//! `teammem agents setup`: wires coding agents to a source's team memory.
//! It prints each host's MCP entry for the `teammem` server (the daemon's
//! `/mcp`, or `teammem mcp` on stdio) and the `AGENTS.md` block telling
//! agents to call `get_context`, or with `--write DIR` merges them into a
//! checkout's files (`formats` generates, `merge` merges, `files` reads and
//! writes inside DIR).
//!
//! Invariants: no token is read or written (an HTTP entry names the variable
//! the host takes it from); the repository must be a configured source; every
//! input and every existing file is checked before anything is written, so a
//! refusal changes nothing; no two written files are one file (a link
//! between hosts' files is refused); a second run over the same checkout
//! writes nothing.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

use clap::{Args, Subcommand, ValueEnum};

use super::{ConfigArg, Failure, load_config, source_names};
use crate::config::{Config, is_loopback_host, is_repository_name};

mod files;
mod formats;
mod json;
mod merge;

use formats::{AGENTS_FILE, Client, Transport};
use merge::Merged;

/// The variable a host reads the API token from unless `--token-env` says.
const DEFAULT_TOKEN_ENV: &str = "TEAMMEM_TOKEN";

#[derive(Debug, Subcommand)]
pub(super) enum AgentsCommand {
    /// Print the MCP configuration of coding agents' hosts and an AGENTS.md
    /// block for one source, or merge them into a checkout (--write)
    Setup(SetupArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ClientArg {
    ClaudeCode,
    Vscode,
    Cursor,
    Codex,
    All,
}

#[derive(Debug, Args)]
pub(super) struct SetupArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// The source repository (owner/name) whose memory the agents read
    #[arg(long)]
    repository: String,
    /// The host to configure
    #[arg(long, value_enum, default_value_t = ClientArg::All)]
    client: ClientArg,
    /// Merge into this checkout's files instead of printing them (running it again changes nothing)
    #[arg(long, value_name = "DIR")]
    write: Option<std::path::PathBuf>,
    /// The daemon's URL, whose /mcp the hosts call (default: server.public_url, else server.listen)
    #[arg(long, value_name = "URL", conflicts_with = "stdio")]
    url: Option<String>,
    /// Have the hosts start `teammem mcp --read-only` with this configuration instead
    #[arg(long)]
    stdio: bool,
    /// The environment variable the hosts read the API token from
    #[arg(long, value_name = "NAME", default_value = DEFAULT_TOKEN_ENV, conflicts_with = "stdio")]
    token_env: String,
}

pub(super) async fn run_agents(command: AgentsCommand) -> Result<(), Failure> {
    match command {
        AgentsCommand::Setup(args) => setup(args),
    }
}

/// One file `setup` prints or merges.
struct Part {
    path: &'static str,
    header: String,
    kind: PartKind,
    /// The command whose output to merge by hand when the file cannot be.
    by_hand: String,
}

enum PartKind {
    Json {
        container: &'static str,
        entry: json::Json,
        document: json::Json,
    },
    Toml(String),
    Marked(String),
}

fn setup(args: SetupArgs) -> Result<(), Failure> {
    if !is_repository_name(&args.repository) {
        return Err(Failure::usage(format!(
            "--repository: expected owner/name, got {:?}",
            args.repository.chars().take(200).collect::<String>()
        )));
    }
    if !args.stdio {
        check_env_name(&args.token_env)?;
    }
    let config = load_config(&args.config.config)?;
    let Some(source) = config.source(&args.repository) else {
        return Err(Failure::usage(format!(
            "--repository: {} is not a source in {} (sources: {}); add a [[sources]] entry for it or name one of those",
            args.repository,
            args.config.config.display(),
            source_names(&config)
        )));
    };
    let repository = source.repository.as_str().to_owned();
    let transport = if args.stdio {
        Transport::stdio(&config_path(&args.config.config)?)
    } else {
        if config.secret_env_names().contains(&args.token_env) {
            return Err(Failure::usage(format!(
                "--token-env: {} holds one of the daemon's own secrets in this configuration; name the variable that will hold an API token (`teammem tokens create`)",
                args.token_env
            )));
        }
        Transport::Http {
            url: mcp_url(&config, args.url.as_deref(), &args.token_env)?,
            token_env: args.token_env.clone(),
        }
    };
    let clients: Vec<Client> = match args.client {
        ClientArg::All => Client::ALL.to_vec(),
        ClientArg::ClaudeCode => vec![Client::ClaudeCode],
        ClientArg::Vscode => vec![Client::Vscode],
        ClientArg::Cursor => vec![Client::Cursor],
        ClientArg::Codex => vec![Client::Codex],
    };
    let parts = parts(&clients, &transport, &repository);
    match &args.write {
        None => {
            print(&parts);
            token_hint(&transport, &repository);
            Ok(())
        }
        Some(dir) => {
            write(dir, &parts)?;
            token_hint(&transport, &repository);
            Ok(())
        }
    }
}

fn parts(clients: &[Client], transport: &Transport, repository: &str) -> Vec<Part> {
    let mut parts: Vec<Part> = clients
        .iter()
        .map(|&client| {
            let kind = match client.json_container() {
                Some(container) => PartKind::Json {
                    container,
                    entry: formats::json_entry(client, transport),
                    document: formats::json_document(client, transport),
                },
                None => PartKind::Toml(formats::codex_table(transport)),
            };
            Part {
                path: client.path(),
                header: format!("{}: {}", client.title(), client.note()),
                kind,
                by_hand: format!(
                    "merge by hand what `teammem agents setup --client {} --repository {repository}` prints",
                    client.flag()
                ),
            }
        })
        .collect();
    parts.push(Part {
        path: AGENTS_FILE,
        header: "for every agent: the block between the markers, replaced in place when present, appended otherwise".into(),
        kind: PartKind::Marked(formats::agents_block(repository)),
        by_hand: String::new(),
    });
    parts
}

/// Prints each file as `==> PATH <== what it is`, then its text.
fn print(parts: &[Part]) {
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            crate::outln!();
        }
        crate::outln!("==> {} <== {}", part.path, part.header);
        let text = match &part.kind {
            PartKind::Json { document, .. } => document.to_pretty(),
            PartKind::Toml(text) | PartKind::Marked(text) => text.clone(),
        };
        crate::outln!("{}", text.trim_end_matches('\n'));
    }
}

/// Merges every part into the checkout: all are read and merged first, and
/// only then is anything written; two parts whose paths name one file are
/// refused.
fn write(dir: &Path, parts: &[Part]) -> Result<(), Failure> {
    let checkout = files::Checkout::open(dir)?;
    let mut planned: Vec<(&Part, String, files::Target, Merged)> = Vec::with_capacity(parts.len());
    for part in parts {
        let shown = checkout.show(part.path);
        let target = checkout.resolve(part.path)?;
        // Each part is merged into what its file holds now, so two parts
        // writing one file would each undo the other's entry.
        if let Some((_, earlier, ..)) = planned.iter().find(|p| p.2.is_same_file(&target)) {
            return Err(Failure::usage(format!(
                "{shown} and {earlier} are the same file (through a symbolic or hard link), which two hosts cannot share: remove the link, or choose one host with --client; nothing was changed"
            )));
        }
        let existing = target.existing.as_deref();
        let merged = match &part.kind {
            PartKind::Json {
                container, entry, ..
            } => merge::json(existing, container, entry.clone(), &part.by_hand),
            PartKind::Toml(table) => merge::toml(existing, table, &part.by_hand),
            PartKind::Marked(block) => merge::marked(existing, block),
        }
        .map_err(|e| Failure::usage(format!("{shown} {e}; nothing was changed")))?;
        planned.push((part, shown, target, merged));
    }
    let mut changed = 0;
    for (part, shown, target, merged) in &planned {
        let verb = match merged {
            Merged::Unchanged => "unchanged",
            Merged::Write(bytes) => {
                checkout.write(target, bytes, shown)?;
                changed += 1;
                if target.existing.is_some() {
                    "updated"
                } else {
                    "created"
                }
            }
        };
        crate::outln!("{verb} {}", part.path);
    }
    if changed == 0 {
        crate::outln!("nothing changed");
    }
    Ok(())
}

fn token_hint(transport: &Transport, repository: &str) {
    if let Transport::Http { token_env, .. } = transport {
        eprintln!(
            "The hosts read the API token from ${token_env} where they start: create one with `teammem tokens create --name NAME --repository {repository}` and export it there; the files never hold it."
        );
    }
}

/// An environment variable name the hosts can expand.
fn check_env_name(name: &str) -> Result<(), Failure> {
    let mut chars = name.chars();
    let good = name.len() <= 128
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if good {
        Ok(())
    } else {
        Err(Failure::usage(format!(
            "--token-env: {:?} is not an environment variable name (letters, digits and _, not starting with a digit), e.g. {DEFAULT_TOKEN_ENV}",
            name.chars().take(200).collect::<String>()
        )))
    }
}

/// The configuration file's absolute path, for `teammem mcp --config`.
fn config_path(path: &Path) -> Result<String, Failure> {
    let absolute = std::fs::canonicalize(path)
        .map_err(|e| Failure::usage(format!("--config {}: {e}", path.display())))?;
    absolute.to_str().map(str::to_owned).ok_or_else(|| {
        Failure::usage(format!(
            "--config {}: the path is not UTF-8, which the hosts' files cannot hold; move the file",
            absolute.display()
        ))
    })
}

/// The daemon's `/mcp` URL: from `--url`, else `server.public_url`, else
/// `server.listen` (an unspecified address becomes loopback).
fn mcp_url(config: &Config, given: Option<&str>, token_env: &str) -> Result<String, Failure> {
    let (base, from) = match (given, &config.server.public_url) {
        (Some(url), _) => (url.to_owned(), "--url"),
        (None, Some(url)) => (url.clone(), "server.public_url"),
        (None, None) => {
            let listen = config.server.listen;
            if listen.port() == 0 {
                return Err(Failure::usage(
                    "server.listen has port 0 (any free port), so the daemon's address is not known here: give it with --url, or use --stdio",
                ));
            }
            let ip = match listen.ip() {
                IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
                ip => ip,
            };
            (
                format!("http://{}", SocketAddr::new(ip, listen.port())),
                "server.listen",
            )
        }
    };
    // The URL is never echoed: a mistaken one may hold a credential.
    let bad = |why: &str| Failure::usage(format!("{from}: {why}"));
    let mut url = reqwest::Url::parse(base.trim()).map_err(|e| {
        bad(&format!(
            "not a URL ({e}); give the daemon's, e.g. https://teammem.example.org"
        ))
    })?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(&format!(
            "the URL holds credentials; give it without them (the hosts send the token from ${token_env})"
        )));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("give the daemon's URL without a query or fragment"));
    }
    match url.scheme() {
        "https" => {}
        "http" if url.host_str().is_some_and(is_loopback_host) => {}
        "http" => {
            return Err(bad(
                "plain http to another host would carry the token in the clear: use https, or a loopback address",
            ));
        }
        _ => {
            return Err(bad(
                "expected an http(s) URL, e.g. https://teammem.example.org",
            ));
        }
    }
    if !url.path().ends_with("/mcp") {
        let path = format!("{}/mcp", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    Ok(url.to_string())
}
