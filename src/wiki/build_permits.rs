//! How many index builds (search or context) run at once in one process:
//! a build of a large wiki takes a core for about a second, and callers
//! asking for many different trees must not take every core.
//!
//! Invariant: at most [`MAX_CONCURRENT_BUILDS`] permits are held at once; a
//! waiter gives up at its call's deadline (a build queued for a caller that
//! has timed out would run for nobody); a permit is returned when dropped.

use std::sync::{Condvar, Mutex};
use std::time::Instant;

use super::error::WikiError;

/// Index builds (search or context) one process runs at once.
pub const MAX_CONCURRENT_BUILDS: usize = 2;

/// A counting semaphore whose waiters give up at their call's deadline: a
/// build queued for a caller that has timed out would run for nobody.
pub(super) struct Permits {
    free: Mutex<usize>,
    freed: Condvar,
}

/// One held permit, returned when dropped.
pub(super) struct Permit<'a>(&'a Permits);

impl Permits {
    pub(super) const fn new(count: usize) -> Self {
        Permits {
            free: Mutex::new(count),
            freed: Condvar::new(),
        }
    }

    pub(super) fn acquire(&self, deadline: Instant) -> Result<Permit<'_>, WikiError> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(super::timed_out());
            }
            free = self
                .freed
                .wait_timeout(free, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *free -= 1;
        Ok(Permit(self))
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

pub(super) static BUILD_PERMITS: Permits = Permits::new(MAX_CONCURRENT_BUILDS);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_permits_bound_concurrent_builds_and_give_up_at_the_deadline() {
        let permits = Permits::new(2);
        let (first, _second) = (
            permits
                .acquire(Instant::now() + std::time::Duration::from_secs(600))
                .unwrap(),
            permits
                .acquire(Instant::now() + std::time::Duration::from_secs(600))
                .unwrap(),
        );
        let error = permits.acquire(Instant::now()).err().unwrap();
        assert_eq!(error.kind, crate::wiki::ErrorKind::Timeout);
        drop(first);
        assert!(permits.acquire(Instant::now()).is_ok());
    }
}
