//! Who may ask for a reconciliation with a GitHub token: the token's owner
//! (`GET /user`, with the caller's own token) and their role on a source
//! (`GET /repos/{src}/collaborators/{login}/permission`, with an installation
//! token for metadata read).
//!
//! Invariants: only `maintain` and `admin` pass (`role_name` tells `maintain`
//! from `write`, which the `permission` field folds together); a bot account
//! never passes; the caller's token is sent only to `GET /user` and is never
//! logged or echoed in an error.

use reqwest::Method;

use super::{GitHubError, GitHubForge, Permissions};
use crate::secrets::Secret;

/// The owner of a GitHub token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOwner {
    pub login: String,
    /// GitHub's account type: `User`, `Bot`, `Organization`.
    pub kind: String,
}

impl TokenOwner {
    pub fn is_bot(&self) -> bool {
        !self.kind.eq_ignore_ascii_case("User")
    }
}

/// A collaborator's role on a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    /// `admin|write|read|none`.
    pub permission: String,
    /// `admin|maintain|write|triage|read|...` (custom roles possible).
    pub role_name: String,
}

impl Role {
    /// `maintain` or `admin`.
    pub fn may_maintain(&self) -> bool {
        self.permission == "admin"
            || self.role_name.eq_ignore_ascii_case("admin")
            || self.role_name.eq_ignore_ascii_case("maintain")
    }
}

impl GitHubForge {
    /// The account a GitHub token belongs to; `Denied` when GitHub does not
    /// accept the token.
    pub async fn token_owner(&self, token: &Secret) -> Result<TokenOwner, GitHubError> {
        #[derive(serde::Deserialize)]
        struct User {
            login: String,
            #[serde(rename = "type", default)]
            kind: String,
        }
        let resp = self.send(Method::GET, "/user", token, None).await?;
        let user: User = Self::json("/user", resp).await?;
        Ok(TokenOwner {
            login: user.login,
            kind: user.kind,
        })
    }

    /// `login`'s role on `repository`, read with the App's installation token.
    pub async fn collaborator_role(
        &self,
        repository: &str,
        login: &str,
    ) -> Result<Role, GitHubError> {
        #[derive(serde::Deserialize)]
        struct Answer {
            permission: String,
            #[serde(default)]
            role_name: String,
        }
        if login.is_empty()
            || !login
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'[' || b == b']')
        {
            return Err(GitHubError::Unexpected(format!(
                "GitHub returned an unusable login {login:?}"
            )));
        }
        let path = format!("/repos/{repository}/collaborators/{login}/permission");
        let answer: Answer = self
            .get(repository, &Permissions::metadata_read(), &path)
            .await?;
        Ok(Role {
            permission: answer.permission,
            role_name: answer.role_name,
        })
    }
}
