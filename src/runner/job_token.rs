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

use crate::forge::{Refusal, SourceForge, WikiToken};
use crate::wiki::Secret;
use crate::worker::JobFailure;

/// The job's wiki write credential: a token the source's forge minted for
/// this job alone (never taken from or put into the shared cache), limited
/// to the wiki's one repository and `contents: write`, handed only to the
/// job's writer through its broker, and revoked when the job ends: by
/// [`JobToken::revoke`] on the normal path, else when the value is dropped
/// (failure, timeout, cancel, lease loss, shutdown), in a task the runner
/// keeps until [`crate::worker::JobHandler::drain`] has seen it finish.
pub(super) struct JobToken {
    token: WikiToken,
    revocations: Revocations,
    revoked: bool,
}

impl JobToken {
    /// The source's wiki token for this job, if its wiki takes one. Tokens
    /// live an hour: a job deadline beyond 50 minutes asks for no more.
    pub(super) async fn mint(
        forge: &SourceForge<'_>,
        job_timeout: std::time::Duration,
        revocations: Revocations,
    ) -> Result<Option<JobToken>, JobFailure> {
        let lasting = job_timeout.min(std::time::Duration::from_secs(50 * 60));
        match forge.mint_wiki_token(lasting).await {
            Ok(token) => Ok(token.map(|token| JobToken {
                token,
                revocations,
                revoked: false,
            })),
            Err(Refusal::Unavailable { message, .. }) => Err(JobFailure::retryable(message)),
            Err(Refusal::Rejected { message, .. }) => Err(JobFailure::permanent(message)),
        }
    }

    /// The token, for the job's writer alone.
    pub(super) fn secret(&self) -> &Secret {
        &self.token.secret
    }

    pub(super) async fn revoke(mut self) {
        self.revoked = true;
        revoke(&self.token).await;
    }
}

impl Drop for JobToken {
    fn drop(&mut self) {
        if self.revoked {
            return;
        }
        let token = self.token.clone();
        let task = async move { revoke(&token).await };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => self.revocations.keep(runtime.spawn(task)),
            Err(_) => {
                tracing::error!(target: "teammem::runner", wiki = %self.token.wiki(), "a job's wiki token could not be revoked: no runtime; it expires within the hour")
            }
        }
    }
}

async fn revoke(token: &WikiToken) {
    let wiki = token.wiki();
    match token.revoke().await {
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
