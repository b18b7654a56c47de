//! Leases: heartbeat, rescue of expired leases, the fence against stale
//! workers, failure with retries up to max attempts, release on shutdown.

use teammem::queue::{Completion, JobState, QueueError};

use super::*;

queue_test! {
#[tokio::test]
async fn heartbeat_keeps_a_lease_and_rescue_requeues_an_expired_one(backend) {
    let t = queue_on(backend).await;
    let job = t
        .queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap()
        .job;
    let claimed = claim_one(&t.queue, "worker-a").await;

    // Heartbeats keep the job past its original lease.
    t.clock.advance(Duration::from_secs(50));
    let until = t.queue.heartbeat(&claimed.lease).await.unwrap();
    assert_eq!(until, t.clock.now_ms() + 60_000);
    t.clock.advance(Duration::from_secs(50));
    assert_eq!(t.queue.rescue_expired().await.unwrap(), 0);
    assert_eq!(t.queue.get(job.id).await.unwrap().state, JobState::Running);

    // The worker goes silent: once the lease has run out the rescuer requeues.
    t.clock.advance(Duration::from_secs(10));
    assert_eq!(t.queue.rescue_expired().await.unwrap(), 1);
    let rescued = t.queue.get(job.id).await.unwrap();
    assert_eq!(rescued.state, JobState::Queued);
    assert_eq!(rescued.attempts, 1, "the expired attempt counts");
    assert_eq!(rescued.lease_until, None);
    let delay = rescued.run_after - t.clock.now_ms();
    assert!((15_000..=30_000).contains(&delay), "backoff {delay} ms");
    let events = t.queue.events(job.id).await.unwrap();
    assert_eq!(
        event_names(&events),
        ["enqueued", "claimed", "lease_expired"]
    );
    assert_eq!(events[2].actor, "rescuer");
    assert_eq!(t.queue.stats().rescues, 1);
    // Nothing left to rescue.
    assert_eq!(t.queue.rescue_expired().await.unwrap(), 0);
}
}

queue_test! {
#[tokio::test]
async fn stale_worker_is_fenced_after_rescue_and_reclaim(backend) {
    let t = queue_on(backend).await;
    let job = t
        .queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap()
        .job;
    let stale = claim_one(&t.queue, "worker-a").await;
    t.clock.advance(Duration::from_secs(61));
    assert_eq!(t.queue.rescue_expired().await.unwrap(), 1);
    t.clock.advance(Duration::from_secs(31));
    let fresh = claim_one(&t.queue, "worker-b").await;
    assert_eq!(fresh.job.id, job.id);
    assert_eq!(fresh.job.attempts, 2);

    let before = snapshot(&t.queue, job.id).await;
    let lost = |result: Result<(), QueueError>| match result {
        Err(QueueError::LeaseLost { id }) => assert_eq!(id, job.id),
        other => panic!("expected LeaseLost, got {other:?}"),
    };
    lost(t.queue.heartbeat(&stale.lease).await.map(|_| ()));
    lost(
        t.queue
            .complete(&stale.lease, succeeded())
            .await
            .map(|_| ()),
    );
    lost(t.queue.fail(&stale.lease, "boom", true).await.map(|_| ()));
    lost(t.queue.fail(&stale.lease, "boom", false).await.map(|_| ()));
    lost(t.queue.release(&stale.lease).await);
    assert_eq!(
        snapshot(&t.queue, job.id).await,
        before,
        "stale writes changed nothing"
    );
    assert_eq!(
        t.queue.cursor("octo/app").await.unwrap(),
        None,
        "a stale completion must not move the cursor"
    );
    let message = t
        .queue
        .heartbeat(&stale.lease)
        .await
        .unwrap_err()
        .to_string();
    assert!(message.contains(&format!("job {}", job.id)) && !message.ends_with('.'));

    // The current holder is unaffected.
    t.queue.heartbeat(&fresh.lease).await.unwrap();
    let done = t.queue.complete(&fresh.lease, succeeded()).await.unwrap();
    assert_eq!(done.state, JobState::Succeeded);
    assert_eq!(done.lease_owner.as_deref(), Some("worker-b"));
    // A finished job's lease is spent too.
    lost(
        t.queue
            .complete(&fresh.lease, succeeded())
            .await
            .map(|_| ()),
    );
}
}

queue_test! {
#[tokio::test]
async fn retryable_failures_end_failed_after_max_attempts(backend) {
    let t = queue_on(backend).await; // max_attempts = 3
    let job = t
        .queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap()
        .job;
    assert_eq!(job.max_attempts, 3);
    for attempt in 1..=3 {
        let claimed = claim_one(&t.queue, "w").await;
        assert_eq!(claimed.job.attempts, attempt);
        let state = t
            .queue
            .fail(&claimed.lease, "upstream 503", true)
            .await
            .unwrap();
        let expected = if attempt < 3 {
            JobState::Queued
        } else {
            JobState::Failed
        };
        assert_eq!(state, expected, "after attempt {attempt}");
        t.clock.advance(Duration::from_secs(3600));
    }
    let failed = t.queue.get(job.id).await.unwrap();
    assert_eq!(failed.state, JobState::Failed);
    assert_eq!(failed.attempts, 3);
    assert_eq!(failed.last_error.as_deref(), Some("upstream 503"));
    assert!(failed.finished_at.is_some());
    assert!(
        t.queue.claim("w").await.unwrap().is_none(),
        "failed is terminal"
    );
    let events = t.queue.events(job.id).await.unwrap();
    assert_eq!(
        event_names(&events),
        [
            "enqueued",
            "claimed",
            "retry_scheduled",
            "claimed",
            "retry_scheduled",
            "claimed",
            "failed"
        ]
    );
    assert!(
        events[6]
            .detail
            .as_deref()
            .unwrap()
            .contains("attempts exhausted")
    );
    let stats = t.queue.stats();
    assert_eq!((stats.retries_scheduled, stats.failed), (2, 1));
}
}

