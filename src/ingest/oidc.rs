//! GitHub Actions OIDC tokens (`Authorization: Bearer <jwt>`) for sources that set
//! `oidc_audience`: signature against the issuer's JWKS, `iss`, `aud`,
//! `exp`/`nbf`, then the run claims against the body and the configured workflow.
//!
//! Invariants:
//! - only RS256 with a key from `{issuer}/.well-known/jwks` is accepted;
//! - keys are cached; an unknown `kid` triggers at most one refetch, and refetches
//!   are spaced by `refetch_interval` so forged `kid`s cannot hammer the issuer;
//! - a verification whose key is cached never waits on a JWKS fetch: the fetch
//!   runs outside the cache's lock (fetches are serialised among themselves);
//! - `iat` is required, not in the future beyond the leeway, and no older than
//!   [`MAX_TOKEN_LIFETIME_SECONDS`] (nor `exp` further than that from it);
//! - every refusal is a 401 with an `oidc_*` code naming the failed check.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use serde::Deserialize;
use tokio::sync::Mutex;

use super::IngestError;
use super::request::{DispatchKind, DispatchRequest};
use crate::config::Source;

/// Clock skew tolerated on `exp`/`nbf`/`iat`.
pub const LEEWAY_SECONDS: u64 = 30;

/// The longest life of a token teammem accepts, from `iat` to `exp` and
/// from `iat` to now (Actions tokens live minutes).
pub const MAX_TOKEN_LIFETIME_SECONDS: u64 = 3600;

/// The claims of an Actions token teammem checks (GitHub sends them as strings).
#[derive(Debug, Clone, Deserialize)]
pub struct ActionsClaims {
    pub repository: String,
    pub repository_id: String,
    pub run_id: String,
    pub run_attempt: String,
    pub sha: String,
    pub event_name: String,
    pub workflow_ref: String,
    /// Seconds since the epoch.
    pub iat: u64,
    pub exp: u64,
}

struct Cache {
    keys: HashMap<String, DecodingKey>,
    fetched_at: Option<Instant>,
}

/// Verifies Actions tokens of one issuer.
pub struct OidcVerifier {
    http: reqwest::Client,
    issuer: String,
    refetch_interval: Duration,
    /// Never held across an await.
    cache: std::sync::Mutex<Cache>,
    /// Held by the one verification fetching the JWKS.
    fetching: Mutex<()>,
}

