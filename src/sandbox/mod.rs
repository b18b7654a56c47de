//! The kernel sandbox the external agent CLI (`agent.kind = "command"`) runs in.
//!
//! The daemon never execs the agent itself: it spawns `teammem sandbox-exec --
//! ARGV...` (built by [`command`]) with a [`Policy`] in `TEAMMEM_SANDBOX_POLICY`.
//! That trampoline (see `trampoline/`) puts the agent in user, mount and PID
//! namespaces of its own (`namespaces.rs`: it sees only the policy's paths and
//! its own processes), limits its processes and memory, confines it with
//! Landlock (filesystem, TCP ports, signal and abstract-socket scoping), no
//! capabilities and `no_new_privs`, and kills the agent's whole process tree
//! when the agent exits or the trampoline is told to stop.
//!
//! Invariants: with `enforce = true` the agent is never exec'd unless every rule
//! the policy needs is in force (fail closed, exit code [`EXIT_UNENFORCEABLE`]);
//! no pathname outside the policy, so no Unix socket outside the job, exists
//! for the agent; no process the agent started outlives the trampoline; the
//! policy variable never reaches the agent.
//!
//! Exit codes of `teammem sandbox-exec`:
//! - the agent's own exit code when it exits;
//! - `128 + n` when the agent was killed by signal `n`, or when the trampoline
//!   itself was stopped by signal `n` (SIGTERM: 143);
//! - [`EXIT_UNENFORCEABLE`] (121): a rule the policy requires cannot be
//!   enforced by this kernel; nothing was run;
//! - [`EXIT_SETUP`] (122): bad usage or a bad policy, or the trampoline could
//!   not set itself up; nothing was run;
//! - [`EXIT_EXEC`] (127): the agent program could not be executed.
//!
//! Each of these is announced on stderr with a line starting `teammem sandbox-exec:`.

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[cfg(target_os = "linux")]
mod namespaces;
mod trampoline;

pub use trampoline::main as trampoline_main;
pub use trampoline::probe_main as trampoline_probe_main;

/// The environment variable carrying the policy JSON to the trampoline.
pub const POLICY_ENV: &str = "TEAMMEM_SANDBOX_POLICY";
/// Test builds only: caps the Landlock ABI [`probe`] reports.
pub const TEST_ABI_ENV: &str = "TEAMMEM_TEST_LANDLOCK_ABI";
/// Test builds only: `sandbox-exec --probe` answers that namespaces cannot be
/// built, as on a kernel that refuses unprivileged user namespaces.
pub const TEST_NO_NAMESPACES_ENV: &str = "TEAMMEM_TEST_NO_NAMESPACES";

/// A rule the policy needs cannot be enforced; nothing was run.
pub const EXIT_UNENFORCEABLE: u8 = 121;
/// Bad usage, a bad policy, or a failed trampoline set-up; nothing was run.
pub const EXIT_SETUP: u8 = 122;
/// The agent program could not be executed.
pub const EXIT_EXEC: u8 = 127;

/// How long [`SandboxChild::stop`] waits for the trampoline to kill the tree
/// after SIGTERM before it SIGKILLs the trampoline itself.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// What the agent may touch. Plain data: it travels as JSON to the trampoline
/// and holds no secret (paths and ports only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Read and execute, beneath each entry (files or directories).
    pub read_paths: Vec<PathBuf>,
    /// Read, write, create and remove beneath each entry (the job's work dir).
    pub write_paths: Vec<PathBuf>,
    /// Outbound TCP is allowed only to these ports; binding is never allowed.
    pub connect_ports: Vec<u16>,
    /// false (`agent.sandbox = "off"`): no namespaces, no Landlock,
    /// capabilities kept; the process-tree containment still applies.
    pub enforce: bool,
    /// The most processes the agent's tree may hold at once (`agent.max_processes`).
    #[serde(default = "default_max_processes")]
    pub max_processes: u32,
    /// The most private writable memory one agent process may map, in bytes
    /// (`agent.max_memory_mb`; `RLIMIT_DATA`); 0: no limit.
    #[serde(default)]
    pub max_memory_bytes: u64,
}

/// `agent.max_processes` when not given.
pub const DEFAULT_MAX_PROCESSES: u32 = 1024;
/// The smallest `agent.max_processes`: below it the kernel refuses a PID
/// namespace's `pid_max` (its reserved range ends at 300).
pub const MIN_MAX_PROCESSES: u32 = 301;

