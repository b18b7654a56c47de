//! The dispatch front door as one pipeline the HTTP route calls:
//! media type → size → whose secret (`source_repository` only) → HMAC over the raw
//! body → delivery id → full parse → OIDC (when configured) → forge verification.
//!
//! Invariants:
//! - nothing but `source_repository` is read from a body before its signature
//!   checked out, and nothing is stored by the pipeline at all: the caller enqueues
//!   only a [`VerifiedDispatch`], a range through [`split::enqueue_range`],
//!   which stores it as jobs no larger than one job's bound;
//! - each refusal is one [`IngestError`] with the status and code of DESIGN §4;
//! - dispatch secrets are read once at start-up into [`Secret`]s.

mod error;
pub mod oidc;
pub mod request;
pub mod signature;
pub mod split;

pub use error::{IngestError, Kind as IngestKind};
pub use request::{DispatchKind, DispatchRequest};

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::{Config, Source};
use crate::forge::Forges;
use crate::forge::RunRef;
use crate::forge::github::GitHubForge;
use crate::ids::{PullNumber, RepoName, Sha};
use crate::secrets::{Secret, webhook_secret_from_env};
use oidc::OidcVerifier;

/// Largest accepted body.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Longest accepted `X-TeamMem-Delivery`.
pub const MAX_DELIVERY_LEN: usize = 128;

/// The request headers the pipeline reads (values as sent, `None` when absent).
#[derive(Debug, Clone, Copy, Default)]
pub struct DispatchHeaders<'a> {
    pub content_type: Option<&'a str>,
    pub signature: Option<&'a str>,
    pub delivery: Option<&'a str>,
    pub authorization: Option<&'a str>,
}

/// What was verified, in the terms the queue needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifiedKind {
    Range {
        before: Sha,
        after: Sha,
        /// Commits in `before..after`.
        commits: u64,
    },
    PullRequest {
        number: PullNumber,
        merge_sha: Sha,
    },
}

/// A dispatch that passed every check: safe to enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedDispatch {
    /// `owner/name` as configured (config spelling, not the body's).
    pub source: RepoName,
    /// [`Source::destination`] of the source.
    pub destination: String,
    pub delivery_id: String,
    pub run: Option<RunRef>,
    pub default_branch: String,
    pub kind: VerifiedKind,
}

struct SourceEntry {
    source: Source,
    /// `None` when the environment variable was not set at start-up: every
    /// dispatch of the source is then refused.
    secret: Option<Secret>,
}

/// The configured sources with their secrets, and the verifiers.
pub struct Ingest {
    sources: HashMap<String, SourceEntry>,
    forges: Forges,
    oidc: Option<OidcVerifier>,
}

