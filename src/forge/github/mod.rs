//! The only code that talks to GitHub's REST API (base URL from config, so tests
//! point it at a loopback fake): App authentication, installation tokens,
//! verification of dispatches, installation checks, the evidence of a job.
//!
//! Invariants:
//! - every request carries an installation token minted for exactly the
//!   repository it reads and the permission the call needs (see [`auth`]);
//! - every request is pinned to `X-GitHub-Api-Version: 2022-11-28`;
//! - rate limits (403/429 with `Retry-After` or `x-ratelimit-remaining: 0`),
//!   5xx answers and timeouts become [`GitHubError::Unavailable`] with a retry
//!   delay, never a verdict about the dispatch;
//! - tokens and JWTs never appear in errors or logs.

pub mod api; // every request: the pinned version, answers classified, short pauses waited out, listings paged
pub mod audience; // the audience rule for every path to a wiki write
pub mod auth;
mod blob_cache; // source-file heads already read, by blob sha, bounded (GitHub sources' "What is here")
pub mod citations; // cited source lines followed to a job's tip: compares, a file's history, its patches
mod contents; // one file or one directory listing at a commit: policy file, brokered source reads, heads
mod history; // the first-parent history from the commit listing (backfills)
mod installations;
pub mod merged_pulls; // which pull requests a range merged: subjects, merged-in commits, the closed listing
pub mod range_bundle; // the evidence bundle of a job: compare paging, each merged PR's manifest and patches
mod recheck; // the job-start re-check: the range or merge commit still on the default branch
mod maintainers; // token owners and their role on a source (requests with GitHub tokens)
mod sweep; // the sweep's questions: the default branch's tip, a cursor's ancestry
mod verify;

pub use auth::{Access, AppSigner, Permissions};
pub use installations::{
    InstallationStatus, check_installations, check_installations_command, exit_code,
};
pub use maintainers::{Role, TokenOwner};

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use reqwest::Method;

use crate::config::{GitHub, PrivateKey};
use crate::secrets::{CredentialChain, Secret, SecretError, fetch_key_vault_secret, read_key_file};
use auth::{CachedToken, TokenAnswer, TokenCache, usable_until};

/// The REST API version every request is pinned to (pull requests still carry
/// `merge_commit_sha` in it).
pub const API_VERSION: &str = "2022-11-28";

/// Why a GitHub call did not produce an answer to use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GitHubError {
    /// 404: the thing (or the App's access to it) does not exist.
    #[error("{0}")]
    NotFound(String),
    /// Rate limit, 5xx, timeout, connection failure: ask again later.
    #[error("{message}")]
    Unavailable { retry_after: u64, message: String },
    /// 401/403 for the App itself, or a permission the App lacks.
    #[error("{0}")]
    Denied(String),
    /// Any other answer we cannot use (422, malformed JSON, ...).
    #[error("{0}")]
    Unexpected(String),
}

/// A client for one GitHub App on one API base URL.
pub struct GitHubForge {
    http: reqwest::Client,
    api_url: String,
    signer: AppSigner,
    cache: Mutex<TokenCache>,
    /// Source-file heads already read, so an unchanged blob is not asked again.
    blobs: blob_cache::BlobCache,
    verify_timeout: Duration,
}

impl std::fmt::Debug for GitHubForge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubForge")
            .field("api_url", &self.api_url)
            .field("app_id", &self.signer.app_id())
            .finish_non_exhaustive()
    }
}

/// Why the GitHub client could not be built; `Display` names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    /// The App key could not be read (a file, Key Vault): may pass later.
    #[error("github.private_key: {0}")]
    KeyUnreadable(String),
    /// The App key was read but cannot sign (not an RSA private key).
    #[error("github.private_key: {0}")]
    KeyInvalid(String),
}

/// Loads the GitHub App private key (PEM) from where `[github] private_key` says.
pub async fn load_app_key(github: &GitHub) -> Result<Secret, SecretError> {
    match &github.private_key {
        PrivateKey::File { path } => read_key_file(path),
        PrivateKey::KeyVault { secret_uri } => {
            let credential = CredentialChain::from_environment()?;
            fetch_key_vault_secret(secret_uri, credential, None).await
        }
    }
}

impl GitHubForge {
    /// The one way the process builds its GitHub client from `[github]`:
    /// loads the App key, then builds.
    pub async fn from_config(config: &GitHub) -> Result<Self, SetupError> {
        let key = load_app_key(config)
            .await
            .map_err(|e| SetupError::KeyUnreadable(e.to_string()))?;
        GitHubForge::new(config, &key).map_err(SetupError::KeyInvalid)
    }