fn default_max_processes() -> u32 {
    DEFAULT_MAX_PROCESSES
}

impl Policy {
    /// The policy of one job: the system paths, `extra_read` (the agent CLI's
    /// own installation, `agent.read_paths`), the work dir writable.
    pub fn for_job(
        work_dir: &Path,
        extra_read: &[PathBuf],
        connect_ports: &[u16],
        enforce: bool,
    ) -> Policy {
        let mut read_paths = system_read_paths();
        read_paths.extend(extra_read.iter().cloned());
        let mut write_paths = system_write_paths();
        write_paths.push(work_dir.to_path_buf());
        Policy {
            read_paths,
            write_paths,
            connect_ports: connect_ports.to_vec(),
            enforce,
            max_processes: DEFAULT_MAX_PROCESSES,
            max_memory_bytes: 0,
        }
    }

    /// The same policy with resource limits.
    pub fn with_limits(mut self, max_processes: u32, max_memory_bytes: u64) -> Policy {
        self.max_processes = max_processes;
        self.max_memory_bytes = max_memory_bytes;
        self
    }

    /// Every path must be absolute: a relative one would depend on the
    /// trampoline's working directory.
    pub fn validate(&self) -> Result<(), String> {
        for (kind, path) in self.all_paths() {
            if !path.is_absolute() {
                return Err(format!(
                    "the sandbox {kind} path {} is relative; give an absolute path",
                    path.display()
                ));
            }
            if path.to_str().is_none() {
                return Err(format!(
                    "the sandbox {kind} path {} is not valid UTF-8; rename it or choose another",
                    path.display()
                ));
            }
        }
        Ok(())
    }

    fn all_paths(&self) -> impl Iterator<Item = (&'static str, &PathBuf)> {
        self.read_paths
            .iter()
            .map(|p| ("read", p))
            .chain(self.write_paths.iter().map(|p| ("write", p)))
    }
}

/// Read-only system paths every agent needs (binaries, libraries, TLS roots,
/// name resolution, `/proc/self`). Never `/etc` whole: a config or key file may
/// live there. Paths this machine lacks are left out.
pub fn system_read_paths() -> Vec<PathBuf> {
    const PATHS: &[&str] = &[
        "/usr",
        "/bin",
        "/sbin",
        "/lib",
        "/lib32",
        "/lib64",
        "/etc/ssl",
        "/etc/ca-certificates",
        "/etc/pki",
        "/etc/resolv.conf",
        "/etc/hosts",
        "/etc/nsswitch.conf",
        "/etc/passwd",
        "/etc/group",
        "/etc/localtime",
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/alternatives",
        "/dev/zero",
        "/dev/urandom",
        "/dev/random",
        // Runtimes read /proc/self; Landlock's ptrace scoping keeps other
        // processes' environ, mem and fd closed.
        "/proc",
        "/sys/devices/system/cpu",
    ];
    existing(PATHS)
}

/// System paths the agent may also write: `/dev/null` (every shell redirects
/// to it; writing there reaches nothing).
pub fn system_write_paths() -> Vec<PathBuf> {
    existing(&["/dev/null"])
}

fn existing(paths: &[&str]) -> Vec<PathBuf> {
    paths
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.symlink_metadata().is_ok())
        .collect()
}

/// Which sandbox rules the running kernel enforces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// The Landlock ABI (0: no Landlock).
    pub abi: u32,
    /// Landlock filesystem rules (ABI ≥ 1).
    pub filesystem: bool,
    /// Truncation is a controlled right (ABI ≥ 3); below it an agent could
    /// truncate any file its uid can write.
    pub truncate: bool,
    /// TCP bind and connect restricted by port (ABI ≥ 4).
    pub tcp: bool,
    /// Signals to processes outside the sandbox refused (ABI ≥ 6).
    pub signal_scope: bool,
    /// Abstract unix sockets created outside the sandbox unreachable (ABI ≥ 6).
    pub abstract_unix_scope: bool,
    /// Connecting to pathname unix sockets is a controlled right (ABI ≥ 9).
    /// Informational: below it an agent can connect to any socket it can name,
    /// so sockets must authenticate their peers.
    pub unix_connect: bool,
    /// Subreaper and `/proc` walking to kill the agent's tree (Linux).
    pub process_tree: bool,
    /// The agent gets user, mount and PID namespaces of its own (see
    /// `namespaces.rs`): `Err` says why not. Filled by [`support`];
    /// [`Support::for_abi`] assumes they work.
    pub namespaces: Result<(), String>,
}

