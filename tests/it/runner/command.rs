//! The command agent backend with a small test agent program (Python, stdlib
//! only, and `mcp_client.py` beside it) that reads the generated MCP
//! configuration, starts the relay to the job's writer from it, drives it, writes its receipt file and,
//! in the same commit, `Agent-report.md`: the names of its environment and,
//! given a third argument `probe`, a source file it read (GitHub sources) and
//! what its configuration held. The agent runs in the kernel sandbox: it
//! reads only its Python installation and its own directory, and writes only
//! its job's work directory, so it reports through the wiki.

use std::process::Command;

use teammem::queue::Completion;
use teammem::worker::JobHandler;

use super::handler::Setup;

pub(super) const AGENT: &str = r##"
import json, os, sys
from mcp_client import Writer, receipt
config_path, receipt_path = sys.argv[1], sys.argv[2]
probe = len(sys.argv) > 3 and sys.argv[3] == "probe"
data = json.loads(sys.stdin.read().strip().splitlines()[-1])
report = {"env": sorted(os.environ.keys())}
writer = Writer(config_path)
repo = data["repository"]
snapshot = writer.result("get_wiki_snapshot", {"repository": repo})
evidence = writer.result("get_job_evidence", {"repository": repo})
lines = ["- #%d %s" % (p["number"], p["merge_sha"]) for p in evidence["pull_requests"]]
if probe:
    report.update({"socket": writer.server["args"][-1], "mcp_config": open(config_path).read(),
                   "source_file": writer.call("get_source_file", {"repository": repo, "path": "docs/guide.md"})})
written = writer.result("write_wiki_pages", {"repository": repo, "expected_wiki_repository": snapshot["wiki_repository"],
    "expected_base": snapshot["sha"], "message": "Team log from the command agent",
    "pages": [{"path": "Team-log.md", "content": "# Team log\n\n" + "\n".join(lines) + "\n"},
              {"path": "Agent-report.md", "content": "```\n" + json.dumps(report) + "\n```\n"}]})
with open(receipt_path, "w") as f:
    json.dump(receipt(snapshot, written, data["evidence"]["pull_requests"], ["Team-log.md"]), f)
writer.close()
"##;

/// The report the test agent wrote next to its team log.
pub(super) fn report(page: &str) -> serde_json::Value {
    let json = page
        .trim()
        .trim_start_matches("```")
        .trim_end_matches("```")
        .trim();
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {page}"))
}

/// The test agents' MCP client (`import mcp_client`), written next to each.
pub(super) const MCP_CLIENT: &str = include_str!("mcp_client.py");

/// The `[agent]` table running `script` (a file in `dir`, beside which the
/// MCP client module is written) with Python in the sandbox: Python's
/// installation and `dir` readable, `args` after the two placeholders.
pub(super) fn agent_table(script: &std::path::Path, args: &[&str], timeout_seconds: u32) -> String {
    let dir = script.parent().unwrap();
    std::fs::write(dir.join("mcp_client.py"), MCP_CLIENT).unwrap();
    let mut argv = vec![
        python(),
        script.display().to_string(),
        "{mcp_config}".into(),
        "{receipt}".into(),
    ];
    argv.extend(args.iter().map(|a| a.to_string()));
    format!(
        "\n[agent]\nkind = \"command\"\nargv = {argv:?}\ntimeout_seconds = {timeout_seconds}\nread_paths = [{:?}, {:?}]\n",
        python_prefix(),
        dir.display().to_string(),
    )
}

