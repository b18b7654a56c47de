//! Idempotent enqueue (by identity and by delivery id) and coalescing of
//! contiguous ranges into a still-queued job.

use teammem::queue::{Disposition, JobState, QueueError};

use super::*;

queue_test! {
#[tokio::test]
async fn duplicate_identity_returns_the_existing_job(backend) {
    let t = queue_on(backend).await;
    let first = t
        .queue
        .enqueue(dispatched("octo/app", 1, 2, 77, 1), Some("delivery-1"))
        .await
        .unwrap();
    assert_eq!(first.disposition, Disposition::Created);
    assert_eq!(first.job.state, JobState::Queued);
    assert_eq!(first.job.kind.columns().run_id, Some(77));

    // Same run and attempt, new delivery id: the same job, and the new
    // delivery id now points at it.
    let again = t
        .queue
        .enqueue(dispatched("octo/app", 1, 2, 77, 1), Some("delivery-2"))
        .await
        .unwrap();
    assert_eq!(again.disposition, Disposition::Duplicate);
    assert_eq!(again.job.id, first.job.id);
    let replay = t
        .queue
        .enqueue(dispatched("octo/app", 1, 2, 77, 1), Some("delivery-2"))
        .await
        .unwrap();
    assert_eq!(replay.disposition, Disposition::Duplicate);
    assert_eq!(replay.job.id, first.job.id);

    // A re-run of the workflow is a new attempt, hence a new identity.
    let rerun = t
        .queue
        .enqueue(dispatched("octo/app", 1, 2, 77, 2), None)
        .await
        .unwrap();
    assert_eq!(rerun.disposition, Disposition::Created);
    assert_ne!(rerun.job.id, first.job.id);

    // Pull-request identity: source + number + merge sha.
    let pr = t
        .queue
        .enqueue(pull_request("octo/app", "octo/app", 5), None)
        .await
        .unwrap();
    let pr_again = t
        .queue
        .enqueue(pull_request("octo/app", "octo/app", 5), None)
        .await
        .unwrap();
    assert_eq!(pr_again.disposition, Disposition::Duplicate);
    assert_eq!(pr_again.job.id, pr.job.id);

    assert_eq!(count(&t.pool, "jobs").await, 3);
    assert_eq!(count(&t.pool, "deliveries").await, 2);
    // Duplicates are not transitions: one event per created job.
    assert_eq!(count(&t.pool, "job_events").await, 3);
    assert_eq!(t.queue.stats().duplicates, 3);
}
}

queue_test! {
#[tokio::test]
async fn known_delivery_id_returns_its_job_whatever_the_body(backend) {
    let t = queue_on(backend).await;
    let first = t
        .queue
        .enqueue(dispatched("octo/app", 1, 2, 10, 1), Some("d-1"))
        .await
        .unwrap();
    // A replay carrying a different body under the same delivery id does not
    // create anything.
    let replay = t
        .queue
        .enqueue(pull_request("octo/app", "octo/app", 9), Some("d-1"))
        .await
        .unwrap();
    assert_eq!(replay.disposition, Disposition::Duplicate);
    assert_eq!(replay.job, first.job);
    assert_eq!(count(&t.pool, "jobs").await, 1);
}
}

/// Enqueues that wait for the writer together commit in one batch, in
/// arrival order, each seeing the ones before it as lone writes would. (On
/// the test's single-threaded runtime all five wait before the writer task
/// first runs.)
/// (SQLite only: the batching of its writer task.)
#[tokio::test]
async fn enqueues_stored_together_see_each_other_in_arrival_order() {
    let t = test_queue().await;
    let before = t.queue.stats();
    let (first, extends, same_run, same_delivery, apart) = tokio::join!(
        t.queue
            .enqueue(dispatched("octo/app", 1, 2, 100, 1), Some("d-1")),
        t.queue
            .enqueue(dispatched("octo/app", 2, 3, 101, 1), Some("d-2")),
        t.queue
            .enqueue(dispatched("octo/app", 1, 2, 100, 1), Some("d-3")),
        t.queue.enqueue(range("octo/app", 7, 8), Some("d-1")),
        t.queue.enqueue(range("octo/app", 5, 6), None),
    );
    let first = first.unwrap();
    assert_eq!(first.disposition, Disposition::Created);
    let extends = extends.unwrap();
    assert_eq!(
        extends.disposition,
        Disposition::Coalesced { into: first.job.id }
    );
    assert_eq!(extends.job.kind.columns().push_after.cloned(), Some(sha(3)));
    assert_eq!(extends.job.coalesced_count, 1);
    for duplicate in [same_run.unwrap(), same_delivery.unwrap()] {
        assert_eq!(duplicate.disposition, Disposition::Duplicate);
        assert_eq!(duplicate.job.id, first.job.id);
        assert_eq!(
            duplicate.job.kind.columns().push_after.cloned(),
            Some(sha(3))
        );
    }
    let apart = apart.unwrap();
    assert_eq!(apart.disposition, Disposition::Created);
    assert_ne!(apart.job.id, first.job.id);

    assert_eq!(count(&t.pool, "jobs").await, 2);
    // d-1 and d-2 for the jobs they made, d-3 remembered for the duplicate.
    assert_eq!(count(&t.pool, "deliveries").await, 3);
    let events = t.queue.events(first.job.id).await.unwrap();
    assert_eq!(event_names(&events), ["enqueued", "coalesced"]);
    let after = t.queue.stats();
    assert_eq!(after.commits - before.commits, 1, "one commit for all five");
    assert_eq!(after.writes - before.writes, 5);
    assert_eq!(
        (after.enqueued, after.coalesced, after.duplicates),
        (2, 1, 2)
    );
}

