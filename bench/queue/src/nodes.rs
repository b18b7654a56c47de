//! Phase "nodes": the PostgreSQL workload on 1, 2 and 3 teammem nodes, each
//! node a separate OS process (this binary re-run with the hidden `--node`
//! flag) with its own pool and workers, all sharing one fresh database per
//! node count; then a correctness check from the jobs and their events.
//!
//! Invariant: every node count gets the same workload and the same total of
//! workers (`--workers`, split across the nodes as evenly as it goes), and the
//! same two stages as the PostgreSQL phase: every node enqueues its share
//! (job n goes to node n mod k), all at once; once all are done, every node's
//! workers claim and complete until all N jobs are terminal. The parent
//! process only orchestrates (a line on each node's stdin starts a stage) and
//! samples the running jobs per destination while the workers run.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use sqlx::postgres::PgPool;
use teammem::queue::{Queue, QueueSettings, SystemClock};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::postgres::{fresh_database, pool};
use crate::{Finished, Measured, Options, enqueue_jobs, process_jobs, report};

/// How often the parent samples the running jobs per destination.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// `total` workers split over `nodes` nodes, at least one each.
fn split_workers(total: usize, nodes: usize) -> Vec<usize> {
    (0..nodes)
        .map(|i| (total / nodes + usize::from(i < total % nodes)).max(1))
        .collect()
}

/// The child side: one node. Says `ready`, then per line on stdin runs one
/// stage and answers (`enqueued`; `done` and its claim latencies in µs).
pub async fn run_node(options: &Options, url: &str, index: usize, count: usize) {
    let pool = pool(url, options.workers as u32 + 2).await;
    let queue = Queue::new(pool, Arc::new(SystemClock), QueueSettings::default());
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    println!("ready");
    let _ = stdin.next_line().await.expect("read stdin");
    let share = (index..options.jobs).step_by(count).collect();
    enqueue_jobs(&queue, share, options.destinations).await;
    println!("enqueued");
    let _ = stdin.next_line().await.expect("read stdin");
    let (_, latencies) = process_jobs(
        &queue,
        &format!("node{index}-"),
        options.workers,
        Finished::InDatabase(options.jobs),
    )
    .await;
    let micros: Vec<String> = latencies
        .iter()
        .map(|latency| latency.as_micros().to_string())
        .collect();
    println!("done {}", micros.join(" "));
}

struct Node {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Node {
    async fn expect(&mut self, word: &str) -> String {
        let line = self
            .stdout
            .next_line()
            .await
            .expect("read a node's stdout")
            .unwrap_or_else(|| panic!("a node process ended before saying {word}"));
        let rest = line
            .strip_prefix(word)
            .unwrap_or_else(|| panic!("a node said {line:?}, expected {word}"));
        rest.trim().to_string()
    }