    /// Builds the client from `[github]` and the App's PEM key.
    pub fn new(config: &GitHub, key: &Secret) -> Result<Self, String> {
        let signer = AppSigner::new(config.app_id, key)?;
        let http = reqwest::Client::builder()
            .user_agent(concat!("teammem/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5))
            .timeout(config.verify_timeout)
            .build()
            .map_err(|e| format!("cannot build the GitHub HTTP client: {e}"))?;
        Ok(GitHubForge {
            http,
            api_url: config.api_url.trim_end_matches('/').to_string(),
            signer,
            cache: Mutex::new(TokenCache::default()),
            blobs: blob_cache::BlobCache::default(),
            verify_timeout: config.verify_timeout,
        })
    }

    pub fn verify_timeout(&self) -> Duration {
        self.verify_timeout
    }

    /// The installation id of the App on `repository` (`owner/name`), cached.
    pub async fn installation_id(&self, repository: &str) -> Result<u64, GitHubError> {
        let key = repository.to_ascii_lowercase();
        if let Some(id) = self.cache.lock().unwrap().installations.get(&key) {
            return Ok(*id);
        }
        #[derive(serde::Deserialize)]
        struct Installation {
            id: u64,
        }
        let jwt = self.signer.jwt(SystemTime::now());
        let path = format!("/repos/{repository}/installation");
        let resp = self.send(Method::GET, &path, &jwt, None).await?;
        let inst: Installation = Self::json(&path, resp).await?;
        self.cache
            .lock()
            .unwrap()
            .installations
            .insert(key, inst.id);
        Ok(inst.id)
    }

    /// An installation token for exactly `repository` and `perms`, from the
    /// cache when one with that key is still good for 5 minutes.
    pub async fn installation_token(
        &self,
        repository: &str,
        perms: &Permissions,
    ) -> Result<Secret, GitHubError> {
        self.installation_token_lasting(repository, perms, Duration::ZERO)
            .await
    }

    /// Like [`GitHubForge::installation_token`], for a holder that keeps the
    /// token `lasting` (a job's writer child): a cached token that would reach
    /// the cache's early expiry within that time is replaced by a new one.
    pub async fn installation_token_lasting(
        &self,
        repository: &str,
        perms: &Permissions,
        lasting: Duration,
    ) -> Result<Secret, GitHubError> {
        if let Some(t) =
            self.cache
                .lock()
                .unwrap()
                .get(repository, perms, SystemTime::now() + lasting)
        {
            return Ok(t);
        }
        let (token, until) = self.mint(repository, perms).await?;
        self.cache.lock().unwrap().put(
            repository,
            perms,
            CachedToken {
                token: token.clone(),
                usable_until: until,
            },
        );
        Ok(token)
    }

    /// A new installation token for exactly `repository` and `perms`, for one
    /// job alone: never taken from nor put into the shared token cache, so no
    /// other job or call ever holds it. It must stay usable for `lasting`
    /// (the job's deadline); GitHub's tokens live an hour. Revoke it with
    /// [`GitHubForge::revoke_token`] when the job ends.
    pub async fn mint_job_token(
        &self,
        repository: &str,
        perms: &Permissions,
        lasting: Duration,
    ) -> Result<Secret, GitHubError> {
        let (token, until) = self.mint(repository, perms).await?;
        if until < SystemTime::now() + lasting {
            // Unusable for the job: do not leave it alive either.
            let _ = self.revoke_token(&token).await;
            return Err(GitHubError::Unexpected(format!(
                "GitHub minted a token for {repository} that expires before the job's deadline ({} s from now); shorten queue.job_timeout_seconds",
                lasting.as_secs()
            )));
        }
        Ok(token)
    }

    /// Revokes an installation token (`DELETE /installation/token`,
    /// authenticated with the token itself). `204` is revoked; `401` means the
    /// token is already dead (expired or revoked), which is as good.
    pub async fn revoke_token(&self, token: &Secret) -> Result<(), GitHubError> {
        match self
            .send(Method::DELETE, "/installation/token", token, None)
            .await
        {
            Ok(_) => Ok(()),
            // classify() words a 401 as "refused {path} with 401".
            Err(GitHubError::Denied(m)) if m.contains(" with 401") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `POST /app/installations/{id}/access_tokens` limited to `repository`
    /// and `perms`: the token and until when it may be used.
    async fn mint(
        &self,
        repository: &str,
        perms: &Permissions,
    ) -> Result<(Secret, SystemTime), GitHubError> {
        let id = self.installation_id(repository).await?;
        let name = repository
            .split_once('/')
            .map(|(_, n)| n)
            .unwrap_or(repository);
        let body = serde_json::json!({
            "repositories": [name],
            "permissions": perms.to_json(),
        });
        let jwt = self.signer.jwt(SystemTime::now());
        let path = format!("/app/installations/{id}/access_tokens");
        let resp = match self.send(Method::POST, &path, &jwt, Some(body)).await {
            Err(GitHubError::NotFound(_)) => {
                // The installation went away: forget it so the next call looks again.
                self.cache
                    .lock()
                    .unwrap()
                    .installations
                    .remove(&repository.to_ascii_lowercase());
                return Err(GitHubError::NotFound(format!(
                    "the App's installation on {repository} is gone; install the App on it"
                )));
            }
            other => other?,
        };
        let answer: TokenAnswer = Self::json(&path, resp).await?;
        let until = usable_until(&answer.expires_at).unwrap_or_else(|| {
            SystemTime::now() + Duration::from_secs(3600) - auth::TOKEN_EARLY_EXPIRY
        });
        Ok((answer.token, until))
    }
}
