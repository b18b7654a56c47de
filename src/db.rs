//! Database setup: opens `data_dir/teammem.db` (SQLite, the default) or
//! connects to the configured PostgreSQL server, and applies the embedded
//! migrations of that backend. Nothing else lives here (job SQL belongs to
//! `queue/`).
//!
//! Invariants: every SQLite connection runs with WAL journaling,
//! `synchronous=FULL` (a committed job survives a power cut), foreign keys on
//! and a busy timeout, so concurrent writers wait instead of failing; a
//! PostgreSQL password comes only from the environment variable
//! `database.password_env` names, and no error names more of the server than
//! its host, port and database.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Executor, PgConnection, SqliteConnection, SqlitePool};

use crate::config::Postgres;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

/// File name of the database inside the configured `data_dir`.
pub const DATABASE_FILE: &str = "teammem.db";

/// How long a connection waits for another writer before giving up. Writes
/// are short (one job row and one event), so 5 s only runs out when something
/// is badly wrong.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections in the pool. SQLite serialises writers anyway; a few
/// connections let readers (HTTP, metrics) proceed beside the workers.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 8;

/// The SQLite migrations (`migrations/sqlite/`), embedded at compile time.
pub static MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");

/// The PostgreSQL migrations (`migrations/postgres/`), embedded at compile time.
pub static POSTGRES_MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

/// How long connecting to PostgreSQL (or waiting for a pooled connection)
/// may take before the attempt fails. While the database is unreachable a
/// request waits this long, then answers `503` with `Retry-After`.
pub const POSTGRES_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest a readiness probe ([`Pool::readiness`]) waits on the
/// database: well inside the 1 s an orchestrator's probe allows by default,
/// whatever the database does (refuses, resets, or never answers).
pub const READINESS_PROBE_TIMEOUT: Duration = Duration::from_millis(800);

/// What went wrong while opening or migrating the database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(
        "cannot create data directory {path}: {source}; check that the parent exists and is writable"
    )]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "data directory {path} is open to group or others (mode {mode:o}); it holds the database, the session key and job evidence: run chmod 700 {path}"
    )]
    DataDirOpen { path: PathBuf, mode: u32 },
    #[error("data directory {path} is not a directory; point server.data_dir at a directory")]
    DataDirNotDir { path: PathBuf },
    #[error("cannot open database {path}: {source}; check the path and its permissions")]
    Open { path: PathBuf, source: sqlx::Error },
    #[error(
        "cannot apply database migrations: {0}; restore a backup or run a teammem build that knows every applied migration"
    )]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error(
        "cannot connect to the PostgreSQL database at {location}: {source}; check database.url, that the server is up and reachable from this machine, and the password in database.password_env"
    )]
    Connect {
        location: String,
        source: sqlx::Error,
    },
    #[error("database.password_env names {0}, which is not set; set it to the database password")]
    PasswordUnset(String),
    #[error(
        "database.url points at PostgreSQL ({location}); this build migrates a PostgreSQL database (teammem migrate) but keeps its job queue in SQLite only; remove [database] to run from server.data_dir's teammem.db"
    )]
    PostgresNotServed { location: String },
    #[error("database query failed: {0}")]
    Query(#[from] sqlx::Error),
}

/// Refuses a configuration whose `[database]` is PostgreSQL, for the parts
/// of teammem that keep their state in SQLite only.
pub fn require_sqlite(database: &crate::config::Database) -> Result<(), DbError> {
    match database {
        crate::config::Database::Sqlite => Ok(()),
        crate::config::Database::Postgres(pg) => Err(DbError::PostgresNotServed {
            location: pg.location(),
        }),
    }
}

/// The database a deployment keeps its shared state in: the embedded SQLite
/// file (one node) or a PostgreSQL server (any number of nodes). Cheap to
/// clone. Code that runs SQL on it writes the statement once and runs it on
/// either backend through [`on_pool!`]; only where the two dialects differ
/// does it pick per [`Dialect`].
#[derive(Debug, Clone)]
pub enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl From<SqlitePool> for Pool {
    fn from(pool: SqlitePool) -> Self {
        Pool::Sqlite(pool)
    }
}

impl From<PgPool> for Pool {
    fn from(pool: PgPool) -> Self {
        Pool::Postgres(pool)
    }
}

/// One connection of either backend, borrowed for a sequence of statements
/// (inside the caller's transaction when it has one); run SQL on it with
/// [`on_conn!`].
pub enum Conn<'c> {
    Sqlite(&'c mut SqliteConnection),
    Postgres(&'c mut PgConnection),
}

impl<'c> From<&'c mut SqliteConnection> for Conn<'c> {
    fn from(conn: &'c mut SqliteConnection) -> Self {
        Conn::Sqlite(conn)
    }
}

