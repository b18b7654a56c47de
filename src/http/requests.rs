//! `POST /v1/requests`: a maintainer asks for one merged pull request to be
//! reconciled, and [`Requests`], the same operation for the coordinator MCP
//! tools.
//!
//! Order of checks: bearer token (401, before a byte of the body is read) →
//! body (415/413/400/422, read with a 16 KiB cap) → may this caller
//! act on that repository (403; a scoped API token never learns whether a
//! repository outside its scope is configured) → configured source (404) →
//! maintainer role for GitHub tokens (403) → forge verification of DESIGN §4
//! step 4 (404 `pull_not_found`, 409 `pull_not_merged`/`not_on_default_branch`,
//! 503 + `Retry-After`) → enqueue with identity `source + pull_number +
//! merge_sha` (202 new, 200 the same job again).
//!
//! Invariants: nothing is stored for a refused request (the queue is only
//! called after every check passed); a GitHub token is only ever sent to
//! GitHub, never logged or echoed; error bodies are the dispatch route's.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{ApiError, AppState};
use crate::config::{Config, Forge, Source};
use crate::forge::github::{GitHubError, GitHubForge, TokenOwner};
use crate::forge::{Refusal, VerifiedPull, local};
use crate::queue::{Disposition, Enqueued, JobKind, NewJob, Origin, Queue};
use crate::secrets::Secret;
use crate::tokens::{self, Principal};

/// Largest accepted request body.
const MAX_BODY_BYTES: usize = 16 * 1024;

/// Largest pull request number accepted (GitHub numbers are 32-bit).
pub const MAX_PULL_NUMBER: i64 = i32::MAX as i64;

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/requests", post(create))
}

/// Who presented the bearer token.
#[derive(Debug, Clone)]
pub enum Credential {
    /// A teammem API token.
    Api(Principal),
    /// A GitHub token (accepted only with `api.allow_github_tokens`); its owner
    /// still needs `maintain` or `admin` on each source it acts on.
    GitHub(TokenOwner),
}

impl Credential {
    /// The name recorded as the job's actor.
    pub fn actor(&self) -> String {
        match self {
            Credential::Api(p) => format!("token:{}", p.name),
            Credential::GitHub(o) => format!("github:{}", o.login),
        }
    }
}

/// A request that reached the queue.
#[derive(Debug, Clone)]
pub struct Accepted {
    pub enqueued: Enqueued,
    pub merge_sha: String,
}

impl Accepted {
    /// `true` when this request created (or extended) a job, `false` when it
    /// named a job that already existed.
    pub fn is_new(&self) -> bool {
        !matches!(self.enqueued.disposition, Disposition::Duplicate)
    }
}

/// Verification and enqueueing of PR requests, shared by `/v1/requests` and the
/// coordinator MCP tools. Cheap to clone.
#[derive(Clone)]
pub struct Requests {
    pub config: Arc<Config>,
    pub queue: Queue,
    pub github: Option<Arc<GitHubForge>>,
    /// Wakes the daemon's workers after an enqueue (absent in `teammem mcp` on
    /// stdio: the daemon's workers find the job on their next poll).
    pub wake: Option<Arc<Notify>>,
}

impl Requests {
    pub fn from_state(state: &AppState) -> Self {
        Requests {
            config: state.config.clone(),
            queue: state.queue.clone(),
            github: state.ingest.as_ref().and_then(|i| i.github_forge()),
            wake: Some(state.wake_workers.clone()),
        }
    }

