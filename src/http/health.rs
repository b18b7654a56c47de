//! Liveness and readiness for orchestrators. Unauthenticated and detail-free
//! beyond what an orchestrator needs to decide.
//!
//! Invariant: `/readyz` answers within a second whatever the database does:
//! its database probe is bounded ([`crate::db::READINESS_PROBE_TIMEOUT`]).

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use super::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// Ready = the database answers, every migration is applied, every worker is
/// running, every local source's repository and wiki are git repositories
/// (a missing one is named by its key: its jobs would fail) and shutdown has
/// not begun. The answer also names the node, its
/// database backend and whether it holds the leader role (runs rescue,
/// retention and the sweep for the cluster); a follower is ready too.
async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<serde_json::Value>) {
    let mut problems = Vec::new();
    if !state.ready.load(Ordering::SeqCst) {
        problems.push("shutting down".to_string());
    }
    // Bounded: an orchestrator gets its answer within a second however the
    // database behaves (a pooled connection would wait up to 5 s).
    if let Err(problem) = state
        .pool
        .readiness(crate::db::READINESS_PROBE_TIMEOUT)
        .await
    {
        problems.push(problem);
    }
    problems.extend(state.job_problems.iter().cloned());
    // A few stats, read afresh: a repository moved away after the start is
    // reported too.
    problems.extend(state.config.missing_local_repositories());
    let alive = state.workers_alive.load(Ordering::SeqCst);
    let wanted = state.config.queue.workers;
    if alive < wanted {
        problems.push(format!("{alive} of {wanted} workers running"));
    }
    let node = &state.config.server.node_id;
    let database = match state.pool.dialect() {
        crate::db::Dialect::Sqlite => "sqlite",
        crate::db::Dialect::Postgres => "postgres",
    };
    let role = if state.leader.is_leader() {
        "leader"
    } else {
        "follower"
    };
    if problems.is_empty() {
        (
            StatusCode::OK,
            Json(json!({
                "status": "ready", "workers": alive,
                "node": node, "database": database, "role": role,
                "wakeups": state.wakeups.as_str(),
                "agent_isolation": *state.agent_isolation,
            })),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "status": "not_ready", "problems": problems,
                "node": node, "database": database, "role": role,
                "wakeups": state.wakeups.as_str(),
                "agent_isolation": *state.agent_isolation,
            })),
        )
    }
}
