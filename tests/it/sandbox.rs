//! The command agent's kernel sandbox, attacked through the real
//! `teammem sandbox-exec` trampoline: small python and shell agents try to read
//! secrets, write outside their work dir, read other processes' `/proc`, signal
//! them, connect to forbidden ports and leave processes behind. Every test that
//! needs Landlock fails (never skips) when the kernel lacks it.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use teammem::sandbox::{self, EXIT_EXEC, EXIT_SETUP, EXIT_UNENFORCEABLE, Policy, SandboxChild};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

const BIN: &str = env!("CARGO_BIN_EXE_teammem");
const SECRET: &str = "s3cr3t-app-key-material";
/// Bounds every run so a sandbox that fails to kill a tree fails the test
/// instead of hanging it (the pipes stay open while any holder lives).
const RUN_LIMIT: Duration = Duration::from_secs(60);

fn require_landlock() {
    let support = sandbox::probe();
    assert!(
        support.abi >= 6,
        "this test needs Landlock ABI 6 or newer (filesystem, TCP ports, signal scoping); \
         the kernel offers ABI {}: {:?}",
        support.abi,
        sandbox::probe().missing(&Policy::for_job(Path::new("/"), &[], &[], true))
    );
}

/// (python3 executable, its installation prefix), from the python3 on PATH.
fn python() -> &'static (PathBuf, PathBuf) {
    static PYTHON: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = std::process::Command::new("python3")
            .args(["-c", "import sys;print(sys.executable);print(sys.prefix)"])
            .output()
            .expect("python3 is a test prerequisite");
        let text = String::from_utf8(out.stdout).unwrap();
        let mut lines = text.lines();
        let exe = PathBuf::from(lines.next().unwrap()).canonicalize().unwrap();
        let prefix = PathBuf::from(lines.next().unwrap()).canonicalize().unwrap();
        (exe, prefix)
    })
}

/// A job's world: a config file and a data dir holding secrets, a work dir the
/// agent may write, a tool dir it may only read.
struct World {
    root: tempfile::TempDir,
    config: PathBuf,
    data_dir: PathBuf,
    work: PathBuf,
    tool: PathBuf,
}

impl World {
    fn new() -> World {
        let root = tempfile::tempdir().unwrap();
        let config = root.path().join("teammem.toml");
        std::fs::write(&config, format!("app_key = \"{SECRET}\"\n")).unwrap();
        let data_dir = root.path().join("data");
        std::fs::create_dir(&data_dir).unwrap();
        std::fs::write(data_dir.join("teammem.db"), SECRET).unwrap();
        let work = data_dir.join("jobs").join("17");
        std::fs::create_dir_all(&work).unwrap();
        let tool = root.path().join("tool");
        std::fs::create_dir(&tool).unwrap();
        std::fs::write(tool.join("tool.txt"), "tool data").unwrap();
        World {
            root,
            config,
            data_dir,
            work,
            tool,
        }
    }

    fn policy(&self, connect_ports: &[u16], enforce: bool) -> Policy {
        Policy::for_job(
            &self.work,
            &[self.tool.clone(), python().1.clone()],
            connect_ports,
            enforce,
        )
    }

    fn spawn(&self, policy: &Policy, argv: &[String], env: &[(&str, &str)]) -> SandboxChild {
        let mut command = sandbox::command(Path::new(BIN), policy, argv);
        command
            .env("PATH", "/usr/bin:/bin")
            .current_dir(&self.work)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        SandboxChild::spawn(&mut command).unwrap()
    }

    async fn run(&self, policy: &Policy, argv: &[String], env: &[(&str, &str)]) -> Outcome {
        finish(self.spawn(policy, argv, env)).await
    }

    fn pid_file(&self, name: &str) -> libc::pid_t {
        std::fs::read_to_string(self.work.join(name))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// The host's pids of the live processes whose command line names this
    /// world's work dir (every process the ESCAPE agents start). Found from
    /// outside: the pids an agent writes are those of its own PID namespace.
    fn live_tree(&self) -> Vec<libc::pid_t> {
        live_with_arg(self.work.to_str().unwrap())
    }
}

/// The host's pids of live (not zombie) processes one of whose arguments
/// contains `needle`.
fn live_with_arg(needle: &str) -> Vec<libc::pid_t> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline
            .split(|b| *b == 0)
            .any(|arg| String::from_utf8_lossy(arg).contains(needle))
        {
            found.push(pid);
        }
    }
    found
}

