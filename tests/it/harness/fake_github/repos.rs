//! Repositories and their commits: `GET /repos/{o}/{r}`, compare with paged
//! commits, a single commit and a branch's ref, all read from the backing
//! [`GitRepo`]'s real commit graph, never from stored answers.

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{AppState, FakeGitHub, GitRepo, Paging, base_url, check_token, error};

#[derive(Debug, Clone)]
pub struct FakeRepo {
    pub id: u64,
    pub full_name: String,
    pub default_branch: String,
    pub visibility: String,
    pub git: GitRepo,
    pub installation: Option<u64>,
}

/// Git's empty tree: what a root commit is diffed against.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

pub(super) fn repo_json(r: &FakeRepo, base: &str) -> Value {
    let (owner, name) = r.full_name.split_once('/').unwrap();
    json!({
        "id": r.id,
        "node_id": format!("R_{}", r.id),
        "name": name,
        "full_name": r.full_name,
        "private": r.visibility != "public",
        "owner": {
            "login": owner, "id": 1, "node_id": "U_1", "avatar_url": "https://avatars.example/u/1",
            "gravatar_id": "", "url": format!("{base}/users/{owner}"),
            "html_url": format!("https://github.example/{owner}"),
            "followers_url": format!("{base}/users/{owner}/followers"),
            "following_url": format!("{base}/users/{owner}/following{{/other_user}}"),
            "gists_url": format!("{base}/users/{owner}/gists{{/gist_id}}"),
            "starred_url": format!("{base}/users/{owner}/starred{{/owner}}{{/repo}}"),
            "subscriptions_url": format!("{base}/users/{owner}/subscriptions"),
            "organizations_url": format!("{base}/users/{owner}/orgs"),
            "repos_url": format!("{base}/users/{owner}/repos"),
            "events_url": format!("{base}/users/{owner}/events{{/privacy}}"),
            "received_events_url": format!("{base}/users/{owner}/received_events"),
            "type": "Organization", "site_admin": false
        },
        "html_url": format!("https://github.example/{}", r.full_name),
        "description": null,
        "fork": false,
        "url": format!("{base}/repos/{}", r.full_name),
        "default_branch": r.default_branch,
        "visibility": r.visibility,
        "archived": false,
        "disabled": false,
        "has_wiki": true,
    })
}

pub(super) async fn repo(
    State(s): State<AppState>,
    UrlPath((owner, name)): UrlPath<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let base = format!(
        "http://{}",
        headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost")
    );
    match check_token(&s, &headers, &format!("{owner}/{name}"), None) {
        Ok(r) => axum::Json(repo_json(&r, &base)).into_response(),
        Err(e) => e,
    }
}

pub(super) async fn compare(
    State(s): State<AppState>,
    UrlPath((owner, name, basehead)): UrlPath<(String, String, String)>,
    Query(paging): Query<Paging>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("contents")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let Some((base, head)) = basehead.split_once("...") else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let (Some(b), Some(h)) = (r.git.resolve(base), r.git.resolve(head)) else {
        return error(StatusCode::NOT_FOUND, "No commit found for SHA");
    };
    let (status, ahead, behind) = if b == h {
        ("identical", 0, 0)
    } else if r.git.is_ancestor(&b, &h) {
        ("ahead", r.git.count(&format!("{b}..{h}")), 0)
    } else if r.git.is_ancestor(&h, &b) {
        ("behind", 0, r.git.count(&format!("{h}..{b}")))
    } else {
        (
            "diverged",
            r.git.count(&format!("{b}..{h}")),
            r.git.count(&format!("{h}..{b}")),
        )
    };
    let base_url = base_url(&headers);
    axum::Json(json!({
        "url": format!("{base_url}/repos/{full}/compare/{basehead}"),
        "html_url": format!("https://github.example/{full}/compare/{basehead}"),
        "permalink_url": format!("https://github.example/{full}/compare/{b}...{h}"),
        "diff_url": format!("https://github.example/{full}/compare/{basehead}.diff"),
        "patch_url": format!("https://github.example/{full}/compare/{basehead}.patch"),
        "base_commit": {"sha": b},
        "merge_base_commit": {"sha": if status == "behind" { h.clone() } else { b.clone() }},
        "status": status,
        "ahead_by": ahead,
        "behind_by": behind,
        "total_commits": ahead,
        "commits": if ahead > 0 {
            // Unpaged, GitHub lists at most 250 commits.
            let all = r.git.commit_objects(&[&format!("{b}..{h}")], &full, &base_url);
            let default = if paging.per_page.is_none() && paging.page.is_none() { 250 } else { 30 };
            json!(paging.slice(&all, default))
        } else {
            json!([])
        },
        "files": if status == "ahead" {
            // Only page 1 lists files, at most 300 of them.
            let mut files = if paging.page.unwrap_or(1) == 1 {
                r.git.diff_files(&b, &h, patch_lines(&s))
            } else {
                Vec::new()
            };
            files.truncate(300);
            json!(files)
        } else {
            json!([])
        },
    }))
    .into_response()
}

