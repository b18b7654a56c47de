//! `[limits]`: what one principal (an API token, or a GitHub token's login)
//! may use of the daemon at once, and the `[server]` keys that keep capacity
//! for dispatches and health checks away from `/mcp`.
//!
//! Invariant: every limit is a positive number within a stated range, and
//! `server.reserved_connections` leaves `/mcp` at least one connection, so
//! no configuration can switch a limit off by accident or lock `/mcp` out.

use std::time::Duration;

use super::section::Section;

/// `[limits]`: per-principal limits on the authenticated routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// `/mcp` requests and event streams one principal may hold open at once.
    pub mcp_streams_per_principal: usize,
    /// Handshake-era `/mcp` sessions kept per principal; opening one more
    /// ends the principal's oldest.
    pub mcp_sessions_per_principal: usize,
    /// The sustained rate of authenticated requests per principal (a token
    /// bucket refilled this many times a second) ...
    pub requests_per_second: u32,
    /// ... holding at most this many, so a burst of this size passes at once.
    pub request_burst: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            mcp_streams_per_principal: 8,
            mcp_sessions_per_principal: 32,
            requests_per_second: 20,
            request_burst: 40,
        }
    }
}

pub(super) fn read_limits(t: &toml::Table, errors: &mut Vec<String>) -> Limits {
    let mut s = Section::new("limits", t);
    let d = Limits::default();
    let limits = Limits {
        mcp_streams_per_principal: s.int(
            "mcp_streams_per_principal",
            d.mcp_streams_per_principal as i64,
            (1, 1024),
            errors,
        ) as usize,
        mcp_sessions_per_principal: s.int(
            "mcp_sessions_per_principal",
            d.mcp_sessions_per_principal as i64,
            (1, 10_000),
            errors,
        ) as usize,
        requests_per_second: s.int(
            "requests_per_second",
            d.requests_per_second as i64,
            (1, 100_000),
            errors,
        ) as u32,
        request_burst: s.int(
            "request_burst",
            d.request_burst as i64,
            (1, 1_000_000),
            errors,
        ) as u32,
    };
    s.finish(errors);
    limits
}

/// The connections `/mcp` may never take, by default: an eighth of
/// `max_connections`, at least one and at most 64, and always fewer than
/// `max_connections`.
pub(super) fn default_reserved_connections(max_connections: usize) -> usize {
    (max_connections / 8).clamp(1, 64).min(max_connections - 1)
}

/// `server.reserved_connections`: checked against `max_connections` (read
/// before it), so that `/mcp` keeps at least one connection.
pub(super) fn read_reserved_connections(
    s: &mut Section<'_>,
    max_connections: usize,
    errors: &mut Vec<String>,
) -> usize {
    let default = default_reserved_connections(max_connections);
    let reserved = s.int("reserved_connections", default as i64, (0, 65_535), errors) as usize;
    if reserved >= max_connections {
        errors.push(format!(
            "server.reserved_connections: {reserved} leaves no connection for /mcp; it must be less than server.max_connections ({max_connections})"
        ));
        return default;
    }
    reserved
}

/// `server.mcp_stream_lifetime_seconds`: the longest an `/mcp` request or
/// event stream lasts before the server ends it (clients reconnect).
pub(super) fn read_stream_lifetime(s: &mut Section<'_>, errors: &mut Vec<String>) -> Duration {
    Duration::from_secs(s.int("mcp_stream_lifetime_seconds", 600, (1, 86_400), errors) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_reserve_leaves_mcp_at_least_one_connection() {
        assert_eq!(default_reserved_connections(1), 0);
        assert_eq!(default_reserved_connections(2), 1);
        assert_eq!(default_reserved_connections(16), 2);
        assert_eq!(default_reserved_connections(1024), 64);
        assert_eq!(default_reserved_connections(65_536), 64);
    }
}
