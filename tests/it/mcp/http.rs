//! The writer against a GitHub-style wiki remote: smart HTTP served by
//! `git http-backend` with Basic `x-access-token` auth (the harness), a source
//! whose wiki lives in another repository. The token reaches the server (or
//! nothing would work) and never appears in a result or the mirror; a
//! destination mismatch sends no request at all.

use std::path::Path;

use base64::Engine;
use serde_json::{Value, json};
use teammem::mcp::context::CredentialFuture;
use teammem::mcp::envelope::Secret;
use teammem::mcp::{Binding, Context, WikiCredentials, WikiServer};

use super::fixture::{Client, error_type};
use crate::harness::git::git;
use crate::harness::git_http::{Fault, GitHttpServer, bare_with_commits, tip};

const SOURCE: &str = "octo/app";
const WIKI: &str = "octo/notes";
const TOKEN: &str = "ghs_writerTokenForTests0123456789";

struct Remote {
    dir: tempfile::TempDir,
    server: GitHttpServer,
    bare: std::path::PathBuf,
    config: std::path::PathBuf,
}

async fn remote() -> Remote {
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("served");
    std::fs::create_dir_all(served.join("octo")).unwrap();
    let bare = bare_with_commits(
        &served,
        "octo/notes.wiki.git",
        &[("Initial", &[("Home.md", "# Home\n\nNotes.\n")])],
    );
    let server = GitHttpServer::start(&served, Some(TOKEN)).await;
    let config = dir.path().join("teammem.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[server]
data_dir = "{data}"

[github]
git_url = "http://127.0.0.1:{port}"
app_id = 1
private_key = {{ file = "/nonexistent/app.pem" }}

[[sources]]
repository = "{SOURCE}"
wiki_repository = "{WIKI}"
webhook_secret_env = "TEAMMEM_SECRET_OCTO"
"#,
            data = dir.path().join("data").display(),
            port = server.port(),
        ),
    )
    .unwrap();
    Remote {
        dir,
        server,
        bare,
        config,
    }
}

async fn writer(remote: &Remote, token: &str) -> Client {
    let env = std::collections::HashMap::from([
        ("TEAMMEM_CONFIG", remote.config.display().to_string()),
        ("TEAMMEM_WRITER_SOURCE", SOURCE.to_owned()),
        ("TEAMMEM_WRITER_JOB", "job-7".to_owned()),
        ("TEAMMEM_WRITER_TOKEN", token.to_owned()),
    ]);
    Client::connect(Binding::writer_from_env(|name| env.get(name).cloned()).expect("binding")).await
}

fn assert_no_token(text: &str) {
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{TOKEN}"));
    assert!(!text.contains(TOKEN), "the token leaked: {text}");
    assert!(
        !text.contains(&basic),
        "the Basic credential leaked: {text}"
    );
}

fn files_containing(root: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        } else if std::fs::read(&path)
            .unwrap()
            .windows(needle.len())
            .any(|window| window == needle)
        {
            found.push(path.display().to_string());
        }
    }
    found
}

