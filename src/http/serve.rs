//! The daemon's HTTP/1 server: hyper's connection builder under a bounded
//! accept loop, instead of `axum::serve`, which has no header-read timeout.
//!
//! Invariants: at most `max_connections` connections are served at once (the
//! rest wait in the listen backlog, unaccepted); a connection that has not
//! sent a whole request head within `header_timeout` is closed, including an
//! idle keep-alive one, so slow clients cannot hold a slot; every request but
//! `/mcp` (whose event streams are long-lived) is answered within
//! `request_timeout`, its body read included. On shutdown the listener is
//! dropped first, then every connection finishes its in-flight request and
//! closes, and only then does [`serve`] return.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::ApiError;

/// How the server bounds its clients (`[server]` in the configuration).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_timeout: Duration,
    pub request_timeout: Duration,
    pub max_connections: usize,
}

impl Limits {
    pub fn from_config(server: &crate::config::Server) -> Self {
        Self {
            header_timeout: server.header_timeout,
            request_timeout: server.request_timeout,
            max_connections: server.max_connections,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then drains.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let router = router.layer(axum::middleware::from_fn_with_state(
        limits.request_timeout,
        request_deadline,
    ));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        // A slot first: beyond the limit, connections stay in the backlog.
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
        };
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(error).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let service =
            hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                let mut router = router.clone();
                async move {
                    let response =
                        tower_service::Service::call(&mut router, request.map(Body::new));
                    Ok::<_, Infallible>(response.await.unwrap_or_else(|never| match never {}))
                }
            });
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Accept errors are about one connection or a passing shortage (file
/// descriptors): log and back off briefly instead of spinning.
async fn accept_failed(error: std::io::Error) {
    use std::io::ErrorKind::*;
    if matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset | Interrupted
    ) {
        return;
    }
    tracing::error!(%error, "accepting a connection failed; retrying in a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Answers 408 when a request (reading its body included) outlives the
/// deadline; `/mcp` is exempt because its responses are event streams.
async fn request_deadline(
    State(deadline): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    if path == "/mcp" || path.starts_with("/mcp/") {
        return next.run(request).await;
    }
    match tokio::time::timeout(deadline, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            let mut response = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                format!(
                    "the request took longer than {} s (server.request_timeout_seconds); send it again, whole and promptly",
                    deadline.as_secs()
                ),
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            response
        }
    }
}