impl Support {
    /// What a kernel offering Landlock ABI `abi` enforces.
    pub fn for_abi(abi: u32) -> Support {
        Support {
            abi,
            filesystem: abi >= 1,
            truncate: abi >= 3,
            tcp: abi >= 4,
            signal_scope: abi >= 6,
            abstract_unix_scope: abi >= 6,
            unix_connect: abi >= 9,
            process_tree: cfg!(target_os = "linux"),
            namespaces: Ok(()),
        }
    }

    /// How the agent is isolated, for `/readyz`: the mechanisms in force.
    pub fn isolation(&self, policy: &Policy) -> String {
        if !policy.enforce {
            return "off (agent.sandbox = \"off\": process-tree containment only)".to_owned();
        }
        if !self.missing(policy).is_empty() {
            return "unavailable".to_owned();
        }
        format!(
            "user+mount+pid namespaces, landlock abi {}, no capabilities, rlimits",
            self.abi
        )
    }

    /// One sentence for each rule `policy` needs that this kernel cannot
    /// enforce; empty when all are enforceable.
    pub fn missing(&self, policy: &Policy) -> Vec<String> {
        let mut out = Vec::new();
        if !self.process_tree {
            out.push(
                "killing the agent's whole process tree needs Linux (a child subreaper and /proc)"
                    .to_owned(),
            );
        }
        if !policy.enforce {
            return out;
        }
        let offered = if self.abi == 0 {
            "the kernel offers no Landlock (not built in or not enabled at boot: add `landlock` to the `lsm=` boot parameter)".to_owned()
        } else {
            format!("the kernel offers Landlock ABI {}", self.abi)
        };
        let mut need = |ok: bool, rule: &str, abi: u32, linux: &str| {
            if !ok {
                out.push(format!(
                    "{rule} needs Landlock ABI {abi} (Linux {linux}); {offered}"
                ));
            }
        };
        need(
            self.filesystem,
            "restricting the agent's filesystem access",
            1,
            "5.13",
        );
        need(
            self.truncate,
            "refusing file truncation outside the agent's write paths",
            3,
            "6.2",
        );
        need(
            self.tcp,
            "limiting the agent's TCP connections to agent.connect_ports and refusing binds",
            4,
            "6.7",
        );
        need(
            self.signal_scope,
            "refusing signals from the agent to the daemon and the writer",
            6,
            "6.12",
        );
        need(
            self.abstract_unix_scope,
            "refusing the agent's connections to abstract unix sockets outside the sandbox",
            6,
            "6.12",
        );
        if let Err(why) = &self.namespaces {
            out.push(format!(
                "hiding other jobs and every Unix socket outside the job from the agent needs namespaces of its own, which this machine refuses: {why}"
            ));
        }
        out
    }
}

/// Which rules the running kernel enforces. In test builds `TEAMMEM_TEST_LANDLOCK_ABI`
/// caps the ABI reported, so the fail-closed path can be exercised.
pub fn probe() -> Support {
    let abi = kernel_abi();
    #[cfg(feature = "test-hooks")]
    let abi = match std::env::var(TEST_ABI_ENV)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    {
        Some(cap) => abi.min(cap),
        None => abi,
    };
    Support::for_abi(abi)
}

/// [`probe`] plus whether the agent's namespaces can be built here, asked of
/// `teammem_exe sandbox-exec --probe` (a fresh single-threaded process) once
/// per process.
pub fn support(teammem_exe: &Path) -> Support {
    static NAMESPACES: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let namespaces = NAMESPACES.get_or_init(|| probe_namespaces(teammem_exe));
    Support {
        namespaces: namespaces.clone(),
        ..probe()
    }
}

fn probe_namespaces(teammem_exe: &Path) -> Result<(), String> {
    let mut command = std::process::Command::new(teammem_exe);
    command
        .args(["sandbox-exec", "--probe"])
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    #[cfg(feature = "test-hooks")]
    if let Some(v) = std::env::var_os(TEST_NO_NAMESPACES_ENV) {
        command.env(TEST_NO_NAMESPACES_ENV, v);
    }
    let out = command.output().map_err(|e| {
        format!(
            "cannot run {} sandbox-exec --probe: {e}",
            teammem_exe.display()
        )
    })?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let said = said
        .lines()
        .filter_map(|l| l.strip_prefix("teammem sandbox-exec: "))
        .collect::<Vec<_>>()
        .join("; ");
    Err(if said.is_empty() {
        format!("sandbox-exec --probe exited with {}", out.status)
    } else {
        said
    })
}

