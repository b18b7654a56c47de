//! The GitHub App as the wiki credential of the agent servers (the daemon's
//! `/mcp` and `teammem mcp` on stdio): a private wiki is read with an
//! installation token minted for exactly the wiki's repository and
//! `contents: read` (through [`GitHubForge`], which caches it per repository
//! and permission set).
//!
//! Invariants:
//! - this provider never hands out a token that may write: the job-bound
//!   writer child stays the only holder of a wiki write credential;
//! - the token goes only to the wiki remote; [`Context`] registers it with the
//!   result guard before use, so no result can carry it, and nothing here logs
//!   or formats it;
//! - a refusal is an envelope error whose sentence says what to fix (install
//!   the App on the wiki's repository, retry later, check the App's key), never
//!   GitHub's raw answer.
//!
//! [`Context`]: super::context::Context

use std::sync::Arc;

use super::context::{CredentialFuture, WikiCredentials};
use super::envelope::{ErrorKind, Secret, ToolError};
use crate::forge::github::{GitHubError, GitHubForge, Permissions};

/// Mints read-only wiki tokens with the GitHub App.
pub struct AppWikiCredentials {
    forge: Arc<GitHubForge>,
}

impl AppWikiCredentials {
    pub fn new(forge: Arc<GitHubForge>) -> Self {
        Self { forge }
    }
}

impl WikiCredentials for AppWikiCredentials {
    fn token<'a>(&'a self, wiki_repository: &'a str, write: bool) -> CredentialFuture<'a> {
        Box::pin(async move {
            if write {
                return Err(ToolError::permission_denied(
                    "this server only reads wikis; wiki writes happen inside a reconciliation job (request_pr_reconciliation)",
                ));
            }
            let token = self
                .forge
                .installation_token(wiki_repository, &Permissions::contents_read())
                .await
                .map_err(|e| refusal(wiki_repository, e))?;
            match token.expose_str() {
                Some(text) => Ok(Some(Secret::new(text))),
                None => Err(ToolError::new(
                    ErrorKind::UpstreamError,
                    format!(
                        "GitHub handed out an unusable token for the wiki of {wiki_repository}; try again"
                    ),
                )),
            }
        })
    }
}

/// Why no token could be minted, as a sentence an agent (or its operator) can act on.
fn refusal(wiki_repository: &str, error: GitHubError) -> ToolError {
    match error {
        GitHubError::NotFound(_) => ToolError::new(
            ErrorKind::PermissionDenied,
            format!(
                "the GitHub App is not installed on {wiki_repository}, so its wiki cannot be read; install the App on {wiki_repository} (teammem check-installations {wiki_repository} confirms it)"
            ),
        ),
        GitHubError::Unavailable { retry_after, .. } => ToolError::new(
            ErrorKind::UpstreamError,
            format!(
                "GitHub did not hand out a read token for the wiki of {wiki_repository} just now; retry in {retry_after} s"
            ),
        ),
        GitHubError::Denied(_) => ToolError::new(
            ErrorKind::AuthenticationError,
            format!(
                "GitHub refused the App's token request for {wiki_repository}; the operator should check the App id, its private key and that it may read contents"
            ),
        ),
        GitHubError::Unexpected(detail) => {
            tracing::warn!(target: "teammem::mcp", wiki = wiki_repository, %detail, "minting a wiki read token failed");
            ToolError::new(
                ErrorKind::UpstreamError,
                format!(
                    "GitHub answered the App's token request for {wiki_repository} unexpectedly; the details are in the teammem log"
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_what_to_do_and_never_pass_github_text_on() {
        let raw = "GitHub answered /app/installations/7/access_tokens with 422";
        for (error, kind, hint) in [
            (
                GitHubError::NotFound(raw.into()),
                ErrorKind::PermissionDenied,
                "install the App on octo/notes",
            ),
            (
                GitHubError::Unavailable {
                    retry_after: 42,
                    message: raw.into(),
                },
                ErrorKind::UpstreamError,
                "retry in 42 s",
            ),
            (
                GitHubError::Denied(raw.into()),
                ErrorKind::AuthenticationError,
                "check the App id, its private key",
            ),
            (
                GitHubError::Unexpected(raw.into()),
                ErrorKind::UpstreamError,
                "the details are in the teammem log",
            ),
        ] {
            let refusal = refusal("octo/notes", error);
            assert_eq!(refusal.kind, kind);
            assert!(refusal.message.contains(hint), "{}", refusal.message);
            assert!(
                !refusal.message.contains("access_tokens"),
                "{}",
                refusal.message
            );
            assert!(!refusal.message.ends_with('.'), "{}", refusal.message);
        }
    }
}