impl std::fmt::Debug for OidcVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcVerifier")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl OidcVerifier {
    /// `issuer` without a trailing slash, e.g. `https://token.actions.githubusercontent.com`.
    pub fn new(issuer: &str) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .expect("a reqwest client with static settings builds");
        OidcVerifier {
            http,
            issuer: issuer.trim_end_matches('/').to_string(),
            refetch_interval: Duration::from_secs(10),
            cache: std::sync::Mutex::new(Cache {
                keys: HashMap::new(),
                fetched_at: None,
            }),
            fetching: Mutex::new(()),
        }
    }

    /// The least time between two JWKS fetches (default 10 s).
    pub fn with_refetch_interval(mut self, interval: Duration) -> Self {
        self.refetch_interval = interval;
        self
    }

    /// The issuer's keys by `kid` (no lock held).
    async fn fetch(&self) -> Result<HashMap<String, DecodingKey>, IngestError> {
        let url = format!("{}/.well-known/jwks", self.issuer);
        let unavailable = |why: String| {
            IngestError::unavailable(
                30,
                format!("the OIDC issuer's keys could not be read: {why}"),
            )
        };
        let resp = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| unavailable(e.without_url().to_string()))?;
        if !resp.status().is_success() {
            return Err(unavailable(format!(
                "{url} answered {}",
                resp.status().as_u16()
            )));
        }
        let set: JwkSet = resp
            .json()
            .await
            .map_err(|e| unavailable(e.without_url().to_string()))?;
        let mut keys = HashMap::new();
        for jwk in &set.keys {
            if let (Some(kid), Ok(key)) = (jwk.common.key_id.clone(), DecodingKey::from_jwk(jwk)) {
                keys.insert(kid, key);
            }
        }
        Ok(keys)
    }

    fn cached(&self, kid: &str) -> Option<DecodingKey> {
        self.cache.lock().unwrap().keys.get(kid).cloned()
    }

    /// The key for `kid`, refetching the JWKS once when it is unknown.
    async fn key(&self, kid: &str) -> Result<DecodingKey, IngestError> {
        if let Some(k) = self.cached(kid) {
            return Ok(k);
        }
        // One fetch at a time; a verification that waited here finds the
        // keys the fetch before it stored.
        let _fetching = self.fetching.lock().await;
        if let Some(k) = self.cached(kid) {
            return Ok(k);
        }
        let may_fetch = {
            let mut cache = self.cache.lock().unwrap();
            let may = cache
                .fetched_at
                .is_none_or(|t| t.elapsed() >= self.refetch_interval);
            if may {
                cache.fetched_at = Some(Instant::now());
            }
            may
        };
        if may_fetch {
            let keys = self.fetch().await?;
            self.cache.lock().unwrap().keys = keys;
        }
        self.cached(kid).ok_or_else(|| {
            IngestError::oidc(
                "oidc_unknown_key",
                format!("the token's key id {kid:?} is not among the issuer's keys"),
            )
        })
    }

    /// Signature, `iss`, `aud`, `exp`/`nbf`; returns the claims.
    pub async fn verify_token(
        &self,
        token: &str,
        audience: &str,
    ) -> Result<ActionsClaims, IngestError> {
        let invalid =
            |why: &str| IngestError::oidc("oidc_invalid", format!("the OIDC token {why}"));
        let header = jsonwebtoken::decode_header(token).map_err(|_| invalid("is not a JWT"))?;
        if header.alg != Algorithm::RS256 {
            return Err(invalid("is not signed with RS256"));
        }
        let kid = header.kid.ok_or_else(|| invalid("names no key id (kid)"))?;
        let key = self.key(&kid).await?;
        let mut v = Validation::new(Algorithm::RS256);
        v.leeway = LEEWAY_SECONDS;
        v.validate_exp = true;
        v.validate_nbf = true;
        v.set_audience(&[audience]);
        v.set_issuer(&[&self.issuer]);
        v.set_required_spec_claims(&["exp", "iat", "iss", "aud"]);
        let data = jsonwebtoken::decode::<ActionsClaims>(token, &key, &v).map_err(|e| {
            match e.kind() {
                ErrorKind::ExpiredSignature => {
                    IngestError::oidc("oidc_expired", "the OIDC token has expired; request a fresh one in the workflow")
                }
                ErrorKind::ImmatureSignature => {
                    IngestError::oidc("oidc_not_yet_valid", "the OIDC token is not valid yet (nbf in the future)")
                }
                ErrorKind::InvalidIssuer => IngestError::oidc(
                    "oidc_issuer",
                    format!("the OIDC token was not issued by {}", self.issuer),
                ),
                ErrorKind::InvalidAudience => IngestError::oidc(
                    "oidc_audience",
                    format!("the OIDC token's audience is not {audience:?}; request it with that audience"),
                ),
                ErrorKind::InvalidSignature => invalid("signature does not verify"),
                ErrorKind::MissingRequiredClaim(c) | ErrorKind::InvalidClaimFormat(c) => {
                    IngestError::oidc("oidc_invalid", format!("the OIDC token's claim {c} is missing or malformed"))
                }
                ErrorKind::Json(_) => invalid("lacks a required Actions claim"),
                _ => invalid("could not be verified"),
            }
        })?;
        check_issued_at(&data.claims, now_seconds())?;
        Ok(data.claims)
    }
}

fn now_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// `iat` against `now`: not in the future beyond the leeway, not older than a
/// token may live, and the token's life (`exp - iat`) within that bound.
fn check_issued_at(claims: &ActionsClaims, now: u64) -> Result<(), IngestError> {
    let refuse = |why: &str| {
        IngestError::oidc(
            "oidc_issued_at",
            format!(
                "the OIDC token {why}; request a fresh one in the workflow (and check the clocks)"
            ),
        )
    };
    if claims.iat > now + LEEWAY_SECONDS {
        return Err(refuse("was issued in the future (iat)"));
    }
    if claims.exp.saturating_sub(claims.iat) > MAX_TOKEN_LIFETIME_SECONDS {
        return Err(refuse("claims a lifetime longer than an hour (exp - iat)"));
    }
    if now.saturating_sub(claims.iat) > MAX_TOKEN_LIFETIME_SECONDS + LEEWAY_SECONDS {
        return Err(refuse("was issued more than an hour ago (iat)"));
    }
    Ok(())
}

