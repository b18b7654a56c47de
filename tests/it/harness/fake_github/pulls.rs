//! Pull requests: one pull request, the closed pull requests of a base branch
//! (sorted by update and paged with `Link` headers), a pull request's paged
//! files with patches, and the pull requests of a commit. A merged pull
//! request's `merged_at` is its merge commit's committer date, so the two
//! never disagree.

use std::collections::HashMap;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{
    AppState, FakeGitHub, Paging, StateInner, base_url, check_token, error, require_pinned_version,
};

#[derive(Debug, Clone)]
pub struct FakePull {
    pub merged: bool,
    pub base_ref: String,
    pub merge_commit_sha: Option<String>,
    pub title: String,
}

/// What a pull request says beyond [`FakePull`] (defaults: author `octocat`,
/// empty body, no labels).
#[derive(Debug, Clone, Default)]
pub struct PullDetails {
    pub author: String,
    pub body: String,
    pub labels: Vec<String>,
}

pub(super) fn user_json(login: &str, base: &str) -> Value {
    json!({
        "login": login, "id": 7, "node_id": "U_7", "avatar_url": "https://avatars.example/u/7",
        "gravatar_id": "", "url": format!("{base}/users/{login}"),
        "html_url": format!("https://github.example/{login}"),
        "followers_url": format!("{base}/users/{login}/followers"),
        "following_url": format!("{base}/users/{login}/following{{/other_user}}"),
        "gists_url": format!("{base}/users/{login}/gists{{/gist_id}}"),
        "starred_url": format!("{base}/users/{login}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{base}/users/{login}/subscriptions"),
        "organizations_url": format!("{base}/users/{login}/orgs"),
        "repos_url": format!("{base}/users/{login}/repos"),
        "events_url": format!("{base}/users/{login}/events{{/privacy}}"),
        "received_events_url": format!("{base}/users/{login}/received_events"),
        "type": "User", "site_admin": false
    })
}

pub(super) fn pull_json_with(
    full: &str,
    number: u64,
    p: &FakePull,
    base_url: &str,
    times: &PullTimes,
    details: &PullDetails,
    changed_files: Option<usize>,
) -> Value {
    let mut v = pull_json(full, number, p, base_url, times);
    let author = if details.author.is_empty() {
        "octocat"
    } else {
        &details.author
    };
    v["user"] = user_json(author, base_url);
    v["body"] = json!(details.body);
    v["labels"] = details
        .labels
        .iter()
        .enumerate()
        .map(|(i, name)| {
            json!({
                "id": 100 + i, "node_id": format!("LA_{i}"),
                "url": format!("{base_url}/repos/{full}/labels/{name}"),
                "name": name, "color": "ededed", "default": false, "description": null,
            })
        })
        .collect();
    if let Some(n) = changed_files {
        v["changed_files"] = json!(n);
    }
    v
}

/// When a pull request merged and was last updated, as GitHub reports them.
pub(super) struct PullTimes {
    pub(super) merged_at: Option<String>,
    pub(super) updated_at: String,
}

/// A merged pull request merged when its merge commit was made (and was
/// updated then, unless a later update was set); an open one is dated at the
/// fixed creation time. `dates` caches committer dates by sha for listings.
pub(super) fn pull_times(
    inner: &StateInner,
    full: &str,
    number: u64,
    p: &FakePull,
    dates: &mut HashMap<String, Option<String>>,
) -> PullTimes {
    const CREATED: &str = "2026-01-01T00:00:00Z";
    let key = (full.to_ascii_lowercase(), number);
    let merged_at = match (&p.merge_commit_sha, inner.repos.get(&key.0)) {
        (Some(sha), Some(r)) if p.merged => Some(
            dates
                .entry(sha.clone())
                .or_insert_with(|| r.git.committed_at(sha))
                .clone()
                .unwrap_or_else(|| CREATED.into()),
        ),
        _ if p.merged => Some(CREATED.into()),
        _ => None,
    };
    let updated_at = inner
        .pull_updated
        .get(&key)
        .cloned()
        .or_else(|| merged_at.clone())
        .unwrap_or_else(|| CREATED.into());
    PullTimes {
        merged_at,
        updated_at,
    }
}

pub(super) fn pull_json(
    full: &str,
    number: u64,
    p: &FakePull,
    base_url: &str,
    times: &PullTimes,
) -> Value {
    json!({
        "url": format!("{base_url}/repos/{full}/pulls/{number}"),
        "id": 10_000 + number,
        "node_id": format!("PR_{number}"),
        "html_url": format!("https://github.example/{full}/pull/{number}"),
        "number": number,
        "state": if p.merged { "closed" } else { "open" },
        "locked": false,
        "title": p.title,
        "user": null,
        "body": "",
        "labels": [],
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": times.updated_at,
        "closed_at": times.merged_at,
        "merged_at": times.merged_at,
        "merge_commit_sha": p.merge_commit_sha,
        "head": {"label": "octo:feature", "ref": "feature", "sha": "1111111111111111111111111111111111111111"},
        "base": {"label": format!("octo:{}", p.base_ref), "ref": p.base_ref, "sha": "2222222222222222222222222222222222222222"},
        "merged": p.merged,
        "draft": false,
    })
}

