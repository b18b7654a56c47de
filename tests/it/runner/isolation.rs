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
    let revoked = hub.fake.revoked_tokens();
    assert!(
        revoked.contains(&mints[0].token),
        "the failed job's token was not revoked"
    );
    assert!(daemon.terminate().success());
}
