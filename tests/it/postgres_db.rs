//! `[database]` on a real PostgreSQL server: `teammem migrate` builds the
//! schema once, the schema itself keeps one running job per wiki, a database
//! migrated by a newer build is refused, and an unreachable server stops the
//! daemon with exit 2 naming only where it is.

use std::process::{Command, Output};

use sqlx::Connection;

use crate::harness::daemon::{BIN, DASHBOARD_KEY, DASHBOARD_KEY_ENV, DASHBOARD_KEY_TOML, Setup};
use crate::harness::postgres;

/// A PostgreSQL node's configuration: its dashboard key (which `serve`
/// needs) and the database; keys appended after it are `[database]`'s.
fn database(url: &str) -> String {
    format!("{DASHBOARD_KEY_TOML}[database]\nurl = \"{url}\"\n")
}

fn run(setup: &Setup, args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--config")
        .arg(&setup.config)
        .env("TEAMMEM_LOG", "warn")
        .env(DASHBOARD_KEY_ENV, DASHBOARD_KEY)
        .envs(envs.iter().copied())
        .output()
        .expect("run teammem")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn migrate_builds_the_schema_once_and_it_keeps_one_running_job_per_wiki() {
    let url = postgres::server().fresh_database().await;
    let setup = Setup::new(&database(&url));
    let first = run(&setup, &["migrate"], &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(String::from_utf8_lossy(&first.stdout).contains("(applied)"));
    let again = run(&setup, &["migrate"], &[]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(String::from_utf8_lossy(&again.stdout).contains("(nothing to apply)"));
    assert!(
        !setup.data_dir().join("teammem.db").exists(),
        "no SQLite file beside a PostgreSQL database"
    );

    let mut db = sqlx::PgConnection::connect(&url).await.unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1",
    )
    .fetch_all(&mut db)
    .await
    .unwrap();
    for table in [
        "api_tokens",
        "deliveries",
        "job_events",
        "job_identities",
        "jobs",
        "source_cursors",
    ] {
        assert!(tables.iter().any(|t| t == table), "{table} in {tables:?}");
    }

    // Attack the rule the claim relies on: a second running job for the same
    // wiki is refused by the database itself.
    let insert = "INSERT INTO jobs (source, destination, origin, kind, pull_number, merge_sha, state, \
                  max_attempts, run_after, created_at, updated_at, actor, lease_token, lease_until) \
                  VALUES ('octo/app', 'github:octo/app.wiki', 'request', 'pull_request', $1, $2, 'running', \
                  8, 0, 0, 0, 'test', 'fence', 1)";
    sqlx::query(insert)
        .bind(1_i64)
        .bind("a".repeat(40))
        .execute(&mut db)
        .await
        .unwrap();
    let second = sqlx::query(insert)
        .bind(2_i64)
        .bind("b".repeat(40))
        .execute(&mut db)
        .await
        .unwrap_err();
    assert!(
        second
            .to_string()
            .contains("jobs_one_running_per_destination"),
        "{second}"
    );
    // And the audit trail cannot be rewritten.
    sqlx::query("INSERT INTO job_events (job_id, at, actor, event) SELECT id, 0, 'test', 'claimed' FROM jobs")
        .execute(&mut db)
        .await
        .unwrap();
    let rewrite = sqlx::query("UPDATE job_events SET actor = 'someone else'")
        .execute(&mut db)
        .await
        .unwrap_err();
    assert!(rewrite.to_string().contains("append-only"), "{rewrite}");
}

#[tokio::test]
async fn a_database_migrated_by_a_newer_build_is_refused() {
    let url = postgres::server().fresh_database().await;
    let setup = Setup::new(&database(&url));
    assert!(run(&setup, &["migrate"], &[]).status.success());
    let mut db = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9999, 'from a newer teammem', true, '\\x00', 0)",
    )
    .execute(&mut db)
    .await
    .unwrap();
    for command in ["migrate", "serve"] {
        let out = run(&setup, &[command], &[]);
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("run a teammem build that knows every applied migration"),
            "{command}: {}",
            stderr(&out)
        );
    }
}

