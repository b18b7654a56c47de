//! Agents read a private GitHub wiki: the daemon's `/mcp` and the real
//! `teammem mcp` process mint an installation token with the GitHub App (the
//! stateful fake) for exactly the wiki's repository and `contents: read`, and
//! the smart-HTTP git server (`git http-backend`) accepts only tokens the fake
//! minted for that repository. The token never shows in a result, under
//! `data_dir` or in the process's log; a wiki whose repository lacks the App
//! is refused with a sentence that says so.

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::coordinator::{Era, connect, envelope};
use crate::harness::fake_github::{FakeGitHub, GitRepo};
use crate::harness::git_http::{GitHttpServer, bare_with_commits, tip};
use crate::harness::inproc;

const SOURCE: &str = "octo/app";
const WIKI: &str = "octo/notes";
/// A source whose wiki repository does not have the App installed.
const UNINSTALLED: &str = "octo/lonely";

struct World {
    dir: tempfile::TempDir,
    github: FakeGitHub,
    git: GitHttpServer,
    wiki: std::path::PathBuf,
    config_path: std::path::PathBuf,
}

async fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let github = FakeGitHub::start().await;
    let scratch = GitRepo::init(&dir.path().join("scratch"));
    scratch.commit("README.md", "Initial commit");
    github.add_repo(SOURCE, &scratch, "private", true);
    github.add_repo(WIKI, &scratch, "private", true);
    github.add_repo(UNINSTALLED, &scratch, "private", false);
    let served = dir.path().join("served");
    std::fs::create_dir_all(served.join("octo")).unwrap();
    let wiki = bare_with_commits(
        &served,
        "octo/notes.wiki.git",
        &[("Initial", &[("Home.md", "# Home\n\nPrivate notes.\n")])],
    );
    bare_with_commits(
        &served,
        "octo/lonely.wiki.git",
        &[("Initial", &[("Home.md", "# Lonely\n")])],
    );
    let git = GitHttpServer::start_checked(&served, github.wiki_access()).await;
    let key = dir.path().join("app.pem");
    std::fs::write(&key, &github.app_key_pem).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config_path = dir.path().join("teammem.toml");
    std::fs::write(
        &config_path,
        format!(
            r#"
[server]
listen = "127.0.0.1:0"
data_dir = "{data}"

[github]
api_url = "{api}"
git_url = "http://127.0.0.1:{port}"
app_id = {app_id}
private_key = {{ file = "{key}" }}

[[sources]]
repository = "{SOURCE}"
wiki_repository = "{WIKI}"
webhook_secret_env = "TEAMMEM_TEST_UNSET_SECRET"

[[sources]]
repository = "{UNINSTALLED}"
webhook_secret_env = "TEAMMEM_TEST_UNSET_SECRET"
"#,
            data = dir.path().join("data").display(),
            api = github.url,
            port = git.port(),
            app_id = github.app_id,
            key = key.display(),
        ),
    )
    .unwrap();
    World {
        dir,
        github,
        git,
        wiki,
        config_path,
    }
}

impl World {
    fn config(&self) -> teammem::config::Config {
        teammem::config::Config::load(&self.config_path).unwrap()
    }

    /// Every minted token must be absent from `text`.
    fn assert_no_token(&self, text: &str) {
        let minted = self.github.minted_tokens();
        assert!(!minted.is_empty(), "a token was minted");
        for token in minted {
            assert!(!text.contains(&token), "a wiki token leaked: {text}");
        }
    }

    /// Every minted token must be absent from every file under `data_dir`.
    fn assert_no_token_on_disk(&self) {
        let mut stack = vec![self.dir.path().join("data")];
        while let Some(path) = stack.pop() {
            if path.is_dir() {
                let Ok(entries) = std::fs::read_dir(&path) else {
                    continue; // removed since it was listed
                };
                for entry in entries.flatten() {
                    stack.push(entry.path());
                }
            } else {
                // A temporary file (a lock, a pack being written) may go
                // between listing and reading; what is gone is not on disk.
                let bytes = match std::fs::read(&path) {
                    Ok(bytes) => bytes,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => panic!("reading {}: {e}", path.display()),
                };
                for token in self.github.minted_tokens() {
                    assert!(
                        !bytes
                            .windows(token.len())
                            .any(|window| window == token.as_bytes()),
                        "a wiki token was written to {}",
                        path.display()
                    );
                }
            }
        }
    }

