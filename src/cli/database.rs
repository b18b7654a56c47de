//! `db copy`: move a deployment from its SQLite database to PostgreSQL.
//!
//! Invariant: nothing is written unless the source is a SQLite
//! configuration, the target a PostgreSQL one, and the target is empty.

use std::path::PathBuf;

use clap::Subcommand;

use super::{Failure, OrFail, load_config};
use crate::config::Database;
use crate::db;

#[derive(Debug, Subcommand)]
pub(super) enum DbCommand {
    /// Copy jobs, events, deliveries, cursors and tokens from the SQLite
    /// database of one configuration into the empty PostgreSQL database of
    /// another. Stop the daemon first: writes after the copy stay behind.
    Copy {
        /// The configuration whose SQLite database is read
        #[arg(long)]
        from_config: PathBuf,
        /// The configuration whose `[database]` PostgreSQL server is written
        #[arg(long)]
        to_config: PathBuf,
    },
}

pub(super) async fn run_db(command: DbCommand) -> Result<(), Failure> {
    let DbCommand::Copy {
        from_config,
        to_config,
    } = command;
    let from = load_config(&from_config)?;
    let to = load_config(&to_config)?;
    if !matches!(from.database, Database::Sqlite) {
        return Err(Failure::usage(format!(
            "{} uses PostgreSQL; --from-config names the configuration whose SQLite database is copied",
            from_config.display()
        )));
    }
    let Database::Postgres(pg) = &to.database else {
        return Err(Failure::usage(format!(
            "{} has no PostgreSQL [database]; --to-config names the configuration of the new deployment",
            to_config.display()
        )));
    };
    let path = db::database_path(&from.server.data_dir);
    if !path.exists() {
        return Err(Failure::usage(format!(
            "{} does not exist; --from-config must name the configuration of a deployment that has run",
            path.display()
        )));
    }
    let sqlite = db::open(&from.server.data_dir).await.or_runtime()?;
    db::migrate(&sqlite).await.or_runtime()?;
    let postgres = db::connect_postgres(pg, &to.server.node_id)
        .await
        .or_usage()?;
    db::migrate_postgres(&postgres).await.or_usage()?;
    let copied = crate::queue::copy::sqlite_to_postgres(&sqlite, &postgres)
        .await
        .or_runtime()?;
    for (table, rows) in copied.0 {
        crate::outln!("{table}: {rows} row(s) copied");
    }
    crate::outln!(
        "copied {} into the PostgreSQL database of {}",
        path.display(),
        to_config.display()
    );
    Ok(())
}