    /// Resolves a bearer token: a teammem API token first, then (when allowed)
    /// a GitHub token. 401 for anything else.
    pub async fn authenticate(
        &self,
        pool: &sqlx::SqlitePool,
        authorization: Option<&str>,
    ) -> Result<Credential, ApiError> {
        let value = authorization.ok_or_else(|| {
            ApiError::unauthorized(
                "missing Authorization header; send `Authorization: Bearer <token>` (create one with `teammem tokens create`)",
            )
        })?;
        let token = value
            .trim()
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ApiError::unauthorized("expected `Authorization: Bearer <token>`"))?;
        match tokens::verify(pool, token).await {
            Ok(Some(principal)) => return Ok(Credential::Api(principal)),
            Ok(None) => {}
            Err(e) => return Err(ApiError::internal("token lookup failed", &e)),
        }
        if !self.config.api.allow_github_tokens {
            return Err(ApiError::unauthorized(
                "the token is not valid or was revoked",
            ));
        }
        let github = self.github()?;
        let secret = Secret::from(token.to_string());
        match github.token_owner(&secret).await {
            Ok(owner) if owner.is_bot() => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "not_a_maintainer",
                format!(
                    "the GitHub token belongs to {} (a {}); only people with maintain or admin on the source may ask for reconciliations",
                    owner.login, owner.kind
                ),
            )),
            Ok(owner) => Ok(Credential::GitHub(owner)),
            Err(GitHubError::Denied(_)) | Err(GitHubError::NotFound(_)) => {
                Err(ApiError::unauthorized(
                    "the token is not a teammem token and GitHub did not accept it",
                ))
            }
            Err(e) => Err(github_error(e)),
        }
    }

    /// The repositories a GitHub token's owner maintains among the configured
    /// GitHub sources, as a principal (403 when there is none: an empty list
    /// would mean "all").
    pub async fn github_principal(&self, owner: &TokenOwner) -> Result<Principal, ApiError> {
        let github = self.github()?;
        let mut repositories = Vec::new();
        for source in self
            .config
            .sources
            .iter()
            .filter(|s| s.forge == Forge::GitHub)
        {
            match github
                .collaborator_role(&source.repository, &owner.login)
                .await
            {
                Ok(role) if role.may_maintain() => repositories.push(source.repository.clone()),
                Ok(_) | Err(GitHubError::NotFound(_)) => {}
                Err(e) => return Err(github_error(e)),
            }
        }
        if repositories.is_empty() {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "not_a_maintainer",
                format!(
                    "{} has neither maintain nor admin on any configured source; ask a repository admin for the maintain role or use a teammem API token",
                    owner.login
                ),
            ));
        }
        Ok(Principal {
            name: format!("github:{}", owner.login),
            repositories,
        })
    }

    /// May `credential` act on `repository`? Returns the configured source.
    pub async fn authorize(
        &self,
        credential: &Credential,
        repository: &str,
    ) -> Result<Source, ApiError> {
        if let Credential::Api(principal) = credential
            && !principal.may_access(repository)
        {
            return Err(forbidden_repository(repository));
        }
        let source = self
            .config
            .source(repository)
            .cloned()
            .ok_or_else(|| unknown_source(repository))?;
        if let Credential::GitHub(owner) = credential {
            if source.forge != Forge::GitHub {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "not_a_maintainer",
                    format!(
                        "{} is a local source; GitHub tokens cannot vouch for it, use a teammem API token",
                        source.repository
                    ),
                ));
            }
            let role = self
                .github()?
                .collaborator_role(&source.repository, &owner.login)
                .await;
            match role {
                Ok(role) if role.may_maintain() => {}
                Ok(role) => {
                    return Err(ApiError::new(
                        StatusCode::FORBIDDEN,
                        "not_a_maintainer",
                        format!(
                            "{} has the role {:?} on {}; asking for a reconciliation needs maintain or admin",
                            owner.login, role.role_name, source.repository
                        ),
                    ));
                }
                Err(GitHubError::NotFound(_)) => {
                    return Err(ApiError::new(
                        StatusCode::FORBIDDEN,
                        "not_a_maintainer",
                        format!(
                            "{} is not a collaborator of {}; asking for a reconciliation needs maintain or admin",
                            owner.login, source.repository
                        ),
                    ));
                }
                Err(e) => return Err(github_error(e)),
            }
        }
        Ok(source)
    }

    /// Verifies PR `number` of `source` (DESIGN §4 step 4) and enqueues it.
    pub async fn request(
        &self,
        source: &Source,
        number: i64,
        actor: &str,
    ) -> Result<Accepted, ApiError> {
        check_pull_number(number)?;
        let number = number as u64;
        let verified: VerifiedPull = match &source.forge {
            Forge::GitHub => self
                .github()?
                .verify_pull(source, None, number)
                .await
                .map_err(refusal)?,
            Forge::Local { repo, .. } => {
                let path = repo.clone();
                tokio::task::spawn_blocking(move || local::verify_pull(&path, number))
                    .await
                    .map_err(|e| ApiError::internal("the local verification task failed", &e))?
                    .map_err(refusal)?
            }
        };
        let enqueued = self
            .queue
            .enqueue(
                NewJob {
                    source: source.repository.clone(),
                    destination: source.destination(),
                    origin: Origin::Request,
                    kind: JobKind::PullRequest {
                        number: verified.number as i64,
                        merge_sha: verified.merge_sha.clone(),
                    },
                    actor: actor.to_string(),
                },
                None,
            )
            .await?;
        let accepted = Accepted {
            enqueued,
            merge_sha: verified.merge_sha,
        };
        if accepted.is_new()
            && let Some(wake) = &self.wake
        {
            wake.notify_one();
        }
        tracing::info!(
            job = accepted.enqueued.job.id,
            source = %source.repository,
            pull = number,
            actor,
            new = accepted.is_new(),
            "pull request reconciliation requested"
        );
        Ok(accepted)
    }

    fn github(&self) -> Result<&GitHubForge, ApiError> {
        self.github.as_deref().ok_or_else(|| ApiError {
            retry_after: Some(60),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "github_unavailable",
                "this daemon has no GitHub App configured; add a [github] section",
            )
        })
    }
}

