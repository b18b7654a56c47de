//! The agent's own view of the machine: a user, mount and PID namespace per
//! job, built the way bubblewrap builds one, without privileges.
//!
//! The trampoline [`enter`]s a new user namespace (mapping only its own uid
//! and gid), a new mount namespace and a new PID namespace; its first child
//! is that PID namespace's init, which [`build_root`]s an empty tmpfs holding
//! only the policy's paths (each bound from the host), a fresh `/proc` of the
//! new PID namespace and the `/dev/fd` links, then pivots into it.
//!
//! Invariants: no host path outside the policy exists in the agent's mount
//! namespace, so no pathname Unix socket outside the job (another job's
//! writer, PostgreSQL's, a user's D-Bus or ssh-agent) can be named, whatever
//! `/proc/net/unix` lists; the agent's `/proc` shows only its own PID
//! namespace; when the namespace's init exits, the kernel kills every process
//! left in it. Landlock still decides what may be read or written: binding a
//! path here only makes it visible.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Where the new root is assembled before the pivot. A tmpfs is mounted over
/// it in the private mount namespace only; the host's `/tmp` is untouched.
const STAGING: &str = "/tmp";

fn os_error(what: &str) -> String {
    format!("{what}: {}", io::Error::last_os_error())
}

fn cstring(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("the path {} contains a NUL byte", path.display()))
}

fn write_file(path: &str, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {path}: {e}"))
}

/// Moves this (single-threaded) process into a new user, mount and PID
/// namespace, mapping `uid` and `gid` to themselves and nothing else. Its
/// next child is the new PID namespace's init.
///
/// Writing the maps needs this process's `/proc/self` to be its own, so it
/// is made dumpable for the moment it takes (the trampoline holds no secret)
/// and non-dumpable again after.
pub fn enter(uid: libc::uid_t, gid: libc::gid_t) -> Result<(), String> {
    #[cfg(feature = "test-hooks")]
    if std::env::var_os(crate::sandbox::TEST_NO_NAMESPACES_ENV).is_some() {
        return Err("namespaces refused for this test (TEAMMEM_TEST_NO_NAMESPACES)".to_owned());
    }
    // SAFETY: integer-argument syscalls on this process.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID) } != 0 {
        return Err(os_error(
            "cannot create the agent's user, mount and PID namespaces (unprivileged user namespaces must be allowed: user.max_user_namespaces > 0, kernel.unprivileged_userns_clone = 1, and no AppArmor or seccomp rule refusing them)",
        ));
    }
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1 as libc::c_ulong, 0, 0, 0) };
    let written = write_file("/proc/self/setgroups", "deny")
        .and_then(|()| write_file("/proc/self/uid_map", &format!("{uid} {uid} 1\n")))
        .and_then(|()| write_file("/proc/self/gid_map", &format!("{gid} {gid} 1\n")));
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) };
    written
}

/// One path of the policy as the new root will hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visible {
    /// As the policy names it.
    pub given: PathBuf,
    /// With every symlink resolved: where it is bound.
    pub real: PathBuf,
    pub is_dir: bool,
}

/// What [`build_root`] does with a set of paths: binds (at their real path,
/// none beneath another) and symlinks (a given path that differs from its real
/// one points there, unless a bind already shows it).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RootPlan {
    pub binds: Vec<(PathBuf, bool)>,
    pub links: Vec<(PathBuf, PathBuf)>,
}

/// Plans the root for `paths`. `/proc` is never bound: the agent gets a fresh
/// one of its own PID namespace.
pub fn plan(paths: &[Visible]) -> RootPlan {
    let mut sorted: Vec<&Visible> = paths
        .iter()
        .filter(|v| !v.real.starts_with("/proc"))
        .collect();
    sorted.sort_by_key(|v| v.real.components().count());
    let mut plan = RootPlan::default();
    for v in &sorted {
        if !plan.binds.iter().any(|(b, _)| v.real.starts_with(b)) {
            plan.binds.push((v.real.clone(), v.is_dir));
        }
    }
    for v in paths {
        if v.given == v.real || v.given.starts_with("/proc") {
            continue;
        }
        let shown = plan.binds.iter().any(|(b, _)| v.given.starts_with(b))
            || plan.links.iter().any(|(l, _)| v.given.starts_with(l));
        if !shown {
            plan.links.push((v.given.clone(), v.real.clone()));
        }
    }
    plan
}

/// Resolves the policy's paths (left out when missing) and opens each real
/// path.
fn resolve(paths: &[PathBuf]) -> Result<(Vec<Visible>, Vec<OwnedFd>), String> {
    let mut visible = Vec::new();
    let mut fds = Vec::new();
    for given in paths {
        let real = match std::fs::canonicalize(given) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot resolve {}: {e}", given.display())),
        };
        // O_PATH: a handle on the inode that reads nothing (works on sockets
        // and on files this uid may not read; Landlock decides reads later).
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
            .open(&real)
            .map_err(|e| format!("cannot open {}: {e}", real.display()))?;
        let is_dir = file
            .metadata()
            .map_err(|e| format!("cannot stat {}: {e}", real.display()))?
            .is_dir();
        visible.push(Visible {
            given: given.clone(),
            real,
            is_dir,
        });
        fds.push(OwnedFd::from(file));
    }
    Ok((visible, fds))
}

fn mount(
    source: Option<&CString>,
    target: &CString,
    fstype: Option<&CString>,
    flags: libc::c_ulong,
    data: Option<&CString>,
) -> Result<(), String> {
    let ptr = |c: Option<&CString>| c.map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is a NUL-terminated string we own, or null.
    let rc = unsafe {
        libc::mount(
            ptr(source),
            target.as_ptr(),
            ptr(fstype),
            flags,
            ptr(data).cast(),
        )
    };
    if rc != 0 {
        return Err(os_error(&format!(
            "cannot mount {}",
            target.to_string_lossy()
        )));
    }
    Ok(())
}

