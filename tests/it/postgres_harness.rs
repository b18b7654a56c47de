//! The PostgreSQL test harness itself: the shared server answers as
//! PostgreSQL, and the fresh databases it hands out never see each other's
//! tables.

use crate::harness::postgres;

#[tokio::test]
async fn the_server_answers_as_postgresql() {
    let url = postgres::server().fresh_database().await;
    let pool = sqlx::PgPool::connect(&url).await.expect("connect");
    let version: String = sqlx::query_scalar("SELECT version()")
        .fetch_one(&pool)
        .await
        .expect("SELECT version()");
    assert!(version.starts_with("PostgreSQL "), "version(): {version}");
}

#[tokio::test]
async fn fresh_databases_are_isolated() {
    let server = postgres::server();
    let (first, second) = (server.fresh_database().await, server.fresh_database().await);
    assert_ne!(first, second);
    let first = sqlx::PgPool::connect(&first).await.expect("connect first");
    let second = sqlx::PgPool::connect(&second)
        .await
        .expect("connect second");
    sqlx::raw_sql("CREATE TABLE only_here (id integer)")
        .execute(&first)
        .await
        .expect("create a table in the first database");
    let table_in = |pool: sqlx::PgPool| async move {
        sqlx::query_scalar::<_, bool>("SELECT to_regclass('public.only_here') IS NOT NULL")
            .fetch_one(&pool)
            .await
            .expect("look the table up")
    };
    assert!(table_in(first).await, "the table is where it was created");
    assert!(
        !table_in(second).await,
        "the table leaked into another database"
    );
}