#[derive(Debug)]
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn finish(mut child: SandboxChild) -> Outcome {
    let mut out = child.child_mut().stdout.take().unwrap();
    let mut err = child.child_mut().stderr.take().unwrap();
    let all = async {
        let (mut o, mut e) = (String::new(), String::new());
        let (r1, r2, status) = tokio::join!(
            out.read_to_string(&mut o),
            err.read_to_string(&mut e),
            child.wait()
        );
        r1.unwrap();
        r2.unwrap();
        Outcome {
            code: status.unwrap().code(),
            stdout: o,
            stderr: e,
        }
    };
    tokio::time::timeout(RUN_LIMIT, all)
        .await
        .expect("the sandboxed run did not end: a process of the agent's tree outlived it")
}

fn py(script: &str, args: &[&str]) -> Vec<String> {
    let mut argv = vec![
        python().0.display().to_string(),
        "-I".into(),
        "-c".into(),
        script.into(),
    ];
    argv.extend(args.iter().map(|a| a.to_string()));
    argv
}

fn sh(script: &str) -> Vec<String> {
    vec!["/bin/sh".into(), "-c".into(), script.into()]
}

fn json(outcome: &Outcome) -> serde_json::Value {
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    serde_json::from_str(outcome.stdout.trim())
        .unwrap_or_else(|e| panic!("agent output is not JSON ({e}): {outcome:?}"))
}

/// Every attempt an agent makes is recorded as ["ok", value] or ["err", errno].
const ATTEMPT: &str = r#"
import json, os, socket, sys, signal, subprocess
r = {}
def attempt(name, f):
    try:
        r[name] = ["ok", f()]
    except OSError as e:
        r[name] = ["err", e.errno]
"#;

fn refused(results: &serde_json::Value, name: &str) {
    assert_eq!(
        results[name][0], "err",
        "{name} should have been refused: {results}"
    );
}

fn allowed(results: &serde_json::Value, name: &str) -> serde_json::Value {
    assert_eq!(
        results[name][0], "ok",
        "{name} should have worked: {results}"
    );
    results[name][1].clone()
}

