//! Queue tests: one suite, run on both backends (a real SQLite file in a temp
//! dir, and a fresh database on the harness's real PostgreSQL server), time
//! moved by a ManualClock, no sleeps. Each test is declared once with
//! [`queue_test!`], which makes a `sqlite` and a `postgres` test of it.
//! Helpers shared by the queue test modules live here.

mod backfill; // backfills: stored once, claimed in order, never coalesced into, cancelled together
mod claim;
mod cursor_forward; // the cursor never moves back: old ranges, the runner's decision, its re-check
mod enqueue;
mod lease;
mod pg_batch;
mod read;
mod retention;
mod split; // a range larger than one job: parts in one write, claimed in order; bounded coalescing
mod steer;

use std::sync::Arc;
use std::time::Duration;

use teammem::db::{self, Pool};
use teammem::ids::{PullNumber, RepoName, Sha};
use teammem::queue::{
    Claimed, Clock, Completion, Job, JobEvent, JobKind, ManualClock, NewJob, Origin, Queue,
    QueueSettings,
};

/// Declares a queue test once and runs it on each backend: `async fn
/// name(backend) { ... }` becomes `name::sqlite` and `name::postgres`, the
/// body seeing `backend` as the [`Backend`] it runs on. Its attributes (its
/// doc comment and its `#[tokio::test(...)]`) go on both.
macro_rules! queue_test {
    ($(#[$attr:meta])* async fn $name:ident($backend:ident) $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $(#[$attr])*
            async fn sqlite() {
                let $backend = $crate::queue::Backend::Sqlite;
                $body
            }

            $(#[$attr])*
            async fn postgres() {
                let $backend = $crate::queue::Backend::Postgres;
                $body
            }
        }
    };
}
pub(crate) use queue_test;

/// Runs `$body` with `$p` bound to the backend's own pool, so that one
/// statement text runs on both.
macro_rules! on_pool {
    ($pool:expr, |$p:ident| $body:expr) => {
        match $pool {
            teammem::db::Pool::Sqlite($p) => $body,
            teammem::db::Pool::Postgres($p) => $body,
        }
    };
}
pub(crate) use on_pool;

/// Which database a queue test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A migrated queue on a fresh database, with its clock.
pub struct TestQueue {
    pub queue: Queue,
    pub clock: Arc<ManualClock>,
    pub pool: Pool,
    _dir: tempfile::TempDir,
}

pub fn settings() -> QueueSettings {
    QueueSettings {
        max_attempts: 3,
        lease: Duration::from_secs(60),
        retention: Duration::from_secs(7 * 24 * 3600),
        delivery_retention: Duration::from_secs(3 * 24 * 3600),
    }
}

pub async fn test_queue() -> TestQueue {
    test_queue_with(settings()).await
}

pub async fn test_queue_with(settings: QueueSettings) -> TestQueue {
    queue_on_with(Backend::Sqlite, settings).await
}

/// A migrated queue on `backend`, with the suite's settings.
pub async fn queue_on(backend: Backend) -> TestQueue {
    queue_on_with(backend, settings()).await
}

pub async fn queue_on_with(backend: Backend, settings: QueueSettings) -> TestQueue {
    let dir = tempfile::tempdir().expect("temp dir");
    let pool: Pool = match backend {
        Backend::Sqlite => {
            // A data directory of its own: the temp dir itself may be open to others.
            let pool = db::open_with(&dir.path().join("data"), 12)
                .await
                .expect("open database");
            db::migrate(&pool).await.expect("migrate");
            pool.into()
        }
        Backend::Postgres => {
            let url = crate::harness::postgres::server().fresh_database().await;
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(12)
                .connect(&url)
                .await
                .expect("connect to the test database");
            db::migrate_postgres(&pool).await.expect("migrate");
            pool.into()
        }
    };
    let clock = Arc::new(ManualClock::default());
    let queue = Queue::new(pool.clone(), clock.clone(), settings);
    TestQueue {
        queue,
        clock,
        pool,
        _dir: dir,
    }
}

/// A distinct, well-formed 40-hex SHA for each `n`.
pub fn sha(n: u64) -> Sha {
    Sha::parse(&format!("{:040x}", n + 0xabc0)).unwrap()
}

pub fn range(source: &str, before: u64, after: u64) -> NewJob {
    NewJob {
        source: RepoName::parse(source).unwrap(),
        destination: source.into(),
        origin: Origin::Sweep,
        kind: JobKind::Range {
            before: sha(before),
            after: sha(after),
            run_id: None,
            run_attempt: None,
        },
        actor: "scheduler".into(),
    }
}

pub fn dispatched(source: &str, before: u64, after: u64, run_id: i64, attempt: i64) -> NewJob {
    NewJob {
        origin: Origin::Dispatch,
        kind: JobKind::Range {
            before: sha(before),
            after: sha(after),
            run_id: Some(run_id),
            run_attempt: Some(attempt),
        },
        actor: "dispatch".into(),
        ..range(source, before, after)
    }
}

pub fn pull_request(source: &str, destination: &str, number: i64) -> NewJob {
    NewJob {
        source: RepoName::parse(source).unwrap(),
        destination: destination.into(),
        origin: Origin::Request,
        kind: JobKind::PullRequest {
            number: PullNumber::new(number as u64).unwrap(),
            merge_sha: sha(1000 + number as u64),
        },
        actor: "maintainer".into(),
    }
}

pub fn succeeded() -> Completion {
    Completion::Succeeded {
        receipt: serde_json::json!({"pages": ["Home.md"]}),
    }
}

pub async fn claim_one(queue: &Queue, worker: &str) -> Claimed {
    queue
        .claim(worker)
        .await
        .expect("claim")
        .expect("a claimable job")
}

/// A job row and its events, to show that a refused request changed nothing.
pub async fn snapshot(queue: &Queue, id: i64) -> (Job, Vec<JobEvent>) {
    (
        queue.get(id).await.expect("job"),
        queue.events(id).await.expect("events"),
    )
}

/// Rows in a table, to show nothing was written anywhere.
pub async fn count(pool: &Pool, table: &str) -> i64 {
    let sql = match table {
        "jobs" => "SELECT COUNT(*) FROM jobs",
        "job_events" => "SELECT COUNT(*) FROM job_events",
        "job_identities" => "SELECT COUNT(*) FROM job_identities",
        "deliveries" => "SELECT COUNT(*) FROM deliveries",
        other => panic!("no count for table {other}"),
    };
    match pool {
        Pool::Sqlite(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
        Pool::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await,
    }
    .expect("count")
}

pub fn event_names(events: &[JobEvent]) -> Vec<&str> {
    events.iter().map(|event| event.event.as_str()).collect()
}
