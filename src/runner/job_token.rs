//! The job's wiki write credential ([`JobToken`]) and the revocations still
//! in flight after their jobs ended ([`Revocations`]).
//!
//! Invariant: a job's wiki token is minted for that job alone (never taken
//! from or put into the shared token cache), for the wiki's one repository
//! and `contents: write`, lives no longer than the job's deadline allows
//! (at most 50 minutes asked for), reaches only the job's writer through its
//! broker, and is revoked when the job ends however it ends: explicitly on
//! the normal path, else when the value is dropped, in a task the runner
//! keeps until shutdown has waited for it.

use std::sync::Arc;

use crate::config::Source;
use crate::forge::github::{GitHubError, GitHubForge, Permissions};
use crate::wiki::Secret;
use crate::worker::JobFailure;

/// The job's wiki write credential: an installation token minted for this
/// job alone (never taken from or put into the shared cache), limited to the
/// wiki's one repository and `contents: write`, handed only to the job's
/// writer through its broker, and revoked when the job ends: by
/// [`JobToken::revoke`] on the normal path, else when the value is dropped
/// (failure, timeout, cancel, lease loss, shutdown), in a task the runner
/// keeps until [`crate::worker::JobHandler::drain`] has seen it finish.
pub(super) struct JobToken {
    pub(super) secret: Secret,
    forge: Arc<GitHubForge>,
    wiki: String,
    revocations: Revocations,
    revoked: bool,
}

impl JobToken {
    /// Tokens live an hour: a job deadline beyond 50 minutes asks for no more.
    pub(super) async fn mint(
        forge: Arc<GitHubForge>,
        source: &Source,
        job_timeout: std::time::Duration,
        revocations: Revocations,
    ) -> Result<JobToken, JobFailure> {
        let wiki = &source.wiki_repository;
        let lasting = job_timeout.min(std::time::Duration::from_secs(50 * 60));
        match forge
            .mint_job_token(wiki, &Permissions::contents_write(), lasting)
            .await
        {
            Ok(secret) => Ok(JobToken {
                secret,
                forge,
                wiki: wiki.to_string(),
                revocations,
                revoked: false,
            }),
            Err(GitHubError::Unavailable { message, .. }) => Err(JobFailure::retryable(format!(
                "minting the wiki token for {wiki} failed: {message}"
            ))),
            Err(e) => Err(JobFailure::permanent(format!(
                "GitHub refused a contents:write token for the wiki repository {wiki}: {e}; install the App on {wiki} with contents write permission, then retry the job"
            ))),
        }
    }

    pub(super) async fn revoke(mut self) {
        self.revoked = true;
        revoke(&self.forge, &self.secret, &self.wiki).await;
    }
}

impl Drop for JobToken {
    fn drop(&mut self) {
        if self.revoked {
            return;
        }
        let (forge, secret, wiki) = (self.forge.clone(), self.secret.clone(), self.wiki.clone());
        let task = async move { revoke(&forge, &secret, &wiki).await };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => self.revocations.keep(runtime.spawn(task)),
            Err(_) => {
                tracing::error!(target: "teammem::runner", wiki = %self.wiki, "a job's wiki token could not be revoked: no runtime; it expires within the hour")
            }
        }
    }
}

async fn revoke(forge: &GitHubForge, secret: &Secret, wiki: &str) {
    match forge.revoke_token(secret).await {
        Ok(()) => tracing::debug!(target: "teammem::runner", %wiki, "revoked the job's wiki token"),
        Err(e) => {
            tracing::warn!(target: "teammem::runner", %wiki, error = %e, "revoking the job's wiki token failed; it expires within the hour")
        }
    }
}

/// Revocations still in flight after their jobs were dropped.
#[derive(Clone, Default)]
pub(super) struct Revocations(Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>);

impl Revocations {
    fn keep(&self, task: tokio::task::JoinHandle<()>) {
        let mut tasks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    /// Waits for every kept revocation, at most `limit` in all.
    pub(super) async fn drain(&self, limit: std::time::Duration) {
        let tasks = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        let all = async {
            for task in tasks {
                let _ = task.await;
            }
        };
        if tokio::time::timeout(limit, all).await.is_err() {
            tracing::warn!(target: "teammem::runner", "some wiki tokens were not revoked before shutdown; they expire within the hour");
        }
    }
}
