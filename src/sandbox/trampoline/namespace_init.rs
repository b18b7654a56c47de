//! With `enforce`: the trampoline enters a user, mount and PID namespace of
//! the agent's own (`namespaces.rs`) and forks their init, PID 1, which
//! builds the agent's root, forks the agent confined and reaps every orphan.
//!
//! Invariants: every failure to build the namespaces, the root, the
//! `pid_max` bound (when the daemon runs as root) or the Landlock ruleset
//! exits [`EXIT_UNENFORCEABLE`] before the agent is forked; the init dies
//! with the trampoline (PDEATHSIG, and a pipe for a death before that was
//! armed), and its exit takes every process left in the namespace along.

use std::io;
use std::path::Path;

use landlock::ABI;

use crate::sandbox::namespaces;
use crate::sandbox::{EXIT_SETUP, EXIT_UNENFORCEABLE, Policy, probe};

use super::agent::child;
use super::exec::Exec;
use super::report::{errno, exit_code, say};
use super::ruleset::build_ruleset;

/// Enters the agent's namespaces and forks their init; the trampoline
/// then waits for the init alone. `Err` is the exit code (nothing ran).
pub(super) fn start_namespace_init(
    policy: &Policy,
    exec: &Exec,
    original_mask: &libc::sigset_t,
    original_parent: libc::pid_t,
) -> Result<libc::pid_t, u8> {
    let paths: Vec<_> = policy
        .read_paths
        .iter()
        .chain(&policy.write_paths)
        .cloned()
        .collect();
    let cwd = std::env::current_dir().map_err(|e| {
        say(&format!("cannot read the working directory: {e}"));
        EXIT_SETUP
    })?;
    // SAFETY (libc calls here): plain syscalls with integer arguments or
    // pointers to locals.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    namespaces::enter(uid, gid).map_err(|e| {
        say(&format!("refusing to run the agent: {e}"));
        EXIT_UNENFORCEABLE
    })?;
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() != original_parent {
            say("the process that started the agent has exited; not starting it");
            return Err(128 + libc::SIGTERM as u8);
        }
    }
    // The init learns of the trampoline's death before its PDEATHSIG was
    // armed from this pipe: the trampoline's end stays open while it lives.
    let mut alive = [0 as libc::c_int; 2];
    if unsafe { libc::pipe2(alive.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        say(&format!(
            "cannot create a pipe: {}",
            io::Error::last_os_error()
        ));
        return Err(EXIT_SETUP);
    }
    let init = unsafe { libc::fork() };
    if init < 0 {
        say(&format!(
            "cannot fork the agent's namespace init: {}",
            io::Error::last_os_error()
        ));
        return Err(EXIT_SETUP);
    }
    if init == 0 {
        unsafe { libc::close(alive[1]) };
        namespace_init(policy, &paths, &cwd, exec, original_mask, uid, alive[0]);
    }
    // The write end is never written; it closes when the trampoline exits.
    unsafe { libc::close(alive[0]) };
    Ok(init)
}

/// PID 1 of the agent's namespace: builds the agent's root, forks the
/// agent confined, reaps every orphan, and exits with the agent's status
/// (its exit takes every process left in the namespace with it).
#[allow(clippy::too_many_arguments)]
fn namespace_init(
    policy: &Policy,
    paths: &[std::path::PathBuf],
    cwd: &Path,
    exec: &Exec,
    original_mask: &libc::sigset_t,
    uid: libc::uid_t,
    trampoline_alive: libc::c_int,
) -> ! {
    // SAFETY (libc calls here): syscalls with integer arguments or
    // pointers to locals; `_exit` ends this process.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        let mut poll = libc::pollfd {
            fd: trampoline_alive,
            events: libc::POLLIN,
            revents: 0,
        };
        if libc::poll(&mut poll, 1, 0) != 0 {
            libc::_exit(128 + libc::SIGKILL);
        }
    }
    let fail = |e: String| -> ! {
        say(&format!("refusing to run the agent: {e}"));
        unsafe { libc::_exit(EXIT_UNENFORCEABLE as i32) }
    };
    let pid_max =
        namespaces::build_root(paths, policy.max_processes, cwd).unwrap_or_else(|e| fail(e));
    if !pid_max && uid == 0 {
        fail(format!(
            "limiting the agent to agent.max_processes ({}) needs a per-namespace pid_max (Linux 6.14) when the daemon runs as root, and this kernel keeps one for all; run teammem as an unprivileged user (RLIMIT_NPROC then applies) or upgrade the kernel",
            policy.max_processes
        ));
    }
    let ruleset = build_ruleset(policy, ABI::from(probe().abi as i32)).unwrap_or_else(|e| fail(e));
    let agent = unsafe { libc::fork() };
    if agent < 0 {
        fail(format!(
            "cannot fork the agent: {}",
            io::Error::last_os_error()
        ));
    }
    if agent == 0 {
        child(
            1,
            original_mask,
            Some(ruleset),
            exec,
            Some((policy.max_processes, policy.max_memory_bytes)),
        );
    }
    drop(ruleset);
    loop {
        let mut status = 0;
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == agent {
            unsafe { libc::_exit(exit_code(status) as i32) };
        }
        if pid < 0 && errno() != libc::EINTR {
            unsafe { libc::_exit(EXIT_SETUP as i32) };
        }
    }
}
