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

/// Every sample of `text` with a `node` label first, so that series from
/// several nodes behind one scrape target never merge. The node id is
/// `[A-Za-z0-9._-]` (checked by the config), so it needs no escaping.
fn with_node_label(text: &str, node: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            out.push_str(line);
        } else {
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let (name, rest) = line.split_at(name_end);
            out.push_str(name);
            match rest.strip_prefix('{') {
                Some(labels) => {
                    let _ = write!(out, "{{node=\"{node}\",{labels}");
                }
                None => {
                    let _ = write!(out, "{{node=\"{node}\"}}{rest}");
                }
            }
        }
        out.push('\n');
    }
    out
}

/// `teammem_source_lag{source="owner/name"}`: per configured source (a
/// bounded set), the commits on its default branch past the newest reconciled
/// commit, as the sources page counts them ("N commits behind"); a source
/// whose lag is not known (no reconciled commit yet, the forge did not answer
/// within `dashboard.forge_timeout_seconds`, the cursor is not in the
/// branch's history) has no sample. The cursor never moves back, so neither
/// does this after an old job is retried.
async fn source_lag(state: &AppState, out: &mut String) -> Result<(), ApiError> {
    let lags = state
        .freshness
        .lags(&state.config, &state.queue, &state.forges)
        .await
        .map_err(|e| ApiError::internal("reading the reconciled commits failed", &e))?;
    out.push_str(
        "# HELP teammem_source_lag Commits on the source's default branch past its newest reconciled commit (absent while unknown).\n\
         # TYPE teammem_source_lag gauge\n",
    );
    for (source, commits) in lags {
        if let Some(commits) = commits {
            // Repository names are `[A-Za-z0-9._-]/[A-Za-z0-9._-]` (checked
            // by the config): nothing to escape.
            let _ = writeln!(out, "teammem_source_lag{{source=\"{source}\"}} {commits}");
        }
    }
    Ok(())
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
    source_lag(&state, &mut out).await?;
    let _ = writeln!(
        out,
        "# HELP teammem_node_info This node: its database backend and whether it runs the cluster's duties.\n\
         # TYPE teammem_node_info gauge\n\
         teammem_node_info{{database=\"{}\",leader=\"{}\"}} 1",
        match state.pool.dialect() {
            crate::db::Dialect::Sqlite => "sqlite",
            crate::db::Dialect::Postgres => "postgres",
        },
        state.leader.is_leader(),
    );
    let out = with_node_label(&out, &state.config.server.node_id);
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    ))
}
