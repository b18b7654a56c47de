//! The execution envelope of DESIGN §7: the one place a tool result is made.
//!
//! Invariants kept here, for every tool of every toolset:
//! - the result is `{"success", "outcome", "result", "error"}`; the text content
//!   and `structuredContent` carry the same object and `isError == !success`;
//! - `result` names the source and the resolved wiki (`source_repository`,
//!   `wiki_repository`) whenever the source was resolved, on success and on
//!   failure; it is `null` only when no configured source was named;
//! - a result larger than [`MAX_RESULT_BYTES`] (measured on the serialized
//!   envelope) is replaced by a `limit_exceeded` error;
//! - a result containing a credential the process holds (raw, JSON-escaped or as
//!   the Basic-auth value it travels in) is replaced by an `internal_error`;
//! - internal failures carry a fixed sentence, never raw error text.
//!
//! A replaced write result keeps `outcome: unknown` when the write may have
//! happened, so an agent never reads "nothing happened" after a publish.

use std::sync::{Arc, RwLock};

use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::{Map, Value, json};

pub use crate::wiki::{ErrorKind, Outcome, Secret, WikiError};

/// Largest tool result, envelope included (384 KiB).
pub const MAX_RESULT_BYTES: usize = 384 * 1024;

/// The source a call was about and the wiki it resolved to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResolvedWiki {
    pub source_repository: String,
    pub wiki_repository: String,
}

/// A tool failure an agent can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    pub kind: ErrorKind,
    pub message: String,
    pub outcome: Outcome,
    /// The HTTP status an upstream answered with, when one did.
    pub http_status: Option<u16>,
}

impl ToolError {
    /// A failure after which nothing changed.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            outcome: Outcome::NotApplied,
            http_status: None,
        }
    }

    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }

    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::PermissionDenied, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    pub fn configuration(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::ConfigurationError, message)
    }

    /// An internal failure: the detail goes to the log (stderr), the caller gets a
    /// fixed sentence naming only what was being done.
    pub fn internal(doing: &str, detail: impl std::fmt::Display) -> Self {
        tracing::error!(target: "teammem::mcp", doing, %detail, "internal error in a tool call");
        Self::new(
            ErrorKind::InternalError,
            format!("an internal error occurred while {doing}; the details are in the teammem log"),
        )
    }
}

impl From<WikiError> for ToolError {
    fn from(error: WikiError) -> Self {
        Self {
            kind: error.kind,
            message: error.message,
            outcome: error.outcome,
            http_status: None,
        }
    }
}

/// The credentials this process holds. Every result is checked against them
/// before it leaves; whoever obtains a credential registers it here first.
#[derive(Debug, Clone, Default)]
pub struct SecretGuard {
    needles: Arc<RwLock<Vec<String>>>,
}

impl SecretGuard {
    pub fn new() -> Self {
        Self::default()
    }

    /// Remembers a credential and the forms it could appear in.
    pub fn register(&self, secret: &Secret) {
        // A token is text; one that is not cannot appear in a JSON answer as itself.
        let Some(raw) = secret.expose_str() else {
            return;
        };
        if raw.is_empty() {
            return;
        }
        let mut forms = vec![raw.to_owned()];
        let escaped = serde_json::to_string(raw).unwrap_or_default();
        let escaped = escaped.trim_matches('"');
        if escaped != raw && !escaped.is_empty() {
            forms.push(escaped.to_owned());
        }
        forms.push(
            base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{raw}")),
        );
        let mut needles = self
            .needles
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for form in forms {
            if !needles.contains(&form) {
                needles.push(form);
            }
        }
    }

    /// Whether `text` contains any registered credential.
    pub fn leaks(&self, text: &str) -> bool {
        self.needles
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .any(|needle| text.contains(needle.as_str()))
    }
}

/// What a tool call produced, before it becomes an envelope.
pub type ToolOutcome = Result<Value, ToolError>;

/// Turns a tool's outcome into the MCP result: the envelope as text and as
/// `structuredContent`, `isError` set from `success`, size and credential checked.
///
/// `may_write` is true for tools that can change the wiki; it decides the
/// outcome of a replaced result.
pub fn respond(
    outcome: ToolOutcome,
    identity: Option<&ResolvedWiki>,
    guard: &SecretGuard,
    may_write: bool,
) -> CallToolResult {
    let was = match &outcome {
        Ok(_) => Outcome::Completed,
        Err(error) => error.outcome,
    };
    let envelope = build(outcome, identity);
    let text = envelope.to_string();
    let replacement_outcome = if may_write && was != Outcome::NotApplied {
        Outcome::Unknown
    } else {
        Outcome::NotApplied
    };
    if guard.leaks(&text) {
        tracing::error!(
            target: "teammem::mcp",
            "a tool result contained a credential this process holds; it was withheld"
        );
        let error = ToolError {
            outcome: replacement_outcome,
            ..ToolError::new(
                ErrorKind::InternalError,
                "the result was withheld because it contained a credential; the details are in the teammem log",
            )
        };
        return finish(build(Err(error), identity));
    }
    if text.len() > MAX_RESULT_BYTES {
        let error = ToolError {
            outcome: replacement_outcome,
            ..ToolError::new(
                ErrorKind::LimitExceeded,
                format!(
                    "the result is {} bytes and a tool result may be at most {MAX_RESULT_BYTES} bytes (384 KiB); narrow the request (one path, a smaller limit, closer refs)",
                    text.len()
                ),
            )
        };
        return finish(build(Err(error), identity));
    }
    finish(envelope)
}