queue_test! {
#[tokio::test]
async fn permanent_failure_and_exhausted_rescue_both_end_failed(backend) {
    let t = queue_on(backend).await;
    let permanent = t
        .queue
        .enqueue(pull_request("octo/app", "wiki-a", 1), None)
        .await
        .unwrap()
        .job;
    let claimed = claim_one(&t.queue, "w").await;
    let state = t
        .queue
        .fail(&claimed.lease, "wiki not initialized", false)
        .await
        .unwrap();
    assert_eq!(state, JobState::Failed);
    assert_eq!(t.queue.get(permanent.id).await.unwrap().attempts, 1);

    // A job that kills its worker every time: each expired lease counts.
    let crasher = t
        .queue
        .enqueue(pull_request("octo/app", "wiki-b", 2), None)
        .await
        .unwrap()
        .job;
    for attempt in 1..=3 {
        let claimed = claim_one(&t.queue, "w").await;
        assert_eq!(claimed.job.id, crasher.id);
        t.clock.advance(Duration::from_secs(61));
        assert_eq!(
            t.queue.rescue_expired().await.unwrap(),
            1,
            "attempt {attempt}"
        );
        t.clock.advance(Duration::from_secs(3600));
    }
    let dead = t.queue.get(crasher.id).await.unwrap();
    assert_eq!(dead.state, JobState::Failed);
    assert_eq!(dead.attempts, 3);
    let events = t.queue.events(crasher.id).await.unwrap();
    assert_eq!(events.last().unwrap().event, "failed");
    assert_eq!(events.last().unwrap().actor, "rescuer");
}
}

queue_test! {
#[tokio::test]
async fn release_requeues_without_counting_the_attempt(backend) {
    let t = queue_on(backend).await;
    let job = t
        .queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap()
        .job;
    let claimed = claim_one(&t.queue, "w").await;
    t.queue.release(&claimed.lease).await.unwrap();
    let released = t.queue.get(job.id).await.unwrap();
    assert_eq!(released.state, JobState::Queued);
    assert_eq!(released.attempts, 0);
    assert!(released.run_after <= t.clock.now_ms(), "claimable at once");
    let again = claim_one(&t.queue, "w2").await;
    assert_eq!(again.job.attempts, 1);
    assert_eq!(
        event_names(&t.queue.events(job.id).await.unwrap()),
        ["enqueued", "claimed", "released", "claimed"]
    );
}
}

queue_test! {
#[tokio::test]
async fn completions_store_their_outcome(backend) {
    let t = queue_on(backend).await;
    let outcomes = [
        (
            Completion::NoChange {
                receipt: serde_json::json!({"pages": []}),
            },
            JobState::NoChange,
        ),
        (
            Completion::Skipped {
                reason: "no merged pull requests".into(),
            },
            JobState::Skipped,
        ),
        (
            Completion::Rejected {
                reason: "push_after is no longer on main".into(),
            },
            JobState::Rejected,
        ),
        (succeeded(), JobState::Succeeded),
    ];
    for (n, (completion, state)) in outcomes.into_iter().enumerate() {
        let destination = format!("wiki-{n}");
        t.queue
            .enqueue(pull_request("octo/app", &destination, n as i64 + 1), None)
            .await
            .unwrap();
        let claimed = claim_one(&t.queue, "w").await;
        let done = t
            .queue
            .complete(&claimed.lease, completion.clone())
            .await
            .unwrap();
        assert_eq!(done.state, state);
        assert!(done.finished_at.is_some() && done.lease_until.is_none());
        match completion {
            Completion::Succeeded { receipt } | Completion::NoChange { receipt } => {
                assert_eq!(done.receipt, Some(receipt));
            }
            Completion::Skipped { reason } => {
                assert_eq!(done.receipt, Some(serde_json::json!({ "skipped": reason })));
            }
            Completion::Rejected { reason } => assert_eq!(done.last_error, Some(reason)),
        }
        let events = t.queue.events(done.id).await.unwrap();
        assert_eq!(events.last().unwrap().event, state.as_str());
        assert_eq!(events.last().unwrap().actor, "w");
    }
    let stats = t.queue.stats();
    assert_eq!(
        (
            stats.succeeded,
            stats.no_change,
            stats.skipped,
            stats.rejected
        ),
        (1, 1, 1, 1)
    );
}
}

queue_test! {
#[tokio::test]
async fn each_rescued_job_gets_one_warn_line_naming_it_and_its_new_state(backend) {
    let t = queue_on(backend).await;
    let job = t
        .queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap()
        .job;
    claim_one(&t.queue, "worker-a").await;
    t.clock.advance(Duration::from_secs(61));
    let written = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let sink = written.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .with_ansi(false)
        .with_writer(move || LogSink(sink.clone()))
        .finish();
    // This test's thread runs the rescue's logging (a current-thread runtime).
    let guard = tracing::subscriber::set_default(subscriber);
    assert_eq!(t.queue.rescue_expired().await.unwrap(), 1);
    drop(guard);
    let text = String::from_utf8(written.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    let job_field = format!("job={}", job.id);
    for expected in [
        " WARN ",
        job_field.as_str(),
        "state=queued",
        "lease of worker-a expired on attempt 1 of",
    ] {
        assert!(lines[0].contains(expected), "{expected:?} in {text}");
    }
}
}

/// Collects what a test's log subscriber writes.
struct LogSink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
