//! The end of every run: the agent's whole tree killed and reaped, by
//! SIGKILL to the namespace's init, or a `/proc` walk of the trampoline's
//! descendants when there are no namespaces.
//!
//! Invariant: the trampoline never returns from here while a descendant of
//! it is alive (as the subreaper, every orphan of the tree is reparented to
//! it, so the walk finds it).

use std::collections::HashMap;

use super::report::errno;

/// Kills the agent's whole tree and reaps it. In namespaces, SIGKILL to
/// their init is enough: the kernel kills every process left in its PID
/// namespace before the init can be reaped. Otherwise SIGKILL every process
/// whose parent chain reaches the trampoline, reap all that died, and
/// rescan until no child is left. As the subreaper every orphan of the
/// tree (double-forked, `setsid`, new process group) is reparented here,
/// so the walk finds it; a rescan follows a batch of reaps, never each one.
pub(super) fn kill_tree(
    me: libc::pid_t,
    agent: libc::pid_t,
    in_namespaces: bool,
    agent_status: &mut Option<libc::c_int>,
) {
    if in_namespaces {
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(agent, libc::SIGKILL) };
    }
    let mut stale_rounds = 0;
    loop {
        if !in_namespaces {
            for pid in descendants(me) {
                // SAFETY: kill has no memory effects.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        // Block for one exit, then take every other one already there.
        let mut flags = 0;
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status we own.
            let pid = unsafe { libc::waitpid(-1, &mut status, flags) };
            if pid == agent {
                agent_status.get_or_insert(status);
            }
            if pid > 0 {
                flags = libc::WNOHANG;
                continue;
            }
            if pid < 0 && errno() == libc::EINTR {
                continue;
            }
            if pid < 0 {
                // No child left means no descendant left (a descendant's
                // death reparents its children here first); the rescan
                // covers a /proc read that raced an exit.
                if in_namespaces || descendants(me).is_empty() || stale_rounds >= 100 {
                    return;
                }
                stale_rounds += 1;
            }
            break;
        }
    }
}

fn descendants(me: libc::pid_t) -> Vec<libc::pid_t> {
    let mut parent_of: HashMap<libc::pid_t, libc::pid_t> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<libc::pid_t>().ok())
            else {
                continue;
            };
            if let Some(ppid) = parent_pid(pid) {
                parent_of.insert(pid, ppid);
            }
        }
    }
    let reaches_me = |mut pid: libc::pid_t| {
        for _ in 0..=parent_of.len() {
            match parent_of.get(&pid) {
                Some(&ppid) if ppid == me => return true,
                Some(&ppid) if ppid > 1 => pid = ppid,
                _ => return false,
            }
        }
        false
    };
    parent_of
        .keys()
        .copied()
        .filter(|&pid| pid != me && reaches_me(pid))
        .collect()
}

/// The ppid field of /proc/PID/stat (after the command name, which may
/// itself hold spaces and parentheses).
fn parent_pid(pid: libc::pid_t) -> Option<libc::pid_t> {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_pid_reads_this_process() {
        let me = unsafe { libc::getpid() };
        assert_eq!(parent_pid(me), Some(unsafe { libc::getppid() }));
    }
}
