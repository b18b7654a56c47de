//! Users and collaborator permissions: `GET /user` for personal tokens and a
//! login's role on a repository. An unknown token or login never gets a role.

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{AppState, FakeGitHub, bearer, check_token, error};

pub(super) async fn user(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let inner = s.inner.lock().unwrap();
    match bearer(&headers).and_then(|t| inner.users.get(&t).cloned()) {
        Some((login, kind)) => {
            axum::Json(serde_json::json!({"login": login, "id": 1, "type": kind})).into_response()
        }
        None => error(StatusCode::UNAUTHORIZED, "Bad credentials"),
    }
}

pub(super) async fn collaborator_permission(
    State(s): State<AppState>,
    UrlPath((owner, name, login)): UrlPath<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(e) = check_token(&s, &headers, &full, None) {
        return e;
    }
    let inner = s.inner.lock().unwrap();
    match inner
        .roles
        .get(&(full.to_ascii_lowercase(), login.to_ascii_lowercase()))
    {
        Some((permission, role_name)) => axum::Json(serde_json::json!({
            "permission": permission,
            "role_name": role_name,
            "user": {"login": login},
        }))
        .into_response(),
        None => error(StatusCode::NOT_FOUND, &format!("{login} is not a user")),
    }
}

impl FakeGitHub {
    /// A personal token owned by `login` (`kind`: `User` or `Bot`).
    pub fn add_user(&self, token: &str, login: &str, kind: &str) {
        self.inner()
            .users
            .insert(token.to_string(), (login.to_string(), kind.to_string()));
    }

    /// `login`'s role on `full_name` (`permission`: admin|write|read|none).
    pub fn set_role(&self, full_name: &str, login: &str, permission: &str, role_name: &str) {
        self.inner().roles.insert(
            (full_name.to_ascii_lowercase(), login.to_ascii_lowercase()),
            (permission.to_string(), role_name.to_string()),
        );
    }
}
