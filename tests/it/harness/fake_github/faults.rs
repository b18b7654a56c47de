//! Injected faults: the middleware that records every request (and every use
//! of a bearer token) and answers the next request matching a path with the
//! fault queued for it (5xx, 429 + Retry-After, rate-limit exhaustion, a hang).
//! A fault is used once: it never answers a second request.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;

use super::{AppState, FakeGitHub, bearer, error, now};

#[derive(Debug, Clone)]
pub enum Fault {
    /// Answer with this status (5xx, 403, ...).
    Status(u16),
    /// 503 with `Retry-After: secs`.
    Unavailable { retry_after: u64 },
    /// 429 with `Retry-After: secs`.
    TooManyRequests { retry_after: u64 },
    /// 403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset: now + secs`.
    RateLimitExhausted { reset_in: u64 },
    /// Never answer (until the fake is dropped); `hung` counts these.
    Hang,
}

pub(super) async fn record_and_inject(
    State(s): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path().to_string();
    let fault = {
        let mut inner = s.inner.lock().unwrap();
        inner.requests.push(format!("{} {}", req.method(), path));
        if let Some(token) = bearer(req.headers()) {
            inner
                .token_uses
                .push((token, format!("{} {}", req.method(), path)));
        }
        let target = req
            .uri()
            .path_and_query()
            .map(|pq| pq.as_str())
            .unwrap_or(&path);
        inner.targets.push(format!("{} {target}", req.method()));
        let pos = inner.faults.iter().position(|(p, exact, _)| {
            if *exact {
                path == *p
            } else {
                path.contains(p.as_str())
            }
        });
        pos.and_then(|i| inner.faults.remove(i)).map(|(_, _, f)| f)
    };
    match fault {
        None => next.run(req).await,
        Some(Fault::Status(code)) => error(StatusCode::from_u16(code).unwrap(), "injected fault"),
        Some(Fault::Unavailable { retry_after }) => {
            let mut r = error(
                StatusCode::SERVICE_UNAVAILABLE,
                "No server is currently available to service your request.",
            );
            r.headers_mut()
                .insert("retry-after", retry_after.to_string().parse().unwrap());
            r
        }
        Some(Fault::TooManyRequests { retry_after }) => {
            let mut r = error(StatusCode::TOO_MANY_REQUESTS, "secondary rate limit");
            r.headers_mut()
                .insert("retry-after", retry_after.to_string().parse().unwrap());
            r
        }
        Some(Fault::RateLimitExhausted { reset_in }) => {
            let mut r = error(StatusCode::FORBIDDEN, "API rate limit exceeded");
            let h = r.headers_mut();
            h.insert("x-ratelimit-limit", "5000".parse().unwrap());
            h.insert("x-ratelimit-remaining", "0".parse().unwrap());
            h.insert(
                "x-ratelimit-reset",
                (now() + reset_in).to_string().parse().unwrap(),
            );
            r
        }
        Some(Fault::Hang) => {
            s.hung.notify_one();
            s.never.notified().await;
            error(StatusCode::INTERNAL_SERVER_ERROR, "unreachable")
        }
    }
}

impl FakeGitHub {
    /// The next request whose path contains `path_part` gets `fault`.
    pub fn inject(&self, path_part: &str, fault: Fault) {
        self.inner()
            .faults
            .push_back((path_part.to_string(), false, fault));
    }

    /// The next request for exactly `path` (no query) gets `fault`.
    pub fn inject_exact(&self, path: &str, fault: Fault) {
        self.inner()
            .faults
            .push_back((path.to_string(), true, fault));
    }

    /// Waits until a request is hanging on a `Fault::Hang`.
    pub async fn hung(&self) {
        self.shared.hung.notified().await;
    }
}
