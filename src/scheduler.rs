//! The cron scheduler: runs the queue's housekeeping at the times `[schedule]` gives.
//!
//! Each schedule is its own task that sleeps until its next fire time, runs its
//! work, and repeats until shutdown. A run that takes longer than the interval
//! does not pile up: the next fire time is computed after the run ends.
//! The sweep for missed pushes (`sweep.rs`) also runs once shortly after
//! start; the daemon schedules it only when a source asks for it.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The next fire time of `schedule` strictly after `now`, and how long until it.
pub fn next_fire(
    schedule: &cron::Schedule,
    now: DateTime<Utc>,
) -> Option<(DateTime<Utc>, Duration)> {
    let next = schedule.after(&now).next()?;
    let wait = (next - now).to_std().unwrap_or(Duration::ZERO);
    Some((next, wait))
}

/// Running schedules; dropped or shut down together.
pub struct Scheduler {
    tasks: JoinSet<()>,
    stop: watch::Sender<bool>,
}

impl Default for Scheduler {
    fn default() -> Self {
        Self::new()
    }
}

impl Scheduler {
    pub fn new() -> Scheduler {
        Scheduler {
            tasks: JoinSet::new(),
            stop: watch::channel(false).0,
        }
    }

    /// Runs `work` at every fire time of `schedule` until shutdown.
    pub fn every<F, Fut>(&mut self, name: &'static str, schedule: cron::Schedule, work: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        self.spawn(name, None, schedule, work);
    }

    /// Runs `work` once `first_run` after now, then at every fire time of
    /// `schedule` until shutdown (the sweep: pushes missed while the daemon
    /// was down are found without waiting for the first fire time). Runs
    /// never overlap: both are made by one task.
    pub fn after_start_and_every<F, Fut>(
        &mut self,
        name: &'static str,
        first_run: Duration,
        schedule: cron::Schedule,
        work: F,
    ) where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        self.spawn(name, Some(first_run), schedule, work);
    }

    fn spawn<F, Fut>(
        &mut self,
        name: &'static str,
        first_run: Option<Duration>,
        schedule: cron::Schedule,
        mut work: F,
    ) where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        let mut stop = self.stop.subscribe();
        self.tasks.spawn(async move {
            if let Some(wait) = first_run {
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.changed() => return,
                }
                tracing::debug!(schedule = name, "run after start");
                work().await;
            }
            loop {
                let Some((_, wait)) = next_fire(&schedule, Utc::now()) else {
                    tracing::warn!(
                        schedule = name,
                        "schedule has no future fire time; it stops"
                    );
                    return;
                };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.changed() => return,
                }
                tracing::debug!(schedule = name, "scheduled run");
                work().await;
            }
        });
    }

    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn next_fire_is_strictly_after_now() {
        let every_15s: cron::Schedule = "*/15 * * * * *".parse().unwrap();
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 15).unwrap();
        let (at, wait) = next_fire(&every_15s, now).unwrap();
        assert_eq!(at, Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 30).unwrap());
        assert_eq!(wait, Duration::from_secs(15));

        let nightly: cron::Schedule = "0 0 3 * * *".parse().unwrap();
        let (at, _) = next_fire(&nightly, now).unwrap();
        assert_eq!(at, Utc.with_ymd_and_hms(2026, 1, 1, 3, 0, 0).unwrap());
    }

    /// The first run comes after `first_run`, not at the schedule's first
    /// fire time (here next new year); shutdown ends a schedule whose first
    /// run is still pending, without running it.
    #[tokio::test]
    async fn after_start_runs_once_before_the_first_fire_time_and_stops_on_shutdown() {
        let yearly: cron::Schedule = "0 0 0 1 1 *".parse().unwrap();
        let (ran, mut runs) = tokio::sync::mpsc::unbounded_channel();
        let mut scheduler = Scheduler::new();
        scheduler.after_start_and_every("soon", Duration::ZERO, yearly.clone(), move || {
            let ran = ran.clone();
            async move {
                let _ = ran.send("soon");
            }
        });
        let (late, mut late_runs) = tokio::sync::mpsc::unbounded_channel();
        scheduler.after_start_and_every("late", Duration::from_secs(3600), yearly, move || {
            let late = late.clone();
            async move {
                let _ = late.send("late");
            }
        });
        let first = tokio::time::timeout(Duration::from_secs(30), runs.recv()).await;
        assert_eq!(first.expect("the first run within 30 s"), Some("soon"));
        tokio::time::timeout(Duration::from_secs(30), scheduler.shutdown())
            .await
            .expect("shutdown ends pending schedules");
        assert_eq!(late_runs.try_recv().ok(), None);
        assert_eq!(runs.try_recv().ok(), None);
    }
}