fn staged(path: &Path) -> PathBuf {
    Path::new(STAGING).join(path.strip_prefix("/").unwrap_or(path))
}

/// In the new PID namespace's init: builds the agent's root from `paths`
/// (resolved and opened here, in the new mount namespace, before anything
/// is mounted over them: a bind's source must be a mount of this
/// namespace), mounts its `/proc`, lowers
/// the namespace's `pid_max` to `max_pids` (`Ok(false)` when this kernel
/// keeps one `pid_max` for all namespaces), pivots into the root and enters
/// `cwd`.
pub fn build_root(paths: &[PathBuf], max_pids: u32, cwd: &Path) -> Result<bool, String> {
    let (visible, fds) = resolve(paths)?;
    let root = CString::new("/").expect("no NUL");
    mount(None, &root, None, libc::MS_REC | libc::MS_PRIVATE, None)?;
    let staging = CString::new(STAGING).expect("no NUL");
    let tmpfs = CString::new("tmpfs").expect("no NUL");
    mount(
        Some(&tmpfs),
        &staging,
        Some(&tmpfs),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some(&CString::new("mode=0755").expect("no NUL")),
    )?;
    let plan = plan(&visible);
    for (real, is_dir) in &plan.binds {
        let Some(i) = visible.iter().position(|v| &v.real == real) else {
            continue;
        };
        let target = staged(real);
        if *is_dir {
            std::fs::create_dir_all(&target)
        } else {
            target
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::File::create(&target).map(drop))
        }
        .map_err(|e| format!("cannot prepare {}: {e}", target.display()))?;
        let source = CString::new(format!("/proc/self/fd/{}", fds[i].as_raw_fd())).expect("no NUL");
        mount(
            Some(&source),
            &cstring(&target)?,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        )
        .map_err(|e| format!("{e} (binding {})", real.display()))?;
    }
    for (given, real) in &plan.links {
        let at = staged(given);
        if at.symlink_metadata().is_ok() {
            continue;
        }
        at.parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::os::unix::fs::symlink(real, &at))
            .map_err(|e| format!("cannot link {} to {}: {e}", given.display(), real.display()))?;
    }
    let proc_dir = staged(Path::new("/proc"));
    std::fs::create_dir_all(&proc_dir)
        .map_err(|e| format!("cannot prepare {}: {e}", proc_dir.display()))?;
    let proc = CString::new("proc").expect("no NUL");
    mount(
        Some(&proc),
        &cstring(&proc_dir)?,
        Some(&proc),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    )?;
    let dev = staged(Path::new("/dev"));
    std::fs::create_dir_all(&dev).map_err(|e| format!("cannot prepare {}: {e}", dev.display()))?;
    for (name, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        let at = dev.join(name);
        if at.symlink_metadata().is_err() {
            std::os::unix::fs::symlink(to, &at)
                .map_err(|e| format!("cannot link {}: {e}", at.display()))?;
        }
    }
    let pid_max = std::fs::write(proc_dir.join("sys/kernel/pid_max"), max_pids.to_string()).is_ok();

    let dot = CString::new(".").expect("no NUL");
    // SAFETY: chdir, pivot_root and umount2 take NUL-terminated strings we own.
    unsafe {
        if libc::chdir(staging.as_ptr()) != 0 {
            return Err(os_error("cannot enter the agent's new root"));
        }
        if libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) != 0 {
            return Err(os_error("cannot pivot into the agent's new root"));
        }
        if libc::umount2(dot.as_ptr(), libc::MNT_DETACH) != 0 {
            return Err(os_error(
                "cannot detach the host's root from the agent's view",
            ));
        }
        if libc::chdir(root.as_ptr()) != 0 {
            return Err(os_error("cannot enter the agent's new root"));
        }
    }
    std::env::set_current_dir(cwd).map_err(|e| {
        format!(
            "cannot enter the agent's working directory {}: {e}",
            cwd.display()
        )
    })?;
    Ok(pid_max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(given: &str, real: &str, is_dir: bool) -> Visible {
        Visible {
            given: given.into(),
            real: real.into(),
            is_dir,
        }
    }

    #[test]
    fn nested_paths_are_bound_once_and_symlinked_names_point_at_their_target() {
        let plan = plan(&[
            v("/usr", "/usr", true),
            v("/bin", "/usr/bin", true),
            v("/etc/resolv.conf", "/run/resolve/stub.conf", false),
            v("/usr/local/agent", "/usr/local/agent", true),
            v("/proc", "/proc", true),
            v("/work/job-1", "/work/job-1", true),
        ]);
        assert_eq!(
            plan.binds,
            vec![
                (PathBuf::from("/usr"), true),
                (PathBuf::from("/work/job-1"), true),
                (PathBuf::from("/run/resolve/stub.conf"), false),
            ]
        );
        assert_eq!(
            plan.links,
            vec![
                (PathBuf::from("/bin"), PathBuf::from("/usr/bin")),
                (
                    PathBuf::from("/etc/resolv.conf"),
                    PathBuf::from("/run/resolve/stub.conf")
                ),
            ]
        );
    }

    #[test]
    fn a_given_path_beneath_a_bind_needs_no_link() {
        let plan = plan(&[
            v("/usr", "/usr", true),
            v("/usr/bin/python3", "/usr/bin/python3.11", false),
        ]);
        assert_eq!(plan.binds, vec![(PathBuf::from("/usr"), true)]);
        assert!(plan.links.is_empty());
    }
}
