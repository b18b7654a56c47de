//! PostgreSQL's group commit seen through the queue: writes waiting together
//! commit together; a refused write in a batch is undone alone; a write
//! that loses to another transaction's locks, and every write of a batch
//! whose COMMIT the server refused, runs again alone and is applied exactly
//! once or reported failed; a caller that goes away does not cut its write.
//! A write waiting for a lock leaves the other writers free. Failures are
//! injected with real triggers and locks on the real server.
//!
//! The tests run on tokio's current-thread runtime: writes started together
//! with `join!` are all handed over before any writer task first runs, and
//! the first to run takes them all as one batch (checked through
//! `Queue::stats`).

use teammem::queue::{JobState, Lease, QueueError};

use super::*;

/// A queue on PostgreSQL with `jobs` claimed jobs, one per destination, and
/// the pool of its database.
async fn claimed_jobs(jobs: usize) -> (TestQueue, Vec<Claimed>, sqlx::PgPool) {
    let t = queue_on(Backend::Postgres).await;
    for n in 0..jobs {
        let destination = format!("octo/wiki-{n}");
        t.queue
            .enqueue(pull_request("octo/app", &destination, n as i64 + 1), None)
            .await
            .expect("enqueue");
    }
    let mut claimed = Vec::new();
    for _ in 0..jobs {
        claimed.push(claim_one(&t.queue, "worker").await);
    }
    let Pool::Postgres(pool) = t.pool.clone() else {
        unreachable!("a PostgreSQL queue")
    };
    (t, claimed, pool)
}

async fn run(pool: &sqlx::PgPool, statement: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_string()))
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
}

async fn state_of(queue: &Queue, id: i64) -> JobState {
    queue.get(id).await.expect("job").state
}

#[tokio::test]
async fn a_refused_write_in_a_batch_is_undone_alone_and_the_others_commit() {
    let (t, claimed, pool) = claimed_jobs(4).await;
    // Job 2's completion updates its row, then its event is refused: the
    // write fails after changing something, which only its savepoint undoes.
    let refused = claimed[1].job.id;
    run(
        &pool,
        &format!(
            "CREATE FUNCTION refuse_event() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN IF NEW.job_id = {refused} THEN RAISE EXCEPTION 'refused by the test'; END IF; \
             RETURN NEW; END $$; \
             CREATE TRIGGER refuse_event BEFORE INSERT ON job_events \
             FOR EACH ROW EXECUTE FUNCTION refuse_event()"
        ),
    )
    .await;
    let before = snapshot(&t.queue, refused).await;
    let stale = Lease {
        job_id: claimed[3].job.id,
        token: "not-the-token".into(),
    };
    let (commits, writes) = (t.queue.stats().commits, t.queue.stats().writes);
    let (first, second, third, lost, beat) = tokio::join!(
        t.queue.complete(&claimed[0].lease, succeeded()),
        t.queue.complete(&claimed[1].lease, succeeded()),
        t.queue.complete(&claimed[2].lease, succeeded()),
        t.queue.complete(&stale, succeeded()),
        t.queue.heartbeat(&claimed[3].lease),
    );
    let stats = t.queue.stats();
    assert_eq!(
        (stats.commits - commits, stats.writes - writes),
        (1, 5),
        "the five writes were one batch and one commit"
    );
    first.expect("first completes");
    third.expect("third completes");
    beat.expect("the heartbeat commits");
    let error = second.expect_err("the refused write hears its refusal");
    assert!(error.to_string().contains("refused by the test"), "{error}");
    assert!(
        matches!(lost, Err(QueueError::LeaseLost { .. })),
        "{lost:?}"
    );
    assert_eq!(
        snapshot(&t.queue, refused).await,
        before,
        "the refused write changed nothing"
    );
    assert_eq!(
        state_of(&t.queue, claimed[0].job.id).await,
        JobState::Succeeded
    );
    assert_eq!(
        state_of(&t.queue, claimed[2].job.id).await,
        JobState::Succeeded
    );
    assert_eq!(
        state_of(&t.queue, claimed[3].job.id).await,
        JobState::Running
    );
    // Each: enqueued, claimed, and succeeded for the two completed.
    assert_eq!(count(&t.pool, "job_events").await, 4 * 2 + 2);
}

