//! How the trampoline speaks: one `teammem sandbox-exec:` line on stderr per
//! event, and the exit code a wait status becomes.
//!
//! Invariants: reporting never panics (a closed stderr must not stop the
//! tree from being killed); an agent's exit code passes through unchanged
//! and a signal `n` becomes `128 + n`.

use std::io::{self, Write};

use crate::sandbox::EXIT_SETUP;

pub(super) fn say(message: &str) {
    // Never panic on a closed stderr: the tree must still be killed.
    let _ = writeln!(io::stderr(), "teammem sandbox-exec: {message}");
}

pub(super) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

pub(super) fn exit_code(status: libc::c_int) -> u8 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status) as u8
    } else if libc::WIFSIGNALED(status) {
        128u8.saturating_add(libc::WTERMSIG(status) as u8)
    } else {
        EXIT_SETUP
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_pass_the_agents_status_through() {
        assert_eq!(exit_code(7 << 8), 7);
        assert_eq!(exit_code(libc::SIGKILL), 137);
    }
}
