//! Backfills in the queue (`queue/backfill.rs`): stored in one write and
//! only once, claimed in order even when an earlier range is in backoff,
//! never coalesced with an ordinary range, cancelled together without
//! touching ordinary jobs, and bad input changes nothing.

use teammem::queue::backfill::NewBackfill;
use teammem::queue::{Disposition, JobState, QueueError};

use super::*;

fn backfill(ranges: &[(u64, u64)]) -> NewBackfill {
    NewBackfill {
        source: "octo/app".into(),
        destination: "octo/app".into(),
        spec: "--last 3".into(),
        actor: "cli".into(),
        ranges: ranges.iter().map(|(b, a)| (sha(*b), sha(*a))).collect(),
    }
}

queue_test! {
#[tokio::test]
async fn a_backfill_is_stored_once_and_cancelled_ranges_come_back(backend) {
    let t = queue_on(backend).await;
    let first = t.queue.enqueue_backfill(backfill(&[(1, 2), (2, 3), (3, 4)])).await.unwrap();
    assert!(first.backfill_id.is_some());
    assert_eq!(first.enqueued.len(), 3);
    // Twice: nothing new, no second backfill row.
    let again = t.queue.enqueue_backfill(backfill(&[(1, 2), (2, 3), (3, 4)])).await.unwrap();
    assert_eq!((again.backfill_id, again.enqueued.len(), again.already), (None, 0, 3));
    assert_eq!(count(&t.pool, "jobs").await, 3);
    assert_eq!(t.queue.backfills(Some("octo/app")).await.unwrap().len(), 1);

    // An ordinary range starting where the last one ends is not merged into it.
    let ordinary = t.queue.enqueue(range("octo/app", 4, 5), None).await.unwrap();
    assert_eq!(ordinary.disposition, Disposition::Created);

    // Cancel: the backfill's queued ranges only.
    let cancelled = t.queue.cancel_backfills("octo/app", "cli").await.unwrap();
    assert_eq!(cancelled, first.enqueued);
    assert_eq!(t.queue.get(ordinary.job.id).await.unwrap().state, JobState::Queued);
    let status = &t.queue.backfills(None).await.unwrap()[0];
    assert_eq!((status.done(), status.in_flight(), status.ranges), (0, 0, 3));
    assert_eq!(status.states.get(&JobState::Cancelled), Some(&3));

    // Running it again queues the cancelled ranges again, in a new backfill.
    let back = t.queue.enqueue_backfill(backfill(&[(1, 2), (2, 3), (3, 4)])).await.unwrap();
    assert_eq!(back.requeued, first.enqueued);
    assert_ne!(back.backfill_id, first.backfill_id);
    assert_eq!(count(&t.pool, "jobs").await, 4);
}
}

queue_test! {
#[tokio::test]
async fn a_backfills_ranges_are_claimed_in_order_even_after_a_failure(backend) {
    let t = queue_on(backend).await;
    let stored = t.queue.enqueue_backfill(backfill(&[(1, 2), (2, 3)])).await.unwrap();
    let first = claim_one(&t.queue, "w").await;
    assert_eq!(first.job.id, stored.enqueued[0]);
    // The first range fails and waits out its backoff: the second is due
    // but waits for it.
    let state = t.queue.fail(&first.lease, "forge down", true).await.unwrap();
    assert_eq!(state, JobState::Queued);
    assert!(t.queue.claim("w").await.unwrap().is_none());
    // Another wiki's jobs are not held back.
    t.queue.enqueue(range("octo/lib", 1, 2), None).await.unwrap();
    assert_eq!(claim_one(&t.queue, "w").await.job.source, "octo/lib");

    t.clock.advance(Duration::from_secs(3600));
    let again = claim_one(&t.queue, "w").await;
    assert_eq!(again.job.id, stored.enqueued[0]);
    t.queue.complete(&again.lease, succeeded()).await.unwrap();
    assert_eq!(claim_one(&t.queue, "w").await.job.id, stored.enqueued[1]);
}
}

queue_test! {
#[tokio::test]
async fn a_bad_backfill_changes_nothing(backend) {
    let t = queue_on(backend).await;
    for bad in [backfill(&[]), backfill(&[(1, 2), (3, 3)])] {
        let refused = t.queue.enqueue_backfill(bad).await.unwrap_err();
        assert!(matches!(refused, QueueError::InvalidInput { field: "ranges", .. }), "{refused}");
    }
    let mut control = backfill(&[(1, 2)]);
    control.spec = "--last\n3".into();
    assert!(t.queue.enqueue_backfill(control).await.is_err());
    assert_eq!(count(&t.pool, "jobs").await, 0);
    assert!(t.queue.backfills(None).await.unwrap().is_empty());
}
}
