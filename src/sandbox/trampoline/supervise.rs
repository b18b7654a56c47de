//! The trampoline's own process, first phase to last: it contains itself
//! (non-dumpable, own session, child subreaper, SIGTERM on the daemon's
//! death), reads and checks the policy, starts the agent (through the
//! namespace init with `enforce`, as its direct child without), waits for
//! it, and kills the agent's whole tree.
//!
//! Invariants: stop requests and child exits are blocked before the daemon's
//! death is armed and before any fork, so none is lost; nothing is started
//! when the daemon is already gone or the kernel cannot enforce what the
//! policy needs ([`EXIT_UNENFORCEABLE`]); every way out of the wait kills the
//! tree first.

use std::ffi::OsString;
use std::io;

use crate::sandbox::{EXIT_SETUP, EXIT_UNENFORCEABLE, POLICY_ENV, Policy, probe};

use super::agent::child;
use super::exec::Exec;
use super::kill_tree::kill_tree;
use super::namespace_init::start_namespace_init;
use super::report::{errno, exit_code, say};

pub(super) fn run(argv: Vec<OsString>) -> u8 {
    // SAFETY (all libc calls in this function): plain syscalls on this
    // process with integer or locally owned pointer arguments.
    let original_parent = unsafe { libc::getppid() };
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0);
        // Fails only when already a group leader; the tree walk does not
        // depend on the session.
        libc::setsid();
    }
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        say(&format!(
            "cannot become a child subreaper: {}",
            io::Error::last_os_error()
        ));
        return EXIT_SETUP;
    }
    // Blocked before PDEATHSIG and fork so no stop request or child exit is
    // lost; sigwaitinfo takes them in order below.
    let mut waited: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut original_mask: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut waited);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGCHLD] {
            libc::sigaddset(&mut waited, sig);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &waited, &mut original_mask);
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            0,
            0,
            0,
        );
    }
    // The daemon may have died before PDEATHSIG was armed.
    if unsafe { libc::getppid() } != original_parent {
        say("the process that started the agent has exited; not starting it");
        return 128 + libc::SIGTERM as u8;
    }

    let policy = match read_policy() {
        Ok(p) => p,
        Err(e) => {
            say(&e);
            return EXIT_SETUP;
        }
    };
    if argv.is_empty() {
        say("no agent program given; usage: teammem sandbox-exec -- PROGRAM [ARGS...]");
        return EXIT_SETUP;
    }
    let missing = probe().missing(&policy);
    if !missing.is_empty() {
        say(&format!(
            "refusing to run the agent: {}; upgrade the kernel, or set agent.sandbox = \"off\" to run it unconfined",
            missing.join("; ")
        ));
        return EXIT_UNENFORCEABLE;
    }
    let exec = match Exec::prepare(&argv) {
        Ok(e) => e,
        Err(e) => {
            say(&e);
            return EXIT_SETUP;
        }
    };
    let me = unsafe { libc::getpid() };
    // With `enforce` the agent runs in namespaces of its own: the
    // trampoline's first child is their init, which builds the agent's
    // root, confines and forks the agent. Otherwise the agent is the child.
    let child_pid = if policy.enforce {
        match start_namespace_init(&policy, &exec, &original_mask, original_parent) {
            Ok(init) => init,
            Err(code) => return code,
        }
    } else {
        let agent = unsafe { libc::fork() };
        if agent < 0 {
            say(&format!(
                "cannot fork the agent: {}",
                io::Error::last_os_error()
            ));
            return EXIT_SETUP;
        }
        if agent == 0 {
            child(me, &original_mask, None, &exec, None);
        }
        agent
    };
    let agent = child_pid;
    let in_namespaces = policy.enforce;
    let mut agent_status: Option<libc::c_int> = None;
    loop {
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let sig = unsafe { libc::sigwaitinfo(&waited, &mut info) };
        if sig < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            say(&format!(
                "waiting for signals failed: {}; stopping the agent",
                io::Error::last_os_error()
            ));
            kill_tree(me, agent, in_namespaces, &mut agent_status);
            return EXIT_SETUP;
        }
        if sig == libc::SIGCHLD {
            // Orphans reparented here are reaped too, or they would linger
            // as zombies while the agent runs.
            loop {
                let mut status = 0;
                let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
                if pid <= 0 {
                    break;
                }
                if pid == agent {
                    agent_status = Some(status);
                }
            }
            if let Some(status) = agent_status {
                kill_tree(me, agent, in_namespaces, &mut agent_status);
                return exit_code(status);
            }
        } else {
            kill_tree(me, agent, in_namespaces, &mut agent_status);
            return 128 + sig as u8;
        }
    }
}

fn read_policy() -> Result<Policy, String> {
    let text = std::env::var(POLICY_ENV).map_err(|_| {
        format!("{POLICY_ENV} is not set; this command is started by the teammem daemon only")
    })?;
    let policy: Policy = serde_json::from_str(&text)
        .map_err(|e| format!("{POLICY_ENV} is not a valid sandbox policy: {e}"))?;
    policy.validate()?;
    Ok(policy)
}
