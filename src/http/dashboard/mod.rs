//! The dashboard: server-rendered, read-only HTML pages of the job queue.
//!
//! Who may look:
//! - a client on the loopback interface whose request names a loopback `Host`
//!   (`127.0.0.1`, `[::1]`, `localhost`, any port) and carries no forwarding
//!   headers (`Forwarded`, `X-Forwarded-For`, `X-Real-IP`) — so neither a
//!   reverse proxy on the same host nor a DNS-rebound name turns a visitor
//!   into a local one — and only while `dashboard.trust_loopback` holds (off by
//!   default when `server.public_url` names a non-loopback host);
//! - anyone else only after logging in with an API token, which sets a signed,
//!   `HttpOnly`, `SameSite=Strict` session cookie (`Secure` when the public URL
//!   is https). The cookie names the token; a revoked token ends its sessions.
//!   The login form is checked before its body is read: a foreign `Origin` is
//!   refused (403), and so is a body over 4 KiB (413) or of another type (415).
//!
//! A token limited to repositories sees only their jobs. Pages carry no
//! JavaScript; lists refresh themselves with a meta refresh.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

mod actions;
mod chart;
mod jobs;
mod sources;
mod wiki_page;

use super::AppState;
use crate::queue::QueueError;
use crate::tokens::{self, Principal};

const COOKIE: &str = "teammem_session";
const SESSION_HOURS: i64 = 12;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(sources::page))
        .route("/jobs", get(jobs::jobs_page))
        .route("/jobs/{id}", get(jobs::job_page))
        .route("/jobs/{id}/{action}", post(actions::act))
        .route("/wiki/{owner}/{name}/{*page}", get(wiki_page::page))
        .route("/login", get(login_form).post(login))
        .route("/logout", get(logout))
}

// --- who is looking --------------------------------------------------------------

/// The viewer of a page: a local operator (sees everything) or a token's principal.
enum Viewer {
    Local,
    Token(Principal),
}

impl Viewer {
    fn may_see(&self, repository: &str) -> bool {
        match self {
            Viewer::Local => true,
            Viewer::Token(p) => p.may_access(repository),
        }
    }
    fn scope(&self) -> Option<Vec<String>> {
        match self {
            Viewer::Local => None,
            Viewer::Token(p) if p.repositories.is_empty() => None,
            Viewer::Token(p) => Some(p.repositories.clone()),
        }
    }
}

/// The local operator: loopback trust is on, the peer is on loopback, the
/// request names a loopback `Host` (a DNS-rebound name or a same-host proxy
/// passing the public name on is not local) and carries no forwarding header.
fn is_local(trust_loopback: bool, peer: SocketAddr, headers: &HeaderMap) -> bool {
    trust_loopback
        && peer.ip().is_loopback()
        && headers
            .get(header::HOST)
            .and_then(|host| host.to_str().ok())
            .is_some_and(crate::config::is_loopback_host)
        && !["forwarded", "x-forwarded-for", "x-real-ip"]
            .iter()
            .any(|h| headers.contains_key(*h))
}

async fn viewer(
    state: &AppState,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Result<Viewer, Response> {
    if is_local(state.config.dashboard.trust_loopback, peer, headers) {
        return Ok(Viewer::Local);
    }
    let now = chrono::Utc::now().timestamp();
    if let Some(name) = session_cookie(headers).and_then(|c| verify_session(state, c, now)) {
        match tokens::active_principal(&state.pool, &name).await {
            Ok(Some(p)) => return Ok(Viewer::Token(p)),
            Ok(None) => {}
            Err(e) => {
                tracing::error!(error = %e, "session lookup failed");
                return Err(page_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error",
                ));
            }
        }
    }
    Err(Redirect::to("/login").into_response())
}

fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v)
}

/// `name.expiry.signature` where the signature is HMAC-SHA256 over `name.expiry`
/// with the daemon's session key.
fn sign_session(state: &AppState, name: &str, expires: i64) -> String {
    let payload = format!("{}.{expires}", hex::encode(name));
    let mut mac = Hmac::<Sha256>::new_from_slice(&state.session_key[..]).expect("any key length");
    mac.update(payload.as_bytes());
    format!("{payload}.{}", hex::encode(mac.finalize().into_bytes()))
}

fn verify_session(state: &AppState, cookie: &str, now: i64) -> Option<String> {
    let (payload, signature) = cookie.rsplit_once('.')?;
    let signature = hex::decode(signature).ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&state.session_key[..]).expect("any key length");
    mac.update(payload.as_bytes());
    mac.verify_slice(&signature).ok()?;
    let (name, expires) = payload.split_once('.')?;
    if expires.parse::<i64>().ok()? < now {
        return None;
    }
    String::from_utf8(hex::decode(name).ok()?).ok()
}

