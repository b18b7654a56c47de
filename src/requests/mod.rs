//! The PR-request service: a maintainer (or an agent, through the
//! coordinator MCP tools) asks for one merged pull request to be reconciled.
//! `POST /v1/requests` (`http/requests.rs`) and the coordinator toolset
//! (`mcp/toolsets/coordinator.rs`) both call [`Requests`], and each maps a
//! [`RequestError`] to its own answer (an HTTP status, a tool error kind).
//!
//! Order of checks: bearer token → may this caller act on that repository (a
//! scoped API token never learns whether a repository outside its scope is
//! configured) → configured source → maintainer role for GitHub tokens →
//! forge verification (DESIGN §4 step 4) → enqueue with identity `source +
//! pull_number + merge_sha`.
//!
//! Invariants: nothing is stored for a refused request (the queue is only
//! called after every check passed); a GitHub token is only ever sent to
//! GitHub, never logged or echoed; this module knows no transport.

use std::sync::Arc;

use tokio::sync::Notify;

use crate::config::{Config, Forge, Source};
use crate::forge::github::{GitHubError, GitHubForge, TokenOwner};
use crate::forge::{Forges, Refusal, VerifiedPull};
use crate::ids::{PullNumber, Sha};
use crate::queue::{Disposition, Enqueued, JobKind, NewJob, Origin, Queue, QueueError};
use crate::secrets::Secret;
use crate::tokens::{self, Principal};

/// Largest pull request number accepted (GitHub numbers are 32-bit).
pub const MAX_PULL_NUMBER: i64 = PullNumber::MAX as i64;

/// What kind of refusal a [`RequestError`] is; each caller maps it to its
/// own answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// No credential, or one that is not valid.
    Unauthorized,
    /// The caller may not act on the repository.
    Forbidden,
    /// The source or the pull request does not exist.
    NotFound,
    /// The pull request is not merged or not on the default branch; a job
    /// cannot change state that way.
    Conflict,
    /// A field of the request is not what it must be.
    InvalidField,
    /// The forge could not be asked; retry after `retry_after` seconds.
    Unavailable,
    /// Something failed inside teammem (logged where it happened).
    Internal,
}

/// Why a request was refused: `code` is stable for scripts, `message` a
/// sentence that says what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestError {
    pub kind: Kind,
    pub code: &'static str,
    pub message: String,
    pub retry_after: Option<u64>,
}