fn is_gone(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let r = unsafe { libc::kill(pid, 0) };
    r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

#[tokio::test]
async fn the_agent_reads_and_writes_only_what_the_policy_allows() {
    require_landlock();
    let w = World::new();
    let outside = w.root.path().join("planted");
    let locked = w.work.join("locked");
    std::fs::write(&locked, SECRET).unwrap();
    std::fs::set_permissions(&locked, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let script = format!(
        "{ATTEMPT}{}",
        r#"
cfg, data, work, tool, outside, locked = sys.argv[1:7]
attempt("read_config", lambda: open(cfg).read())
attempt("read_database", lambda: open(data + "/teammem.db").read())
attempt("list_data_dir", lambda: os.listdir(data))
attempt("list_etc", lambda: os.listdir("/etc"))
attempt("write_outside", lambda: open(outside, "w").write("x"))
attempt("write_tool", lambda: open(tool + "/new", "w").write("x"))
attempt("truncate_tool", lambda: os.truncate(tool + "/tool.txt", 0))
attempt("unlink_tool", lambda: os.unlink(tool + "/tool.txt"))
attempt("read_mode_000_file", lambda: open(locked).read())
attempt("read_tool", lambda: open(tool + "/tool.txt").read())
def write_work():
    with open(work + "/out.txt", "w") as f:
        f.write("written")
    os.mkdir(work + "/sub")
    os.rmdir(work + "/sub")
    return open(work + "/out.txt").read()
attempt("write_work", write_work)
attempt("rename_out_of_work", lambda: os.rename(work + "/out.txt", outside))
print(json.dumps(r))
"#
    );
    let args = [
        w.config.to_str().unwrap(),
        w.data_dir.to_str().unwrap(),
        w.work.to_str().unwrap(),
        w.tool.to_str().unwrap(),
        outside.to_str().unwrap(),
        locked.to_str().unwrap(),
    ];
    let outcome = w.run(&w.policy(&[], true), &py(&script, &args), &[]).await;
    let r = json(&outcome);
    for name in [
        "read_config",
        "read_database",
        "list_data_dir",
        "list_etc",
        "write_outside",
        "write_tool",
        "truncate_tool",
        "unlink_tool",
        "read_mode_000_file",
        "rename_out_of_work",
    ] {
        refused(&r, name);
    }
    // Not even there: the agent's mount namespace holds only its policy's paths.
    assert_eq!(r["read_config"][1], libc::ENOENT, "{r}");
    assert_eq!(allowed(&r, "read_tool"), "tool data");
    assert_eq!(allowed(&r, "write_work"), "written");
    assert!(!outcome.stdout.contains(SECRET));
    assert!(!outside.exists(), "a file was planted outside the work dir");
    assert_eq!(
        std::fs::read_to_string(w.tool.join("tool.txt")).unwrap(),
        "tool data"
    );
    assert!(!w.tool.join("new").exists());
}

#[tokio::test]
async fn the_agent_has_no_capabilities_and_cannot_gain_any() {
    require_landlock();
    let w = World::new();
    let outcome = w
        .run(
            &w.policy(&[], true),
            &sh("grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status"),
            &[],
        )
        .await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(lines.len(), 6, "{outcome:?}");
    for line in lines {
        let (name, value) = line.split_once(':').unwrap();
        let expected = if name == "NoNewPrivs" {
            "1"
        } else {
            "0000000000000000"
        };
        assert_eq!(value.trim(), expected, "{name} in {outcome:?}");
    }
}

#[tokio::test]
async fn other_processes_proc_entries_and_signals_are_closed() {
    require_landlock();
    let w = World::new();
    let daemon_marker = format!("daemon-only-{}", uuid::Uuid::new_v4());
    // A stand-in for the daemon or the writer: unsandboxed, a secret in its
    // environment.
    let mut outsider = std::process::Command::new("/bin/sleep")
        .arg("600")
        .env("TEAMMEM_TEST_DAEMON_SECRET", &daemon_marker)
        .spawn()
        .unwrap();
    let outsider_pid = outsider.id();
    // Until the child has executed, its /proc entries still show this
    // process's environment: poll (bounded) for the marker.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let own_environ = std::fs::read(format!("/proc/{outsider_pid}/environ")).unwrap();
        if String::from_utf8_lossy(&own_environ).contains(&daemon_marker) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the control read of the outsider's environ lacks the marker"
        );
        std::thread::yield_now();
    }
    // The trampoline's environment holds the policy, which names this path:
    // readable there, and never in the agent's own environment.
    let trampoline_marker = format!("/nonexistent/trampoline-only-{}", uuid::Uuid::new_v4());
    let mut policy = w.policy(&[], true);
    policy.read_paths.push(PathBuf::from(&trampoline_marker));

    let script = format!(
        "{ATTEMPT}{}",
        r#"
outsider, tester = int(sys.argv[1]), int(sys.argv[2])
trampoline = os.getppid()
for who, pid in [("outsider", outsider), ("tester", tester), ("trampoline", trampoline)]:
    attempt(who + "_environ", lambda: open("/proc/%d/environ" % pid, "rb").read().decode("latin-1"))
    attempt(who + "_mem", lambda: open("/proc/%d/mem" % pid, "rb").read(1))
    # Listing the fd numbers is allowed (mode bits); following one is not.
    attempt(who + "_fd_link", lambda: os.readlink("/proc/%d/fd/0" % pid))
    attempt(who + "_fd_open", lambda: open("/proc/%d/fd/0" % pid, "rb").close())
    attempt(who + "_cwd", lambda: os.readlink("/proc/%d/cwd" % pid))
attempt("outsider_sigterm", lambda: os.kill(outsider, signal.SIGTERM))
attempt("trampoline_sigterm", lambda: os.kill(trampoline, signal.SIGTERM))
attempt("tester_signal_0", lambda: os.kill(tester, 0))
attempt("own_environ", lambda: open("/proc/self/environ", "rb").read().decode("latin-1"))
attempt("proc_pids", lambda: sorted(int(n) for n in os.listdir("/proc") if n.isdigit()))
def own_child():
    p = subprocess.Popen(["/bin/sleep", "600"])
    os.kill(p.pid, signal.SIGTERM)
    return p.wait()
attempt("own_child_sigterm", own_child)
print(json.dumps(r))
"#
    );
    let pid_args = [outsider_pid.to_string(), std::process::id().to_string()];
    let args: Vec<&str> = pid_args.iter().map(String::as_str).collect();
    let outcome = w.run(&policy, &py(&script, &args), &[]).await;
    let r = json(&outcome);
    for who in ["outsider", "tester", "trampoline"] {
        for entry in ["environ", "mem", "fd_link", "fd_open", "cwd"] {
            refused(&r, &format!("{who}_{entry}"));
        }
    }
    refused(&r, "outsider_sigterm");
    refused(&r, "trampoline_sigterm");
    refused(&r, "tester_signal_0");
    // Its own PID namespace: the outsider does not exist for the agent.
    assert_eq!(r["outsider_sigterm"][1], libc::ESRCH, "{r}");
    let visible: Vec<i64> = serde_json::from_value(allowed(&r, "proc_pids")).unwrap();
    assert!(
        !visible.contains(&i64::from(outsider_pid as i32)) && visible.len() < 10,
        "the agent sees processes outside its namespace: {visible:?}"
    );
    // Controls: /proc itself is readable, and the agent may signal its own children.
    assert!(
        allowed(&r, "own_environ")
            .as_str()
            .unwrap()
            .contains("PATH=")
    );
    assert_eq!(allowed(&r, "own_child_sigterm"), -libc::SIGTERM);
    assert!(!outcome.stdout.contains(&daemon_marker));
    assert!(!outcome.stdout.contains(&trampoline_marker));
    assert_eq!(
        outsider.try_wait().unwrap(),
        None,
        "the outsider was killed by the agent"
    );
    outsider.kill().unwrap();
    outsider.wait().unwrap();
}

