//! The dashboard: server-rendered HTML pages of the job queue, with the
//! operator's few buttons (retry, cancel, log out) and no JavaScript.
//!
//! Who may look:
//! - the local operator: a client on the loopback interface whose socket
//!   belongs to the daemon's own user (its owner read from the kernel's
//!   socket tables, `peer.rs`: another local user, or a reverse proxy running
//!   as a user of its own, is not the operator; an owner that cannot be told
//!   for sure is nobody), whose request names a loopback `Host` (a DNS-rebound
//!   name is not local) and carries no forwarding header (`Forwarded`,
//!   `X-Forwarded-For`, `-Host`, `-Proto`, `X-Real-IP`, `Via`: whatever a
//!   proxy passed on is never local, whatever `server.public_url` says), and
//!   only while `dashboard.trust_loopback` holds (off by default when
//!   `server.public_url` names a non-loopback host);
//! - anyone else only after logging in with an API token, which sets a signed,
//!   `HttpOnly`, `SameSite=Strict` session cookie (`Secure` when the public URL
//!   is https). The cookie names the token; a revoked token ends its sessions.
//!   The login form is checked before its body is read: a foreign `Origin` is
//!   refused (403), and so is a body over 4 KiB (413) or of another type (415).
//!
//! Every answer of this router (pages, redirects, errors) carries
//! `X-Frame-Options: DENY`, a Content-Security-Policy that allows the page's
//! own stylesheet and nothing else (no script, no frame, no base, forms only
//! to this origin), `Cache-Control: no-store`, `Referrer-Policy: same-origin`
//! (no referrer leaves the dashboard; `no-referrer` would also make browsers
//! send `Origin: null` on the dashboard's own forms, which the Origin check
//! refuses) and `X-Content-Type-Options: nosniff` ([`harden`], the router's
//! one layer).
//!
//! Every form that changes something (retry, cancel, log out) is a POST that
//! carries this session's form token: an HMAC under the session key of the
//! login cookie, or for the local operator of a random per-browser cookie
//! (`teammem_form`), so a token from one session is refused in another.
//!
//! A token limited to repositories sees only their jobs. Lists refresh
//! themselves with a meta refresh.

use std::net::SocketAddr;
use std::sync::LazyLock;

use axum::body::Body;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;
use subtle::ConstantTimeEq;

mod actions;
mod chart;
mod jobs;
mod markdown;
mod peer;
mod sources;
mod wiki_page;

use super::AppState;
use crate::queue::QueueError;
use crate::tokens::{self, Principal};

const COOKIE: &str = "teammem_session";
/// The random per-browser value the local operator's form token is bound to.
const FORM_COOKIE: &str = "teammem_form";
const SESSION_HOURS: i64 = 12;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(sources::page))
        .route("/jobs", get(jobs::jobs_page))
        .route("/jobs/{id}", get(jobs::job_page))
        .route("/jobs/{id}/{action}", post(actions::act))
        .route("/wiki/{owner}/{name}", get(wiki_page::index))
        .route("/wiki/{owner}/{name}/", get(wiki_page::index))
        .route("/wiki/{owner}/{name}/{*page}", get(wiki_page::page))
        .route("/login", get(login_form).post(login))
        .route("/logout", get(logout_page).post(logout))
        .layer(axum::middleware::from_fn(harden))
}

// --- what every answer carries -------------------------------------------------------

/// The policy of every dashboard page: the one stylesheet the pages carry
/// (by its hash, so no injected `<style>` or `style=` applies), no script,
/// no frames around or in the page, forms only to this origin.
static CONTENT_SECURITY_POLICY: LazyLock<HeaderValue> = LazyLock::new(|| {
    use base64::Engine;
    use sha2::Digest;
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE));
    HeaderValue::from_str(&format!(
        "default-src 'none'; style-src 'sha256-{hash}'; frame-ancestors 'none'; \
         form-action 'self'; base-uri 'none'"
    ))
    .expect("base64 is a valid header value")
});

