//! Maintainer API tokens: created once, shown once, stored only as SHA-256 hashes.
//!
//! A token is `tmm_` followed by 43 characters of URL-safe base64 (32 random
//! bytes). The database keeps its hash, its name and the source repositories it
//! is limited to (none = every source). This module is the only one with SQL
//! about `api_tokens`.
//!
//! Invariant: a stored scope that does not read as a list of repositories
//! grants nothing (the token authenticates no one, a warning names it, and
//! `tokens list` shows it as unreadable); it is never taken for "every
//! source".

use std::fmt;

use crate::db::{Pool, on_pool};
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

const PREFIX: &str = "tmm_";

/// A freshly created token. Debug and Display never show it; `expose` does.
pub struct NewToken(String);

impl NewToken {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for NewToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NewToken(***)")
    }
}

/// Who a valid token belongs to, and what it may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    /// Source repositories this principal may see and steer; empty = all.
    pub repositories: Vec<String>,
}

impl Principal {
    pub fn may_access(&self, repository: &str) -> bool {
        self.repositories.is_empty()
            || self
                .repositories
                .iter()
                .any(|r| r.eq_ignore_ascii_case(repository))
    }
}

/// A token as `tokens list` shows it: never the token itself.
#[derive(Debug, Clone)]
pub struct TokenInfo {
    pub name: String,
    /// The sources it is limited to (empty = all); `None` when the stored
    /// scope does not read as a list, and the token grants nothing.
    pub repositories: Option<Vec<String>>,
    pub created_at: String,
    pub revoked: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("token name {0:?} is already in use; pick another name or revoke the old token first")]
    NameTaken(String),
    #[error("token name {0:?} is not valid; use 1 to 64 letters, digits, '-', '_' or '.'")]
    BadName(String),
    #[error("no active token named {0:?}; `teammem tokens list` shows the tokens")]
    UnknownName(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

/// A stored scope: a JSON list of repository names; `None` for anything
/// else (never "every source", which is the empty list).
fn read_scope(stored: &str) -> Option<Vec<String>> {
    serde_json::from_str(stored).ok()
}

/// The principal of an active token's row, or `None` with a warning naming
/// the token when its scope is unreadable: such a token grants nothing.
fn principal(name: String, stored_scope: &str) -> Option<Principal> {
    match read_scope(stored_scope) {
        Some(repositories) => Some(Principal { name, repositories }),
        None => {
            tracing::warn!(
                token = %name,
                "API token {name:?} has a stored scope that is not a list of repositories; it is refused until revoked and created again (`teammem tokens revoke --name {name}`)"
            );
            None
        }
    }
}

fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// Now as RFC 3339 UTC to the second, the form `created_at` and `revoked_at`
/// hold.
fn now_utc() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Creates a token limited to `repositories` (empty = all sources).
pub async fn create(
    pool: &Pool,
    name: &str,
    repositories: &[String],
) -> Result<NewToken, TokenError> {
    if !valid_name(name) {
        return Err(TokenError::BadName(name.to_string()));
    }
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let token = format!(
        "{PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let repos = serde_json::to_string(repositories).expect("strings serialize");
    let result = on_pool!(pool, |pool| {
        sqlx::query(
            "INSERT INTO api_tokens (name, token_sha256, repositories, created_at) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(name)
        .bind(hash(&token))
        .bind(&repos)
        .bind(now_utc())
        .execute(pool)
        .await
        .map(|_| ())
    });
    match result {
        Ok(_) => Ok(NewToken(token)),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            Err(TokenError::NameTaken(name.to_string()))
        }
        Err(e) => Err(e.into()),
    }
}

/// The principal of an active token, or `None` for anything else.
pub async fn verify(pool: &Pool, presented: &str) -> Result<Option<Principal>, sqlx::Error> {
    if !presented.starts_with(PREFIX) || presented.len() > 128 {
        return Ok(None);
    }
    // Looking up by hash compares hashes, not the secret, so timing reveals nothing
    // useful about the token.
    let row: Option<(String, String)> = on_pool!(pool, |pool| {
        sqlx::query_as(
            "SELECT name, repositories FROM api_tokens WHERE token_sha256 = $1 AND revoked_at IS NULL",
        )
        .bind(hash(presented))
        .fetch_optional(pool)
        .await?
    });
    Ok(row.and_then(|(name, repos)| principal(name, &repos)))
}

/// The principal of the active token called `name` (sessions name their token,
/// so revoking it ends them).
pub async fn active_principal(pool: &Pool, name: &str) -> Result<Option<Principal>, sqlx::Error> {
    let row: Option<(String, String)> = on_pool!(pool, |pool| {
        sqlx::query_as(
            "SELECT name, repositories FROM api_tokens WHERE name = $1 AND revoked_at IS NULL",
        )
        .bind(name)
        .fetch_optional(pool)
        .await?
    });
    Ok(row.and_then(|(name, repos)| principal(name, &repos)))
}

pub async fn list(pool: &Pool) -> Result<Vec<TokenInfo>, sqlx::Error> {
    let rows: Vec<(String, String, String, Option<String>)> = on_pool!(pool, |pool| {
        sqlx::query_as(
            "SELECT name, repositories, created_at, revoked_at FROM api_tokens ORDER BY name",
        )
        .fetch_all(pool)
        .await?
    });
    Ok(rows
        .into_iter()
        .map(|(name, repos, created_at, revoked_at)| TokenInfo {
            name,
            repositories: read_scope(&repos),
            created_at,
            revoked: revoked_at.is_some(),
        })
        .collect())
}

pub async fn revoke(pool: &Pool, name: &str) -> Result<(), TokenError> {
    let revoked = on_pool!(pool, |pool| {
        sqlx::query("UPDATE api_tokens SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL")
            .bind(name)
            .bind(now_utc())
            .execute(pool)
            .await?
            .rows_affected()
    });
    if revoked == 1 {
        Ok(())
    } else {
        Err(TokenError::UnknownName(name.to_string()))
    }
}

/// The token of an `Authorization: Bearer <token>` header value: the scheme
/// is matched without regard to case (RFC 9110 §11.1), spaces around the
/// token are dropped, and an empty token is none. The one parser every route
/// and the dispatch front door use.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_schemes_match_in_any_case_and_empty_tokens_are_none() {
        for header in ["Bearer abc", "bearer abc", "BEARER abc", "  Bearer   abc  "] {
            assert_eq!(bearer_token(header), Some("abc"), "{header:?}");
        }
        for header in [
            "",
            "Bearer",
            "Bearer ",
            "Bearer    ",
            "Basic abc",
            "Bearerabc",
            "Token abc",
        ] {
            assert_eq!(bearer_token(header), None, "{header:?}");
        }
    }

    #[test]
    fn principal_scope() {
        let all = Principal {
            name: "a".into(),
            repositories: vec![],
        };
        assert!(all.may_access("octo/app"));
        let one = Principal {
            name: "b".into(),
            repositories: vec!["octo/app".into()],
        };
        assert!(one.may_access("Octo/App"));
        assert!(!one.may_access("octo/other"));
    }

    #[test]
    fn an_unreadable_scope_grants_nothing() {
        assert_eq!(read_scope("[]"), Some(vec![]));
        assert_eq!(read_scope(r#"["octo/app"]"#), Some(vec!["octo/app".into()]));
        for stored in ["", "octo/app", "null", "{}", r#"["octo/app""#, "[1]"] {
            assert_eq!(read_scope(stored), None, "{stored:?}");
            assert_eq!(principal("t".into(), stored), None, "{stored:?}");
        }
    }

    #[test]
    fn an_unreadable_scope_is_logged_naming_the_token() {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Log(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Log {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let log = Log::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            assert_eq!(principal("ci-bot".into(), "octo/app"), None);
        });
        let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        assert!(text.contains("WARN"), "{text}");
        assert!(
            text.contains(r#"API token "ci-bot" has a stored scope"#),
            "{text}"
        );
    }

    #[test]
    fn names() {
        assert!(valid_name("ci-bot_1.2"));
        assert!(!valid_name(""));
        assert!(!valid_name("has space"));
        assert!(!valid_name(&"x".repeat(65)));
    }
}
