//! Handshake-era MCP sessions (`Mcp-Session-Id`, protocol 2025-11-25) kept in
//! the database, for rmcp's session store: a request for a session this node
//! does not hold in memory (opened on another node, or before a restart)
//! replays the stored `initialize` and carries on, instead of `404`.
//!
//! Each row holds the SHA-256 of the session id (never the id), the
//! principal that opened it (`token:NAME` or `github:LOGIN`), and of the
//! client's `initialize` only its protocol version, name and version, each
//! cut to [`FIELD_BYTES`]. rmcp's store interface does not carry the
//! caller, so `http/mcp.rs` runs each `/mcp` request inside
//! [`as_principal`] and the store reads it from there.
//!
//! Invariants: a session is only ever found for the principal that opened
//! it (`load`, `delete` and [`principal_of`] match on it, and a store call
//! without a principal stores nothing); a principal keeps at most its
//! sessions cap of rows: storing one more removes its oldest, and ends them
//! on this node too; no credential is stored, and every request is still
//! authenticated on its own; rows older than [`RETENTION`] are removed by
//! the leader's retention duty.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::store::{
    SessionState, SessionStore, SessionStoreError,
};
use sha2::{Digest, Sha256};

use crate::db::{Pool, on_pool};
use crate::queue::{Clock, SystemClock};

/// How long a session can be restored after it was opened.
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The most bytes kept of each stored `initialize` field.
pub const FIELD_BYTES: usize = 256;

tokio::task_local! {
    /// The principal of the `/mcp` request being served.
    static PRINCIPAL: String;
}

/// Runs `work` (the handling of one `/mcp` request) as `principal`: the
/// sessions it opens, restores or deletes are that principal's.
pub async fn as_principal<F: Future>(principal: String, work: F) -> F::Output {
    PRINCIPAL.scope(principal, work).await
}

fn principal() -> Option<String> {
    PRINCIPAL.try_with(Clone::clone).ok()
}

/// The stored form of a session id: its SHA-256, hex.
pub fn session_hash(session_id: &str) -> String {
    hex::encode(Sha256::digest(session_id.as_bytes()))
}

/// At most [`FIELD_BYTES`] of `text`, cut at a character boundary.
fn capped(text: &str) -> &str {
    let mut end = text.len().min(FIELD_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// rmcp's [`SessionStore`] on the deployment's database.
#[derive(Clone)]
pub struct SessionsInDatabase {
    pool: Pool,
    /// Sessions kept per principal (`limits.mcp_sessions_per_principal`).
    cap: usize,
    /// This node's in-memory sessions, to end the ones evicted here.
    local: Option<Arc<LocalSessionManager>>,
    /// The sessions this node opened or restored, per principal, oldest
    /// first; at most `cap` each.
    here: Arc<Mutex<HashMap<String, VecDeque<Arc<str>>>>>,
}

impl std::fmt::Debug for SessionsInDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionsInDatabase")
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

impl SessionsInDatabase {
    /// Sessions on `pool`, at most `cap` per principal.
    pub fn new(pool: Pool, cap: usize) -> SessionsInDatabase {
        SessionsInDatabase {
            pool,
            cap: cap.max(1),
            local: None,
            here: Arc::default(),
        }
    }

    /// Ends evicted sessions in `local` (this node's rmcp session manager)
    /// too, so that memory is bounded like the rows.
    pub fn with_local(mut self, local: Arc<LocalSessionManager>) -> SessionsInDatabase {
        self.local = Some(local);
        self
    }

    /// Remembers that this node holds `session_id` for `principal`; ends
    /// the principal's oldest held sessions beyond the cap.
    fn hold(&self, principal: &str, session_id: &str) {
        let evicted: Vec<Arc<str>> = {
            let mut here = self.here.lock().unwrap_or_else(|e| e.into_inner());
            let held = here.entry(principal.to_string()).or_default();
            held.retain(|id| &**id != session_id);
            held.push_back(session_id.into());
            let excess = held.len().saturating_sub(self.cap);
            held.drain(..excess).collect()
        };
        if let Some(local) = &self.local {
            for id in evicted {
                let local = local.clone();
                tokio::spawn(async move {
                    if let Err(error) = local.close_session(&id).await {
                        tracing::debug!(%error, "ending an evicted MCP session");
                    }
                });
            }
        }
    }

    fn release(&self, principal: &str, session_id: &str) {
        let mut here = self.here.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = here.get_mut(principal) {
            held.retain(|id| &**id != session_id);
            if held.is_empty() {
                here.remove(principal);
            }
        }
    }
}

fn now_ms() -> i64 {
    SystemClock.now_ms()
}

/// A stored session's `created_at`: the time, but never the same value twice
/// in this process, so "the newest `cap` stay" keeps the sessions opened
/// last even when several are opened within one millisecond.
fn created_at() -> i64 {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LAST: AtomicI64 = AtomicI64::new(i64::MIN);
    let now = now_ms();
    let previous = LAST
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
            Some(now.max(last.saturating_add(1)))
        })
        .unwrap_or(now);
    now.max(previous.saturating_add(1))
}

