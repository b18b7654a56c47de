//! `serve`, `migrate`, `check-config` and `check-installations`: the daemon
//! and the checks of its configuration.
//!
//! Invariant: the daemon never starts on a configuration `check-config`
//! would refuse; both run the same file and environment checks.

use std::path::Path;
use std::sync::Arc;

use clap::Args;

use super::{Failure, OrFail, invalid_configuration, load_config};
use crate::config::{Config, Database};
use crate::{daemon, db};

#[derive(Debug, Args)]
pub(super) struct CheckConfigArgs {
    #[command(flatten)]
    config: super::ConfigArg,
    /// Also ask GitHub (with the App) whether each GitHub source's wiki
    /// mapping keeps to the audience rule
    #[arg(long)]
    github: bool,
}

pub(super) async fn check_config(args: CheckConfigArgs) -> Result<(), Failure> {
    let config = load_config(&args.config.config)?;
    config.check_environment().map_err(invalid_configuration)?;
    let missing = config.missing_local_repositories();
    if !missing.is_empty() {
        return Err(invalid_configuration(missing.join("\n")));
    }
    if args.github {
        check_audiences(&config).await?;
    }
    crate::outln!("ok");
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
    let forge = crate::forge::github::GitHubForge::from_config(gh)
        .await
        .map_err(|e| match e {
            crate::forge::github::SetupError::KeyUnreadable(_) => Failure::usage(e.to_string()),
            crate::forge::github::SetupError::KeyInvalid(reason) => Failure::usage(reason),
        })?;
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
        return Err(invalid_configuration(wrong.join("\n")));
    }
    if !unknown.is_empty() {
        return Err(Failure::runtime(unknown.join("\n")));
    }
    Ok(())
}

pub(super) async fn serve(path: &Path) -> Result<(), Failure> {
    // Before anything secret is read: the daemon's memory and /proc entries
    // (environ, mem, fd) stay closed to other processes of its user.
    crate::sandbox::make_non_dumpable().map_err(|e| {
        Failure::runtime(format!(
            "cannot make the daemon non-dumpable (prctl PR_SET_DUMPABLE): {e}"
        ))
    })?;
    let config = load_config(path)?;
    config.check_environment().map_err(invalid_configuration)?;
    for problem in config.missing_local_repositories() {
        tracing::error!(%problem, "a local source cannot work until this is fixed; its jobs fail");
    }
    if let Database::Postgres(pg) = &config.database {
        // Reachable and migrated, or exit 2 saying why (the daemon's own
        // start would only say it as a runtime failure).
        migrated_postgres(pg, &config.server.node_id).await?;
    }
    let config = Arc::new(config);
    daemon::run(
        config,
        daemon::Handler::Runner {
            config_path: path.to_path_buf(),
        },
        daemon::shutdown_signal(),
    )
    .await
    .or_runtime()
}

pub(super) async fn migrate(path: &Path) -> Result<(), Failure> {
    let config = load_config(path)?;
    let pending = match &config.database {
        Database::Sqlite => {
            let pool = db::open(&config.server.data_dir).await.or_runtime()?;
            let pending = db::migrations_pending(&pool).await.or_runtime()?;
            db::migrate(&pool).await.or_runtime()?;
            pending
        }
        Database::Postgres(pg) => migrated_postgres(pg, &config.server.node_id).await?.1,
    };
    let what = if pending {
        "applied"
    } else {
        "nothing to apply"
    };
    crate::outln!("migrations up to date ({what})");
    Ok(())
}

/// Connects to the configured PostgreSQL server and applies its migrations;
/// `true` when some were pending. Exit 2 when the server cannot be reached or
/// holds migrations this build does not know (a newer node migrated it).
async fn migrated_postgres(
    pg: &crate::config::Postgres,
    node_id: &str,
) -> Result<(sqlx::PgPool, bool), Failure> {
    let pool = db::connect_postgres(pg, node_id).await.or_usage()?;
    let pending = db::postgres_migrations_pending(&pool).await.or_runtime()?;
    db::migrate_postgres(&pool).await.or_usage()?;
    Ok((pool, pending))
}

pub(super) async fn check_installations(
    path: &Path,
    repositories: &[String],
) -> Result<(), Failure> {
    let config = load_config(path)?;
    let (lines, code) =
        crate::forge::github::check_installations_command(&config, repositories).await;
    for line in &lines {
        crate::outln!("{line}");
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
