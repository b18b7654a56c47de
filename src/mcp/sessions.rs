//! Handshake-era MCP sessions (`Mcp-Session-Id`, protocol 2025-11-25) kept in
//! the database, for rmcp's session store: a request for a session this node
//! does not hold in memory (opened on another node, or before a restart)
//! replays the stored `initialize` and carries on, instead of `404`.
//!
//! Invariants: only the client's own `initialize` parameters are stored,
//! never a token or a principal: every request is authenticated on its own
//! and each call reads its caller from that request (`http/mcp.rs`), so a
//! restored session gives its caller nothing its own token does not; rows
//! older than [`RETENTION`] are removed by the leader's retention duty.

use std::time::Duration;

use rmcp::transport::streamable_http_server::session::store::{
    SessionState, SessionStore, SessionStoreError,
};

use crate::db::{Pool, on_pool};
use crate::queue::{Clock, SystemClock};

/// How long a session can be restored after it was opened.
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// rmcp's [`SessionStore`] on the deployment's database.
#[derive(Debug, Clone)]
pub struct SessionsInDatabase {
    pool: Pool,
}

impl SessionsInDatabase {
    pub fn new(pool: Pool) -> SessionsInDatabase {
        SessionsInDatabase { pool }
    }
}

fn now_ms() -> i64 {
    SystemClock.now_ms()
}

/// The opening time (unix milliseconds) of the oldest session still kept.
fn oldest_kept() -> i64 {
    now_ms() - RETENTION.as_millis() as i64
}

#[async_trait::async_trait]
impl SessionStore for SessionsInDatabase {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let oldest = oldest_kept();
        let stored: Option<String> = on_pool!(&self.pool, |pool| {
            sqlx::query_scalar(
                "SELECT initialize_params FROM mcp_sessions \
                 WHERE session_id = $1 AND created_at >= $2",
            )
            .bind(session_id)
            .bind(oldest)
            .fetch_optional(pool)
            .await?
        });
        match stored {
            None => Ok(None),
            Some(text) => Ok(Some(SessionState::new(serde_json::from_str(&text)?))),
        }
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let params = serde_json::to_string(&state.initialize_params)?;
        on_pool!(&self.pool, |pool| {
            sqlx::query(
                "INSERT INTO mcp_sessions (session_id, initialize_params, created_at) \
                 VALUES ($1, $2, $3) ON CONFLICT (session_id) DO UPDATE \
                 SET initialize_params = excluded.initialize_params",
            )
            .bind(session_id)
            .bind(params)
            .bind(now_ms())
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        on_pool!(&self.pool, |pool| {
            sqlx::query("DELETE FROM mcp_sessions WHERE session_id = $1")
                .bind(session_id)
                .execute(pool)
                .await?;
        });
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

    /// A stored session loads until it is older than [`RETENTION`]; then it
    /// no longer loads and retention removes it, and only it.
    #[tokio::test]
    async fn sessions_load_until_retention_removes_them() {
        let dir = tempfile::tempdir().expect("temp dir");
        let pool = crate::db::open(&dir.path().join("data"))
            .await
            .expect("open");
        crate::db::migrate(&pool).await.expect("migrate");
        let pool = Pool::from(pool);
        let store = SessionsInDatabase::new(pool.clone());
        let params: rmcp::model::InitializeRequestParams =
            serde_json::from_value(serde_json::json!({
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}
            }))
            .expect("initialize params");
        for id in ["fresh", "old"] {
            store
                .store(id, &SessionState::new(params.clone()))
                .await
                .expect("store");
        }
        let loaded = store.load("fresh").await.expect("load").expect("stored");
        assert_eq!(loaded.initialize_params.client_info.name, "test");
        assert!(store.load("nobody").await.expect("load").is_none());

        let week_and_a_day = now_ms() - RETENTION.as_millis() as i64 - 86_400_000;
        on_pool!(&pool, |p| {
            sqlx::query("UPDATE mcp_sessions SET created_at = $1 WHERE session_id = 'old'")
                .bind(week_and_a_day)
                .execute(p)
                .await
                .expect("age the session");
        });
        assert!(store.load("old").await.expect("load").is_none());
        assert_eq!(prune(&pool).await.expect("prune"), 1);
        assert!(store.load("fresh").await.expect("load").is_some());

        store.delete("fresh").await.expect("delete");
        assert!(store.load("fresh").await.expect("load").is_none());
    }
}
