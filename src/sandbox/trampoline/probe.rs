//! `teammem sandbox-exec --probe`: whether this machine lets the trampoline
//! build an agent's namespaces, tried in a short-lived child.
//!
//! Invariant: the probe builds the same namespaces and root the agent would
//! get, in forked children that exit, so the probing process itself stays
//! outside them.

use std::io;
use std::path::Path;

use crate::sandbox::namespaces;

use super::report::{exit_code, say};

pub(super) fn probe_namespaces() -> u8 {
    // SAFETY (libc calls here): syscalls with integer arguments or
    // pointers to locals; `_exit` ends a child.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let outer = unsafe { libc::fork() };
    if outer == 0 {
        if let Err(e) = namespaces::enter(uid, gid) {
            say(&e);
            unsafe { libc::_exit(1) };
        }
        let init = unsafe { libc::fork() };
        if init == 0 {
            let code = match namespaces::build_root(&[], MIN_PROBE_PIDS, Path::new("/")) {
                Ok(true) => 0,
                Ok(false) if uid != 0 => 0,
                Ok(false) => {
                    say(
                        "this kernel keeps one pid_max for all PID namespaces (per-namespace pid_max needs Linux 6.14), so a daemon running as root cannot bound its agent's processes; run teammem as an unprivileged user or upgrade the kernel",
                    );
                    1
                }
                Err(e) => {
                    say(&e);
                    1
                }
            };
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        let code = if init > 0 && unsafe { libc::waitpid(init, &mut status, 0) } == init {
            exit_code(status)
        } else {
            1
        };
        unsafe { libc::_exit(code as i32) };
    }
    let mut status = 0;
    if outer > 0 && unsafe { libc::waitpid(outer, &mut status, 0) } == outer {
        exit_code(status)
    } else {
        say(&format!("cannot fork: {}", io::Error::last_os_error()));
        1
    }
}

/// The `pid_max` the probe sets in its own short-lived namespace.
const MIN_PROBE_PIDS: u32 = crate::sandbox::MIN_MAX_PROCESSES;
