//! Reading the queue: get, list with filters and cursor paging, events for
//! each transition, counts by state, and source cursors.

use teammem::queue::{Completion, JobFilter, JobState, QueueError};

use super::*;

queue_test! {
#[tokio::test]
async fn list_pages_newest_first_with_filters(backend) {
    let t = queue_on(backend).await;
    let mut ids = Vec::new();
    for n in 0..7u64 {
        let source = if n % 2 == 0 { "octo/app" } else { "octo/lib" };
        ids.push(
            t.queue
                .enqueue(range(source, 10 * n, 10 * n + 1), None)
                .await
                .unwrap()
                .job
                .id,
        );
    }
    // Newest first, three at a time.
    let mut seen = Vec::new();
    let mut filter = JobFilter {
        limit: 3,
        ..JobFilter::default()
    };
    loop {
        let page = t.queue.list(&filter).await.unwrap();
        assert!(page.jobs.len() <= 3);
        seen.extend(page.jobs.iter().map(|job| job.id));
        match page.next_cursor {
            Some(cursor) => filter.cursor = Some(cursor),
            None => break,
        }
    }
    let newest_first: Vec<i64> = ids.iter().rev().copied().collect();
    assert_eq!(seen, newest_first);

    let app = t
        .queue
        .list(&JobFilter {
            repository: Some("octo/app".into()),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(app.jobs.len(), 4);
    assert!(app.jobs.iter().all(|job| job.source == "octo/app"));
    assert_eq!(app.next_cursor, None);

    claim_one(&t.queue, "w").await;
    let running = t
        .queue
        .list(&JobFilter {
            state: Some(JobState::Running),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(running.jobs.len(), 1);
    assert_eq!(running.jobs[0].id, ids[0]);

    let scoped = t
        .queue
        .list(&JobFilter {
            allowed_repositories: Some(vec!["octo/lib".into()]),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(scoped.jobs.len(), 3);
    let nothing = t
        .queue
        .list(&JobFilter {
            allowed_repositories: Some(vec![]),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert!(nothing.jobs.is_empty());
}
}

queue_test! {
#[tokio::test]
async fn list_refuses_bad_limits_and_cursors(backend) {
    let t = queue_on(backend).await;
    for (filter, expected) in [
        (
            JobFilter {
                limit: 0,
                ..JobFilter::default()
            },
            "limit: must be between 1 and 100, got 0",
        ),
        (
            JobFilter {
                limit: 101,
                ..JobFilter::default()
            },
            "limit: must be between 1 and 100, got 101",
        ),
        (
            JobFilter {
                cursor: Some("not-a-cursor".into()),
                ..JobFilter::default()
            },
            "cursor: not a cursor this server handed out; start again without one",
        ),
    ] {
        let error = t.queue.list(&filter).await.unwrap_err();
        assert!(matches!(error, QueueError::InvalidInput { .. }));
        assert_eq!(error.to_string(), expected);
    }
    assert!(
        t.queue
            .list(&JobFilter {
                limit: 100,
                ..JobFilter::default()
            })
            .await
            .is_ok()
    );
}
}

queue_test! {
#[tokio::test]
async fn every_transition_appends_one_event_in_order(backend) {
    let t = queue_on(backend).await;
    let job = t
        .queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap()
        .job;
    t.queue
        .enqueue(range("octo/app", 2, 3), None)
        .await
        .unwrap();
    let first = claim_one(&t.queue, "worker-a").await;
    t.queue.heartbeat(&first.lease).await.unwrap();
    t.queue
        .fail(&first.lease, "GitHub 502", true)
        .await
        .unwrap();
    t.clock.advance(Duration::from_secs(3600));
    let second = claim_one(&t.queue, "worker-b").await;
    t.queue.complete(&second.lease, succeeded()).await.unwrap();
    t.queue.retry(job.id, "maintainer").await.unwrap_err(); // refused: no event
    let events = t.queue.events(job.id).await.unwrap();
    let trail: Vec<(&str, &str)> = events
        .iter()
        .map(|event| (event.event.as_str(), event.actor.as_str()))
        .collect();
    assert_eq!(
        trail,
        [
            ("enqueued", "scheduler"),
            ("coalesced", "scheduler"),
            ("claimed", "worker-a"),
            ("retry_scheduled", "worker-a"),
            ("claimed", "worker-b"),
            ("succeeded", "worker-b"),
        ]
    );
    assert!(
        events
            .windows(2)
            .all(|pair| pair[0].at <= pair[1].at && pair[0].id < pair[1].id)
    );
    assert!(events[3].detail.as_deref().unwrap().contains("GitHub 502"));

    // The trail cannot be rewritten.
    let rewrite = on_pool!(&t.pool, |pool| {
        sqlx::query("UPDATE job_events SET actor = 'someone else'")
            .execute(pool)
            .await
            .map(|done| done.rows_affected())
    });
    assert!(rewrite.is_err(), "job_events must be append-only");
}
}

queue_test! {
#[tokio::test]
async fn cursor_advances_when_a_range_job_reconciles_its_range(backend) {
    let t = queue_on(backend).await;
    assert_eq!(t.queue.cursor("octo/app").await.unwrap(), None);

    // A rejected range does not advance the cursor.
    t.queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap();
    let rejected = claim_one(&t.queue, "w").await;
    t.queue
        .complete(
            &rejected.lease,
            Completion::Rejected {
                reason: "force-push".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(t.queue.cursor("octo/app").await.unwrap(), None);

    // A succeeded range does, to its (coalesced) after.
    let job = t
        .queue
        .enqueue(range("octo/app", 2, 3), None)
        .await
        .unwrap()
        .job;
    t.queue
        .enqueue(range("octo/app", 3, 4), None)
        .await
        .unwrap();
    let claimed = claim_one(&t.queue, "w").await;
    t.clock.advance(Duration::from_secs(5));
    t.queue.complete(&claimed.lease, succeeded()).await.unwrap();
    let cursor = t.queue.cursor("octo/app").await.unwrap().unwrap();
    assert_eq!(cursor.sha, sha(4));
    assert_eq!(cursor.job_id, Some(job.id));
    assert_eq!(cursor.updated_at, t.clock.now_ms());

    // A pull-request job does not touch it; another source has its own.
    t.queue
        .enqueue(pull_request("octo/app", "octo/app", 9), None)
        .await
        .unwrap();
    let pr = claim_one(&t.queue, "w").await;
    t.queue.complete(&pr.lease, succeeded()).await.unwrap();
    assert_eq!(
        t.queue.cursor("octo/app").await.unwrap().unwrap().sha,
        sha(4)
    );
    assert_eq!(t.queue.cursor("octo/lib").await.unwrap(), None);

    // A no-change range reconciled its range too.
    t.queue
        .enqueue(range("octo/app", 4, 5), None)
        .await
        .unwrap();
    let quiet = claim_one(&t.queue, "w").await;
    t.queue
        .complete(
            &quiet.lease,
            Completion::NoChange {
                receipt: serde_json::json!({}),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        t.queue.cursor("octo/app").await.unwrap().unwrap().sha,
        sha(5)
    );

    // Set by hand (bootstrap): no job.
    t.queue.advance_cursor("octo/lib", &sha(40)).await.unwrap();
    let manual = t.queue.cursor("octo/lib").await.unwrap().unwrap();
    assert_eq!((manual.sha, manual.job_id), (sha(40), None));
}
}

queue_test! {
#[tokio::test]
async fn counts_by_state_cover_every_state(backend) {
    let t = queue_on(backend).await;
    for n in 1..=3 {
        t.queue
            .enqueue(pull_request("octo/app", &format!("wiki-{n}"), n), None)
            .await
            .unwrap();
    }
    let claimed = claim_one(&t.queue, "w").await;
    t.queue.complete(&claimed.lease, succeeded()).await.unwrap();
    claim_one(&t.queue, "w").await;
    let counts = t.queue.counts_by_state().await.unwrap();
    assert_eq!(counts.len(), JobState::ALL.len());
    assert_eq!(counts[&JobState::Queued], 1);
    assert_eq!(counts[&JobState::Running], 1);
    assert_eq!(counts[&JobState::Succeeded], 1);
    assert_eq!(counts[&JobState::Failed], 0);
}
}

queue_test! {
#[tokio::test]
async fn job_serializes_with_the_documented_fields(backend) {
    let t = queue_on(backend).await;
    let job = t
        .queue
        .enqueue(dispatched("octo/app", 1, 2, 3, 1), None)
        .await
        .unwrap()
        .job;
    let value = serde_json::to_value(&job).unwrap();
    for field in [
        "id",
        "source",
        "destination",
        "origin",
        "kind",
        "push_before",
        "push_after",
        "run_id",
        "run_attempt",
        "pull_number",
        "merge_sha",
        "state",
        "attempts",
        "max_attempts",
        "run_after",
        "created_at",
        "updated_at",
        "started_at",
        "finished_at",
        "last_error",
        "receipt",
        "coalesced_count",
        "lease_owner",
    ] {
        assert!(value.get(field).is_some(), "missing {field}");
    }
    assert_eq!(value["state"], "queued");
    assert_eq!(value["kind"], "range");
    assert_eq!(value["origin"], "dispatch");
    assert!(
        value.get("lease_token").is_none(),
        "the fence token never leaves the queue"
    );
}
}

queue_test! {
#[tokio::test]
async fn a_row_whose_source_is_not_owner_slash_name_is_refused_when_read(backend) {
    let t = queue_on(backend).await;
    let id = t
        .queue
        .enqueue(range("octo/app", 1, 2), None)
        .await
        .unwrap()
        .job
        .id;
    // Only a hand edit can store such a name: every job enters as a RepoName.
    on_pool!(&t.pool, |pool| {
        sqlx::query("UPDATE jobs SET source = 'octo app' WHERE id = $1")
            .bind(id)
            .execute(pool)
            .await
            .unwrap()
            .rows_affected()
    });
    for error in [
        t.queue.get(id).await.unwrap_err(),
        t.queue.list(&JobFilter::default()).await.unwrap_err(),
    ] {
        assert!(
            matches!(error, QueueError::MalformedJob { id: bad, .. } if bad == id),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains("jobs.source: expected owner/name, got \"octo app\""),
            "{message}"
        );
    }
}
}