/// The envelope object itself (also what the operator CLI prints).
pub fn build(outcome: ToolOutcome, identity: Option<&ResolvedWiki>) -> Value {
    let identity_fields = |mut object: Map<String, Value>| {
        if let Some(identity) = identity {
            object.insert(
                "source_repository".into(),
                Value::String(identity.source_repository.clone()),
            );
            object.insert(
                "wiki_repository".into(),
                Value::String(identity.wiki_repository.clone()),
            );
        }
        object
    };
    match outcome {
        Ok(result) => {
            let result = match result {
                Value::Object(object) => Value::Object(identity_fields(object)),
                Value::Null => Value::Object(identity_fields(Map::new())),
                other => {
                    let mut object = identity_fields(Map::new());
                    object.insert("value".into(), other);
                    Value::Object(object)
                }
            };
            json!({
                "success": true,
                "outcome": Outcome::Completed,
                "result": result,
                "error": null,
            })
        }
        Err(error) => {
            let result = if identity.is_some() {
                Value::Object(identity_fields(Map::new()))
            } else {
                Value::Null
            };
            json!({
                "success": false,
                "outcome": error.outcome,
                "result": result,
                "error": {
                    "type": error.kind,
                    "message": error.message,
                    "http_status": error.http_status,
                },
            })
        }
    }
}

fn finish(envelope: Value) -> CallToolResult {
    let success = envelope["success"].as_bool().unwrap_or(false);
    let mut result = CallToolResult::success(vec![ContentBlock::text(envelope.to_string())]);
    result.structured_content = Some(envelope);
    result.is_error = Some(!success);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> ResolvedWiki {
        ResolvedWiki {
            source_repository: "octo/app".into(),
            wiki_repository: "octo/notes".into(),
        }
    }

    fn text_of(result: &CallToolResult) -> Value {
        let text = &result.content[0].as_text().expect("text content").text;
        serde_json::from_str(text).expect("the text is JSON")
    }

    #[test]
    fn success_carries_identity_and_matches_structured_content() {
        let result = respond(
            Ok(json!({"sha": "abc"})),
            Some(&identity()),
            &SecretGuard::new(),
            false,
        );
        let envelope = result.structured_content.clone().unwrap();
        assert_eq!(text_of(&result), envelope);
        assert_eq!(result.is_error, Some(false));
        assert_eq!(
            envelope,
            json!({"success": true, "outcome": "completed", "error": null,
                   "result": {"sha": "abc", "source_repository": "octo/app", "wiki_repository": "octo/notes"}})
        );
    }

    #[test]
    fn failure_sets_is_error_and_keeps_outcome() {
        let error = ToolError {
            outcome: Outcome::Unknown,
            ..ToolError::new(ErrorKind::OutcomeUnknown, "read a fresh snapshot")
        };
        let result = respond(Err(error), None, &SecretGuard::new(), true);
        let envelope = result.structured_content.clone().unwrap();
        assert_eq!(text_of(&result), envelope);
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            envelope,
            json!({"success": false, "outcome": "unknown", "result": null,
                   "error": {"type": "outcome_unknown", "message": "read a fresh snapshot", "http_status": null}})
        );
    }

    #[test]
    fn oversized_results_become_limit_exceeded_at_the_boundary() {
        let guard = SecretGuard::new();
        let empty = build(Ok(json!({"content": ""})), Some(&identity()))
            .to_string()
            .len();
        let fits = "a".repeat(MAX_RESULT_BYTES - empty);
        let result = respond(
            Ok(json!({"content": fits})),
            Some(&identity()),
            &guard,
            false,
        );
        assert_eq!(result.is_error, Some(false));
        let over = "a".repeat(MAX_RESULT_BYTES - empty + 1);
        let result = respond(
            Ok(json!({"content": over})),
            Some(&identity()),
            &guard,
            false,
        );
        let envelope = result.structured_content.unwrap();
        assert_eq!(envelope["error"]["type"], "limit_exceeded");
        assert_eq!(envelope["outcome"], "not_applied");
        assert_eq!(envelope["result"]["wiki_repository"], "octo/notes");
    }

    #[test]
    fn a_result_holding_a_credential_is_withheld_in_every_form() {
        let guard = SecretGuard::new();
        guard.register(&Secret::new("tok\"en-123"));
        for leaked in [
            "tok\"en-123".to_string(),
            base64::engine::general_purpose::STANDARD.encode("x-access-token:tok\"en-123"),
        ] {
            let result = respond(
                Ok(json!({"content": format!("see {leaked} here")})),
                Some(&identity()),
                &guard,
                true,
            );
            let text = &result.content[0].as_text().unwrap().text;
            assert!(!text.contains("en-123"), "{text}");
            let envelope = result.structured_content.unwrap();
            assert_eq!(envelope["error"]["type"], "internal_error");
            // A completed write that is withheld may have happened.
            assert_eq!(envelope["outcome"], "unknown");
        }
    }
}
