//! File contents: `GET .../contents/{path}` reads the blob at a ref from the
//! backing [`GitRepo`], with the blob's sha; a directory answers with its
//! entries, as GitHub does.
//! `GET .../git/trees/{sha}` lists a tree (a commit's, or a tree's by its
//! sha), with `recursive=1` every entry below it, as GitHub's Git trees API.

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
    // The blob's sha, as GitHub gives it (callers may key caches on it).
    let blob = git_output(&r.git.dir, &["rev-parse", &object]);
    let blob = String::from_utf8_lossy(&blob.stdout).trim().to_owned();
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
        "sha": blob,
    }))
    .into_response()
}

#[derive(serde::Deserialize)]
pub(super) struct TreeQuery {
    recursive: Option<String>,
}

pub(super) async fn tree(
    State(s): State<AppState>,
    UrlPath((owner, name, sha)): UrlPath<(String, String, String)>,
    Query(q): Query<TreeQuery>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("contents")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let mut args = vec!["ls-tree", "-z"];
    if q.recursive.is_some() {
        args.extend(["-r", "-t"]);
    }
    let object = format!("{sha}^{{tree}}");
    args.push(&object);
    let out = git_output(&r.git.dir, &args);
    if !out.status.success() {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    // `<mode> <type> <sha>\t<path>` per NUL-terminated entry.
    let entries: Vec<Value> = out
        .stdout
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .filter_map(|e| {
            let text = String::from_utf8_lossy(e);
            let (meta, path) = text.split_once('\t')?;
            let mut meta = meta.split(' ');
            let (mode, kind, sha) = (meta.next()?, meta.next()?, meta.next()?);
            Some(json!({"path": path, "mode": mode, "type": kind, "sha": sha}))
        })
        .collect();
    axum::Json(json!({"sha": sha, "tree": entries, "truncated": false})).into_response()
}