/// The opening time (unix milliseconds) of the oldest session still kept.
fn oldest_kept() -> i64 {
    now_ms() - RETENTION.as_millis() as i64
}

/// The principal a stored session belongs to, if it is stored and not
/// older than [`RETENTION`].
pub async fn principal_of(pool: &Pool, session_id: &str) -> Result<Option<String>, sqlx::Error> {
    let hash = session_hash(session_id);
    let oldest = oldest_kept();
    let principal = on_pool!(pool, |pool| {
        sqlx::query_scalar(
            "SELECT principal FROM mcp_sessions WHERE session_sha256 = $1 AND created_at >= $2",
        )
        .bind(&hash)
        .bind(oldest)
        .fetch_optional(pool)
        .await?
    });
    Ok(principal)
}

#[derive(Debug, thiserror::Error)]
#[error("an MCP session was opened outside an authenticated /mcp request; it is not stored")]
struct NoPrincipal;

#[async_trait::async_trait]
impl SessionStore for SessionsInDatabase {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let Some(principal) = principal() else {
            return Ok(None);
        };
        let hash = session_hash(session_id);
        let oldest = oldest_kept();
        let stored: Option<(String, String, String)> = on_pool!(&self.pool, |pool| {
            sqlx::query_as(
                "SELECT protocol_version, client_name, client_version FROM mcp_sessions \
                 WHERE session_sha256 = $1 AND principal = $2 AND created_at >= $3",
            )
            .bind(&hash)
            .bind(&principal)
            .bind(oldest)
            .fetch_optional(pool)
            .await?
        });
        let Some((protocol_version, name, version)) = stored else {
            return Ok(None);
        };
        // Capabilities are not kept: in the handshake era the server reads
        // none of them (tasks are a 2026-07-28 matter, see mcp/tasks.rs).
        let params = serde_json::from_value(serde_json::json!({
            "protocolVersion": protocol_version,
            "capabilities": {},
            "clientInfo": {"name": name, "version": version},
        }))?;
        self.hold(&principal, session_id);
        Ok(Some(SessionState::new(params)))
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let principal = principal().ok_or(NoPrincipal)?;
        let params = &state.initialize_params;
        let hash = session_hash(session_id);
        let cap = self.cap as i64;
        let evicted = on_pool!(&self.pool, |pool| {
            // Never rebinds a stored session to another principal.
            sqlx::query(
                "INSERT INTO mcp_sessions \
                 (session_sha256, principal, protocol_version, client_name, client_version, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (session_sha256) DO NOTHING",
            )
            .bind(&hash)
            .bind(&principal)
            .bind(capped(params.protocol_version.as_str()))
            .bind(capped(&params.client_info.name))
            .bind(capped(&params.client_info.version))
            .bind(created_at())
            .execute(pool)
            .await?;
            // The principal's newest `cap` sessions stay; older ones go.
            sqlx::query(
                "DELETE FROM mcp_sessions WHERE principal = $1 AND session_sha256 NOT IN \
                 (SELECT session_sha256 FROM mcp_sessions WHERE principal = $1 \
                  ORDER BY created_at DESC, session_sha256 DESC LIMIT $2)",
            )
            .bind(&principal)
            .bind(cap)
            .execute(pool)
            .await?
            .rows_affected()
        });
        for _ in 0..evicted {
            crate::metrics::MCP_SESSIONS_EVICTED.inc(&[]);
        }
        self.hold(&principal, session_id);
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        let Some(principal) = principal() else {
            return Ok(());
        };
        let hash = session_hash(session_id);
        on_pool!(&self.pool, |pool| {
            sqlx::query("DELETE FROM mcp_sessions WHERE session_sha256 = $1 AND principal = $2")
                .bind(&hash)
                .bind(&principal)
                .execute(pool)
                .await?;
        });
        self.release(&principal, session_id);
        Ok(())
    }
}

