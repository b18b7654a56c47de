//! `/mcp`: the coordinator MCP server (wiki read tools + coordinator tools) over
//! Streamable HTTP, for coding agents. rmcp's `StreamableHttpService` serves
//! handshake-era clients with sessions (`initialize`, 2025-11-25) and
//! 2026-07-28 requests statelessly, from one cheap-to-clone [`WikiServer`].
//!
//! In front of rmcp, for every request (POST, GET, DELETE):
//! 1. `Origin`: absent is fine (not a browser); present, it must be the origin
//!    of `server.public_url` or one of `api.allowed_origins`, else 403;
//! 2. `Authorization: Bearer` as for `POST /v1/requests` (a teammem API token,
//!    or a GitHub token of a maintainer when allowed), else 401; the resulting
//!    [`Principal`](crate::tokens::Principal) rides in the request's extensions, where the server reads it
//!    per call (see `crate::mcp::server`), so each call is limited to the
//!    repositories the token may see;
//! 3. the principal's request rate (`[limits]`, see `limits.rs`), else
//!    `429` + `Retry-After`;
//! 4. a request naming an `Mcp-Session-Id` must be its principal's: a
//!    session another principal opened is answered exactly as an unknown
//!    one (`404`, rmcp's own body), whatever the method;
//! 5. the principal's open requests and streams, else `429`.
//!
//! Handshake-era sessions are also kept in the database
//! ([`crate::mcp::sessions`], bound to their principal, at most
//! `limits.mcp_sessions_per_principal` each): a session opened on one node
//! continues on any other node, and after a restart.
//!
//! Invariants: no MCP message reaches a handler without every check
//! passing; a principal never holds more than its streams limit (the slot
//! is held by the answer's body, until it ends); when the daemon's shutdown
//! begins, every session and event stream ends (rmcp's cancellation token
//! is a child of [`AppState::shutdown`]), so an agent's open stream never
//! holds the graceful shutdown open.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use super::error::mcp_session_not_found;
use super::limits::{StreamGuard, principal_key};
use super::requests::service;
use super::{ApiError, AppState};
use crate::mcp::WikiServer;
use crate::mcp::app_credentials::AppWikiCredentials;
use crate::mcp::context::{Binding, Context};
use crate::mcp::profile::{Profile, ServerKind};
use crate::mcp::sessions::{self, SessionsInDatabase, as_principal};
use crate::requests::Credential;

/// The `/mcp` route for `state`'s configuration and queue.
pub fn router(state: &AppState) -> Router<AppState> {
    let binding = Binding {
        config: state.config.clone(),
        profile: Profile {
            kind: ServerKind::Agent,
            read_only: false,
        },
        writer: None,
    };
    let requests = service(state);
    let mut context = Context::new(binding);
    // Private GitHub wikis are read with the App's read-only installation token.
    if let Some(forge) = requests.forges.github().cloned() {
        context = context.with_credentials(Arc::new(AppWikiCredentials::new(forge)));
    }
    let server = WikiServer::with_context(context.with_coordinator(requests)).remote();
    let mut hosts = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
        "[::1]".to_string(),
    ];
    if let Some(host) = state.config.server.public_url.as_deref().and_then(host_of) {
        hosts.push(host);
    }
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(true)
        .with_allowed_hosts(hosts)
        .with_max_request_body_bytes(256 * 1024)
        // Shutdown ends every session and stream (see `daemon::run_with`).
        .with_cancellation_token(state.shutdown.child_token());
    // A session continues on any node, and after a restart; a principal's
    // sessions beyond its cap end here and in the database.
    let local = Arc::new(LocalSessionManager::default());
    config.session_store = Some(Arc::new(
        SessionsInDatabase::new(
            state.pool.clone(),
            state.config.limits.mcp_sessions_per_principal,
        )
        .with_local(local.clone()),
    ));
    let service = StreamableHttpService::new(move || Ok(server.session()), local, config);
    Router::new()
        .route_service("/mcp", service)
        .route_layer(middleware::from_fn_with_state(state.clone(), guard))
}

/// The origin (`scheme://host[:port]`, lowercase, default port dropped) of a URL.
fn origin_of(url: &str) -> Option<String> {
    let url = url.trim().trim_end_matches('/').to_ascii_lowercase();
    let (scheme, rest) = url.split_once("://")?;
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let authority = rest.split('/').next()?;
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    let authority = match (scheme, authority.rsplit_once(':')) {
        ("http", Some((host, "80"))) | ("https", Some((host, "443"))) => host,
        _ => authority,
    };
    Some(format!("{scheme}://{authority}"))
}