pub(super) async fn pull(
    State(s): State<AppState>,
    UrlPath((owner, name, number)): UrlPath<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(e) = check_token(&s, &headers, &full, Some("pull_requests")) {
        return e;
    }
    if let Err(e) = require_pinned_version(&headers) {
        return e;
    }
    let inner = s.inner.lock().unwrap();
    let base_url = base_url(&headers);
    let key = (full.to_ascii_lowercase(), number);
    let Some(p) = inner.pulls.get(&key) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let details = inner.pull_details.get(&key).cloned().unwrap_or_default();
    let changed = match (
        &p.merge_commit_sha,
        inner.repos.get(&full.to_ascii_lowercase()),
    ) {
        (Some(sha), Some(r)) if r.git.resolve(sha).is_some() => {
            Some(r.git.changed_files(sha).len())
        }
        _ => None,
    };
    let times = pull_times(&inner, &full, number, p, &mut HashMap::new());
    axum::Json(pull_json_with(
        &full, number, p, &base_url, &times, &details, changed,
    ))
    .into_response()
}

/// `GET /repos/{o}/{r}/pulls` query: GitHub's filters and sorts for listing.
#[derive(serde::Deserialize)]
pub(super) struct PullListQuery {
    pub(super) state: Option<String>,
    pub(super) base: Option<String>,
    pub(super) sort: Option<String>,
    pub(super) direction: Option<String>,
    pub(super) per_page: Option<usize>,
    pub(super) page: Option<usize>,
}

/// `GET /repos/{o}/{r}/pulls`: the configured pull requests filtered by
/// `state` (default `open`; a merged one is `closed`) and `base`, sorted by
/// `created` (number order here) or `updated`, paged with GitHub's `Link`
/// header (`first`/`prev`/`next`/`last`, absent on a lone page).
pub(super) async fn list_pulls(
    State(s): State<AppState>,
    UrlPath((owner, name)): UrlPath<(String, String)>,
    Query(q): Query<PullListQuery>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(e) = check_token(&s, &headers, &full, Some("pull_requests")) {
        return e;
    }
    if let Err(e) = require_pinned_version(&headers) {
        return e;
    }
    let state = q.state.clone().unwrap_or_else(|| "open".into());
    if !["open", "closed", "all"].contains(&state.as_str()) {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    }
    let sort = q.sort.clone().unwrap_or_else(|| "created".into());
    if !["created", "updated"].contains(&sort.as_str()) {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    }
    // GitHub's default direction: desc for `created`, otherwise asc.
    let descending = match q.direction.as_deref() {
        Some("asc") => false,
        Some("desc") => true,
        None => sort == "created",
        Some(_) => return error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed"),
    };
    let inner = s.inner.lock().unwrap();
    let base_url = base_url(&headers);
    let repo_key = full.to_ascii_lowercase();
    let mut dates = HashMap::new();
    let mut listed: Vec<(String, u64, Value)> = inner
        .pulls
        .iter()
        .filter(|((r, _), p)| {
            *r == repo_key
                && match state.as_str() {
                    "open" => !p.merged,
                    "closed" => p.merged,
                    _ => true,
                }
                && q.base.as_deref().is_none_or(|b| b == p.base_ref)
        })
        .map(|((_, n), p)| {
            let times = pull_times(&inner, &full, *n, p, &mut dates);
            let key = if sort == "updated" {
                times.updated_at.clone()
            } else {
                String::new()
            };
            (key, *n, pull_json(&full, *n, p, &base_url, &times))
        })
        .collect();
    // RFC 3339 UTC times in one format sort as text; ties by number.
    listed.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    if descending {
        listed.reverse();
    }
    let all: Vec<Value> = listed.into_iter().map(|(_, _, v)| v).collect();
    let per_page = q.per_page.unwrap_or(30).clamp(1, 100);
    let page = q.page.unwrap_or(1).max(1);
    let last = all.len().div_ceil(per_page).max(1);
    let items: Vec<Value> = all
        .iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .cloned()
        .collect();
    let link_to = |n: usize| {
        let mut query = vec![format!("state={state}"), format!("sort={sort}")];
        if let Some(b) = &q.base {
            query.push(format!("base={b}"));
        }
        if let Some(d) = &q.direction {
            query.push(format!("direction={d}"));
        }
        query.push(format!("per_page={per_page}"));
        query.push(format!("page={n}"));
        format!("<{base_url}/repos/{full}/pulls?{}>", query.join("&"))
    };
    let mut links = Vec::new();
    if page > 1 {
        links.push(format!("{}; rel=\"prev\"", link_to(page - 1)));
        links.push(format!("{}; rel=\"first\"", link_to(1)));
    }
    if page < last {
        links.push(format!("{}; rel=\"next\"", link_to(page + 1)));
        links.push(format!("{}; rel=\"last\"", link_to(last)));
    }
    let mut response = axum::Json(items).into_response();
    if !links.is_empty() {
        response
            .headers_mut()
            .insert("link", links.join(", ").parse().unwrap());
    }
    response
}

