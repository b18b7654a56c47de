//! GitHub Actions OIDC tokens (`Authorization: Bearer <jwt>`) for sources that set
//! `oidc_audience`: signature against the issuer's JWKS, `iss`, `aud`,
//! `exp`/`nbf`, then the run claims against the body and the configured workflow.
//!
//! Invariants:
//! - only RS256 with a key from `{issuer}/.well-known/jwks` is accepted;
//! - keys are cached; an unknown `kid` triggers at most one refetch, and refetches
//!   are spaced by `refetch_interval` so forged `kid`s cannot hammer the issuer;
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
    cache: Mutex<Cache>,
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
            cache: Mutex::new(Cache {
                keys: HashMap::new(),
                fetched_at: None,
            }),
        }
    }

    /// The least time between two JWKS fetches (default 10 s).
    pub fn with_refetch_interval(mut self, interval: Duration) -> Self {
        self.refetch_interval = interval;
        self
    }

    async fn fetch(&self, cache: &mut Cache) -> Result<(), IngestError> {
        let url = format!("{}/.well-known/jwks", self.issuer);
        cache.fetched_at = Some(Instant::now());
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
        cache.keys = keys;
        Ok(())
    }

    /// The key for `kid`, refetching the JWKS once when it is unknown.
    async fn key(&self, kid: &str) -> Result<DecodingKey, IngestError> {
        let mut cache = self.cache.lock().await;
        if let Some(k) = cache.keys.get(kid) {
            return Ok(k.clone());
        }
        let may_fetch = cache
            .fetched_at
            .is_none_or(|t| t.elapsed() >= self.refetch_interval);
        if may_fetch {
            self.fetch(&mut cache).await?;
        }
        cache.keys.get(kid).cloned().ok_or_else(|| {
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
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
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
        Ok(data.claims)
    }
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