#[cfg(target_os = "linux")]
fn kernel_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query takes no attribute pointer and no size.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
}

#[cfg(not(target_os = "linux"))]
fn kernel_abi() -> u32 {
    0
}

/// Refuses a policy under which the agent could reach a secret: Landlock is
/// allow-list only, so a secret beneath an allowed path is readable however
/// narrow the rest is. Paths are compared canonicalized (symlinks resolved);
/// a secret or allowed path that does not exist is left out.
pub fn check_secrets_unreachable(policy: &Policy, secret_paths: &[PathBuf]) -> Result<(), String> {
    let allowed: Vec<(&str, &PathBuf, PathBuf)> = policy
        .all_paths()
        .filter_map(|(kind, p)| p.canonicalize().ok().map(|c| (kind, p, c)))
        .collect();
    for secret in secret_paths {
        let Ok(real_secret) = secret.canonicalize() else {
            continue;
        };
        for (kind, given, real) in &allowed {
            if real_secret.starts_with(real) {
                return Err(format!(
                    "the agent's sandbox {kind} path {} contains {}, which the agent must never read; \
                     narrow the path (for agent.read_paths: the agent CLI's own installation directory) \
                     or move {} out of it",
                    given.display(),
                    secret.display(),
                    secret.display()
                ));
            }
        }
    }
    Ok(())
}

/// The trampoline command for `argv`: `teammem_exe sandbox-exec -- ARGV...`
/// with the policy in [`POLICY_ENV`] and an otherwise empty environment (the
/// caller adds PATH, HOME, TMPDIR and allowed variables). Spawn it through
/// [`SandboxChild::spawn`], from a thread that lives as long as the job (a
/// runtime worker, not a `spawn_blocking` thread): the trampoline asks for
/// SIGTERM when the spawning *thread* exits.
///
/// A policy that cannot be serialized yields an empty variable, which the
/// trampoline refuses ([`EXIT_SETUP`]): nothing runs unconfined.
pub fn command(teammem_exe: &Path, policy: &Policy, argv: &[String]) -> tokio::process::Command {
    let json = serde_json::to_string(policy).unwrap_or_default();
    let mut command = tokio::process::Command::new(teammem_exe);
    command
        .arg("sandbox-exec")
        .arg("--")
        .args(argv)
        .env_clear()
        .env(POLICY_ENV, json)
        // The guard stops it with SIGTERM so it lives to kill the tree.
        .kill_on_drop(false);
    command
}

/// The spawned trampoline. Dropping it, or [`SandboxChild::stop`], sends SIGTERM
/// (not SIGKILL: the trampoline must live to kill the agent's tree).
#[derive(Debug)]
pub struct SandboxChild {
    child: tokio::process::Child,
}

impl SandboxChild {
    pub fn spawn(command: &mut tokio::process::Command) -> io::Result<SandboxChild> {
        Ok(SandboxChild {
            child: command.kill_on_drop(false).spawn()?,
        })
    }

    /// The trampoline's pid, while it has not been reaped.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// The child itself, to take its stdin/stdout/stderr pipes.
    pub fn child_mut(&mut self) -> &mut tokio::process::Child {
        &mut self.child
    }

    /// Waits for the trampoline (it exits after the agent's tree is gone).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// SIGTERM, wait up to [`STOP_GRACE`] for the trampoline to kill the tree
    /// and exit, then SIGKILL as the last resort.
    pub async fn stop(&mut self) -> io::Result<ExitStatus> {
        self.terminate();
        match tokio::time::timeout(STOP_GRACE, self.child.wait()).await {
            Ok(status) => status,
            Err(_) => {
                tracing::warn!(
                    "the agent's sandbox trampoline did not exit within {} s of SIGTERM; killing it",
                    STOP_GRACE.as_secs()
                );
                self.child.start_kill()?;
                self.child.wait().await
            }
        }
    }

