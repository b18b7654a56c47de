//! A job's wiki write token as the source's forge mints it ([`WikiToken`]):
//! for the wiki's one repository and `contents: write`, for one job alone
//! (never taken from or put into the shared token cache), usable until the
//! job's deadline, and revoked through the forge that minted it, so the
//! runner that holds it never names a forge's client.
//!
//! Invariants: only [`super::SourceForge::mint_wiki_token`] makes one (a
//! GitHub wiki with the App's client; a local wiki takes no token); a token
//! that would expire before the job's deadline is revoked at once and never
//! handed out; the secret leaves this value only as the [`Secret`] the
//! runner gives the job's writer, and nothing here logs it.

use std::sync::Arc;

use super::Refusal;
use super::github::{GitHubError, GitHubForge, Permissions};
use crate::wiki::Secret;

/// A job's wiki write token and the forge that revokes it.
#[derive(Clone)]
pub struct WikiToken {
    pub secret: Secret,
    github: Arc<GitHubForge>,
    wiki: String,
}

impl WikiToken {
    /// Mints a token for `wiki` that stays usable for `lasting`.
    pub(super) async fn mint(
        github: &Arc<GitHubForge>,
        wiki: &str,
        lasting: std::time::Duration,
    ) -> Result<WikiToken, Refusal> {
        match github
            .mint_job_token(wiki, &Permissions::contents_write(), lasting)
            .await
        {
            Ok(secret) => Ok(WikiToken {
                secret,
                github: github.clone(),
                wiki: wiki.to_owned(),
            }),
            Err(GitHubError::Unavailable { message, .. }) => Err(Refusal::unavailable(
                60,
                format!("minting the wiki token for {wiki} failed: {message}"),
            )),
            Err(e) => Err(Refusal::rejected(
                "wiki_token_refused",
                format!(
                    "GitHub refused a contents:write token for the wiki repository {wiki}: {e}; install the App on {wiki} with contents write permission, then retry the job"
                ),
            )),
        }
    }

    /// The wiki repository the token is for.
    pub fn wiki(&self) -> &str {
        &self.wiki
    }

    /// Revokes the token; an already dead token counts as revoked. `Err`
    /// says why it could not be (it then expires within the hour).
    pub async fn revoke(&self) -> Result<(), String> {
        self.github
            .revoke_token(&self.secret)
            .await
            .map_err(|e| e.to_string())
    }
}
