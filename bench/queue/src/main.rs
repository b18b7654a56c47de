//! Queue benchmark: no-op jobs end to end (enqueue N, one durable transaction
//! each; then W workers claim and complete them all), for teammem's queue and
//! for its Rust peer in the same run: apalis-sqlite on one SQLite file each
//! (phase "SQLite"), apalis-postgres on one fresh database each of the same
//! PostgreSQL server (phase "PostgreSQL", `--postgres URL`), and teammem on
//! 1, 2 and 3 node processes sharing one fresh database (phase "nodes",
//! correctness checked afterwards from the jobs and their events).
//!
//! Invariant: both sides of a comparison get the same workload on the same
//! kind of database with the same settings (SQLite: a fresh file, WAL,
//! `synchronous=FULL`, 5 s busy timeout; PostgreSQL: a fresh database on one
//! server, pools of W + 2 connections), so the printed ratio compares the
//! queues, not the settings. teammem keeps its one-running-job-per-destination
//! rule on every backend (the peers have no such rule). Absolute numbers
//! depend on the machine; the ratios are what to compare across runs.

mod nodes;
mod postgres;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use apalis::prelude::{BoxDynError, TaskSink, WorkerBuilder, WorkerContext};
use apalis_sqlite::SqliteStorage;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use teammem::db::Pool;
use teammem::queue::{Completion, JobKind, NewJob, Origin, Queue, QueueSettings, SystemClock};

/// How long a teammem worker waits after finding nothing to claim.
const IDLE_POLL: Duration = Duration::from_millis(1);

/// Which phases run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
    All,
}

struct Options {
    jobs: usize,
    workers: usize,
    destinations: usize,
    /// `synchronous=FULL` (teammem's setting, the default) or NORMAL (no
    /// fsync per commit: shows the queues' own cost when the disk is slow).
    full_sync: bool,
    backend: Backend,
    /// A URL of the PostgreSQL server whose path names a database to connect
    /// to for `CREATE DATABASE` (bench/queue.sh starts a throwaway server).
    postgres: Option<String>,
    /// Hidden: run as node `index` of `count` on database URL (see nodes.rs).
    node: Option<(String, usize, usize)>,
}

const USAGE: &str = "use --jobs N, --workers N, --destinations N, --normal-sync, \
                     --backend sqlite|postgres|all, --postgres URL";

fn parse_options() -> Options {
    let mut options = Options {
        jobs: 10_000,
        workers: 4,
        destinations: 64,
        full_sync: true,
        backend: Backend::All,
        postgres: None,
        node: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| panic!("{flag} needs a value; {USAGE}"))
        };
        let number = |text: String| {
            text.parse::<usize>()
                .ok()
                .filter(|value| *value > 0)
                .unwrap_or_else(|| panic!("{flag} needs a positive number, not {text:?}"))
        };
        match flag.as_str() {
            "--normal-sync" => options.full_sync = false,
            "--jobs" => options.jobs = number(value()),
            "--workers" => options.workers = number(value()),
            "--destinations" => options.destinations = number(value()),
            "--postgres" => options.postgres = Some(value()),
            "--backend" => {
                options.backend = match value().as_str() {
                    "sqlite" => Backend::Sqlite,
                    "postgres" => Backend::Postgres,
                    "all" => Backend::All,
                    other => panic!("--backend {other}: use sqlite, postgres or all"),
                }
            }
            "--node" => {
                let url = value();
                let index = value().parse().expect("--node URL INDEX COUNT");
                let count = number(value());
                options.node = Some((url, index, count));
            }
            other => panic!("unknown option {other}; {USAGE}"),
        }
    }
    options
}

/// What one side measured.
struct Measured {
    enqueue: Duration,
    process: Duration,
    /// Latency of each successful claim (empty where it cannot be observed).
    claim_latencies: Vec<Duration>,
}

impl Measured {
    fn end_to_end(&self) -> Duration {
        self.enqueue + self.process
    }
}

fn per_second(jobs: usize, elapsed: Duration) -> f64 {
    jobs as f64 / elapsed.as_secs_f64()
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64) * fraction).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn connect_options(path: &std::path::Path, options: &Options) -> SqliteConnectOptions {
    let synchronous = if options.full_sync {
        SqliteSynchronous::Full
    } else {
        SqliteSynchronous::Normal
    };
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(synchronous)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(5))
}

