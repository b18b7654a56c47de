//! The GitHub App key from Azure Key Vault: a credential chain (workload identity,
//! managed identity, Azure CLI — the Rust SDK has no `DefaultAzureCredential`) and
//! one `SecretClient::get_secret` call.
//!
//! Invariants: the secret value goes straight into a [`Secret`]; errors name the
//! vault URI and the credential that failed, never the value; the HTTP transport
//! can be injected so tests run the real client (challenge and all) offline.

use std::sync::Arc;

use azure_core::credentials::{AccessToken, TokenCredential, TokenRequestOptions};
use azure_core::http::{ClientOptions, HttpClient, Transport};
use azure_identity::{AzureCliCredential, ManagedIdentityCredential, WorkloadIdentityCredential};
use azure_security_keyvault_secrets::models::SecretClientGetSecretOptions;
use azure_security_keyvault_secrets::{SecretClient, SecretClientOptions};

use super::{Secret, SecretError, check_pem};

/// `https://NAME.vault.azure.net/secrets/NAME[/VERSION]` → (vault URL, name, version).
pub fn parse_secret_uri(uri: &str) -> Result<(String, String, Option<String>), SecretError> {
    let bad = || {
        SecretError::KeyVault(format!(
            "{uri:?} is not a Key Vault secret URI; expected https://NAME.vault.azure.net/secrets/NAME"
        ))
    };
    let rest = uri.strip_prefix("https://").ok_or_else(bad)?;
    let (host, path) = rest.split_once('/').ok_or_else(bad)?;
    let mut parts = path.trim_end_matches('/').split('/');
    if host.is_empty() || parts.next() != Some("secrets") {
        return Err(bad());
    }
    let name = parts.next().filter(|n| !n.is_empty()).ok_or_else(bad)?;
    let version = parts.next().map(str::to_string);
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok((format!("https://{host}/"), name.to_string(), version))
}

/// Fetches a Key Vault secret holding the App's PEM key. `transport` replaces the
/// HTTP client (tests); `None` uses the SDK's reqwest client.
pub async fn fetch_key_vault_secret(
    secret_uri: &str,
    credential: Arc<dyn TokenCredential>,
    transport: Option<Arc<dyn HttpClient>>,
) -> Result<Secret, SecretError> {
    let (vault, name, version) = parse_secret_uri(secret_uri)?;
    let mut options = SecretClientOptions::default();
    if let Some(t) = transport {
        options.client_options = ClientOptions {
            transport: Some(Transport::new(t)),
            ..ClientOptions::default()
        };
    }
    let client = SecretClient::new(&vault, credential, Some(options)).map_err(|e| {
        SecretError::KeyVault(format!(
            "{secret_uri}: cannot build a Key Vault client: {e}"
        ))
    })?;
    let get_options = SecretClientGetSecretOptions {
        secret_version: version,
        ..Default::default()
    };
    let response = client
        .get_secret(&name, Some(get_options))
        .await
        .map_err(|e| {
            SecretError::KeyVault(format!(
                "{secret_uri}: cannot read the secret ({}); check the daemon's Azure identity has the Key Vault Secrets User role",
                e.kind()
            ))
        })?;
    let secret = response.into_model().map_err(|e| {
        SecretError::KeyVault(format!(
            "{secret_uri}: the Key Vault answer could not be read ({})",
            e.kind()
        ))
    })?;
    let value = secret
        .value
        .ok_or_else(|| SecretError::KeyVault(format!("{secret_uri}: the secret has no value")))?;
    let key = Secret::from(value);
    check_pem(&key).map_err(|why| SecretError::KeyVault(format!("{secret_uri}: {why}")))?;
    Ok(key)
}

/// Tries each credential in order and returns the first token; the error lists
/// why each one failed.
#[derive(Debug)]
pub struct CredentialChain {
    links: Vec<(&'static str, Arc<dyn TokenCredential>)>,
}

impl CredentialChain {
    pub fn new(links: Vec<(&'static str, Arc<dyn TokenCredential>)>) -> Arc<Self> {
        Arc::new(CredentialChain { links })
    }

    /// Workload identity (when `AZURE_FEDERATED_TOKEN_FILE` is set), managed
    /// identity, then the Azure CLI's login.
    pub fn from_environment() -> Result<Arc<Self>, SecretError> {
        let mut links: Vec<(&'static str, Arc<dyn TokenCredential>)> = Vec::new();
        if std::env::var_os("AZURE_FEDERATED_TOKEN_FILE").is_some()
            && let Ok(c) = WorkloadIdentityCredential::new(None)
        {
            links.push(("workload identity", c));
        }
        if let Ok(c) = ManagedIdentityCredential::new(None) {
            links.push(("managed identity", c));
        }
        if let Ok(c) = AzureCliCredential::new(None) {
            links.push(("Azure CLI", c));
        }
        if links.is_empty() {
            return Err(SecretError::KeyVault(
                "no Azure credential is available; use workload identity, a managed identity or az login"
                    .into(),
            ));
        }
        Ok(Self::new(links))
    }
}

#[async_trait::async_trait]
impl TokenCredential for CredentialChain {
    async fn get_token(
        &self,
        scopes: &[&str],
        options: Option<TokenRequestOptions<'_>>,
    ) -> azure_core::Result<AccessToken> {
        let mut failures = Vec::new();
        for (name, credential) in &self.links {
            match credential.get_token(scopes, options.clone()).await {
                Ok(token) => return Ok(token),
                Err(e) => failures.push(format!("{name}: {}", e.kind())),
            }
        }
        Err(azure_core::Error::with_message(
            azure_core::error::ErrorKind::Credential,
            format!("no Azure credential succeeded ({})", failures.join("; ")),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_uris() {
        assert_eq!(
            parse_secret_uri("https://kv.vault.azure.net/secrets/app-key").unwrap(),
            ("https://kv.vault.azure.net/".into(), "app-key".into(), None)
        );
        assert_eq!(
            parse_secret_uri("https://kv.vault.azure.net/secrets/app-key/abc123")
                .unwrap()
                .2
                .as_deref(),
            Some("abc123")
        );
        for bad in [
            "http://kv.vault.azure.net/secrets/a",
            "https://kv.vault.azure.net/keys/a",
            "https://kv.vault.azure.net/secrets/",
            "https://kv.vault.azure.net/secrets/a/b/c",
        ] {
            assert!(parse_secret_uri(bad).is_err(), "{bad}");
        }
    }
}
