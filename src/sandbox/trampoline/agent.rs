//! The forked agent process, from the fork to `execve`: default signal
//! dispositions and the original mask, death with its parent, its resource
//! limits, its confinement, then the exec.
//!
//! Invariant: with a ruleset the agent is never exec'd unconfined: a failure
//! to limit or confine it exits [`EXIT_UNENFORCEABLE`] before `execve`; a
//! program that cannot be executed exits [`EXIT_EXEC`].

use std::io;

use landlock::RulesetCreated;

use crate::sandbox::{EXIT_EXEC, EXIT_UNENFORCEABLE};

use super::confine::confine;
use super::exec::Exec;
use super::report::{errno, say};

/// The forked child: never returns. Only syscalls and a little formatting
/// on failure (the trampoline has one thread, so allocation is safe).
pub(super) fn child(
    parent: libc::pid_t,
    original_mask: &libc::sigset_t,
    ruleset: Option<RulesetCreated>,
    exec: &Exec,
    limits: Option<(u32, u64)>,
) -> ! {
    let enforce = ruleset.is_some();
    // SAFETY (all libc calls here): syscalls with integer arguments or
    // pointers into memory this child owns; `_exit` ends the child.
    unsafe {
        // The agent starts with default dispositions (the Rust runtime
        // ignores SIGPIPE, and ignored signals survive exec) and the mask
        // the trampoline was started with.
        for sig in 1..=libc::SIGRTMAX() {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        libc::sigprocmask(libc::SIG_SETMASK, original_mask, std::ptr::null_mut());
        // If the trampoline is SIGKILLed, the agent dies with it.
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() != parent {
            libc::_exit(128 + libc::SIGKILL);
        }
    }
    if let Some((max_processes, max_memory_bytes)) = limits
        && let Err(e) = limit_resources(max_processes, max_memory_bytes)
    {
        say(&format!("refusing to run the agent unconfined: {e}"));
        unsafe { libc::_exit(EXIT_UNENFORCEABLE as i32) };
    }
    if let Some(ruleset) = ruleset
        && let Err(e) = confine(ruleset)
    {
        say(&format!("refusing to run the agent unconfined: {e}"));
        unsafe { libc::_exit(EXIT_UNENFORCEABLE as i32) };
    }
    let mut error = libc::ENOENT;
    let mut denied = false;
    for candidate in &exec.candidates {
        unsafe {
            libc::execve(
                candidate.as_ptr(),
                exec.argv_ptrs.as_ptr(),
                exec.envp_ptrs.as_ptr(),
            )
        };
        error = errno();
        match error {
            libc::EACCES => denied = true,
            libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ELOOP | libc::ENAMETOOLONG => {}
            _ => break,
        }
    }
    if denied && matches!(error, libc::ENOENT | libc::ENOTDIR) {
        error = libc::EACCES;
    }
    let hint = if matches!(error, libc::EACCES | libc::ENOENT) && enforce {
        " (is its directory in agent.read_paths? the sandboxed agent sees only the system directories and those)"
    } else if error == libc::ENOENT {
        " (check agent.argv and PATH)"
    } else {
        ""
    };
    say(&format!(
        "cannot execute {}: {}{hint}",
        exec.name,
        io::Error::from_raw_os_error(error)
    ));
    unsafe { libc::_exit(EXIT_EXEC as i32) }
}

/// The agent's own limits, inherited by everything it starts: at most
/// `max_processes` processes of its uid in its user namespace
/// (`RLIMIT_NPROC`; the kernel ignores it for root, whose agents the PID
/// namespace's `pid_max` bounds instead), `max_memory_bytes` of private
/// writable memory per process (`RLIMIT_DATA`, 0: none), no core files.
fn limit_resources(max_processes: u32, max_memory_bytes: u64) -> Result<(), String> {
    let set = |resource, value: u64, what: &str| {
        let limit = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(format!(
                "cannot limit the agent's {what}: {}",
                io::Error::last_os_error()
            ));
        }
        Ok(())
    };
    set(libc::RLIMIT_NPROC, u64::from(max_processes), "processes")?;
    if max_memory_bytes > 0 {
        set(libc::RLIMIT_DATA, max_memory_bytes, "memory")?;
    }
    set(libc::RLIMIT_CORE, 0, "core files")
}
