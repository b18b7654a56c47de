//! The command agent's isolation at its edges: a kernel that cannot enforce a
//! sandbox rule refuses the job (and says so on `/readyz`) without running
//! the agent; a receipt that is a link to `/dev/zero` or a FIFO fails the job
//! with a clear message and is never read; a job that fails after its wiki
//! token was minted still revokes it.

use serde_json::Value;
use teammem::worker::JobHandler;

use super::command;
use super::daemon_client::{finished, wait_for, wiki_tip};
use super::github::Hub;
use super::handler::Setup;

#[tokio::test]
async fn a_kernel_without_a_rule_refuses_the_job_and_readyz_names_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.py");
    std::fs::write(&agent, command::AGENT).unwrap();
    let hub = Hub::with_config(&command::agent_table(&agent, &[], 60)).await;
    // Test builds cap the Landlock ABI the daemon sees: 3 has no TCP rules
    // and no signal scoping.
    let daemon = hub.serve_with(&[("TEAMMEM_TEST_LANDLOCK_ABI", "3")]);
    let ready = reqwest::get(daemon.url("/readyz")).await.unwrap();
    assert_eq!(ready.status(), 503);
    let body: Value = ready.json().await.unwrap();
    let problems = body["problems"].to_string();
    assert!(
        problems.contains("agent.connect_ports") && problems.contains("Landlock ABI 3"),
        "{body}"
    );
    assert!(problems.contains("agent.sandbox = \\\"off\\\""), "{body}");

    let token = hub.setup.create_token("isolation", &[]);
    let start = wiki_tip(&hub.wiki);
    let answer = hub
        .dispatch_range(&daemon, 100, &hub.source.base, &hub.source.head)
        .await;
    let id = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "failed", "{job}");
    let reason = job["last_error"].to_string();
    assert!(reason.contains("sandbox cannot be enforced"), "{job}");
    assert_eq!(wiki_tip(&hub.wiki), start, "the agent never ran");
    // Nothing was minted for the wiki, so nothing needs revoking.
    assert!(hub.fake.write_mints_for("octo/app").is_empty());
    assert!(daemon.terminate().success());
}

