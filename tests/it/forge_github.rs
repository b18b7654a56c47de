//! GitHub App plumbing against the fake: installation tokens keyed by repository
//! and permission set, `check-installations` statuses and exit codes, the App key
//! from a file (mode checked) and from Key Vault through an injected transport.

use std::sync::{Arc, Mutex};

use azure_core::credentials::{AccessToken, TokenCredential, TokenRequestOptions};
use azure_core::http::headers::Headers;
use azure_core::http::{AsyncRawResponse, HttpClient, Request, StatusCode};
use teammem::forge::github::load_app_key;
use teammem::forge::github::{
    Access, GitHubForge, InstallationStatus, Permissions, check_installations, exit_code,
};
use teammem::secrets::{Secret, fetch_key_vault_secret, read_key_file};

use crate::dispatch::Fixture;
use crate::harness::fake_github::{FakeGitHub, rsa_key};

#[tokio::test]
async fn tokens_are_cached_per_repository_and_permission_set() {
    let f = Fixture::new().await;
    let write = f
        .forge
        .installation_token("octo/app", &Permissions::contents_write())
        .await
        .unwrap();
    let read = f
        .forge
        .installation_token("octo/app", &Permissions::contents_read())
        .await
        .unwrap();
    assert_ne!(
        write.expose(),
        read.expose(),
        "a write token must not serve a read call"
    );
    // Asking again hits the cache for both.
    let write2 = f
        .forge
        .installation_token("octo/app", &Permissions::contents_write())
        .await
        .unwrap();
    let read2 = f
        .forge
        .installation_token("octo/app", &Permissions::contents_read())
        .await
        .unwrap();
    assert_eq!(write.expose(), write2.expose());
    assert_eq!(read.expose(), read2.expose());
    // Another repository gets its own token.
    let other = f
        .forge
        .installation_token("octo/oidc", &Permissions::contents_read())
        .await
        .unwrap();
    assert_ne!(other.expose(), read.expose());
    let mints = f.fake.mints();
    assert_eq!(mints.len(), 3);
    assert_eq!(mints[0].repositories, vec!["app".to_string()]);
    assert_eq!(
        mints[0].permissions,
        vec![("contents".to_string(), "write".to_string())]
    );
    assert_eq!(
        mints[1].permissions,
        vec![("contents".to_string(), "read".to_string())]
    );
    assert_eq!(mints[2].repositories, vec!["oidc".to_string()]);
    // Verification makes only read calls: it mints read tokens for what it lacks
    // and takes contents:read from the cache, never the contents:write token.
    f.send(&f.range("octo/app")).await.unwrap();
    let after = f.fake.mints();
    assert!(
        after[3..]
            .iter()
            .all(|m| m.permissions.iter().all(|(_, a)| a == "read")),
        "{after:?}"
    );
    assert!(
        !after[3..]
            .iter()
            .any(|m| m.permissions == vec![("contents".to_string(), "read".to_string())]),
        "the cached contents:read token is reused: {after:?}"
    );
    // Secrets never print.
    assert_eq!(format!("{write:?}"), "Secret(<redacted>)");
    let debug = format!("{:?} {:?}", f.forge, f.ingest);
    assert!(
        !debug.contains("PRIVATE KEY") && !debug.contains("ghs_"),
        "{debug}"
    );
    let _ = Permissions::of(&[("contents", Access::Write), ("metadata", Access::Read)]);
}

#[tokio::test]
async fn check_installations_reports_each_repository() {
    let f = Fixture::new().await;
    f.fake.add_repo("octo/bare", &f.git, "private", false);
    let repos = vec![
        "octo/app".to_string(),
        "octo/bare".to_string(),
        "octo/missing".to_string(),
    ];
    let results = check_installations(&f.forge, &repos).await;
    assert!(matches!(results[0].1, InstallationStatus::Installed { .. }));
    assert_eq!(results[1].1, InstallationStatus::NotInstalled);
    assert_eq!(results[2].1, InstallationStatus::NotInstalled);
    assert_eq!(exit_code(&results), 1);
    assert_eq!(exit_code(&results[..1]), 0);

    // A wrong App key: GitHub refuses the JWT → exit 2.
    let (other_pem, _) = rsa_key();
    let forge =
        GitHubForge::new(f.config.github.as_ref().unwrap(), &Secret::from(other_pem)).unwrap();
    let results = check_installations(&forge, &repos[..1]).await;
    assert!(
        matches!(results[0].1, InstallationStatus::Failed { .. }),
        "{results:?}"
    );
    assert_eq!(exit_code(&results), 2);
    // The message names the problem but carries no token material.
    let InstallationStatus::Failed { message } = &results[0].1 else {
        unreachable!()
    };
    assert!(message.contains("401"), "{message}");
}

