//! The daemon's HTTP/1 server: hyper's connection builder under a bounded
//! accept loop, instead of `axum::serve`, which has no header-read timeout.
//!
//! Invariants: at most `max_connections` connections are served at once (the
//! rest wait in the listen backlog, unaccepted); a connection that has not
//! sent a whole request head within `header_timeout` is closed, including an
//! idle keep-alive one, so slow clients cannot hold a slot; every request is
//! answered (its head) within `request_timeout`, its body read included.
//! `/mcp`, whose answers are event streams, is kept apart: at most
//! `max_connections - reserved_connections` connections may ever carry an
//! `/mcp` request (a connection takes one of those slots with its first
//! `/mcp` request and keeps it until it closes; beyond them `/mcp` is
//! answered `503 mcp_capacity` and the connection closed), so dispatches,
//! health checks and the other routes always have `reserved_connections`
//! left, whatever `/mcp` clients hold; and every `/mcp` answer ends
//! `mcp_stream_lifetime` after its request arrived (clients reconnect). On
//! shutdown the listener is dropped first, then every connection finishes
//! its in-flight request and closes, and only then does [`serve`] return.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
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
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ApiError;

/// How the server bounds its clients (`[server]` in the configuration).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_timeout: Duration,
    pub request_timeout: Duration,
    pub max_connections: usize,
    /// Connections `/mcp` may never hold (less than `max_connections`).
    pub reserved_connections: usize,
    /// When an `/mcp` answer ends at the latest, from its request's arrival.
    pub mcp_stream_lifetime: Duration,
}

impl Limits {
    pub fn from_config(server: &crate::config::Server) -> Self {
        Self {
            header_timeout: server.header_timeout,
            request_timeout: server.request_timeout,
            max_connections: server.max_connections,
            reserved_connections: server.reserved_connections,
            mcp_stream_lifetime: server.mcp_stream_lifetime,
        }
    }

    /// How many connections may carry `/mcp` requests: all but the reserve,
    /// and at least one.
    fn mcp_connections(&self) -> usize {
        self.max_connections
            .saturating_sub(self.reserved_connections)
            .max(1)
    }
}

/// Whether a request is for `/mcp`.
fn is_mcp(path: &str) -> bool {
    path == "/mcp" || path.starts_with("/mcp/")
}

/// The address a connection was accepted on (this end of it), put beside
/// axum's `ConnectInfo` (the peer's) in every request's extensions: the
/// dashboard needs both to find who owns the peer's socket.
#[derive(Debug, Clone, Copy)]
pub struct LocalAddr(pub std::net::SocketAddr);

/// Serves `router` on `listener` until `shutdown` completes, then drains.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let router = router.layer(axum::middleware::from_fn_with_state(
        limits,
        request_deadline,
    ));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // Taken by a connection with its first /mcp request, kept until it closes.
    let mcp_slots = Arc::new(Semaphore::new(limits.mcp_connections()));
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
        let local = stream.local_addr().ok();
        let router = router.clone();
        let mcp_slots = mcp_slots.clone();
        // This connection's /mcp slot, once it sent an /mcp request; dropped
        // with the connection (the service owns it).
        let mcp_slot: Mutex<Option<OwnedSemaphorePermit>> = Mutex::new(None);
        let service =
            hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
                let refused = is_mcp(request.uri().path()) && !take_mcp_slot(&mcp_slot, &mcp_slots);
                request.extensions_mut().insert(ConnectInfo(peer));
                if let Some(local) = local {
                    request.extensions_mut().insert(LocalAddr(local));
                }
                let mut router = router.clone();
                async move {
                    if refused {
                        return Ok(mcp_capacity(limits.reserved_connections));
                    }
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

/// Takes an `/mcp` slot for a connection that holds none yet; `false` when
/// every slot is taken.
fn take_mcp_slot(slot: &Mutex<Option<OwnedSemaphorePermit>>, slots: &Arc<Semaphore>) -> bool {
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_none() {
        match slots.clone().try_acquire_owned() {
            Ok(permit) => *slot = Some(permit),
            Err(_) => return false,
        }
    }
    true
}

/// `503 mcp_capacity`, and the connection closed: it holds no `/mcp` slot,
/// and a client that keeps it open must not keep a reserved one either.
fn mcp_capacity(reserved: usize) -> Response {
    let mut response = ApiError::mcp_capacity(reserved).into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Answers 408 when a request's answer (reading its body included) has
/// not begun by the deadline; an `/mcp` answer, an event stream, also ends
/// at `mcp_stream_lifetime`.
async fn request_deadline(State(limits): State<Limits>, request: Request, next: Next) -> Response {
    let deadline = limits.request_timeout;
    let mcp = is_mcp(request.uri().path());
    let ends_at = tokio::time::Instant::now() + limits.mcp_stream_lifetime;
    match tokio::time::timeout(deadline, next.run(request)).await {
        Ok(response) if mcp => response.map(|body| {
            Body::new(Lifetime {
                inner: body,
                end: Box::pin(tokio::time::sleep_until(ends_at)),
                ended: false,
            })
        }),
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

/// A response body that ends (cleanly, as if the stream were over) at
/// `end`; what it wraps is dropped then, with whatever that holds.
struct Lifetime {
    inner: Body,
    end: Pin<Box<tokio::time::Sleep>>,
    ended: bool,
}

impl hyper::body::Body for Lifetime {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if this.end.as_mut().poll(cx).is_ready() {
            this.ended = true;
            this.inner = Body::empty();
            crate::metrics::MCP_STREAMS_EXPIRED.inc(&[]);
            return Poll::Ready(None);
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        if self.ended {
            hyper::body::SizeHint::with_exact(0)
        } else {
            self.inner.size_hint()
        }
    }
}
