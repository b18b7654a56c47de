//! The one place where errors become HTTP answers.
//!
//! Every error body is `{"error": {"code": "...", "message": "..."}}`; `code` is
//! stable for scripts, `message` is a sentence for people. Internal failures are
//! logged in full and answered with a generic 500 body: database or I/O details
//! never leave the process.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::ingest::IngestError;
use crate::ingest::IngestKind;
use crate::queue::QueueError;
use crate::requests::{Kind, RequestError};

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// An internal failure: logged here, answered without detail.
    pub fn internal(context: &str, error: &dyn std::fmt::Display) -> ApiError {
        tracing::error!(%error, "{context}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "internal error; the server log has the details",
        )
    }

    /// The database could not be reached: logged here, answered `503` with
    /// `Retry-After`, so dispatchers and clients retry (nothing half-done
    /// stays behind: every write is one transaction).
    pub fn database_unavailable(error: &dyn std::fmt::Display) -> ApiError {
        tracing::error!(%error, "database unavailable");
        ApiError {
            retry_after: Some(crate::db::UNAVAILABLE_RETRY_AFTER),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "database_unavailable",
                "the database cannot be reached right now; retry after the Retry-After seconds",
            )
        }
    }

    /// A per-principal limit was hit: `429` with `Retry-After` (whole
    /// seconds, at least one), counted under `limit` in
    /// `teammem_http_limited_total`.
    pub fn too_many_requests(
        limit: &'static str,
        code: &'static str,
        message: impl Into<String>,
        retry_after: u64,
    ) -> ApiError {
        crate::metrics::LIMITED.inc(&[limit]);
        ApiError {
            retry_after: Some(retry_after.max(1)),
            ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, code, message)
        }
    }

    /// Every connection `/mcp` may hold is taken (the rest are reserved for
    /// dispatches and health checks): `503` with `Retry-After`, counted as
    /// `mcp_capacity`. Not the caller's own limit, hence not `429`.
    pub fn mcp_capacity(reserved: usize) -> ApiError {
        crate::metrics::LIMITED.inc(&["mcp_capacity"]);
        ApiError {
            retry_after: Some(1),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "mcp_capacity",
                format!(
                    "every connection /mcp may use is taken ({reserved} are kept for dispatches and health checks, server.reserved_connections); retry after the Retry-After seconds"
                ),
            )
        }
    }

    pub fn job_not_found(id: i64) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "job_not_found",
            format!("job {id} not found; GET /v1/jobs lists the jobs you may see"),
        )
    }
}

impl From<QueueError> for ApiError {
    fn from(e: QueueError) -> ApiError {
        match e {
            QueueError::NotFound { id } => ApiError::job_not_found(id),
            QueueError::InvalidTransition { .. } => {
                ApiError::new(StatusCode::CONFLICT, "invalid_transition", e.to_string())
            }
            QueueError::LeaseLost { .. } => {
                ApiError::new(StatusCode::CONFLICT, "lease_lost", e.to_string())
            }
            other if other.is_unavailable() => ApiError::database_unavailable(&other),
            other => ApiError::internal("queue operation failed", &other),
        }
    }
}

impl From<IngestError> for ApiError {
    fn from(e: IngestError) -> ApiError {
        let status = match e.kind {
            IngestKind::BadRequest => StatusCode::BAD_REQUEST,
            IngestKind::Unauthenticated => StatusCode::UNAUTHORIZED,
            IngestKind::UnknownSource => StatusCode::FORBIDDEN,
            IngestKind::Conflict => StatusCode::CONFLICT,
            IngestKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            IngestKind::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            IngestKind::InvalidField => StatusCode::UNPROCESSABLE_ENTITY,
            IngestKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        };
        let mut api = ApiError::new(status, e.code, e.message);
        api.retry_after = e.retry_after;
        api
    }
}

impl From<RequestError> for ApiError {
    fn from(e: RequestError) -> ApiError {
        let status = match e.kind {
            Kind::Unauthorized => StatusCode::UNAUTHORIZED,
            Kind::Forbidden => StatusCode::FORBIDDEN,
            Kind::NotFound => StatusCode::NOT_FOUND,
            Kind::Conflict => StatusCode::CONFLICT,
            Kind::InvalidField => StatusCode::UNPROCESSABLE_ENTITY,
            Kind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError {
            retry_after: e.retry_after,
            ..ApiError::new(status, e.code, e.message)
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"teammem\""),
            );
        }
        if let Some(secs) = self.retry_after
            && let Ok(v) = HeaderValue::from_str(&secs.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        // A caller over its limit loses its connection too: kept alive, it
        // would hold one of the server's connections while it waits.
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

/// The answer to a request naming an `Mcp-Session-Id` the caller may not
/// use: byte for byte rmcp's answer for an unknown session (status, body,
/// no content type), so a session another principal holds cannot be told
/// from one that does not exist.
pub fn mcp_session_not_found() -> Response {
    let mut response = Response::new(axum::body::Body::from("Not Found: Session not found"));
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

pub async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route; see the README for the API",
    )
}
