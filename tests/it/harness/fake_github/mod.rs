//! A stateful fake of GitHub's REST API on loopback (axum), backed by real git
//! repositories the test builds with the `git` CLI: compare/ancestry answers come
//! from the real commit graph (`git merge-base --is-ancestor`, `git rev-list
//! --count`). It also serves the Actions OIDC issuer (JWKS) and mints OIDC tokens.
//!
//! Invariants: App endpoints verify the JWT with the test App's public key;
//! every REST read requires an installation token the fake minted, for that
//! repository and with the permission the endpoint needs; every token request is
//! recorded so tests can check what was asked for. A merged pull request's
//! `merged_at` is its merge commit's committer date, as when GitHub makes that
//! commit. [`FakeGitHub::wiki_access`] lets the smart-HTTP test server accept
//! exactly the installation tokens this fake minted for a wiki.
//!
//! This file holds the state, the router and the helpers every resource
//! shares (error bodies, paging); each resource's handlers, and the
//! `FakeGitHub` methods that set it up or read it back, live in their own file:
//! - `auth`: the App's installations, token minting and revocation, token checks;
//! - `repos`: repositories, compare, single commits, branch refs;
//! - `pulls`: pull requests, their files, a commit's pull requests;
//! - `contents`: file contents, directory listings and Git trees;
//! - `actions`: workflow runs;
//! - `users`: `GET /user` and collaborator permissions;
//! - `oidc`: the Actions OIDC issuer (JWKS, signed tokens);
//! - `faults`: request recording and injected faults (5xx, 429 + Retry-After,
//!   rate-limit exhaustion, hanging answers);
//! - `git_repo`: [`GitRepo`], the git repository behind a fake repository;
//! - `keys`: the RSA keys, made once per test process.

#![allow(dead_code, clippy::result_large_err)]

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use jsonwebtoken::{DecodingKey, EncodingKey};
use serde_json::json;
use tokio::sync::Notify;

mod actions;
mod auth;
mod contents;
mod faults;
mod git_repo;
mod keys;
mod oidc;
mod pulls;
mod repos;
mod users;

pub use actions::FakeRun;
pub use auth::Mint;
pub use faults::Fault;
pub use git_repo::GitRepo;
pub use keys::rsa_key;
pub use oidc::{OIDC_KID_1, OIDC_KID_2, OIDC_KID_UNPUBLISHED};
pub use pulls::{FakePull, PullDetails};
pub use repos::FakeRepo;

use auth::{Grant, bearer, check_token};
use keys::{keys, public_jwk};

/// Seconds since the Unix epoch, as JWT claims count time.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[derive(Default)]
struct StateInner {
    /// Every use of a bearer token: `(token, "METHOD /path")` on the API,
    /// `(token, "git read|write /path")` on the wiki's git routes.
    token_uses: Vec<(String, String)>,
    repos: HashMap<String, FakeRepo>,
    runs: HashMap<(String, u64, u64), FakeRun>,
    pulls: HashMap<(String, u64), FakePull>,
    pull_details: HashMap<(String, u64), PullDetails>,
    /// Permissions (name, access) the installation was not granted: a token
    /// request asking for one is refused with 422, as GitHub does.
    withheld: Vec<(String, String)>,
    grants: HashMap<String, Grant>,
    mints: Vec<Mint>,
    /// Tokens revoked with `DELETE /installation/token`, in order; refused
    /// on every API and git route afterwards.
    revoked: Vec<String>,
    /// (path part, whole path only?, fault).
    faults: VecDeque<(String, bool, Fault)>,
    /// `updated_at` of pull requests updated after they merged (comments, labels).
    pull_updated: HashMap<(String, u64), String>,
    requests: Vec<String>,
    /// Patch lines one compare or commit answer gives before it leaves
    /// patches out (GitHub's diff limit); `None`: 20,000.
    patch_lines: Option<usize>,
    /// Like `requests`, with the query string.
    targets: Vec<String>,
    jwks_fetches: usize,
    published_kids: Vec<String>,
    next_id: u64,
    /// Personal tokens → (login, account type), for `GET /user`.
    users: HashMap<String, (String, String)>,
    /// (repo lowercase, login) → (permission, role_name).
    roles: HashMap<(String, String), (String, String)>,
}

struct Shared {
    app_id: u64,
    app_key: DecodingKey,
    oidc_keys: HashMap<String, EncodingKey>,
    inner: Mutex<StateInner>,
    hung: Notify,
    never: Notify,
}

type AppState = Arc<Shared>;

/// The fake, serving on `url` until dropped.
pub struct FakeGitHub {
    pub url: String,
    pub addr: SocketAddr,
    pub app_id: u64,
    /// The test App's private key (PEM), for the daemon's key file.
    pub app_key_pem: String,
    shared: AppState,
    _server: tokio::task::JoinHandle<()>,
}

/// An error answer with GitHub's body shape (`message`, `documentation_url`, `status`).
fn error(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({
            "message": message,
            "documentation_url": "https://docs.github.com/rest",
            "status": status.as_u16().to_string(),
        })),
    )
        .into_response()
}