impl<'c> From<&'c mut PgConnection> for Conn<'c> {
    fn from(conn: &'c mut PgConnection) -> Self {
        Conn::Postgres(conn)
    }
}

/// Which SQL dialect a statement runs in, for the few statements whose text
/// differs between SQLite and PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The statement text for this dialect.
    pub const fn pick(self, sqlite: &'static str, postgres: &'static str) -> &'static str {
        match self {
            Dialect::Sqlite => sqlite,
            Dialect::Postgres => postgres,
        }
    }
}

/// Runs `$body` with `$pool` bound to the backend's own pool type (`&SqlitePool`
/// or `&PgPool`): the body is compiled once per backend, so one statement text
/// serves both. `|$pool, $dialect|` also binds the [`Dialect`].
macro_rules! on_pool {
    ($pool:expr, |$p:ident| $body:expr) => {
        match $pool {
            $crate::db::Pool::Sqlite(backend) => {
                let $p = backend;
                $body
            }
            $crate::db::Pool::Postgres(backend) => {
                let $p = backend;
                $body
            }
        }
    };
    ($pool:expr, |$p:ident, $d:ident| $body:expr) => {
        match $pool {
            $crate::db::Pool::Sqlite(backend) => {
                let $p = backend;
                let $d = $crate::db::Dialect::Sqlite;
                $body
            }
            $crate::db::Pool::Postgres(backend) => {
                let $p = backend;
                let $d = $crate::db::Dialect::Postgres;
                $body
            }
        }
    };
}
pub(crate) use on_pool;

/// [`on_pool!`] for a `&mut Conn`: `$c` is the backend's `&mut` connection.
macro_rules! on_conn {
    ($conn:expr, |$c:ident| $body:expr) => {
        match $conn {
            $crate::db::Conn::Sqlite(backend) => {
                let $c = &mut **backend;
                $body
            }
            $crate::db::Conn::Postgres(backend) => {
                let $c = &mut **backend;
                $body
            }
        }
    };
    ($conn:expr, |$c:ident, $d:ident| $body:expr) => {
        match $conn {
            $crate::db::Conn::Sqlite(backend) => {
                let $c = &mut **backend;
                let $d = $crate::db::Dialect::Sqlite;
                $body
            }
            $crate::db::Conn::Postgres(backend) => {
                let $c = &mut **backend;
                let $d = $crate::db::Dialect::Postgres;
                $body
            }
        }
    };
}
pub(crate) use on_conn;

