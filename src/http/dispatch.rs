//! `POST /v1/dispatch`: the signed front door of the post-merge and request
//! workflows. The request goes through [`crate::ingest::Ingest`] (signature,
//! parsing, OIDC, forge verification) and only a verified dispatch reaches the
//! queue.
//!
//! Invariants: nothing is stored for a refused request (the queue is called only
//! with a `VerifiedDispatch`); the body is read with a hard 64 KiB cap; answers
//! are `202 {job_id, state, coalesced_into}` for a new or coalesced job, `200`
//! with the same job for a delivery or job identity seen before (a range
//! split into several jobs, `ingest/split.rs`, answers with its first and
//! lists them all in `split_into`), and
//! `{"error": {"code", "message"}}` with the status of DESIGN §4 otherwise.

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;

use super::{ApiError, AppState};
use crate::ingest::split::{RangeEnqueued, SplitError};
use crate::ingest::{DispatchHeaders, IngestError, MAX_BODY_BYTES, VerifiedDispatch, VerifiedKind};
use crate::queue::{Disposition, Enqueued, JobKind, NewJob, Origin};

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/dispatch", post(dispatch))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The queue's view of a verified dispatch.
pub fn new_job(v: &VerifiedDispatch) -> NewJob {
    let (origin, kind) = match &v.kind {
        VerifiedKind::Range { before, after, .. } => (
            Origin::Dispatch,
            JobKind::Range {
                before: before.clone(),
                after: after.clone(),
                run_id: v.run.map(|r| r.id as i64),
                run_attempt: v.run.map(|r| r.attempt as i64),
            },
        ),
        VerifiedKind::PullRequest { number, merge_sha } => (
            Origin::Request,
            JobKind::PullRequest {
                number: *number,
                merge_sha: merge_sha.clone(),
            },
        ),
    };
    let actor = match v.run {
        Some(run) => format!("workflow run {} attempt {}", run.id, run.attempt),
        None => "signed dispatch".to_string(),
    };
    NewJob {
        source: v.source.clone(),
        destination: v.destination.clone(),
        origin,
        kind,
        actor,
    }
}

/// One INFO line per job the dispatch moved (its `enqueued` or `coalesced`
/// event): the operator's view of a job is one INFO line per state change.
/// A dispatch seen before changed no job: DEBUG.
fn log_accepted(verified: &VerifiedDispatch, enqueued: &Enqueued, split_into: Option<&[i64]>) {
    let (source, delivery) = (&verified.source, &verified.delivery_id);
    let state = enqueued.job.state;
    match enqueued.disposition {
        Disposition::Duplicate => tracing::debug!(
            job = enqueued.job.id,
            %source,
            %delivery,
            "dispatch seen before; its job stands"
        ),
        Disposition::Coalesced { into } => tracing::info!(
            job = into,
            %state,
            %source,
            %delivery,
            "dispatch accepted: its range extends the queued job"
        ),
        Disposition::Created => {
            for &job in split_into.unwrap_or(&[enqueued.job.id]) {
                tracing::info!(job, %state, %source, %delivery, "dispatch accepted");
            }
        }
    }
}

async fn dispatch(State(state): State<AppState>, request: Request) -> Response {
    let started = std::time::Instant::now();
    let (code, response) = match handle(state, request).await {
        Ok(r) if r.status() == StatusCode::ACCEPTED => ("accepted", r),
        Ok(r) => ("duplicate", r),
        Err(e) => (e.code, e.into_response()),
    };
    crate::metrics::REQUESTS.inc(&["dispatch", code]);
    crate::metrics::INGEST_DURATION.observe(&["dispatch"], started.elapsed());
    response
}

async fn handle(state: AppState, request: Request) -> Result<Response, ApiError> {
    let Some(ingest) = state.ingest.clone() else {
        return Err(ApiError {
            retry_after: Some(60),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "dispatch_unavailable",
                "this daemon was started without dispatch ingest; start it with teammem serve",
            )
        });
    };
    let (parts, body) = request.into_parts();
    let declared = header(&parts.headers, header::CONTENT_LENGTH.as_str())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(IngestError::body_too_large(MAX_BODY_BYTES).into());
    }
    let body = axum::body::to_bytes(Body::new(body), MAX_BODY_BYTES)
        .await
        .map_err(|_| ApiError::from(IngestError::body_too_large(MAX_BODY_BYTES)))?;
    let headers = DispatchHeaders {
        content_type: header(&parts.headers, "content-type"),
        signature: header(&parts.headers, "x-hub-signature-256"),
        delivery: header(&parts.headers, "x-teammem-delivery"),
        authorization: header(&parts.headers, "authorization"),
    };
    let verified = match ingest.ingest(&headers, &body).await {
        Ok(v) => v,
        Err(e) => {
            let answer = ApiError::from(e);
            tracing::info!(
                code = answer.code,
                status = answer.status.as_u16(),
                "dispatch refused"
            );
            return Err(answer);
        }
    };
    // A range larger than one job's bound is several jobs (`ingest/split.rs`):
    // the answer names the first, and `split_into` all of them in order.
    let (enqueued, split_into) = match ingest
        .enqueue(&state.queue, &verified, new_job(&verified))
        .await
    {
        Ok(RangeEnqueued::One(enqueued)) => (*enqueued, None),
        Ok(RangeEnqueued::Parts(parts)) => {
            let ids: Vec<i64> = parts.jobs.iter().map(|j| j.id).collect();
            let first = Enqueued {
                job: parts.jobs[0].clone(),
                disposition: parts.disposition,
            };
            (first, (ids.len() > 1).then_some(ids))
        }
        Err(SplitError::Queue(e)) => return Err(e.into()),
        Err(SplitError::Forge(refusal)) => return Err(IngestError::from(refusal).into()),
    };
    let (status, coalesced_into) = match enqueued.disposition {
        Disposition::Created => (StatusCode::ACCEPTED, None),
        Disposition::Coalesced { into } => (StatusCode::ACCEPTED, Some(into)),
        Disposition::Duplicate => (StatusCode::OK, None),
    };
    if status == StatusCode::ACCEPTED {
        state.wake_workers.notify_one();
    }
    log_accepted(&verified, &enqueued, split_into.as_deref());
    Ok((
        status,
        Json(json!({
            "job_id": enqueued.job.id,
            "state": enqueued.job.state,
            "coalesced_into": coalesced_into,
            "split_into": split_into,
        })),
    )
        .into_response())
}