async fn bench_teammem(options: &Options) -> Measured {
    let dir = tempfile::tempdir().expect("temp dir");
    // teammem::db::open_with with the bench's synchronous setting (FULL by
    // default, exactly what db.rs sets).
    let pool = SqlitePoolOptions::new()
        .max_connections(options.workers as u32 + 2)
        .connect_with(connect_options(
            &teammem::db::database_path(dir.path()),
            options,
        ))
        .await
        .expect("open teammem database");
    teammem::db::migrate(&pool).await.expect("migrate");
    let queue = Queue::new(pool, Arc::new(SystemClock), QueueSettings::default());
    let enqueue = enqueue_jobs(&queue, (0..options.jobs).collect(), options.destinations).await;
    let (process, claim_latencies) =
        process_jobs(&queue, "", options.workers, Finished::Counted(options.jobs)).await;
    assert_eq!(
        claim_latencies.len(),
        options.jobs,
        "every job claimed once"
    );
    Measured {
        enqueue,
        process,
        claim_latencies,
    }
}

/// Enqueues jobs `numbers` (pull request n + 1, destination `n % destinations`),
/// one transaction each, one after the other; returns the time taken.
async fn enqueue_jobs(queue: &Queue, numbers: Vec<usize>, destinations: usize) -> Duration {
    let merge_sha = teammem::ids::Sha::parse(&"a".repeat(40)).expect("a full sha");
    let source = teammem::ids::RepoName::parse("bench/app").expect("owner/name");
    let started = Instant::now();
    for n in numbers {
        let job = NewJob {
            source: source.clone(),
            destination: format!("wiki-{}", n % destinations),
            origin: Origin::Dispatch,
            kind: JobKind::PullRequest {
                number: teammem::ids::PullNumber::new(n as u64 + 1).expect("a pull number"),
                merge_sha: merge_sha.clone(),
            },
            actor: "bench".into(),
        };
        queue.enqueue(job, None).await.expect("enqueue");
    }
    started.elapsed()
}

/// When the workers stop.
#[derive(Clone, Copy)]
enum Finished {
    /// After this process's workers completed this many jobs.
    Counted(usize),
    /// Once this many jobs are terminal in the database (several node
    /// processes share the work; checked only after an empty claim).
    InDatabase(usize),
}

/// Runs `workers` claim+complete loops (named `<prefix>worker-<n>`) until `finished`; returns the time
/// taken and every successful claim's latency, sorted.
async fn process_jobs(
    queue: &Queue,
    prefix: &str,
    workers: usize,
    finished: Finished,
) -> (Duration, Vec<Duration>) {
    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let queue = queue.clone();
        let done = done.clone();
        let name = format!("{prefix}worker-{w}");
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            // The job claimed with the last completion, as the daemon's
            // workers do (`Queue::complete_and_claim`).
            let mut next = None;
            loop {
                if let Finished::Counted(total) = finished
                    && done.load(Ordering::Relaxed) >= total
                    && next.is_none()
                {
                    break;
                }
                let claimed = match next.take() {
                    Some(claimed) => claimed,
                    None => {
                        let asked = Instant::now();
                        let Some(claimed) = queue.claim(&name).await.expect("claim") else {
                            if let Finished::InDatabase(total) = finished
                                && terminal_jobs(queue.pool()).await >= total
                            {
                                break;
                            }
                            // Nothing claimable (the last jobs belong to busy
                            // destinations, or other nodes hold them): a short
                            // idle poll; the daemon's idle worker waits for a
                            // NOTIFY on PostgreSQL instead.
                            tokio::time::sleep(IDLE_POLL).await;
                            continue;
                        };
                        latencies.push(asked.elapsed());
                        claimed
                    }
                };
                let receipt = serde_json::json!({});
                let asked = Instant::now();
                let (completed, claimed) = queue
                    .complete_and_claim(&claimed.lease, Completion::NoChange { receipt }, &name)
                    .await;
                completed.expect("complete");
                done.fetch_add(1, Ordering::Relaxed);
                next = claimed.expect("claim");
                if next.is_some() {
                    // Its claim waited for the completion's commit.
                    latencies.push(asked.elapsed());
                }
            }
            latencies
        }));
    }
    let mut claim_latencies = Vec::new();
    for task in tasks {
        claim_latencies.extend(task.await.expect("worker"));
    }
    let process = started.elapsed();
    claim_latencies.sort();
    (process, claim_latencies)
}