/// The router's one layer: gives a browser that asks for a page (GET) without
/// one its `teammem_form` cookie (seen by this request's handlers already, so
/// the first page's forms carry a token that holds), and puts the security
/// headers on every answer.
async fn harden(mut request: Request, next: Next) -> Response {
    let minted = if request.method() == axum::http::Method::GET
        && form_cookie(request.headers()).is_none()
    {
        use rand::RngCore;
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        let value = hex::encode(bytes);
        let pair = HeaderValue::from_str(&format!("{FORM_COOKIE}={value}"))
            .expect("hex is a valid header value");
        request.headers_mut().append(header::COOKIE, pair);
        Some(value)
    } else {
        None
    };
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        CONTENT_SECURITY_POLICY.clone(),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if let Some(value) = minted {
        let cookie = format!("{FORM_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict");
        if let Ok(cookie) = HeaderValue::from_str(&cookie) {
            headers.append(header::SET_COOKIE, cookie);
        }
    }
    response
}

// --- who is looking --------------------------------------------------------------

/// Both ends of the request's connection: the peer (axum's `ConnectInfo`)
/// and ours (`serve::LocalAddr`; `None` when the server did not say, and
/// then nobody is the local operator).
pub(super) struct Peer {
    remote: SocketAddr,
    local: Option<SocketAddr>,
}

impl<S: Send + Sync> FromRequestParts<S> for Peer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let Some(ConnectInfo(remote)) = parts.extensions.get::<ConnectInfo<SocketAddr>>() else {
            tracing::error!("a dashboard request without the peer's address");
            return Err(page_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error",
            ));
        };
        let local = parts
            .extensions
            .get::<crate::http::serve::LocalAddr>()
            .map(|l| l.0);
        Ok(Peer {
            remote: *remote,
            local,
        })
    }
}

/// The viewer of a page and the form token its forms carry.
struct Viewer {
    /// `None`: the local operator, who sees every source.
    principal: Option<Principal>,
    /// This session's form token (see [`form_token`]); empty (never
    /// accepted) for a local operator whose browser has no form cookie.
    csrf: String,
}

impl Viewer {
    fn may_see(&self, repository: &str) -> bool {
        self.principal
            .as_ref()
            .is_none_or(|p| p.may_access(repository))
    }
    fn scope(&self) -> Option<Vec<String>> {
        match &self.principal {
            Some(p) if !p.repositories.is_empty() => Some(p.repositories.clone()),
            _ => None,
        }
    }
}

/// Headers only a proxy (or someone pretending to be one) sends: a request
/// carrying any of them is never the local operator's.
const FORWARDING_HEADERS: [&str; 6] = [
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
    "via",
];

/// What the request alone tells about a local operator: loopback trust is
/// on, the peer is on loopback, the request names a loopback `Host` (a
/// DNS-rebound name or a same-host proxy passing the public name on is not
/// local) and carries no forwarding header. Who owns the peer's socket is
/// [`is_local_operator`]'s question.
fn is_local(trust_loopback: bool, peer: SocketAddr, headers: &HeaderMap) -> bool {
    trust_loopback
        && peer.ip().is_loopback()
        && headers
            .get(header::HOST)
            .and_then(|host| host.to_str().ok())
            .is_some_and(crate::config::is_loopback_host)
        && !FORWARDING_HEADERS
            .iter()
            .any(|h| headers.contains_key(HeaderName::from_static(h)))
}

/// The local operator: [`is_local`], and the peer's socket belongs to the
/// daemon's own user (exactly one socket in the kernel's tables faces ours,
/// and its owner is our effective uid).
async fn is_local_operator(state: &AppState, peer: &Peer, headers: &HeaderMap) -> bool {
    if !is_local(state.config.dashboard.trust_loopback, peer.remote, headers) {
        return false;
    }
    let Some(local) = peer.local else {
        return false;
    };
    let remote = peer.remote;
    let owner = tokio::task::spawn_blocking(move || peer::owner_of_peer(remote, local))
        .await
        .ok()
        .flatten();
    if owner != Some(peer::own_uid()) {
        tracing::debug!(%remote, ?owner, "a loopback visitor of another user (or of no known user) must log in");
        return false;
    }
    true
}

