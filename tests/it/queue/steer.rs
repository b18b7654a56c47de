//! Cancel and retry: the allowed transitions, and refusals that change nothing.

use teammem::queue::{Completion, JobState, QueueError};

use super::*;

/// Puts one job in each state and returns their ids by state.
async fn one_job_per_state(t: &TestQueue) -> Vec<(JobState, i64)> {
    let mut ids = Vec::new();
    let mut next = 0i64;
    let mut enqueue = || {
        next += 1;
        pull_request("octo/app", &format!("wiki-{next}"), next)
    };
    let queued = t.queue.enqueue(enqueue(), None).await.unwrap().job;
    ids.push((JobState::Queued, queued.id));
    let mut claimed_jobs = Vec::new();
    for state in [
        JobState::Running,
        JobState::Succeeded,
        JobState::NoChange,
        JobState::Skipped,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Rejected,
    ] {
        let job = t.queue.enqueue(enqueue(), None).await.unwrap().job;
        claimed_jobs.push((state, job.id));
    }
    // Claims go by id, so the would-be queued job is claimed first; it is
    // released at the end, once every other job is where it should be.
    let first = claim_one(&t.queue, "w").await;
    assert_eq!(first.job.id, queued.id);
    for (state, id) in &claimed_jobs {
        let claimed = claim_one(&t.queue, "w").await;
        assert_eq!(claimed.job.id, *id);
        match state {
            JobState::Running => {}
            JobState::Succeeded => {
                drop(t.queue.complete(&claimed.lease, succeeded()).await.unwrap())
            }
            JobState::NoChange => drop(
                t.queue
                    .complete(
                        &claimed.lease,
                        Completion::NoChange {
                            receipt: serde_json::json!({}),
                        },
                    )
                    .await
                    .unwrap(),
            ),
            JobState::Skipped => drop(
                t.queue
                    .complete(
                        &claimed.lease,
                        Completion::Skipped {
                            reason: "nothing".into(),
                        },
                    )
                    .await
                    .unwrap(),
            ),
            JobState::Failed => {
                t.queue.fail(&claimed.lease, "bad", false).await.unwrap();
            }
            JobState::Cancelled => drop(t.queue.cancel(*id, "maintainer").await.unwrap()),
            JobState::Rejected => drop(
                t.queue
                    .complete(
                        &claimed.lease,
                        Completion::Rejected {
                            reason: "force-push".into(),
                        },
                    )
                    .await
                    .unwrap(),
            ),
            JobState::Queued => unreachable!(),
        }
    }
    t.queue.release(&first.lease).await.unwrap();
    ids.extend(claimed_jobs);
    for (state, id) in &ids {
        assert_eq!(t.queue.get(*id).await.unwrap().state, *state);
    }
    ids
}

queue_test! {
#[tokio::test]
async fn cancel_accepts_queued_and_running_and_refuses_the_rest(backend) {
    let t = queue_on(backend).await;
    let ids = one_job_per_state(&t).await;
    for (state, id) in ids {
        let before = snapshot(&t.queue, id).await;
        let result = t.queue.cancel(id, "maintainer").await;
        if state.can_cancel() {
            let job = result.unwrap();
            assert_eq!(job.state, JobState::Cancelled, "from {state}");
            assert!(job.finished_at.is_some() && job.lease_until.is_none());
            let events = t.queue.events(id).await.unwrap();
            assert_eq!(events.len(), before.1.len() + 1);
            let last = events.last().unwrap();
            assert_eq!(
                (last.event.as_str(), last.actor.as_str()),
                ("cancelled", "maintainer")
            );
        } else {
            let error = result.unwrap_err();
            match &error {
                QueueError::InvalidTransition {
                    id: got,
                    from,
                    action,
                } => {
                    assert_eq!((*got, *from, *action), (id, state, "cancel"));
                }
                other => panic!("expected InvalidTransition, got {other:?}"),
            }
            assert_eq!(
                error.to_string(),
                format!(
                    "cannot cancel job {id}: it is {state}; only queued or running jobs can be cancelled"
                )
            );
            assert_eq!(
                snapshot(&t.queue, id).await,
                before,
                "refused cancel changed {state}"
            );
        }
    }
}
}

queue_test! {
#[tokio::test]
async fn cancelling_a_running_job_voids_its_lease(backend) {
    let t = queue_on(backend).await;
    let job = t
        .queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap()
        .job;
    let claimed = claim_one(&t.queue, "worker-a").await;
    let cancelled = t.queue.cancel(job.id, "maintainer").await.unwrap();
    assert_eq!(cancelled.state, JobState::Cancelled);
    let after_cancel = snapshot(&t.queue, job.id).await;
    assert!(matches!(
        t.queue.heartbeat(&claimed.lease).await,
        Err(QueueError::LeaseLost { .. })
    ));
    assert!(matches!(
        t.queue.complete(&claimed.lease, succeeded()).await,
        Err(QueueError::LeaseLost { .. })
    ));
    assert_eq!(snapshot(&t.queue, job.id).await, after_cancel);
    assert_eq!(t.queue.cursor("octo/app").await.unwrap(), None);
    let detail = after_cancel.1.last().unwrap().detail.clone().unwrap();
    assert!(detail.contains("worker-a"), "{detail}");
    // The destination is free again.
    t.queue
        .enqueue(range("octo/app", 5, 6), None)
        .await
        .unwrap();
    assert!(t.queue.claim("worker-b").await.unwrap().is_some());
}
}

queue_test! {
#[tokio::test]
async fn retry_accepts_failed_cancelled_rejected_and_refuses_the_rest(backend) {
    let t = queue_on(backend).await;
    let ids = one_job_per_state(&t).await;
    for (state, id) in ids {
        let before = snapshot(&t.queue, id).await;
        let result = t.queue.retry(id, "maintainer").await;
        if state.can_retry() {
            let job = result.unwrap();
            assert_eq!(job.state, JobState::Queued, "from {state}");
            assert_eq!(job.attempts, 0);
            assert_eq!(job.finished_at, None);
            assert!(job.run_after <= t.clock.now_ms());
            let last = t.queue.events(id).await.unwrap().pop().unwrap();
            assert_eq!(
                (last.event.as_str(), last.actor.as_str()),
                ("retried", "maintainer")
            );
        } else {
            let error = result.unwrap_err();
            assert!(
                matches!(error, QueueError::InvalidTransition { from, action: "retry", .. } if from == state),
                "{error:?}"
            );
            assert_eq!(
                error.to_string(),
                format!(
                    "cannot retry job {id}: it is {state}; only failed, cancelled or rejected jobs can be retried"
                )
            );
            assert_eq!(
                snapshot(&t.queue, id).await,
                before,
                "refused retry changed {state}"
            );
        }
    }
    assert_eq!(t.queue.stats().retried, 3);
}
}

queue_test! {
#[tokio::test]
async fn unknown_ids_are_not_found_and_change_nothing(backend) {
    let t = queue_on(backend).await;
    t.queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap();
    let events_before = count(&t.pool, "job_events").await;
    for error in [
        t.queue.cancel(999, "maintainer").await.unwrap_err(),
        t.queue.retry(999, "maintainer").await.unwrap_err(),
        t.queue.get(999).await.unwrap_err(),
        t.queue.events(999).await.unwrap_err(),
    ] {
        assert!(
            matches!(error, QueueError::NotFound { id: 999 }),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "job 999 not found; list jobs to see which ids exist"
        );
    }
    assert_eq!(count(&t.pool, "job_events").await, events_before);
    assert_eq!(count(&t.pool, "jobs").await, 1);
}
}
