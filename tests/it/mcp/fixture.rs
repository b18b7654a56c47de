//! Test fixture for the MCP tests: a temp directory with a wiki made by the `git`
//! CLI, a second (empty) wiki, a teammem.toml naming both, and rmcp clients
//! connected to an in-process server in agent or writer mode.
//!
//! Every envelope a test reads goes through [`Client::envelope`], which checks
//! the shape invariants (text == structuredContent, isError == !success, exactly
//! the four envelope keys), so every call of every test checks them.

use std::collections::HashMap;
use std::path::PathBuf;

use rmcp::model::{CallToolRequestParams, CallToolResult, Tool};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::{ErrorData, ServiceExt};
use serde_json::Value;
use teammem::config::Config;
use teammem::mcp::{Binding, WikiServer};

use crate::harness::git::git;

pub const SOURCE: &str = "demo/app";
pub const OTHER: &str = "demo/other";
pub const TOKEN: &str = "tmm-writer-token-5f2a9c";
pub const JOB: &str = "job-42";

pub const HOME: &str = "# Home\n\nWelcome to the team memory.\n\n## Areas\n- [Topic](area/Topic)\n";
pub const TOPIC: &str =
    "# Topic\n\nRecent changes:\n- first entry\n\nKeep this line exactly.  \r\nTrailing bytes\t\n";
pub const CAFE: &str = "# Café\n\nNotes about ünïcode and the café.\n";

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub wiki: PathBuf,
    pub other_wiki: PathBuf,
    pub config_path: PathBuf,
    work: PathBuf,
}

impl Fixture {
    /// A wiki with `Home.md`, `area/Topic.md` and `Ünïcode/Café.md` in one commit,
    /// an empty second wiki, and the configuration naming both.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().to_path_buf();
        let wiki = root.join("app.wiki.git");
        let other_wiki = root.join("other.wiki.git");
        let work = root.join("work");
        for bare in [&wiki, &other_wiki] {
            git(
                &root,
                &[
                    "init",
                    "-q",
                    "--bare",
                    "--initial-branch=master",
                    bare.to_str().unwrap(),
                ],
            );
        }
        git(
            &root,
            &[
                "clone",
                "-q",
                wiki.to_str().unwrap(),
                work.to_str().unwrap(),
            ],
        );
        git(&work, &["checkout", "-q", "-b", "master"]);
        let config_path = root.join("teammem.toml");
        std::fs::write(
            &config_path,
            format!(
                r#"
[server]
data_dir = "{root}/data"

[[sources]]
repository = "{SOURCE}"
local_path = "{root}/app.git"
local_wiki_path = "{wiki}"
webhook_secret_env = "TEAMMEM_SECRET_DEMO"

[[sources]]
repository = "{OTHER}"
local_path = "{root}/other.git"
local_wiki_path = "{other}"
webhook_secret_env = "TEAMMEM_SECRET_OTHER"
"#,
                root = root.display(),
                wiki = wiki.display(),
                other = other_wiki.display(),
            ),
        )
        .expect("write config");
        let fixture = Self {
            dir,
            wiki,
            other_wiki,
            config_path,
            work,
        };
        fixture.commit(
            &[
                ("Home.md", HOME),
                ("area/Topic.md", TOPIC),
                ("Ünïcode/Café.md", CAFE),
            ],
            "Initial pages",
        );
        fixture
    }

    pub fn config(&self) -> Config {
        Config::load(&self.config_path).expect("the fixture config is valid")
    }

    /// Commits pages as a human would (git CLI) on top of the wiki's current
    /// tip and pushes them; returns the new tip.
    pub fn commit(&self, pages: &[(&str, &str)], message: &str) -> String {
        if !self.git(&["for-each-ref", "refs/heads/master"]).is_empty() {
            git(&self.work, &["pull", "-q", "--ff-only", "origin", "master"]);
        }
        for (path, content) in pages {
            let file = self.work.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, content).unwrap();
        }
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-q", "-m", message]);
        git(&self.work, &["push", "-q", "origin", "master"]);
        self.head()
    }

    /// The tip of the wiki's `master`, read by the git CLI.
    pub fn head(&self) -> String {
        self.git(&["rev-parse", "refs/heads/master"])
            .trim()
            .to_owned()
    }

    /// git in the bare wiki.
    pub fn git(&self, args: &[&str]) -> String {
        git(&self.wiki, args)
    }

    /// The environment `teammem mcp --wiki-writer` is started with.
    pub fn writer_env(&self) -> HashMap<String, String> {
        HashMap::from([
            (
                "TEAMMEM_CONFIG".into(),
                self.config_path.display().to_string(),
            ),
            ("TEAMMEM_WRITER_SOURCE".into(), SOURCE.into()),
            ("TEAMMEM_WRITER_JOB".into(), JOB.into()),
            (
                "TEAMMEM_WRITER_RANGE".into(),
                format!("{}..{}", "a".repeat(40), "b".repeat(40)),
            ),
            ("TEAMMEM_WRITER_TOKEN".into(), TOKEN.into()),
        ])
    }

    pub async fn agent(&self, read_only: bool) -> Client {
        Client::connect(Binding::agent(self.config(), read_only)).await
    }

    pub async fn writer(&self) -> Client {
        let env = self.writer_env();
        Client::connect(Binding::writer_from_env(|name| env.get(name).cloned()).expect("binding"))
            .await
    }

    pub fn mirrors(&self) -> PathBuf {
        self.dir.path().join("data").join("mirrors")
    }
}

