//! One job's `command` agent against everything that belongs to another job,
//! and against what an earlier attempt left behind (issue 34).
//!
//! - Two jobs run side by side in the real daemon; the first job's agent
//!   scans `/proc/net/unix`, its own and the other job's directories, and
//!   speaks MCP (`initialize`, then `get_wiki_snapshot` and
//!   `write_wiki_pages` on the other wiki) to every endpoint socket it finds
//!   or is told of: none answers a byte, and the other wiki gets nothing.
//!   (The sandbox may hide the other job's directory; the test itself, which
//!   it does not hide, gets no answer there either.)
//! - A job's endpoint answers no connection without the job's capability
//!   (none, a wrong one, a truncated one, through the relay with a wrong
//!   file), and the refusals are counted; the right one is answered.
//! - A work directory holding links an earlier agent planted is made afresh:
//!   nothing the runner writes lands outside it.
//! - The agent's stderr reaches the daemon's log only inside the `stderr`
//!   field of teammem's events: a line it forges never starts a log line.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use teammem::queue::Completion;
use teammem::worker::JobHandler;

use super::command;
use super::daemon_client::{finished, jobs_of_commits, post_dispatch, wait_for, wiki_tip};
use super::fixture::{self, Source};
use super::handler::Setup;
use crate::harness::daemon::{self, Daemon};
use crate::harness::git::git_trimmed;

const SECRET: &str = "cross-job dispatch secret, forty bytes..";
const SECRET_B: &str = "the other source's own dispatch secret, 40b";

/// How long the test waits for something a job does.
const DEADLINE: Duration = Duration::from_secs(90);

/// The agent of both jobs. `demo/other` (the victim) opens its writer, says
/// it is ready, and waits until the test lets it go. `demo/app` (the
/// attacker) waits for the test's go, then tries every endpoint it can find
/// or is told of, and publishes what it got through its own writer.
const CROSS_AGENT: &str = r##"
import json, os, socket, sys
from mcp_client import Writer, receipt
config_path, receipt_path, agent_dir, data_dir = sys.argv[1:5]
data = json.loads(sys.stdin.read().strip().splitlines()[-1])
repo = data["repository"]
writer = Writer(config_path)
snapshot = writer.result("get_wiki_snapshot", {"repository": repo})
pages = []

def init(n):
    return {"jsonrpc": "2.0", "id": n, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "attacker", "version": "0"}}}

def speak(path, first):
    # Everything the endpoint at `path` answers to MCP after `first`.
    got = b""
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(5)
        s.connect(path)
        s.sendall(first + (json.dumps(init(1)) + "\n").encode())
        def line():
            nonlocal got
            while b"\n" not in got:
                chunk = s.recv(65536)
                if not chunk:
                    raise EOFError("closed")
                got += chunk
            head, _, rest = got.partition(b"\n")
            got = rest
            return json.loads(head)
        answered = [line()]
        s.sendall((json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n").encode())
        s.sendall((json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "get_wiki_snapshot", "arguments": {"repository": "demo/other"}}}) + "\n").encode())
        answered.append(line())
        theirs = answered[-1]["result"]["structuredContent"]["result"]
        s.sendall((json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "write_wiki_pages", "arguments": {"repository": "demo/other",
            "expected_wiki_repository": theirs["wiki_repository"], "expected_base": theirs["sha"],
            "message": "Written by another job's agent",
            "pages": [{"path": "Pwned.md", "content": "# Pwned\n"}]}}}) + "\n").encode())
        answered.append(line())
        return {"answered": json.dumps(answered)}
    except BaseException as e:
        return {"answered": got.decode("latin-1"), "ended": "%s: %s" % (type(e).__name__, e)}

def attempt(name, action):
    try:
        return {"ok": True, "value": action()}
    except BaseException as e:
        return {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}

if repo == "demo/other":
    open("victim-ready", "w").write("ready")
    open(os.path.join(agent_dir, "release-victim")).read()
