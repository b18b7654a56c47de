//! The dispatch body: parsed and validated only after its signature checked out.
//!
//! Invariants: unknown fields and fields of the other kind are refused; SHAs are
//! 40 hex digits (normalised to lowercase); run ids, attempts and PR numbers are
//! positive integers; each problem is a 422 `invalid_field` naming the field.

use serde_json::{Map, Value};

use super::IngestError;
use crate::forge::RunRef;
use crate::ids::{PullNumber, Sha};

/// What a dispatch asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DispatchKind {
    /// The post-merge workflow: reconcile `before..after` of the default branch.
    Range { before: Sha, after: Sha },
    /// The request workflow: reconcile one merged pull request.
    PullRequest { number: PullNumber },
}

/// A syntactically valid dispatch, not yet verified against the forge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchRequest {
    pub source_repository: String,
    pub run: Option<RunRef>,
    pub kind: DispatchKind,
}

/// Reads only `source_repository` from an untrusted body, to know whose secret
/// to check the signature with. Nothing else of the body is looked at.
pub fn peek_source(body: &[u8]) -> Result<String, IngestError> {
    #[derive(serde::Deserialize)]
    struct Peek {
        source_repository: Option<Value>,
    }
    let peek: Peek = serde_json::from_slice(body)
        .map_err(|e| IngestError::invalid_json(format!("the body is not a JSON object: {}", e)))?;
    match peek.source_repository {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(IngestError::invalid_field(
            "source_repository must be a string owner/name",
        )),
        None => Err(IngestError::invalid_field(
            "source_repository is required (owner/name of the source)",
        )),
    }
}

fn positive(map: &Map<String, Value>, field: &str) -> Result<Option<u64>, IngestError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => Ok(Some(n)),
            _ => Err(IngestError::invalid_field(format!(
                "{field} must be a positive integer, got {v}"
            ))),
        },
    }
}

fn sha(map: &Map<String, Value>, field: &str) -> Result<Sha, IngestError> {
    let value = map.get(field).ok_or_else(|| {
        IngestError::invalid_field(format!("{field} is required for kind \"range\""))
    })?;
    value
        .as_str()
        .and_then(|text| Sha::parse(text).ok())
        .ok_or_else(|| {
            IngestError::invalid_field(format!(
                "{field} must be a full 40-hex commit SHA, got {}",
                truncate(&value.to_string())
            ))
        })
}

fn truncate(s: &str) -> String {
    if s.len() <= 80 {
        s.to_string()
    } else {
        let cut = (0..=80).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
        format!("{}...", &s[..cut])
    }
}

