//! `POST /v1/requests`: a maintainer asks for one merged pull request to be
//! reconciled, through the service in `requests/`.
//!
//! Order of checks: bearer token (401, before a byte of the body is read) →
//! body (415/413/400/422, read with a 16 KiB cap) → the service's checks
//! (403/404/409/503 + `Retry-After`) → 202 for a new job, 200 for the same
//! job again.
//!
//! Invariant: a refused request changes nothing; error bodies are the
//! dispatch route's.

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::{ApiError, AppState};
use crate::requests::{MAX_PULL_NUMBER, Requests, check_pull_number};

/// Largest accepted request body.
const MAX_BODY_BYTES: usize = 16 * 1024;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/requests", post(create))
}

/// The service over the daemon's state.
pub fn service(state: &AppState) -> Requests {
    Requests {
        config: state.config.clone(),
        queue: state.queue.clone(),
        forges: state.forges.clone(),
        wake: Some(state.wake_workers.clone()),
    }
}

fn invalid_field(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_field", message)
}

fn bounded(text: &str) -> String {
    text.chars().take(100).collect()
}

/// `{"repository": "owner/name", "pull_number": N}`, nothing else.
fn parse_body(body: &[u8]) -> Result<(String, i64), ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(
            "invalid_json",
            format!("the body is not JSON ({e}); send {{\"repository\": \"owner/name\", \"pull_number\": N}}"),
        )
    })?;
    let Value::Object(object) = value else {
        return Err(ApiError::bad_request(
            "invalid_json",
            "the body must be a JSON object {\"repository\": \"owner/name\", \"pull_number\": N}",
        ));
    };
    if let Some(extra) = object
        .keys()
        .find(|k| *k != "repository" && *k != "pull_number")
    {
        return Err(invalid_field(format!(
            "unknown field {:?}; the body takes only repository and pull_number",
            bounded(extra)
        )));
    }
    let repository = match object.get("repository") {
        Some(Value::String(r)) if crate::config::is_repository_name(r) => r.clone(),
        Some(Value::String(r)) => {
            return Err(invalid_field(format!(
                "repository must be owner/name, got {:?}",
                bounded(r)
            )));
        }
        Some(_) => {
            return Err(invalid_field(
                "repository must be a string owner/name".into(),
            ));
        }
        None => return Err(invalid_field("repository is required (owner/name)".into())),
    };
    let number = match object.get("pull_number") {
        Some(Value::Number(n)) => match n.as_i64() {
            Some(n) => n,
            None => {
                return Err(invalid_field(format!(
                    "pull_number must be an integer from 1 to {MAX_PULL_NUMBER}, got {n}"
                )));
            }
        },
        Some(_) => {
            return Err(invalid_field(format!(
                "pull_number must be an integer from 1 to {MAX_PULL_NUMBER}"
            )));
        }
        None => return Err(invalid_field("pull_number is required".into())),
    };
    check_pull_number(number)?;
    Ok((repository, number))
}

async fn create(State(state): State<AppState>, request: Request) -> Response {
    match handle(&state, request).await {
        Ok(response) => response,
        Err(e) => {
            tracing::info!(code = e.code, status = e.status.as_u16(), "request refused");
            e.into_response()
        }
    }
}

/// Reads the body only after the caller authenticated, and at most
/// [`MAX_BODY_BYTES`] of it: an unauthenticated client is answered before its
/// body is read at all.
async fn handle(state: &AppState, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let requests = service(state);
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    let credential = requests.authenticate(&state.pool, authorization).await?;
    // The principal's request rate (`[limits]`); `actor()` is its limiter key.
    state.limits.check_rate(&credential.actor())?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    if content_type.as_deref() != Some("application/json") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as Content-Type: application/json",
        ));
    }
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the body may be at most {MAX_BODY_BYTES} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(too_large());
    }
    let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| too_large())?;
    let (repository, number) = parse_body(&body)?;
    let source = requests.authorize(&credential, &repository).await?;
    let accepted = requests
        .request(&source, number, &credential.actor())
        .await?;
    let status = if accepted.is_new() {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(json!({
            "job_id": accepted.enqueued.job.id,
            "state": accepted.enqueued.job.state,
            "repository": source.repository,
            "pull_number": number,
            "merge_sha": accepted.merge_sha,
        })),
    )
        .into_response())
}