fn mismatch(what: String) -> IngestError {
    IngestError::oidc("oidc_claim_mismatch", what)
}

/// Checks the claims that the body and config alone decide (before any forge call).
pub fn check_claims_against_request(
    claims: &ActionsClaims,
    source: &Source,
    request: &DispatchRequest,
) -> Result<(), IngestError> {
    if !claims
        .repository
        .eq_ignore_ascii_case(&request.source_repository)
    {
        return Err(mismatch(format!(
            "the OIDC token is for {:?}, the body names {:?}",
            claims.repository, request.source_repository
        )));
    }
    if let Some(run) = request.run {
        if claims.run_id != run.id.to_string() {
            return Err(mismatch(format!(
                "the OIDC token's run_id {} is not source_run_id {}",
                claims.run_id, run.id
            )));
        }
        if claims.run_attempt != run.attempt.to_string() {
            return Err(mismatch(format!(
                "the OIDC token's run_attempt {} is not source_run_attempt {}",
                claims.run_attempt, run.attempt
            )));
        }
    }
    let (event, workflow) = match &request.kind {
        DispatchKind::Range { after, .. } => {
            if !claims.sha.eq_ignore_ascii_case(after) {
                return Err(mismatch(format!(
                    "the OIDC token's sha {} is not push_after {after}",
                    claims.sha
                )));
            }
            ("push", &source.dispatch_workflow)
        }
        DispatchKind::PullRequest { .. } => ("workflow_dispatch", &source.request_workflow),
    };
    if claims.event_name != event {
        return Err(mismatch(format!(
            "the OIDC token's event_name {:?} is not {event:?}",
            claims.event_name
        )));
    }
    let expected = format!("{}/{workflow}", source.repository);
    let path = claims.workflow_ref.split('@').next().unwrap_or_default();
    if !path.eq_ignore_ascii_case(&expected) {
        return Err(mismatch(format!(
            "the OIDC token's workflow_ref {path:?} is not {expected:?}"
        )));
    }
    Ok(())
}

/// Checks the claims that need the forge's answers: the repository id and the run's commit.
pub fn check_claims_against_forge(
    claims: &ActionsClaims,
    repository_id: Option<u64>,
    run_head_sha: Option<&str>,
) -> Result<(), IngestError> {
    if let Some(id) = repository_id
        && claims.repository_id != id.to_string()
    {
        return Err(mismatch(format!(
            "the OIDC token's repository_id {} is not the source's id {id}",
            claims.repository_id
        )));
    }
    if let Some(sha) = run_head_sha
        && !claims.sha.eq_ignore_ascii_case(sha)
    {
        return Err(mismatch(format!(
            "the OIDC token's sha {} is not the run's commit {sha}",
            claims.sha
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(iat: u64, exp: u64) -> ActionsClaims {
        ActionsClaims {
            repository: "o/r".into(),
            repository_id: "1".into(),
            run_id: "2".into(),
            run_attempt: "1".into(),
            sha: "a".repeat(40),
            event_name: "push".into(),
            workflow_ref: "o/r/.github/workflows/w.yml@refs/heads/main".into(),
            iat,
            exp,
        }
    }

    #[test]
    fn issued_at_must_be_recent_and_not_ahead() {
        let now = 1_800_000_000;
        assert!(check_issued_at(&claims(now - 5, now + 300), now).is_ok());
        assert!(check_issued_at(&claims(now + LEEWAY_SECONDS, now + 300), now).is_ok());
        for (iat, exp) in [
            (now + LEEWAY_SECONDS + 1, now + 600),
            (now - 10, now + 2 * MAX_TOKEN_LIFETIME_SECONDS),
            (
                now - MAX_TOKEN_LIFETIME_SECONDS - LEEWAY_SECONDS - 1,
                now + 60,
            ),
        ] {
            let err = check_issued_at(&claims(iat, exp), now).unwrap_err();
            let text = format!("{err:?}");
            assert!(text.contains("oidc_issued_at"), "{text}");
        }
    }
}