#[tokio::test]
async fn tcp_connects_only_to_the_listed_ports_and_never_binds() {
    require_landlock();
    let w = World::new();
    let allowed_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let denied_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let allowed_port = allowed_listener.local_addr().unwrap().port();
    let denied_port = denied_listener.local_addr().unwrap().port();
    let script = format!(
        "{ATTEMPT}{}",
        r#"
def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"hello")
    s.close()
    return port
def bind():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s.getsockname()[1]
attempt("connect_allowed", lambda: connect(int(sys.argv[1])))
attempt("connect_denied", lambda: connect(int(sys.argv[2])))
attempt("bind", bind)
print(json.dumps(r))
"#
    );
    let ports = [allowed_port.to_string(), denied_port.to_string()];
    let args: Vec<&str> = ports.iter().map(String::as_str).collect();
    let outcome = w
        .run(&w.policy(&[allowed_port], true), &py(&script, &args), &[])
        .await;
    let r = json(&outcome);
    assert_eq!(allowed(&r, "connect_allowed"), allowed_port);
    refused(&r, "connect_denied");
    assert_eq!(r["connect_denied"][1], libc::EACCES, "{r}");
    refused(&r, "bind");
    // The listeners' side: the allowed one got the connection, the other none.
    allowed_listener.set_nonblocking(true).unwrap();
    denied_listener.set_nonblocking(true).unwrap();
    let (mut conn, _) = allowed_listener.accept().unwrap();
    conn.set_nonblocking(false).unwrap();
    let mut got = String::new();
    std::io::Read::read_to_string(&mut conn, &mut got).unwrap();
    assert_eq!(got, "hello");
    assert_eq!(
        denied_listener.accept().unwrap_err().kind(),
        ErrorKind::WouldBlock,
        "the denied port received a connection"
    );
}