#[tokio::test]
async fn an_unreachable_database_stops_the_daemon_naming_only_where_it_is() {
    // A port nothing listens on: bind one and let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let password = "Pa55-never-shown";
    let setup = Setup::new(&format!(
        "{}password_env = \"TEAMMEM_TEST_DB_PASSWORD\"\n",
        database(&format!("postgres://teammem@127.0.0.1:{port}/memory"))
    ));
    for command in ["serve", "migrate"] {
        let out = run(
            &setup,
            &[command],
            &[("TEAMMEM_TEST_DB_PASSWORD", password)],
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{command}: {err}");
        assert!(
            err.contains(&format!(
                "cannot connect to the PostgreSQL database at 127.0.0.1:{port}/memory"
            )),
            "{command}: {err}"
        );
        assert!(!err.contains(password), "{command}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{command}: one line: {err}"
        );
    }
}

/// The offline commands work on the configured PostgreSQL database (and
/// never create an SQLite file beside it).
#[tokio::test]
async fn the_offline_commands_run_on_a_reachable_postgres_database() {
    let url = postgres::server().fresh_database().await;
    let setup = Setup::new(&database(&url));
    let out = run(&setup, &["migrate"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("(applied)"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let token = setup.create_token("pg-token", &[]);
    assert!(token.starts_with("tmm_"), "{token}");
    let out = run(&setup, &["tokens", "list"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("pg-token\tactive"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = run(&setup, &["jobs", "list"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM api_tokens WHERE name = 'pg-token'")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(stored, 1);
    assert!(!setup.data_dir().join("teammem.db").exists());
}

/// `teammem db copy`: a populated SQLite deployment (jobs in several states,
/// their events and deliveries, a token) arrives whole, ids kept and the
/// identity sequences moved past them; a second copy into the now non-empty
/// target is refused and writes nothing.
#[tokio::test]
async fn db_copy_moves_a_sqlite_deployment_into_an_empty_postgres_once() {
    use crate::queue::{claim_one, dispatched, pull_request, succeeded};
    use std::sync::Arc;
    use teammem::queue::{ManualClock, Queue};

    let old = Setup::new("");
    let token = old.create_token("copied", &[]);
    assert!(!token.is_empty());
    let pool = teammem::db::open(&old.data_dir()).await.unwrap();
    teammem::db::migrate(&pool).await.unwrap();
    let queue = Queue::new(
        pool.clone(),
        Arc::new(ManualClock::default()),
        crate::queue::settings(),
    );
    for (n, delivery) in [(1, "d-1"), (2, "d-2"), (3, "d-3")] {
        queue
            .enqueue(
                dispatched("demo/app", n * 10, n * 10 + 1, n as i64, 1),
                Some(delivery),
            )
            .await
            .unwrap();
    }
    queue
        .enqueue(pull_request("demo/other", "demo/other", 7), None)
        .await
        .unwrap();
    let claimed = claim_one(&queue, "w1").await;
    queue.complete(&claimed.lease, succeeded()).await.unwrap();

    let counts = |table: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) FROM {table}"
            )))
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let tables = [
        "jobs",
        "job_identities",
        "deliveries",
        "job_events",
        "api_tokens",
    ];
    let mut expected = Vec::new();
    for table in tables {
        expected.push(counts(table).await);
    }
    assert!(expected.iter().all(|n| *n > 0), "{expected:?}");
    pool.close().await;

    let url = postgres::server().fresh_database().await;
    let new = Setup::new(&database(&url));
    let copy = |setup_from: &Setup, setup_to: &Setup| {
        Command::new(BIN)
            .args(["db", "copy", "--from-config"])
            .arg(&setup_from.config)
            .arg("--to-config")
            .arg(&setup_to.config)
            .env("TEAMMEM_LOG", "warn")
            .output()
            .expect("run teammem")
    };
    let out = copy(&old, &new);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("jobs: 4 row(s) copied"));

    let mut db = sqlx::PgConnection::connect(&url).await.unwrap();
    for (table, want) in tables.iter().zip(&expected) {
        let got: i64 =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
                .fetch_one(&mut db)
                .await
                .unwrap();
        assert_eq!(got, *want, "{table}");
    }
    let states: Vec<(i64, String)> = sqlx::query_as("SELECT id, state FROM jobs ORDER BY id")
        .fetch_all(&mut db)
        .await
        .unwrap();
    assert_eq!(
        states,
        [
            (1, "succeeded".to_owned()),
            (2, "queued".to_owned()),
            (3, "queued".to_owned()),
            (4, "queued".to_owned())
        ]
    );
    let token_hash: String =
        sqlx::query_scalar("SELECT token_sha256 FROM api_tokens WHERE name = 'copied'")
            .fetch_one(&mut db)
            .await
            .unwrap();
    assert_eq!(
        token_hash,
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(token.as_bytes()))
    );
    let next: i64 = sqlx::query_scalar(
        "INSERT INTO jobs (source, destination, origin, kind, pull_number, merge_sha, state, max_attempts, run_after, created_at, updated_at, actor) \
         VALUES ('demo/app', 'demo/app', 'manual', 'pull_request', 9, 'x', 'queued', 1, 0, 0, 0, 'test') RETURNING id",
    )
    .fetch_one(&mut db)
    .await
    .unwrap();
    assert_eq!(next, 5, "a new job's id follows the copied ones");

    let again = copy(&old, &new);
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("already holds"),
        "{}",
        stderr(&again)
    );
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs")
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!(jobs, 5, "the refused copy wrote nothing");

    let backwards = copy(&new, &old);
    assert_eq!(backwards.status.code(), Some(2), "{}", stderr(&backwards));
    assert!(
        stderr(&backwards).contains("--from-config"),
        "{}",
        stderr(&backwards)
    );
}