async fn viewer(state: &AppState, peer: &Peer, headers: &HeaderMap) -> Result<Viewer, Response> {
    if is_local_operator(state, peer, headers).await {
        // `harden` gives every page request a form cookie; a POST without
        // one has no token that holds (an empty one never does).
        return Ok(Viewer {
            principal: None,
            csrf: form_cookie(headers)
                .map(|form| form_token(state, "operator", form))
                .unwrap_or_default(),
        });
    }
    let now = chrono::Utc::now().timestamp();
    if let Some(cookie) = session_cookie(headers)
        && let Some(name) = verify_session(state, cookie, now)
    {
        match tokens::active_principal(&state.pool, &name).await {
            Ok(Some(p)) => {
                // A signed-in viewer spends its token's request allowance
                // (`[limits]`), as it would over the API: a wiki view may
                // ask a remote.
                let key = crate::http::limits::principal_key(&p);
                if state.limits.check_rate(&key).is_err() {
                    return Err(page_error(
                        StatusCode::TOO_MANY_REQUESTS,
                        "too many requests from this sign-in; wait a few seconds and reload",
                    ));
                }
                return Ok(Viewer {
                    principal: Some(p),
                    csrf: form_token(state, "session", cookie),
                });
            }
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

/// The value of cookie `name`, from every `Cookie` header.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    cookie(headers, COOKIE)
}

/// The browser's form cookie, when it has the shape `harden` gives it (64
/// lowercase hex digits); any other value is replaced.
fn form_cookie(headers: &HeaderMap) -> Option<&str> {
    cookie(headers, FORM_COOKIE)
        .filter(|v| v.len() == 64 && v.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// A session's form token: HMAC-SHA256 under the session key of what the
/// session is (`kind`: a login cookie, or the local operator's form cookie),
/// hex. Without the key it cannot be made; it holds in no other session.
fn form_token(state: &AppState, kind: &str, binding: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(&state.session_key[..]).expect("any key length");
    mac.update(b"csrf:");
    mac.update(kind.as_bytes());
    mac.update(b":");
    mac.update(binding.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// `name.expiry.nonce.signature` where the signature is HMAC-SHA256 over
/// `name.expiry.nonce` with the daemon's session key; the random nonce makes
/// every login a session of its own (and its form token its own).
fn sign_session(state: &AppState, name: &str, expires: i64) -> String {
    use rand::RngCore;
    let mut nonce = [0u8; 16];
    rand::rng().fill_bytes(&mut nonce);
    let payload = format!("{}.{expires}.{}", hex::encode(name), hex::encode(nonce));
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
    let mut parts = payload.split('.');
    let (name, expires, _nonce) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || expires.parse::<i64>().ok()? < now {
        return None;
    }
    String::from_utf8(hex::decode(name).ok()?).ok()
}

// --- forms -------------------------------------------------------------------------

#[derive(Deserialize)]
struct TokenForm {
    csrf: String,
}

/// The most a button's form may hold (one hex token and its field name).
const MAX_BUTTON_FORM_BYTES: usize = 1024;

/// The checks every button's POST passes before it does anything, in order:
/// an `Origin` that is this dashboard's own (a cross-site form never gets
/// further), a small form body, and its `csrf` field equal to `expected`
/// (this session's form token). A refusal says why.
async fn check_button_form(
    state: &AppState,
    request: Request,
    expected: &str,
) -> Result<(), Response> {
    let headers = request.headers();
    if is_own_origin(state, headers) != Some(true) {
        return Err(page_error(
            StatusCode::FORBIDDEN,
            "use the buttons on this dashboard's own pages (the request's Origin is missing or foreign)",
        ));
    }
    if !is_form(headers) {
        return Err(page_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the button's form as application/x-www-form-urlencoded",
        ));
    }
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_BUTTON_FORM_BYTES).await else {
        return Err(page_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the button's form is too large",
        ));
    };
    let form =
        match Form::<TokenForm>::from_request(Request::from_parts(parts, Body::from(body)), &())
            .await
        {
            Ok(Form(form)) => form,
            Err(_) => {
                return Err(page_error(
                    StatusCode::BAD_REQUEST,
                    "the button's form needs its csrf field",
                ));
            }
        };
    if expected.is_empty() || !bool::from(form.csrf.as_bytes().ct_eq(expected.as_bytes())) {
        return Err(page_error(
            StatusCode::FORBIDDEN,
            "the form's token is not this session's; reload the page and press the button again",
        ));
    }
    Ok(())
}

// --- login -------------------------------------------------------------------------

async fn login_form() -> Html<String> {
    Html(login_html(None))
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

/// `GET /logout` changes nothing (a link or an image elsewhere must not end
/// a session): it shows the button that posts the logout.
async fn logout_page(State(state): State<AppState>, peer: Peer, headers: HeaderMap) -> Response {
    let viewer = match viewer(&state, &peer, &headers).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let body = if viewer.principal.is_some() {
        format!(
            "<p>End this browser's session:</p>{}",
            logout_button(&viewer)
        )
    } else {
        "<p>You are the local operator; there is no session to end.</p>".to_string()
    };
    Html(layout("Log out", &body, None, Some(&viewer))).into_response()
}

/// `POST /logout` from the button: with this dashboard's `Origin` and the
/// session's form token, clears the login cookie. Without a valid session
/// there is nothing to end, and the cookie is cleared all the same.
async fn logout(State(state): State<AppState>, request: Request) -> Response {
    let now = chrono::Utc::now().timestamp();
    let session = session_cookie(request.headers())
        .filter(|c| verify_session(&state, c, now).is_some())
        .map(str::to_string);
    if let Some(session) = session {
        let expected = form_token(&state, "session", &session);
        if let Err(refused) = check_button_form(&state, request, &expected).await {
            return refused;
        }
    }
    let mut response = Redirect::to("/login").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("teammem_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    response
}

/// The log-out button: a POST form carrying the session's form token.
fn logout_button(viewer: &Viewer) -> String {
    format!(
        "<form class=logout method=post action=\"/logout\"><input type=hidden name=csrf value=\"{}\"><button>log out</button></form>",
        escape(&viewer.csrf)
    )
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
            None,
        )),
    )
        .into_response()
}

const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1f2328;background:#fff}\
header{display:flex;justify-content:space-between;align-items:center;padding:.6rem 1rem;background:#24292f;color:#fff}\
header a{color:#fff}header form{display:inline;margin:0}.legend svg{vertical-align:baseline}main{padding:1rem;max-width:72rem;margin:auto}\
table{border-collapse:collapse;width:100%}th,td{padding:.35rem .5rem;border-bottom:1px solid #d0d7de;text-align:left;vertical-align:top}\
.state{padding:.05rem .45rem;border-radius:1rem;background:#eaeef2;font-size:.85em;white-space:nowrap}\
.succeeded,.no_change{background:#dafbe1}.failed,.rejected{background:#ffebe9}.running{background:#ddf4ff}.cancelled,.skipped{background:#fff8c5}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}\
pre{background:#f6f8fa;padding:.75rem;overflow:auto}.filters{margin-bottom:1rem}.error{color:#cf222e}\
.timeline time{color:#57606a;font-size:.9em}\
.attention{padding:.05rem .45rem;border-radius:1rem;white-space:nowrap;font-size:.85em}.attention.failing,.attention.stalled{background:#ffebe9}.attention.unknown{background:#fff8c5}.attention.catching-up{background:#ddf4ff}.attention.stale-facts{background:#fff1e5}.attention.up-to-date{background:#dafbe1}.unknown{color:#9a6700}.stale-count{color:#bc4c00}\
.diff span{display:block;min-height:1.2em}.diff .add{background:#dafbe1}.diff .del{background:#ffebe9}.diff .hunk{color:#8250df}.diff .file{font-weight:600}\
.wiki{max-width:52rem}.wiki table{width:auto}.wiki code{background:#f6f8fa;padding:.1em .3em}.wiki pre code{padding:0}.wiki blockquote{margin:0;padding:0 1em;color:#57606a;border-left:.25em solid #d0d7de}mark.stale{background:#fff1e5;box-shadow:inset .2em 0 #bc4c00;padding-left:.3em}.stale-note{color:#bc4c00;font-size:.85em;white-space:nowrap}.inert-link{text-decoration:underline dotted}.crumbs{color:#57606a}\
@media (max-width:40rem){thead{display:none}tr{display:block;border-bottom:1px solid #d0d7de;padding:.4rem 0}td{display:inline-block;border:0;padding:.1rem .4rem}}";

/// A page: `viewer` is named in the header (none on error pages, which
/// may be shown to anybody).
fn layout(title: &str, body: &str, refresh: Option<u32>, viewer: Option<&Viewer>) -> String {
    let refresh = refresh
        .map(|s| format!("<meta http-equiv=\"refresh\" content=\"{s}\">"))
        .unwrap_or_default();
    let who = match viewer {
        None => String::new(),
        Some(Viewer {
            principal: None, ..
        }) => "local operator".to_string(),
        Some(
            v @ Viewer {
                principal: Some(p), ..
            },
        ) => format!("{} · {}", escape(&p.name), logout_button(v)),
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
        for forwarding in FORWARDING_HEADERS {
            let mut forwarded = headers.clone();
            forwarded.insert(forwarding, HeaderValue::from_static("203.0.113.9"));
            assert!(!is_local(true, peer, &forwarded), "{forwarding}");
        }
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
