//! The agent confined: `no_new_privs`, every capability dropped (bounding
//! set, ambient, effective, permitted, inheritable), the Landlock ruleset
//! applied.
//!
//! Invariant: confinement is verified, not assumed: capabilities left after
//! the drop, or a ruleset not fully enforced, are an error.

use std::io;

use landlock::{RulesetCreated, RulesetStatus};

use super::report::errno;

/// `no_new_privs`, every capability dropped, the Landlock ruleset applied.
pub(super) fn confine(ruleset: RulesetCreated) -> Result<(), String> {
    // SAFETY: integer-argument prctl.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(format!(
            "cannot set no_new_privs: {}",
            io::Error::last_os_error()
        ));
    }
    drop_capabilities()?;
    let status = ruleset
        .restrict_self()
        .map_err(|e| format!("cannot apply the Landlock ruleset: {e}"))?;
    if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
        return Err(format!(
            "the Landlock ruleset is not fully enforced ({:?}, no_new_privs {})",
            status.ruleset, status.no_new_privs
        ));
    }
    Ok(())
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;

const CAP_SETPCAP: u32 = 8;

fn capget() -> Result<[CapData; 2], String> {
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: header and two data structs, as version 3 requires.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
        return Err(format!(
            "cannot read capabilities: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(data)
}

/// Bounding set, ambient, then effective/permitted/inheritable; verified.
/// Relevant when the daemon runs as root (as CI does): root without
/// capabilities is bound by file modes and cannot regain them on exec
/// (`no_new_privs` with an empty permitted set).
fn drop_capabilities() -> Result<(), String> {
    let before = capget()?;
    let had_setpcap = before[0].effective & (1 << CAP_SETPCAP) != 0;
    for cap in 0..64 {
        // SAFETY (prctl calls): integer arguments only.
        let present = unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) };
        if present < 0 {
            break; // past the kernel's last capability
        }
        if present == 1
            && unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) } != 0
            && had_setpcap
        {
            return Err(format!(
                "cannot drop capability {cap} from the bounding set: {}",
                io::Error::last_os_error()
            ));
        }
    }
    let cleared = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    // EINVAL: a kernel without ambient capabilities has none to clear.
    if cleared != 0 && errno() != libc::EINVAL {
        return Err(format!(
            "cannot clear ambient capabilities: {}",
            io::Error::last_os_error()
        ));
    }
    // Nothing to drop (an unprivileged daemon, systemd's
    // `CapabilityBoundingSet=`): skip capset, which a system-call filter
    // such as `~@privileged` refuses.
    if before
        .iter()
        .all(|d| d.effective == 0 && d.permitted == 0 && d.inheritable == 0)
    {
        return Ok(());
    }
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: header and two data structs, as version 3 requires.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } != 0 {
        return Err(format!(
            "cannot drop capabilities: {}",
            io::Error::last_os_error()
        ));
    }
    let after = capget()?;
    if after
        .iter()
        .any(|d| d.effective != 0 || d.permitted != 0 || d.inheritable != 0)
    {
        return Err("capabilities remain after dropping them all".to_owned());
    }
    Ok(())
}