#[tokio::test]
async fn readyz_names_the_agents_isolation_and_a_machine_without_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.py");
    std::fs::write(&agent, command::AGENT).unwrap();
    let hub = Hub::with_config(&command::agent_table(&agent, &[], 60)).await;
    let daemon = hub.serve_with(&[]);
    let ready = reqwest::get(daemon.url("/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200);
    let body: Value = ready.json().await.unwrap();
    let isolation = body["agent_isolation"].as_str().unwrap_or_default();
    assert!(
        isolation.contains("user+mount+pid namespaces") && isolation.contains("landlock"),
        "{body}"
    );
    assert!(daemon.terminate().success());

    // Test builds let the probe answer as a kernel refusing user namespaces.
    let daemon = hub.serve_with(&[("TEAMMEM_TEST_NO_NAMESPACES", "1")]);
    let ready = reqwest::get(daemon.url("/readyz")).await.unwrap();
    assert_eq!(ready.status(), 503);
    let body: Value = ready.json().await.unwrap();
    let problems = body["problems"].to_string();
    assert!(
        problems.contains("namespaces") && problems.contains("Unix socket"),
        "{body}"
    );
    assert_eq!(body["agent_isolation"], "unavailable", "{body}");
    assert!(daemon.terminate().success());
}

#[tokio::test]
async fn a_receipt_linked_to_dev_zero_or_a_fifo_fails_the_job_unread() {
    for (what, make) in [
        ("symbolic link", "os.symlink('/dev/zero', sys.argv[2])"),
        ("not a regular file", "os.mkfifo(sys.argv[2])"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent.py");
        std::fs::write(
            &agent,
            format!("import os, sys\nsys.stdin.read()\n{make}\n"),
        )
        .unwrap();
        let s = Setup::with_extra(&command::agent_table(&agent, &[], 60));
        let rss = || {
            std::fs::read_to_string("/proc/self/status")
                .unwrap()
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .unwrap()
        };
        let before = rss();
        let failure = s.runner().run(&s.full_range(1)).await.unwrap_err();
        assert!(!failure.retryable);
        assert!(failure.reason.contains(what), "{what}: {}", failure.reason);
        // The peak resident size of this whole test process did not move by
        // the 64 KiB bound, let alone by what /dev/zero would give.
        assert!(rss() < before + 32 * 1024, "{what}: memory grew");
    }
}

#[tokio::test]
async fn a_job_that_fails_after_its_token_was_minted_revokes_it() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.py");
    std::fs::write(&agent, "import sys\nsys.stdin.read()\nsys.exit(3)\n").unwrap();
    let hub = Hub::with_config(&command::agent_table(&agent, &[], 60)).await;
    let daemon = hub.serve();
    let token = hub.setup.create_token("isolation", &[]);
    let answer = hub
        .dispatch_range(&daemon, 100, &hub.source.base, &hub.source.head)
        .await;
    let id = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(&daemon, &token, id, finished).await;
    assert_eq!(job["state"], "failed", "{job}");
    let mints = hub.fake.write_mints_for("octo/app");
    assert_eq!(mints.len(), 1, "one wiki token for the one attempt");
    // A failed attempt revokes its token as the job's future is dropped,
    // beside the worker recording the failure: wait for it, bounded.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !hub.fake.revoked_tokens().contains(&mints[0].token) {
        assert!(
            std::time::Instant::now() < deadline,
            "the failed job's token was not revoked"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(daemon.terminate().success());
}

/// A hanging agent (with a child in a session of its own) on the GitHub
/// forge, its daemon with `queue` settings `queue`, a dispatch running it:
/// the hub, the daemon, the job id, the agent's pids and the job's token.
async fn running_a_hanging_agent(
    queue: &str,
) -> (
    Hub,
    crate::harness::daemon::Daemon,
    i64,
    Vec<u32>,
    String,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("hang.py");
    std::fs::write(
        &agent,
        "import os, sys, time\nsys.stdin.read()\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\ntime.sleep(600)\n",
    )
    .unwrap();
    let hub = Hub::with_config(&format!(
        "{}\n[queue]\n{queue}\n",
        command::agent_table(&agent, &[], 600)
    ))
    .await;
    let daemon = hub.serve();
    let answer = hub
        .dispatch_range(&daemon, 100, &hub.source.base, &hub.source.head)
        .await;
    let id = answer["job_id"].as_i64().unwrap();
    let script = agent.display().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while processes_running(&script).len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let pids = processes_running(&script);
    let mints = hub.fake.write_mints_for("octo/app");
    assert_eq!(mints.len(), 1);
    let token = mints[0].token.clone();
    (hub, daemon, id, pids, token, dir)
}

/// Waits (bounded) until every pid is gone or a zombie.
async fn all_gone(pids: &[u32], when: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for pid in pids {
        while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        }) {
            assert!(
                std::time::Instant::now() < deadline,
                "{pid} outlived {when}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// Shutdown while the agent runs: the job is released, its token revoked
/// before the daemon exits, and the agent (with the child it left in a
/// session of its own) is gone.
#[tokio::test]
async fn a_job_cut_off_by_shutdown_revokes_its_token_and_leaves_no_process() {
    let (hub, daemon, _, pids, token, _dir) =
        running_a_hanging_agent("shutdown_grace_seconds = 0").await;
    // Waited for off this runtime: the fake GitHub answers on it.
    let stopped = tokio::task::spawn_blocking(move || daemon.terminate())
        .await
        .unwrap();
    assert!(stopped.success());
    // The daemon waited for the revocation before it exited.
    assert!(
        hub.fake.revoked_tokens().contains(&token),
        "the released job's token was not revoked"
    );
    all_gone(&pids, "the daemon's shutdown").await;
}

/// A running job cancelled through the API: its lease is lost at the next
/// heartbeat, its token revoked and its agent's processes gone.
#[tokio::test]
async fn a_cancelled_running_job_revokes_its_token_and_leaves_no_process() {
    let (hub, daemon, id, pids, token, _dir) = running_a_hanging_agent("lease_seconds = 5").await;
    let admin = hub.setup.create_token("isolation", &[]);
    let answer = reqwest::Client::new()
        .post(daemon.url(&format!("/v1/jobs/{id}/cancel")))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert!(
        answer.status().is_success(),
        "{}",
        answer.text().await.unwrap()
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !hub.fake.revoked_tokens().contains(&token) {
        assert!(
            std::time::Instant::now() < deadline,
            "the cancelled job's token was not revoked"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    all_gone(&pids, "the cancelled job").await;
    assert!(daemon.terminate().success());
}

/// Processes (not the sandbox trampoline) whose command line contains `needle`.
fn processes_running(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|pid: &u32| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            cmdline.contains(needle) && !cmdline.contains("sandbox-exec")
        })
        .collect()
}