/// An rmcp client connected to an in-process server over a duplex pipe.
pub struct Client {
    service: RunningService<RoleClient, ()>,
    server: tokio::task::JoinHandle<()>,
}

impl Client {
    pub async fn connect(binding: Binding) -> Self {
        Self::connect_to(WikiServer::new(binding)).await
    }

    pub async fn connect_to(server: WikiServer) -> Self {
        let (server_io, client_io) = tokio::io::duplex(4 << 20);
        let server = tokio::spawn(async move {
            let running = server.serve(server_io).await.expect("server handshake");
            let _ = running.waiting().await;
        });
        let service = ().serve(client_io).await.expect("client handshake");
        Self { service, server }
    }

    pub async fn tools(&self) -> Vec<Tool> {
        self.service.list_all_tools().await.expect("tools/list")
    }

    pub async fn call(&self, name: &str, arguments: Value) -> Result<CallToolResult, ServiceError> {
        let Value::Object(arguments) = arguments else {
            panic!("arguments must be an object")
        };
        self.service
            .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
            .await
    }

    /// Calls a tool that must answer with an envelope; checks its shape.
    pub async fn envelope(&self, name: &str, arguments: Value) -> Value {
        let result = self
            .call(name, arguments)
            .await
            .unwrap_or_else(|error| panic!("{name} answered a JSON-RPC error: {error}"));
        check_shape(&result)
    }

    /// Calls a tool that must answer with a JSON-RPC error.
    pub async fn rpc_error(&self, name: &str, arguments: Value) -> ErrorData {
        match self.call(name, arguments).await {
            Err(ServiceError::McpError(error)) => error,
            other => panic!("{name} should answer a JSON-RPC error, got {other:?}"),
        }
    }

    pub async fn close(self) {
        self.service.cancel().await.expect("client closes");
        self.server.await.expect("server task ends");
    }
}

/// The envelope invariants every tool result keeps.
pub fn check_shape(result: &CallToolResult) -> Value {
    assert_eq!(result.content.len(), 1, "one text content");
    let text = &result.content[0].as_text().expect("text content").text;
    let from_text: Value = serde_json::from_str(text).expect("the text is JSON");
    let structured = result
        .structured_content
        .clone()
        .expect("structuredContent");
    assert_eq!(from_text, structured, "text and structuredContent differ");
    let object = structured.as_object().expect("the envelope is an object");
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["error", "outcome", "result", "success"]);
    let success = structured["success"].as_bool().expect("success is a bool");
    assert_eq!(
        result.is_error,
        Some(!success),
        "isError must equal !success"
    );
    if success {
        assert_eq!(structured["outcome"], "completed");
        assert!(structured["error"].is_null());
    } else {
        let error = &structured["error"];
        assert!(
            error["type"].is_string() && error["message"].is_string(),
            "{error}"
        );
        assert!(error.as_object().unwrap().contains_key("http_status"));
        let message = error["message"].as_str().unwrap();
        assert!(!message.ends_with('.'), "no trailing period: {message}");
    }
    structured
}

/// The error type of a failed envelope.
pub fn error_type(envelope: &Value) -> &str {
    assert_eq!(envelope["success"], false, "expected a failure: {envelope}");
    envelope["error"]["type"].as_str().unwrap()
}
