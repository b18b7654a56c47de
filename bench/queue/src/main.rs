//! Queue benchmark: no-op jobs end to end (enqueue N, one durable transaction
//! each; then W workers claim and complete them all) on one SQLite file, for
//! teammem's queue and for apalis-sqlite, the Rust peer, in the same run.
//!
//! Invariant: both sides get the same workload on the same kind of database
//! (a fresh file, WAL, `synchronous=FULL`, 5 s busy timeout), so the printed
//! ratio compares the queues, not the settings. Absolute numbers depend on the
//! machine; the ratios are what to compare across runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use apalis::prelude::{BoxDynError, TaskSink, WorkerBuilder, WorkerContext};
use apalis_sqlite::SqliteStorage;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use teammem::queue::{Completion, JobKind, NewJob, Origin, Queue, QueueSettings, SystemClock};

/// How long a teammem worker waits after finding nothing to claim.
const IDLE_POLL: Duration = Duration::from_millis(1);

struct Options {
    jobs: usize,
    workers: usize,
    destinations: usize,
    /// `synchronous=FULL` (teammem's setting, the default) or NORMAL (no
    /// fsync per commit: shows the queues' own cost when the disk is slow).
    full_sync: bool,
}

fn parse_options() -> Options {
    let mut options = Options {
        jobs: 10_000,
        workers: 4,
        destinations: 64,
        full_sync: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--normal-sync" {
            options.full_sync = false;
            continue;
        }
        let value = args
            .next()
            .and_then(|value| value.parse::<usize>().ok())
            .filter(|value| *value > 0)
            .unwrap_or_else(|| panic!("{flag} needs a positive number"));
        match flag.as_str() {
            "--jobs" => options.jobs = value,
            "--workers" => options.workers = value,
            "--destinations" => options.destinations = value,
            other => panic!(
                "unknown option {other}; use --jobs N, --workers N, --destinations N, --normal-sync"
            ),
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
    let merge_sha = teammem::ids::Sha::parse(&"a".repeat(40)).expect("a full sha");

    let started = Instant::now();
    for n in 0..options.jobs {
        let job = NewJob {
            source: "bench/app".into(),
            destination: format!("wiki-{}", n % options.destinations),
            origin: Origin::Dispatch,
            kind: JobKind::PullRequest {
                number: teammem::ids::PullNumber::new(n as u64 + 1).expect("a pull number"),
                merge_sha: merge_sha.clone(),
            },
            actor: "bench".into(),
        };
        queue.enqueue(job, None).await.expect("enqueue");
    }
    let enqueue = started.elapsed();

    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for w in 0..options.workers {
        let queue = queue.clone();
        let done = done.clone();
        let total = options.jobs;
        workers.push(tokio::spawn(async move {
            let name = format!("worker-{w}");
            let mut latencies = Vec::new();
            while done.load(Ordering::Relaxed) < total {
                let asked = Instant::now();
                let Some(claimed) = queue.claim(&name).await.expect("claim") else {
                    // Nothing claimable (the last jobs belong to busy
                    // destinations): wait like the daemon's idle worker does.
                    tokio::time::sleep(IDLE_POLL).await;
                    continue;
                };
                latencies.push(asked.elapsed());
                let receipt = serde_json::json!({});
                queue
                    .complete(&claimed.lease, Completion::NoChange { receipt })
                    .await
                    .expect("complete");
                done.fetch_add(1, Ordering::Relaxed);
            }
            latencies
        }));
    }
    let mut claim_latencies = Vec::new();
    for worker in workers {
        claim_latencies.extend(worker.await.expect("worker"));
    }
    let process = started.elapsed();
    assert_eq!(
        claim_latencies.len(),
        options.jobs,
        "every job claimed once"
    );
    claim_latencies.sort();
    Measured {
        enqueue,
        process,
        claim_latencies,
    }
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
    println!(
        "queue benchmark: {} no-op jobs, {} workers, {} wiki destinations, one SQLite file each (WAL, synchronous={})",
        options.jobs,
        options.workers,
        options.destinations,
        if options.full_sync { "FULL" } else { "NORMAL" }
    );
    let teammem = bench_teammem(&options).await;
    report("teammem", options.jobs, &teammem);
    let apalis = bench_apalis(&options).await;
    report("apalis-sqlite", options.jobs, &apalis);
    let ratio = |ours: Duration, theirs: Duration| theirs.as_secs_f64() / ours.as_secs_f64();
    println!(
        "ratio teammem/apalis-sqlite (throughput, >1 = teammem faster): enqueue {:.2}x   claim+complete {:.2}x   end to end {:.2}x",
        ratio(teammem.enqueue, apalis.enqueue),
        ratio(teammem.process, apalis.process),
        ratio(teammem.end_to_end(), apalis.end_to_end()),
    );
}
