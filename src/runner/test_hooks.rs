//! Test builds only: a hold point that lets an integration test stop the real
//! `teammem serve` process's builtin agent just before each wiki write, so the
//! test can act while a job is known to be running (move the wiki under it,
//! queue more dispatches behind it, SIGKILL the daemon) without racing it.
//!
//! The handshake is two files per hold in the directory named by
//! [`HOLD_DIR`]: the agent creates `held-N` (N counts the holds of this
//! process from 1; the file holds the write attempt, 0 or 1) and waits until
//! the test creates `release-N`.
//!
//! Invariant: this module exists only with the cargo feature `test-hooks`,
//! which `cargo test` switches on through the crate's dev-dependency on itself
//! and no `cargo build` (debug or release) does; a deployed binary has no hold
//! point and never reads the variable.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{Hook, Runner};

/// Names the directory of the handshake files; when set, the builtin agent
/// holds before each write attempt.
pub const HOLD_DIR: &str = "TEAMMEM_TEST_HOLD_DIR";

/// How often a held agent looks for its release file.
const POLL: Duration = Duration::from_millis(10);

/// `runner`, holding before each builtin write when [`HOLD_DIR`] is set.
pub fn from_env(runner: Runner) -> Runner {
    let Some(dir) = std::env::var_os(HOLD_DIR).map(PathBuf::from) else {
        return runner;
    };
    tracing::warn!(dir = %dir.display(), "test hook: the builtin agent holds before each write");
    let holds = Arc::new(AtomicU64::new(0));
    let hook: Hook = Arc::new(move |attempt| {
        let n = holds.fetch_add(1, Ordering::SeqCst) + 1;
        let held = dir.join(format!("held-{n}"));
        let release = dir.join(format!("release-{n}"));
        Box::pin(async move {
            // Written aside and renamed, so the test never reads it half-written.
            let aside = held.with_extension("tmp");
            let announced = std::fs::write(&aside, attempt.to_string())
                .and_then(|()| std::fs::rename(&aside, &held));
            if let Err(error) = announced {
                tracing::error!(%error, "test hook: cannot announce the hold; not holding");
                return;
            }
            while !release.exists() {
                tokio::time::sleep(POLL).await;
            }
        })
    });
    runner.with_write_hook(hook)
}
