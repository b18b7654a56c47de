//! Claim: one atomic statement, due jobs only, oldest first, and never two
//! running jobs for one wiki destination.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use teammem::queue::JobState;

use super::*;

const JOBS: usize = 500;
const DESTINATIONS: usize = 5;
const CLAIMERS: usize = 8;

/// What the claimers saw, checked after they all stopped.
#[derive(Default)]
struct Record {
    claimed: Vec<i64>,
    violations: Vec<String>,
    /// Highest number of jobs running at once, per destination, as seen by
    /// the claimers and by the database.
    max_running_seen: HashMap<String, i64>,
}

queue_test! {
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claimers_never_share_a_job_or_a_destination(backend) {
    let t = queue_on(backend).await;
    for n in 0..JOBS {
        let destination = format!("octo/wiki-{}", n % DESTINATIONS);
        t.queue
            .enqueue(pull_request("octo/app", &destination, n as i64 + 1), None)
            .await
            .unwrap();
    }

    let running: Arc<HashMap<String, AtomicI64>> = Arc::new(
        (0..DESTINATIONS)
            .map(|d| (format!("octo/wiki-{d}"), AtomicI64::new(0)))
            .collect(),
    );
    let finished = Arc::new(AtomicUsize::new(0));
    let record = Arc::new(Mutex::new(Record::default()));

    let mut claimers = Vec::new();
    for c in 0..CLAIMERS {
        let queue = t.queue.clone();
        let pool = t.pool.clone();
        let running = running.clone();
        let finished = finished.clone();
        let record = record.clone();
        claimers.push(tokio::spawn(async move {
            let worker = format!("claimer-{c}");
            while finished.load(Ordering::SeqCst) < JOBS {
                let Some(claimed) = queue.claim(&worker).await.unwrap() else {
                    tokio::task::yield_now().await;
                    continue;
                };
                let destination = claimed.job.destination.clone();
                // Mark the destination busy for the whole time this claimer
                // holds the job (from the claim's return until just before
                // completing): another claim of the same destination inside
                // that window shows up as a count above one.
                let now_running = running[&destination].fetch_add(1, Ordering::SeqCst) + 1;
                let in_database: i64 = on_pool!(&pool, |pool| {
                    sqlx::query_scalar(
                        "SELECT COUNT(*) FROM jobs WHERE destination = $1 AND state = 'running'",
                    )
                    .bind(&destination)
                    .fetch_one(pool)
                    .await
                    .unwrap()
                });
                {
                    let mut record = record.lock().unwrap();
                    record.claimed.push(claimed.job.id);
                    let seen = record
                        .max_running_seen
                        .entry(destination.clone())
                        .or_insert(0);
                    *seen = (*seen).max(now_running).max(in_database);
                    if now_running != 1 || in_database != 1 {
                        record.violations.push(format!(
                            "job {} on {destination}: {now_running} running by claimers, \
                             {in_database} in the database",
                            claimed.job.id
                        ));
                    }
                    if claimed.job.state != JobState::Running || claimed.job.attempts != 1 {
                        record.violations.push(format!(
                            "job {} claimed as {:?}",
                            claimed.job.id, claimed.job
                        ));
                    }
                }
                // Let the other claimers run while this one "works".
                tokio::task::yield_now().await;
                running[&destination].fetch_sub(1, Ordering::SeqCst);
                queue.complete(&claimed.lease, succeeded()).await.unwrap();
                finished.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for claimer in claimers {
        claimer.await.unwrap();
    }

    {
        let record = record.lock().unwrap();
        assert!(record.violations.is_empty(), "{:#?}", record.violations);
        assert_eq!(record.claimed.len(), JOBS, "every job claimed exactly once");
        let unique: BTreeSet<i64> = record.claimed.iter().copied().collect();
        assert_eq!(unique.len(), JOBS, "no job claimed twice");
        assert_eq!(record.max_running_seen.len(), DESTINATIONS);
        assert!(record.max_running_seen.values().all(|max| *max == 1));
    }

    let counts = t.queue.counts_by_state().await.unwrap();
    assert_eq!(counts[&JobState::Succeeded], JOBS as u64);
    assert_eq!(counts[&JobState::Running], 0);
    let stats = t.queue.stats();
    assert_eq!(stats.claims, JOBS as u64);
    assert_eq!(stats.succeeded, JOBS as u64);
    // Each job: enqueued, claimed, succeeded.
    assert_eq!(count(&t.pool, "job_events").await, 3 * JOBS as i64);
}
}

queue_test! {
#[tokio::test]
async fn claim_takes_due_jobs_oldest_first_and_skips_busy_destinations(backend) {
    let t = queue_on(backend).await;
    assert!(t.queue.claim("w").await.unwrap().is_none(), "empty queue");

    let a1 = t
        .queue
        .enqueue(pull_request("octo/app", "wiki-a", 1), None)
        .await
        .unwrap();
    let a2 = t
        .queue
        .enqueue(pull_request("octo/app", "wiki-a", 2), None)
        .await
        .unwrap();
    let b1 = t
        .queue
        .enqueue(pull_request("octo/app", "wiki-b", 3), None)
        .await
        .unwrap();

    let first = claim_one(&t.queue, "w1").await;
    assert_eq!(first.job.id, a1.job.id);
    assert_eq!(first.job.lease_owner.as_deref(), Some("w1"));
    assert_eq!(
        first.job.lease_until,
        Some(t.clock.now_ms() + 60_000),
        "lease = now + settings.lease"
    );
    // wiki-a is busy: the next claim skips a2 and takes b1.
    let second = claim_one(&t.queue, "w2").await;
    assert_eq!(second.job.id, b1.job.id);
    assert!(t.queue.claim("w3").await.unwrap().is_none());

    // A lease that has expired but was not rescued still blocks its wiki.
    t.clock.advance(Duration::from_secs(61));
    assert!(t.queue.claim("w3").await.unwrap().is_none());

    t.queue.complete(&first.lease, succeeded()).await.unwrap();
    let third = claim_one(&t.queue, "w3").await;
    assert_eq!(third.job.id, a2.job.id);
}
}

queue_test! {
#[tokio::test]
async fn claim_waits_for_run_after(backend) {
    let t = queue_on(backend).await;
    let job = t
        .queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap();
    let claimed = claim_one(&t.queue, "w").await;
    let state = t
        .queue
        .fail(&claimed.lease, "GitHub answered 502", true)
        .await
        .unwrap();
    assert_eq!(state, JobState::Queued);
    let queued = t.queue.get(job.job.id).await.unwrap();
    let delay = queued.run_after - t.clock.now_ms();
    assert!(
        (15_000..=30_000).contains(&delay),
        "first backoff {delay} ms"
    );

    t.clock.advance(Duration::from_millis(delay as u64 - 1));
    assert!(t.queue.claim("w").await.unwrap().is_none(), "not due yet");
    t.clock.advance(Duration::from_millis(1));
    let again = claim_one(&t.queue, "w").await;
    assert_eq!(again.job.id, job.job.id);
    assert_eq!(again.job.attempts, 2);
    assert_ne!(again.lease.token, claimed.lease.token, "fresh lease token");
}
}

queue_test! {
/// The completion and the next claim: the claim may take the destination
/// the completion freed, and both are answered; with nothing left the claim
/// answers `None`; a refused completion does not stop the claim.
#[tokio::test]
async fn complete_and_claim_frees_the_destination_for_the_next_claim(backend) {
    let t = queue_on(backend).await;
    for n in 1..=2 {
        t.queue
            .enqueue(pull_request("octo/app", "octo/wiki", n), None)
            .await
            .unwrap();
    }
    let first = claim_one(&t.queue, "w").await;
    let commits = t.queue.stats().commits;
    let (done, next) = t
        .queue
        .complete_and_claim(&first.lease, succeeded(), "w")
        .await;
    assert_eq!(done.expect("completed").state, JobState::Succeeded);
    let next = next.expect("claim").expect("the destination's next job");
    assert_ne!(next.job.id, first.job.id);
    assert_eq!(next.job.state, JobState::Running);
    assert!(t.queue.stats().commits - commits <= 2);
    let (done, none) = t
        .queue
        .complete_and_claim(&first.lease, succeeded(), "w")
        .await;
    assert!(matches!(done, Err(teammem::queue::QueueError::LeaseLost { .. })), "{done:?}");
    assert!(none.expect("claim").is_none(), "the running job blocks its destination");
    let (done, none) = t
        .queue
        .complete_and_claim(&next.lease, succeeded(), "w")
        .await;
    done.expect("completed");
    assert!(none.expect("claim").is_none(), "nothing left");
    assert_eq!(t.queue.stats().claims, 2);
}
}
