//! The one error type of the wiki engine. Every failure carries a DESIGN §7 error
//! type, a sentence an agent can act on (no trailing period, never raw internal
//! error text, never a credential) and what happened to the wiki (`outcome`).

use serde::{Deserialize, Serialize};

/// DESIGN §7 error types, serialized in snake_case as the envelope's `error.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    InvalidInput,
    NotFound,
    Conflict,
    DestinationChanged,
    PublishRejected,
    PermissionDenied,
    AuthenticationError,
    RateLimited,
    Timeout,
    TransportError,
    LimitExceeded,
    UpstreamError,
    ConfigurationError,
    OutcomeUnknown,
    InternalError,
}

impl ErrorKind {
    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidInput => "invalid_input",
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::DestinationChanged => "destination_changed",
            Self::PublishRejected => "publish_rejected",
            Self::PermissionDenied => "permission_denied",
            Self::AuthenticationError => "authentication_error",
            Self::RateLimited => "rate_limited",
            Self::Timeout => "timeout",
            Self::TransportError => "transport_error",
            Self::LimitExceeded => "limit_exceeded",
            Self::UpstreamError => "upstream_error",
            Self::ConfigurationError => "configuration_error",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::InternalError => "internal_error",
        }
    }
}

/// What a call did to the wiki: the envelope's `outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The call finished (a read, or a confirmed write or no-change).
    Completed,
    /// Nothing was changed.
    NotApplied,
    /// A write may or may not have happened; read the wiki before acting again.
    Unknown,
}

/// A failed wiki call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WikiError {
    #[serde(rename = "type")]
    pub kind: ErrorKind,
    pub message: String,
    pub outcome: Outcome,
}

impl WikiError {
    /// An error after which the wiki is known to be unchanged.
    pub fn not_applied(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            outcome: Outcome::NotApplied,
        }
    }

    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::not_applied(ErrorKind::InvalidInput, message)
    }

    pub fn limit_exceeded(message: impl Into<String>) -> Self {
        Self::not_applied(ErrorKind::LimitExceeded, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::not_applied(ErrorKind::NotFound, message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::not_applied(ErrorKind::Conflict, message)
    }

    /// A write that may have been applied.
    pub fn outcome_unknown(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::OutcomeUnknown,
            message: message.into(),
            outcome: Outcome::Unknown,
        }
    }

    /// An internal failure. The details go to the log (stderr), the caller gets a
    /// fixed sentence naming only what was being done.
    pub fn internal(doing: &str, detail: impl std::fmt::Display) -> Self {
        tracing::error!(target: "teammem::wiki", doing, %detail, "internal wiki error");
        Self::not_applied(
            ErrorKind::InternalError,
            format!("an internal error occurred while {doing}; the details are in the teammem log"),
        )
    }
}

impl std::fmt::Display for WikiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}

impl std::error::Error for WikiError {}