/// Twenty-one enqueues waiting together commit in one batch, and each hears
/// its own job, in arrival order.
/// (SQLite only: the batching of its writer task.)
#[tokio::test]
async fn twenty_one_enqueues_stored_together_each_hear_their_own_job() {
    let t = test_queue().await;
    let before = t.queue.stats();
    let enqueues = (0..21u64).map(|n| {
        let queue = t.queue.clone();
        async move {
            queue
                .enqueue(range("octo/app", 100 + 2 * n, 101 + 2 * n), None)
                .await
        }
    });
    let answers = futures_util::future::join_all(enqueues).await;
    let mut last_id = 0;
    for (n, answer) in answers.into_iter().enumerate() {
        let enqueued = answer.unwrap();
        assert_eq!(enqueued.disposition, Disposition::Created);
        assert_eq!(
            enqueued.job.kind.columns().push_after.cloned(),
            Some(sha(101 + 2 * n as u64))
        );
        assert!(enqueued.job.id > last_id, "ids follow arrival order");
        last_id = enqueued.job.id;
    }
    assert_eq!(count(&t.pool, "jobs").await, 21);
    let after = t.queue.stats();
    assert_eq!(after.commits - before.commits, 1);
    assert_eq!(after.writes - before.writes, 21);
}

queue_test! {
#[tokio::test]
async fn concurrent_enqueues_of_one_identity_create_one_job(backend) {
    let t = queue_on(backend).await;
    let mut tasks = Vec::new();
    for n in 0..8 {
        let queue = t.queue.clone();
        tasks.push(tokio::spawn(async move {
            let delivery = format!("delivery-{n}");
            queue
                .enqueue(dispatched("octo/app", 1, 2, 5, 1), Some(&delivery))
                .await
        }));
    }
    let mut created = 0;
    let mut ids = std::collections::BTreeSet::new();
    for task in tasks {
        let enqueued = task.await.unwrap().unwrap();
        created += usize::from(enqueued.disposition == Disposition::Created);
        ids.insert(enqueued.job.id);
    }
    assert_eq!(created, 1);
    assert_eq!(ids.len(), 1);
    assert_eq!(count(&t.pool, "jobs").await, 1);
    assert_eq!(count(&t.pool, "deliveries").await, 8);
}
}

queue_test! {
#[tokio::test]
async fn contiguous_range_extends_a_queued_job(backend) {
    let t = queue_on(backend).await;
    let first = t
        .queue
        .enqueue(dispatched("octo/app", 1, 2, 100, 1), Some("d-1"))
        .await
        .unwrap();
    let second = t
        .queue
        .enqueue(dispatched("octo/app", 2, 3, 101, 1), Some("d-2"))
        .await
        .unwrap();
    assert_eq!(
        second.disposition,
        Disposition::Coalesced { into: first.job.id }
    );
    assert_eq!(second.job.id, first.job.id);
    assert_eq!(second.job.kind.columns().push_before.cloned(), Some(sha(1)));
    assert_eq!(second.job.kind.columns().push_after.cloned(), Some(sha(3)));
    assert_eq!(second.job.coalesced_count, 1);
    assert_eq!(second.job.state, JobState::Queued);

    // A third contiguous push keeps extending the same job.
    let third = t
        .queue
        .enqueue(range("octo/app", 3, 4), None)
        .await
        .unwrap();
    assert_eq!(
        third.disposition,
        Disposition::Coalesced { into: first.job.id }
    );
    assert_eq!(third.job.kind.columns().push_after.cloned(), Some(sha(4)));
    assert_eq!(third.job.coalesced_count, 2);

    // Both identities and both deliveries answer with the merged job.
    for (job, delivery) in [
        (dispatched("octo/app", 1, 2, 100, 1), "d-1"),
        (dispatched("octo/app", 2, 3, 101, 1), "d-2"),
    ] {
        let by_identity = t.queue.enqueue(job.clone(), None).await.unwrap();
        assert_eq!(by_identity.disposition, Disposition::Duplicate);
        assert_eq!(by_identity.job.id, first.job.id);
        let by_delivery = t
            .queue
            .enqueue(range("other/repo", 8, 9), Some(delivery))
            .await
            .unwrap();
        assert_eq!(by_delivery.job.id, first.job.id);
    }
    assert_eq!(count(&t.pool, "jobs").await, 1);
    let events = t.queue.events(first.job.id).await.unwrap();
    assert_eq!(event_names(&events), ["enqueued", "coalesced", "coalesced"]);
    assert_eq!(t.queue.stats().coalesced, 2);
}
}