/// Forks a grandchild that calls `setsid`, forks again (double fork: its
/// parent exits), changes process group and sleeps forever; writes its pid and
/// the agent's to the work dir, prints "started".
const ESCAPE: &str = r#"
import os, sys, time
work = sys.argv[1]
open(work + "/agent.pid", "w").write(str(os.getpid()))
first = os.fork()
if first == 0:
    os.setsid()
    if os.fork() == 0:
        os.setpgid(0, 0)
        open(work + "/grandchild.tmp", "w").write(str(os.getpid()))
        os.rename(work + "/grandchild.tmp", work + "/grandchild.pid")
        while True:
            time.sleep(1000)
    os._exit(0)
os.waitpid(first, 0)
while not os.path.exists(work + "/grandchild.pid"):
    time.sleep(0.01)
print("started", flush=True)
"#;

async fn read_until_started(child: &mut SandboxChild) {
    let stdout = child.child_mut().stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(RUN_LIMIT, lines.next_line())
        .await
        .expect("the agent did not start its grandchild")
        .unwrap();
    assert_eq!(line.as_deref(), Some("started"));
}

#[tokio::test]
async fn a_double_forked_setsid_grandchild_dies_when_the_agent_exits() {
    require_landlock();
    let w = World::new();
    let outcome = w
        .run(
            &w.policy(&[], true),
            &py(ESCAPE, &[w.work.to_str().unwrap()]),
            &[],
        )
        .await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout.trim(), "started");
    // The trampoline reaps the whole tree before it exits: no waiting needed.
    assert_eq!(
        w.live_tree(),
        Vec::<libc::pid_t>::new(),
        "the tree outlived the agent"
    );
}

#[tokio::test]
async fn stopping_the_trampoline_mid_run_kills_the_whole_tree() {
    require_landlock();
    let w = World::new();
    let script = format!("{ESCAPE}\nwhile True:\n    time.sleep(1000)\n");
    let mut child = w.spawn(
        &w.policy(&[], true),
        &py(&script, &[w.work.to_str().unwrap()]),
        &[],
    );
    read_until_started(&mut child).await;
    assert!(
        w.live_tree().len() >= 2,
        "control: the agent and its grandchild run"
    );
    let status = child.stop().await.unwrap();
    // 143: the trampoline handled SIGTERM itself (a SIGKILL fallback would
    // show as a signal, not an exit code).
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    assert_eq!(
        w.live_tree(),
        Vec::<libc::pid_t>::new(),
        "the tree outlived the stop"
    );
}

#[tokio::test]
async fn dropping_the_guard_kills_the_whole_tree() {
    require_landlock();
    let w = World::new();
    let script = format!("{ESCAPE}\nwhile True:\n    time.sleep(1000)\n");
    let mut child = w.spawn(
        &w.policy(&[], true),
        &py(&script, &[w.work.to_str().unwrap()]),
        &[],
    );
    read_until_started(&mut child).await;
    assert!(
        w.live_tree().len() >= 2,
        "control: the agent and its grandchild run"
    );
    drop(child);
    let deadline = Instant::now() + RUN_LIMIT;
    while !w.live_tree().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the tree outlived the dropped guard"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_policy_never_reaches_the_agent_and_exit_status_passes_through() {
    require_landlock();
    let w = World::new();
    let policy = w.policy(&[], true);
    let outcome = w.run(&policy, &sh("env; exit 7"), &[]).await;
    assert_eq!(outcome.code, Some(7), "{outcome:?}");
    assert!(outcome.stdout.contains("PATH=/usr/bin:/bin"), "{outcome:?}");
    assert!(
        !outcome.stdout.contains("TEAMMEM_SANDBOX_POLICY"),
        "{outcome:?}"
    );
    let killed = w.run(&policy, &sh("kill -KILL $$"), &[]).await;
    assert_eq!(killed.code, Some(128 + libc::SIGKILL), "{killed:?}");
}

#[tokio::test]
async fn sandbox_off_runs_without_landlock_but_still_kills_the_tree() {
    let w = World::new();
    let script = format!("{ESCAPE}\nprint(open(sys.argv[2]).read(), flush=True)\n");
    let outcome = w
        .run(
            &w.policy(&[], false),
            &py(
                &script,
                &[w.work.to_str().unwrap(), w.config.to_str().unwrap()],
            ),
            // A capped ABI must not matter when nothing is enforced.
            &[(sandbox::TEST_ABI_ENV, "0")],
        )
        .await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(
        outcome.stdout.contains(SECRET),
        "off means unconfined: {outcome:?}"
    );
    let grandchild = w.pid_file("grandchild.pid");
    assert!(
        is_gone(grandchild),
        "grandchild {grandchild} outlived the agent"
    );
}

