//! The agent's Landlock ruleset, built from the policy: the filesystem
//! rights of this ABI all handled (denied unless a rule grants them), read
//! or full rights beneath the policy's paths, TCP bind and connect handled
//! with connect granted per port, signal and abstract-socket scoping.
//!
//! Invariant: every rule is a hard requirement (a right this kernel cannot
//! handle is an error, never dropped silently); a policy path that does not
//! exist is left out, never widened to its parent.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

use crate::sandbox::Policy;

/// The filesystem rights of this ABI all handled (denied unless a rule
/// grants them); TCP bind and connect handled, connect granted per port;
/// signal and abstract-socket scoping where the ABI has them.
pub(super) fn build_ruleset(policy: &Policy, abi: ABI) -> Result<RulesetCreated, String> {
    let err = |what: &str, e: &dyn std::fmt::Display| format!("{what}: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| err("cannot handle the filesystem rights", &e))?;
    let tcp = abi >= ABI::V4;
    if tcp {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| err("cannot handle TCP bind and connect", &e))?;
    }
    if abi >= ABI::V6 {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(|e| err("cannot scope signals and abstract unix sockets", &e))?;
    }
    let mut created = ruleset
        .create()
        .map_err(|e| err("cannot create the Landlock ruleset", &e))?;
    let rules = policy
        .read_paths
        .iter()
        .map(|p| (p, AccessFs::from_read(abi)))
        .chain(
            policy
                .write_paths
                .iter()
                .map(|p| (p, AccessFs::from_all(abi))),
        );
    for (path, access) in rules {
        let Some(fd) = open_path(path)? else {
            continue;
        };
        // Directory-only rights on a file are invalid (EINVAL): keep the file ones.
        let access = if is_dir(&fd)? {
            access
        } else {
            access & AccessFs::from_file(abi)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| err(&format!("cannot allow {}", path.display()), &e))?;
    }
    if tcp {
        for port in &policy.connect_ports {
            created = created
                .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                .map_err(|e| err(&format!("cannot allow TCP port {port}"), &e))?;
        }
    }
    Ok(created.no_new_privs(true))
}

/// A path the policy names; `None` when it does not exist (left out).
fn open_path(path: &Path) -> Result<Option<PathFd>, String> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        _ => {}
    }
    PathFd::new(path)
        .map(Some)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))
}

fn is_dir(fd: &PathFd) -> Result<bool, String> {
    // SAFETY: fstat writes into the zeroed struct we own; the fd is open.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_fd().as_raw_fd(), &mut st) } != 0 {
        return Err(format!(
            "cannot stat a sandbox path: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(st.st_mode & libc::S_IFMT == libc::S_IFDIR)
}