    /// The fake minted only read tokens, each for exactly the wiki's repository.
    fn assert_only_read_tokens_for_the_wiki(&self) {
        let mints = self.github.mints();
        assert!(!mints.is_empty());
        for mint in mints {
            assert_eq!(mint.repositories, vec!["notes".to_string()], "{mint:?}");
            assert_eq!(
                mint.permissions,
                vec![("contents".to_string(), "read".to_string())],
                "{mint:?}"
            );
        }
    }
}

#[tokio::test]
async fn mcp_reads_a_private_wiki_with_a_read_only_app_token() {
    let world = world().await;
    // The wiki is private: git itself cannot read it without a token.
    // (tokio's Command: the git server runs on this test's runtime.)
    let anonymous = tokio::process::Command::new("git")
        .args(["ls-remote", &world.git.url("octo/notes.wiki.git")])
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .await
        .unwrap();
    assert!(!anonymous.status.success(), "{anonymous:?}");
    let daemon = inproc::start(world.config()).await;
    let token = crate::requests::token(&world.config(), "agent", &[]).await;
    let mut seen: Vec<Value> = Vec::new();
    for era in [Era::Handshake, Era::Stateless] {
        let client = connect(&daemon, &token, era, false).await;
        let snapshot = envelope(&client, "get_wiki_snapshot", json!({"repository": SOURCE})).await;
        assert_eq!(snapshot["success"], true, "{era:?}: {snapshot}");
        assert_eq!(snapshot["result"]["wiki_repository"], WIKI);
        assert_eq!(snapshot["result"]["sha"], tip(&world.wiki, "master"));
        let page = envelope(
            &client,
            "get_wiki_page",
            json!({"repository": SOURCE, "path": "Home.md"}),
        )
        .await;
        assert_eq!(
            page["result"]["content"], "# Home\n\nPrivate notes.\n",
            "{page}"
        );
        let refused = envelope(
            &client,
            "get_wiki_snapshot",
            json!({"repository": UNINSTALLED}),
        )
        .await;
        assert_eq!(refused["error"]["type"], "permission_denied", "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("not installed on octo/lonely") && message.contains("install the App"),
            "{message}"
        );
        seen.extend([snapshot, page, refused]);
        client.cancel().await.unwrap();
    }
    // One read token (cached) served both eras; nothing may write.
    world.assert_only_read_tokens_for_the_wiki();
    assert_eq!(world.github.mints().len(), 1);
    for answer in &seen {
        world.assert_no_token(&answer.to_string());
    }
    daemon.shutdown().await.unwrap();
    world.assert_no_token_on_disk();
}

#[tokio::test]
async fn stdio_reads_a_private_wiki_and_never_logs_the_token() {
    let world = world().await;
    let mut command = tokio::process::Command::new(crate::harness::daemon::BIN);
    command
        .arg("mcp")
        .arg("--config")
        .arg(&world.config_path)
        .arg("--read-only")
        .env("TEAMMEM_LOG", "trace");
    let (transport, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn teammem mcp");
    let mut stderr = stderr.expect("stderr");
    let log = tokio::spawn(async move {
        let mut text = String::new();
        stderr.read_to_string(&mut text).await.unwrap();
        text
    });
    let client = ().serve(transport).await.expect("stdio handshake");
    let call = |tool: &str, arguments: Value| {
        CallToolRequestParams::new(tool.to_owned())
            .with_arguments(arguments.as_object().unwrap().clone())
    };
    let snapshot = client
        .call_tool(call("get_wiki_snapshot", json!({"repository": SOURCE})))
        .await
        .unwrap()
        .structured_content
        .unwrap();
    assert_eq!(snapshot["success"], true, "{snapshot}");
    assert_eq!(snapshot["result"]["sha"], tip(&world.wiki, "master"));
    let search = client
        .call_tool(call(
            "search_wiki",
            json!({"repository": SOURCE, "query": "private"}),
        ))
        .await
        .unwrap()
        .structured_content
        .unwrap();
    assert_eq!(search["success"], true, "{search}");
    assert!(search.to_string().contains("Home.md"), "{search}");
    client.cancel().await.unwrap();
    let log = log.await.unwrap();
    assert!(!log.is_empty(), "the trace log was captured");
    world.assert_only_read_tokens_for_the_wiki();
    for text in [snapshot.to_string(), search.to_string(), log] {
        world.assert_no_token(&text);
    }
    world.assert_no_token_on_disk();
}
