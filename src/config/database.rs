//! `[database]`: where the queue and everything the nodes share live, and
//! `server.node_id`, the name a node goes by among several.
//!
//! Invariants: a password is never part of the configuration: a `url` that
//! holds one (in its user information or as a `password` parameter) is
//! refused, and the password comes only from the environment variable
//! `password_env` names; no message built here quotes a URL's password.

use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;

use super::rules::is_env_name;
use super::section::Section;
use super::{Database, Postgres};

/// Pool size when `[database] max_connections` is not given.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;

pub(super) fn read_database(t: Option<&toml::Table>, errors: &mut Vec<String>) -> Database {
    let Some(t) = t else {
        return Database::Sqlite;
    };
    let mut s = Section::new("database", t);
    let url = s.required_string("url", errors);
    let password_env = s.string("password_env", errors);
    let max_connections = s.int(
        "max_connections",
        i64::from(DEFAULT_MAX_CONNECTIONS),
        (1, 1000),
        errors,
    ) as u32;
    s.finish(errors);
    if let Some(name) = &password_env
        && !is_env_name(name)
    {
        errors.push(format!(
            "database.password_env: expected the NAME of an environment variable, got {:?}",
            name.chars().take(64).collect::<String>()
        ));
    }
    let Some(url) = url else {
        return Database::Sqlite;
    };
    match check_url(&url) {
        Ok(()) => Database::Postgres(Postgres {
            url,
            password_env,
            max_connections,
        }),
        Err(problem) => {
            errors.push(format!("database.url: {problem}"));
            Database::Sqlite
        }
    }
}

/// A PostgreSQL connection URL without a password, that sqlx can read.
fn check_url(url: &str) -> Result<(), String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(
            "expected a postgres:// URL like postgres://teammem@db.internal:5432/teammem".into(),
        );
    };
    if scheme != "postgres" && scheme != "postgresql" {
        return Err(format!(
            "expected a postgres:// URL, got scheme {:?}; teammem's other database is SQLite, used when [database] is left out",
            scheme.chars().take(32).collect::<String>()
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let userinfo = authority.rsplit_once('@').map(|(user, _)| user);
    let query = rest.split_once('?').map(|(_, q)| q).unwrap_or_default();
    let password_parameter = query.split('&').any(|pair| {
        pair.split('=')
            .next()
            .is_some_and(|k| k.eq_ignore_ascii_case("password"))
    });
    if userinfo.is_some_and(|user| user.contains(':')) || password_parameter {
        return Err(
            "holds a password; remove it from the URL and name the environment variable holding it in database.password_env"
                .into(),
        );
    }
    PgConnectOptions::from_str(url)
        .map(|_| ())
        .map_err(|e| format!("is not a PostgreSQL connection URL sqlx can read: {e}"))
}

/// `server.node_id`: 1 to 64 of `A-Z a-z 0-9 . _ -`; the host name when not given.
pub(super) fn read_node_id(s: &mut Section<'_>, errors: &mut Vec<String>) -> String {
    match s.string("node_id", errors) {
        Some(id) if is_node_id(&id) => id,
        Some(id) => {
            errors.push(format!(
                "server.node_id: expected 1 to 64 letters, digits, '.', '_' or '-', got {:?}",
                id.chars().take(80).collect::<String>()
            ));
            String::new()
        }
        None => host_name(),
    }
}

fn is_node_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// This machine's host name, cut to a valid node id (`node` when it has none).
fn host_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let id: String = name
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(64)
        .collect();
    if id.is_empty() { "node".into() } else { id }
}

impl Postgres {
    /// Where the database is, for messages: `host:port/database` (a socket
    /// directory counts as the host). Never the user or a password.
    pub fn location(&self) -> String {
        match PgConnectOptions::from_str(&self.url) {
            Ok(o) => format!(
                "{}:{}/{}",
                o.get_host(),
                o.get_port(),
                o.get_database().unwrap_or_default()
            ),
            Err(_) => "an unreadable database.url".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_a_password_are_refused_without_quoting_it() {
        for url in [
            "postgres://teammem:hunter2@db/teammem",
            "postgresql://teammem:hunter2@db:5432/teammem",
            "postgres://db/teammem?sslmode=require&password=hunter2",
            "postgres://db/teammem?PASSWORD=hunter2",
        ] {
            let problem = check_url(url).unwrap_err();
            assert!(problem.contains("password_env"), "{url}: {problem}");
            assert!(!problem.contains("hunter2"), "{problem}");
        }
        for url in [
            "postgres://teammem@db.internal:5432/teammem",
            "postgres:///teammem?host=/run/postgresql",
            "postgresql://db/teammem?sslmode=verify-full",
        ] {
            check_url(url).unwrap();
        }
        assert!(check_url("mysql://db/x").unwrap_err().contains("scheme"));
        assert!(
            check_url("db.internal")
                .unwrap_err()
                .contains("postgres://")
        );
    }

    #[test]
    fn node_ids_are_short_names() {
        assert!(is_node_id("node-a"));
        assert!(is_node_id("ip-10-0-0-1.eu-west-1.compute.internal"));
        assert!(!is_node_id(""));
        assert!(!is_node_id("node a"));
        assert!(!is_node_id(&"n".repeat(65)));
        assert!(is_node_id(&host_name()));
    }

    #[test]
    fn the_location_names_host_port_and_database_only() {
        let pg = Postgres {
            url: "postgres://teammem@db.internal:6543/memory".into(),
            password_env: None,
            max_connections: 4,
        };
        assert_eq!(pg.location(), "db.internal:6543/memory");
    }
}
