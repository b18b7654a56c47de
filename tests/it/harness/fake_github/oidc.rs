//! The Actions OIDC issuer: the JWKS (only published keys appear in it) and
//! OIDC tokens signed with any of the fake's keys, including one that is
//! never published.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, Header};
use serde_json::{Value, json};

use super::{AppState, FakeGitHub, now, public_jwk};

/// Key ids the fake can sign OIDC tokens with; only `published` ones are in the JWKS.
pub const OIDC_KID_1: &str = "kid-one";
pub const OIDC_KID_2: &str = "kid-two";
pub const OIDC_KID_UNPUBLISHED: &str = "kid-never";

pub(super) async fn jwks(State(s): State<AppState>) -> Response {
    let mut inner = s.inner.lock().unwrap();
    inner.jwks_fetches += 1;
    let keys = inner
        .published_kids
        .iter()
        .map(|kid| public_jwk(&s.oidc_keys[kid], kid))
        .collect();
    axum::Json(JwkSet { keys }).into_response()
}

impl FakeGitHub {
    pub fn jwks_fetches(&self) -> usize {
        self.inner().jwks_fetches
    }

    /// Publishes (or withdraws) an OIDC key in the JWKS.
    pub fn publish_oidc_key(&self, kid: &str, published: bool) {
        let mut s = self.inner();
        s.published_kids.retain(|k| k != kid);
        if published {
            s.published_kids.push(kid.to_string());
        }
    }

    /// Signs `claims` as the OIDC issuer with key `kid`.
    pub fn mint_oidc(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(kid.to_string());
        jsonwebtoken::encode(&header, claims, &self.shared.oidc_keys[kid]).unwrap()
    }

    /// Valid Actions claims for `repo` (id `repository_id`), run, sha, event, workflow.
    #[allow(clippy::too_many_arguments)]
    pub fn actions_claims(
        &self,
        audience: &str,
        repo: &str,
        repository_id: u64,
        run: (u64, u64),
        sha: &str,
        event: &str,
        workflow: &str,
    ) -> Value {
        let now = now();
        json!({
            "iss": self.url,
            "aud": audience,
            "sub": format!("repo:{repo}:ref:refs/heads/main"),
            "iat": now - 5,
            "nbf": now - 5,
            "exp": now + 300,
            "repository": repo,
            "repository_id": repository_id.to_string(),
            "repository_owner": repo.split('/').next().unwrap(),
            "run_id": run.0.to_string(),
            "run_attempt": run.1.to_string(),
            "sha": sha,
            "ref": "refs/heads/main",
            "event_name": event,
            "workflow_ref": format!("{repo}/{workflow}@refs/heads/main"),
            "job_workflow_ref": format!("{repo}/{workflow}@refs/heads/main"),
        })
    }
}
