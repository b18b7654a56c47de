//! GitHub App authentication: the App JWT and per-repository installation tokens.
//!
//! Invariants:
//! - the JWT is RS256 with `iat` 60 s in the past and `exp` 9 minutes ahead
//!   (GitHub allows at most 10), `iss` = the App id;
//! - an installation token is minted for exactly one repository and one
//!   [`Permissions`] set, and cached under (repository, permission set) until
//!   5 minutes before it expires: a write token never serves a read call nor the
//!   other way round;
//! - tokens live in memory only, as [`Secret`]s; they are never logged.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};

use crate::secrets::Secret;

/// Tokens are dropped from the cache this long before GitHub expires them.
pub const TOKEN_EARLY_EXPIRY: Duration = Duration::from_secs(5 * 60);

/// `read` or `write`, as GitHub spells installation permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    Read,
    Write,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
        }
    }
}

/// The permission set of one installation token (e.g. `contents: read`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Permissions(BTreeMap<&'static str, Access>);

impl Permissions {
    pub fn of(pairs: &[(&'static str, Access)]) -> Self {
        Permissions(pairs.iter().copied().collect())
    }
    /// `GET /repos/{o}/{r}`.
    pub fn metadata_read() -> Self {
        Self::of(&[("metadata", Access::Read)])
    }
    /// Workflow runs.
    pub fn actions_read() -> Self {
        Self::of(&[("actions", Access::Read)])
    }
    /// Compare, commits, file contents.
    pub fn contents_read() -> Self {
        Self::of(&[("contents", Access::Read)])
    }
    /// Pull requests.
    pub fn pull_requests_read() -> Self {
        Self::of(&[("pull_requests", Access::Read)])
    }
    /// Pushing to the wiki.
    pub fn contents_write() -> Self {
        Self::of(&[("contents", Access::Write)])
    }

    /// The `permissions` object of the token request.
    pub fn to_json(&self) -> serde_json::Value {
        self.0
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(v.as_str())))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

impl fmt::Display for Permissions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| format!("{k}:{}", v.as_str()))
            .collect();
        f.write_str(&parts.join(","))
    }
}

#[derive(Serialize)]
struct AppClaims {
    iat: u64,
    exp: u64,
    iss: String,
}

/// Signs App JWTs with the App's private key.
pub struct AppSigner {
    app_id: u64,
    key: EncodingKey,
}

impl fmt::Debug for AppSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppSigner")
            .field("app_id", &self.app_id)
            .field("key", &"<redacted>")
            .finish()
    }
}

impl AppSigner {
    pub fn new(app_id: u64, pem: &Secret) -> Result<Self, String> {
        let key = EncodingKey::from_rsa_pem(pem.expose()).map_err(|e| {
            format!("the GitHub App private key is not a usable RSA PEM key ({e}); download a new key from the App's settings")
        })?;
        Ok(AppSigner { app_id, key })
    }

    pub fn app_id(&self) -> u64 {
        self.app_id
    }

    /// An App JWT valid from 60 s before `now` until 9 minutes after.
    pub fn jwt(&self, now: SystemTime) -> Secret {
        let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let claims = AppClaims {
            iat: now.saturating_sub(60),
            exp: now + 9 * 60,
            iss: self.app_id.to_string(),
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &self.key)
            .expect("RS256 signing with a parsed key does not fail");
        Secret::from(token)
    }
}

/// The answer of `POST /app/installations/{id}/access_tokens` (only what we use).
#[derive(Deserialize)]
pub(crate) struct TokenAnswer {
    pub token: Secret,
    pub expires_at: String,
}

#[derive(Clone)]
pub(crate) struct CachedToken {
    pub token: Secret,
    pub usable_until: SystemTime,
}

/// Installation tokens by (repository, permissions); installation ids by repository.
#[derive(Default)]
pub(crate) struct TokenCache {
    pub tokens: HashMap<(String, Permissions), CachedToken>,
    pub installations: HashMap<String, u64>,
}

impl TokenCache {
    pub fn get(&self, repository: &str, perms: &Permissions, now: SystemTime) -> Option<Secret> {
        let key = (repository.to_ascii_lowercase(), perms.clone());
        self.tokens
            .get(&key)
            .filter(|t| now < t.usable_until)
            .map(|t| t.token.clone())
    }

    pub fn put(&mut self, repository: &str, perms: &Permissions, token: CachedToken) {
        let now = SystemTime::now();
        self.tokens.retain(|_, t| t.usable_until > now);
        self.tokens
            .insert((repository.to_ascii_lowercase(), perms.clone()), token);
    }

    pub fn forget(&mut self, repository: &str, perms: &Permissions) {
        self.tokens
            .remove(&(repository.to_ascii_lowercase(), perms.clone()));
    }
}

/// Parses GitHub's `expires_at` (RFC 3339) into the time the cache stops using it.
pub(crate) fn usable_until(expires_at: &str) -> Option<SystemTime> {
    let t = chrono::DateTime::parse_from_rfc3339(expires_at).ok()?;
    let secs = u64::try_from(t.timestamp()).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs) - TOKEN_EARLY_EXPIRY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_sets_are_distinct_keys() {
        let mut cache = TokenCache::default();
        let now = SystemTime::now();
        cache.put(
            "Octo/App",
            &Permissions::contents_write(),
            CachedToken {
                token: Secret::from("w".to_string()),
                usable_until: now + Duration::from_secs(60),
            },
        );
        assert!(
            cache
                .get("octo/app", &Permissions::contents_read(), now)
                .is_none()
        );
        assert!(
            cache
                .get("octo/other", &Permissions::contents_write(), now)
                .is_none()
        );
        assert_eq!(
            cache
                .get("octo/app", &Permissions::contents_write(), now)
                .unwrap()
                .expose_str(),
            Some("w")
        );
        assert!(
            cache
                .get(
                    "octo/app",
                    &Permissions::contents_write(),
                    now + Duration::from_secs(61)
                )
                .is_none()
        );
    }

    #[test]
    fn expiry_is_brought_forward() {
        let t = usable_until("2030-01-01T01:00:00Z").unwrap();
        let exact = UNIX_EPOCH + Duration::from_secs(1_893_459_600);
        assert_eq!(t, exact - TOKEN_EARLY_EXPIRY);
        assert!(usable_until("soon").is_none());
    }
}
