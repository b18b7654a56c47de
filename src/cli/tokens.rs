//! `tokens create|list|revoke`: the maintainer API tokens.
//!
//! Invariant: a token is printed once, when it is created, and never again;
//! `list` never shows one.

use clap::Subcommand;

use super::{ConfigArg, Failure, OrFail, open_db, source_names};
use crate::tokens;

#[derive(Debug, Subcommand)]
pub(super) enum TokensCommand {
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

pub(super) async fn run_tokens(command: TokensCommand) -> Result<(), Failure> {
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
                .or_usage()?;
            let scope = if repositories.is_empty() {
                "all sources".to_string()
            } else {
                repositories.join(", ")
            };
            crate::outln!("created token {name:?} for {scope}; it is shown once, store it now:");
            crate::outln!("{}", token.expose());
            Ok(())
        }
        TokensCommand::List { config } => {
            let (_, pool) = open_db(&config.config).await?;
            let list = tokens::list(&pool).await.or_runtime()?;
            if list.is_empty() {
                crate::outln!("no tokens; create one with `teammem tokens create --name NAME`");
            }
            for t in list {
                let scope = match &t.repositories {
                    Some(repositories) if repositories.is_empty() => "all sources".to_string(),
                    Some(repositories) => repositories.join(", "),
                    // Such a token authenticates no one (see `tokens`).
                    None => "unreadable scope: grants nothing; revoke it and create it again"
                        .to_string(),
                };
                let state = if t.revoked { "revoked" } else { "active" };
                crate::outln!("{}\t{}\t{}\t{}", t.name, state, scope, t.created_at);
            }
            Ok(())
        }
        TokensCommand::Revoke { config, name } => {
            let (_, pool) = open_db(&config.config).await?;
            tokens::revoke(&pool, &name).await.or_usage()?;
            crate::outln!("revoked {name}");
            Ok(())
        }
    }
}
