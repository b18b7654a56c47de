//! The App's side: installation lookups and token minting (JWT-checked),
//! token revocation, and the checks every REST read makes on its installation
//! token. A revoked token, or one minted for another repository or without the
//! permission an endpoint needs, is never accepted (on the API or the wiki's
//! git routes); every mint and every use of a token is recorded.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Value, json};

use super::{AppState, FakeGitHub, FakeRepo, Shared, error, now};

/// One token request as the fake received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mint {
    /// The token's value (the fake's own; tests look for it in leaks).
    pub token: String,
    pub installation: u64,
    pub repositories: Vec<String>,
    pub permissions: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub(super) struct Grant {
    pub(super) owner: String,
    pub(super) repositories: Vec<String>,
    pub(super) permissions: HashMap<String, String>,
}

pub(super) fn bearer(headers: &HeaderMap) -> Option<String> {
    let v = headers.get("authorization")?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token"))
        .then(|| token.to_string())
}

/// Verifies the App JWT the way GitHub describes: RS256, `iss` = App id,
/// not expired, lifetime at most 10 minutes.
pub(super) fn check_app_jwt(s: &Shared, headers: &HeaderMap) -> Result<(), Response> {
    let unauthorized = |m: &str| error(StatusCode::UNAUTHORIZED, m);
    let token =
        bearer(headers).ok_or_else(|| unauthorized("A JSON web token could not be decoded"))?;
    let mut v = Validation::new(Algorithm::RS256);
    v.set_required_spec_claims(&["exp", "iat", "iss"]);
    v.set_issuer(&[s.app_id.to_string()]);
    v.leeway = 0;
    let data = jsonwebtoken::decode::<Value>(&token, &s.app_key, &v)
        .map_err(|e| unauthorized(&format!("A JSON web token could not be decoded: {e}")))?;
    let iat = data.claims["iat"].as_u64().unwrap_or(0);
    let exp = data.claims["exp"].as_u64().unwrap_or(0);
    if iat > now() + 1 || exp <= iat || exp - iat > 660 || exp > now() + 600 {
        return Err(unauthorized(
            "'Expiration time' claim ('exp') is too far in the future",
        ));
    }
    Ok(())
}

/// Checks an installation token covers `repo` with `permission` (`None`:
/// metadata, which every token has).
pub(super) fn check_token(
    s: &Shared,
    headers: &HeaderMap,
    repo: &str,
    permission: Option<&str>,
) -> Result<FakeRepo, Response> {
    let inner = s.inner.lock().unwrap();
    let Some(token) = bearer(headers) else {
        return Err(error(StatusCode::UNAUTHORIZED, "Requires authentication"));
    };
    let Some(grant) = inner
        .grants
        .get(&token)
        .filter(|_| !inner.revoked.contains(&token))
    else {
        return Err(error(StatusCode::UNAUTHORIZED, "Bad credentials"));
    };
    let Some(r) = inner.repos.get(&repo.to_ascii_lowercase()) else {
        return Err(error(StatusCode::NOT_FOUND, "Not Found"));
    };
    let (owner, name) = r.full_name.split_once('/').unwrap();
    if !grant.owner.eq_ignore_ascii_case(owner)
        || !grant
            .repositories
            .iter()
            .any(|g| g.eq_ignore_ascii_case(name))
    {
        return Err(error(StatusCode::NOT_FOUND, "Not Found"));
    }
    if let Some(p) = permission
        && !grant.permissions.contains_key(p)
    {
        return Err(error(
            StatusCode::FORBIDDEN,
            "Resource not accessible by integration",
        ));
    }
    Ok(r.clone())
}

pub(super) async fn installation(
    State(s): State<AppState>,
    UrlPath((owner, name)): UrlPath<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(e) = check_app_jwt(&s, &headers) {
        return e;
    }
    let inner = s.inner.lock().unwrap();
    match inner
        .repos
        .get(&format!("{owner}/{name}").to_ascii_lowercase())
        .and_then(|r| r.installation)
    {
        Some(id) => axum::Json(json!({
            "id": id,
            "account": {"login": owner, "id": 1, "type": "Organization"},
            "app_id": s.app_id,
            "target_type": "Organization",
            "repository_selection": "selected",
            "permissions": {"metadata": "read", "contents": "write", "actions": "read", "pull_requests": "read"},
            "events": [],
        }))
        .into_response(),
        None => error(StatusCode::NOT_FOUND, "Not Found"),
    }
}