impl Pool {
    /// The dialect of this pool's backend.
    pub fn dialect(&self) -> Dialect {
        match self {
            Pool::Sqlite(_) => Dialect::Sqlite,
            Pool::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The SQLite pool, for the parts that exist only there (`teammem db
    /// copy`'s source, the SQLite-only tests).
    pub fn as_sqlite(&self) -> Option<&SqlitePool> {
        match self {
            Pool::Sqlite(pool) => Some(pool),
            Pool::Postgres(_) => None,
        }
    }

    /// Closes every connection; later queries fail.
    pub async fn close(&self) {
        on_pool!(self, |pool| pool.close().await)
    }

    /// Applies every embedded migration of this backend not yet applied.
    pub async fn migrate(&self) -> Result<(), DbError> {
        match self {
            Pool::Sqlite(pool) => migrate(pool).await,
            Pool::Postgres(pool) => migrate_postgres(pool).await,
        }
    }

    /// True while some embedded migration has not been applied.
    pub async fn migrations_pending(&self) -> Result<bool, DbError> {
        match self {
            Pool::Sqlite(pool) => migrations_pending(pool).await,
            Pool::Postgres(pool) => postgres_migrations_pending(pool).await,
        }
    }

    /// Whether the database answers with every migration applied, asked
    /// within `limit` (a pooled connection's wait is otherwise
    /// [`POSTGRES_CONNECT_TIMEOUT`]): `Err` names the cause in a few words,
    /// never the server's address or a statement.
    pub async fn readiness(&self, limit: Duration) -> Result<(), String> {
        match tokio::time::timeout(limit, self.migrations_pending()).await {
            Ok(Ok(false)) => Ok(()),
            Ok(Ok(true)) => Err("database migrations are pending; run `teammem migrate`".into()),
            // A statement the server refused (it answered); anything else
            // on the way (a reset, a connection cut mid-message) is the
            // database out of reach.
            Ok(Err(DbError::Query(e @ sqlx::Error::Database(_)))) if !is_unavailable(&e) => {
                Err("database refused the readiness query".into())
            }
            Ok(Err(DbError::Query(e))) => {
                Err(format!("database unreachable: {}", unavailable_cause(&e)))
            }
            Ok(Err(_)) => Err("database refused the readiness query".into()),
            Err(_) => Err(format!(
                "database unreachable: no answer within {} ms",
                limit.as_millis()
            )),
        }
    }
}

/// A few words on why the database is unavailable, from a closed set (an
/// unauthenticated `/readyz` says no more).
fn unavailable_cause(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::PoolTimedOut => "no connection could be made".into(),
        sqlx::Error::PoolClosed => "the pool is closed".into(),
        sqlx::Error::Io(e) => e.kind().to_string(),
        sqlx::Error::Tls(_) => "TLS failed".into(),
        sqlx::Error::Database(_) => "the server is shutting down or full".into(),
        _ => "the connection was lost".into(),
    }
}

/// The database a configuration names, opened (SQLite) or connected
/// (PostgreSQL, see [`connect_postgres`]) and migrated.
pub async fn open_configured(config: &crate::config::Config) -> Result<Pool, DbError> {
    let pool: Pool = match &config.database {
        crate::config::Database::Sqlite => open(&config.server.data_dir).await?.into(),
        crate::config::Database::Postgres(pg) => {
            connect_postgres(pg, &config.server.node_id).await?.into()
        }
    };
    pool.migrate().await?;
    Ok(pool)
}

/// Seconds a client is asked to wait (`Retry-After`) when the database cannot
/// be reached.
pub const UNAVAILABLE_RETRY_AFTER: u64 = 5;

/// True when `error` says the database could not be reached or went away
/// (no connection, the server shutting down or refusing connections), as
/// opposed to a statement it refused: the same request may succeed later.
pub fn is_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => true,
        // PostgreSQL: connection exceptions (class 08), the server shutting
        // down or starting (57P01-57P03), too many connections.
        sqlx::Error::Database(refusal) => refusal.code().is_some_and(|code| {
            code.starts_with("08") || matches!(&*code, "57P01" | "57P02" | "57P03" | "53300")
        }),
        _ => false,
    }
}

/// The database path for a data directory.
pub fn database_path(data_dir: &Path) -> PathBuf {
    data_dir.join(DATABASE_FILE)
}

/// Opens (creating if missing) `data_dir/teammem.db` with the pragmas above.
/// Does not migrate: call [`migrate`] (the daemon does at start-up).
pub async fn open(data_dir: &Path) -> Result<SqlitePool, DbError> {
    open_with(data_dir, DEFAULT_MAX_CONNECTIONS).await
}

/// [`open`] with an explicit pool size (benchmarks, tests of contention).
pub async fn open_with(data_dir: &Path, max_connections: u32) -> Result<SqlitePool, DbError> {
    prepare_data_dir(data_dir)?;
    let path = database_path(data_dir);
    let options = SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .foreign_keys(true)
        .busy_timeout(BUSY_TIMEOUT);
    SqlitePoolOptions::new()
        .max_connections(max_connections.max(1))
        .connect_with(options)
        .await
        .map_err(|source| DbError::Open { path, source })
}

/// Creates `data_dir` as 0700 when it is missing; refuses an existing one
/// that group or others may enter (its database holds API token hashes and
/// its job directories private evidence), and changes nothing then.
pub fn prepare_data_dir(data_dir: &Path) -> Result<(), DbError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let path = data_dir.to_path_buf();
    match std::fs::metadata(data_dir) {
        Ok(meta) if !meta.is_dir() => Err(DbError::DataDirNotDir { path }),
        Ok(meta) => {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                Err(DbError::DataDirOpen { path, mode })
            } else {
                Ok(())
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(data_dir)
            // The umask may have taken bits the owner needs.
            .and_then(|()| {
                std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(0o700))
            })
            .map_err(|source| DbError::CreateDir { path, source }),
        Err(source) => Err(DbError::CreateDir { path, source }),
    }
}

/// Applies every embedded migration not yet applied. Safe to run on every
/// start; concurrent runs are serialised by sqlx's migration lock.
pub async fn migrate(pool: &SqlitePool) -> Result<(), DbError> {
    MIGRATOR.run(pool).await?;
    Ok(())
}

