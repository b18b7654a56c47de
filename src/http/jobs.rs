//! `/v1/jobs`: list, show, cancel and retry jobs.
//!
//! A caller sees only jobs of the sources its token may access; a job outside
//! that scope answers 404, exactly like a job that does not exist.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, AppState, Caller};
use crate::queue::{Job, JobFilter, JobState, Steering};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/jobs", get(list))
        .route("/v1/jobs/{id}", get(show))
        .route("/v1/jobs/{id}/cancel", post(cancel))
        .route("/v1/jobs/{id}/retry", post(retry))
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    repository: Option<String>,
    state: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = match q.limit.as_deref() {
        None => 20,
        Some(s) => match s.parse::<u32>() {
            Ok(n) if (1..=100).contains(&n) => n,
            _ => {
                return Err(ApiError::bad_request(
                    "invalid_limit",
                    format!("limit: expected a number from 1 to 100, got {s:?}"),
                ));
            }
        },
    };
    let job_state = match q.state.as_deref() {
        None => None,
        Some(s) => Some(
            s.parse::<JobState>()
                .map_err(|e| ApiError::bad_request("invalid_state", e.to_string()))?,
        ),
    };
    if let Some(r) = &q.repository
        && !caller.may_access(r)
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden_repository",
            format!("this token may not see jobs of {r}"),
        ));
    }
    let page = state
        .queue
        .list(&JobFilter {
            repository: q.repository,
            allowed_repositories: (!caller.repositories.is_empty())
                .then(|| caller.repositories.clone()),
            state: job_state,
            limit,
            cursor: q.cursor,
        })
        .await?;
    Ok(Json(
        json!({"jobs": page.jobs, "next_cursor": page.next_cursor}),
    ))
}

fn parse_id(raw: &str) -> Result<i64, ApiError> {
    raw.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| {
        ApiError::bad_request(
            "invalid_job_id",
            format!("job id: expected a positive number, got {raw:?}"),
        )
    })
}

/// Loads a job the caller may see, or answers 404.
async fn visible_job(state: &AppState, caller: &Caller, id: i64) -> Result<Job, ApiError> {
    let job = state.queue.get(id).await?;
    if caller.0.may_access(&job.source) {
        Ok(job)
    } else {
        Err(ApiError::job_not_found(id))
    }
}

async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id)?;
    let job = visible_job(&state, &caller, id).await?;
    let events = state.queue.events(id).await?;
    Ok(Json(json!({"job": job, "events": events})))
}

async fn cancel(
    state: State<AppState>,
    caller: Caller,
    id: Path<String>,
) -> Result<Json<Value>, ApiError> {
    steer(state, caller, id, Steering::Cancel).await
}

/// A retry is accepted without asking GitHub about the audience: the runner
/// checks it on every attempt right before it mints the wiki token, so a job
/// whose source now crosses an audience ends `rejected` with
/// `audience_mismatch: ...` and what to do, recorded on the job, where an
/// operator reads why a job did not run (`jobs show`, the dashboard), and the
/// answer here never waits on, or fails with, GitHub.
async fn retry(
    state: State<AppState>,
    caller: Caller,
    id: Path<String>,
) -> Result<Json<Value>, ApiError> {
    steer(state, caller, id, Steering::Retry).await
}

/// Cancels or retries a job the caller may see; the queue decides whether the
/// job's state allows it.
async fn steer(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    steering: Steering,
) -> Result<Json<Value>, ApiError> {
    let id = parse_id(&id)?;
    visible_job(&state, &caller, id).await?;
    let actor = format!("token:{}", caller.0.name);
    let job = state.queue.steer(id, &actor, steering).await?;
    steering.log_committed(&job, &actor);
    if steering == Steering::Retry {
        state.wake_workers.notify_waiters();
    }
    Ok(Json(json!({"job": job})))
}
