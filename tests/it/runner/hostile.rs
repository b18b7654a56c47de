//! A hostile `command` agent in the real `teammem serve` process on the
//! GitHub forge (`hostile_agent.py`): it does its job and meanwhile tries every
//! escape issue #17 names — the daemon's and the writer's `/proc`, the config
//! file, the App key, the database, the session key, another job's
//! directory, its own writer with a copied config pointing at a listener,
//! a fake broker of its own, the job's endpoint handed to a writer as its
//! broker, signals and ptrace, a background child left running — then
//! publishes whatever it obtained to the wiki through its legitimate writer
//! and sends it to a loopback listener this test runs (its port is the one
//! outbound port the sandbox allows). Neither ever holds a real secret; the
//! job's wiki token is revoked at the end; no process of the job outlives it.

use std::sync::{Arc, Mutex};

use super::command;
use super::daemon_client::{finished, wait_for, wiki_tip};
use super::github::{Hub, SECRET};
use crate::harness::git::git_trimmed;

const LLM_KEY: &str = "sk-hostile-test-llm-key-0123456789abcdef";
const OTHER_JOB_MARKER: &str = "OTHER-JOB-PRIVATE-EVIDENCE-3f9a1c";

/// Accepts connections on loopback and keeps every byte received; answers
/// each connection `401` (what a git server says to a request without
/// credentials).
async fn listener() -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let kept = kept.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match tokio::time::timeout(
                        std::time::Duration::from_secs(2),
                        stream.read(&mut buf),
                    )
                    .await
                    {
                        Ok(Ok(0)) | Ok(Err(_)) => break,
                        Ok(Ok(n)) => {
                            kept.lock().unwrap().extend_from_slice(&buf[..n]);
                            if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                                let _ = stream
                                    .write_all(b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"x\"\r\nContent-Length: 0\r\n\r\n")
                                    .await;
                            }
                        }
                        Err(_) => break,
                    }
                }
            });
        }
    });
    (port, seen)
}

/// Whether a live (not zombie) process of the host runs `hostile_agent.py`
/// with `pid` as its pid in the agent's own PID namespace (the pid the agent
/// reports is the one it sees; `NSpid` in the host's `/proc` lists both).
fn alive_in_agent_namespace(pid: i32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        let dir = entry.path();
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let nested = status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .map(|ids| ids.split_whitespace().collect::<Vec<_>>())
            .is_some_and(|ids| ids.len() >= 2 && ids.last() == Some(&pid.to_string().as_str()));
        let zombie = status
            .lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'));
        let ours = std::fs::read(dir.join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains("hostile_agent"));
        nested && !zombie && ours
    })
}

