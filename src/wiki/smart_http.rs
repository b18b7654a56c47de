//! The HTTP client under gix-transport for every smart-HTTP wiki request of one
//! `WikiStore`: a reqwest blocking client built once (TLS roots loaded once, one
//! runtime thread, keep-alive connections reused across requests and calls)
//! behind gix's `Http` trait, so a warm round trip pays no client set-up, no
//! thread spawn and no TCP handshake per request.
//!
//! Keeps the credential rules of `remote.rs`: only the four smart-HTTP URLs of
//! the validated base are requested, redirects are refused (never followed), the
//! Basic credential travels only as a header marked sensitive, plain `http://`
//! never goes through a proxy, and every request is bounded by the call's
//! deadline. Errors use gix's conventions (401 as `PermissionDenied` carrying
//! `AuthenticationRequired`, other statuses as "Received HTTP status N") so the
//! engine classifies them in one place.

use std::io::{BufRead, Cursor, Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gix::protocol::transport::client::AuthenticationRequired;
use gix::protocol::transport::client::blocking_io::http::{
    GetResponse, Http, PostBodyDataKind, PostResponse,
};
use reqwest::blocking::{Client, Request, Response};
use reqwest::header::{HeaderName, HeaderValue};

/// The smart-HTTP URL tails teammem may request, relative to the base URL.
const ALLOWED_TAILS: [&str; 4] = [
    "/info/refs?service=git-upload-pack",
    "/info/refs?service=git-receive-pack",
    "/git-upload-pack",
    "/git-receive-pack",
];

/// Upper bound for opening a connection, below any call's own deadline.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// The store's clients, built on first use inside a blocking task (reqwest's
/// blocking client must not be created on an async worker): one that never
/// uses a proxy (plain http, which only ever goes to loopback) and one that
/// honours the environment's proxy settings (https).
#[derive(Default)]
pub(crate) struct HttpClients {
    direct: Mutex<Option<Client>>,
    proxied: Mutex<Option<Client>>,
}

impl HttpClients {
    /// The client for `plain_http` or https requests (cheap: a shared handle).
    pub fn get(&self, plain_http: bool) -> Result<Client, reqwest::Error> {
        let slot = if plain_http {
            &self.direct
        } else {
            &self.proxied
        };
        let mut slot = slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(client) = slot.as_ref() {
            return Ok(client.clone());
        }
        let builder = Client::builder()
            .user_agent(concat!("teammem/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT)
            // Each request carries the remaining time of its call instead.
            .timeout(None::<Duration>)
            .redirect(reqwest::redirect::Policy::none())
            .referer(false);
        let builder = if plain_http {
            builder.no_proxy()
        } else {
            builder
        };
        let client = builder.build()?;
        *slot = Some(client.clone());
        Ok(client)
    }
}

/// gix's `Http` for one transport (one engine call): the shared client, the
/// validated base URL, the credential header and the call's deadline.
pub(crate) struct GitHttp {
    client: Client,
    base: String,
    authorization: Option<HeaderValue>,
    deadline: Instant,
}

impl GitHttp {
    pub fn new(
        client: Client,
        base: String,
        authorization: Option<HeaderValue>,
        deadline: Instant,
    ) -> Self {
        Self {
            client,
            base,
            authorization,
            deadline,
        }
    }

    fn build(
        &self,
        method: reqwest::Method,
        url: &str,
        header_lines: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> gix::error::Result<Request> {
        let allowed = url
            .strip_prefix(self.base.as_str())
            .is_some_and(|tail| ALLOWED_TAILS.contains(&tail));
        if !allowed {
            return Err(gix::error::ErrorExt::raise(gix::error::message(
                "refusing a request outside the smart-HTTP URLs",
            )));
        }
        let url = reqwest::Url::parse(url).map_err(|_| {
            gix::error::ErrorExt::raise(gix::error::message("the wiki request URL is invalid"))
        })?;
        let mut request = Request::new(method, url);
        let headers = request.headers_mut();
        for line in header_lines {
            let Some((name, value)) = line.as_ref().split_once(':') else {
                continue;
            };
            if let (Ok(name), Ok(value)) = (
                HeaderName::try_from(name.trim()),
                HeaderValue::try_from(value.trim()),
            ) {
                // The client's own user agent names teammem.
                if name != reqwest::header::USER_AGENT {
                    headers.append(name, value);
                }
            }
        }
        if let Some(authorization) = &self.authorization {
            headers.insert(reqwest::header::AUTHORIZATION, authorization.clone());
        }
        *request.timeout_mut() = Some(
            self.deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        );
        Ok(request)
    }
}

impl Http for GitHttp {
    type Headers = HeadersReader;
    type ResponseBody = BodyReader;
    type PostBody = PostBody;

    fn get(
        &mut self,
        url: &str,
        _base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> gix::error::Result<GetResponse<Self::Headers, Self::ResponseBody>> {
        let request = self.build(reqwest::Method::GET, url, headers)?;
        let exchange = Exchange::new(self.client.clone(), request);
        Ok(GetResponse {
            headers: HeadersReader::new(exchange.clone()),
            body: BodyReader::new(exchange),
        })
    }

    fn post(
        &mut self,
        url: &str,
        _base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
        _body: PostBodyDataKind,
    ) -> gix::error::Result<PostResponse<Self::Headers, Self::ResponseBody, Self::PostBody>> {
        let request = self.build(reqwest::Method::POST, url, headers)?;
        let exchange = Exchange::new(self.client.clone(), request);
        Ok(PostResponse {
            post_body: PostBody(exchange.clone()),
            headers: HeadersReader::new(exchange.clone()),
            body: BodyReader::new(exchange),
        })
    }

    /// gix's generic options (proxies, timeouts, redirects from git config)
    /// do not apply: this client is configured once, by the rules above.
    fn configure(&mut self, _config: &dyn std::any::Any) -> gix::error::Result {
        Ok(())
    }
}

/// One request and its answer. A POST body is collected in memory (wiki
/// requests are small and bounded) and the request leaves on the first read of
/// the answer, after gix has written and dropped the body.
struct ExchangeState {
    client: Client,
    request: Option<Request>,
    body: Vec<u8>,
    headers: Option<std::io::Result<Vec<u8>>>,
    response: Option<Response>,
}

#[derive(Clone)]
struct Exchange(Arc<Mutex<ExchangeState>>);

impl Exchange {
    fn new(client: Client, request: Request) -> Self {
        Self(Arc::new(Mutex::new(ExchangeState {
            client,
            request: Some(request),
            body: Vec::new(),
            headers: None,
            response: None,
        })))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ExchangeState> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sends the request once; afterwards the headers (or the error) and the
    /// response are waiting in the state.
    fn send(state: &mut ExchangeState) {
        let Some(mut request) = state.request.take() else {
            return;
        };
        if request.method() == reqwest::Method::POST {
            *request.body_mut() = Some(std::mem::take(&mut state.body).into());
        }
        let method = request.method().clone();
        let url = request.url().clone();
        let started = Instant::now();
        let answer = state.client.execute(request);
        tracing::debug!(
            target: "teammem::wiki",
            %method,
            %url,
            status = answer.as_ref().ok().map(|response| response.status().as_u16()),
            elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
            "wiki HTTP request"
        );
        state.headers = Some(match answer {
            Ok(response) => match answer_error(&response) {
                Some(err) => Err(err),
                None => {
                    let mut lines = Vec::new();
                    for (name, value) in response.headers() {
                        lines.extend_from_slice(name.as_str().as_bytes());
                        lines.push(b':');
                        lines.extend_from_slice(value.as_bytes());
                        lines.push(b'\n');
                    }
                    state.response = Some(response);
                    Ok(lines)
                }
            },
            Err(err) => Err(transport_error(err)),
        });
    }

    fn take_headers(&self) -> std::io::Result<Vec<u8>> {
        let mut state = self.state();
        Self::send(&mut state);
        state.headers.take().unwrap_or_else(|| {
            Err(std::io::Error::other(
                "the answer's headers were already read",
            ))
        })
    }

    fn take_response(&self) -> std::io::Result<Response> {
        let mut state = self.state();
        Self::send(&mut state);
        if let Some(response) = state.response.take() {
            return Ok(response);
        }
        // The request failed and the headers reader has not reported it yet.
        match state.headers.take() {
            Some(Err(err)) => Err(err),
            _ => Err(std::io::Error::other("the request got no answer")),
        }
    }
}

/// The answer's status as gix's HTTP backends report it, or `None` for 2xx.
fn answer_error(response: &Response) -> Option<std::io::Error> {
    let status = response.status();
    if status.is_success() {
        return None;
    }
    if status == reqwest::StatusCode::UNAUTHORIZED {
        let www_authenticate = response
            .headers()
            .get_all(reqwest::header::WWW_AUTHENTICATE)
            .iter()
            .map(|value| value.as_bytes().into())
            .collect();
        return Some(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            AuthenticationRequired { www_authenticate },
        ));
    }
    if status.is_redirection() {
        return Some(std::io::Error::other(format!(
            "the wiki remote answered with a redirect ({}), which teammem does not follow",
            status.as_u16()
        )));
    }
    let kind = if status.is_server_error() {
        std::io::ErrorKind::ConnectionAborted
    } else {
        std::io::ErrorKind::Other
    };
    Some(std::io::Error::new(
        kind,
        format!("Received HTTP status {}", status.as_str()),
    ))
}

/// A request that got no answer: timeouts are told apart, the rest is a
/// connection problem. reqwest's error text names the URL, never a header.
fn transport_error(err: reqwest::Error) -> std::io::Error {
    let kind = if err.is_timeout() {
        std::io::ErrorKind::TimedOut
    } else {
        std::io::ErrorKind::ConnectionAborted
    };
    std::io::Error::new(kind, err)
}

/// The POST body, collected until the answer is read.
pub(crate) struct PostBody(Exchange);

impl Write for PostBody {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut state = self.0.state();
        if state.request.is_none() {
            return Err(std::io::Error::other(
                "the request already left; the body can no longer change",
            ));
        }
        state.body.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The answer's header lines (`name:value\n`); reading them sends the request.
pub(crate) struct HeadersReader {
    exchange: Exchange,
    lines: Option<Cursor<Vec<u8>>>,
}

impl HeadersReader {
    fn new(exchange: Exchange) -> Self {
        Self {
            exchange,
            lines: None,
        }
    }

    fn lines(&mut self) -> std::io::Result<&mut Cursor<Vec<u8>>> {
        if self.lines.is_none() {
            self.lines = Some(Cursor::new(self.exchange.take_headers()?));
        }
        Ok(self.lines.as_mut().expect("set above"))
    }
}

impl Read for HeadersReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.lines()?.read(buf)
    }
}

impl BufRead for HeadersReader {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.lines()?.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        if let Some(lines) = self.lines.as_mut() {
            lines.consume(amount);
        }
    }
}

/// The answer's body, streamed from the connection.
pub(crate) struct BodyReader {
    exchange: Exchange,
    body: Option<std::io::BufReader<Response>>,
}

impl BodyReader {
    fn new(exchange: Exchange) -> Self {
        Self {
            exchange,
            body: None,
        }
    }

    fn body(&mut self) -> std::io::Result<&mut std::io::BufReader<Response>> {
        if self.body.is_none() {
            let response = self.exchange.take_response()?;
            self.body = Some(std::io::BufReader::with_capacity(64 * 1024, response));
        }
        Ok(self.body.as_mut().expect("set above"))
    }
}

impl Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.body()?.read(buf)
    }
}

impl BufRead for BodyReader {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.body()?.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        if let Some(body) = self.body.as_mut() {
            body.consume(amount);
        }
    }
}
