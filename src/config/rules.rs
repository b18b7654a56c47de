//! Value rules shared by the readers: repository names, URLs, loopback
//! hosts, environment variable names.
//!
//! Invariant: a URL teammem sends secrets to is never plain `http` to another
//! machine.

/// Whether `host` (a `Host` header value or a URL's authority, port allowed)
/// names this machine's loopback interface: `127.0.0.1`, `[::1]` or
/// `localhost`.
pub fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((name, port)) if port.is_empty() || is_port(port) => name,
            _ => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return false,
            None => host,
        }
    };
    name == "127.0.0.1" || name == "::1" || name.eq_ignore_ascii_case("localhost")
}

fn is_port(text: &str) -> bool {
    text.strip_prefix(':')
        .unwrap_or(text)
        .parse::<u16>()
        .is_ok()
}

/// Whether an http(s) URL's host is a loopback host.
pub(super) fn url_is_loopback(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    is_loopback_host(authority)
}

pub use crate::ids::is_repository_name;

pub(super) fn check_repository(key: &str, r: &str, errors: &mut Vec<String>) {
    if !is_repository_name(r) {
        errors.push(format!("{key}: expected owner/name, got {r:?}"));
    }
}

/// An `https` URL, or `http` to this machine only (`127.0.0.1`, `[::1]`,
/// `localhost`): teammem sends tokens, keys and private memory to these URLs,
/// and plain `http` to another host would carry them in the clear.
pub(super) fn check_url(key: &str, url: &str, errors: &mut Vec<String>) {
    let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        (false, "")
    };
    if rest.is_empty() || rest.starts_with('/') || url.contains('@') {
        errors.push(format!(
            "{key}: expected an https URL (plain http only to 127.0.0.1, [::1] or localhost) without credentials, got {url:?}"
        ));
        return;
    }
    if !https && !is_loopback_authority(rest) {
        errors.push(format!(
            "{key}: plain http is allowed only to this machine (127.0.0.1, [::1], localhost), got {url:?}; use https://"
        ));
    }
}

/// `rest` (a URL after its scheme) names a loopback host: `127.0.0.1`,
/// `[::1]` or `localhost`, with or without a port.
fn is_loopback_authority(rest: &str) -> bool {
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((host, after)) if after.is_empty() || after.starts_with(':') => host,
            _ => return false,
        }
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    let port_ok = match authority
        .rsplit_once(']')
        .map(|(_, p)| p)
        .unwrap_or(authority)
        .split_once(':')
    {
        None => true,
        Some((_, port)) => port.parse::<u16>().is_ok(),
    };
    port_ok && (host == "127.0.0.1" || host == "::1" || host.eq_ignore_ascii_case("localhost"))
}

pub(super) fn is_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_uppercase() || b == b'_')
        && bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}
