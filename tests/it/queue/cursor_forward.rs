//! The cursor never moves back (issue 36): a range job that reconciles an
//! old range (a retry, a backfill) leaves the newest reconciled commit where
//! it is, whatever completion path stored it; the runner's decision
//! ([`CursorMove`]) is applied in the completion's own statement and only
//! while the cursor still names the commit it was judged against.

use teammem::queue::{CursorMove, JobState};

use super::*;

/// Completes the next claimable job with `cursor` as the runner's decision.
async fn finish(t: &TestQueue, cursor: CursorMove) -> i64 {
    let claimed = claim_one(&t.queue, "w").await;
    t.queue
        .complete_moving(&claimed.lease, succeeded(), cursor)
        .await
        .unwrap();
    claimed.job.id
}

async fn cursor_of(t: &TestQueue) -> Sha {
    t.queue.cursor("octo/app").await.unwrap().unwrap().sha
}

queue_test! {
#[tokio::test]
async fn an_old_range_never_lowers_the_cursor(backend) {
    let t = queue_on(backend).await;
    // The newest reconciled commit: 10 (the first range sets it).
    t.queue.enqueue(range("octo/app", 9, 10), None).await.unwrap();
    let newest = finish(&t, CursorMove::Unchecked).await;
    assert_eq!(cursor_of(&t).await, sha(10));

    // An old range finishing with no forge answer: the queue cannot tell it
    // is newer (it does not start at the cursor), so the cursor stays.
    t.queue.enqueue(range("octo/app", 1, 2), None).await.unwrap();
    finish(&t, CursorMove::Unchecked).await;
    assert_eq!(cursor_of(&t).await, sha(10));

    // The runner said it is older: it stays, through complete_and_claim too.
    t.queue.enqueue(range("octo/app", 2, 3), None).await.unwrap();
    t.queue.enqueue(range("octo/app", 5, 6), None).await.unwrap();
    let claimed = claim_one(&t.queue, "w").await;
    let (done, next) = t
        .queue
        .complete_and_claim_moving(&claimed.lease, succeeded(), CursorMove::Stays, "w")
        .await;
    assert_eq!(done.unwrap().state, JobState::Succeeded);
    assert_eq!(cursor_of(&t).await, sha(10));
    let next = next.unwrap().expect("the next range");
    t.queue.complete_moving(&next.lease, succeeded(), CursorMove::Stays).await.unwrap();
    let cursor = t.queue.cursor("octo/app").await.unwrap().unwrap();
    assert_eq!((cursor.sha, cursor.job_id), (sha(10), Some(newest)));

    // "Stays" wins even over a range that starts at the cursor (a decision
    // is never overruled upwards by the queue).
    t.queue.enqueue(range("octo/app", 10, 11), None).await.unwrap();
    finish(&t, CursorMove::Stays).await;
    assert_eq!(cursor_of(&t).await, sha(10));

    // A pull-request job never touches it, whatever it is handed.
    t.queue.enqueue(pull_request("octo/app", "octo/app", 7), None).await.unwrap();
    finish(&t, CursorMove::Descends { from: sha(10) }).await;
    assert_eq!(cursor_of(&t).await, sha(10));
}
}

queue_test! {
#[tokio::test]
async fn a_newer_range_moves_the_cursor_only_from_the_commit_it_was_judged_against(backend) {
    let t = queue_on(backend).await;
    t.queue.enqueue(range("octo/app", 9, 10), None).await.unwrap();
    finish(&t, CursorMove::Unchecked).await;

    // A range after a gap (its start is not the cursor) that the runner found
    // newer than the cursor: it moves.
    t.queue.enqueue(range("octo/app", 15, 20), None).await.unwrap();
    let newer = finish(&t, CursorMove::Descends { from: sha(10) }).await;
    let cursor = t.queue.cursor("octo/app").await.unwrap().unwrap();
    assert_eq!((cursor.sha, cursor.job_id), (sha(20), Some(newer)));

    // Without a forge answer a range starting at the cursor still moves it.
    t.queue.enqueue(range("octo/app", 20, 21), None).await.unwrap();
    finish(&t, CursorMove::Unchecked).await;
    assert_eq!(cursor_of(&t).await, sha(21));

    // The cursor moved after the runner judged the job (an operator, the
    // sweep): the decision no longer applies and the cursor stays.
    t.queue.enqueue(range("octo/app", 30, 31), None).await.unwrap();
    let claimed = claim_one(&t.queue, "w").await;
    t.queue.advance_cursor("octo/app", &sha(40)).await.unwrap();
    t.queue
        .complete_moving(&claimed.lease, succeeded(), CursorMove::Descends { from: sha(21) })
        .await
        .unwrap();
    assert_eq!(cursor_of(&t).await, sha(40));
}
}
