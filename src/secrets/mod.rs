//! Secret material and where it comes from: the GitHub App private key (Azure Key
//! Vault or a PEM file), dispatch HMAC secrets, installation tokens.
//!
//! Invariants:
//! - a [`Secret`] never prints: `Debug` and `Display` show `Secret(<redacted>)`,
//!   and its bytes are overwritten when it is dropped;
//! - the App key is read only from Key Vault or from a file that neither group nor
//!   others can read; never from an environment variable's contents or argv;
//! - error messages name the source (file path, vault URI) and never the value;
//! - a dispatch secret shorter than [`MIN_DISPATCH_SECRET_BYTES`] is never
//!   used: a short HMAC key falls to guessing, whatever the MAC.

mod env; // secrets moved out of the daemon's environment at start-up
mod keyvault;

pub use env::{capture_env, env_secret};
pub use keyvault::{CredentialChain, fetch_key_vault_secret, parse_secret_uri};

use std::fmt;
use std::path::Path;

/// Bytes that must not leak: redacted in `Debug`/`Display`, zeroed on drop.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Secret(bytes.into())
    }

    /// The raw bytes. Call sites should be few and obvious.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    /// The value as UTF-8 (tokens, PEM text); `None` when it is not UTF-8.
    pub fn expose_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value's length in bytes (says nothing else about it).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The SHA-256 of the value: for telling two secrets apart (a value
    /// reused across sources) without comparing or printing the values.
    pub fn fingerprint(&self) -> [u8; 32] {
        use sha2::Digest;
        sha2::Sha256::digest(&self.0).into()
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret(s.into_bytes())
    }
}

/// Tokens in GitHub's JSON answers go straight into a `Secret`, so no plain
/// `String` copy of them is left behind in a derived `Debug`.
impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Secret::from)
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Why a secret could not be loaded. Messages never contain secret material.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("{0}")]
    File(String),
    #[error("{0}")]
    KeyVault(String),
    #[error("{0}")]
    Environment(String),
}

/// The fewest bytes a dispatch secret may have: 32 random bytes (256 bits)
/// cannot be guessed; a few characters fall to a few thousand tries.
pub const MIN_DISPATCH_SECRET_BYTES: usize = 32;

/// Why the dispatch secret in environment variable `var` is too short to
/// use, or `None` when it is long enough. Never quotes the value.
pub fn short_dispatch_secret(var: &str, secret: &Secret) -> Option<String> {
    (secret.len() < MIN_DISPATCH_SECRET_BYTES).then(|| {
        format!(
            "environment variable {var} holds a dispatch secret of {} bytes; it needs at least {MIN_DISPATCH_SECRET_BYTES} so it cannot be guessed: make one with `openssl rand -hex 32` and set it here and as the source repository's TEAMMEM_WEBHOOK_SECRET",
            secret.len()
        )
    })
}

/// Reads the dispatch HMAC secret from the environment variable a source names.
/// The variable's *name* is in the config; its value never is. A value
/// shorter than [`MIN_DISPATCH_SECRET_BYTES`] is refused.
pub fn webhook_secret_from_env(var: &str) -> Result<Secret, SecretError> {
    match env_secret(var) {
        Some(v) if !v.is_empty() => match short_dispatch_secret(var, &v) {
            None => Ok(v),
            Some(why) => Err(SecretError::Environment(why)),
        },
        _ => Err(SecretError::Environment(format!(
            "environment variable {var} is not set or empty; set it to the source's dispatch secret"
        ))),
    }
}

/// Reads a PEM key file, refusing one that group or others may read.
pub fn read_key_file(path: &Path) -> Result<Secret, SecretError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| {
        SecretError::File(format!(
            "{}: cannot read the GitHub App key file: {e}",
            path.display()
        ))
    })?;
    if !meta.is_file() {
        return Err(SecretError::File(format!(
            "{}: not a regular file; point github.private_key.file at the App's PEM key",
            path.display()
        )));
    }
    let mode = meta.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(SecretError::File(format!(
            "{}: readable by group or others (mode {:o}); run chmod 600 on it",
            path.display(),
            mode & 0o777
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| {
        SecretError::File(format!(
            "{}: cannot read the GitHub App key file: {e}",
            path.display()
        ))
    })?;
    let key = Secret::new(bytes);
    check_pem(&key).map_err(|why| SecretError::File(format!("{}: {why}", path.display())))?;
    Ok(key)
}

/// A light shape check so a wrong file fails at start-up, not at the first call.
pub(crate) fn check_pem(key: &Secret) -> Result<(), String> {
    let Some(text) = key.expose_str() else {
        return Err("not a PEM file (not UTF-8); give the App's private key in PEM form".into());
    };
    if text.contains("-----BEGIN RSA PRIVATE KEY-----")
        || text.contains("-----BEGIN PRIVATE KEY-----")
    {
        Ok(())
    } else {
        Err("no PEM private key block found; give the App's private key in PEM form".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = Secret::from("hunter2".to_string());
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        assert_eq!(format!("{s}"), "<redacted>");
        assert_eq!(s.expose_str(), Some("hunter2"));
    }

    #[test]
    fn a_token_read_from_json_never_prints() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Answer {
            token: Secret,
        }
        let answer: Answer = serde_json::from_str(r#"{"token":"ghs_abc123"}"#).unwrap();
        assert_eq!(answer.token.expose_str(), Some("ghs_abc123"));
        assert!(!format!("{answer:?}").contains("ghs_abc123"));
    }

    #[test]
    fn short_dispatch_secrets_are_refused_without_quoting_them() {
        let short = Secret::from("hunter2-but-longer-31-bytes-xyz".to_string());
        assert_eq!(short.len(), 31);
        let why = short_dispatch_secret("TEAMMEM_SECRET_X", &short).unwrap();
        assert!(
            why.contains("TEAMMEM_SECRET_X") && why.contains("31 bytes"),
            "{why}"
        );
        assert!(why.contains("openssl rand -hex 32"), "{why}");
        assert!(!why.contains("hunter2"), "{why}");
        let long = Secret::from("a".repeat(32));
        assert_eq!(short_dispatch_secret("X", &long), None);
        assert_ne!(long.fingerprint(), short.fingerprint());
        assert_eq!(
            long.fingerprint(),
            Secret::from("a".repeat(32)).fingerprint()
        );
    }

    #[test]
    fn key_file_with_loose_mode_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.pem");
        std::fs::write(
            &path,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        for mode in [0o640, 0o604, 0o644, 0o660] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = read_key_file(&path).unwrap_err().to_string();
            assert!(err.contains("chmod 600"), "{err}");
            assert!(!err.contains("AAAA"));
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(read_key_file(&path).is_ok());
        std::fs::write(&path, "not a key").unwrap();
        assert!(read_key_file(&path).is_err());
    }
}