/// The patch lines one answer gives (see [`FakeGitHub::set_patch_line_limit`]).
fn patch_lines(s: &AppState) -> usize {
    s.inner.lock().unwrap().patch_lines.unwrap_or(20_000)
}

#[derive(serde::Deserialize)]
pub(super) struct CommitsQuery {
    sha: Option<String>,
    path: Option<String>,
    per_page: Option<usize>,
    page: Option<usize>,
}

/// `GET /repos/{r}/commits?sha=&path=`: the commits reachable from `sha`
/// (default: the default branch) that touched `path`, newest first, as
/// `git log` walks them (no rename following), paged.
pub(super) async fn list_commits(
    State(s): State<AppState>,
    UrlPath((owner, name)): UrlPath<(String, String)>,
    Query(query): Query<CommitsQuery>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("contents")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let start = query.sha.unwrap_or_else(|| r.default_branch.clone());
    let Some(start) = r.git.resolve(&start) else {
        return error(StatusCode::NOT_FOUND, "No commit found for SHA");
    };
    let mut args = vec![start.as_str()];
    if let Some(path) = query.path.as_deref() {
        args.extend(["--", path]);
    }
    let mut all = r.git.commit_objects(&args, &full, &base_url(&headers));
    all.reverse();
    let paging = Paging {
        per_page: query.per_page,
        page: query.page,
    };
    axum::Json(json!(paging.slice(&all, 30))).into_response()
}

pub(super) async fn single_commit(
    State(s): State<AppState>,
    UrlPath((owner, name, sha)): UrlPath<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("contents")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let Some(sha) = r.git.resolve(&sha) else {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("No commit found for SHA: {sha}"),
        );
    };
    let base_url = base_url(&headers);
    let mut commit = r
        .git
        .commit_objects(&["-1", &sha], &full, &base_url)
        .remove(0);
    let parent = r
        .git
        .resolve(&format!("{sha}^1"))
        .unwrap_or_else(|| EMPTY_TREE.to_owned());
    commit["files"] = json!(r.git.diff_files(&parent, &sha, patch_lines(&s)));
    axum::Json(commit).into_response()
}

/// `GET /repos/{r}/git/ref/heads/{branch}`: where the branch points in the
/// backing repository now (the sweep reads the default branch's tip here).
pub(super) async fn branch_ref(
    State(s): State<AppState>,
    UrlPath((owner, name, branch)): UrlPath<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("contents")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let Some(sha) = r.git.resolve(&format!("refs/heads/{branch}")) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    axum::Json(json!({
        "ref": format!("refs/heads/{branch}"),
        "node_id": format!("REF_{sha}"),
        "url": format!("https://api.github.example/repos/{full}/git/refs/heads/{branch}"),
        "object": {
            "type": "commit",
            "sha": sha,
            "url": format!("https://api.github.example/repos/{full}/git/commits/{sha}"),
        },
    }))
    .into_response()
}

impl FakeGitHub {
    /// Registers `owner/name` backed by `git`; returns its numeric id. The App is
    /// installed on it unless `installed` is false.
    pub fn add_repo(
        &self,
        full_name: &str,
        git: &GitRepo,
        visibility: &str,
        installed: bool,
    ) -> u64 {
        let mut s = self.inner();
        s.next_id += 1;
        let id = s.next_id;
        let installation = installed.then(|| 7_000 + id);
        s.repos.insert(
            full_name.to_ascii_lowercase(),
            FakeRepo {
                id,
                full_name: full_name.to_string(),
                default_branch: "main".into(),
                visibility: visibility.into(),
                git: git.clone(),
                installation,
            },
        );
        id
    }

    /// Makes `full_name` `public`, `private` or `internal` from now on (a
    /// repository's visibility changed while a job was queued).
    pub fn set_visibility(&self, full_name: &str, visibility: &str) {
        self.inner()
            .repos
            .get_mut(&full_name.to_ascii_lowercase())
            .expect("a repository added with add_repo")
            .visibility = visibility.to_string();
    }
}