/// The host (with port, if any) of a URL.
fn host_of(url: &str) -> Option<String> {
    origin_of(url).and_then(|o| o.split_once("://").map(|(_, a)| a.to_string()))
}

/// Is a request's `Origin` header value allowed?
pub fn origin_allowed(config: &crate::config::Config, origin: &str) -> bool {
    let Some(origin) = origin_of(origin) else {
        return false;
    };
    config
        .server
        .public_url
        .iter()
        .chain(config.api.allowed_origins.iter())
        .filter_map(|allowed| origin_of(allowed))
        .any(|allowed| allowed == origin)
}

async fn guard(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let text = |v: &axum::http::HeaderValue| v.to_str().unwrap_or("\u{0}").to_string();
    let origin = request.headers().get(header::ORIGIN).map(text);
    let authorization = request.headers().get(header::AUTHORIZATION).map(text);
    // rmcp reads the first Mcp-Session-Id, and only a textual one.
    let session = request
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let admitted = match admit(&state, origin.as_deref(), authorization.as_deref()).await {
        Ok(principal) => limit(&state, &principal, session.as_deref())
            .await
            .map(|admitted| (principal, admitted)),
        Err(e) => Err(e),
    };
    match admitted {
        Ok((principal, Admitted::Open(stream))) => {
            let key = principal_key(&principal);
            request.extensions_mut().insert(principal);
            let response = as_principal(key, next.run(request)).await;
            // The stream's slot is given back when its answer ends.
            response.map(|body| {
                Body::new(Holding {
                    inner: body,
                    _held: stream,
                })
            })
        }
        Ok((_, Admitted::NotYours)) => mcp_session_not_found(),
        Err(e) => {
            tracing::info!(
                code = e.code,
                status = e.status.as_u16(),
                "/mcp request refused"
            );
            e.into_response()
        }
    }
}

/// What the limits and the session check make of an authenticated request.
enum Admitted {
    /// Served, holding one of the principal's stream slots.
    Open(StreamGuard),
    /// It names a session that is not the principal's (or none at all).
    NotYours,
}

/// The principal's request rate, its session's owner, its open streams.
async fn limit(
    state: &AppState,
    principal: &crate::tokens::Principal,
    session: Option<&str>,
) -> Result<Admitted, ApiError> {
    let key = principal_key(principal);
    state.limits.check_rate(&key)?;
    if let Some(session) = session {
        match sessions::principal_of(&state.pool, session).await {
            Ok(Some(owner)) if owner == key => {}
            Ok(_) => return Ok(Admitted::NotYours),
            Err(e) if crate::db::is_unavailable(&e) => {
                return Err(ApiError::database_unavailable(&e));
            }
            Err(e) => return Err(ApiError::internal("MCP session lookup failed", &e)),
        }
    }
    Ok(Admitted::Open(state.limits.open_stream(&key)?))
}

/// A response body that holds `_held` until it is dropped.
struct Holding<T> {
    inner: Body,
    _held: T,
}

impl<T: Unpin + Send + 'static> hyper::body::Body for Holding<T> {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

async fn admit(
    state: &AppState,
    origin: Option<&str>,
    authorization: Option<&str>,
) -> Result<crate::tokens::Principal, ApiError> {
    if let Some(origin) = origin
        && !origin_allowed(&state.config, origin)
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "this Origin may not call /mcp; add it to api.allowed_origins or call without a browser",
        ));
    }
    let requests = service(state);
    // A token flooding past its rate is refused before it is looked up.
    state.limits.refuse_early(authorization)?;
    let principal = match requests.authenticate(&state.pool, authorization).await? {
        Credential::Api(principal) => principal,
        Credential::GitHub(owner) => requests.github_principal(&owner).await?,
    };
    state
        .limits
        .remember(authorization, &principal_key(&principal));
    Ok(principal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_compared_by_scheme_host_and_port() {
        assert_eq!(
            origin_of("https://Teammem.example.com/").as_deref(),
            Some("https://teammem.example.com")
        );
        assert_eq!(
            origin_of("https://a.example:443").as_deref(),
            Some("https://a.example")
        );
        assert_eq!(
            origin_of("http://a.example:8080/x").as_deref(),
            Some("http://a.example:8080")
        );
        assert_eq!(origin_of("null"), None);
        assert_eq!(origin_of("ftp://a.example"), None);
        assert_eq!(origin_of("https://user@a.example"), None);
    }
}
