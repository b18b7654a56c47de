//! Retention: old terminal jobs go with their events, identities and
//! deliveries; recent and unfinished jobs stay; old delivery ids are forgotten.

use teammem::queue::{Disposition, JobState};

use super::*;

async fn events_rows(t: &TestQueue, job_id: i64) -> i64 {
    on_pool!(&t.pool, |pool| {
        sqlx::query_scalar("SELECT COUNT(*) FROM job_events WHERE job_id = $1")
            .bind(job_id)
            .fetch_one(pool)
            .await
            .unwrap()
    })
}

queue_test! {
#[tokio::test]
async fn prune_removes_old_terminal_jobs_and_keeps_the_rest(backend) {
    let t = queue_on(backend).await; // retention 7 days, deliveries 3 days
    let day = Duration::from_secs(24 * 3600);

    // Day 0: one job succeeds, one fails, one is cancelled, one stays queued
    // (its wiki is busy), one stays running.
    let old_ok = t
        .queue
        .enqueue(pull_request("octo/app", "wiki-a", 1), Some("d-ok"))
        .await
        .unwrap()
        .job;
    let old_failed = t
        .queue
        .enqueue(pull_request("octo/app", "wiki-b", 2), None)
        .await
        .unwrap()
        .job;
    let old_cancelled = t
        .queue
        .enqueue(pull_request("octo/app", "wiki-c", 3), None)
        .await
        .unwrap()
        .job;
    let running = t
        .queue
        .enqueue(pull_request("octo/app", "wiki-d", 4), None)
        .await
        .unwrap()
        .job;
    let queued = t
        .queue
        .enqueue(pull_request("octo/app", "wiki-d", 5), Some("d-queued"))
        .await
        .unwrap()
        .job;
    let a = claim_one(&t.queue, "w").await;
    t.queue.complete(&a.lease, succeeded()).await.unwrap();
    let b = claim_one(&t.queue, "w").await;
    t.queue.fail(&b.lease, "bad", false).await.unwrap();
    t.queue
        .cancel(old_cancelled.id, "maintainer")
        .await
        .unwrap();
    let r = claim_one(&t.queue, "w").await;
    assert_eq!(r.job.id, running.id);

    // Day 6: a recent job finishes.
    t.clock.advance(6 * day);
    let recent = t
        .queue
        .enqueue(pull_request("octo/app", "wiki-e", 6), None)
        .await
        .unwrap()
        .job;
    let e = claim_one(&t.queue, "w").await;
    t.queue.complete(&e.lease, succeeded()).await.unwrap();
    assert_eq!(
        t.queue.prune().await.unwrap(),
        0,
        "nothing is 7 days old yet"
    );
    // ...but the day-0 delivery ids are past their 3 days.
    assert_eq!(count(&t.pool, "deliveries").await, 0);

    // Day 8: the day-0 terminal jobs are past retention.
    t.clock.advance(2 * day);
    t.queue.heartbeat(&r.lease).await.unwrap();
    assert_eq!(t.queue.prune().await.unwrap(), 3);
    for gone in [old_ok.id, old_failed.id, old_cancelled.id] {
        assert!(t.queue.get(gone).await.is_err(), "job {gone} pruned");
        assert_eq!(
            events_rows(&t, gone).await,
            0,
            "events of job {gone} pruned"
        );
    }
    for kept in [running.id, queued.id, recent.id] {
        assert!(t.queue.get(kept).await.is_ok(), "job {kept} kept");
        assert!(events_rows(&t, kept).await > 0);
    }
    assert_eq!(
        t.queue.get(running.id).await.unwrap().state,
        JobState::Running
    );
    assert_eq!(
        t.queue.get(queued.id).await.unwrap().state,
        JobState::Queued
    );
    // The pruned identity is free again; a kept one still deduplicates.
    let again = t
        .queue
        .enqueue(pull_request("octo/app", "wiki-a", 1), None)
        .await
        .unwrap();
    assert_eq!(again.disposition, Disposition::Created);
    assert!(again.job.id > recent.id, "ids are never reused");
    let dup = t
        .queue
        .enqueue(pull_request("octo/app", "wiki-e", 6), None)
        .await
        .unwrap();
    assert_eq!(dup.disposition, Disposition::Duplicate);
    assert_eq!(t.queue.prune().await.unwrap(), 0, "idempotent");
}
}

queue_test! {
#[tokio::test]
async fn delivery_ids_are_remembered_for_their_retention(backend) {
    let t = queue_on(backend).await;
    let job = t
        .queue
        .enqueue(range("octo/app", 1, 2), Some("d-1"))
        .await
        .unwrap()
        .job;
    t.clock.advance(Duration::from_secs(3 * 24 * 3600 - 1));
    t.queue.prune().await.unwrap();
    let replay = t
        .queue
        .enqueue(range("other/app", 5, 6), Some("d-1"))
        .await
        .unwrap();
    assert_eq!(
        replay.job.id, job.id,
        "replay within 3 days answers the job"
    );
    t.clock.advance(Duration::from_secs(1));
    t.queue.prune().await.unwrap();
    assert_eq!(count(&t.pool, "deliveries").await, 0);
    assert!(
        t.queue.get(job.id).await.is_ok(),
        "the queued job itself stays"
    );
}
}

queue_test! {
#[tokio::test]
async fn delivery_retention_is_at_least_three_days(backend) {
    let t = queue_on_with(backend, QueueSettings {
        delivery_retention: Duration::from_secs(60),
        ..settings()
    })
    .await;
    assert_eq!(
        t.queue.settings().delivery_retention,
        Duration::from_secs(3 * 24 * 3600)
    );
}
}