#[tokio::test]
async fn a_batch_whose_commit_is_refused_runs_each_write_again_alone() {
    let (t, claimed, pool) = claimed_jobs(3).await;
    // A deferred constraint trigger fails the COMMIT of any transaction that
    // records job 2's completion: the server refuses the whole batch.
    let poisoned = claimed[1].job.id;
    run(
        &pool,
        &format!(
            "CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN IF NEW.job_id = {poisoned} AND NEW.event = 'succeeded' THEN \
             RAISE EXCEPTION 'refused at commit by the test'; END IF; RETURN NEW; END $$; \
             CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT ON job_events \
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_at_commit()"
        ),
    )
    .await;
    let before = snapshot(&t.queue, poisoned).await;
    let commits = t.queue.stats().commits;
    let (first, second, third) = tokio::join!(
        t.queue.complete(&claimed[0].lease, succeeded()),
        t.queue.complete(&claimed[1].lease, succeeded()),
        t.queue.complete(&claimed[2].lease, succeeded()),
    );
    first.expect("first committed alone");
    third.expect("third committed alone");
    let error = second.expect_err("the poisoned write fails alone too");
    assert!(
        error.to_string().contains("refused at commit by the test"),
        "{error}"
    );
    assert_eq!(
        t.queue.stats().commits - commits,
        2,
        "the batch did not commit; the two innocent writes did, each alone"
    );
    assert_eq!(snapshot(&t.queue, poisoned).await, before);
    for job in [&claimed[0].job, &claimed[2].job] {
        let events = t.queue.events(job.id).await.expect("events");
        assert_eq!(
            event_names(&events),
            ["enqueued", "claimed", "succeeded"],
            "applied exactly once"
        );
    }
}

#[tokio::test]
async fn a_write_that_loses_to_locks_in_a_batch_runs_again_alone() {
    let (t, claimed, pool) = claimed_jobs(3).await;
    // Job 2's completion meets a deadlock the first time it runs (as when
    // another node's batch holds a lock it needs while waiting for one of
    // this batch's): PostgreSQL's own error code, raised by a trigger.
    let unlucky = claimed[1].job.id;
    run(
        &pool,
        &format!(
            "CREATE SEQUENCE deadlocks; \
             CREATE FUNCTION deadlock_once() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN IF NEW.job_id = {unlucky} AND nextval('deadlocks') = 1 THEN \
             RAISE EXCEPTION 'deadlock injected by the test' USING ERRCODE = 'deadlock_detected'; \
             END IF; RETURN NEW; END $$; \
             CREATE TRIGGER deadlock_once BEFORE INSERT ON job_events \
             FOR EACH ROW EXECUTE FUNCTION deadlock_once()"
        ),
    )
    .await;
    let commits = t.queue.stats().commits;
    let (first, second, third) = tokio::join!(
        t.queue.complete(&claimed[0].lease, succeeded()),
        t.queue.complete(&claimed[1].lease, succeeded()),
        t.queue.complete(&claimed[2].lease, succeeded()),
    );
    for answer in [first, second, third] {
        answer.expect("every write commits");
    }
    assert_eq!(
        t.queue.stats().commits - commits,
        2,
        "the batch committed two writes; the unlucky one committed alone after it"
    );
    for claimed in &claimed {
        let events = t.queue.events(claimed.job.id).await.expect("events");
        assert_eq!(
            event_names(&events),
            ["enqueued", "claimed", "succeeded"],
            "job {} applied exactly once",
            claimed.job.id
        );
    }
}

#[tokio::test]
async fn a_write_that_keeps_losing_to_locks_is_reported_and_changes_nothing() {
    let (t, claimed, pool) = claimed_jobs(2).await;
    let unlucky = claimed[1].job.id;
    run(
        &pool,
        &format!(
            "CREATE FUNCTION always_deadlock() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN IF NEW.job_id = {unlucky} AND NEW.event = 'succeeded' THEN \
             RAISE EXCEPTION 'deadlock injected by the test' USING ERRCODE = 'deadlock_detected'; \
             END IF; RETURN NEW; END $$; \
             CREATE TRIGGER always_deadlock BEFORE INSERT ON job_events \
             FOR EACH ROW EXECUTE FUNCTION always_deadlock()"
        ),
    )
    .await;
    let before = snapshot(&t.queue, unlucky).await;
    let (first, second) = tokio::join!(
        t.queue.complete(&claimed[0].lease, succeeded()),
        t.queue.complete(&claimed[1].lease, succeeded()),
    );
    first.expect("the other write commits");
    let error = second.expect_err("the caller hears the deadlock");
    assert!(error.to_string().contains("deadlock injected"), "{error}");
    assert_eq!(snapshot(&t.queue, unlucky).await, before);
}

#[tokio::test]
async fn a_caller_that_goes_away_does_not_cut_its_write() {
    let (t, claimed, pool) = claimed_jobs(2).await;
    // Job 1's row is held elsewhere, so its completion is still running on a
    // writer when its caller goes away.
    let (holder, abandoned) = completion_waiting_for_its_row(&t, &claimed[0], &pool).await;
    abandoned.abort();
    holder.rollback().await.expect("release job 1");
    let id = claimed[0].job.id;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while state_of(&t.queue, id).await == JobState::Running {
        assert!(
            std::time::Instant::now() < deadline,
            "the abandoned completion never committed"
        );
        tokio::task::yield_now().await;
    }
    let events = t.queue.events(id).await.expect("events");
    assert_eq!(event_names(&events), ["enqueued", "claimed", "succeeded"]);
}

