//! Several nodes on one PostgreSQL database: which node runs the cluster's
//! duties (rescue, retention, the sweep), and waking idle workers on every
//! node when a job is enqueued on any of them.
//!
//! Invariants:
//! - at most one node at a time holds the leader lock: a PostgreSQL session
//!   advisory lock on a connection of the leader's own; the server releases it
//!   when that connection ends (the node died, or lost the database), and
//!   another node takes it at its next campaign, within [`CAMPAIGN_EVERY`];
//! - a node that cannot confirm it still holds the lock (its connection
//!   failed) stops calling itself leader before it campaigns again. Between
//!   the server releasing the lock and the old leader noticing (at most one
//!   campaign period) both may run a duty; every duty is safe to run twice
//!   (rescue and retention are guarded statements, the sweep's enqueues are
//!   idempotent);
//! - on SQLite the one node is always the leader;
//! - a lost notification connection never stops work: idle workers poll the
//!   queue anyway (`PoolSettings::idle_poll`); the listener reconnects, says
//!   so in the log once per outage, and [`Wakeups`] says `polling` until it
//!   listens again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::{PgConnection, PgListener, PgPool};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How often a follower tries to become leader, and a leader checks that its
/// lock connection is still alive.
pub const CAMPAIGN_EVERY: Duration = Duration::from_secs(2);

/// The advisory lock key of the leader role (`teammem` in ASCII, so that it
/// is recognisable in `pg_locks`: classid 0x7465616d, objid 0x6d656d00).
pub const LEADER_LOCK: i64 = 0x7465_616d_6d65_6d00;

/// Whether this node runs the cluster's duties. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Leader {
    leading: Arc<AtomicBool>,
}

impl Leader {
    /// The leader of a one-node deployment (SQLite): always this node.
    pub fn sole() -> Leader {
        Leader {
            leading: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Campaigns for the leader lock on `pool` until `stop` is cancelled,
    /// and gives it up then.
    pub fn campaign(pool: PgPool, node: String, stop: CancellationToken) -> Leader {
        let leader = Leader {
            leading: Arc::new(AtomicBool::new(false)),
        };
        tokio::spawn(campaign(pool, node, leader.leading.clone(), stop));
        leader
    }

    /// True while this node holds the leader role.
    pub fn is_leader(&self) -> bool {
        self.leading.load(Ordering::SeqCst)
    }
}

async fn campaign(pool: PgPool, node: String, leading: Arc<AtomicBool>, stop: CancellationToken) {
    let mut conn: Option<PgConnection> = None;
    let mut complained = false;
    loop {
        let step = async {
            let held = match conn.as_mut() {
                Some(held) => held,
                // A connection of its own, outside the pool: the lock lives
                // exactly as long as it.
                None => conn.insert(pool.acquire().await?.detach()),
            };
            if leading.load(Ordering::SeqCst) {
                sqlx::query("SELECT 1").execute(&mut *held).await?;
                Ok::<bool, sqlx::Error>(true)
            } else {
                sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                    .bind(LEADER_LOCK)
                    .fetch_one(&mut *held)
                    .await
            }
        };
        match step.await {
            Ok(now_leading) => {
                complained = false;
                if now_leading && !leading.swap(true, Ordering::SeqCst) {
                    tracing::info!(%node, "this node now runs the cluster's duties (leader)");
                }
            }
            Err(error) => {
                if leading.swap(false, Ordering::SeqCst) {
                    tracing::warn!(%node, %error, "lost the leader lock's connection; no longer leader");
                } else if !complained {
                    tracing::warn!(%node, %error, "cannot campaign for the leader role; retrying");
                }
                complained = true;
                if let Some(lost) = conn.take() {
                    let _ = lost.close().await;
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(CAMPAIGN_EVERY) => {}
        }
    }
    leading.store(false, Ordering::SeqCst);
    if let Some(held) = conn {
        // Closing the connection releases the lock at once, so another node
        // takes over at its next campaign instead of after a timeout.
        let _ = held.close().await;
    }
}

/// How this node's idle workers hear of new jobs (`/readyz`). Cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct Wakeups {
    /// `None` on SQLite (the one node wakes its workers in process); on
    /// PostgreSQL, whether the notification connection is listening now.
    listening: Option<Arc<AtomicBool>>,
}

impl Wakeups {
    /// The one node of a SQLite deployment: every enqueue happens here.
    pub fn in_process() -> Wakeups {
        Wakeups { listening: None }
    }

    /// `in_process` (SQLite), `notify` (PostgreSQL notifications are heard)
    /// or `polling` (the notification connection is down: idle workers look
    /// at the queue every `idle_poll` until it is back).
    pub fn as_str(&self) -> &'static str {
        match &self.listening {
            None => "in_process",
            Some(listening) if listening.load(Ordering::SeqCst) => "notify",
            Some(_) => "polling",
        }
    }
}

/// Wakes one idle worker of this node for every job enqueued (or put back
/// in the queue) on any node, from PostgreSQL notifications on
/// [`crate::queue::JOBS_CHANNEL`], until `stop` is cancelled. The answer
/// says whether notifications are heard now.
pub fn wake_on_notifications(pool: PgPool, wake: Arc<Notify>, stop: CancellationToken) -> Wakeups {
    let listening = Arc::new(AtomicBool::new(false));
    let wakeups = Wakeups {
        listening: Some(listening.clone()),
    };
    tokio::spawn(async move {
        let outage = AtomicBool::new(false);
        loop {
            let listened = listen(&pool, &wake, &outage, &listening);
            tokio::select! {
                () = stop.cancelled() => return,
                Err(error) = listened => {
                    // Shutting down closes the pool under the listener.
                    if stop.is_cancelled() {
                        return;
                    }
                    if !outage.swap(true, Ordering::SeqCst) {
                        tracing::warn!(%error, "job notifications lost; idle workers poll the queue until they are back");
                    }
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(CAMPAIGN_EVERY) => {}
            }
        }
    });
    wakeups
}

/// Listens until the connection drops (the only way it ends).
async fn listen(
    pool: &PgPool,
    wake: &Notify,
    outage: &AtomicBool,
    listening: &AtomicBool,
) -> Result<std::convert::Infallible, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(crate::queue::JOBS_CHANNEL).await?;
    listening.store(true, Ordering::SeqCst);
    if outage.swap(false, Ordering::SeqCst) {
        tracing::info!("job notifications are back");
    }
    // However listening ends (an error, the connection dropping, `stop`
    // dropping this future), the node is no longer listening.
    struct Deaf<'a>(&'a AtomicBool);
    impl Drop for Deaf<'_> {
        fn drop(&mut self) {
            self.0.store(false, Ordering::SeqCst);
        }
    }
    let _deaf = Deaf(listening);
    loop {
        match listener.try_recv().await? {
            Some(_) => wake.notify_one(),
            // The connection dropped: notifications sent meanwhile are lost;
            // whatever they announced is found by the workers' polling (and
            // the idle ones look now).
            None => {
                wake.notify_waiters();
                return Err(sqlx::Error::PoolClosed);
            }
        }
    }
}
