//! `[database]` on a real PostgreSQL server: `teammem migrate` builds the
//! schema once, the schema itself keeps one running job per wiki, a database
//! migrated by a newer build is refused, and an unreachable server stops the
//! daemon with exit 2 naming only where it is.

use std::process::{Command, Output};

use sqlx::Connection;

use crate::harness::daemon::{BIN, Setup};
use crate::harness::postgres;

fn database(url: &str) -> String {
    format!("[database]\nurl = \"{url}\"\n")
}

fn run(setup: &Setup, args: &[&str], envs: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args(args)
        .arg("--config")
        .arg(&setup.config)
        .env("TEAMMEM_LOG", "warn")
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

#[tokio::test]
async fn a_reachable_database_is_migrated_and_what_cannot_run_on_it_says_so() {
    let url = postgres::server().fresh_database().await;
    let setup = Setup::new(&database(&url));
    let out = run(&setup, &["serve"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("keeps its job queue in SQLite only"),
        "{}",
        stderr(&out)
    );
    let out = run(&setup, &["migrate"], &[]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("(nothing to apply)"),
        "serve migrated the database before refusing"
    );
    let out = run(&setup, &["tokens", "list"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("remove [database]"),
        "{}",
        stderr(&out)
    );
    assert!(!setup.data_dir().join("teammem.db").exists());
}
