//! Every request to GitHub's REST API goes through here: the one HTTP
//! exchange (`send`: the pinned API version, the call metrics, an answer
//! classified into a [`GitHubError`]), `GET` with an installation token,
//! short pauses waited out, listings paged, and a failed call worded for the
//! job ([`failure`]).
//!
//! Invariants:
//! - every request carries `X-GitHub-Api-Version: 2022-11-28` and a
//!   bearer that never appears in an error or a log;
//! - rate limits (403/429 with `Retry-After` or `x-ratelimit-remaining: 0`),
//!   5xx answers and timeouts are [`GitHubError::Unavailable`] with a retry
//!   delay, never a verdict; a pause of at most [`MAX_INLINE_WAIT_SECS`] is
//!   waited out here (at most [`MAX_TRIES`] tries), a longer one is the caller's;
//! - a paged listing stops at a short page or at its page cap, and says
//!   whether the cap cut it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

use super::{API_VERSION, GitHubError, GitHubForge, Permissions};
use crate::forge::evidence::SourceError;
use crate::secrets::Secret;

/// Page size of compare, pull-request and file listings (GitHub's maximum).
pub const PER_PAGE: usize = 100;
/// Tries per call when GitHub asks for a short pause.
const MAX_TRIES: u32 = 3;
/// A `Retry-After` up to this long is waited out inside the job; a longer one
/// (or none, which the client reads as 30 s) hands the job back to the queue.
pub const MAX_INLINE_WAIT_SECS: u64 = 3;

/// Default pause suggested to callers when GitHub gave no hint.
const DEFAULT_RETRY: u64 = 30;

/// What [`GitHubForge::walk_pages`] does after a page.
pub(super) enum Page {
    More,
    Done,
}

impl Page {
    /// `Done` after a page shorter than asked for (GitHub's last page).
    pub(super) fn after(got: usize, asked: usize) -> Page {
        if got < asked { Page::Done } else { Page::More }
    }
}

/// What a failed call means for the job; `not_found` words a 404.
pub(super) fn failure(error: GitHubError, not_found: impl FnOnce() -> SourceError) -> SourceError {
    match error {
        GitHubError::NotFound(_) => not_found(),
        GitHubError::Unavailable { message, .. } => SourceError::Unavailable(message),
        GitHubError::Denied(message) | GitHubError::Unexpected(message) => {
            SourceError::Invalid(message)
        }
    }
}

/// A commit the job names that GitHub does not know (a 404 for it).
pub(super) fn unknown_commit(repository: &str, field: &str, sha: &str) -> SourceError {
    SourceError::Rejected(format!(
        "{field} {sha} is not a commit of {repository} (force-pushed away?)"
    ))
}

/// Percent-encodes a repository path for a URL, keeping `/` between segments.
pub(super) fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