#[tokio::test]
async fn a_loose_key_file_is_refused_and_a_tight_one_loads() {
    use std::os::unix::fs::PermissionsExt;
    let fake = FakeGitHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let text = crate::dispatch::config_text(&fake, dir.path(), "");
    let config = teammem::config::Config::parse(&text).unwrap();
    let gh = config.github.as_ref().unwrap();
    let key = load_app_key(gh).await.unwrap();
    assert!(GitHubForge::new(gh, &key).is_ok());
    let path = dir.path().join("app.pem");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = load_app_key(gh).await.unwrap_err().to_string();
    assert!(err.contains("chmod 600"), "{err}");
    assert!(!err.contains("PRIVATE KEY"), "{err}");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert!(read_key_file(&path).is_err());
}

// --- Key Vault ---------------------------------------------------------------------

/// Plays Key Vault: a request without a token gets the 401 challenge, a request
/// with the credential's token gets the secret.
#[derive(Debug, Default)]
struct FakeVault {
    seen: Mutex<Vec<(String, Option<String>)>>,
    pem: String,
}

#[async_trait::async_trait]
impl HttpClient for FakeVault {
    async fn execute_request(&self, request: &Request) -> azure_core::Result<AsyncRawResponse> {
        let auth = request
            .headers()
            .get_optional_string(&azure_core::http::headers::AUTHORIZATION);
        self.seen
            .lock()
            .unwrap()
            .push((request.url().to_string(), auth.clone()));
        let mut headers = Headers::new();
        match auth.as_deref() {
            None => {
                headers.insert(
                    "www-authenticate",
                    "Bearer authorization=\"https://login.microsoftonline.com/tenant\", resource=\"https://vault.azure.net\"",
                );
                Ok(AsyncRawResponse::from_bytes(
                    StatusCode::Unauthorized,
                    headers,
                    Vec::new(),
                ))
            }
            Some("Bearer kv-access-token") => {
                headers.insert("content-type", "application/json");
                let body = serde_json::json!({
                    "value": self.pem,
                    "id": "https://kv.vault.azure.net/secrets/app-key/0123456789abcdef",
                    "attributes": {"enabled": true}
                });
                Ok(AsyncRawResponse::from_bytes(
                    StatusCode::Ok,
                    headers,
                    serde_json::to_vec(&body).unwrap(),
                ))
            }
            Some(_) => Ok(AsyncRawResponse::from_bytes(
                StatusCode::Forbidden,
                headers,
                Vec::new(),
            )),
        }
    }
}

#[derive(Debug)]
struct FakeCredential {
    scopes: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl TokenCredential for FakeCredential {
    async fn get_token(
        &self,
        scopes: &[&str],
        _options: Option<TokenRequestOptions<'_>>,
    ) -> azure_core::Result<AccessToken> {
        self.scopes
            .lock()
            .unwrap()
            .extend(scopes.iter().map(|s| s.to_string()));
        Ok(AccessToken::new(
            "kv-access-token",
            azure_core::time::OffsetDateTime::now_utc() + azure_core::time::Duration::hours(1),
        ))
    }
}

#[tokio::test]
async fn the_app_key_comes_from_key_vault_after_the_challenge() {
    let (pem, _) = rsa_key();
    let vault = Arc::new(FakeVault {
        pem: pem.clone(),
        ..Default::default()
    });
    let credential = Arc::new(FakeCredential {
        scopes: Mutex::new(Vec::new()),
    });
    let key = fetch_key_vault_secret(
        "https://kv.vault.azure.net/secrets/app-key",
        credential.clone(),
        Some(vault.clone()),
    )
    .await
    .unwrap();
    assert_eq!(key.expose_str(), Some(pem.as_str()));
    let seen = vault.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].1, None, "the first request carries no token");
    assert_eq!(seen[1].1.as_deref(), Some("Bearer kv-access-token"));
    assert!(
        seen[1]
            .0
            .starts_with("https://kv.vault.azure.net/secrets/app-key")
    );
    assert_eq!(
        credential.scopes.lock().unwrap().clone(),
        vec!["https://vault.azure.net/.default".to_string()]
    );
    // The key works for the App.
    let fake = FakeGitHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config =
        teammem::config::Config::parse(&crate::dispatch::config_text(&fake, dir.path(), ""))
            .unwrap();
    assert!(GitHubForge::new(config.github.as_ref().unwrap(), &key).is_ok());

    // A denied identity: an error naming the vault, never a value.
    #[derive(Debug)]
    struct WrongCredential;
    #[async_trait::async_trait]
    impl TokenCredential for WrongCredential {
        async fn get_token(
            &self,
            _: &[&str],
            _: Option<TokenRequestOptions<'_>>,
        ) -> azure_core::Result<AccessToken> {
            Ok(AccessToken::new(
                "wrong",
                azure_core::time::OffsetDateTime::now_utc() + azure_core::time::Duration::hours(1),
            ))
        }
    }
    let err = fetch_key_vault_secret(
        "https://kv.vault.azure.net/secrets/app-key",
        Arc::new(WrongCredential),
        Some(vault.clone()),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("kv.vault.azure.net"), "{err}");
    assert!(!err.contains("PRIVATE"), "{err}");
}

