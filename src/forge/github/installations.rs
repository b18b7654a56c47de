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

/// `teammem check-installations --config FILE owner/name...` without the clap
/// part: returns the lines to print (one per repository, or the one error) and
/// the exit code (see [`exit_code`]; 2 also for a missing `[github]` section, a
/// malformed repository name or an unreadable App key).
pub async fn check_installations_command(
    config: &crate::config::Config,
    repositories: &[String],
) -> (Vec<String>, i32) {
    let Some(gh) = &config.github else {
        return (
            vec!["error: the configuration has no [github] section; add one with app_id and private_key".into()],
            2,
        );
    };
    if repositories.is_empty() {
        return (
            vec!["error: name at least one repository as owner/name".into()],
            2,
        );
    }
    if let Some(bad) = repositories
        .iter()
        .find(|r| !crate::config::is_repository_name(r))
    {
        return (vec![format!("error: expected owner/name, got {bad:?}")], 2);
    }
    let forge = match GitHubForge::from_config(gh).await {
        Ok(f) => f,
        Err(e @ super::SetupError::KeyUnreadable(_)) => return (vec![format!("error: {e}")], 2),
        Err(super::SetupError::KeyInvalid(e)) => return (vec![format!("error: {e}")], 2),
    };
    let results = check_installations(&forge, repositories).await;
    let lines = results.iter().map(|(r, s)| format!("{r}: {s}")).collect();
    (lines, exit_code(&results))
}