// --- login -------------------------------------------------------------------------

async fn login_form() -> Html<String> {
    Html(login_html(None))
}

/// A handle on `source`'s wiki through this node's mirror (no credential:
/// a private GitHub wiki the mirror does not hold yet cannot be read here).
fn wiki_of(state: &AppState, source: &crate::config::Source) -> Result<crate::wiki::Wiki, String> {
    crate::runner::facts::mirror_of(
        &state.config,
        source,
        None,
        state.config.dashboard.forge_timeout,
    )
}

/// Whether the request declares an HTML form body
/// (`application/x-www-form-urlencoded`).
fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
}

/// Whether the request's `Origin` is this dashboard's own (its `Host`, or
/// `server.public_url`); `None` when it has none.
fn is_own_origin(state: &AppState, headers: &HeaderMap) -> Option<bool> {
    let origin = headers.get(header::ORIGIN)?.to_str().unwrap_or_default();
    let own = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|host| {
            origin == format!("http://{host}") || origin == format!("https://{host}")
        });
    let public = state.config.server.public_url.as_deref() == Some(origin);
    Some(own || public)
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

/// The most a login form may hold: a token and its field name, with room.
const MAX_LOGIN_BYTES: usize = 4 * 1024;

/// Checks what can be checked before the body is read (its declared size and
/// type, and that a browser sent it from this dashboard's own page), then
/// reads at most [`MAX_LOGIN_BYTES`].
async fn login_form_of(state: &AppState, request: Request) -> Result<LoginForm, Response> {
    let (parts, body) = request.into_parts();
    let refuse = |status: StatusCode, message: &str| {
        (status, Html(login_html(Some(message)))).into_response()
    };
    let headers = &parts.headers;
    if is_own_origin(state, headers) == Some(false) {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "Log in from this dashboard's own login page",
        ));
    }
    if !is_form(headers) {
        return Err(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Send the login form as application/x-www-form-urlencoded",
        ));
    }
    let too_large = || {
        refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "The login form is too large; paste only the token",
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_LOGIN_BYTES) {
        return Err(too_large());
    }
    let body = axum::body::to_bytes(body, MAX_LOGIN_BYTES)
        .await
        .map_err(|_| too_large())?;
    // The bytes are bounded now; axum's form extractor parses them.
    let request = Request::from_parts(parts, Body::from(body));
    match Form::<LoginForm>::from_request(request, &()).await {
        Ok(Form(form)) => Ok(form),
        Err(_) => Err(refuse(
            StatusCode::BAD_REQUEST,
            "The login form needs a token field",
        )),
    }
}

async fn login(State(state): State<AppState>, request: Request) -> Response {
    let form = match login_form_of(&state, request).await {
        Ok(form) => form,
        Err(refused) => return refused,
    };
    let principal = match tokens::verify(&state.pool, form.token.trim()).await {
        Ok(Some(p)) => p,
        Ok(None) => {
            return (
                StatusCode::UNAUTHORIZED,
                Html(login_html(Some("That token is not valid or was revoked"))),
            )
                .into_response();
        }
        Err(e) => {
            tracing::error!(error = %e, "login lookup failed");
            return page_error(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
        }
    };
    let expires = chrono::Utc::now().timestamp() + SESSION_HOURS * 3600;
    let value = sign_session(&state, &principal.name, expires);
    let secure = state
        .config
        .server
        .public_url
        .as_deref()
        .is_some_and(|u| u.starts_with("https://"));
    let cookie = format!(
        "{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
        SESSION_HOURS * 3600,
        if secure { "; Secure" } else { "" }
    );
    let mut response = Redirect::to("/").into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, v);
    }
    response
}

