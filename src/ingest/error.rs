//! The one error type of the dispatch front door: a [`Kind`] of refusal, a
//! stable machine-readable `code` and a sentence. `http/error.rs` gives each
//! kind the status DESIGN §4 names (400/401/403/409/413/415/422/503).
//!
//! Invariants: every refusal has exactly one code; an `Unavailable` refusal
//! always carries `retry_after`; messages never contain secret material
//! (signatures, tokens, keys).

use std::fmt;

use crate::forge::Refusal;

/// What kind of refusal an [`IngestError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The body or a header is not what a dispatch is.
    BadRequest,
    /// No signature, a bad one, or an OIDC problem.
    Unauthenticated,
    /// The source is not configured.
    UnknownSource,
    /// A verification step failed; `code` names it.
    Conflict,
    /// The body is larger than a dispatch.
    TooLarge,
    /// Not JSON.
    UnsupportedMediaType,
    /// A field is missing, unknown or out of range.
    InvalidField,
    /// The forge could not answer; retry after `retry_after` seconds.
    Unavailable,
}

/// Why a dispatch was refused; the HTTP layer turns it into
/// `{"error": {"code", "message"}}` with its kind's status (and `Retry-After`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestError {
    pub kind: Kind,
    pub code: &'static str,
    pub message: String,
    /// Seconds; set on every 503.
    pub retry_after: Option<u64>,
}

impl IngestError {
    fn new(kind: Kind, code: &'static str, message: impl Into<String>) -> Self {
        IngestError {
            kind,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400: the body is not the JSON object expected.
    pub fn invalid_json(message: impl Into<String>) -> Self {
        Self::new(Kind::BadRequest, "invalid_json", message)
    }
    /// 400: `X-TeamMem-Delivery` missing or malformed.
    pub fn invalid_delivery(message: impl Into<String>) -> Self {
        Self::new(Kind::BadRequest, "invalid_delivery", message)
    }
    /// 401: no `X-Hub-Signature-256`.
    pub fn missing_signature() -> Self {
        Self::new(
            Kind::Unauthenticated,
            "missing_signature",
            "X-Hub-Signature-256 is missing; sign the raw body with HMAC-SHA256 and the source's dispatch secret",
        )
    }
    /// 401: the signature is malformed or does not match.
    pub fn bad_signature(message: impl Into<String>) -> Self {
        Self::new(Kind::Unauthenticated, "bad_signature", message)
    }
    /// 401: an OIDC problem (`oidc_missing`, `oidc_invalid`, `oidc_expired`, ...).
    pub fn oidc(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(Kind::Unauthenticated, code, message)
    }
    /// 403: `source_repository` is not a configured source.
    pub fn unknown_source(repository: &str) -> Self {
        Self::new(
            Kind::UnknownSource,
            "unknown_source",
            format!(
                "{repository:?} is not a configured source; add it to [[sources]] in teammem.toml"
            ),
        )
    }
    /// 409: a verification step failed; `code` names it.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(Kind::Conflict, code, message)
    }
    /// 413: the body exceeds the limit.
    pub fn body_too_large(limit: usize) -> Self {
        Self::new(
            Kind::TooLarge,
            "body_too_large",
            format!("the body exceeds {limit} bytes; a dispatch is a small JSON object"),
        )
    }
    /// 415: not `application/json`.
    pub fn unsupported_media_type(got: Option<&str>) -> Self {
        Self::new(
            Kind::UnsupportedMediaType,
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
        Self::new(Kind::InvalidField, "invalid_field", message)
    }
    /// 503: the forge could not answer in time; nothing was queued.
    pub fn unavailable(retry_after: u64, message: impl Into<String>) -> Self {
        IngestError {
            retry_after: Some(retry_after.max(1)),
            ..Self::new(Kind::Unavailable, "upstream_unavailable", message)
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
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for IngestError {}
