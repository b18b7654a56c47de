//! `teammem sandbox-exec -- ARGV...`: the single-threaded process between the
//! daemon and the agent. It contains itself (non-dumpable, own session, child
//! subreaper, SIGTERM on the daemon's death). With `enforce` it enters a user,
//! mount and PID namespace of the agent's own (`namespaces.rs`) and forks
//! their init, which builds the agent's root and forks the agent; the agent
//! sets its resource limits, drops every capability, sets `no_new_privs`,
//! applies Landlock and execs ARGV. Without `enforce` the agent is its direct
//! child. Then it waits, and kills the agent's whole tree: SIGKILL to the
//! namespace's init (the kernel takes every process in it along), or a
//! `/proc` walk of its descendants when there are no namespaces.
//!
//! Invariants: with `enforce` the agent is never exec'd unconfined (every
//! failure to build its namespaces, limit it or confine it exits
//! [`EXIT_UNENFORCEABLE`](super::EXIT_UNENFORCEABLE) before exec); the trampoline never exits while a
//! descendant of it is alive; `TEAMMEM_SANDBOX_POLICY` is not in the agent's
//! environment. No tokio here: `fork` needs one thread.
//!
//! One phase per file (Linux only), in the order a run takes them:
//! - `supervise.rs`: the trampoline contains itself, reads the policy,
//!   starts the agent, waits;
//! - `exec.rs`: the agent's program, argv and environment, prepared before
//!   any fork;
//! - `namespace_init.rs`: with `enforce`, the namespaces entered and their
//!   init (PID 1), which builds the agent's root;
//! - `ruleset.rs`: the Landlock ruleset built from the policy;
//! - `agent.rs`: the forked agent: signals, limits, confinement, `execve`;
//! - `confine.rs`: `no_new_privs`, capabilities dropped, Landlock applied;
//! - `kill_tree.rs`: the agent's whole tree killed and reaped;
//! - `report.rs`: stderr lines and exit codes;
//! - `probe.rs`: `--probe`, whether the namespaces can be built here.

use std::ffi::OsString;
use std::process::ExitCode;

#[cfg(target_os = "linux")]
mod agent;
#[cfg(target_os = "linux")]
mod confine;
#[cfg(target_os = "linux")]
mod exec;
#[cfg(target_os = "linux")]
mod kill_tree;
#[cfg(target_os = "linux")]
mod namespace_init;
#[cfg(target_os = "linux")]
mod probe;
#[cfg(target_os = "linux")]
mod report;
#[cfg(target_os = "linux")]
mod ruleset;
#[cfg(target_os = "linux")]
mod supervise;

#[cfg(target_os = "linux")]
pub fn main(argv: Vec<OsString>) -> ExitCode {
    ExitCode::from(supervise::run(argv))
}

/// `teammem sandbox-exec --probe`: exit 0 when this machine lets the
/// trampoline build an agent's namespaces (user, mount, PID; a fresh `/proc`;
/// the pivot; `pid_max` when running as root), else 1 with the reason on stderr.
#[cfg(target_os = "linux")]
pub fn probe_main() -> ExitCode {
    ExitCode::from(probe::probe_namespaces())
}

#[cfg(not(target_os = "linux"))]
pub fn probe_main() -> ExitCode {
    ExitCode::from(1)
}

#[cfg(not(target_os = "linux"))]
pub fn main(_argv: Vec<OsString>) -> ExitCode {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "teammem sandbox-exec: the agent sandbox needs Linux; set agent.sandbox = \"off\" to run the agent unconfined"
    );
    ExitCode::from(super::EXIT_SETUP)
}