async fn logout() -> Response {
    let mut response = Redirect::to("/login").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("teammem_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    response
}

fn age(ms: i64) -> String {
    let s = (ms / 1000).max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn internal(e: QueueError) -> Response {
    tracing::error!(error = %e, "dashboard query failed");
    page_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal error; the server log has the details",
    )
}

fn page_error(status: StatusCode, message: &str) -> Response {
    (
        status,
        Html(layout(
            status.canonical_reason().unwrap_or("Error"),
            &format!(
                "<p class=error>{}</p><p><a href=\"/\">← sources</a> · <a href=\"/jobs\">jobs</a></p>",
                escape(message)
            ),
            None,
            &Viewer::Local,
        )),
    )
        .into_response()
}

const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1f2328;background:#fff}\
header{display:flex;justify-content:space-between;align-items:center;padding:.6rem 1rem;background:#24292f;color:#fff}\
header a{color:#fff}main{padding:1rem;max-width:72rem;margin:auto}\
table{border-collapse:collapse;width:100%}th,td{padding:.35rem .5rem;border-bottom:1px solid #d0d7de;text-align:left;vertical-align:top}\
.state{padding:.05rem .45rem;border-radius:1rem;background:#eaeef2;font-size:.85em;white-space:nowrap}\
.succeeded,.no_change{background:#dafbe1}.failed,.rejected{background:#ffebe9}.running{background:#ddf4ff}.cancelled,.skipped{background:#fff8c5}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}\
pre{background:#f6f8fa;padding:.75rem;overflow:auto}.filters{margin-bottom:1rem}.error{color:#cf222e}\
.timeline time{color:#57606a;font-size:.9em}\
.attention{padding:.05rem .45rem;border-radius:1rem;white-space:nowrap;font-size:.85em}.attention.failing,.attention.stalled{background:#ffebe9}.attention.unknown{background:#fff8c5}.attention.catching-up{background:#ddf4ff}.attention.stale-facts{background:#fff1e5}.attention.up-to-date{background:#dafbe1}.unknown{color:#9a6700}.stale-count{color:#bc4c00}\
.diff .add{background:#dafbe1;display:block}.diff .del{background:#ffebe9;display:block}.diff .hunk{color:#8250df}.diff .file{font-weight:600}\
@media (max-width:40rem){thead{display:none}tr{display:block;border-bottom:1px solid #d0d7de;padding:.4rem 0}td{display:inline-block;border:0;padding:.1rem .4rem}}";

fn layout(title: &str, body: &str, refresh: Option<u32>, viewer: &Viewer) -> String {
    let refresh = refresh
        .map(|s| format!("<meta http-equiv=\"refresh\" content=\"{s}\">"))
        .unwrap_or_default();
    let who = match viewer {
        Viewer::Local => "local operator".to_string(),
        Viewer::Token(p) => format!("{} · <a href=\"/logout\">log out</a>", escape(&p.name)),
    };
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8>\
<meta name=viewport content=\"width=device-width,initial-scale=1\">{refresh}\
<title>{title} · teammem</title><style>{STYLE}</style></head><body>\
<header><nav><a href=\"/\"><b>teammem</b></a> · <a href=\"/\">Sources</a> · <a href=\"/jobs\">Jobs</a></nav><span>{who}</span></header><main><h1>{title}</h1>{body}</main></body></html>",
        title = escape(title)
    )
}

fn login_html(error: Option<&str>) -> String {
    let error = error
        .map(|e| format!("<p class=error>{}</p>", escape(e)))
        .unwrap_or_default();
    format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8>\
<meta name=viewport content=\"width=device-width,initial-scale=1\"><title>Log in · teammem</title>\
<style>{STYLE}</style></head><body><header><b>teammem</b></header><main><h1>Log in</h1>{error}\
<form method=post action=\"/login\"><p><label>API token<br><input type=password name=token autocomplete=off size=50 required></label></p>\
<p><button>Log in</button></p></form><p>Create a token with <code>teammem tokens create --name NAME</code>.</p></main></body></html>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn forwarded_requests_are_never_local() {
        let peer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert!(is_local(true, peer, &headers));
        assert!(!is_local(false, peer, &headers), "trust switched off");
        headers.insert("x-forwarded-for", HeaderValue::from_static("203.0.113.9"));
        assert!(!is_local(true, peer, &headers));
        let remote: SocketAddr = "192.0.2.1:5000".parse().unwrap();
        let mut loopback_host = HeaderMap::new();
        loopback_host.insert(header::HOST, HeaderValue::from_static("localhost"));
        assert!(!is_local(true, remote, &loopback_host));
    }

    #[test]
    fn only_a_loopback_host_is_local() {
        let peer: SocketAddr = "[::1]:5000".parse().unwrap();
        let with_host = |host: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, HeaderValue::from_static(host));
            is_local(true, peer, &headers)
        };
        for host in [
            "127.0.0.1",
            "127.0.0.1:80",
            "[::1]:8080",
            "[::1]",
            "LocalHost:9",
        ] {
            assert!(with_host(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "127.0.0.1:x",
            "[::1]evil",
            "",
        ] {
            assert!(!with_host(host), "{host}");
        }
        assert!(!is_local(true, peer, &HeaderMap::new()), "no Host at all");
    }

    #[test]
    fn ages_read_naturally() {
        assert_eq!(age(5_000), "5s");
        assert_eq!(age(120_000), "2m");
        assert_eq!(age(7_200_000), "2h");
        assert_eq!(age(3 * 86_400_000), "3d");
    }
}