impl RequestError {
    pub fn new(kind: Kind, code: &'static str, message: impl Into<String>) -> RequestError {
        RequestError {
            kind,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The same refusal, to be retried after `seconds`.
    pub fn retry_in(mut self, seconds: u64) -> RequestError {
        self.retry_after = Some(seconds);
        self
    }

    /// The database could not be reached: logged here, answered as
    /// unavailable with a `Retry-After`.
    pub fn database_unavailable(error: &dyn std::fmt::Display) -> RequestError {
        tracing::error!(%error, "database unavailable");
        RequestError::new(
            Kind::Unavailable,
            "database_unavailable",
            "the database cannot be reached right now; retry after the Retry-After seconds",
        )
        .retry_in(crate::db::UNAVAILABLE_RETRY_AFTER)
    }

    /// An internal failure: logged here, answered without detail.
    pub fn internal(context: &str, error: &dyn std::fmt::Display) -> RequestError {
        tracing::error!(%error, "{context}");
        RequestError::new(
            Kind::Internal,
            "internal_error",
            "internal error; the server log has the details",
        )
    }
}

impl From<QueueError> for RequestError {
    fn from(e: QueueError) -> RequestError {
        match e {
            QueueError::NotFound { id } => RequestError::new(
                Kind::NotFound,
                "job_not_found",
                format!("job {id} not found; GET /v1/jobs lists the jobs you may see"),
            ),
            QueueError::InvalidTransition { .. } => {
                RequestError::new(Kind::Conflict, "invalid_transition", e.to_string())
            }
            QueueError::LeaseLost { .. } => {
                RequestError::new(Kind::Conflict, "lease_lost", e.to_string())
            }
            other if other.is_unavailable() => RequestError::database_unavailable(&other),
            other => RequestError::internal("queue operation failed", &other),
        }
    }
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
    pub merge_sha: Sha,
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
    pub forges: Forges,
    /// Wakes the daemon's workers after an enqueue (absent in `teammem mcp` on
    /// stdio: the daemon's workers find the job on their next poll).
    pub wake: Option<Arc<Notify>>,
}

impl Requests {
    /// Resolves a bearer token: a teammem API token first, then (when allowed)
    /// a GitHub token. 401 for anything else.
    pub async fn authenticate(
        &self,
        pool: &crate::db::Pool,
        authorization: Option<&str>,
    ) -> Result<Credential, RequestError> {
        let value = authorization.ok_or_else(|| {
            RequestError::new(Kind::Unauthorized, "unauthorized", 
                "missing Authorization header; send `Authorization: Bearer <token>` (create one with `teammem tokens create`)",
            )
        })?;
        let token = tokens::bearer_token(value).ok_or_else(|| {
            RequestError::new(
                Kind::Unauthorized,
                "unauthorized",
                "expected `Authorization: Bearer <token>`",
            )
        })?;
        match tokens::verify(pool, token).await {
            Ok(Some(principal)) => return Ok(Credential::Api(principal)),
            Ok(None) => {}
            Err(e) if crate::db::is_unavailable(&e) => {
                return Err(RequestError::database_unavailable(&e));
            }
            Err(e) => return Err(RequestError::internal("token lookup failed", &e)),
        }
        if !self.config.api.allow_github_tokens {
            return Err(RequestError::new(
                Kind::Unauthorized,
                "unauthorized",
                "the token is not valid or was revoked",
            ));
        }
        let github = self.github()?;
        let secret = Secret::from(token.to_string());
        match github.token_owner(&secret).await {
            Ok(owner) if owner.is_bot() => Err(RequestError::new(
                Kind::Forbidden,
                "not_a_maintainer",
                format!(
                    "the GitHub token belongs to {} (a {}); only people with maintain or admin on the source may ask for reconciliations",
                    owner.login, owner.kind
                ),
            )),
            Ok(owner) => Ok(Credential::GitHub(owner)),
            Err(GitHubError::Denied(_)) | Err(GitHubError::NotFound(_)) => Err(RequestError::new(
                Kind::Unauthorized,
                "unauthorized",
                "the token is not a teammem token and GitHub did not accept it",
            )),
            Err(e) => Err(github_error(e)),
        }
    }

    /// The repositories a GitHub token's owner maintains among the configured
    /// GitHub sources, as a principal (403 when there is none: an empty list
    /// would mean "all").
    pub async fn github_principal(&self, owner: &TokenOwner) -> Result<Principal, RequestError> {
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
                Ok(role) if role.may_maintain() => repositories.push(source.repository.to_string()),
                Ok(_) | Err(GitHubError::NotFound(_)) => {}
                Err(e) => return Err(github_error(e)),
            }
        }
        if repositories.is_empty() {
            return Err(RequestError::new(
                Kind::Forbidden,
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
    ) -> Result<Source, RequestError> {
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
                return Err(RequestError::new(
                    Kind::Forbidden,
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
                    return Err(RequestError::new(
                        Kind::Forbidden,
                        "not_a_maintainer",
                        format!(
                            "{} has the role {:?} on {}; asking for a reconciliation needs maintain or admin",
                            owner.login, role.role_name, source.repository
                        ),
                    ));
                }
                Err(GitHubError::NotFound(_)) => {
                    return Err(RequestError::new(
                        Kind::Forbidden,
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
    ) -> Result<Accepted, RequestError> {
        let number = check_pull_number(number)?;
        let verified: VerifiedPull = self
            .forges
            .of(source)
            .verify_pull(None, number)
            .await
            .map_err(refusal)?;
        let enqueued = self
            .queue
            .enqueue(
                NewJob {
                    source: source.repository.clone(),
                    destination: source.destination(),
                    origin: Origin::Request,
                    kind: JobKind::PullRequest {
                        number: verified.number,
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
        // One INFO line per job state change: a request for a job that
        // already stands changed nothing.
        let job = accepted.enqueued.job.id;
        if accepted.is_new() {
            tracing::info!(job, state = %accepted.enqueued.job.state, source = %source.repository, pull = number.get(), actor, "pull request reconciliation requested");
        } else {
            tracing::debug!(job, source = %source.repository, pull = number.get(), actor, "pull request reconciliation requested again; its job stands");
        }
        Ok(accepted)
    }

    fn github(&self) -> Result<&GitHubForge, RequestError> {
        self.forges.github().map(|g| &**g).ok_or_else(|| {
            RequestError::new(
                Kind::Unavailable,
                "github_unavailable",
                "this daemon has no GitHub App configured; add a [github] section",
            )
            .retry_in(60)
        })
    }
}

/// `pull_number` must be 1 to [`MAX_PULL_NUMBER`].
pub fn check_pull_number(number: i64) -> Result<PullNumber, RequestError> {
    u64::try_from(number)
        .ok()
        .and_then(|n| PullNumber::new(n).ok())
        .ok_or_else(|| {
            invalid_field(format!(
                "pull_number must be a pull request number from 1 to {MAX_PULL_NUMBER}, got {number}"
            ))
        })
}

pub fn forbidden_repository(repository: &str) -> RequestError {
    RequestError::new(
        Kind::Forbidden,
        "forbidden_repository",
        format!(
            "this token may not act on {}; use a token created for that repository",
            bounded(repository)
        ),
    )
}

fn unknown_source(repository: &str) -> RequestError {
    RequestError::new(
        Kind::NotFound,
        "unknown_source",
        format!(
            "{} is not a configured source; add it to teammem.toml or fix the name",
            bounded(repository)
        ),
    )
}

fn invalid_field(message: String) -> RequestError {
    RequestError::new(Kind::InvalidField, "invalid_field", message)
}

fn bounded(text: &str) -> String {
    text.chars().take(100).collect()
}

/// A forge refusal as an answer: `pull_not_found` is 404, the other checks 409.
fn refusal(r: Refusal) -> RequestError {
    match r {
        Refusal::Rejected { code, message } => {
            let kind = if code == "pull_not_found" {
                Kind::NotFound
            } else {
                Kind::Conflict
            };
            RequestError::new(kind, code, message)
        }
        Refusal::Unavailable {
            retry_after,
            message,
        } => RequestError::new(Kind::Unavailable, "upstream_unavailable", message)
            .retry_in(retry_after),
    }
}

fn github_error(e: GitHubError) -> RequestError {
    match e {
        GitHubError::Unavailable {
            retry_after,
            message,
        } => RequestError::new(Kind::Unavailable, "upstream_unavailable", message)
            .retry_in(retry_after),
        other => RequestError::new(
            Kind::Unavailable,
            "upstream_unavailable",
            format!("the maintainer check could not be completed: {other}"),
        )
        .retry_in(60),
    }
}
