//! The command agent backend with a small test agent program (Python, stdlib
//! only) that reads the generated MCP configuration, starts the relay to the
//! job's writer from it, drives it over stdio and writes its receipt file;
//! given a fourth argument it also reads a source file (GitHub sources) and
//! reports what it got and what its configuration held.

use std::process::Command;

use teammem::queue::Completion;
use teammem::worker::JobHandler;

use super::handler::Setup;

pub(super) const AGENT: &str = r##"
import json, os, socket, subprocess, sys
config_path, receipt_path, env_out = sys.argv[1], sys.argv[2], sys.argv[3]
probe_out = sys.argv[4] if len(sys.argv) > 4 else None
task = sys.stdin.read()
data = json.loads(task.strip().splitlines()[-1])
with open(env_out, "w") as f:
    json.dump(sorted(os.environ.keys()), f)
server = json.load(open(config_path))["mcpServers"]["teammem-wiki"]
child = subprocess.Popen([server["command"]] + server["args"], env=server["env"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def send(message):
    child.stdin.write((json.dumps(message) + "\n").encode()); child.stdin.flush()
def receive(id):
    while True:
        message = json.loads(child.stdout.readline())
        if message.get("id") == id:
            return message
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
      "capabilities": {}, "clientInfo": {"name": "test-agent", "version": "0"}}})
receive(1)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
counter = [1]
def call(name, arguments):
    counter[0] += 1
    send({"jsonrpc": "2.0", "id": counter[0], "method": "tools/call", "params": {"name": name, "arguments": arguments}})
    return receive(counter[0])["result"]["structuredContent"]
repo = data["repository"]
snapshot = call("get_wiki_snapshot", {"repository": repo})["result"]
evidence = call("get_job_evidence", {"repository": repo})["result"]
lines = ["- #%d %s" % (p["number"], p["merge_sha"]) for p in evidence["pull_requests"]]
written = call("write_wiki_pages", {"repository": repo, "expected_wiki_repository": snapshot["wiki_repository"],
    "expected_base": snapshot["sha"], "message": "Team log from the command agent",
    "pages": [{"path": "Team-log.md", "content": "# Team log\n\n" + "\n".join(lines) + "\n"}]})["result"]
receipt = {"status": "updated", "wiki_repository": snapshot["wiki_repository"], "wiki_sha": written["sha"],
    "base_sha": snapshot["sha"], "summary": "Wrote the team log.",
    "pull_requests": [{"number": p["number"], "merge_sha": p["merge_sha"], "status": "updated", "pages": ["Team-log.md"]}
                      for p in data["evidence"]["pull_requests"]]}
if probe_out:
    probe = {"socket": server["args"][-1], "mcp_config": open(config_path).read(),
             "source_file": call("get_source_file", {"repository": repo, "path": "docs/guide.md"})}
    with open(probe_out, "w") as f:
        json.dump(probe, f)
with open(receipt_path, "w") as f:
    json.dump(receipt, f)
child.stdin.close(); child.wait()
"##;

pub(super) fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A setup whose `[agent]` runs `script` with Python; the returned temp dir
/// holds the script and the file it reports its environment to.
fn setup(script: &str) -> (Setup, tempfile::TempDir, std::path::PathBuf) {
    setup_with_timeout(script, 60)
}

fn setup_with_timeout(
    script: &str,
    timeout_seconds: u32,
) -> (Setup, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.py");
    std::fs::write(&agent, script).unwrap();
    let env_out = dir.path().join("env.json");
    let argv = format!(
        "[\"{}\", \"{}\", \"{{mcp_config}}\", \"{{receipt}}\", \"{}\"]",
        python(),
        agent.display(),
        env_out.display()
    );
    let s = Setup::with_extra(&format!(
        "\n[agent]\nkind = \"command\"\nargv = {argv}\ntimeout_seconds = {timeout_seconds}\nenv_allow = [\"CARGO_PKG_NAME\"]\n"
    ));
    (s, dir, env_out)
}

#[tokio::test]
async fn the_command_agent_drives_its_own_writer_and_hands_back_a_receipt() {
    assert!(
        std::env::var("CARGO_PKG_NAME").is_ok(),
        "cargo sets CARGO_PKG_NAME for tests"
    );
    let (s, _dir, env_out) = setup(AGENT);
    let done = s.runner().run(&s.full_range(1)).await.unwrap();
    assert!(matches!(done, Completion::Succeeded { .. }), "{done:?}");
    let log = s.page("Team-log.md");
    assert!(
        log.contains(&s.source.merge_12) && log.contains(&s.source.squash_13),
        "{log}"
    );
    let names: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(env_out).unwrap()).unwrap();
    let unexpected: Vec<&String> = names
        .iter()
        .filter(|n| {
            ![
                "PATH",
                "HOME",
                "TMPDIR",
                "CARGO_PKG_NAME",
                "PWD",
                "LC_CTYPE",
                "SHLVL",
                "_",
            ]
            .contains(&n.as_str())
        })
        .collect();
    assert!(names.contains(&"CARGO_PKG_NAME".to_owned()), "{names:?}");
    assert!(unexpected.is_empty(), "the agent saw {unexpected:?}");
}

#[tokio::test]
async fn a_command_that_fails_or_writes_no_receipt_fails_the_job() {
    let (s, _dir, _) = setup("import sys\nsys.stdin.read()\nsys.exit(3)\n");
    let failure = s.runner().run(&s.full_range(1)).await.unwrap_err();
    assert!(
        failure.reason.contains("exit status: 3"),
        "{}",
        failure.reason
    );
    let (s, _dir2, _) = setup("import sys\nsys.stdin.read()\n");
    let failure = s.runner().run(&s.full_range(1)).await.unwrap_err();
    assert!(
        failure.reason.contains("without writing its receipt"),
        "{}",
        failure.reason
    );
}

/// An agent that never finishes is killed at `agent.timeout_seconds` (10 s,
/// the least the configuration allows) and its job fails saying so.
#[tokio::test]
async fn a_hanging_command_is_killed_at_its_timeout() {
    // The third argument names the file the agent reports to: here, its pid.
    let hang = "import os, sys, time\nopen(sys.argv[3], 'w').write(str(os.getpid()))\nsys.stdin.read()\nwhile True:\n    time.sleep(60)\n";
    let (s, _dir, pid_file) = setup_with_timeout(hang, 10);
    let failure = s.runner().run(&s.full_range(1)).await.unwrap_err();
    assert!(failure.retryable, "a timeout may succeed on a retry");
    assert!(
        failure.reason.contains("did not finish within 10 s"),
        "{}",
        failure.reason
    );
    let pid = std::fs::read_to_string(pid_file).expect("the agent started");
    // SIGKILL was sent when the job gave up; the process is gone (or a
    // zombie) as soon as the kernel has delivered it.
    let state = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| {
                let fields = stat.rsplit_once(')').unwrap().1.to_owned();
                fields.split_whitespace().next().unwrap().to_owned()
            })
            .unwrap_or_else(|_| "gone".into())
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !matches!(state().as_str(), "gone" | "Z") && std::time::Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
    assert!(
        matches!(state().as_str(), "gone" | "Z"),
        "the agent is still {}",
        state()
    );
}
