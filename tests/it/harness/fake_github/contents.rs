//! File contents: `GET .../contents/{path}` reads the blob at a ref from the
//! backing [`GitRepo`]; a directory answers with its entries, as GitHub does.

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::harness::git::git_output;

use super::{AppState, check_token, error};

#[derive(serde::Deserialize)]
pub(super) struct ContentsQuery {
    #[serde(rename = "ref")]
    pub(super) reference: Option<String>,
}

pub(super) async fn contents(
    State(s): State<AppState>,
    UrlPath((owner, name, path)): UrlPath<(String, String, String)>,
    Query(q): Query<ContentsQuery>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("contents")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let reference = q.reference.unwrap_or_else(|| "HEAD".into());
    let object = format!("{reference}:{path}");
    let kind = git_output(&r.git.dir, &["cat-file", "-t", &object]);
    if String::from_utf8_lossy(&kind.stdout).trim() == "tree" {
        // A directory: GitHub answers with the list of its entries.
        let names = git_output(&r.git.dir, &["ls-tree", "--name-only", &object]);
        let entries: Vec<Value> = String::from_utf8_lossy(&names.stdout)
            .lines()
            .map(|name| json!({"name": name, "path": format!("{path}/{name}")}))
            .collect();
        return axum::Json(entries).into_response();
    }
    let out = git_output(
        &r.git.dir,
        &["cat-file", "blob", &format!("{reference}:{path}")],
    );
    if !out.status.success() {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &out.stdout);
    // GitHub wraps the base64 at 60 characters.
    let wrapped: Vec<&str> = encoded
        .as_bytes()
        .chunks(60)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    axum::Json(json!({
        "type": "file",
        "encoding": "base64",
        "size": out.stdout.len(),
        "name": path.rsplit('/').next().unwrap_or(&path),
        "path": path,
        "content": wrapped.join("\n") + "\n",
        "sha": "0000000000000000000000000000000000000000",
    }))
    .into_response()
}