/// Full parse and validation. `run_required` is true for GitHub sources.
pub fn parse(body: &[u8], run_required: bool) -> Result<DispatchRequest, IngestError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| IngestError::invalid_json(format!("the body is not valid JSON: {e}")))?;
    let Value::Object(map) = value else {
        return Err(IngestError::invalid_json("the body must be a JSON object"));
    };
    let kind = match map.get("kind") {
        Some(Value::String(k)) => k.as_str(),
        Some(v) => {
            return Err(IngestError::invalid_field(format!(
                "kind must be \"range\" or \"pull_request\", got {}",
                truncate(&v.to_string())
            )));
        }
        None => {
            return Err(IngestError::invalid_field(
                "kind is required (\"range\" or \"pull_request\")",
            ));
        }
    };
    let allowed: &[&str] = match kind {
        "range" => &[
            "source_repository",
            "kind",
            "source_run_id",
            "source_run_attempt",
            "push_before",
            "push_after",
        ],
        "pull_request" => &[
            "source_repository",
            "kind",
            "source_run_id",
            "source_run_attempt",
            "pull_number",
        ],
        other => {
            return Err(IngestError::invalid_field(format!(
                "kind must be \"range\" or \"pull_request\", got {:?}",
                truncate(other)
            )));
        }
    };
    if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(IngestError::invalid_field(format!(
            "unknown field {:?} for kind {kind:?}; allowed: {}",
            truncate(unknown),
            allowed.join(", ")
        )));
    }
    let source_repository = match map.get("source_repository") {
        Some(Value::String(s)) if crate::config::is_repository_name(s) => s.clone(),
        _ => {
            return Err(IngestError::invalid_field(
                "source_repository must be owner/name",
            ));
        }
    };
    let run = match (
        positive(&map, "source_run_id")?,
        positive(&map, "source_run_attempt")?,
    ) {
        (Some(id), Some(attempt)) => Some(RunRef { id, attempt }),
        (None, None) if !run_required => None,
        (None, None) => {
            return Err(IngestError::invalid_field(
                "source_run_id and source_run_attempt are required for a GitHub source",
            ));
        }
        _ => {
            return Err(IngestError::invalid_field(
                "source_run_id and source_run_attempt go together; give both",
            ));
        }
    };
    let kind = if kind == "range" {
        DispatchKind::Range {
            before: sha(&map, "push_before")?,
            after: sha(&map, "push_after")?,
        }
    } else {
        let number = positive(&map, "pull_number")?.ok_or_else(|| {
            IngestError::invalid_field("pull_number is required for kind \"pull_request\"")
        })?;
        DispatchKind::PullRequest {
            number: PullNumber::new(number)
                .map_err(|e| IngestError::invalid_field(format!("pull_number: {e}")))?,
        }
    };
    Ok(DispatchRequest {
        source_repository,
        run,
        kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn range(extra: &str) -> String {
        format!(
            r#"{{"source_repository":"octo/app","kind":"range","source_run_id":5,"source_run_attempt":1,"push_before":"{A}","push_after":"{B}"{extra}}}"#
        )
    }

    #[test]
    fn a_good_range_parses() {
        let r = parse(range("").as_bytes(), true).unwrap();
        assert_eq!(r.run, Some(RunRef { id: 5, attempt: 1 }));
        assert_eq!(
            r.kind,
            DispatchKind::Range {
                before: Sha::parse(A).unwrap(),
                after: Sha::parse(B).unwrap()
            }
        );
    }

    #[test]
    fn bad_fields_are_invalid_field() {
        for body in [
            range(r#","extra":1"#),
            range(r#","pull_number":3"#),
            range("").replace(r#""source_run_id":5"#, r#""source_run_id":0"#),
            range("").replace(r#""source_run_id":5"#, r#""source_run_id":-5"#),
            range("").replace(r#""source_run_attempt":1"#, r#""source_run_attempt":"1""#),
            range("").replace(B, "bbbb"),
            range("").replace(B, &"g".repeat(40)),
            range("").replace("octo/app", "octo"),
            range("").replace(r#""kind":"range""#, r#""kind":"push""#),
            r#"{"source_repository":"octo/app","kind":"pull_request","pull_number":0,"source_run_id":1,"source_run_attempt":1}"#.into(),
        ] {
            let e = parse(body.as_bytes(), true).unwrap_err();
            assert_eq!(
                (e.kind, e.code),
                (crate::ingest::IngestKind::InvalidField, "invalid_field"),
                "{body}: {e}"
            );
        }
    }

    #[test]
    fn run_fields_are_optional_only_for_local_sources() {
        let body = format!(
            r#"{{"source_repository":"demo/app","kind":"range","push_before":"{A}","push_after":"{B}"}}"#
        );
        assert_eq!(parse(body.as_bytes(), false).unwrap().run, None);
        assert_eq!(
            parse(body.as_bytes(), true).unwrap_err().code,
            "invalid_field"
        );
    }

    #[test]
    fn malformed_json_is_invalid_json() {
        for body in ["{", "[]", "\"x\"", ""] {
            assert_eq!(
                parse(body.as_bytes(), true).unwrap_err().code,
                "invalid_json"
            );
        }
    }
}
