//! `GET /metrics`: Prometheus text exposition (version 0.0.4).
//!
//! Gauges are read from the database at scrape time (jobs by state); counters
//! come from the queue's in-process statistics and restart at zero with the
//! process, as Prometheus counters may. The process-wide counters and
//! histograms other modules record are in `crate::metrics`.

use std::fmt::Write;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use super::{ApiError, AppState};
use crate::queue::JobState;

pub fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let counts = state
        .queue
        .counts_by_state()
        .await
        .map_err(|e| ApiError::internal("counting jobs failed", &e))?;
    let stats = state.queue.stats();
    let mut out = String::new();
    out.push_str("# HELP teammem_jobs Jobs in the queue database by state.\n");
    out.push_str("# TYPE teammem_jobs gauge\n");
    for s in JobState::ALL {
        let n = counts.get(&s).copied().unwrap_or(0);
        let _ = writeln!(out, "teammem_jobs{{state=\"{}\"}} {n}", s.as_str());
    }
    let counters = [
        (
            "teammem_queue_claims_total",
            "Jobs claimed by workers.",
            stats.claims,
        ),
        (
            "teammem_queue_rescues_total",
            "Jobs requeued after their lease expired.",
            stats.rescues,
        ),
        (
            "teammem_queue_retries_total",
            "Failed attempts scheduled to run again.",
            stats.retries_scheduled,
        ),
        (
            "teammem_queue_commits_total",
            "Queue transactions committed; each carries one or more writes (group commit).",
            stats.commits,
        ),
        (
            "teammem_queue_writes_total",
            "Queue writes committed (enqueues, claims, completions, heartbeats, steering).",
            stats.writes,
        ),
    ];
    for (name, help, value) in counters {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
        );
    }
    crate::metrics::render(&mut out);
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    ))
}
