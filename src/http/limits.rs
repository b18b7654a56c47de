//! Per-principal limits on the authenticated routes (`[limits]`): a token
//! bucket of requests per principal, and a count of the `/mcp` requests and
//! event streams each principal holds open.
//!
//! A principal is an API token (`token:NAME`, its primary key) or, for a
//! GitHub token, its owner's login (`github:LOGIN`): the key exists only
//! after authentication, so an unauthenticated caller cannot spend anyone
//! else's allowance.
//!
//! Invariants: a principal never gets more than `request_burst` requests
//! past the bucket at once, nor more than `requests_per_second` a second
//! over time; it never holds more than `mcp_streams_per_principal` streams
//! (a [`StreamGuard`] is the only way to hold one, and dropping it, when
//! the response body ends, gives it back). Memory stays bounded by the
//! principals active in the last few seconds.
//!
//! A flood of requests with a valid token is refused before its token is
//! looked up again: a token seen to authenticate is remembered (its
//! SHA-256, never the token) with its principal, and while that principal's
//! bucket is empty its requests are answered `429` at once, without a
//! database query. Nothing is granted this way, only refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::ApiError;
use crate::config::Limits;
use crate::tokens::Principal;

/// The limiter key of an authenticated principal.
pub fn principal_key(principal: &Principal) -> String {
    // Token names never hold a colon (tokens::valid_name), so the two kinds
    // cannot collide.
    if principal.name.starts_with("github:") {
        principal.name.clone()
    } else {
        format!("token:{}", principal.name)
    }
}

/// The SHA-256 of an `Authorization: Bearer` header's token.
fn bearer_hash(authorization: &str) -> Option<[u8; 32]> {
    use sha2::Digest;
    let token = crate::tokens::bearer_token(authorization)?;
    Some(sha2::Sha256::digest(token.as_bytes()).into())
}

/// Above this many buckets, full (idle) ones are dropped.
const PRUNE_ABOVE: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The daemon's per-principal limits; one per process, shared by every route.
#[derive(Debug)]
pub struct PrincipalLimits {
    config: Limits,
    buckets: Mutex<HashMap<String, Bucket>>,
    streams: Arc<Mutex<HashMap<String, usize>>>,
    /// SHA-256 of a presented bearer token → the principal it authenticated as.
    seen: Mutex<HashMap<[u8; 32], String>>,
}

impl PrincipalLimits {
    pub fn new(config: Limits) -> PrincipalLimits {
        PrincipalLimits {
            config,
            buckets: Mutex::default(),
            streams: Arc::default(),
            seen: Mutex::default(),
        }
    }

    pub fn config(&self) -> &Limits {
        &self.config
    }

    /// Takes one request from `key`'s bucket, or answers `429 rate_limited`
    /// with the seconds until one is back.
    pub fn check_rate(&self, key: &str) -> Result<(), ApiError> {
        self.take_at(key, Instant::now())
            .map_err(|wait| self.rate_limited(wait))
    }

    /// Refuses, before authentication, a request whose bearer token was seen
    /// to authenticate as a principal whose bucket is empty now; takes
    /// nothing from the bucket (the request authenticates as usual after).
    pub fn refuse_early(&self, authorization: Option<&str>) -> Result<(), ApiError> {
        let Some(hash) = authorization.and_then(bearer_hash) else {
            return Ok(());
        };
        let key = {
            let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            match seen.get(&hash) {
                Some(key) => key.clone(),
                None => return Ok(()),
            }
        };
        match self.empty_for(&key, Instant::now()) {
            None => Ok(()),
            Some(wait) => Err(self.rate_limited(wait)),
        }
    }

    /// Remembers that `authorization`'s token authenticated as `key`.
    pub fn remember(&self, authorization: Option<&str>, key: &str) {
        let Some(hash) = authorization.and_then(bearer_hash) else {
            return;
        };
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        // Tokens are few; a revoked one's entry only ever refuses.
        if seen.len() >= PRUNE_ABOVE && !seen.contains_key(&hash) {
            seen.clear();
        }
        seen.insert(hash, key.to_string());
    }

    /// How long until `key`'s bucket holds a request again, if it is empty.
    fn empty_for(&self, key: &str, now: Instant) -> Option<Duration> {
        let rate = f64::from(self.config.requests_per_second);
        let buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = buckets.get(key)?;
        let tokens = bucket.tokens + now.saturating_duration_since(bucket.at).as_secs_f64() * rate;
        (tokens < 1.0).then(|| Duration::from_secs_f64((1.0 - tokens) / rate))
    }

    fn rate_limited(&self, wait: Duration) -> ApiError {
        ApiError::too_many_requests(
            "rate",
            "rate_limited",
            format!(
                "too many requests with this token ({} a second, bursts of {}: limits.requests_per_second, limits.request_burst); retry after the Retry-After seconds",
                self.config.requests_per_second, self.config.request_burst
            ),
            wait.as_secs_f64().ceil() as u64,
        )
    }