/// Removes the sessions opened more than [`RETENTION`] ago; returns how
/// many.
pub async fn prune(pool: &Pool) -> Result<u64, sqlx::Error> {
    let oldest = oldest_kept();
    let removed = on_pool!(pool, |pool| {
        sqlx::query("DELETE FROM mcp_sessions WHERE created_at < $1")
            .bind(oldest)
            .execute(pool)
            .await?
            .rows_affected()
    });
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn pool() -> (tempfile::TempDir, Pool) {
        let dir = tempfile::tempdir().expect("temp dir");
        let pool = crate::db::open(&dir.path().join("data"))
            .await
            .expect("open");
        crate::db::migrate(&pool).await.expect("migrate");
        (dir, Pool::from(pool))
    }

    fn state(name: &str) -> SessionState {
        SessionState::new(
            serde_json::from_value(serde_json::json!({
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": name, "version": "1"}
            }))
            .expect("initialize params"),
        )
    }

    /// A stored session loads, for its principal only, until it is older
    /// than [`RETENTION`]; then it no longer loads and retention removes
    /// it, and only it.
    #[tokio::test]
    async fn sessions_load_for_their_principal_until_retention_removes_them() {
        let (_dir, pool) = pool().await;
        let store = SessionsInDatabase::new(pool.clone(), 32);
        let a = || "token:a".to_string();
        for id in ["fresh", "old"] {
            as_principal(a(), store.store(id, &state("test")))
                .await
                .expect("store");
        }
        let loaded = as_principal(a(), store.load("fresh"))
            .await
            .expect("load")
            .expect("stored");
        assert_eq!(loaded.initialize_params.client_info.name, "test");
        assert!(
            as_principal(a(), store.load("nobody"))
                .await
                .expect("load")
                .is_none()
        );
        // Another principal, or none, finds nothing, and deletes nothing.
        let b = || "token:b".to_string();
        assert!(
            as_principal(b(), store.load("fresh"))
                .await
                .expect("load")
                .is_none()
        );
        assert!(store.load("fresh").await.expect("load").is_none());
        as_principal(b(), store.delete("fresh"))
            .await
            .expect("delete");
        assert_eq!(
            principal_of(&pool, "fresh").await.expect("owner"),
            Some("token:a".to_string())
        );
        // Nothing is stored outside a request.
        assert!(store.store("loose", &state("x")).await.is_err());
        assert_eq!(principal_of(&pool, "loose").await.expect("owner"), None);

        let week_and_a_day = now_ms() - RETENTION.as_millis() as i64 - 86_400_000;
        on_pool!(&pool, |p| {
            sqlx::query("UPDATE mcp_sessions SET created_at = $1 WHERE session_sha256 = $2")
                .bind(week_and_a_day)
                .bind(session_hash("old"))
                .execute(p)
                .await
                .expect("age the session");
        });
        assert!(
            as_principal(a(), store.load("old"))
                .await
                .expect("load")
                .is_none()
        );
        assert_eq!(prune(&pool).await.expect("prune"), 1);
        assert!(
            as_principal(a(), store.load("fresh"))
                .await
                .expect("load")
                .is_some()
        );

        as_principal(a(), store.delete("fresh"))
            .await
            .expect("delete");
        assert!(
            as_principal(a(), store.load("fresh"))
                .await
                .expect("load")
                .is_none()
        );
    }

    /// Rows hold the hash and the capped fields only, and a principal's
    /// rows stay at its cap, the newest kept.
    #[tokio::test]
    async fn rows_are_hashed_capped_and_bounded_per_principal() {
        let (_dir, pool) = pool().await;
        let store = SessionsInDatabase::new(pool.clone(), 3);
        let huge = "é".repeat(100_000);
        for i in 0..5 {
            as_principal(
                "token:a".into(),
                store.store(&format!("session-{i}"), &state(&huge)),
            )
            .await
            .expect("store");
        }
        as_principal("token:b".into(), store.store("other", &state("b")))
            .await
            .expect("store");
        let rows: Vec<(String, String, String)> = on_pool!(&pool, |p| {
            sqlx::query_as(
                "SELECT session_sha256, principal, client_name FROM mcp_sessions \
                 ORDER BY principal, created_at",
            )
            .fetch_all(p)
            .await
            .expect("rows")
        });
        assert_eq!(rows.len(), 4, "3 of a's, 1 of b's");
        for (hash, _, name) in &rows {
            assert_eq!(hash.len(), 64);
            assert!(!hash.contains("session"));
            assert!(name.len() <= FIELD_BYTES, "{}", name.len());
        }
        assert_eq!(rows[0].2, "é".repeat(FIELD_BYTES / 2));
        for i in 0..2 {
            assert_eq!(
                principal_of(&pool, &format!("session-{i}")).await.unwrap(),
                None
            );
        }
        for i in 2..5 {
            assert!(
                principal_of(&pool, &format!("session-{i}"))
                    .await
                    .unwrap()
                    .is_some()
            );
        }
    }
}
