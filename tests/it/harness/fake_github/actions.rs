//! Actions workflow runs: `GET .../actions/runs/{run}/attempts/{attempt}`
//! answers only the runs a test registered, for the repository it was
//! registered on.

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::repos::repo_json;
use super::{AppState, FakeGitHub, check_token, error};

#[derive(Debug, Clone)]
pub struct FakeRun {
    pub repository_id: u64,
    pub event: String,
    pub path: String,
    pub head_branch: String,
    pub head_sha: String,
}

pub(super) async fn run_attempt(
    State(s): State<AppState>,
    UrlPath((owner, name, run, attempt)): UrlPath<(String, String, u64, u64)>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("actions")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let inner = s.inner.lock().unwrap();
    let Some(fr) = inner.runs.get(&(full.to_ascii_lowercase(), run, attempt)) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let base = format!(
        "http://{}",
        headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost")
    );
    let mut repository = repo_json(&r, &base);
    repository["id"] = json!(fr.repository_id);
    axum::Json(json!({
        "id": run,
        "name": "Team memory",
        "node_id": format!("WFR_{run}"),
        "head_branch": fr.head_branch,
        "head_sha": fr.head_sha,
        "path": fr.path,
        "display_title": "Team memory",
        "run_number": run,
        "run_attempt": attempt,
        "event": fr.event,
        "status": "in_progress",
        "conclusion": null,
        "workflow_id": 1,
        "url": format!("{base}/repos/{full}/actions/runs/{run}"),
        "html_url": format!("https://github.example/{full}/actions/runs/{run}"),
        "pull_requests": [],
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "run_started_at": "2026-01-01T00:00:00Z",
        "head_commit": {"id": fr.head_sha, "tree_id": fr.head_sha, "message": "x", "timestamp": "2026-01-01T00:00:00Z"},
        "repository": repository,
        "head_repository": repository,
    }))
    .into_response()
}

impl FakeGitHub {
    pub fn add_run(&self, full_name: &str, run_id: u64, attempt: u64, run: FakeRun) {
        self.inner()
            .runs
            .insert((full_name.to_ascii_lowercase(), run_id, attempt), run);
    }
}
