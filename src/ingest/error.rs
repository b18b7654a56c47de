//! The one error type of the dispatch front door: an HTTP status, a stable
//! machine-readable `code` and a sentence.
//!
//! Invariants: every refusal has exactly one code and the status DESIGN §4 gives
//! it (400/401/403/409/413/415/422/503); a 503 always carries `retry_after`;
//! messages never contain secret material (signatures, tokens, keys).

use std::fmt;

use crate::forge::Refusal;

/// Why a dispatch was refused; the HTTP layer turns it into
/// `{"error": {"code", "message"}}` with `status` (and `Retry-After`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    /// Seconds; set on every 503.
    pub retry_after: Option<u64>,
}

impl IngestError {
    fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        IngestError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400: the body is not the JSON object expected.
    pub fn invalid_json(message: impl Into<String>) -> Self {
        Self::new(400, "invalid_json", message)
    }
    /// 400: `X-TeamMem-Delivery` missing or malformed.
    pub fn invalid_delivery(message: impl Into<String>) -> Self {
        Self::new(400, "invalid_delivery", message)
    }
    /// 401: no `X-Hub-Signature-256`.
    pub fn missing_signature() -> Self {
        Self::new(
            401,
            "missing_signature",
            "X-Hub-Signature-256 is missing; sign the raw body with HMAC-SHA256 and the source's dispatch secret",
        )
    }
    /// 401: the signature is malformed or does not match.
    pub fn bad_signature(message: impl Into<String>) -> Self {
        Self::new(401, "bad_signature", message)
    }
    /// 401: an OIDC problem (`oidc_missing`, `oidc_invalid`, `oidc_expired`, ...).
    pub fn oidc(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(401, code, message)
    }
    /// 403: `source_repository` is not a configured source.
    pub fn unknown_source(repository: &str) -> Self {
        Self::new(
            403,
            "unknown_source",
            format!(
                "{repository:?} is not a configured source; add it to [[sources]] in teammem.toml"
            ),
        )
    }
    /// 409: a verification step failed; `code` names it.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(409, code, message)
    }
    /// 413: the body exceeds the limit.
    pub fn body_too_large(limit: usize) -> Self {
        Self::new(
            413,
            "body_too_large",
            format!("the body exceeds {limit} bytes; a dispatch is a small JSON object"),
        )
    }
    /// 415: not `application/json`.
    pub fn unsupported_media_type(got: Option<&str>) -> Self {
        Self::new(
            415,
            "unsupported_media_type",
            format!(
                "Content-Type must be application/json, got {}",
                got.map(|g| format!("{g:?}"))
                    .unwrap_or_else(|| "none".into())
            ),
        )
    }
    /// 422: a field is missing, unknown or out of range.
    pub fn invalid_field(message: impl Into<String>) -> Self {
        Self::new(422, "invalid_field", message)
    }
    /// 503: the forge could not answer in time; nothing was queued.
    pub fn unavailable(retry_after: u64, message: impl Into<String>) -> Self {
        IngestError {
            retry_after: Some(retry_after.max(1)),
            ..Self::new(503, "upstream_unavailable", message)
        }
    }
}

impl From<Refusal> for IngestError {
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Rejected { code, message } => IngestError::conflict(code, message),
            Refusal::Unavailable {
                retry_after,
                message,
            } => IngestError::unavailable(retry_after, message),
        }
    }
}

impl fmt::Display for IngestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.message)
    }
}

impl std::error::Error for IngestError {}
