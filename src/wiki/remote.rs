//! Where a wiki lives and how to reach it. Keeps the credential rules of DESIGN §7:
//! the token only ever travels as Basic `x-access-token:<token>` in a header,
//! over https or to a loopback address, on one of the four smart-HTTP URLs, with
//! redirects refused; it is never written to disk and prints as `***`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use gix::protocol::transport::client::blocking_io::http;

use super::error::{ErrorKind, WikiError};

/// A credential. `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(Arc::from(value.into()))
    }

    /// The raw value, for the one place that builds the Authorization header and
    /// for the scans that prove it never leaks.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

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
pub(crate) fn validate_http(url: &str, token: Option<&Secret>) -> Result<HttpRemote, WikiError> {
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
        && (token.expose().is_empty() || token.expose().chars().any(|c| c.is_control()))
    {
        return Err(configuration_error(
            "the wiki token is empty or contains control characters",
        ));
    }
    Ok(HttpRemote {
        base: url.trim_end_matches('/').to_owned(),
        token: token.cloned(),
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

/// The smart-HTTP URL tails teammem may request, relative to the base URL.
const ALLOWED_TAILS: [&str; 4] = [
    "/info/refs?service=git-upload-pack",
    "/info/refs?service=git-receive-pack",
    "/git-upload-pack",
    "/git-receive-pack",
];

pub(crate) type HttpTransport = http::Transport<http::reqwest::Remote>;

impl HttpRemote {
    /// Transport options: no redirects, per-request URL allow-list, the token as
    /// a header (never as gix "identity", which could be handed to helpers), and
    /// a timeout bounded by the call's deadline.
    pub(crate) fn transport_options(&self, deadline: Instant) -> http::Options {
        let base = self.base.clone();
        let authorization = self.token.as_ref().map(|token| {
            let encoded = base64::engine::general_purpose::STANDARD
                .encode(format!("x-access-token:{}", token.expose()));
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Basic {encoded}"))
                .expect("base64 is a valid header value");
            value.set_sensitive(true);
            value
        });
        let remaining = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        // Plain http only ever goes to loopback: never through a proxy from the
        // environment, which would see the token.
        let plain_http = self.base.starts_with("http://");
        let backend = http::reqwest::Options {
            configure_client: Some(Box::new(move |builder| {
                let builder = builder
                    .timeout(remaining)
                    .connect_timeout(remaining)
                    .redirect(reqwest::redirect::Policy::none());
                Ok(if plain_http {
                    builder.no_proxy()
                } else {
                    builder
                })
            })),
            configure_request: Some(Box::new(move |request| {
                let url = request.url().as_str();
                let allowed = url
                    .strip_prefix(base.as_str())
                    .is_some_and(|tail| ALLOWED_TAILS.contains(&tail));
                if !allowed {
                    return Err(gix::error::ErrorExt::raise(gix::error::message(
                        "refusing a request outside the smart-HTTP URLs",
                    )));
                }
                if let Some(value) = &authorization {
                    request
                        .headers_mut()
                        .insert(reqwest::header::AUTHORIZATION, value.clone());
                }
                Ok(())
            })),
        };
        http::Options {
            follow_redirects: http::options::FollowRedirects::None,
            connect_timeout: Some(remaining),
            user_agent: Some(concat!("teammem/", env!("CARGO_PKG_VERSION")).to_owned()),
            backend: Some(Arc::new(std::sync::Mutex::new(backend))),
            ..Default::default()
        }
    }

    /// A configured transport speaking `protocol` (V1 for receive-pack).
    pub(crate) fn connect(
        &self,
        protocol: gix::protocol::transport::Protocol,
        deadline: Instant,
    ) -> Result<HttpTransport, WikiError> {
        use gix::protocol::transport::client::TransportWithoutIO;
        let url = gix::url::parse(gix::bstr::BStr::new(self.base.as_str()))
            .map_err(|_| configuration_error("the wiki remote URL is not a valid git URL"))?;
        let mut transport = http::connect(url, protocol, false);
        transport
            .configure(&self.transport_options(deadline))
            .map_err(|err| WikiError::internal("configuring the HTTP transport", err))?;
        Ok(transport)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_prints() {
        let secret = Secret::new("ghs_topsecret");
        assert_eq!(format!("{secret}"), "***");
        assert_eq!(format!("{secret:?}"), "***");
        let remote = Remote::Http {
            url: "https://example.org/w.git".into(),
            token: Some(secret),
        };
        assert!(!format!("{remote:?}").contains("topsecret"));
    }

    #[test]
    fn https_anywhere_http_only_to_loopback() {
        let token = Secret::new("t");
        assert!(validate_http("https://github.com/o/r.wiki.git", Some(&token)).is_ok());
        for loopback in [
            "http://127.0.0.1:8080/r.git",
            "http://127.3.4.5/r.git",
            "http://[::1]:9/r.git",
            "http://localhost:1/r.git",
            "http://LOCALHOST/r.git",
        ] {
            assert!(validate_http(loopback, Some(&token)).is_ok(), "{loopback}");
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
            let err = validate_http(refused, Some(&token)).unwrap_err();
            assert_eq!(err.kind, ErrorKind::ConfigurationError, "{refused}");
        }
    }
}
