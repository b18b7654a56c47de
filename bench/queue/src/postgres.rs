//! Phase "PostgreSQL": teammem's queue and apalis-postgres on one fresh
//! database each of the same server, one after the other in the same run.
//!
//! Invariant: the same workload as the SQLite phase (the same enqueue and
//! worker code for teammem, the same no-op handler for apalis) and the same
//! pool size (workers + 2) on both sides; only the backend differs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use apalis::prelude::{TaskSink, WorkerBuilder};
use apalis_postgres::PostgresStorage;
use sqlx::Connection;
use sqlx::postgres::{PgPool, PgPoolOptions};
use teammem::queue::{Queue, QueueSettings, SystemClock};

use crate::{
    Finished, Measured, Options, enqueue_jobs, no_op_job, print_ratio, process_jobs, report,
};

static DATABASES: AtomicU64 = AtomicU64::new(0);

/// `url` with its database (the path) replaced by `database`.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |at| at + 3);
    let base = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{database}?{query}"),
        None => format!("{base}/{database}"),
    }
}

/// Creates a new, empty database named `<prefix>_<pid>_<n>` on the server of
/// `url` and returns its URL and name.
pub async fn fresh_database(url: &str, prefix: &str) -> (String, String) {
    let n = DATABASES.fetch_add(1, Ordering::Relaxed) + 1;
    let name = format!("{prefix}_{}_{n}", std::process::id());
    let mut admin = sqlx::PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connect to the PostgreSQL server at --postgres: {e}"));
    // The name is a fixed prefix and numbers: nothing to escape.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .expect("CREATE DATABASE");
    admin.close().await.expect("close the admin connection");
    (with_database(url, &name), name)
}

pub async fn pool(url: &str, connections: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(connections)
        .connect(url)
        .await
        .expect("connect to the bench database")
}

/// Prints the server's version and the settings that decide commit cost.
async fn print_server(url: &str) {
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connect to the PostgreSQL server at --postgres: {e}"));
    let version: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(&mut conn)
        .await
        .expect("server_version");
    let mut settings = Vec::new();
    for name in [
        "fsync",
        "synchronous_commit",
        "full_page_writes",
        "wal_sync_method",
        "shared_buffers",
        "max_connections",
    ] {
        let value: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SHOW {name}")))
            .fetch_one(&mut conn)
            .await
            .expect("SHOW setting");
        settings.push(format!("{name}={value}"));
    }
    println!(
        "\n== PostgreSQL {version} on loopback TCP, one fresh database each ({}) ==",
        settings.join(", ")
    );
}

pub async fn run_phase(options: &Options, url: &str) {
    print_server(url).await;
    let before = wal_syncs(url).await;
    let (teammem, database) = bench_teammem(options, url).await;
    report("teammem", options.jobs, &teammem);
    let after = wal_syncs(url).await;
    print_costs(url, &database, options.jobs, after - before).await;
    let (apalis, database) = bench_apalis(options, url).await;
    report("apalis-postgres", options.jobs, &apalis);
    print_costs(url, &database, options.jobs, wal_syncs(url).await - after).await;
    print_ratio("apalis-postgres", &teammem, &apalis);
}

/// The server's WAL flushes so far (`pg_stat_wal.wal_sync`, every database).
async fn wal_syncs(url: &str) -> i64 {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    sqlx::query_scalar("SELECT wal_sync FROM pg_stat_wal")
        .fetch_one(&mut conn)
        .await
        .expect("pg_stat_wal")
}

/// Where the time goes on a server whose every commit waits for a WAL flush:
/// commits and flushes per job (the side's pool is closed by now, so its
/// backends have reported their statistics).
async fn print_costs(url: &str, database: &str, jobs: usize, syncs: i64) {
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let commits: i64 =
        sqlx::query_scalar("SELECT xact_commit FROM pg_stat_database WHERE datname = $1")
            .bind(database)
            .fetch_one(&mut conn)
            .await
            .expect("pg_stat_database");
    println!(
        "{:<14} {:.2} commits per job (setup included), {:.2} WAL flushes per job",
        "",
        commits as f64 / jobs as f64,
        syncs as f64 / jobs as f64,
    );
}

/// The side's figures and the name of its database.
async fn bench_teammem(options: &Options, url: &str) -> (Measured, String) {
    let (url, database) = fresh_database(url, "bench_teammem").await;
    let pool = pool(&url, options.workers as u32 + 2).await;
    teammem::db::migrate_postgres(&pool).await.expect("migrate");
    let queue = Queue::new(pool, Arc::new(SystemClock), QueueSettings::default());
    let enqueue = enqueue_jobs(&queue, (0..options.jobs).collect(), options.destinations).await;
    let (process, claim_latencies) =
        process_jobs(&queue, "", options.workers, Finished::Counted(options.jobs)).await;
    assert_eq!(
        claim_latencies.len(),
        options.jobs,
        "every job claimed once"
    );
    queue.pool().close().await;
    settle().await;
    let measured = Measured {
        enqueue,
        process,
        claim_latencies,
    };
    (measured, database)
}

/// Gives the backends of a closed pool a moment to exit (and so report their
/// statistics) before anyone reads them.
async fn settle() {
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
}

async fn bench_apalis(options: &Options, url: &str) -> (Measured, String) {
    let (url, database) = fresh_database(url, "bench_apalis").await;
    let pool = pool(&url, options.workers as u32 + 2).await;
    PostgresStorage::setup(&pool).await.expect("apalis setup");
    let mut backend: PostgresStorage<u64> = PostgresStorage::new(&pool);

    let started = Instant::now();
    for n in 0..options.jobs as u64 {
        backend.push(n).await.expect("apalis push");
    }
    let enqueue = started.elapsed();

    let done = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(tokio::sync::Notify::new());
    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..options.workers {
        let done = done.clone();
        let finished = finished.clone();
        let total = options.jobs;
        let worker = WorkerBuilder::new(format!("apalis-worker-{w}"))
            .backend(backend.clone())
            .data((done, finished, total))
            .build(no_op_job);
        workers.push(tokio::spawn(async move {
            let _ = worker.run().await;
        }));
    }
    finished.notified().await;
    let process = started.elapsed();
    for worker in workers {
        worker.abort();
    }
    pool.close().await;
    settle().await;
    let measured = Measured {
        enqueue,
        process,
        claim_latencies: Vec::new(),
    };
    (measured, database)
}