else:
    open(os.path.join(agent_dir, "go-attacker")).read()
    args = json.load(open(config_path))["mcpServers"]["teammem-wiki"]["args"]
    own = args[args.index("--connect") + 1]
    victim_dir = open(os.path.join(agent_dir, "victim-dir")).read().strip()
    report = {}
    found = set()
    def scan():
        for row in open("/proc/net/unix").read().splitlines()[1:]:
            fields = row.split()
            if len(fields) >= 8 and fields[-1].startswith(data_dir):
                found.add(fields[-1])
        return sorted(found)
    report["proc_net_unix"] = attempt("scan", scan)
    for d in (os.getcwd(), os.path.join(data_dir, "jobs"), victim_dir):
        def listing(d=d):
            names = os.listdir(d)
            found.update(os.path.join(d, n) for n in names if n.endswith(".sock"))
            return names
        report["listing " + d] = attempt("listing", listing)
    found.add(open(os.path.join(agent_dir, "victim-socket")).read().strip())
    stolen = attempt("capability", lambda: open(os.path.join(victim_dir, "mcp-capability")).read().strip())
    report["victim_capability"] = stolen
    own_capability = open(args[args.index("--capability") + 1]).read().strip()
    tries = {}
    for path in sorted(p for p in found if os.path.basename(p) != os.path.basename(own)):
        firsts = {"no preamble": b"",
                  "forged preamble": b"teammem-capability " + b"0" * 64 + b"\n",
                  "its own job's capability": ("teammem-capability %s\n" % own_capability).encode()}
        if stolen["ok"]:
            firsts["the capability read from the other job"] = ("teammem-capability %s\n" % stolen["value"]).encode()
        tries[path] = {name: speak(path, first) for name, first in firsts.items()}
    report["tries"] = tries
    pages.append({"path": "Attack-report.md", "content": "```\n" + json.dumps(report) + "\n```\n"})

evidence = writer.result("get_job_evidence", {"repository": repo})
lines = ["- #%d %s" % (p["number"], p["merge_sha"]) for p in evidence["pull_requests"]]
pages.append({"path": "Team-log.md", "content": "# Team log\n\n" + "\n".join(lines) + "\n"})
written = writer.result("write_wiki_pages", {"repository": repo, "expected_wiki_repository": snapshot["wiki_repository"],
    "expected_base": snapshot["sha"], "message": "Team log", "pages": pages})
with open(receipt_path, "w") as f:
    json.dump(receipt(snapshot, written, data["evidence"]["pull_requests"], ["Team-log.md"]), f)
writer.close()
"##;

/// A source and its wiki under `root`.
fn repos(root: &Path) -> (Source, PathBuf) {
    std::fs::create_dir_all(root).unwrap();
    (Source::create(root), fixture::wiki(root))
}

fn source_table(name: &str, source: &Source, wiki: &Path, secret_env: &str) -> String {
    format!(
        "[[sources]]\nrepository = \"{name}\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"{secret_env}\"\n",
        source.dir.display(),
        wiki.display()
    )
}

