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

use std::ffi::OsString;
use std::process::ExitCode;

#[cfg(target_os = "linux")]
pub fn main(argv: Vec<OsString>) -> ExitCode {
    ExitCode::from(linux::run(argv))
}

/// `teammem sandbox-exec --probe`: exit 0 when this machine lets the
/// trampoline build an agent's namespaces (user, mount, PID; a fresh `/proc`;
/// the pivot; `pid_max` when running as root), else 1 with the reason on stderr.
#[cfg(target_os = "linux")]
pub fn probe_main() -> ExitCode {
    ExitCode::from(linux::probe_namespaces())
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

    use crate::sandbox::namespaces;
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

    /// Enters the agent's namespaces and forks their init; the trampoline
    /// then waits for the init alone. `Err` is the exit code (nothing ran).
    fn start_namespace_init(
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
        let ruleset =
            build_ruleset(policy, ABI::from(probe().abi as i32)).unwrap_or_else(|e| fail(e));
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

    pub fn probe_namespaces() -> u8 {
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

    /// `ARGV[0]`'s candidate paths (a PATH search done before the fork),
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

    /// Kills the agent's whole tree and reaps it. In namespaces, SIGKILL to
    /// their init is enough: the kernel kills every process left in its PID
    /// namespace before the init can be reaped. Otherwise SIGKILL every process
    /// whose parent chain reaches the trampoline, reap all that died, and
    /// rescan until no child is left. As the subreaper every orphan of the
    /// tree (double-forked, `setsid`, new process group) is reparented here,
    /// so the walk finds it; a rescan follows a batch of reaps, never each one.
    fn kill_tree(
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
