//! `[database]`: where the queue and everything the nodes share live, and
//! `server.node_id`, the name a node goes by among several.
//!
//! Invariants: a password is never part of the configuration: a `url` that
//! holds one (in its user information or as a `password` parameter) is
//! refused, and the password comes only from the environment variable
//! `password_env` names; no message built here quotes a URL's password. A
//! database on another machine is reached only over TLS that verifies the
//! server (`sslmode=verify-full`, or `verify-ca` with a named
//! `sslrootcert`): sqlx's default `prefer` and `allow`, `disable` and
//! `require` (encrypted, but to anyone who answers) are refused, so an
//! on-path attacker can neither read the login nor relay it. This machine's
//! loopback addresses and Unix socket directories need no TLS.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgSslMode};

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
    let options = PgConnectOptions::from_str(url)
        .map_err(|e| format!("is not a PostgreSQL connection URL sqlx can read: {e}"))?;
    check_transport(url, query, &options)
}

/// A server on another machine must be verified over TLS. The host is the
/// one sqlx will connect to (the URL's, its `host`/`hostaddr` parameter, or
/// `PGHOST` when the URL names none); the mode is the one sqlx will use, and
/// the URL must name it (`PGSSLMODE` in the environment does not count: the
/// file alone shows what the daemon does).
fn check_transport(url: &str, query: &str, options: &PgConnectOptions) -> Result<(), String> {
    let host = match options.get_socket() {
        Some(_) => return Ok(()),
        None => options.get_host(),
    };
    if is_local_host(host) {
        return Ok(());
    }
    let named = |names: &[&str]| {
        query.split('&').any(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            names.contains(&key) && !value.is_empty()
        })
    };
    let mode = named(&["sslmode", "ssl-mode"]).then(|| options.get_ssl_mode());
    let root_cert = named(&["sslrootcert", "ssl-root-cert", "ssl-ca"]);
    let host = host.chars().take(80).collect::<String>();
    let with_ca = "and sslrootcert=/path/to/ca.pem when the server's certificate is not signed by a public CA";
    match mode {
        Some(PgSslMode::VerifyFull) => Ok(()),
        Some(PgSslMode::VerifyCa) if root_cert => Ok(()),
        Some(PgSslMode::VerifyCa) => Err(format!(
            "sslmode=verify-ca to {host} needs the root certificate it verifies against: add sslrootcert=/path/to/ca.pem, or use sslmode=verify-full"
        )),
        None => Err(format!(
            "{host} is not this machine and the URL names no sslmode, so the connection may fall back to plain text that anyone on the path can read or relay; add sslmode=verify-full to the URL (like {url}{}sslmode=verify-full), {with_ca}",
            if url.contains('?') { "&" } else { "?" }
        )),
        Some(other) => Err(format!(
            "sslmode={} to {host} does not verify the server, so anyone on the path can read or relay the connection; use sslmode=verify-full instead, {with_ca}",
            match other {
                PgSslMode::Disable => "disable",
                PgSslMode::Allow => "allow",
                PgSslMode::Prefer => "prefer",
                _ => "require",
            }
        )),
    }
}

/// Whether a connection with these options stays on this machine and its
/// URL names no sslmode: then teammem connects without TLS (`sslmode=disable`)
/// rather than sqlx's `prefer`. TLS protects nothing on loopback, and its
/// negotiation with a server that is restarting fails as a protocol error
/// instead of reading as "unavailable".
pub fn plain_on_this_machine(url: &str, options: &PgConnectOptions) -> bool {
    let local = options.get_socket().is_some() || is_local_host(options.get_host());
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or_default();
    let names_mode = query.split('&').any(|pair| {
        let key = pair.split('=').next().unwrap_or_default();
        key == "sslmode" || key == "ssl-mode"
    });
    local && !names_mode
}

/// This machine: a Unix socket directory, `localhost`, 127.0.0.0/8 or ::1.
fn is_local_host(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.starts_with('/')
        || bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
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
            "postgres://teammem@db.internal:5432/teammem?sslmode=verify-full",
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
    fn a_remote_server_must_be_verified_over_tls() {
        for url in [
            "postgres://teammem@db.internal/teammem?sslmode=verify-full",
            "postgres://teammem@10.0.0.5:5432/teammem?sslrootcert=/etc/ca.pem&sslmode=verify-ca",
            "postgres://teammem@[2001:db8::1]/teammem?ssl-mode=verify-full",
            // This machine: loopback and socket directories need no TLS.
            "postgres://teammem@127.0.0.1:5432/teammem",
            "postgres://teammem@127.3.4.5/teammem?sslmode=disable",
            "postgres://teammem@[::1]:5432/teammem",
            "postgres://teammem@localhost/teammem?sslmode=prefer",
            "postgres:///teammem?host=/run/postgresql",
            "postgres://%2Frun%2Fpostgresql/teammem",
        ] {
            if let Err(e) = check_url(url) {
                panic!("{url}: {e}");
            }
        }
        for (url, expected) in [
            ("postgres://teammem@db.internal/teammem", "names no sslmode"),
            (
                "postgres://teammem@db.internal/teammem?sslmode=prefer",
                "sslmode=prefer to db.internal does not verify",
            ),
            (
                "postgres://teammem@db.internal/teammem?sslmode=allow",
                "sslmode=allow",
            ),
            (
                "postgres://teammem@db.internal/teammem?sslmode=disable",
                "sslmode=disable",
            ),
            (
                "postgres://teammem@db.internal/teammem?sslmode=require",
                "sslmode=require",
            ),
            (
                "postgres://teammem@10.0.0.5/teammem?sslmode=verify-ca",
                "needs the root certificate",
            ),
            (
                "postgres://teammem@db.internal/teammem?sslmode=verify-ca&sslrootcert=",
                "needs the root certificate",
            ),
            // The host sqlx connects to is the parameter's, not the URL's.
            (
                "postgres://teammem@localhost/teammem?host=db.internal",
                "db.internal is not this machine",
            ),
            (
                "postgres://teammem@localhost/teammem?hostaddr=10.0.0.5",
                "10.0.0.5 is not this machine",
            ),
            (
                "postgres://teammem@127.0.0.1.example.org/teammem",
                "names no sslmode",
            ),
            (
                "postgres://teammem@[::2]/teammem?sslmode=prefer",
                "does not verify",
            ),
        ] {
            let problem = check_url(url).unwrap_err();
            assert!(problem.contains(expected), "{url}: {problem}");
            if !expected.contains("root certificate") {
                assert!(
                    problem.contains("sslmode=verify-full"),
                    "says how to fix it: {problem}"
                );
            }
        }
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