/// Holds `job`'s row in a transaction of its own, starts the job's
/// completion on a task, and returns once that completion waits for the row
/// on the server: the transaction (roll it back to let the completion go on)
/// and the task.
async fn completion_waiting_for_its_row(
    t: &TestQueue,
    job: &Claimed,
    pool: &sqlx::PgPool,
) -> (
    sqlx::Transaction<'static, sqlx::Postgres>,
    tokio::task::JoinHandle<Result<teammem::queue::Job, QueueError>>,
) {
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("SELECT id FROM jobs WHERE id = $1 FOR UPDATE")
        .bind(job.job.id)
        .execute(&mut *holder)
        .await
        .expect("lock the job's row");
    let completion = {
        let queue = t.queue.clone();
        let lease = job.lease.clone();
        tokio::spawn(async move { queue.complete(&lease, succeeded()).await })
    };
    wait_for_a_lock_wait(pool).await;
    (holder, completion)
}

/// Returns once some statement of the test's database waits for a lock on
/// the server.
async fn wait_for_a_lock_wait(pool: &sqlx::PgPool) {
    loop {
        let waiting: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock')",
        )
        .fetch_one(pool)
        .await
        .expect("pg_stat_activity");
        if waiting {
            return;
        }
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn a_write_waiting_for_a_lock_does_not_hold_up_the_other_writes() {
    let (t, claimed, pool) = claimed_jobs(2).await;
    // Another transaction (as another node's batch would) holds job 1's row.
    let (holder, waiting) = completion_waiting_for_its_row(&t, &claimed[0], &pool).await;
    // Job 2's completion and a new enqueue commit meanwhile, on another
    // writer; with one writer they would wait behind job 1's batch.
    let others = async {
        t.queue
            .complete(&claimed[1].lease, succeeded())
            .await
            .expect("job 2 completes");
        t.queue
            .enqueue(pull_request("octo/app", "octo/wiki-9", 99), None)
            .await
            .expect("enqueue");
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), others)
        .await
        .expect("the other writes commit while job 1's waits for its lock");
    assert_eq!(
        state_of(&t.queue, claimed[0].job.id).await,
        JobState::Running
    );
    holder.rollback().await.expect("release job 1");
    waiting
        .await
        .expect("join")
        .expect("job 1 completes once its row is free");
    assert_eq!(
        state_of(&t.queue, claimed[0].job.id).await,
        JobState::Succeeded
    );
}

#[tokio::test]
async fn a_completion_and_the_next_claim_run_in_one_batch_in_that_order() {
    let t = queue_on(Backend::Postgres).await;
    for n in 1..=2 {
        t.queue
            .enqueue(pull_request("octo/app", "octo/wiki", n), None)
            .await
            .expect("enqueue");
    }
    let first = claim_one(&t.queue, "w").await;
    let (commits, writes) = (t.queue.stats().commits, t.queue.stats().writes);
    let (done, next) = t
        .queue
        .complete_and_claim(&first.lease, succeeded(), "w")
        .await;
    done.expect("completed");
    // The claim ran after the completion in its transaction: it saw the wiki
    // freed and took its next job.
    let next = next.expect("claim").expect("the wiki's next job");
    assert_eq!(next.job.destination, "octo/wiki");
    let stats = t.queue.stats();
    assert_eq!(
        (stats.commits - commits, stats.writes - writes),
        (1, 2),
        "both writes in one commit"
    );
}

/// A batch that finds no connection within the pool's acquire timeout (the
/// database unreachable) answers its callers with that failure at once,
/// writing nothing, instead of running each write alone and waiting as long
/// again: the only connection is held from before the enqueue until one and
/// a half timeouts later, so a write run alone after the batch would get it
/// and commit.
#[tokio::test]
async fn a_batch_without_a_connection_answers_at_once_and_writes_nothing() {
    const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
    let url = crate::harness::postgres::server().fresh_database().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(TIMEOUT)
        .connect(&url)
        .await
        .expect("connect to the test database");
    db::migrate_postgres(&pool).await.expect("migrate");
    let queue = Queue::new(pool.clone(), Arc::new(ManualClock::default()), settings());
    let held = pool.acquire().await.expect("the only connection");
    let release = tokio::spawn(async move {
        tokio::time::sleep(TIMEOUT * 3 / 2).await;
        drop(held);
    });
    let answer = queue
        .enqueue(pull_request("octo/app", "octo/wiki", 1), None)
        .await;
    let error = answer.expect_err("no connection for the enqueue");
    assert!(error.is_unavailable(), "{error}");
    assert!(error.to_string().contains("nothing was written"), "{error}");
    release.await.expect("the holder");
    assert_eq!(count(&Pool::Postgres(pool), "jobs").await, 0);
}