#[tokio::test]
async fn the_writer_uses_the_token_over_http_and_never_reveals_it() {
    let remote = remote().await;
    let writer = writer(&remote, TOKEN).await;
    let mut seen: Vec<Value> = Vec::new();

    let snapshot = writer
        .envelope("get_wiki_snapshot", json!({"repository": SOURCE}))
        .await;
    assert_eq!(snapshot["success"], true, "{snapshot}");
    assert_eq!(snapshot["result"]["source_repository"], SOURCE);
    assert_eq!(snapshot["result"]["wiki_repository"], WIKI);
    let base = snapshot["result"]["sha"].as_str().unwrap().to_owned();
    assert_eq!(base, tip(&remote.bare, "master"));
    seen.push(snapshot);

    // A mismatch is refused before any request reaches the remote.
    remote.server.clear_requests();
    let mismatch = writer
        .envelope(
            "write_wiki_pages",
            json!({"repository": SOURCE, "expected_wiki_repository": SOURCE, "expected_base": base,
                   "message": "m", "pages": [{"path": "Home.md", "content": "x\n"}]}),
        )
        .await;
    assert_eq!(error_type(&mismatch), "destination_changed", "{mismatch}");
    assert_eq!(
        remote.server.requests(),
        Vec::new(),
        "no request may be sent"
    );
    seen.push(mismatch);

    let written = writer
        .envelope(
            "write_wiki_pages",
            json!({"repository": SOURCE, "expected_wiki_repository": WIKI, "expected_base": base,
                   "message": "Record the first merge",
                   "pages": [{"path": "Changelog.md", "content": "# Changelog\n"}]}),
        )
        .await;
    assert_eq!(written["result"]["status"], "updated", "{written}");
    let new = written["result"]["sha"].as_str().unwrap().to_owned();
    let new = new.as_str();
    assert_eq!(tip(&remote.bare, "master"), new);
    assert_eq!(
        git(&remote.bare, &["log", "-1", "--format=%P", new]).trim(),
        base
    );
    assert_eq!(
        git(&remote.bare, &["show", &format!("{new}:Changelog.md")]),
        "# Changelog\n"
    );
    let trailers = git(
        &remote.bare,
        &["log", "-1", "--format=%(trailers:only,unfold)", new],
    );
    assert_eq!(
        trailers.trim(),
        format!("Teammem-Job: job-7\nTeammem-Source: {SOURCE}")
    );
    git(&remote.bare, &["fsck", "--strict"]);
    seen.push(written);

    for (tool, arguments) in [
        ("list_wiki_pages", json!({"repository": SOURCE, "ref": new})),
        (
            "get_wiki_page",
            json!({"repository": SOURCE, "path": "Changelog.md"}),
        ),
        ("list_wiki_history", json!({"repository": SOURCE})),
        (
            "get_wiki_diff",
            json!({"repository": SOURCE, "from": base, "to": new}),
        ),
        (
            "search_wiki",
            json!({"repository": SOURCE, "query": "changelog"}),
        ),
    ] {
        let envelope = writer.envelope(tool, arguments).await;
        assert_eq!(envelope["success"], true, "{tool}: {envelope}");
        assert_eq!(envelope["result"]["wiki_repository"], WIKI);
        seen.push(envelope);
    }
    for envelope in &seen {
        assert_no_token(&envelope.to_string());
    }
    assert_eq!(
        files_containing(&remote.dir.path().join("data"), TOKEN.as_bytes()),
        Vec::<String>::new(),
        "the token is never written under data_dir"
    );
    writer.close().await;
}

#[tokio::test]
async fn a_refused_token_is_an_authentication_error_that_names_no_secret() {
    let remote = remote().await;
    let wrong = "ghs_wrongTokenForTests99999999";
    let writer = writer(&remote, wrong).await;
    let snapshot = writer
        .envelope("get_wiki_snapshot", json!({"repository": SOURCE}))
        .await;
    assert_eq!(error_type(&snapshot), "authentication_error", "{snapshot}");
    assert_eq!(snapshot["result"]["wiki_repository"], WIKI);
    let text = snapshot.to_string();
    assert!(!text.contains(wrong) && !text.contains(TOKEN), "{text}");
    writer.close().await;
}