#[tokio::test]
async fn a_kernel_without_the_needed_abi_runs_nothing() {
    let w = World::new();
    let marker = w.work.join("ran");
    let argv = sh(&format!("touch {}", marker.display()));
    let outcome = w
        .run(
            &w.policy(&[443], true),
            &argv,
            &[(sandbox::TEST_ABI_ENV, "3")],
        )
        .await;
    assert_eq!(
        outcome.code,
        Some(i32::from(EXIT_UNENFORCEABLE)),
        "{outcome:?}"
    );
    assert!(!marker.exists(), "the agent ran unconfined");
    for needed in [
        "TCP",
        "ABI 4",
        "signals",
        "ABI 6",
        "offers Landlock ABI 3",
        "agent.sandbox = \"off\"",
    ] {
        assert!(
            outcome.stderr.contains(needed),
            "missing {needed:?} in {outcome:?}"
        );
    }
    // The sentences the daemon logs and /readyz shows name the same rules.
    let missing = sandbox::Support::for_abi(3).missing(&w.policy(&[443], true));
    assert_eq!(missing.len(), 3, "{missing:?}");
}

#[tokio::test]
async fn bad_input_is_refused_with_a_message_and_runs_nothing() {
    let w = World::new();
    let marker = w.work.join("ran");
    let touch = sh(&format!("touch {}", marker.display()));
    let policy = w.policy(&[], true);

    let not_json = w
        .run(&policy, &touch, &[(sandbox::POLICY_ENV, "{not json")])
        .await;
    assert_eq!(not_json.code, Some(i32::from(EXIT_SETUP)), "{not_json:?}");
    assert!(
        not_json
            .stderr
            .contains("TEAMMEM_SANDBOX_POLICY is not a valid sandbox policy"),
        "{not_json:?}"
    );

    let mut relative = policy.clone();
    relative.write_paths.push(PathBuf::from("jobs"));
    let relative = w.run(&relative, &touch, &[]).await;
    assert_eq!(relative.code, Some(i32::from(EXIT_SETUP)), "{relative:?}");
    assert!(
        relative.stderr.contains("write path jobs is relative"),
        "{relative:?}"
    );
    assert!(!marker.exists());

    require_landlock();
    let missing = w
        .run(&policy, &["no-such-agent-cli".to_string()], &[])
        .await;
    assert_eq!(missing.code, Some(i32::from(EXIT_EXEC)), "{missing:?}");
    assert!(
        missing.stderr.contains("cannot execute no-such-agent-cli"),
        "{missing:?}"
    );
    // A program outside the read paths exists but cannot be executed.
    let hidden = w.root.path().join("agent.sh");
    std::fs::write(&hidden, "#!/bin/sh\ntouch ran\n").unwrap();
    std::fs::set_permissions(&hidden, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let denied = w.run(&policy, &[hidden.display().to_string()], &[]).await;
    assert_eq!(denied.code, Some(i32::from(EXIT_EXEC)), "{denied:?}");
    assert!(denied.stderr.contains("agent.read_paths"), "{denied:?}");
    assert!(!w.work.join("ran").exists());
}

#[test]
fn a_read_path_holding_a_secret_is_refused() {
    let w = World::new();
    let broad = Policy::for_job(&w.work, &[w.root.path().to_path_buf()], &[], true);
    let secrets = [w.config.clone(), w.data_dir.clone()];
    let e = sandbox::check_secrets_unreachable(&broad, &secrets).unwrap_err();
    assert!(e.contains(&w.config.display().to_string()), "{e}");
    assert!(e.contains(&w.root.path().display().to_string()), "{e}");
    // The job's work dir lies inside data_dir: that direction is fine.
    assert_eq!(
        sandbox::check_secrets_unreachable(&w.policy(&[], true), &secrets),
        Ok(())
    );
}

#[tokio::test]
async fn abstract_unix_sockets_outside_the_sandbox_are_unreachable() {
    require_landlock();
    use std::os::linux::net::SocketAddrExt;
    let w = World::new();
    let name = format!("teammem-test-broker-{}", uuid::Uuid::new_v4());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let script = format!(
        "{ATTEMPT}{}",
        r#"
def connect(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(b"\0" + name.encode())
    s.close()
    return name
attempt("connect_outside", lambda: connect(sys.argv[1]))
def own_socket():
    inside = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    inside.bind(b"\0" + sys.argv[1].encode() + b"-inside")
    inside.listen()
    return connect(sys.argv[1] + "-inside")
attempt("connect_own", own_socket)
print(json.dumps(r))
"#
    );
    let outcome = w
        .run(&w.policy(&[], true), &py(&script, &[&name]), &[])
        .await;
    let r = json(&outcome);
    refused(&r, "connect_outside");
    assert_eq!(r["connect_outside"][1], libc::EPERM, "{r}");
    // Control: abstract sockets created inside the sandbox still work.
    allowed(&r, "connect_own");
    assert_eq!(
        listener.accept().unwrap_err().kind(),
        ErrorKind::WouldBlock,
        "the outside socket received a connection"
    );
}

/// Tries every pathname Unix socket the agent can learn of: those
/// `/proc/net/unix` lists and those named on its command line. Each entry of
/// `connected` is a path that accepted the connection.
const UNIX_SCAN: &str = r#"
paths = set(sys.argv[2:])
try:
    for line in open("/proc/net/unix").read().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[7].startswith("/"):
            paths.add(fields[7])
except OSError:
    pass
connected = []
for path in sorted(paths):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        connected.append(path)
    except OSError:
        pass
    s.close()
r["connected"] = ["ok", connected]
r["scanned"] = ["ok", len(paths)]
attempt("list_other_job", lambda: os.listdir(sys.argv[1]))
"#;

/// PostgreSQL's startup message over a Unix socket, trust authentication:
/// `AuthenticationOk` ('R', 0) means the agent would be logged in.
const PG_LOGIN: &str = r#"
import struct
def pg_login(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    body = struct.pack("!i", 196608) + b"user\0teammem_test\0database\0postgres\0\0"
    s.sendall(struct.pack("!i", len(body) + 4) + body)
    reply = s.recv(9)
    s.close()
    return reply[:1].decode() + str(struct.unpack("!i", reply[5:9])[0])
attempt("pg_login", lambda: pg_login(sys.argv[2]))
"#;

#[tokio::test]
async fn no_unix_socket_outside_the_job_can_be_reached_and_other_jobs_are_invisible() {
    require_landlock();
    let w = World::new();
    // Another job's work dir with its writer's endpoint, as the runner makes it.
    let other_job = w.data_dir.join("jobs").join("18");
    std::fs::create_dir_all(&other_job).unwrap();
    let other_socket = other_job.join("mcp-0123456789abcdef.sock");
    let other = std::os::unix::net::UnixListener::bind(&other_socket).unwrap();
    other.set_nonblocking(true).unwrap();
    // The agent's own endpoint, made outside the sandbox in its work dir.
    let own_socket = w.work.join("own.sock");
    let own = std::os::unix::net::UnixListener::bind(&own_socket).unwrap();
    let pg = crate::harness::postgres::server();
    let pg_socket = pg.socket_path().display().to_string();
    let script = format!("{ATTEMPT}{UNIX_SCAN}{PG_LOGIN}print(json.dumps(r))\n");
    let args = [
        other_job.to_str().unwrap(),
        pg_socket.as_str(),
        other_socket.to_str().unwrap(),
        own_socket.to_str().unwrap(),
    ];

    // Control: unconfined, the same agent logs in to PostgreSQL and reaches
    // the other job's writer, so the scan can see what it must not.
    let open = json(&w.run(&w.policy(&[], false), &py(&script, &args), &[]).await);
    assert_eq!(allowed(&open, "pg_login"), "R0", "{open}");
    let reached: Vec<String> = serde_json::from_value(open["connected"][1].clone()).unwrap();
    assert!(
        reached.contains(&other_socket.display().to_string()),
        "{open}"
    );
    other
        .accept()
        .expect("control: the other job's endpoint took the connection");

    let r = json(&w.run(&w.policy(&[], true), &py(&script, &args), &[]).await);
    let reached: Vec<String> = serde_json::from_value(r["connected"][1].clone()).unwrap();
    assert_eq!(
        reached,
        vec![own_socket.display().to_string()],
        "the agent reached a socket outside its job: {r}"
    );
    assert!(r["scanned"][1].as_u64().unwrap() >= 4, "{r}");
    refused(&r, "pg_login");
    assert_eq!(r["pg_login"][1], libc::ENOENT, "{r}");
    refused(&r, "list_other_job");
    assert_eq!(
        other.accept().unwrap_err().kind(),
        ErrorKind::WouldBlock,
        "the other job's endpoint received a connection"
    );
    own.set_nonblocking(true).unwrap();
    own.accept()
        .expect("control: the agent reached its own endpoint");
}

#[tokio::test]
async fn a_fork_bomb_is_bounded_and_its_tree_killed_within_the_grace_period() {
    require_landlock();
    let w = World::new();
    let limit = sandbox::MIN_MAX_PROCESSES + 99;
    let policy = w.policy(&[], true).with_limits(limit, 0);
    // Forks until the kernel refuses, each child sleeping; then reports.
    let script = r#"
import os, sys, time
work = sys.argv[1]
n = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        while True:
            time.sleep(1000)
    n += 1
print(n, flush=True)
while True:
    time.sleep(1000)
"#;
    let mut child = w.spawn(&policy, &py(script, &[w.work.to_str().unwrap()]), &[]);
    let stdout = child.child_mut().stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(RUN_LIMIT, lines.next_line())
        .await
        .expect("the fork bomb never hit its limit")
        .unwrap()
        .unwrap();
    let forked: u32 = line.trim().parse().unwrap();
    assert!(
        forked + 2 <= limit && forked >= 100,
        "forked {forked} with a limit of {limit}"
    );
    let running = w.live_tree().len() as u32;
    assert!(
        running <= limit,
        "{running} processes with a limit of {limit}"
    );
    // The host can still start processes.
    assert!(
        std::process::Command::new("/bin/true")
            .status()
            .unwrap()
            .success()
    );
    let started = Instant::now();
    child.stop().await.unwrap();
    assert!(
        started.elapsed() < sandbox::STOP_GRACE,
        "killing {forked} processes took {:?}",
        started.elapsed()
    );
    assert_eq!(w.live_tree(), Vec::<libc::pid_t>::new());
}

#[tokio::test]
async fn a_machine_without_namespaces_runs_nothing_and_says_why() {
    let w = World::new();
    let marker = w.work.join("ran");
    let touch = sh(&format!("touch {}", marker.display()));
    let support = {
        // The probe runs the real `sandbox-exec --probe` once per process;
        // here it is asked directly with namespaces refused.
        let out = std::process::Command::new(BIN)
            .args(["sandbox-exec", "--probe"])
            .env(sandbox::TEST_NO_NAMESPACES_ENV, "1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(support.contains("namespaces refused"), "{support}");
    let ok = std::process::Command::new(BIN)
        .args(["sandbox-exec", "--probe"])
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "this machine must allow the agent's namespaces: {ok:?}"
    );
    let missing = sandbox::Support {
        namespaces: Err("refused for the test".into()),
        ..sandbox::Support::for_abi(7)
    }
    .missing(&w.policy(&[], true));
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert!(missing[0].contains("Unix socket") && missing[0].contains("refused for the test"));
    // The trampoline itself fails closed when it cannot build them.
    let refused = w
        .run(
            &w.policy(&[], true),
            &touch,
            &[(sandbox::TEST_NO_NAMESPACES_ENV, "1")],
        )
        .await;
    assert_eq!(
        refused.code,
        Some(i32::from(EXIT_UNENFORCEABLE)),
        "{refused:?}"
    );
    assert!(refused.stderr.contains("namespaces refused"), "{refused:?}");
    assert!(!marker.exists(), "the agent ran without its namespaces");
}