/// True while some embedded migration has not been applied successfully
/// (`/readyz` is not ready until this is false).
pub async fn migrations_pending(pool: &SqlitePool) -> Result<bool, DbError> {
    let table_exists: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations')",
    )
    .fetch_one(pool)
    .await?;
    if !table_exists {
        return Ok(MIGRATOR.iter().next().is_some());
    }
    let applied: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success = 1")
            .fetch_all(pool)
            .await?;
    Ok(MIGRATOR
        .iter()
        .filter(|migration| !migration.migration_type.is_down_migration())
        .any(|migration| !applied.contains(&migration.version)))
}

/// A pool on the configured PostgreSQL server; connects once before it
/// answers, so an unreachable server is an error here, not at the first query.
/// Does not migrate: call [`migrate_postgres`].
pub async fn connect_postgres(pg: &Postgres, node_id: &str) -> Result<PgPool, DbError> {
    let connect_error = |source| DbError::Connect {
        location: pg.location(),
        source,
    };
    let mut options: PgConnectOptions = pg.url.parse().map_err(connect_error)?;
    if crate::config::plain_on_this_machine(&pg.url, &options) {
        options = options.ssl_mode(sqlx::postgres::PgSslMode::Disable);
    }
    options = options.application_name(&format!("teammem {node_id}"));
    if let Some(name) = &pg.password_env {
        let secret = crate::secrets::env_secret(name)
            .filter(|secret| !secret.is_empty())
            .ok_or_else(|| DbError::PasswordUnset(name.clone()))?;
        let password = secret
            .expose_str()
            .ok_or_else(|| DbError::PasswordUnset(name.clone()))?;
        options = options.password(password);
    }
    PgPoolOptions::new()
        .max_connections(pg.max_connections.max(1))
        .acquire_timeout(POSTGRES_CONNECT_TIMEOUT)
        .connect_with(options)
        .await
        .map_err(connect_error)
}

/// Applies every PostgreSQL migration not yet applied; nodes starting at once
/// are serialised by the migrator's advisory lock. A database holding a
/// migration this build does not know (a newer node migrated it) is refused.
pub async fn migrate_postgres(pool: &PgPool) -> Result<(), DbError> {
    POSTGRES_MIGRATOR.run(pool).await?;
    Ok(())
}

/// [`migrations_pending`] for PostgreSQL.
pub async fn postgres_migrations_pending(pool: &PgPool) -> Result<bool, DbError> {
    let table_exists: bool =
        sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
            .fetch_one(pool)
            .await?;
    if !table_exists {
        return Ok(POSTGRES_MIGRATOR.iter().next().is_some());
    }
    let applied: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(pool)
            .await?;
    Ok(POSTGRES_MIGRATOR
        .iter()
        .filter(|migration| !migration.migration_type.is_down_migration())
        .any(|migration| !applied.contains(&migration.version)))
}

/// Round-trips one trivial query on PostgreSQL.
pub async fn ping_postgres(pool: &PgPool) -> Result<(), DbError> {
    pool.execute("SELECT 1").await?;
    Ok(())
}

/// Round-trips one trivial query: the database is reachable and readable.
pub async fn ping(pool: &SqlitePool) -> Result<(), DbError> {
    sqlx::query("SELECT 1").execute(pool).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_new_data_dir_is_private_and_an_open_one_is_refused_untouched() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let new = root.path().join("a/data");
        open(&new).await.unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&new), 0o700);

        for loose in [0o750, 0o705, 0o777] {
            let dir = root.path().join(format!("loose{loose:o}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(loose)).unwrap();
            let err = open(&dir).await.unwrap_err().to_string();
            assert!(
                err.contains(&format!("chmod 700 {}", dir.display())),
                "{err}"
            );
            assert_eq!(mode(&dir), loose, "left as it was");
            assert!(!database_path(&dir).exists(), "no database created");
        }
        let file = root.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(
            open(&file)
                .await
                .unwrap_err()
                .to_string()
                .contains("not a directory")
        );
    }

    #[tokio::test]
    async fn open_migrate_and_report_pending() {
        let dir = tempfile::tempdir().unwrap();
        let pool = open(&dir.path().join("nested")).await.unwrap();
        ping(&pool).await.unwrap();
        assert!(migrations_pending(&pool).await.unwrap());
        migrate(&pool).await.unwrap();
        assert!(!migrations_pending(&pool).await.unwrap());
        migrate(&pool).await.unwrap(); // idempotent

        let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(journal, "wal");
        let synchronous: i64 = sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(synchronous, 2, "synchronous=FULL");
        let foreign_keys: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(foreign_keys, 1);
        assert!(dir.path().join("nested").join(DATABASE_FILE).exists());
    }
}