async fn dispatch(daemon: &Daemon, repository: &str, source: &Source) -> i64 {
    let secret = if repository == "demo/other" {
        SECRET_B
    } else {
        SECRET
    };
    let (status, answer) = post_dispatch(
        daemon,
        secret,
        &json!({
            "source_repository": repository, "kind": "range",
            "source_run_id": 1, "source_run_attempt": 1,
            "push_before": source.base, "push_after": source.head,
        }),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    answer["job_id"].as_i64().unwrap()
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path only.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Lets a job's agent blocked reading the FIFO at `path` go on: waits
/// (bounded) until it has the FIFO open, then closes the writing end.
async fn release(path: &Path, what: &str) {
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = Instant::now() + DEADLINE;
    loop {
        // Non-blocking: ENXIO until the agent opened its reading end.
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Ok(fifo) => {
                use std::io::Write;
                (&fifo).write_all(b"go").unwrap();
                return;
            }
            Err(e) => assert!(
                Instant::now() < deadline,
                "{what} never waited for the test: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the endpoint at `path` answers to an MCP `initialize` sent after
/// `first` (empty: it closed, or reset the connection, without a byte; a
/// connection still open after 10 s says so).
fn speak_raw(path: &Path, first: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut stream = std::os::unix::net::UnixStream::connect(path).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "outsider", "version": "0"}}});
    let mut sent = first.to_vec();
    sent.extend_from_slice(format!("{initialize}\n").as_bytes());
    let _ = stream.write_all(&sent);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got.contains(&b'\n') {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => {
                got.extend_from_slice(format!("(still open after 10 s: {e})").as_bytes());
                break;
            }
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// The JSON inside a report page's code fence.
fn fenced(page: &str) -> Value {
    command::report(page)
}

#[tokio::test]
async fn another_jobs_agent_reaches_no_writer_endpoint_and_writes_nothing_to_its_wiki() {
    let repos_dir = tempfile::tempdir().unwrap();
    let (attacker_source, attacker_wiki) = repos(&repos_dir.path().join("a"));
    let (victim_source, victim_wiki) = repos(&repos_dir.path().join("b"));
    let agent_dir = tempfile::tempdir().unwrap();
    let agent = agent_dir.path().join("cross.py");
    std::fs::write(&agent, CROSS_AGENT).unwrap();
    for fifo in ["go-attacker", "release-victim"] {
        mkfifo(&agent_dir.path().join(fifo));
    }
    let setup = daemon::Setup::new(&format!(
        "{}{}{}[queue]\nworkers = 2\n",
        source_table(
            "demo/app",
            &attacker_source,
            &attacker_wiki,
            "TEAMMEM_SECRET_A"
        ),
        source_table(
            "demo/other",
            &victim_source,
            &victim_wiki,
            "TEAMMEM_SECRET_B"
        ),
        command::agent_table(&agent, &["@@agent", "@@data"], 120),
    ));
    let data_dir = setup.data_dir();
    let text = std::fs::read_to_string(&setup.config)
        .unwrap()
        .replace("@@agent", &agent_dir.path().display().to_string())
        .replace("@@data", &data_dir.display().to_string());
    std::fs::write(&setup.config, text).unwrap();
    let token = setup.create_token("cross-job", &[]);
    let daemon = setup.serve(&[("TEAMMEM_SECRET_A", SECRET), ("TEAMMEM_SECRET_B", SECRET_B)]);
    let victim_start = wiki_tip(&victim_wiki);

    let victim = dispatch(&daemon, "demo/other", &victim_source).await;
    let attacker = dispatch(&daemon, "demo/app", &attacker_source).await;
    // The victim's writer is up and its agent connected.
    let victim_dir = data_dir.join("jobs").join(victim.to_string());
    until("the victim's agent never got ready", || {
        victim_dir.join("victim-ready").exists()
    })
    .await;
    // The attacker is told where the victim's endpoint is, in case its own
    // view of the system hides it.
    let socket = std::fs::read_dir(&victim_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .expect("the victim's endpoint");
    std::fs::write(
        agent_dir.path().join("victim-socket"),
        socket.display().to_string(),
    )
    .unwrap();
    std::fs::write(
        agent_dir.path().join("victim-dir"),
        victim_dir.display().to_string(),
    )
    .unwrap();
    // Whatever reaches the path (here this test, a process of the daemon's
    // user outside every sandbox) gets no answer without the capability.
    for first in [
        Vec::new(),
        format!("teammem-capability {}\n", "0".repeat(64)).into_bytes(),
    ] {
        let socket = socket.clone();
        let answered = tokio::task::spawn_blocking(move || speak_raw(&socket, &first))
            .await
            .unwrap();
        assert_eq!(
            answered, "",
            "the victim's endpoint did not close unanswered"
        );
    }
    release(&agent_dir.path().join("go-attacker"), "the attacker").await;
    let (job, _) = wait_for(&daemon, &token, attacker, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    release(&agent_dir.path().join("release-victim"), "the victim").await;
    let (job, _) = wait_for(&daemon, &token, victim, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");

    let report = fenced(&git_trimmed(
        &attacker_wiki,
        &["show", "master:Attack-report.md"],
    ));
    // It could not read the other job's capability, and no endpoint but its
    // own (left out) said a byte to it, the victim's included.
    assert_eq!(report["victim_capability"]["ok"], false, "{report:#}");
    let tries = report["tries"].as_object().unwrap();
    let socket = socket.display().to_string();
    assert!(tries.contains_key(&socket), "{report:#}");
    for (path, attempts) in tries {
        for (how, got) in attempts.as_object().unwrap() {
            assert_eq!(got["answered"], "", "{path} answered {how}: {report:#}");
        }
    }
    // The victim's wiki holds its own job's commit and nothing else.
    assert_eq!(jobs_of_commits(&victim_wiki, &victim_start), [Some(victim)]);
    let pages = git_trimmed(&victim_wiki, &["ls-tree", "--name-only", "master"]);
    assert!(!pages.contains("Pwned"), "{pages}");
    assert!(daemon.terminate().success());
}

/// The probing agent: against its own job's endpoint, with no capability, a
/// wrong one, a truncated one, and through the relay with a wrong file; then
/// with the right one; then its job through the relay as usual.
const PROBE_AGENT: &str = r##"
import json, os, socket, subprocess, sys
from mcp_client import Writer, receipt
config_path, receipt_path = sys.argv[1], sys.argv[2]
data = json.loads(sys.stdin.read().strip().splitlines()[-1])
server = json.load(open(config_path))["mcpServers"]["teammem-wiki"]
args = server["args"]
sock_path = args[args.index("--connect") + 1]
capability = open(args[args.index("--capability") + 1]).read().strip()
init = (json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}) + "\n").encode()

def answer(first, then=init, close=False):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(20)
    s.connect(sock_path)
    s.sendall(first + then)
    if close:
        s.shutdown(socket.SHUT_WR)
    got = b""
    try:
        while b"\n" not in got:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:
        pass  # closed with our bytes unread: no answer either
    s.close()
    return got.decode("latin-1")

report = {
    "none": answer(b""),
    "wrong": answer(b"teammem-capability " + b"1" * 64 + b"\n"),
    "uppercase": answer(("teammem-capability %s\n" % capability.upper()).encode()),
    "truncated": answer(("teammem-capability %s" % capability[:20]).encode(), b"", close=True),
    "right": answer(("teammem-capability %s\n" % capability).encode()),
}
with open("wrong-capability", "w") as f:
    f.write("2" * 64 + "\n")
relay = subprocess.run([server["command"], "mcp", "--capability", "wrong-capability", "--connect", sock_path],
                       input=init, capture_output=True, timeout=30)
report["relay_wrong"] = {"code": relay.returncode, "out": relay.stdout.decode("latin-1"),
                         "err": relay.stderr.decode("latin-1")}
writer = Writer(config_path)
repo = data["repository"]
snapshot = writer.result("get_wiki_snapshot", {"repository": repo})
evidence = writer.result("get_job_evidence", {"repository": repo})
lines = ["- #%d %s" % (p["number"], p["merge_sha"]) for p in evidence["pull_requests"]]
written = writer.result("write_wiki_pages", {"repository": repo, "expected_wiki_repository": snapshot["wiki_repository"],
    "expected_base": snapshot["sha"], "message": "Team log",
    "pages": [{"path": "Team-log.md", "content": "# Team log\n\n" + "\n".join(lines) + "\n"},
              {"path": "Probe.md", "content": "```\n" + json.dumps(report) + "\n```\n"}]})
with open(receipt_path, "w") as f:
    json.dump(receipt(snapshot, written, data["evidence"]["pull_requests"], ["Team-log.md"]), f)
writer.close()
"##;

fn command_setup(script: &str) -> (Setup, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.py");
    std::fs::write(&agent, script).unwrap();
    let s = Setup::with_extra(&command::agent_table(&agent, &[], 120));
    (s, dir)
}

#[tokio::test]
async fn a_writer_endpoint_answers_only_a_connection_bringing_its_jobs_capability() {
    use teammem::metrics::AGENT_ENDPOINT_REFUSALS as REFUSALS;
    let (s, _dir) = command_setup(PROBE_AGENT);
    let (wrong, missing) = (REFUSALS.get(&["wrong"]), REFUSALS.get(&["missing"]));
    let done = s.runner().run(&s.full_range(1)).await.unwrap();
    assert!(matches!(done, Completion::Succeeded { .. }), "{done:?}");
    let report = fenced(&s.page("Probe.md"));
    for refused in ["none", "wrong", "uppercase", "truncated"] {
        assert_eq!(report[refused], "", "{refused}: {report:#}");
    }
    let right: Value = serde_json::from_str(report["right"].as_str().unwrap()).unwrap();
    assert_eq!(right["id"], 1, "{report:#}");
    assert!(right["result"]["serverInfo"].is_object(), "{report:#}");
    let relay = &report["relay_wrong"];
    assert_eq!(relay["out"], "", "{report:#}");
    assert_ne!(relay["code"], 0, "{report:#}");
    assert!(
        relay["err"]
            .as_str()
            .unwrap()
            .contains("closed the connection without answering"),
        "{report:#}"
    );
    // Each refusal was counted by the runner (none, wrong, uppercase and the
    // relay's are wrong; the truncated one is missing).
    assert!(REFUSALS.get(&["wrong"]) >= wrong + 4, "{report:#}");
    assert!(REFUSALS.get(&["missing"]) > missing, "{report:#}");
}

/// The usual test agent, which also writes into its `HOME` and `TMPDIR`.
fn agent_touching_home() -> String {
    format!(
        "import os\nfor v in ('HOME', 'TMPDIR'):\n    try:\n        open(os.path.join(os.environ[v], 'agent-was-here'), 'w').write('x')\n    except OSError:\n        pass\n{}",
        command::AGENT
    )
}

/// Everything under `dir`: relative path and the start of its content
/// (directories empty).
fn tree(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.strip_prefix(dir).unwrap().to_path_buf();
        let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
        if kind.is_dir() {
            all.push((name.clone(), String::new()));
            all.extend(tree(&path).into_iter().map(|(p, c)| (name.join(p), c)));
        } else if kind.is_file() {
            let content = std::fs::read(&path).unwrap();
            let start = String::from_utf8_lossy(&content[..content.len().min(60)]).into_owned();
            all.push((name, start));
        } else {
            all.push((name, "(not a regular file)".to_owned()));
        }
    }
    all.sort();
    all
}

#[tokio::test]
async fn links_planted_in_a_left_over_work_directory_redirect_no_write() {
    let (s, _dir) = command_setup(&agent_touching_home());
    let (s2, _dir2) = command_setup(&agent_touching_home());
    let outside_dir = tempfile::tempdir().unwrap();
    let outside = outside_dir.path().to_path_buf();
    for dir in ["home-target", "tmp-target", "job-target"] {
        std::fs::create_dir_all(outside.join(dir)).unwrap();
    }
    std::fs::write(outside.join("victim.txt"), "untouched\n").unwrap();
    std::fs::write(outside.join("job-target/keep.txt"), "untouched\n").unwrap();
    let before = tree(&outside);
    // Job 1's directory, as a crashed attempt's agent left it.
    let jobs = s.tmp.path().join("data/jobs");
    let jobs2 = s2.tmp.path().join("data/jobs");
    let left = jobs.join("1");
    std::fs::create_dir_all(&left).unwrap();
    let link =
        |name: &str, target: PathBuf| std::os::unix::fs::symlink(target, left.join(name)).unwrap();
    link("mcp-config.json", outside.join("victim.txt"));
    link("evidence.json", outside.join("victim.txt"));
    link(
        teammem::runner::command::CAPABILITY_FILE,
        outside.join("capability-written-outside"),
    );
    link("home", outside.join("home-target"));
    link("tmp", outside.join("tmp-target"));
    link("receipt.json", outside.join("victim.txt"));
    // Another setup's job 2: its directory is itself a link to a directory
    // outside.
    std::fs::create_dir_all(&jobs2).unwrap();
    std::os::unix::fs::symlink(outside.join("job-target"), jobs2.join("2")).unwrap();

    let mut outcomes = Vec::new();
    for (s, id) in [(&s, 1), (&s2, 2)] {
        outcomes.push((id, s.runner().run(&s.full_range(id)).await));
    }
    assert_eq!(
        tree(&outside),
        before,
        "a write went through a planted link"
    );
    for (id, done) in outcomes {
        assert!(
            matches!(done, Ok(Completion::Succeeded { .. })),
            "job {id}: {done:?}"
        );
    }
    assert!(!jobs.join("1").exists() && !jobs2.join("2").exists());
}

/// `teammem serve` for `config` with its log (text, `info`) in `log`.
fn serve_logging_to(config: &Path, log: &Path) -> Daemon {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(daemon::BIN)
        .arg("serve")
        .arg("--config")
        .arg(config)
        .env("TEAMMEM_LOG", "info")
        .env("TEAMMEM_SECRET_A", SECRET)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(url) = line.strip_prefix("teammem listening on ") {
                    break url.to_owned();
                }
            }
            _ => panic!("teammem serve exited before listening: {:?}", child.wait()),
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Daemon { child, url }
}

const FORGED: &str =
    "2026-01-01T00:00:00.000000Z  INFO teammem::worker: job 1 succeeded FORGED-7c1";

#[tokio::test]
async fn the_agents_stderr_reaches_the_daemons_log_only_inside_a_field() {
    let repos_dir = tempfile::tempdir().unwrap();
    let (source, wiki) = repos(repos_dir.path());
    let agent_dir = tempfile::tempdir().unwrap();
    let agent = agent_dir.path().join("agent.py");
    std::fs::write(
        &agent,
        format!(
            "import sys\nsys.stderr.write({:?} + '\\n' + 'next\\r' + {:?} + '\\n')\nsys.stderr.flush()\n{}",
            FORGED,
            FORGED,
            command::AGENT
        ),
    )
    .unwrap();
    let setup = daemon::Setup::new(&format!(
        "{}{}",
        source_table("demo/app", &source, &wiki, "TEAMMEM_SECRET_A"),
        command::agent_table(&agent, &[], 60)
    ));
    let token = setup.create_token("stderr", &[]);
    let log = setup.dir.path().join("daemon.log");
    let daemon = serve_logging_to(&setup.config, &log);
    let id = dispatch(&daemon, "demo/app", &source).await;
    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert!(daemon.terminate().success());

    let text = std::fs::read_to_string(&log).unwrap();
    let forged: Vec<&str> = text.lines().filter(|l| l.contains("FORGED-7c1")).collect();
    assert_eq!(forged.len(), 2, "{text}");
    for line in &forged {
        assert!(
            !line.starts_with("2026-01-01T00:00:00"),
            "a forged log line: {line}"
        );
        assert!(
            line.contains(" teammem::agent: ") && line.contains(&format!("job={id}")),
            "{line}"
        );
    }
    assert!(
        forged[0].contains(&format!("stderr=\"{FORGED}\"")),
        "{}",
        forged[0]
    );
    assert!(
        forged[1].contains(&format!("stderr=\"next\\r{FORGED}\"")),
        "{}",
        forged[1]
    );
}