#[tokio::test]
async fn a_hostile_command_agent_obtains_no_secret_and_leaves_nothing_running() {
    let (port, received) = listener().await;
    let agent_dir = tempfile::tempdir().unwrap();
    let agent = agent_dir.path().join("hostile.py");
    std::fs::write(&agent, include_str!("hostile_agent.py")).unwrap();
    std::fs::write(agent_dir.path().join("mcp_client.py"), command::MCP_CLIENT).unwrap();
    let python = command::python();
    let prefix = std::process::Command::new(&python)
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        .unwrap();
    let prefix = String::from_utf8(prefix.stdout).unwrap().trim().to_owned();

    // The agent is told every path it should not reach.
    let placeholder = "@@";
    let hub = Hub::with_config(&format!(
        "\n[agent]\nkind = \"command\"\nargv = [\"{python}\", \"{agent}\", \"{{mcp_config}}\", \"{{receipt}}\", \"{placeholder}config\", \"{placeholder}key\", \"{placeholder}data\", \"{port}\", \"{placeholder}other\"]\ntimeout_seconds = 120\nread_paths = [\"{prefix}\", \"{dir}\"]\nconnect_ports = [{port}]\n",
        agent = agent.display(),
        dir = agent_dir.path().display(),
    ))
    .await;
    let data_dir = hub.setup.data_dir();
    let other_job = data_dir.join("jobs").join("999");
    let text = std::fs::read_to_string(&hub.setup.config)
        .unwrap()
        .replace(
            &format!("{placeholder}config"),
            &hub.setup.config.display().to_string(),
        )
        .replace(
            &format!("{placeholder}key"),
            &hub.key_path().display().to_string(),
        )
        .replace(
            &format!("{placeholder}data"),
            &data_dir.display().to_string(),
        )
        .replace(
            &format!("{placeholder}other"),
            &other_job.display().to_string(),
        );
    std::fs::write(&hub.setup.config, text).unwrap();
    // data_dir must stay 0700 (the daemon refuses an open one).
    std::fs::create_dir_all(&data_dir).unwrap();
    std::fs::set_permissions(
        &data_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    std::fs::create_dir_all(&other_job).unwrap();
    std::fs::write(
        other_job.join("evidence.json"),
        format!("{{\"private\": \"{OTHER_JOB_MARKER}\"}}"),
    )
    .unwrap();

    let api_token = hub.setup.create_token("hostile-test", &[]);
    let daemon = hub.serve_with(&[("TEAMMEM_TEST_LLM_KEY", LLM_KEY)]);
    let start = wiki_tip(&hub.wiki);
    let answer = hub
        .dispatch_range(&daemon, 100, &hub.source.base, &hub.source.head)
        .await;
    let id = answer["job_id"].as_i64().unwrap();
    let (job, _) = wait_for(&daemon, &api_token, id, finished).await;
    assert_eq!(job["state"], "succeeded", "{job}");
    assert_ne!(wiki_tip(&hub.wiki), start);

    let loot = git_trimmed(&hub.wiki, &["show", "master:Loot.md"]);
    let listened = String::from_utf8_lossy(&received.lock().unwrap()).into_owned();
    // The agent did run its attempts and did reach the listener.
    for attempt in [
        "\"daemon_config\"",
        "\"app_key\"",
        "\"session_key\"",
        "\"own_writer\"",
        "\"own_writer_fake_broker\"",
        "\"endpoint_as_broker\"",
        "\"orphan\"",
    ] {
        assert!(loot.contains(attempt), "{attempt} missing from\n{loot}");
    }
    assert!(listened.contains("POST /loot"), "{listened}");
    // Its own writers did reach the listener, without any credential.
    assert!(
        listened.contains("/octo/app.wiki.git/info/refs"),
        "{listened}"
    );
    assert!(
        !listened.to_ascii_lowercase().contains("authorization:"),
        "{listened}"
    );

    // No real secret, in plain or hex form, in either.
    let session_key = std::fs::read(data_dir.join("session.key")).unwrap();
    let pem = hub.fake.app_key_pem.clone();
    let pem_line = pem
        .lines()
        .find(|l| l.len() >= 60 && !l.starts_with("-----"))
        .unwrap()
        .to_owned();
    let mut secrets: Vec<(String, String)> = vec![
        ("the App key".into(), pem_line),
        ("the dispatch secret".into(), SECRET.into()),
        ("the LLM key".into(), LLM_KEY.into()),
        ("an API token".into(), api_token.clone()),
        ("the session key".into(), hex::encode(&session_key)),
        ("another job's evidence".into(), OTHER_JOB_MARKER.into()),
        ("the database".into(), "SQLite format 3".into()),
        ("the configuration".into(), "TEAMMEM_SECRET_OCTO".into()),
    ];
    for token in hub.fake.minted_tokens() {
        secrets.push(("a minted token".into(), token));
    }
    for (what, value) in &secrets {
        for form in [value.clone(), hex::encode(value.as_bytes())] {
            assert!(!loot.contains(&form), "the wiki holds {what}:\n{loot}");
            assert!(
                !listened.contains(&form),
                "the listener received {what}:\n{listened}"
            );
        }
    }

    // The database has no token the agent made; nothing was written outside.
    let tokens = hub.setup.run(&["tokens", "list"]);
    let listing = String::from_utf8_lossy(&tokens.stdout);
    assert!(!listing.contains("agent"), "{listing}");
    assert!(!data_dir.join("agent-was-here").exists());

    // The job's wiki token: minted for this job (contents: write on the
    // wiki), revoked at its end.
    let wiki_tokens: Vec<String> = hub
        .fake
        .write_mints_for("octo/app")
        .into_iter()
        .map(|m| m.token)
        .collect();
    assert_eq!(wiki_tokens.len(), 1, "one wiki token for the one job");
    // It was used only for the writer's git access to the wiki, and once
    // more to revoke it.
    let uses = hub.fake.uses_of(&wiki_tokens[0]);
    assert!(
        uses.iter()
            .any(|u| u.starts_with("git write /octo/app.wiki.git/")),
        "{uses:?}"
    );
    for used in &uses {
        assert!(
            used.starts_with("git read /octo/app.wiki.git/")
                || used.starts_with("git write /octo/app.wiki.git/")
                || used == "DELETE /installation/token",
            "the job's token was used for {used}"
        );
    }
    let revoked = hub.fake.revoked_tokens();
    assert!(
        revoked.contains(&wiki_tokens[0]),
        "the job's token was not revoked"
    );

    // The orphan it left behind is gone with the job.
    let orphan: serde_json::Value = serde_json::from_str(
        loot.trim()
            .trim_start_matches("```")
            .trim_end_matches("```")
            .trim(),
    )
    .unwrap();
    let pid = orphan["orphan"]["value"]
        .as_i64()
        .expect("the orphan's pid") as i32;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alive_in_agent_namespace(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent's background child {pid} outlived the job"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The daemon itself was neither stopped nor signalled away.
    assert!(daemon.terminate().success());
}
