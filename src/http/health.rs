//! Liveness and readiness for orchestrators. Unauthenticated and detail-free
//! beyond what an orchestrator needs to decide.

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
/// running and shutdown has not begun.
async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<serde_json::Value>) {
    let mut problems = Vec::new();
    if !state.ready.load(Ordering::SeqCst) {
        problems.push("shutting down".to_string());
    }
    match state.pool.migrations_pending().await {
        Ok(false) => {}
        Ok(true) => problems.push("database migrations are pending; run `teammem migrate`".into()),
        Err(_) => problems.push("database unreachable".into()),
    }
    problems.extend(state.job_problems.iter().cloned());
    let alive = state.workers_alive.load(Ordering::SeqCst);
    let wanted = state.config.queue.workers;
    if alive < wanted {
        problems.push(format!("{alive} of {wanted} workers running"));
    }
    if problems.is_empty() {
        (
            StatusCode::OK,
            Json(json!({"status": "ready", "workers": alive})),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "not_ready", "problems": problems})),
        )
    }
}
