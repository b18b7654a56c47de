//! `teammem check-installations`: is the App installed on each repository, and can
//! it mint a token there?
//!
//! Invariant: the exit code separates "some repository lacks the App" (1) from
//! "we could not ask at all" (2: bad key, wrong App id, GitHub unreachable).

use super::{GitHubError, GitHubForge, Permissions};

/// The answer for one repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallationStatus {
    /// Installed, and a `metadata: read` token could be minted.
    Installed { installation_id: u64 },
    /// The App is not installed on the repository (or it does not exist).
    NotInstalled,
    /// The question could not be answered (authentication, outage).
    Failed { message: String },
}

impl std::fmt::Display for InstallationStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstallationStatus::Installed { installation_id } => {
                write!(f, "installed (installation {installation_id})")
            }
            InstallationStatus::NotInstalled => f.write_str("not installed"),
            InstallationStatus::Failed { message } => write!(f, "error: {message}"),
        }
    }
}

/// Checks each `owner/name` in order.
pub async fn check_installations(
    forge: &GitHubForge,
    repositories: &[String],
) -> Vec<(String, InstallationStatus)> {
    let mut out = Vec::with_capacity(repositories.len());
    for repo in repositories {
        let status = match forge.installation_id(repo).await {
            Ok(id) => match forge
                .installation_token(repo, &Permissions::metadata_read())
                .await
            {
                Ok(_) => InstallationStatus::Installed {
                    installation_id: id,
                },
                Err(GitHubError::NotFound(_)) => InstallationStatus::NotInstalled,
                Err(e) => InstallationStatus::Failed {
                    message: e.to_string(),
                },
            },
            Err(GitHubError::NotFound(_)) => InstallationStatus::NotInstalled,
            Err(e) => InstallationStatus::Failed {
                message: e.to_string(),
            },
        };
        out.push((repo.clone(), status));
    }
    out
}

/// 0 when every repository has the App, 1 when some do not, 2 when any could
/// not be checked (configuration or authentication failure, outage).
pub fn exit_code(results: &[(String, InstallationStatus)]) -> i32 {
    if results
        .iter()
        .any(|(_, s)| matches!(s, InstallationStatus::Failed { .. }))
    {
        2
    } else if results
        .iter()
        .any(|(_, s)| *s == InstallationStatus::NotInstalled)
    {
        1
    } else {
        0
    }
}
