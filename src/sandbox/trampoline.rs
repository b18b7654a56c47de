//! `teammem sandbox-exec -- ARGV...`: the single-threaded process between the
//! daemon and the agent. It contains itself (non-dumpable, own session, child
//! subreaper, SIGTERM on the daemon's death), forks the agent, confines the
//! child (no capabilities, `no_new_privs`, Landlock) and execs ARGV, then waits
//! and kills the agent's whole tree.
//!
//! Invariants: with `enforce` the agent is never exec'd unconfined (every
//! failure to confine exits [`EXIT_UNENFORCEABLE`] before exec); the trampoline
//! never exits while a descendant of it is alive; `TEAMMEM_SANDBOX_POLICY` is
//! not in the agent's environment. No tokio here: `fork` needs one thread.

use std::ffi::OsString;
use std::process::ExitCode;

#[cfg(target_os = "linux")]
pub fn main(argv: Vec<OsString>) -> ExitCode {
    ExitCode::from(linux::run(argv))
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

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::HashMap;
    use std::ffi::{CString, OsString};
    use std::io::{self, Write};
    use std::os::fd::{AsFd, AsRawFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
        Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
    };

    use crate::sandbox::{EXIT_EXEC, EXIT_SETUP, EXIT_UNENFORCEABLE, POLICY_ENV, Policy, probe};

    fn say(message: &str) {
        // Never panic on a closed stderr: the tree must still be killed.
        let _ = writeln!(io::stderr(), "teammem sandbox-exec: {message}");
    }

    fn errno() -> i32 {
        io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    pub fn run(argv: Vec<OsString>) -> u8 {
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
        // Built before the fork: path opens and rule syscalls happen here, the
        // child only applies the finished ruleset.
        let mut ruleset = if policy.enforce {
            match build_ruleset(&policy, ABI::from(probe().abi as i32)) {
                Ok(r) => Some(r),
                Err(e) => {
                    say(&format!("refusing to run the agent: {e}"));
                    return EXIT_UNENFORCEABLE;
                }
            }
        } else {
            None
        };

        let me = unsafe { libc::getpid() };
        let agent = unsafe { libc::fork() };
        if agent < 0 {
            say(&format!(
                "cannot fork the agent: {}",
                io::Error::last_os_error()
            ));
            return EXIT_SETUP;
        }
        if agent == 0 {
            child(me, &original_mask, ruleset.take(), &exec, policy.enforce);
        }
        drop(ruleset);

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
                kill_tree(me, agent, &mut agent_status);
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
                    kill_tree(me, agent, &mut agent_status);
                    return exit_code(status);
                }
            } else {
                kill_tree(me, agent, &mut agent_status);
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

    fn exit_code(status: libc::c_int) -> u8 {
        if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status) as u8
        } else if libc::WIFSIGNALED(status) {
            128u8.saturating_add(libc::WTERMSIG(status) as u8)
        } else {
            EXIT_SETUP
        }
    }

    /// ARGV[0]'s candidate paths (a PATH search done before the fork),
    /// argv and the environment without the policy, as C strings.
    struct Exec {
        name: String,
        candidates: Vec<CString>,
        _argv: Vec<CString>,
        argv_ptrs: Vec<*const libc::c_char>,
        _envp: Vec<CString>,
        envp_ptrs: Vec<*const libc::c_char>,
    }

    impl Exec {
        fn prepare(argv: &[OsString]) -> Result<Exec, String> {
            let cstring = |bytes: &[u8]| {
                CString::new(bytes).map_err(|_| {
                    "an argument or environment variable contains a NUL byte".to_owned()
                })
            };
            let program = argv[0].as_bytes();
            let name = argv[0].to_string_lossy().into_owned();
            let mut candidates = Vec::new();
            if program.contains(&b'/') {
                candidates.push(cstring(program)?);
            } else {
                let path = std::env::var_os("PATH")
                    .unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
                for dir in path.as_bytes().split(|b| *b == b':') {
                    let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
                    let mut full = dir.to_vec();
                    full.push(b'/');
                    full.extend_from_slice(program);
                    candidates.push(cstring(&full)?);
                }
            }
            let argv_c = argv
                .iter()
                .map(|a| cstring(a.as_bytes()))
                .collect::<Result<Vec<_>, _>>()?;
            let envp_c = std::env::vars_os()
                .filter(|(k, _)| k != POLICY_ENV)
                .map(|(k, v)| {
                    let mut kv = k.as_bytes().to_vec();
                    kv.push(b'=');
                    kv.extend_from_slice(v.as_bytes());
                    cstring(&kv)
                })
                .collect::<Result<Vec<_>, _>>()?;
            let ptrs = |v: &[CString]| {
                v.iter()
                    .map(|c| c.as_ptr())
                    .chain(std::iter::once(std::ptr::null()))
                    .collect::<Vec<_>>()
            };
            Ok(Exec {
                name,
                candidates,
                argv_ptrs: ptrs(&argv_c),
                _argv: argv_c,
                envp_ptrs: ptrs(&envp_c),
                _envp: envp_c,
            })
        }
    }

    /// The filesystem rights of this ABI all handled (denied unless a rule
    /// grants them); TCP bind and connect handled, connect granted per port;
    /// signal and abstract-socket scoping where the ABI has them.
    fn build_ruleset(policy: &Policy, abi: ABI) -> Result<RulesetCreated, String> {
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

    /// The forked child: never returns. Only syscalls and a little formatting
    /// on failure (the trampoline has one thread, so allocation is safe).
    fn child(
        trampoline: libc::pid_t,
        original_mask: &libc::sigset_t,
        ruleset: Option<RulesetCreated>,
        exec: &Exec,
        enforce: bool,
    ) -> ! {
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
            if libc::getppid() != trampoline {
                libc::_exit(128 + libc::SIGKILL);
            }
        }
        if enforce {
            let confined = match ruleset {
                Some(r) => confine(r),
                None => Err("no Landlock ruleset was built".to_owned()),
            };
            if let Err(e) = confined {
                say(&format!("refusing to run the agent unconfined: {e}"));
                unsafe { libc::_exit(EXIT_UNENFORCEABLE as i32) };
            }
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
        let hint = if error == libc::EACCES && enforce {
            " (is its directory in agent.read_paths?)"
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

    /// `no_new_privs`, every capability dropped, the Landlock ruleset applied.
    fn confine(ruleset: RulesetCreated) -> Result<(), String> {
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
            let present =
                unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong, 0, 0, 0) };
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

    /// SIGKILL every process whose parent chain reaches the trampoline, reap,
    /// repeat until no child is left. As the subreaper every orphan of the tree
    /// (double-forked, `setsid`, new process group) is reparented here, so the
    /// walk finds it.
    fn kill_tree(me: libc::pid_t, agent: libc::pid_t, agent_status: &mut Option<libc::c_int>) {
        let mut stale_rounds = 0;
        loop {
            for pid in descendants(me) {
                // SAFETY: kill has no memory effects.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            let mut status = 0;
            // SAFETY: waitpid writes the status we own.
            let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
            if pid == agent {
                agent_status.get_or_insert(status);
            }
            if pid < 0 {
                match errno() {
                    libc::EINTR => {}
                    // No child left means no descendant left (a descendant's
                    // death reparents its children here first); the rescan
                    // covers a /proc read that raced an exit.
                    _ => {
                        if descendants(me).is_empty() || stale_rounds >= 100 {
                            return;
                        }
                        stale_rounds += 1;
                    }
                }
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
        fn exit_codes_pass_the_agents_status_through() {
            assert_eq!(exit_code(7 << 8), 7);
            assert_eq!(exit_code(libc::SIGKILL), 137);
        }

        #[test]
        fn parent_pid_reads_this_process() {
            let me = unsafe { libc::getpid() };
            assert_eq!(parent_pid(me), Some(unsafe { libc::getppid() }));
        }
    }
}