impl std::fmt::Debug for Ingest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingest")
            .field("sources", &self.sources.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Ingest {
    /// Everything `teammem serve` needs: each source's dispatch secret from
    /// its environment variable (a source whose variable is unset refuses
    /// every dispatch; `serve` checks the environment before), asking the
    /// process's `forges` (built once by the daemon).
    pub fn from_config(config: &Config, forges: Forges) -> Self {
        let mut sources = Vec::new();
        for s in &config.sources {
            let secret = match webhook_secret_from_env(&s.webhook_secret_env) {
                Ok(secret) => Some(secret),
                Err(e) => {
                    tracing::warn!(source = %s.repository, "{e}; its dispatches will be refused");
                    None
                }
            };
            sources.push((s.clone(), secret));
        }
        let oidc = config
            .github
            .as_ref()
            .map(|g| OidcVerifier::new(&g.oidc_issuer));
        Self::with_optional_secrets(sources, forges, oidc)
    }

    /// Builds from sources and their secrets (tests, the demo).
    pub fn new(
        sources: Vec<(Source, Secret)>,
        github: Option<Arc<GitHubForge>>,
        oidc: Option<OidcVerifier>,
    ) -> Self {
        Self::with_optional_secrets(
            sources.into_iter().map(|(s, k)| (s, Some(k))).collect(),
            Forges::with_github(github),
            oidc,
        )
    }

    fn with_optional_secrets(
        sources: Vec<(Source, Option<Secret>)>,
        forges: Forges,
        oidc: Option<OidcVerifier>,
    ) -> Self {
        Ingest {
            sources: sources
                .into_iter()
                .map(|(source, secret)| {
                    (
                        source.repository.to_ascii_lowercase(),
                        SourceEntry { source, secret },
                    )
                })
                .collect(),
            forges,
            oidc,
        }
    }

    /// The whole pipeline for one request.
    pub async fn ingest(
        &self,
        headers: &DispatchHeaders<'_>,
        body: &[u8],
    ) -> Result<VerifiedDispatch, IngestError> {
        check_content_type(headers.content_type)?;
        if body.len() > MAX_BODY_BYTES {
            return Err(IngestError::body_too_large(MAX_BODY_BYTES));
        }
        // Trust order: the claimed source only selects the secret to check with.
        let claimed = request::peek_source(body)?;
        let entry = self
            .sources
            .get(&claimed.to_ascii_lowercase())
            .ok_or_else(|| IngestError::unknown_source(&claimed))?;
        let secret = entry.secret.as_ref().ok_or_else(|| {
            IngestError::bad_signature(
                "the server has no dispatch secret for this source; the operator must set its webhook_secret_env variable",
            )
        })?;
        signature::verify(secret, body, headers.signature)?;
        // Authenticated from here on.
        let delivery_id = check_delivery(headers.delivery)?;
        let source = &entry.source;
        let req = request::parse(body, self.forges.of(source).has_runs())?;

        let claims = match &source.oidc_audience {
            Some(audience) => {
                let token = bearer(headers.authorization)?;
                let verifier = self.oidc.as_ref().ok_or_else(|| {
                    IngestError::unavailable(60, "OIDC is required for this source but no issuer is configured; add a [github] section")
                })?;
                let claims = verifier.verify_token(token, audience).await?;
                oidc::check_claims_against_request(&claims, source, &req)?;
                Some(claims)
            }
            None => None,
        };

        let forge = self.forges.of(source);
        let (kind, default_branch, repository_id, run_sha) = match &req.kind {
            DispatchKind::Range { before, after } => {
                let v = forge.verify_range(req.run, before, after).await?;
                let run_sha = v.run.as_ref().map(|r| r.head_sha.clone());
                (
                    VerifiedKind::Range {
                        before: before.clone(),
                        after: after.clone(),
                        commits: v.commits,
                    },
                    v.default_branch,
                    v.repository_id,
                    run_sha,
                )
            }
            DispatchKind::PullRequest { number } => {
                let v = forge.verify_pull(req.run, *number).await?;
                let run_sha = v.run.as_ref().map(|r| r.head_sha.clone());
                (
                    VerifiedKind::PullRequest {
                        number: v.number,
                        merge_sha: v.merge_sha,
                    },
                    v.default_branch,
                    v.repository_id,
                    run_sha,
                )
            }
        };
        if let Some(claims) = &claims {
            oidc::check_claims_against_forge(claims, repository_id, run_sha.as_deref())?;
        }
        Ok(VerifiedDispatch {
            source: source.repository.clone(),
            destination: source.destination(),
            delivery_id,
            run: req.run,
            default_branch,
            kind,
        })
    }

    /// Stores a verified dispatch's job `job` (`http::dispatch::new_job`),
    /// a range no larger than one job's bound ([`split::enqueue_range`]).
    pub async fn enqueue(
        &self,
        queue: &crate::queue::Queue,
        verified: &VerifiedDispatch,
        job: crate::queue::NewJob,
    ) -> Result<split::RangeEnqueued, split::SplitError> {
        let commits = match &verified.kind {
            VerifiedKind::Range { commits, .. } => Some(*commits),
            VerifiedKind::PullRequest { .. } => None,
        };
        let delivery = Some(verified.delivery_id.as_str());
        match self.sources.get(&verified.source.to_ascii_lowercase()) {
            Some(entry) => {
                let forge = self.forges.of(&entry.source);
                split::enqueue_range(queue, &forge, job, delivery, commits).await
            }
            // Not reached: only a configured source verifies.
            None => Ok(split::RangeEnqueued::One(Box::new(
                queue.enqueue(job, delivery).await?,
            ))),
        }
    }

    /// The GitHub client alone (`None` without `[github]`).
    pub fn github_forge(&self) -> Option<Arc<GitHubForge>> {
        self.forges.github().cloned()
    }
}

fn check_content_type(ct: Option<&str>) -> Result<(), IngestError> {
    let essence = ct
        .and_then(|c| c.split(';').next())
        .map(|c| c.trim().to_ascii_lowercase());
    if essence.as_deref() == Some("application/json") {
        Ok(())
    } else {
        Err(IngestError::unsupported_media_type(ct))
    }
}

fn check_delivery(d: Option<&str>) -> Result<String, IngestError> {
    let d = d.ok_or_else(|| {
        IngestError::invalid_delivery(
            "X-TeamMem-Delivery is required; send a fresh UUID per delivery and reuse it on retries",
        )
    })?;
    if d.is_empty() || d.len() > MAX_DELIVERY_LEN || !d.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(IngestError::invalid_delivery(format!(
            "X-TeamMem-Delivery must be 1 to {MAX_DELIVERY_LEN} printable ASCII characters without spaces"
        )));
    }
    Ok(d.to_string())
}

fn bearer(authorization: Option<&str>) -> Result<&str, IngestError> {
    authorization
        .and_then(crate::tokens::bearer_token)
        .ok_or_else(|| {
            IngestError::oidc(
                "oidc_missing",
                "this source requires an Actions OIDC token: send Authorization: Bearer <token> requested with the configured audience",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert!(check_content_type(Some("application/json")).is_ok());
        assert!(check_content_type(Some("Application/JSON; charset=utf-8")).is_ok());
        for bad in [None, Some("text/plain"), Some("application/jsonx")] {
            assert_eq!(
                check_content_type(bad).unwrap_err().kind,
                error::Kind::UnsupportedMediaType
            );
        }
    }

    #[test]
    fn delivery_ids() {
        assert!(check_delivery(Some("4f8a8e4c-1b8e-4c5e-9d1b-0a4e2f6b7c8d")).is_ok());
        assert!(check_delivery(Some(&"a".repeat(128))).is_ok());
        for bad in [None, Some(""), Some("a b"), Some("é")] {
            assert_eq!(check_delivery(bad).unwrap_err().code, "invalid_delivery");
        }
        assert!(check_delivery(Some(&"a".repeat(129))).is_err());
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer(Some("Bearer abc")).unwrap(), "abc");
        assert_eq!(bearer(Some("bearer  abc ")).unwrap(), "abc");
        assert_eq!(bearer(None).unwrap_err().code, "oidc_missing");
        assert_eq!(bearer(Some("Basic abc")).unwrap_err().code, "oidc_missing");
    }
}