/// The URL the client reached this fake at (for the URLs in its answers).
fn base_url(headers: &HeaderMap) -> String {
    let host = headers.get("host").and_then(|h| h.to_str().ok());
    format!("http://{}", host.unwrap_or("localhost"))
}

/// Pull-request reads must pin the API version, as the forge does.
fn require_pinned_version(headers: &HeaderMap) -> Result<(), Response> {
    let pinned = headers
        .get("x-github-api-version")
        .and_then(|v| v.to_str().ok());
    if pinned == Some("2022-11-28") {
        Ok(())
    } else {
        Err(error(
            StatusCode::BAD_REQUEST,
            "pin X-GitHub-Api-Version: 2022-11-28",
        ))
    }
}

/// `?per_page=&page=` of the paged endpoints (GitHub's defaults: 30, 1; at most 100).
#[derive(serde::Deserialize)]
struct Paging {
    per_page: Option<usize>,
    page: Option<usize>,
}

impl Paging {
    fn slice<T: Clone>(&self, all: &[T], default_per_page: usize) -> Vec<T> {
        let per_page = self.per_page.unwrap_or(default_per_page).clamp(1, 100);
        let page = self.page.unwrap_or(1).max(1);
        all.iter()
            .skip((page - 1) * per_page)
            .take(per_page)
            .cloned()
            .collect()
    }
}

impl FakeGitHub {
    pub async fn start() -> FakeGitHub {
        let app_id = 4242;
        let (app_key_pem, app_enc) = keys()[0].clone();
        let app_key = DecodingKey::from_jwk(&public_jwk(&app_enc, "app")).unwrap();
        let mut oidc_keys = HashMap::new();
        for (i, kid) in [OIDC_KID_1, OIDC_KID_2, OIDC_KID_UNPUBLISHED]
            .into_iter()
            .enumerate()
        {
            oidc_keys.insert(kid.to_string(), keys()[1 + i].1.clone());
        }
        let shared = Arc::new(Shared {
            app_id,
            app_key,
            oidc_keys,
            inner: Mutex::new(StateInner {
                next_id: 1000,
                published_kids: vec![OIDC_KID_1.to_string()],
                ..Default::default()
            }),
            hung: Notify::new(),
            never: Notify::new(),
        });
        let app = Router::new()
            .route("/repos/{owner}/{repo}", get(repos::repo))
            .route(
                "/repos/{owner}/{repo}/installation",
                get(auth::installation),
            )
            .route(
                "/repos/{owner}/{repo}/actions/runs/{run}/attempts/{attempt}",
                get(actions::run_attempt),
            )
            .route(
                "/repos/{owner}/{repo}/compare/{basehead}",
                get(repos::compare),
            )
            .route("/repos/{owner}/{repo}/pulls", get(pulls::list_pulls))
            .route("/repos/{owner}/{repo}/pulls/{number}", get(pulls::pull))
            .route(
                "/repos/{owner}/{repo}/pulls/{number}/files",
                get(pulls::pull_files),
            )
            .route("/repos/{owner}/{repo}/commits", get(repos::list_commits))
            .route(
                "/repos/{owner}/{repo}/commits/{sha}",
                get(repos::single_commit),
            )
            .route(
                "/repos/{owner}/{repo}/git/ref/heads/{*branch}",
                get(repos::branch_ref),
            )
            .route(
                "/repos/{owner}/{repo}/contents/{*path}",
                get(contents::contents),
            )
            .route("/repos/{owner}/{repo}/git/trees/{sha}", get(contents::tree))
            .route(
                "/repos/{owner}/{repo}/commits/{sha}/pulls",
                get(pulls::commit_pulls),
            )
            .route("/user", get(users::user))
            .route(
                "/repos/{owner}/{repo}/collaborators/{login}/permission",
                get(users::collaborator_permission),
            )
            .route(
                "/app/installations/{id}/access_tokens",
                post(auth::access_token),
            )
            .route(
                "/installation/token",
                axum::routing::delete(auth::revoke_token),
            )
            .route("/.well-known/jwks", get(oidc::jwks))
            .layer(middleware::from_fn_with_state(
                shared.clone(),
                faults::record_and_inject,
            ))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeGitHub {
            url: format!("http://{addr}"),
            addr,
            app_id,
            app_key_pem,
            shared,
            _server: server,
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, StateInner> {
        self.shared.inner.lock().unwrap()
    }

    /// GitHub's diff limit: once one answer's patches reach `lines` lines,
    /// its later files come without a patch and with zero counts.
    pub fn set_patch_line_limit(&self, lines: usize) {
        self.inner().patch_lines = Some(lines);
    }

    /// Every request as `METHOD /path` (no query), in order.
    pub fn requests(&self) -> Vec<String> {
        self.inner().requests.clone()
    }

    /// Every request as `METHOD /path?query`, in order.
    pub fn requests_with_query(&self) -> Vec<String> {
        self.inner().targets.clone()
    }
}