/// How many jobs have reached a terminal state.
async fn terminal_jobs(pool: &Pool) -> usize {
    let Pool::Postgres(pool) = pool else {
        panic!("counting terminal jobs across processes needs PostgreSQL");
    };
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs WHERE finished_at IS NOT NULL")
        .fetch_one(pool)
        .await
        .expect("count terminal jobs");
    count as usize
}

async fn bench_apalis(options: &Options) -> Measured {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("apalis.db");
    // apalis' setup() switches the connection it runs on to synchronous=OFF;
    // run it on a throwaway connection so the measured pool stays durable
    // (FULL) like teammem's.
    {
        let setup_pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(connect_options(&path, options))
            .await
            .expect("open apalis database");
        SqliteStorage::setup(&setup_pool)
            .await
            .expect("apalis setup");
        setup_pool.close().await;
    }
    let pool = SqlitePoolOptions::new()
        .max_connections(options.workers as u32 + 2)
        .connect_with(connect_options(&path, options))
        .await
        .expect("open apalis database");
    let mut backend: SqliteStorage<u64> = SqliteStorage::new(&pool);

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
    Measured {
        enqueue,
        process,
        claim_latencies: Vec::new(),
    }
}

type Progress = (Arc<AtomicUsize>, Arc<tokio::sync::Notify>, usize);

async fn no_op_job(
    _job: u64,
    _worker: WorkerContext,
    progress: apalis::prelude::Data<Progress>,
) -> Result<(), BoxDynError> {
    let (done, finished, total) = &*progress;
    if done.fetch_add(1, Ordering::SeqCst) + 1 == *total {
        finished.notify_one();
    }
    Ok(())
}

fn report(name: &str, jobs: usize, measured: &Measured) {
    println!(
        "{name:<14} enqueue {:>8.0} jobs/s   claim+complete {:>8.0} jobs/s   end to end {:>8.0} jobs/s ({:.2} s)",
        per_second(jobs, measured.enqueue),
        per_second(jobs, measured.process),
        per_second(jobs, measured.end_to_end()),
        measured.end_to_end().as_secs_f64(),
    );
    if measured.claim_latencies.is_empty() {
        println!(
            "{:<14} claim latency: not observable (claims happen inside the worker)",
            ""
        );
    } else {
        println!(
            "{:<14} claim latency p50 {:.3} ms   p99 {:.3} ms",
            "",
            percentile(&measured.claim_latencies, 0.50).as_secs_f64() * 1e3,
            percentile(&measured.claim_latencies, 0.99).as_secs_f64() * 1e3,
        );
    }
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let options = parse_options();
    if let Some((url, index, count)) = &options.node {
        nodes::run_node(&options, url, *index, *count).await;
        return;
    }
    println!(
        "queue benchmark: {} no-op jobs, {} workers, {} wiki destinations; teammem keeps one running job per destination",
        options.jobs, options.workers, options.destinations,
    );
    println!(
        "waiting: a teammem worker whose claim finds nothing sleeps {} ms and claims again (the daemon waits for NOTIFY on PostgreSQL); apalis workers use their backend's default fetching",
        IDLE_POLL.as_millis()
    );
    if options.backend != Backend::Postgres {
        println!(
            "\n== SQLite: one file each (WAL, synchronous={}) ==",
            if options.full_sync { "FULL" } else { "NORMAL" }
        );
        let teammem = bench_teammem(&options).await;
        report("teammem", options.jobs, &teammem);
        let apalis = bench_apalis(&options).await;
        report("apalis-sqlite", options.jobs, &apalis);
        print_ratio("apalis-sqlite", &teammem, &apalis);
    }
    if options.backend != Backend::Sqlite {
        let url = options
            .postgres
            .as_deref()
            .expect("the PostgreSQL phases need --postgres URL (bench/queue.sh passes one)");
        postgres::run_phase(&options, url).await;
        nodes::run_phase(&options, url).await;
    }
}

fn print_ratio(peer: &str, teammem: &Measured, apalis: &Measured) {
    let ratio = |ours: Duration, theirs: Duration| theirs.as_secs_f64() / ours.as_secs_f64();
    println!(
        "ratio teammem/{peer} (throughput, >1 = teammem faster): enqueue {:.2}x   claim+complete {:.2}x   end to end {:.2}x",
        ratio(teammem.enqueue, apalis.enqueue),
        ratio(teammem.process, apalis.process),
        ratio(teammem.end_to_end(), apalis.end_to_end()),
    );
}