impl GitHubForge {
    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.api_url)
    }

    pub(super) async fn send(
        &self,
        method: Method,
        path: &str,
        bearer: &Secret,
        body: Option<serde_json::Value>,
    ) -> Result<reqwest::Response, GitHubError> {
        let mut req = self
            .http
            .request(method, self.url(path))
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", API_VERSION)
            .bearer_auth(bearer.expose_str().unwrap_or_default());
        if let Some(b) = body {
            req = req.json(&b);
        }
        let started = std::time::Instant::now();
        let sent = req.send().await;
        crate::metrics::GITHUB_CALL_DURATION.observe(&[], started.elapsed());
        crate::metrics::GITHUB_CALLS.inc(&[match &sent {
            Ok(resp) => status_class(resp.status()),
            Err(e) if e.is_timeout() => "timeout",
            Err(_) => "error",
        }]);
        let resp = sent.map_err(|e| GitHubError::Unavailable {
            retry_after: DEFAULT_RETRY,
            message: if e.is_timeout() {
                format!("GitHub did not answer {path} in time")
            } else {
                format!(
                    "GitHub could not be reached for {path}: {}",
                    e.without_url()
                )
            },
        })?;
        classify(path, resp).await
    }

    pub(super) async fn json<T: DeserializeOwned>(
        path: &str,
        resp: reqwest::Response,
    ) -> Result<T, GitHubError> {
        let bytes = resp.bytes().await.map_err(|e| GitHubError::Unavailable {
            retry_after: DEFAULT_RETRY,
            message: format!("GitHub's answer to {path} broke off: {}", e.without_url()),
        })?;
        serde_json::from_slice(&bytes).map_err(|e| {
            GitHubError::Unexpected(format!(
                "GitHub's answer to {path} has an unexpected shape: {e}"
            ))
        })
    }

    /// `GET {path}` on `repository` with a token for `perms`.
    pub(crate) async fn get<T: DeserializeOwned>(
        &self,
        repository: &str,
        perms: &Permissions,
        path: &str,
    ) -> Result<T, GitHubError> {
        let token = self.installation_token(repository, perms).await?;
        let resp = match self.send(Method::GET, path, &token, None).await {
            Err(GitHubError::Denied(m)) => {
                // A revoked token: do not reuse it.
                self.cache.lock().unwrap().forget(repository, perms);
                return Err(GitHubError::Denied(m));
            }
            other => other?,
        };
        Self::json(path, resp).await
    }

    /// `get`, waiting out short pauses GitHub asks for (up to [`MAX_TRIES`] tries).
    pub(super) async fn get_patiently<T: DeserializeOwned>(
        &self,
        repository: &str,
        perms: &Permissions,
        path: &str,
    ) -> Result<T, GitHubError> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.get(repository, perms, path).await {
                Err(GitHubError::Unavailable { retry_after, .. })
                    if tries < MAX_TRIES && retry_after <= MAX_INLINE_WAIT_SECS =>
                {
                    tokio::time::sleep(Duration::from_secs(retry_after)).await;
                }
                other => return other,
            }
        }
    }

    /// Walks a paged listing: `path` with `per_page` and `page` (from 1 up to
    /// `max_pages`) appended, each page handed to `each` with its number
    /// until `each` answers [`Page::Done`]. `Ok(true)`: the page cap ended
    /// the walk (the listing may be cut). A 404 becomes `not_found()`.
    pub(super) async fn walk_pages<T: DeserializeOwned>(
        &self,
        repository: &str,
        perms: &Permissions,
        path: &str,
        (per_page, max_pages): (usize, usize),
        not_found: impl Fn() -> SourceError,
        mut each: impl FnMut(usize, T) -> Result<Page, SourceError>,
    ) -> Result<bool, SourceError> {
        let separator = if path.contains('?') { '&' } else { '?' };
        for page in 1..=max_pages {
            let url = format!("{path}{separator}per_page={per_page}&page={page}");
            let batch: T = self
                .get_patiently(repository, perms, &url)
                .await
                .map_err(|e| failure(e, &not_found))?;
            if let Page::Done = each(page, batch)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The metric label of an answer's status.
fn status_class(status: StatusCode) -> &'static str {
    match status.as_u16() {
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

/// Turns a non-success answer into the matching [`GitHubError`].
async fn classify(path: &str, resp: reqwest::Response) -> Result<reqwest::Response, GitHubError> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let headers = resp.headers();
    let header_u64 = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    let retry_after = header_u64("retry-after");
    let exhausted = headers
        .get("x-ratelimit-remaining")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim() == "0")
        .unwrap_or(false);
    let reset = header_u64("x-ratelimit-reset");
    if status == StatusCode::TOO_MANY_REQUESTS
        || (status == StatusCode::FORBIDDEN && (retry_after.is_some() || exhausted))
    {
        let wait = retry_after
            .or_else(|| {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs();
                reset.filter(|_| exhausted).map(|r| r.saturating_sub(now))
            })
            .unwrap_or(60)
            .clamp(1, 3600);
        return Err(GitHubError::Unavailable {
            retry_after: wait,
            message: format!("GitHub rate-limited {path}; retry in {wait} s"),
        });
    }
    if status.is_server_error() {
        return Err(GitHubError::Unavailable {
            retry_after: retry_after.unwrap_or(DEFAULT_RETRY).clamp(1, 3600),
            message: format!("GitHub answered {path} with {}", status.as_u16()),
        });
    }
    let said = github_message(resp).await;
    match status {
        StatusCode::NOT_FOUND => Err(GitHubError::NotFound(format!(
            "GitHub answered 404 for {path}"
        ))),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(GitHubError::Denied(format!(
            "GitHub refused {path} with {}{said}; check the App's id, key and permissions",
            status.as_u16()
        ))),
        other => Err(GitHubError::Unexpected(format!(
            "GitHub answered {path} with {}{said}",
            other.as_u16()
        ))),
    }
}

/// GitHub's own words from an error answer (`{"message": ...}`), one bounded
/// line introduced with " (...)", or nothing.
async fn github_message(resp: reqwest::Response) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        message: String,
    }
    let Ok(bytes) = resp.bytes().await else {
        return String::new();
    };
    let Ok(body) = serde_json::from_slice::<ErrorBody>(&bytes) else {
        return String::new();
    };
    let line: String = body
        .message
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    let line = line.trim_end_matches('.');
    if line.is_empty() {
        String::new()
    } else {
        format!(" ({line})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_percent_encoded_but_keep_their_slashes() {
        assert_eq!(
            encode_path(".github/team memory.md"),
            ".github/team%20memory.md"
        );
        assert_eq!(encode_path("a/ü?#"), "a/%C3%BC%3F%23");
    }
}