pub(super) async fn access_token(
    State(s): State<AppState>,
    UrlPath(id): UrlPath<u64>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(e) = check_app_jwt(&s, &headers) {
        return e;
    }
    let Ok(req) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "Invalid request");
    };
    let repositories: Vec<String> = req["repositories"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut permissions: Vec<(String, String)> = req["permissions"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    permissions.sort();
    let mut inner = s.inner.lock().unwrap();
    let covered: Vec<&FakeRepo> = inner
        .repos
        .values()
        .filter(|r| r.installation == Some(id))
        .collect();
    let Some(owner) = covered
        .first()
        .map(|r| r.full_name.split_once('/').unwrap().0.to_string())
    else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    for name in &repositories {
        if !covered.iter().any(|r| {
            r.full_name
                .split_once('/')
                .unwrap()
                .1
                .eq_ignore_ascii_case(name)
        }) {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "There is at least one repository that does not exist or is not accessible to the parent installation.",
            );
        }
    }
    if permissions.iter().any(|p| inner.withheld.contains(p)) {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "The permissions requested are not granted to this installation.",
        );
    }
    let n = inner.mints.len() + 1;
    let token = format!("ghs_fake{n:04}{}", uuid::Uuid::new_v4().simple());
    inner.mints.push(Mint {
        token: token.clone(),
        installation: id,
        repositories: repositories.clone(),
        permissions: permissions.clone(),
    });
    inner.grants.insert(
        token.clone(),
        Grant {
            owner,
            repositories: repositories.clone(),
            permissions: permissions.iter().cloned().collect(),
        },
    );
    let expires = chrono::Utc::now() + chrono::Duration::hours(1);
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "token": token,
            "expires_at": expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "permissions": permissions
                .into_iter()
                .map(|(k, v)| (k, Value::from(v)))
                .collect::<serde_json::Map<_, _>>(),
            "repository_selection": "selected",
        })),
    )
        .into_response()
}

/// `DELETE /installation/token`: revokes the token it is authenticated
/// with (204); a token this fake never minted, or one already revoked, is 401.
pub(super) async fn revoke_token(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let mut inner = s.inner.lock().unwrap();
    match bearer(&headers) {
        Some(token) if inner.grants.contains_key(&token) && !inner.revoked.contains(&token) => {
            inner.revoked.push(token);
            StatusCode::NO_CONTENT.into_response()
        }
        _ => error(StatusCode::UNAUTHORIZED, "Bad credentials"),
    }
}

impl FakeGitHub {
    /// The installation lacks `permission: access` (e.g. `contents: write`).
    pub fn withhold_permission(&self, permission: &str, access: &str) {
        self.inner()
            .withheld
            .push((permission.to_string(), access.to_string()));
    }

    /// Grants again every permission [`FakeGitHub::withhold_permission`] withheld.
    pub fn grant_all_permissions(&self) {
        self.inner().withheld.clear();
    }

    /// A check for the smart-HTTP test server: `token` is an installation token
    /// this fake minted for the wiki's repository (`/{owner}/{name}.wiki.git/...`),
    /// with `contents: write` for a push and `contents` at all for a read.
    pub fn wiki_access(&self) -> crate::harness::git_http::TokenCheck {
        let shared = self.shared.clone();
        Arc::new(move |token: &str, path: &str, write: bool| {
            let mut inner = shared.inner.lock().unwrap();
            let kind = if write { "write" } else { "read" };
            inner
                .token_uses
                .push((token.to_owned(), format!("git {kind} {path}")));
            if inner.revoked.iter().any(|t| t == token) {
                return false;
            }
            let Some(grant) = inner.grants.get(token) else {
                return false;
            };
            let mut parts = path.trim_start_matches('/').splitn(3, '/');
            let (Some(owner), Some(wiki)) = (parts.next(), parts.next()) else {
                return false;
            };
            let Some(name) = wiki.strip_suffix(".wiki.git") else {
                return false;
            };
            let access = grant.permissions.get("contents").map(String::as_str);
            grant.owner.eq_ignore_ascii_case(owner)
                && grant
                    .repositories
                    .iter()
                    .any(|r| r.eq_ignore_ascii_case(name))
                && if write {
                    access == Some("write")
                } else {
                    access.is_some()
                }
        })
    }

    /// Every use of `token` seen so far, in order: `METHOD /path` on the API,
    /// `git read|write /path` on the wiki's git routes.
    pub fn uses_of(&self, token: &str) -> Vec<String> {
        self.inner()
            .token_uses
            .iter()
            .filter(|(t, _)| t == token)
            .map(|(_, what)| what.clone())
            .collect()
    }

    /// Every token revoked with `DELETE /installation/token`, in order.
    pub fn revoked_tokens(&self) -> Vec<String> {
        self.inner().revoked.clone()
    }

    /// The minted tokens with `contents: write` on `repository` (`owner/name`
    /// or `name`: the token request lists names without owner).
    pub fn write_mints_for(&self, repository: &str) -> Vec<Mint> {
        let repository = repository
            .split_once('/')
            .map_or(repository, |(_, name)| name);
        self.mints()
            .into_iter()
            .filter(|m| {
                m.repositories
                    .iter()
                    .any(|r| r.eq_ignore_ascii_case(repository))
                    && m.permissions
                        .iter()
                        .any(|(p, a)| p == "contents" && a == "write")
            })
            .collect()
    }

    pub fn mints(&self) -> Vec<Mint> {
        self.inner().mints.clone()
    }

    /// Every installation token minted so far (to prove none leaks).
    pub fn minted_tokens(&self) -> Vec<String> {
        self.inner().grants.keys().cloned().collect()
    }
}