/// Runs `teammem wiki ARGS` against the remote with `token` in
/// `TEAMMEM_WIKI_TOKEN` and every log level on; returns the printed envelope
/// and everything logged to stderr.
async fn logged_wiki_command(remote: &Remote, token: &str, args: &[&str]) -> (Value, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_teammem"))
        .arg("wiki")
        .args(["--config", remote.config.to_str().unwrap()])
        .args(["--repository", SOURCE])
        .args(args)
        .env("TEAMMEM_WIKI_TOKEN", token)
        .env("TEAMMEM_LOG", "trace")
        .output()
        .await
        .expect("run teammem wiki");
    let stderr = String::from_utf8(output.stderr).expect("logs are UTF-8");
    let envelope = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "stdout is the envelope: {}\nstderr: {stderr}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    (envelope, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_never_appears_in_a_log_line_of_authenticated_reads_and_writes() {
    let remote = remote().await;
    let mut logs = Vec::new();

    let (snapshot, log) = logged_wiki_command(&remote, TOKEN, &["snapshot"]).await;
    assert_eq!(snapshot["success"], true, "{snapshot}\n{log}");
    let base = snapshot["result"]["sha"].as_str().unwrap().to_owned();
    logs.push(log);
    let (home, log) = logged_wiki_command(&remote, TOKEN, &["get", "--path", "Home.md"]).await;
    assert_eq!(home["success"], true, "{home}");
    logs.push(log);

    let pages = json!([{"path": "Logged.md", "content": "written with logs on\n"}]).to_string();
    let write = [
        "write",
        "--expected-base",
        &base,
        "--expected-wiki-repository",
        WIKI,
        "--message",
        "Write with every log level on",
        "--pages",
        &pages,
    ];
    let (written, log) = logged_wiki_command(&remote, TOKEN, &write).await;
    assert_eq!(written["result"]["status"], "updated", "{written}\n{log}");
    logs.push(log);
    // Another write on the old base: a conflict, read back from the remote.
    let other = json!([{"path": "Logged.md", "content": "a stale edit\n"}]).to_string();
    let mut stale = write;
    stale[8] = &other;
    let (conflict, log) = logged_wiki_command(&remote, TOKEN, &stale).await;
    assert_eq!(error_type(&conflict), "conflict", "{conflict}");
    logs.push(log);
    // A server failure and a refused token are logged with their details.
    remote.server.inject(Fault::Status {
        suffix: "service=git-upload-pack".into(),
        status: 500,
    });
    let (failed, log) = logged_wiki_command(&remote, TOKEN, &["snapshot"]).await;
    assert_eq!(error_type(&failed), "upstream_error", "{failed}");
    logs.push(log);
    let (refused, log) = logged_wiki_command(&remote, "ghs_notTheRightOne", &["snapshot"]).await;
    assert_eq!(error_type(&refused), "authentication_error", "{refused}");
    logs.push(log);

    let all = logs.concat();
    // The capture works: every request and both failures were logged.
    let requests = all.matches("wiki HTTP request").count();
    assert!(requests >= 8, "{requests} requests logged:\n{all}");
    assert!(
        all.matches("wiki transport error").count() >= 2,
        "failures are logged with details:\n{all}"
    );
    assert_no_token(&all);
}

/// A provider standing in for the GitHub App: hands out one token and records
/// what it was asked for.
struct FakeApp {
    token: &'static str,
    asked: std::sync::Mutex<Vec<(String, bool)>>,
}

impl WikiCredentials for FakeApp {
    fn token<'a>(&'a self, wiki_repository: &'a str, write: bool) -> CredentialFuture<'a> {
        self.asked
            .lock()
            .unwrap()
            .push((wiki_repository.to_owned(), write));
        Box::pin(async move { Ok(Some(Secret::new(self.token))) })
    }
}

#[tokio::test]
async fn the_agent_server_reads_with_provided_credentials_and_never_reveals_them() {
    let remote = remote().await;
    let config = teammem::config::Config::load(&remote.config).unwrap();

    // Without a provider the agent reads anonymously, which this wiki refuses.
    let anonymous = Client::connect(Binding::agent(config.clone(), true)).await;
    let refused = anonymous
        .envelope("get_wiki_snapshot", json!({"repository": SOURCE}))
        .await;
    assert_eq!(error_type(&refused), "authentication_error", "{refused}");
    anonymous.close().await;

    let app = std::sync::Arc::new(FakeApp {
        token: TOKEN,
        asked: std::sync::Mutex::new(Vec::new()),
    });
    let context = Context::new(Binding::agent(config, true)).with_credentials(app.clone());
    let agent = Client::connect_to(WikiServer::with_context(context)).await;
    let snapshot = agent
        .envelope("get_wiki_snapshot", json!({"repository": SOURCE}))
        .await;
    assert_eq!(snapshot["success"], true, "{snapshot}");
    assert_eq!(snapshot["result"]["wiki_repository"], WIKI);
    assert_eq!(app.asked.lock().unwrap()[0], (WIKI.to_owned(), false));
    assert_no_token(&snapshot.to_string());

    // A page holding the provided token is withheld.
    let work = remote.dir.path().join("leak");
    git(
        remote.dir.path(),
        &[
            "clone",
            "-q",
            remote.bare.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    std::fs::write(work.join("Leak.md"), format!("{TOKEN}\n")).unwrap();
    git(&work, &["add", "Leak.md"]);
    git(&work, &["commit", "-q", "-m", "leak"]);
    git(&work, &["push", "-q", "origin", "master"]);
    let snapshot = agent
        .envelope("get_wiki_snapshot", json!({"repository": SOURCE}))
        .await;
    assert_eq!(snapshot["success"], true, "{snapshot}");
    let page = agent
        .envelope(
            "get_wiki_page",
            json!({"repository": SOURCE, "path": "Leak.md"}),
        )
        .await;
    assert_eq!(error_type(&page), "internal_error", "{page}");
    assert_no_token(&page.to_string());
    agent.close().await;
}
