//! The retry policy: how long a job waits before its next attempt. Pure
//! functions; the randomness is passed in so the schedule can be tested.
//!
//! Invariant: the delay after attempt `n` is the nominal delay
//! `min(30 s × 2^(n-1), 1 h)` with "equal jitter": uniformly in
//! `[nominal / 2, nominal]`, so it never exceeds the cap and never collapses
//! to zero (jitter spreads retries of jobs that failed together, e.g. during a
//! GitHub outage).

use std::time::Duration;

use rand::Rng;

/// The nominal delay after the first failed attempt.
pub const BACKOFF_BASE: Duration = Duration::from_secs(30);

/// No retry waits longer than this.
pub const BACKOFF_CAP: Duration = Duration::from_secs(60 * 60);

/// The delay before retrying after attempt `attempt` (1-based) failed,
/// without jitter. Attempt 0 is treated as 1.
pub fn nominal_backoff(attempt: u32) -> Duration {
    // 2^7 × 30 s already exceeds the cap; clamping the exponent avoids overflow.
    let exponent = attempt.saturating_sub(1).min(16);
    BACKOFF_BASE
        .saturating_mul(1u32 << exponent)
        .min(BACKOFF_CAP)
}

/// The delay before retrying after attempt `attempt` failed: the nominal
/// delay with jitter, in `[nominal / 2, nominal]`, whole milliseconds.
pub fn backoff(attempt: u32, rng: &mut impl Rng) -> Duration {
    let nominal_ms = u64::try_from(nominal_backoff(attempt).as_millis()).unwrap_or(u64::MAX);
    let jittered = rng.random_range(nominal_ms / 2..=nominal_ms);
    Duration::from_millis(jittered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn nominal_schedule_doubles_from_30s_and_caps_at_one_hour() {
        let schedule: Vec<u64> = (1..=10).map(|n| nominal_backoff(n).as_secs()).collect();
        assert_eq!(
            schedule,
            [30, 60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]
        );
        assert_eq!(nominal_backoff(0), BACKOFF_BASE);
        assert_eq!(nominal_backoff(u32::MAX), BACKOFF_CAP);
    }

    #[test]
    fn jitter_stays_within_half_and_full_nominal_delay() {
        let mut rng = StdRng::seed_from_u64(7);
        for attempt in 1..=12 {
            let nominal = nominal_backoff(attempt);
            for _ in 0..200 {
                let delay = backoff(attempt, &mut rng);
                assert!(
                    delay >= nominal / 2,
                    "attempt {attempt}: {delay:?} < half of {nominal:?}"
                );
                assert!(
                    delay <= nominal,
                    "attempt {attempt}: {delay:?} > {nominal:?}"
                );
                assert!(delay <= BACKOFF_CAP);
            }
        }
    }

    #[test]
    fn jitter_actually_spreads_delays() {
        let mut rng = StdRng::seed_from_u64(11);
        let delays: std::collections::BTreeSet<Duration> =
            (0..50).map(|_| backoff(3, &mut rng)).collect();
        assert!(delays.len() > 40, "only {} distinct delays", delays.len());
        let min = *delays.first().unwrap();
        let max = *delays.last().unwrap();
        // 120 s nominal: the spread should cover most of [60 s, 120 s]
        assert!(min < Duration::from_secs(70) && max > Duration::from_secs(110));
    }

    #[test]
    fn same_seed_gives_same_schedule() {
        let mut first = StdRng::seed_from_u64(42);
        let mut second = StdRng::seed_from_u64(42);
        let a: Vec<Duration> = (1..=8).map(|n| backoff(n, &mut first)).collect();
        let b: Vec<Duration> = (1..=8).map(|n| backoff(n, &mut second)).collect();
        assert_eq!(a, b);
    }
}
