//! How a wiki read becomes a tool's answer, for every toolset that reads a
//! wiki (`wiki_read.rs`, `wiki_write.rs`, `context.rs`, `org.rs`): the
//! engine's result as the envelope's outcome, and `as_of`, the source commit
//! the memory is reconciled to. Kept below those files so none imports
//! another for it.
//!
//! Invariant: `as_of` is the source's cursor in the job queue or null with
//! the reason it is unknown, never a guess; an engine error keeps its kind.

use serde::Serialize;
use serde_json::{Value, json};

use crate::mcp::context::{Context, Resolved};
use crate::mcp::envelope::{ResolvedWiki, ToolError, ToolOutcome};
use crate::wiki::WikiError;

/// A serializable engine result as the envelope's `result`.
pub(crate) fn to_outcome<T: Serialize>(result: Result<T, WikiError>) -> ToolOutcome {
    let value = result?;
    serde_json::to_value(value)
        .map_err(|error| ToolError::internal("encoding a tool result", error))
}

/// The source commit the memory is reconciled to: the source's cursor in the
/// job queue, or `None` with the reason it is unknown (never a guess).
pub(super) async fn as_of(context: &Context, resolved: &Resolved) -> Result<String, &'static str> {
    let Some(requests) = &context.coordinator else {
        return Err(
            "this server has no job queue (the operator's `teammem wiki` or a job's writer); read through the daemon's /mcp or `teammem mcp` to learn it",
        );
    };
    match requests
        .queue
        .cursor(resolved.source.repository.as_str())
        .await
    {
        Ok(Some(cursor)) => Ok(cursor.sha.to_string()),
        Ok(None) => Err("no job has reconciled this source yet"),
        Err(error) => {
            tracing::warn!(%error, "reading a source cursor for as_of");
            Err("the job queue could not be read")
        }
    }
}

/// JSON bytes the answer's wrapping adds to an object that has other
/// fields: `as_of` ([`with_as_of`]) and, when the wiki was resolved, the
/// envelope's `source_repository` and `wiki_repository`.
pub(super) fn added_bytes(
    as_of: &Result<String, &'static str>,
    identity: Option<&ResolvedWiki>,
) -> usize {
    let added = crate::mcp::envelope::build(Ok(with_as_of(json!({}), as_of.clone())), identity);
    // `{…}` less its braces, plus the comma joining it to the other fields.
    added["result"].to_string().len() - 2 + 1
}

/// `value` with `as_of` added (when it is an object), and `as_of_reason`
/// beside a null one.
pub(super) fn with_as_of(mut value: Value, as_of: Result<String, &'static str>) -> Value {
    if let Some(object) = value.as_object_mut() {
        match as_of {
            Ok(sha) => {
                object.insert("as_of".into(), Value::String(sha));
            }
            Err(reason) => {
                object.insert("as_of".into(), Value::Null);
                object.insert("as_of_reason".into(), Value::String(reason.into()));
            }
        }
    }
    value
}

/// JSON bytes the envelope's `source_repository` and `wiki_repository` add
/// to a result that has other fields (none without a resolved wiki).
pub(super) fn identity_bytes(identity: Option<&ResolvedWiki>) -> usize {
    if identity.is_none() {
        return 0;
    }
    let added = crate::mcp::envelope::build(Ok(json!({})), identity);
    // `{…}` less its braces, plus the comma joining it to the other fields.
    added["result"].to_string().len() - 2 + 1
}