    async fn say(&mut self, word: &str) {
        self.stdin
            .write_all(format!("{word}\n").as_bytes())
            .await
            .expect("write to a node's stdin");
        self.stdin.flush().await.expect("flush a node's stdin");
    }
}

pub async fn run_phase(options: &Options, url: &str) {
    println!(
        "\n== nodes: 1, 2, 3 teammem node processes on one fresh database each, {} workers in total split across the nodes; \
         2 cores, so this shows correctness under contention, not speed-up ==",
        options.workers
    );
    for count in 1..=3 {
        run_nodes(options, url, count).await;
    }
}

async fn run_nodes(options: &Options, url: &str, count: usize) {
    let (url, _) = fresh_database(url, "bench_nodes").await;
    let parent_pool = pool(&url, 2).await;
    teammem::db::migrate_postgres(&parent_pool)
        .await
        .expect("migrate");
    let split = split_workers(options.workers, count);
    let exe = std::env::current_exe().expect("this binary's path");
    let mut nodes = Vec::new();
    for (index, workers) in split.iter().enumerate() {
        let mut child = tokio::process::Command::new(&exe)
            .args(["--node", &url, &index.to_string(), &count.to_string()])
            .args(["--jobs", &options.jobs.to_string()])
            .args(["--workers", &workers.to_string()])
            .args(["--destinations", &options.destinations.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start a node process");
        let stdin = child.stdin.take().expect("node stdin");
        let stdout = BufReader::new(child.stdout.take().expect("node stdout")).lines();
        nodes.push(Node {
            child,
            stdin,
            stdout,
        });
    }
    for node in &mut nodes {
        node.expect("ready").await;
    }

    let started = Instant::now();
    for node in &mut nodes {
        node.say("enqueue").await;
    }
    for node in &mut nodes {
        node.expect("enqueued").await;
    }
    let enqueue = started.elapsed();

    let stop = Arc::new(AtomicBool::new(false));
    let sampled = Arc::new(AtomicI64::new(0));
    let sampler = tokio::spawn(sample_running(
        parent_pool.clone(),
        stop.clone(),
        sampled.clone(),
    ));
    let started = Instant::now();
    for node in &mut nodes {
        node.say("process").await;
    }
    let mut claim_latencies = Vec::new();
    for node in &mut nodes {
        let micros = node.expect("done").await;
        claim_latencies.extend(
            micros
                .split_whitespace()
                .map(|n| Duration::from_micros(n.parse().expect("a latency in µs"))),
        );
    }
    let process = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.await.expect("sampler");
    for mut node in nodes {
        drop(node.stdin);
        let status = node.child.wait().await.expect("wait for a node");
        assert!(status.success(), "a node process failed: {status}");
    }
    claim_latencies.sort();
    let measured = Measured {
        enqueue,
        process,
        claim_latencies,
    };
    let label = format!(
        "{count} node{} ({})",
        if count == 1 { "" } else { "s" },
        split
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join("+")
    );
    report(&label, options.jobs, &measured);
    check(
        &parent_pool,
        options.jobs,
        sampled.load(Ordering::Relaxed),
        samples,
    )
    .await;
    parent_pool.close().await;
}

/// Samples the most jobs running for one destination until `stop`; keeps the
/// maximum in `max` and returns how many samples it took.
async fn sample_running(pool: PgPool, stop: Arc<AtomicBool>, max: Arc<AtomicI64>) -> u64 {
    let mut samples = 0;
    while !stop.load(Ordering::Relaxed) {
        let most: i64 = sqlx::query_scalar(
            "SELECT COALESCE(MAX(running), 0) FROM \
             (SELECT count(*) AS running FROM jobs WHERE state = 'running' GROUP BY destination) AS d",
        )
        .fetch_one(&pool)
        .await
        .expect("sample running jobs");
        max.fetch_max(most, Ordering::Relaxed);
        samples += 1;
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
    samples
}

/// Every job completed exactly once, and never two running for one
/// destination: from the jobs, their events (replayed in id order) and the
/// samples. Panics, naming what broke, otherwise prints the check.
async fn check(pool: &PgPool, jobs: usize, sampled_max: i64, samples: u64) {
    let scalar = |sql: &'static str| async move {
        let value: i64 = sqlx::query_scalar(sql)
            .fetch_one(pool)
            .await
            .expect("a check query");
        value
    };
    let total = scalar("SELECT count(*) FROM jobs").await;
    let terminal = scalar("SELECT count(*) FROM jobs WHERE state = 'no_change'").await;
    let not_once = scalar("SELECT count(*) FROM jobs WHERE attempts <> 1").await;
    let claimed_twice = scalar(
        "SELECT count(*) FROM (SELECT job_id FROM job_events WHERE event = 'claimed' \
         GROUP BY job_id HAVING count(*) > 1) AS twice",
    )
    .await;
    let completed_not_once = scalar(
        "SELECT count(*) FROM jobs AS j WHERE (SELECT count(*) FROM job_events AS e \
         WHERE e.job_id = j.id AND e.event = 'no_change') <> 1",
    )
    .await;
    // Replay claims and completions in commit order per destination: a claim
    // of a destination's next job can only see the previous one finished once
    // that completion (and its event, in the same transaction) committed, so
    // event ids order them.
    let events: Vec<(String, String)> = sqlx::query_as(
        "SELECT j.destination, e.event FROM job_events AS e JOIN jobs AS j ON j.id = e.job_id \
         WHERE e.event IN ('claimed', 'no_change') ORDER BY e.id",
    )
    .fetch_all(pool)
    .await
    .expect("read the events");
    let mut running = std::collections::HashMap::<String, i64>::new();
    let mut replayed_max = 0;
    for (destination, event) in events {
        let count = running.entry(destination).or_default();
        *count += if event == "claimed" { 1 } else { -1 };
        replayed_max = replayed_max.max(*count);
    }
    let per_node: Vec<(String, i64)> = sqlx::query_as(
        "SELECT split_part(actor, '-', 1), count(*) FROM job_events WHERE event = 'no_change' \
         GROUP BY 1 ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .expect("jobs per node");
    println!(
        "{:<14} check: {total} jobs, {terminal} no_change, {not_once} with attempts <> 1, {claimed_twice} claimed twice, \
         {completed_not_once} not completed exactly once; most running per destination: {replayed_max} (events), \
         {sampled_max} ({samples} samples); completed per node: {}",
        "",
        per_node
            .iter()
            .map(|(node, n)| format!("{node} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let jobs = jobs as i64;
    assert!(
        total == jobs
            && terminal == jobs
            && not_once == 0
            && claimed_twice == 0
            && completed_not_once == 0
            && replayed_max <= 1
            && sampled_max <= 1,
        "the nodes broke the queue's rules (see the check line above)"
    );
}
