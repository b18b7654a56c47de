//! Where a wiki lives and how to reach it. Keeps the credential rules of DESIGN §7:
//! the token only ever travels as Basic `x-access-token:<token>` in a header,
//! over https or to a loopback address, on one of the four smart-HTTP URLs, with
//! redirects refused; it is never written to disk and prints as `<redacted>`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use base64::Engine;
use gix::protocol::transport::client::blocking_io::http;

use super::error::{ErrorKind, WikiError};
use super::smart_http::{GitHttp, HttpClients};

/// A credential: the crate's one secret type (never printed, zeroed on drop).
pub use crate::secrets::Secret;

/// How to reach a wiki's git repository.
#[derive(Debug, Clone)]
pub enum Remote {
    /// Smart HTTP(S), e.g. `https://github.com/octo/app.wiki.git`.
    Http { url: String, token: Option<Secret> },
    /// A bare repository on this machine (the local forge); used in place.
    LocalBare { path: PathBuf },
}

/// One wiki destination: a stable id (e.g. `octo/app`, names the mirror and the
/// lock) and its remote.
#[derive(Debug, Clone)]
pub struct Destination {
    pub id: String,
    pub remote: Remote,
}

/// A validated HTTP remote.
#[derive(Clone)]
pub(crate) struct HttpRemote {
    /// Base URL without a trailing slash.
    pub base: String,
    pub token: Option<Secret>,
    /// The store's HTTP clients (one connection pool per store).
    clients: Arc<HttpClients>,
}

impl std::fmt::Debug for HttpRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRemote")
            .field("base", &self.base)
            .field("token", &self.token)
            .finish()
    }
}

fn configuration_error(message: impl Into<String>) -> WikiError {
    WikiError::not_applied(ErrorKind::ConfigurationError, message)
}

/// Checks the URL rules before anything is sent.
pub(crate) fn validate_http(
    url: &str,
    token: Option<&Secret>,
    clients: &Arc<HttpClients>,
) -> Result<HttpRemote, WikiError> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|_| configuration_error("the wiki remote URL is not a valid URL"))?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(configuration_error(
            "the wiki remote URL must not contain credentials; configure the token separately",
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(configuration_error(
            "the wiki remote URL must not have a query or fragment",
        ));
    }
    match parsed.scheme() {
        "https" => {}
        "http" => {
            if !is_loopback_host(&parsed) {
                return Err(configuration_error(
                    "the wiki remote must use https; plain http is only allowed to a loopback address (127.0.0.0/8, ::1, localhost)",
                ));
            }
        }
        _ => {
            return Err(configuration_error(
                "the wiki remote URL must start with https:// (or http:// to a loopback address)",
            ));
        }
    }
    if let Some(token) = token
        && token
            .expose_str()
            .is_none_or(|text| text.is_empty() || text.chars().any(|c| c.is_control()))
    {
        return Err(configuration_error(
            "the wiki token is empty or contains control characters",
        ));
    }
    Ok(HttpRemote {
        base: url.trim_end_matches('/').to_owned(),
        token: token.cloned(),
        clients: clients.clone(),
    })
}

fn is_loopback_host(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let unbracketed = host.trim_start_matches('[').trim_end_matches(']');
    match unbracketed.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}

pub(crate) type HttpTransport = http::Transport<GitHttp>;

impl HttpRemote {
    /// A transport speaking `protocol` (V1 for receive-pack) through the
    /// store's shared client: no redirects, the four smart-HTTP URLs only, the
    /// token as a sensitive header (never as gix "identity", which could be
    /// handed to helpers), every request bounded by the call's deadline.
    pub(crate) fn connect(
        &self,
        protocol: gix::protocol::transport::Protocol,
        deadline: Instant,
    ) -> Result<HttpTransport, WikiError> {
        let url = gix::url::parse(gix::bstr::BStr::new(self.base.as_str()))
            .map_err(|_| configuration_error("the wiki remote URL is not a valid git URL"))?;
        let http = self.git_http(deadline)?;
        Ok(http::Transport::new_http(http, url, protocol, false))
    }

    /// The raw requester under a transport, for the stateless receive-pack POST.
    pub(crate) fn git_http(&self, deadline: Instant) -> Result<GitHttp, WikiError> {
        // Plain http only ever goes to loopback: never through a proxy from the
        // environment, which would see the token.
        let plain_http = self.base.starts_with("http://");
        let client = self
            .clients
            .get(plain_http)
            .map_err(|err| WikiError::internal("setting up the wiki's HTTP client", err))?;
        let authorization = self.token.as_ref().map(|token| {
            let encoded = base64::engine::general_purpose::STANDARD.encode(format!(
                "x-access-token:{}",
                token.expose_str().unwrap_or_default()
            ));
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Basic {encoded}"))
                .expect("base64 is a valid header value");
            value.set_sensitive(true);
            value
        });
        Ok(GitHttp::new(
            client,
            self.base.clone(),
            authorization,
            deadline,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_prints() {
        let secret = Secret::new("ghs_topsecret");
        assert_eq!(format!("{secret}"), "<redacted>");
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
        let remote = Remote::Http {
            url: "https://example.org/w.git".into(),
            token: Some(secret),
        };
        assert!(!format!("{remote:?}").contains("topsecret"));
    }

    #[test]
    fn https_anywhere_http_only_to_loopback() {
        let token = Secret::new("t");
        let clients = Arc::default();
        assert!(validate_http("https://github.com/o/r.wiki.git", Some(&token), &clients).is_ok());
        for loopback in [
            "http://127.0.0.1:8080/r.git",
            "http://127.3.4.5/r.git",
            "http://[::1]:9/r.git",
            "http://localhost:1/r.git",
            "http://LOCALHOST/r.git",
        ] {
            assert!(
                validate_http(loopback, Some(&token), &clients).is_ok(),
                "{loopback}"
            );
        }
        for refused in [
            "http://github.com/o/r.wiki.git",
            "http://128.0.0.1/r.git",
            "http://localhost.example.org/r.git",
            "ftp://127.0.0.1/r.git",
            "https://user:pw@github.com/r.git",
            "https://github.com/r.git?x=1",
            "not a url",
        ] {
            let err = validate_http(refused, Some(&token), &clients).unwrap_err();
            assert_eq!(err.kind, ErrorKind::ConfigurationError, "{refused}");
        }
    }
}
