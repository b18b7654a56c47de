//! `mcp` and `wiki`: the MCP servers on stdin/stdout (the agent's read tools,
//! the job-bound writer, the relay to a job's writer) and an operator's
//! direct access to a source's wiki.
//!
//! Invariant: a wiki token is never taken as an argument; the operator's comes
//! from `TEAMMEM_WIKI_TOKEN`, the writer's binding from `TEAMMEM_*` variables.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{Failure, load_config, print_json, source_names};
use crate::mcp;

#[derive(Debug, Args)]
pub(super) struct McpArgs {
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
    #[arg(long, value_name = "SOCKET", requires = "capability", conflicts_with_all = ["wiki_writer", "read_only", "config"])]
    connect: Option<PathBuf>,
    /// With --connect: the file holding the job's capability, which the
    /// writer requires before it answers (named by the same configuration)
    #[arg(long, value_name = "FILE", requires = "connect")]
    capability: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(super) struct WikiArgs {
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
pub(super) enum WikiCommand {
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

pub(super) async fn run_mcp(args: McpArgs) -> Result<(), Failure> {
    if let (Some(socket), Some(capability)) = (&args.connect, &args.capability) {
        // Exit here: tokio's stdin reader may still be blocked in a read the
        // runtime would wait for on the way out.
        match crate::relay::relay(socket, capability).await {
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

/// Reads a JSON argument given inline or as `@path`.
fn json_arg(flag: &str, value: &str) -> Result<serde_json::Value, Failure> {
    let text = match value.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| Failure::usage(format!("{flag}: cannot read {path}: {e}")))?,
        None => value.to_string(),
    };
    serde_json::from_str(&text).map_err(|e| Failure::usage(format!("{flag}: not valid JSON: {e}")))
}

pub(super) async fn run_wiki(args: WikiArgs) -> Result<(), Failure> {
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