    fn terminate(&mut self) {
        // Only while unreaped: a reaped pid may already belong to another process.
        if let Ok(None) = self.child.try_wait()
            && let Some(pid) = self.child.id()
            && let Ok(pid) = libc::pid_t::try_from(pid)
        {
            // SAFETY: kill has no memory effects.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
}

impl Drop for SandboxChild {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Makes this process non-dumpable: no core dumps, and its `/proc` entries
/// (`environ`, `mem`, `fd`) owned by root and closed to same-uid processes
/// without CAP_SYS_PTRACE. The daemon and the writer call it at start.
pub fn make_non_dumpable() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_DUMPABLE takes an integer argument only.
        if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enforcing() -> Policy {
        Policy {
            read_paths: vec![],
            write_paths: vec![],
            connect_ports: vec![443],
            enforce: true,
            max_processes: DEFAULT_MAX_PROCESSES,
            max_memory_bytes: 0,
        }
    }

    #[test]
    fn abi_7_enforces_everything_a_policy_needs() {
        assert_eq!(
            Support::for_abi(7).missing(&enforcing()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn abi_3_names_tcp_and_both_scopes() {
        let missing = Support::for_abi(3).missing(&enforcing());
        assert_eq!(missing.len(), 3, "{missing:?}");
        assert!(missing[0].contains("TCP") && missing[0].contains("ABI 4"));
        assert!(missing[1].contains("signals") && missing[1].contains("ABI 6"));
        assert!(missing[2].contains("abstract unix sockets"));
        assert!(missing.iter().all(|m| m.contains("offers Landlock ABI 3")));
    }

    #[test]
    fn no_landlock_names_every_rule_and_the_boot_parameter() {
        let missing = Support::for_abi(0).missing(&enforcing());
        assert_eq!(missing.len(), 5, "{missing:?}");
        assert!(missing[0].contains("filesystem") && missing[0].contains("lsm="));
    }

    #[test]
    fn sandbox_off_needs_no_landlock() {
        let off = Policy {
            enforce: false,
            ..enforcing()
        };
        assert_eq!(Support::for_abi(0).missing(&off), Vec::<String>::new());
    }

    #[test]
    fn system_paths_never_include_etc_whole() {
        let paths = system_read_paths();
        assert!(!paths.iter().any(|p| p == Path::new("/etc")));
        assert!(paths.iter().any(|p| p == Path::new("/usr")));
        assert!(!paths.iter().any(|p| p.starts_with("/dev/null")));
    }

    #[test]
    fn relative_paths_are_refused() {
        let p = Policy {
            write_paths: vec![PathBuf::from("work")],
            ..enforcing()
        };
        let e = p.validate().unwrap_err();
        assert!(e.contains("write path work is relative"), "{e}");
    }

    #[test]
    fn a_secret_beneath_an_allowed_path_is_refused_through_a_symlink_too() {
        let root = tempfile::tempdir().unwrap();
        let etc = root.path().join("etc");
        std::fs::create_dir(&etc).unwrap();
        let config = etc.join("teammem.toml");
        std::fs::write(&config, "secret").unwrap();
        let alias = root.path().join("alias");
        std::os::unix::fs::symlink(&etc, &alias).unwrap();
        let policy = Policy {
            read_paths: vec![alias.clone()],
            ..enforcing()
        };
        let e = check_secrets_unreachable(&policy, std::slice::from_ref(&config)).unwrap_err();
        assert!(e.contains(&alias.display().to_string()), "{e}");
        assert!(e.contains(&config.display().to_string()), "{e}");

        let sibling = root.path().join("tool");
        std::fs::create_dir(&sibling).unwrap();
        let policy = Policy {
            read_paths: vec![sibling],
            write_paths: vec![etc.join("missing")],
            ..enforcing()
        };
        assert_eq!(check_secrets_unreachable(&policy, &[config]), Ok(()));
    }

    #[test]
    fn the_command_carries_the_policy_and_nothing_else() {
        let policy = enforcing();
        let cmd = command(
            Path::new("/x/teammem"),
            &policy,
            &["agent".into(), "-v".into()],
        );
        let std = cmd.as_std();
        let args: Vec<_> = std.get_args().collect();
        assert_eq!(args, ["sandbox-exec", "--", "agent", "-v"]);
        let envs: Vec<_> = std.get_envs().collect();
        assert_eq!(envs.len(), 1);
        assert_eq!(envs[0].0, POLICY_ENV);
        let back: Policy = serde_json::from_str(envs[0].1.unwrap().to_str().unwrap()).unwrap();
        assert_eq!(back, policy);
    }
}