/// Where Python's own installation lives (its standard library included).
pub(super) fn python_prefix() -> String {
    let out = Command::new(python())
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .expect("python3 runs");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

pub(super) fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A setup whose `[agent]` runs `script` with Python in the sandbox, with
/// `CARGO_PKG_NAME` passed through; the returned temp dir holds the script.
fn setup(script: &str) -> (Setup, tempfile::TempDir) {
    setup_with(script, 60, "")
}

fn setup_with(script: &str, timeout_seconds: u32, extra: &str) -> (Setup, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.py");
    std::fs::write(&agent, script).unwrap();
    let s = Setup::with_extra(&format!(
        "{}env_allow = [\"CARGO_PKG_NAME\"]\n{extra}",
        agent_table(&agent, &[], timeout_seconds)
    ));
    (s, dir)
}

#[tokio::test]
async fn the_command_agent_drives_the_jobs_writer_through_the_relay_and_hands_back_a_receipt() {
    assert!(
        std::env::var("CARGO_PKG_NAME").is_ok(),
        "cargo sets CARGO_PKG_NAME for tests"
    );
    let (s, _dir) = setup(AGENT);
    let done = s.runner().run(&s.full_range(1)).await.unwrap();
    assert!(matches!(done, Completion::Succeeded { .. }), "{done:?}");
    let log = s.page("Team-log.md");
    assert!(
        log.contains(&s.source.merge_12) && log.contains(&s.source.squash_13),
        "{log}"
    );
    let names: Vec<String> =
        serde_json::from_value(report(&s.page("Agent-report.md"))["env"].clone()).unwrap();
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
    let (s, _dir) = setup("import sys\nsys.stdin.read()\nsys.exit(3)\n");
    let failure = s.runner().run(&s.full_range(1)).await.unwrap_err();
    assert!(
        failure.reason.contains("exit status: 3"),
        "{}",
        failure.reason
    );
    let (s, _dir2) = setup("import sys\nsys.stdin.read()\n");
    let failure = s.runner().run(&s.full_range(1)).await.unwrap_err();
    assert!(
        failure.reason.contains("without writing its receipt"),
        "{}",
        failure.reason
    );
}

/// An agent that never finishes is killed at `agent.timeout_seconds` (10 s,
/// the least the configuration allows) with the child it started in a
/// session of its own, and its job fails saying so.
#[tokio::test]
async fn a_hanging_command_is_killed_at_its_timeout_with_everything_it_started() {
    let hang = "import os, sys, time\nsys.stdin.read()\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\nwhile True:\n    time.sleep(60)\n";
    let (s, dir) = setup_with(hang, 10, "");
    let script = dir.path().join("agent.py").display().to_string();
    let runner = s.runner();
    let job = s.full_range(1);
    let run = runner.run(&job);
    tokio::pin!(run);
    // The agent and its child, found by their command line while they run.
    let mut pids = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let failure = loop {
        tokio::select! {
            done = &mut run => break done.unwrap_err(),
            _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {
                let found = processes_running(&script);
                if found.len() > pids.len() {
                    pids = found;
                }
                assert!(std::time::Instant::now() < deadline, "the job did not time out");
            }
        }
    };
    assert!(failure.retryable, "a timeout may succeed on a retry");
    assert!(
        failure.reason.contains("did not finish within 10 s"),
        "{}",
        failure.reason
    );
    assert_eq!(pids.len(), 2, "the agent and its child were seen running");
    // Gone (or a zombie) once the job gave up.
    for pid in pids {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| {
                stat.rsplit_once(')')
                    .unwrap()
                    .1
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .unwrap_or_else(|_| "gone".into());
        assert!(
            matches!(state.as_str(), "gone" | "Z"),
            "{pid} is still {state}"
        );
    }
}

/// Processes whose command line contains `needle`.
fn processes_running(needle: &str) -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid: &u32| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .filter(|pid| {
            !std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .unwrap_or_default()
                .contains("sandbox-exec")
        })
        .collect();
    pids.sort();
    pids
}

/// A read path that holds the configuration file is refused before the
/// agent runs: Landlock only allows, so the file would be readable.
#[tokio::test]
async fn a_read_path_holding_a_secret_path_refuses_the_job_before_the_agent_runs() {
    let (s, _dir) = setup_with(AGENT, 60, "");
    let mut config = (*s.config).clone();
    let teammem::config::Agent::Command { read_paths, .. } = &mut config.agent else {
        unreachable!("a command agent")
    };
    read_paths.push(s.tmp.path().to_path_buf());
    let runner = teammem::runner::Runner::new(
        std::sync::Arc::new(config),
        s.config_path.clone(),
        super::handler::BIN.into(),
        teammem::forge::Forges::default(),
    );
    let tip = s.tip();
    let failure = runner.run(&s.full_range(1)).await.unwrap_err();
    assert!(!failure.retryable);
    assert!(
        failure.reason.contains("which the agent must never read"),
        "{}",
        failure.reason
    );
    assert_eq!(s.tip(), tip, "nothing was written");
}