/// `pull_number` must be 1 to [`MAX_PULL_NUMBER`].
pub fn check_pull_number(number: i64) -> Result<(), ApiError> {
    if (1..=MAX_PULL_NUMBER).contains(&number) {
        Ok(())
    } else {
        Err(invalid_field(format!(
            "pull_number must be a pull request number from 1 to {MAX_PULL_NUMBER}, got {number}"
        )))
    }
}

pub fn forbidden_repository(repository: &str) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden_repository",
        format!(
            "this token may not act on {}; use a token created for that repository",
            bounded(repository)
        ),
    )
}

fn unknown_source(repository: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_source",
        format!(
            "{} is not a configured source; add it to teammem.toml or fix the name",
            bounded(repository)
        ),
    )
}

fn invalid_field(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_field", message)
}

fn bounded(text: &str) -> String {
    text.chars().take(100).collect()
}

/// A forge refusal as an answer: `pull_not_found` is 404, the other checks 409.
fn refusal(r: Refusal) -> ApiError {
    match r {
        Refusal::Rejected { code, message } => {
            let status = if code == "pull_not_found" {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::CONFLICT
            };
            ApiError::new(status, code, message)
        }
        Refusal::Unavailable {
            retry_after,
            message,
        } => ApiError {
            retry_after: Some(retry_after),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "upstream_unavailable",
                message,
            )
        },
    }
}

fn github_error(e: GitHubError) -> ApiError {
    match e {
        GitHubError::Unavailable {
            retry_after,
            message,
        } => ApiError {
            retry_after: Some(retry_after),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "upstream_unavailable",
                message,
            )
        },
        other => ApiError {
            retry_after: Some(60),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "upstream_unavailable",
                format!("the maintainer check could not be completed: {other}"),
            )
        },
    }
}

/// `{"repository": "owner/name", "pull_number": N}`, nothing else.
fn parse_body(body: &[u8]) -> Result<(String, i64), ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(
            "invalid_json",
            format!("the body is not JSON ({e}); send {{\"repository\": \"owner/name\", \"pull_number\": N}}"),
        )
    })?;
    let Value::Object(object) = value else {
        return Err(ApiError::bad_request(
            "invalid_json",
            "the body must be a JSON object {\"repository\": \"owner/name\", \"pull_number\": N}",
        ));
    };
    if let Some(extra) = object
        .keys()
        .find(|k| *k != "repository" && *k != "pull_number")
    {
        return Err(invalid_field(format!(
            "unknown field {:?}; the body takes only repository and pull_number",
            bounded(extra)
        )));
    }
    let repository = match object.get("repository") {
        Some(Value::String(r)) if crate::config::is_repository_name(r) => r.clone(),
        Some(Value::String(r)) => {
            return Err(invalid_field(format!(
                "repository must be owner/name, got {:?}",
                bounded(r)
            )));
        }
        Some(_) => {
            return Err(invalid_field(
                "repository must be a string owner/name".into(),
            ));
        }
        None => return Err(invalid_field("repository is required (owner/name)".into())),
    };
    let number = match object.get("pull_number") {
        Some(Value::Number(n)) => match n.as_i64() {
            Some(n) => n,
            None => {
                return Err(invalid_field(format!(
                    "pull_number must be an integer from 1 to {MAX_PULL_NUMBER}, got {n}"
                )));
            }
        },
        Some(_) => {
            return Err(invalid_field(format!(
                "pull_number must be an integer from 1 to {MAX_PULL_NUMBER}"
            )));
        }
        None => return Err(invalid_field("pull_number is required".into())),
    };
    check_pull_number(number)?;
    Ok((repository, number))
}

async fn create(State(state): State<AppState>, request: Request) -> Response {
    match handle(&state, request).await {
        Ok(response) => response,
        Err(e) => {
            tracing::info!(code = e.code, status = e.status.as_u16(), "request refused");
            e.into_response()
        }
    }
}

/// Reads the body only after the caller authenticated, and at most
/// [`MAX_BODY_BYTES`] of it: an unauthenticated client is answered before its
/// body is read at all.
async fn handle(state: &AppState, request: Request) -> Result<Response, ApiError> {
    let (parts, body) = request.into_parts();
    let headers = &parts.headers;
    let requests = Requests::from_state(state);
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    let credential = requests.authenticate(&state.pool, authorization).await?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    if content_type.as_deref() != Some("application/json") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as Content-Type: application/json",
        ));
    }
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the body may be at most {MAX_BODY_BYTES} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(too_large());
    }
    let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| too_large())?;
    let (repository, number) = parse_body(&body)?;
    let source = requests.authorize(&credential, &repository).await?;
    let accepted = requests
        .request(&source, number, &credential.actor())
        .await?;
    let status = if accepted.is_new() {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(json!({
            "job_id": accepted.enqueued.job.id,
            "state": accepted.enqueued.job.state,
            "repository": source.repository,
            "pull_number": number,
            "merge_sha": accepted.merge_sha,
        })),
    )
        .into_response())
}
