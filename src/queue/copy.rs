//! `teammem db copy`: a deployment's whole database moved from SQLite to
//! PostgreSQL — jobs (with their ids), identities, deliveries, events, source
//! cursors, API tokens and backfills — in one PostgreSQL transaction.
//!
//! Invariants: the target must hold no row in any of these tables, else
//! nothing is written; the source is read inside one SQLite write
//! transaction, so the copy is one consistent moment and no writer can change
//! the source while it runs; ids are kept (they are shown to people and
//! stored in deliveries and MCP tasks) and PostgreSQL's identity sequences are
//! moved past them, so new ids never collide.

use sqlx::postgres::PgArguments;
// Every statement here is built from the table names and columns of
// `TABLES`, constants of this file: `AssertSqlSafe` is literally true.
use sqlx::{AssertSqlSafe, PgPool, Row, SqlitePool};

/// A column's type on both sides.
#[derive(Clone, Copy)]
enum Kind {
    Int,
    Text,
}

struct Table {
    name: &'static str,
    columns: &'static [(&'static str, Kind)],
    /// `GENERATED ALWAYS AS IDENTITY` id on PostgreSQL.
    identity: bool,
}

use Kind::{Int, Text};

/// In foreign-key order.
const TABLES: &[Table] = &[
    Table {
        name: "jobs",
        columns: &[
            ("id", Int),
            ("source", Text),
            ("destination", Text),
            ("origin", Text),
            ("kind", Text),
            ("push_before", Text),
            ("push_after", Text),
            ("run_id", Int),
            ("run_attempt", Int),
            ("pull_number", Int),
            ("merge_sha", Text),
            ("state", Text),
            ("attempts", Int),
            ("max_attempts", Int),
            ("run_after", Int),
            ("created_at", Int),
            ("updated_at", Int),
            ("started_at", Int),
            ("finished_at", Int),
            ("last_error", Text),
            ("receipt", Text),
            ("coalesced_count", Int),
            ("actor", Text),
            ("lease_owner", Text),
            ("lease_token", Text),
            ("lease_until", Int),
        ],
        identity: true,
    },
    Table {
        name: "job_identities",
        columns: &[("identity", Text), ("job_id", Int), ("created_at", Int)],
        identity: false,
    },
    Table {
        name: "deliveries",
        columns: &[("delivery_id", Text), ("job_id", Int), ("received_at", Int)],
        identity: false,
    },
    Table {
        name: "job_events",
        columns: &[
            ("id", Int),
            ("job_id", Int),
            ("at", Int),
            ("actor", Text),
            ("event", Text),
            ("detail", Text),
        ],
        identity: true,
    },
    Table {
        name: "source_cursors",
        columns: &[
            ("source", Text),
            ("sha", Text),
            ("job_id", Int),
            ("updated_at", Int),
        ],
        identity: false,
    },
    Table {
        name: "api_tokens",
        columns: &[
            ("name", Text),
            ("token_sha256", Text),
            ("repositories", Text),
            ("created_at", Text),
            ("revoked_at", Text),
        ],
        identity: false,
    },
    Table {
        name: "backfills",
        columns: &[
            ("id", Int),
            ("source", Text),
            ("spec", Text),
            ("first_sha", Text),
            ("last_sha", Text),
            ("ranges", Int),
            ("actor", Text),
            ("created_at", Int),
        ],
        identity: true,
    },
    Table {
        name: "backfill_ranges",
        columns: &[("job_id", Int), ("backfill_id", Int), ("position", Int)],
        identity: false,
    },
];

/// What a copy moved: rows per table, in [`TABLES`] order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied(pub Vec<(&'static str, u64)>);

/// Why a copy wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error(
        "the target database already holds {rows} row(s) in {table}; copy only into a freshly migrated, empty database (nothing was written)"
    )]
    TargetNotEmpty { table: &'static str, rows: i64 },
    #[error("reading the SQLite database failed: {0}; nothing was written")]
    Source(sqlx::Error),
    #[error(
        "writing the PostgreSQL database failed: {0}; nothing was written (the copy is one transaction)"
    )]
    Target(sqlx::Error),
}

/// Copies every table of `sqlite` into the empty `postgres`.
pub async fn sqlite_to_postgres(
    sqlite: &SqlitePool,
    postgres: &PgPool,
) -> Result<Copied, CopyError> {
    let mut target = postgres.begin().await.map_err(CopyError::Target)?;
    for table in TABLES {
        let rows: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT count(*) FROM {}",
            table.name
        )))
        .fetch_one(&mut *target)
        .await
        .map_err(CopyError::Target)?;
        if rows > 0 {
            return Err(CopyError::TargetNotEmpty {
                table: table.name,
                rows,
            });
        }
    }
    let mut source = sqlite.acquire().await.map_err(CopyError::Source)?;
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut *source)
        .await
        .map_err(CopyError::Source)?;
    let copied = copy_tables(&mut source, &mut target).await;
    // Only read: ending the source's transaction either way changes nothing.
    let _ = sqlx::query("ROLLBACK").execute(&mut *source).await;
    let copied = copied?;
    target.commit().await.map_err(CopyError::Target)?;
    Ok(copied)
}

async fn copy_tables(
    source: &mut sqlx::SqliteConnection,
    target: &mut sqlx::PgConnection,
) -> Result<Copied, CopyError> {
    let mut copied = Vec::new();
    for table in TABLES {
        let names: Vec<&str> = table.columns.iter().map(|(name, _)| *name).collect();
        let select = format!(
            "SELECT {} FROM {} ORDER BY rowid",
            names.join(", "),
            table.name
        );
        let rows = sqlx::query(AssertSqlSafe(select))
            .fetch_all(&mut *source)
            .await
            .map_err(CopyError::Source)?;
        let placeholders: Vec<String> = (1..=names.len()).map(|n| format!("${n}")).collect();
        let insert = format!(
            "INSERT INTO {} ({}) {}VALUES ({})",
            table.name,
            names.join(", "),
            if table.identity {
                "OVERRIDING SYSTEM VALUE "
            } else {
                ""
            },
            placeholders.join(", ")
        );
        for row in &rows {
            let mut query = sqlx::query(AssertSqlSafe(insert.clone()));
            for (index, (_, kind)) in table.columns.iter().enumerate() {
                query = bind(query, row, index, *kind)?;
            }
            query
                .execute(&mut *target)
                .await
                .map_err(CopyError::Target)?;
        }
        if table.identity {
            sqlx::query(AssertSqlSafe(format!(
                "SELECT setval(pg_get_serial_sequence('{0}', 'id'), COALESCE((SELECT max(id) FROM {0}), 0) + 1, false)",
                table.name
            )))
            .execute(&mut *target)
            .await
            .map_err(CopyError::Target)?;
        }
        copied.push((table.name, rows.len() as u64));
    }
    Ok(Copied(copied))
}

fn bind<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, PgArguments>,
    row: &sqlx::sqlite::SqliteRow,
    index: usize,
    kind: Kind,
) -> Result<sqlx::query::Query<'q, sqlx::Postgres, PgArguments>, CopyError> {
    Ok(match kind {
        Int => query.bind(
            row.try_get::<Option<i64>, _>(index)
                .map_err(CopyError::Source)?,
        ),
        Text => query.bind(
            row.try_get::<Option<String>, _>(index)
                .map_err(CopyError::Source)?,
        ),
    })
}