queue_test! {
#[tokio::test]
async fn non_contiguous_range_is_a_new_job(backend) {
    let t = queue_on(backend).await;
    let first = t
        .queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap();
    let gap = t
        .queue
        .enqueue(range("octo/app", 3, 4), None)
        .await
        .unwrap();
    assert_eq!(gap.disposition, Disposition::Created);
    assert_ne!(gap.job.id, first.job.id);
    // Nor does a range that ends where the queued one begins.
    let before = t
        .queue
        .enqueue(range("octo/app", 0, 1), None)
        .await
        .unwrap();
    assert_eq!(before.disposition, Disposition::Created);
    assert_eq!(t.queue.get(first.job.id).await.unwrap(), first.job);
}
}

queue_test! {
#[tokio::test]
async fn range_never_coalesces_into_a_running_job(backend) {
    let t = queue_on(backend).await;
    let first = t
        .queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap();
    let claimed = claim_one(&t.queue, "worker-a").await;
    assert_eq!(claimed.job.id, first.job.id);

    let next = t
        .queue
        .enqueue(range("octo/app", 2, 3), None)
        .await
        .unwrap();
    assert_eq!(next.disposition, Disposition::Created);
    assert_ne!(next.job.id, first.job.id);
    let running = t.queue.get(first.job.id).await.unwrap();
    assert_eq!(running.kind.columns().push_after.cloned(), Some(sha(2)), "a running range is fixed");
    assert_eq!(running.coalesced_count, 0);
}
}

queue_test! {
#[tokio::test]
async fn range_never_coalesces_across_sources_destinations_or_with_pull_requests(backend) {
    let t = queue_on(backend).await;
    let first = t
        .queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap();

    let other_source = t
        .queue
        .enqueue(range("octo/lib", 2, 3), None)
        .await
        .unwrap();
    assert_eq!(other_source.disposition, Disposition::Created);

    let mut other_destination = range("octo/app", 2, 3);
    other_destination.destination = "octo/app-docs".into();
    let other_destination = t.queue.enqueue(other_destination, None).await.unwrap();
    assert_eq!(other_destination.disposition, Disposition::Created);

    let pr = t
        .queue
        .enqueue(pull_request("octo/app", "octo/app", 3), None)
        .await
        .unwrap();
    assert_eq!(pr.disposition, Disposition::Created);

    assert_eq!(t.queue.get(first.job.id).await.unwrap(), first.job);
    assert_eq!(count(&t.pool, "jobs").await, 4);
}
}

queue_test! {
#[tokio::test]
async fn bad_input_is_refused_and_writes_nothing(backend) {
    let t = queue_on(backend).await;
    let empty_range = range("octo/app", 1, 1);
    // A short or non-hex SHA cannot be built at all (`Sha` is checked when
    // parsed); the all-zero one is well-formed and still refused.
    let zero_sha = {
        let mut job = range("octo/app", 1, 2);
        job.kind = teammem::queue::JobKind::Range {
            before: teammem::ids::Sha::parse(&"0".repeat(40)).unwrap(),
            after: sha(2),
            run_id: None,
            run_attempt: None,
        };
        job
    };
    for (job, delivery, expected) in [
        (empty_range, None, "push_after: equals push_before"),
        (
            zero_sha,
            None,
            "push_before: the all-zero SHA names no commit",
        ),
        (
            range("octo/app", 1, 2),
            Some(""),
            "delivery_id: must not be empty",
        ),
    ] {
        let error = t.queue.enqueue(job, delivery).await.unwrap_err();
        assert!(
            matches!(error, QueueError::InvalidInput { .. }),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.starts_with(expected), "{message}");
        assert!(!message.ends_with('.'));
    }
    for table in ["jobs", "job_events", "job_identities", "deliveries"] {
        assert_eq!(count(&t.pool, table).await, 0, "{table}");
    }
}
}