    /// The bucket at `now`: `Ok` with one request taken, or how long until
    /// one is back.
    fn take_at(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let rate = f64::from(self.config.requests_per_second);
        let burst = f64::from(self.config.request_burst);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() > PRUNE_ABOVE {
            buckets.retain(|_, b| {
                b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate < burst
            });
        }
        let bucket = buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let refilled = now.saturating_duration_since(bucket.at).as_secs_f64() * rate;
        bucket.tokens = (bucket.tokens + refilled).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / rate))
        }
    }

    /// One more open `/mcp` request or stream for `key`, or `429
    /// too_many_streams` when it holds its limit already.
    pub fn open_stream(&self, key: &str) -> Result<StreamGuard, ApiError> {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        let open = streams.entry(key.to_string()).or_insert(0);
        if *open >= self.config.mcp_streams_per_principal {
            let held = *open;
            drop(streams);
            return Err(ApiError::too_many_requests(
                "mcp_streams",
                "too_many_streams",
                format!(
                    "this token holds {held} open /mcp requests and event streams, its limit (limits.mcp_streams_per_principal); close one, or retry after the Retry-After seconds"
                ),
                1,
            ));
        }
        *open += 1;
        Ok(StreamGuard {
            key: key.to_string(),
            streams: self.streams.clone(),
        })
    }
}

/// One open `/mcp` request or stream of a principal; dropping it gives the
/// slot back.
#[derive(Debug)]
pub struct StreamGuard {
    key: String,
    streams: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = streams.get_mut(&self.key) {
            *open -= 1;
            if *open == 0 {
                streams.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(rate: u32, burst: u32, streams: usize) -> PrincipalLimits {
        PrincipalLimits::new(Limits {
            requests_per_second: rate,
            request_burst: burst,
            mcp_streams_per_principal: streams,
            ..Limits::default()
        })
    }

    #[test]
    fn a_bucket_passes_its_burst_then_its_rate_per_principal() {
        let l = limits(10, 3, 1);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(l.take_at("token:a", t0).is_ok());
        }
        let wait = l.take_at("token:a", t0).expect_err("the burst is spent");
        assert_eq!(wait, Duration::from_millis(100));
        // Another principal has its own bucket.
        assert!(l.take_at("token:b", t0).is_ok());
        // One request back after a tenth of a second, not two.
        let t1 = t0 + Duration::from_millis(100);
        assert!(l.take_at("token:a", t1).is_ok());
        assert!(l.take_at("token:a", t1).is_err());
        // An idle second refills to the burst, never beyond.
        let t2 = t1 + Duration::from_secs(10);
        for _ in 0..3 {
            assert!(l.take_at("token:a", t2).is_ok());
        }
        assert!(l.take_at("token:a", t2).is_err());
        let refused = l.check_rate("token:a").expect_err("still spent");
        assert_eq!(refused.status.as_u16(), 429);
        assert_eq!(refused.code, "rate_limited");
        assert_eq!(refused.retry_after, Some(1));
    }

    #[test]
    fn a_seen_token_is_refused_early_only_while_its_bucket_is_empty() {
        let l = limits(1, 2, 1);
        let bearer = Some("Bearer tmm_abc");
        // Unknown tokens are never refused early.
        assert!(l.refuse_early(bearer).is_ok());
        l.remember(bearer, "token:a");
        assert!(l.refuse_early(bearer).is_ok(), "no bucket yet");
        l.check_rate("token:a").unwrap();
        assert!(l.refuse_early(bearer).is_ok(), "one left");
        l.check_rate("token:a").unwrap();
        let refused = l.refuse_early(bearer).expect_err("empty now");
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (429, "rate_limited")
        );
        assert!(l.refuse_early(Some("Bearer tmm_other")).is_ok());
        assert!(l.refuse_early(None).is_ok());
    }

    #[test]
    fn streams_are_counted_per_principal_and_given_back_on_drop() {
        let l = limits(10, 10, 2);
        let a1 = l.open_stream("token:a").unwrap();
        let _a2 = l.open_stream("token:a").unwrap();
        let refused = l.open_stream("token:a").expect_err("the third");
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (429, "too_many_streams")
        );
        let _b = l.open_stream("github:b").unwrap();
        drop(a1);
        let _a3 = l.open_stream("token:a").unwrap();
    }

    #[test]
    fn principal_keys_keep_tokens_and_github_logins_apart() {
        let p = |name: &str| Principal {
            name: name.into(),
            repositories: vec![],
        };
        assert_eq!(principal_key(&p("ops")), "token:ops");
        assert_eq!(principal_key(&p("github:octocat")), "github:octocat");
    }
}