pub(super) async fn pull_files(
    State(s): State<AppState>,
    UrlPath((owner, name, number)): UrlPath<(String, String, u64)>,
    Query(paging): Query<Paging>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("pull_requests")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let pull = s
        .inner
        .lock()
        .unwrap()
        .pulls
        .get(&(full.to_ascii_lowercase(), number))
        .cloned();
    let Some(sha) = pull.and_then(|p| p.merge_commit_sha) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let files = r.git.changed_files(&sha);
    axum::Json(paging.slice(&files, 30)).into_response()
}

/// `GET /repos/{o}/{r}/commits/{sha}/pulls`: the pull requests associated
/// with a commit, as GitHub answers for a commit of the repository: those
/// whose merge (or squash) commit it is, and those merged with a merge commit
/// whose merged-in side (`merge^1..merge`) holds it (the PR's own commits).
/// Paged; a commit the repository does not hold is 422, as on GitHub.
pub(super) async fn commit_pulls(
    State(s): State<AppState>,
    UrlPath((owner, name, sha)): UrlPath<(String, String, String)>,
    Query(paging): Query<Paging>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("pull_requests")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    if let Err(e) = require_pinned_version(&headers) {
        return e;
    }
    let Some(sha) = r.git.resolve(&sha) else {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("No commit found for SHA: {sha}"),
        );
    };
    let inner = s.inner.lock().unwrap();
    let base_url = base_url(&headers);
    let mut associated: Vec<(u64, Value)> = inner
        .pulls
        .iter()
        .filter(|((repo, _), p)| {
            *repo == full.to_ascii_lowercase()
                && p.merge_commit_sha
                    .as_deref()
                    .is_some_and(|merge| r.git.introduced_by(merge, &sha))
        })
        .map(|((_, n), p)| {
            let times = pull_times(&inner, &full, *n, p, &mut HashMap::new());
            let details = inner
                .pull_details
                .get(&(full.to_ascii_lowercase(), *n))
                .cloned()
                .unwrap_or_default();
            (
                *n,
                pull_json_with(&full, *n, p, &base_url, &times, &details, None),
            )
        })
        .collect();
    associated.sort_by_key(|(n, _)| *n);
    let list: Vec<Value> = associated.into_iter().map(|(_, v)| v).collect();
    axum::Json(paging.slice(&list, 30)).into_response()
}

impl FakeGitHub {
    pub fn add_pull(&self, full_name: &str, number: u64, pull: FakePull) {
        self.inner()
            .pulls
            .insert((full_name.to_ascii_lowercase(), number), pull);
    }

    /// Author, body and labels of pull request `number`.
    pub fn set_pull_details(&self, full_name: &str, number: u64, details: PullDetails) {
        self.inner()
            .pull_details
            .insert((full_name.to_ascii_lowercase(), number), details);
    }

    /// Pull request `number` was last updated at `rfc3339` (a comment after
    /// the merge, say), not when it merged.
    pub fn set_pull_updated_at(&self, full_name: &str, number: u64, rfc3339: &str) {
        self.inner().pull_updated.insert(
            (full_name.to_ascii_lowercase(), number),
            rfc3339.to_string(),
        );
    }

    /// "Rebase and merge" of pull request `number` (titled `title`) into
    /// `full_name`'s `main`: one commit per `(path, subject)` on top of
    /// `main`, dated now, with the subjects as given (GitHub adds no `#N`),
    /// and the pull request merged with `merge_commit_sha` = the last of them.
    /// Returns the new commits, oldest first.
    pub fn rebase_merge(
        &self,
        full_name: &str,
        number: u64,
        title: &str,
        changes: &[(&str, &str)],
    ) -> Vec<String> {
        let git = self.inner().repos[&full_name.to_ascii_lowercase()]
            .git
            .clone();
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let shas: Vec<String> = changes
            .iter()
            .map(|(path, subject)| git.commit_dated(path, subject, &now))
            .collect();
        self.add_pull(
            full_name,
            number,
            FakePull {
                merged: true,
                base_ref: "main".into(),
                merge_commit_sha: shas.last().cloned(),
                title: title.into(),
            },
        );
        shas
    }
}
