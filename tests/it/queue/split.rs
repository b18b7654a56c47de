//! A range larger than one job (`queue/enqueue.rs` `enqueue_parts`, the rule
//! in `ingest/split.rs`): its parts are stored in one write, in order, each
//! an ordinary job, a redelivery answers with the first; they are claimed in
//! order even while an earlier part waits out a backoff; a bounded enqueue
//! extends only the queued job its caller measured; bad parts change nothing.

use teammem::queue::{Coalesce, Disposition, JobState, QueueError};

use super::*;

fn parts(cuts: &[u64]) -> Vec<(Sha, Sha)> {
    cuts.windows(2).map(|w| (sha(w[0]), sha(w[1]))).collect()
}

queue_test! {
#[tokio::test]
async fn a_split_range_is_stored_once_in_order_and_a_redelivery_gets_its_first_part(backend) {
    let t = queue_on(backend).await;
    let whole = dispatched("octo/app", 1, 4, 77, 1);
    let stored = t
        .queue
        .enqueue_parts(whole.clone(), Some("d-1"), parts(&[1, 2, 3, 4]))
        .await
        .unwrap();
    assert_eq!(stored.disposition, Disposition::Created);
    assert_eq!(stored.created, 3);
    let ranges: Vec<(Option<Sha>, Option<Sha>)> = stored
        .jobs
        .iter()
        .map(|j| (j.kind.columns().push_before.cloned(), j.kind.columns().push_after.cloned()))
        .collect();
    assert_eq!(
        ranges,
        vec![
            (Some(sha(1)), Some(sha(2))),
            (Some(sha(2)), Some(sha(3))),
            (Some(sha(3)), Some(sha(4)))
        ]
    );
    assert!(stored.jobs.windows(2).all(|w| w[0].id < w[1].id), "ids in order");
    for job in &stored.jobs {
        assert_eq!(job.state, JobState::Queued);
        assert_eq!(job.origin, Origin::Dispatch);
        let events = t.queue.events(job.id).await.unwrap();
        assert_eq!(event_names(&events), ["enqueued"]);
    }
    assert_eq!(count(&t.pool, "jobs").await, 3);

    // The same delivery, and the same run under another delivery: the first part.
    for delivery in ["d-1", "d-2"] {
        let again = t
            .queue
            .enqueue_parts(whole.clone(), Some(delivery), parts(&[1, 2, 3, 4]))
            .await
            .unwrap();
        assert_eq!(again.disposition, Disposition::Duplicate);
        assert_eq!(again.jobs.len(), 1);
        assert_eq!(again.jobs[0].id, stored.jobs[0].id);
    }
    // An unsplit enqueue of the same run is the same answer.
    let plain = t.queue.enqueue(whole.clone(), None).await.unwrap();
    assert_eq!((plain.disposition, plain.job.id), (Disposition::Duplicate, stored.jobs[0].id));
    assert_eq!(count(&t.pool, "jobs").await, 3);

    // A re-run of the workflow (another attempt) is new jobs, as unsplit.
    let rerun = t
        .queue
        .enqueue_parts(dispatched("octo/app", 1, 4, 77, 2), Some("d-3"), parts(&[1, 2, 3, 4]))
        .await
        .unwrap();
    assert_eq!((rerun.disposition, rerun.created), (Disposition::Created, 3));

    // Without a run, a part that already stands for a job is not stored again.
    t.queue.enqueue(range("octo/lib", 2, 3), None).await.unwrap();
    let sweep = t
        .queue
        .enqueue_parts(range("octo/lib", 1, 4), None, parts(&[1, 2, 3, 4]))
        .await
        .unwrap();
    assert_eq!(sweep.created, 2);
    assert_eq!(sweep.jobs.len(), 3);
    assert_eq!(count(&t.pool, "jobs").await, 3 + 3 + 1 + 2);
}
}