#[tokio::test]
async fn the_check_installations_command_reports_and_exits() {
    use teammem::forge::github::check_installations_command;
    let f = Fixture::new().await;
    f.fake.add_repo("octo/bare", &f.git, "private", false);
    let (lines, code) = check_installations_command(&f.config, &["octo/app".into()]).await;
    assert_eq!(code, 0, "{lines:?}");
    assert!(lines[0].starts_with("octo/app: installed"), "{lines:?}");
    let (lines, code) =
        check_installations_command(&f.config, &["octo/app".into(), "octo/bare".into()]).await;
    assert_eq!(code, 1);
    assert_eq!(lines[1], "octo/bare: not installed");
    let (_, code) = check_installations_command(&f.config, &["not-a-repo".into()]).await;
    assert_eq!(code, 2);
    let no_github = teammem::config::Config::parse("[server]\ndata_dir = \"/tmp/x\"\n").unwrap();
    let (lines, code) = check_installations_command(&no_github, &["octo/app".into()]).await;
    assert_eq!(code, 2);
    assert!(lines[0].contains("[github]"));
}

/// `git ls-remote` of `url` with Basic `x-access-token:<token>` (the header
/// through the environment, never argv); whether git could read the refs.
/// Async: the git server runs on this test's runtime.
async fn git_reads_with(url: &str, token: &str) -> bool {
    use base64::Engine;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{token}"));
    tokio::process::Command::new("git")
        .args(["ls-remote", url])
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "http.extraHeader")
        .env(
            "GIT_CONFIG_VALUE_0",
            format!("Authorization: Basic {basic}"),
        )
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .await
        .unwrap()
        .status
        .success()
}

#[tokio::test]
async fn a_job_token_is_new_on_every_mint_and_never_cached() {
    let f = Fixture::new().await;
    let perms = Permissions::contents_write();
    let lasting = std::time::Duration::from_secs(15 * 60);
    let cached = f
        .forge
        .installation_token("octo/app", &perms)
        .await
        .unwrap();
    let first = f
        .forge
        .mint_job_token("octo/app", &perms, lasting)
        .await
        .unwrap();
    let second = f
        .forge
        .mint_job_token("octo/app", &perms, lasting)
        .await
        .unwrap();
    assert_ne!(first.expose(), second.expose(), "two jobs, two tokens");
    assert_ne!(first.expose(), cached.expose(), "not the cached token");
    // The cache still answers with its own token, not a job's.
    let again = f
        .forge
        .installation_token("octo/app", &perms)
        .await
        .unwrap();
    assert_eq!(again.expose(), cached.expose());
    let mints = f.fake.mints();
    assert_eq!(mints.len(), 3, "{mints:?}");
    for m in &mints {
        assert_eq!(m.repositories, ["app"]);
        assert_eq!(
            m.permissions,
            [("contents".to_string(), "write".to_string())]
        );
    }
    assert!(!format!("{first:?}").contains(first.expose_str().unwrap()));

    // A deadline beyond the token's life is refused, and that token is not
    // left alive.
    let err = f
        .forge
        .mint_job_token("octo/app", &perms, std::time::Duration::from_secs(2 * 3600))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("job_timeout_seconds"), "{err}");
    let unusable = f.fake.mints().last().unwrap().token.clone();
    assert!(!err.contains(&unusable));
    assert_eq!(f.fake.revoked_tokens(), [unusable]);
}

#[tokio::test]
async fn a_revoked_job_token_is_refused_by_the_api_and_by_git() {
    let f = Fixture::new().await;
    // The wiki of octo/app behind git http-backend, accepting what the fake minted.
    let served = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(served.path().join("octo")).unwrap();
    crate::harness::git::git(
        served.path(),
        &["init", "-q", "--bare", "octo/app.wiki.git"],
    );
    let git =
        crate::harness::git_http::GitHttpServer::start_checked(served.path(), f.fake.wiki_access())
            .await;
    let url = git.url("octo/app.wiki.git");

    let token = f
        .forge
        .mint_job_token(
            "octo/app",
            &Permissions::contents_write(),
            std::time::Duration::from_secs(60),
        )
        .await
        .unwrap();
    let value = token.expose_str().unwrap().to_string();
    let api = |t: String| {
        let url = format!("{}/repos/octo/app", f.fake.url);
        async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(t)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(api(value.clone()).await, 200);
    assert!(
        git_reads_with(&url, &value).await,
        "the live token reads the wiki"
    );

    f.forge.revoke_token(&token).await.unwrap();
    assert_eq!(f.fake.revoked_tokens(), std::slice::from_ref(&value));
    assert_eq!(api(value.clone()).await, 401, "the API refuses it");
    assert!(!git_reads_with(&url, &value).await, "git refuses it");
    // Revoking a dead token again is no error (GitHub answers 401).
    f.forge.revoke_token(&token).await.unwrap();
    assert_eq!(f.fake.revoked_tokens().len(), 1);
    // Other tokens live on.
    let other = f
        .forge
        .installation_token("octo/app", &Permissions::metadata_read())
        .await
        .unwrap();
    assert_eq!(api(other.expose_str().unwrap().to_string()).await, 200);
}