queue_test! {
#[tokio::test]
async fn parts_are_claimed_in_order_even_while_the_first_waits_out_a_backoff(backend) {
    let t = queue_on(backend).await;
    let stored = t
        .queue
        .enqueue_parts(range("octo/app", 1, 3), None, parts(&[1, 2, 3]))
        .await
        .unwrap();
    let first = claim_one(&t.queue, "w").await;
    assert_eq!(first.job.id, stored.jobs[0].id);
    assert_eq!(t.queue.fail(&first.lease, "forge down", true).await.unwrap(), JobState::Queued);
    // The second part is due, but waits for the first.
    assert!(t.queue.claim("w").await.unwrap().is_none());
    // Another wiki is not held back.
    t.queue.enqueue(range("octo/lib", 1, 2), None).await.unwrap();
    assert_eq!(claim_one(&t.queue, "w").await.job.source, "octo/lib");

    t.clock.advance(Duration::from_secs(3600));
    let again = claim_one(&t.queue, "w").await;
    assert_eq!(again.job.id, stored.jobs[0].id);
    t.queue.complete(&again.lease, succeeded()).await.unwrap();
    let second = claim_one(&t.queue, "w").await;
    assert_eq!(second.job.id, stored.jobs[1].id);
    // A part that failed for good does not hold the rest back forever.
    let third = t
        .queue
        .enqueue_parts(range("octo/app", 3, 5), None, parts(&[3, 4, 5]))
        .await
        .unwrap();
    assert_eq!(t.queue.fail(&second.lease, "bad", false).await.unwrap(), JobState::Failed);
    let next = claim_one(&t.queue, "w").await;
    assert_eq!(next.job.id, third.jobs[0].id);
    assert_eq!(t.queue.fail(&next.lease, "bad", false).await.unwrap(), JobState::Failed);
    assert_eq!(claim_one(&t.queue, "w").await.job.id, third.jobs[1].id);
}
}

queue_test! {
#[tokio::test]
async fn a_bounded_enqueue_extends_only_the_job_its_caller_measured(backend) {
    let t = queue_on(backend).await;
    let queued = t.queue.enqueue(range("octo/app", 1, 2), None).await.unwrap().job;
    let next = range("octo/app", 2, 3);
    let candidate = t.queue.coalesce_candidate(&next).await.unwrap().unwrap();
    assert_eq!(candidate.id, queued.id);

    // Never, or measured from another start: a job of its own.
    let never = t.queue.enqueue_bounded(next.clone(), None, Coalesce::Never).await.unwrap();
    assert_eq!(never.disposition, Disposition::Created);
    let other = t
        .queue
        .enqueue_bounded(range("octo/app", 3, 4), None, Coalesce::IfStartsAt(sha(1)))
        .await
        .unwrap();
    assert_eq!(other.disposition, Disposition::Created, "job 2..3 starts at 2, not 1");

    // Measured from the queued job's start: extended.
    let measured = t
        .queue
        .enqueue_bounded(range("octo/app", 4, 5), None, Coalesce::IfStartsAt(sha(3)))
        .await
        .unwrap();
    assert_eq!(measured.disposition, Disposition::Coalesced { into: other.job.id });
    assert_eq!(t.queue.get(other.job.id).await.unwrap().kind.columns().push_after.cloned(), Some(sha(5)));

    // A split's parts are never extended by a bounded caller that did not
    // measure them, and a backfill's never at all.
    let split = t
        .queue
        .enqueue_parts(range("octo/app", 10, 12), None, parts(&[10, 11, 12]))
        .await
        .unwrap();
    let after_split = t
        .queue
        .enqueue_bounded(range("octo/app", 12, 13), None, Coalesce::IfStartsAt(sha(10)))
        .await
        .unwrap();
    assert_eq!(after_split.disposition, Disposition::Created);
    assert_eq!(t.queue.get(split.jobs[1].id).await.unwrap().kind.columns().push_after.cloned(), Some(sha(12)));
}
}

queue_test! {
#[tokio::test]
async fn bad_parts_change_nothing(backend) {
    let t = queue_on(backend).await;
    let whole = range("octo/app", 1, 4);
    let cases: Vec<(Vec<(Sha, Sha)>, &str)> = vec![
        (parts(&[1, 4]), "2 to"),
        (parts(&[1, 2, 3]), "must run from"),
        (parts(&[0, 2, 4]), "must run from"),
        (vec![(sha(1), sha(2)), (sha(3), sha(4))], "part 1 ends at"),
        (vec![(sha(1), sha(1)), (sha(1), sha(4))], "part 1 is empty"),
    ];
    for (bad, expected) in cases {
        let err = t.queue.enqueue_parts(whole.clone(), Some("d"), bad).await.unwrap_err();
        match err {
            QueueError::InvalidInput { field, reason } => {
                assert_eq!(field, "parts");
                assert!(reason.contains(expected), "{reason:?} vs {expected:?}");
            }
            other => panic!("expected invalid input, got {other:?}"),
        }
    }
    let pr = pull_request("octo/app", "octo/app", 7);
    assert!(t.queue.enqueue_parts(pr, None, parts(&[1, 2, 3])).await.is_err());
    for table in ["jobs", "job_identities", "deliveries", "job_events"] {
        assert_eq!(count(&t.pool, table).await, 0, "{table}");
    }
}
}
