//! MCP resources through rmcp's own client, in both protocol eras: the
//! agent server in process (the handler `teammem mcp` serves on stdio) and
//! the in-process daemon's `/mcp`. Wikis are made and moved with the git
//! CLI. Pages are listed across a cursor (pinned to the commit it started
//! at, so a push between two calls neither skips nor repeats a page), read
//! as `get_wiki_page` returns them, a path's context through its template;
//! a subscriber hears `notifications/resources/updated` when a push moves
//! the tip (a page only when it changed), waited for with a timeout, never a
//! sleep; a token limited to another repository lists, reads and follows
//! none of them, answered exactly as for a repository that does not exist.

use std::collections::BTreeSet;
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ErrorCode, Implementation, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ResourceContents, ResourceUpdatedNotificationParam,
    ServerNotification, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, RoleClient, RunningService,
    ServiceError,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::fixture::{CAFE, Fixture, HOME, OTHER, SOURCE};
use crate::coordinator::Era;
use crate::harness::git::{git, git_trimmed};

const HOME_URI: &str = "teammem://demo/app/wiki/Home.md";
const CONTEXT_URI: &str = "teammem://demo/app/context/src/x.rs";
const WAIT: Duration = Duration::from_secs(20);

/// A client that passes every `notifications/resources/updated` on.
struct Listener {
    updated: mpsc::UnboundedSender<String>,
}

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("teammem-tests", "1"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.updated.send(params.uri);
    }
}

type Client = RunningService<RoleClient, Listener>;
type Updates = mpsc::UnboundedReceiver<String>;

fn lifecycle(era: Era) -> ClientLifecycleMode {
    match era {
        Era::Handshake => ClientLifecycleMode::Initialize,
        Era::Stateless => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    }
}

/// The fixture's configuration, following moves every 50 ms.
fn config(fixture: &Fixture) -> teammem::config::Config {
    let mut config = fixture.config();
    config.server.mcp_resource_poll = Duration::from_millis(50);
    config
}

/// The agent server in process, over a pipe.
async fn in_process(fixture: &Fixture, era: Era) -> (Client, Updates) {
    in_process_with(config(fixture), era).await
}

/// The agent server in process with `config`, over a pipe.
async fn in_process_with(config: teammem::config::Config, era: Era) -> (Client, Updates) {
    let binding = teammem::mcp::Binding::agent(config, false);
    let (server_io, client_io) = tokio::io::duplex(4 << 20);
    tokio::spawn(async move {
        let running = teammem::mcp::WikiServer::new(binding)
            .serve(server_io)
            .await
            .expect("server starts");
        let _ = running.waiting().await;
    });
    let (updated, updates) = mpsc::unbounded_channel();
    let client = Listener { updated }
        .serve_with_lifecycle(client_io, lifecycle(era))
        .await
        .expect("client connects");
    (client, updates)
}

/// A client of the daemon's `/mcp` with `token`.
async fn over_http(url: String, token: &str, era: Era) -> (Client, Updates) {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(token),
    );
    let (updated, updates) = mpsc::unbounded_channel();
    let client = Listener { updated }
        .serve_with_lifecycle(transport, lifecycle(era))
        .await
        .unwrap_or_else(|e| panic!("{era:?} connection: {e}"));
    (client, updates)
}

/// Every resource URI, page after page; the cursors seen.
async fn list_all(client: &Client, between: impl Fn(usize)) -> (Vec<String>, usize) {
    let mut uris = Vec::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let listed = client
            .list_resources(Some(params))
            .await
            .expect("resources/list");
        assert!(listed.resources.len() <= 100, "{}", listed.resources.len());
        for resource in &listed.resources {
            assert_eq!(resource.mime_type.as_deref(), Some("text/markdown"));
            uris.push(resource.uri.clone());
        }
        pages += 1;
        between(pages);
        match listed.next_cursor {
            Some(next) => cursor = Some(next),
            None => return (uris, pages),
        }
    }
}

async fn read(client: &Client, uri: &str) -> Result<(String, Option<Value>), ErrorData> {
    match client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
    {
        Ok(result) => {
            assert_eq!(result.contents.len(), 1);
            match &result.contents[0] {
                ResourceContents::TextResourceContents {
                    uri: read,
                    text,
                    meta,
                    ..
                } => {
                    assert_eq!(read, uri);
                    Ok((
                        text.clone(),
                        meta.as_ref().map(|m| Value::Object(m.0.clone())),
                    ))
                }
                other => panic!("text contents expected, got {other:?}"),
            }
        }
        Err(ServiceError::McpError(error)) => Err(error),
        Err(other) => panic!("resources/read: {other}"),
    }
}

/// The code a resource that is not there answers with in `era`.
fn not_found_code(era: Era) -> ErrorCode {
    match era {
        Era::Handshake => ErrorCode::RESOURCE_NOT_FOUND,
        Era::Stateless => ErrorCode::INVALID_PARAMS,
    }
}

/// An error's code and message with the URI it names replaced.
fn shape(error: &ErrorData, uri: &str) -> (i32, String) {
    (error.code.0, error.message.replace(uri, "URI"))
}

async fn next_update(updates: &mut Updates) -> String {
    tokio::time::timeout(WAIT, updates.recv())
        .await
        .expect("a notification within the timeout")
        .expect("the client is connected")
}

#[allow(deprecated)]
async fn subscribe(client: &Client, uri: &str) -> Result<(), ErrorData> {
    match client.subscribe(SubscribeRequestParams::new(uri)).await {
        Ok(()) => Ok(()),
        Err(ServiceError::McpError(error)) => Err(error),
        Err(other) => panic!("resources/subscribe: {other}"),
    }
}

/// Opens a listen stream for `uris`; the error it ends with, if any (one
/// that is refused ends right after its acknowledgment).
async fn listen(client: &Client, uris: &[&str]) -> Result<rmcp::service::Subscription, ErrorData> {
    let filter = SubscriptionFilter::builder()
        .resource_subscriptions(uris.iter().copied())
        .build();
    match client.listen(filter).await {
        Ok(subscription) => Ok(subscription),
        Err(ServiceError::McpError(error)) => Err(error),
        Err(other) => panic!("subscriptions/listen: {other}"),
    }
}

/// The error a listen stream for `uri` ends with.
async fn listen_refused(client: &Client, uri: &str) -> ErrorData {
    let mut subscription = match listen(client, &[uri]).await {
        Ok(subscription) => subscription,
        Err(error) => return error,
    };
    match tokio::time::timeout(WAIT, subscription.next()).await {
        Ok(Err(ServiceError::McpError(error))) => error,
        other => panic!("the stream for {uri} should end with an error, got {other:?}"),
    }
}

async fn next_listened(subscription: &mut rmcp::service::Subscription) -> String {
    match tokio::time::timeout(WAIT, subscription.next()).await {
        Ok(Ok(Some(ServerNotification::ResourceUpdatedNotification(n)))) => n.params.uri,
        other => panic!("a resource update was expected, got {other:?}"),
    }
}

/// Commits `pages` to a bare wiki with the git CLI (a person's push).
fn push_to(bare: &std::path::Path, pages: &[(&str, &str)]) {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("w");
    git(
        work.path(),
        &["clone", "-q", bare.to_str().unwrap(), dir.to_str().unwrap()],
    );
    git(&dir, &["checkout", "-q", "-B", "master"]);
    for (path, content) in pages {
        std::fs::write(dir.join(path), content).unwrap();
    }
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "A person's edit"]);
    git(&dir, &["push", "-q", "origin", "master"]);
}

#[tokio::test]
async fn pages_are_listed_across_a_cursor_read_and_templated_in_both_eras() {
    let fixture = Fixture::new();
    let many: Vec<(String, String)> = (0..150)
        .map(|i| (format!("Page-{i:03}.md"), format!("# Page {i}\n")))
        .collect();
    let pages: Vec<(&str, &str)> = many.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    fixture.commit(&pages, "Many pages");

    for (round, era) in [Era::Handshake, Era::Stateless].into_iter().enumerate() {
        let (client, _) = in_process(&fixture, era).await;
        let expected: BTreeSet<String> = fixture
            .git(&[
                "-c",
                "core.quotepath=false",
                "ls-tree",
                "-r",
                "--name-only",
                "master",
            ])
            .lines()
            .map(str::to_owned)
            .collect();
        // A push between the first and the second call: the listing goes on
        // at the commit it started with.
        let (uris, calls) = list_all(&client, |call| {
            if call == 1 {
                fixture.commit(&[(&format!("Aaa-{round}.md"), "# New\n")], "A new page");
            }
        })
        .await;
        assert_eq!(calls, 2, "{era:?}");
        let unique: BTreeSet<&String> = uris.iter().collect();
        assert_eq!(unique.len(), uris.len(), "{era:?}: a page listed twice");
        let listed: BTreeSet<String> = uris
            .iter()
            .map(|u| {
                let target = u
                    .strip_prefix("teammem://demo/app/wiki/")
                    .unwrap_or_else(|| panic!("{u}"));
                target
                    .replace("%C3%9C", "Ü")
                    .replace("%C3%AF", "ï")
                    .replace("%C3%A9", "é")
            })
            .collect();
        assert_eq!(listed, expected, "{era:?}");
        assert!(
            uris.contains(&"teammem://demo/app/wiki/%C3%9Cn%C3%AFcode/Caf%C3%A9.md".to_owned())
        );

        // A page reads as get_wiki_page returns it, with or without .md.
        let (text, meta) = read(&client, HOME_URI).await.expect("Home reads");
        assert_eq!(text, HOME);
        let meta = meta.expect("_meta");
        let page = &meta["teammem/page"];
        assert_eq!(
            page["sha"],
            git_trimmed(&fixture.wiki, &["rev-parse", "master:Home.md"])
        );
        assert_eq!(page["source_repository"], SOURCE);
        let tool = client
            .call_tool(
                rmcp::model::CallToolRequestParams::new("get_wiki_page").with_arguments(
                    json!({"repository": SOURCE, "path": "Home.md"})
                        .as_object()
                        .unwrap()
                        .clone(),
                ),
            )
            .await
            .unwrap();
        let envelope = tool.structured_content.unwrap();
        assert_eq!(envelope["result"]["content"].as_str().unwrap(), text);
        assert_eq!(
            read(&client, "teammem://demo/app/wiki/Home")
                .await
                .unwrap()
                .0,
            HOME
        );
        let cafe = "teammem://demo/app/wiki/%C3%9Cn%C3%AFcode/Caf%C3%A9.md";
        assert_eq!(read(&client, cafe).await.unwrap().0, CAFE);

        // A path's context is get_context's answer, as JSON.
        let (text, _) = read(&client, CONTEXT_URI).await.expect("context reads");
        let context: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(context["paths"][0]["path"], "src/x.rs", "{context}");
        assert!(context.get("as_of").is_some(), "{context}");

        let templates = client
            .list_all_resource_templates()
            .await
            .expect("templates");
        let names: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
        assert_eq!(
            names,
            [
                "teammem://{owner}/{name}/wiki/{page}",
                "teammem://{owner}/{name}/context/{+path}"
            ]
        );

        // What is not there, and what cannot be.
        let missing = read(&client, "teammem://demo/app/wiki/Missing.md")
            .await
            .unwrap_err();
        assert_eq!(missing.code, not_found_code(era), "{missing:?}");
        let unknown = read(&client, "teammem://octo/unknown/wiki/Home.md")
            .await
            .unwrap_err();
        assert_eq!(
            shape(&unknown, "teammem://octo/unknown/wiki/Home.md"),
            shape(&missing, "teammem://demo/app/wiki/Missing.md")
        );
        for (uri, says) in [
            ("https://example.org/Home.md", "teammem://"),
            ("teammem://demo/app/wiki/..%2Fx.md", "cannot exist"),
            ("teammem://demo/app/context/%2Fetc", "get_context refuses"),
        ] {
            let error = read(&client, uri).await.unwrap_err();
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS, "{uri}");
            assert!(error.message.contains(says), "{uri}: {}", error.message);
        }
        let bad_cursor = client
            .list_resources(Some(
                PaginatedRequestParams::default().with_cursor(Some("nope".into())),
            ))
            .await;
        assert!(
            matches!(&bad_cursor, Err(ServiceError::McpError(e)) if e.code == ErrorCode::INVALID_PARAMS && e.message.contains("cursor")),
            "{bad_cursor:?}"
        );
        client.cancel().await.unwrap();
    }
}

/// One `resources/list` call opens at most `WIKIS_PER_LIST` wikis, empty
/// ones included: past them it answers with a cursor, and paging goes on
/// to every page.
#[tokio::test]
async fn one_list_call_opens_a_bounded_number_of_wikis() {
    let fixture = Fixture::new();
    let empty = tempfile::tempdir().unwrap();
    git(empty.path(), &["init", "-q", "--bare", "wiki.git"]);
    let mut config = config(&fixture);
    let app = config.sources[0].clone();
    let teammem::config::Forge::Local { repo, .. } = app.forge.clone() else {
        panic!("the fixture's source is local")
    };
    let mut sources: Vec<teammem::config::Source> = (0..30)
        .map(|i| {
            let mut source = app.clone();
            let name = teammem::ids::RepoName::parse(&format!("empty/wiki{i:02}")).unwrap();
            source.repository = name.clone();
            source.wiki_repository = name;
            source.forge = teammem::config::Forge::Local {
                repo: repo.clone(),
                wiki: empty.path().join("wiki.git"),
            };
            source
        })
        .collect();
    sources.append(&mut config.sources);
    config.sources = sources;
    let (client, _) = in_process_with(config, Era::Stateless).await;
    let first = client
        .list_resources(Some(PaginatedRequestParams::default()))
        .await
        .expect("resources/list");
    assert!(first.resources.is_empty(), "{:?}", first.resources.first());
    assert!(
        first.next_cursor.is_some(),
        "25 wikis opened: the rest is behind a cursor"
    );
    let (uris, calls) = list_all(&client, |_| {}).await;
    assert_eq!(calls, 2, "25 empty wikis, then 5 and the app's");
    assert!(uris.iter().any(|u| u == HOME_URI), "{uris:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn subscribers_hear_when_the_tip_moves_in_both_eras() {
    let fixture = Fixture::new();

    // Handshake era: resources/subscribe, notifications on the session.
    let (client, mut updates) = in_process(&fixture, Era::Handshake).await;
    subscribe(&client, HOME_URI).await.expect("subscribe Home");
    subscribe(&client, CONTEXT_URI)
        .await
        .expect("subscribe the context");
    subscribe(&client, HOME_URI)
        .await
        .expect("subscribing again is fine");
    fixture.commit(&[("Home.md", "# Home\n\nMoved on.\n")], "Home changes");
    let both: BTreeSet<String> = [
        next_update(&mut updates).await,
        next_update(&mut updates).await,
    ]
    .into_iter()
    .collect();
    assert_eq!(
        both,
        BTreeSet::from([HOME_URI.to_owned(), CONTEXT_URI.to_owned()])
    );
    // Another page changes: the context is announced, Home is not.
    fixture.commit(&[("area/Topic.md", "# Topic\n\nNew.\n")], "Topic changes");
    assert_eq!(next_update(&mut updates).await, CONTEXT_URI);
    #[allow(deprecated)]
    client
        .unsubscribe(UnsubscribeRequestParams::new(CONTEXT_URI))
        .await
        .expect("unsubscribe");
    fixture.commit(&[("Home.md", "# Home\n\nAgain.\n")], "Home changes again");
    assert_eq!(next_update(&mut updates).await, HOME_URI);

    let error = subscribe(&client, "teammem://demo/app/pages/Home.md")
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert!(
        error.message.contains("wiki or context"),
        "{}",
        error.message
    );
    let missing = subscribe(&client, "teammem://octo/unknown/wiki/Home.md")
        .await
        .unwrap_err();
    assert_eq!(missing.code, ErrorCode::RESOURCE_NOT_FOUND, "{missing:?}");
    // At most 100 followed at once; the 101st is refused, naming the limit.
    for i in 0..99 {
        subscribe(&client, &format!("teammem://demo/app/wiki/Page-{i}.md"))
            .await
            .unwrap();
    }
    let full = subscribe(&client, "teammem://demo/app/wiki/One-more.md")
        .await
        .unwrap_err();
    assert!(full.message.contains("at most 100"), "{}", full.message);
    client.cancel().await.unwrap();

    // 2026-07-28: subscriptions/listen, notifications on that stream.
    let (client, _) = in_process(&fixture, Era::Stateless).await;
    let mut stream = listen(&client, &[HOME_URI]).await.expect("listen");
    assert_eq!(
        stream.acknowledged().resource_subscriptions,
        Some(vec![HOME_URI.to_owned()])
    );
    fixture.commit(
        &[("Home.md", "# Home\n\nListened.\n")],
        "Home changes for listeners",
    );
    assert_eq!(next_listened(&mut stream).await, HOME_URI);
    let refused = listen_refused(&client, "teammem://octo/unknown/wiki/Home.md").await;
    assert_eq!(refused.code, ErrorCode::INVALID_PARAMS, "{refused:?}");
    assert!(refused.message.contains("not found"), "{}", refused.message);
    let error = subscribe(&client, HOME_URI).await.unwrap_err();
    assert_eq!(
        error.code,
        ErrorCode::METHOD_NOT_FOUND,
        "resources/subscribe is the handshake era's"
    );
    stream.cancel().await.unwrap();
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn over_mcp_a_token_for_another_repository_sees_none_of_them() {
    let fixture = Fixture::new();
    push_to(&fixture.other_wiki, &[("Home.md", "# Other\n")]);
    let mut config = config(&fixture);
    config.server.listen = "127.0.0.1:0".parse().unwrap();
    let daemon = crate::harness::inproc::start(config.clone()).await;
    let scoped = crate::requests::token(&config, "other-only", &[OTHER]).await;
    let all = crate::requests::token(&config, "everything", &[]).await;
    let unknown = "teammem://octo/unknown/wiki/Home.md";

    for era in [Era::Handshake, Era::Stateless] {
        let (client, _) = over_http(daemon.url("/mcp"), &scoped, era).await;
        let (uris, _) = list_all(&client, |_| {}).await;
        assert_eq!(uris, ["teammem://demo/other/wiki/Home.md"], "{era:?}");
        for uri in [HOME_URI, CONTEXT_URI] {
            let hidden = read(&client, uri).await.unwrap_err();
            let missing = read(&client, unknown).await.unwrap_err();
            assert_eq!(hidden.code, not_found_code(era), "{era:?} {uri}");
            assert_eq!(shape(&hidden, uri), shape(&missing, unknown), "{era:?}");
            let (hidden, missing) = match era {
                Era::Handshake => (
                    subscribe(&client, uri).await.unwrap_err(),
                    subscribe(&client, unknown).await.unwrap_err(),
                ),
                Era::Stateless => (
                    listen_refused(&client, uri).await,
                    listen_refused(&client, unknown).await,
                ),
            };
            assert_eq!(shape(&hidden, uri), shape(&missing, unknown), "{era:?}");
        }
        client.cancel().await.unwrap();

        let (client, mut updates) = over_http(daemon.url("/mcp"), &all, era).await;
        let (uris, _) = list_all(&client, |_| {}).await;
        assert_eq!(uris.len(), 4, "{era:?}: {uris:?}");
        assert_eq!(
            read(&client, HOME_URI).await.unwrap().0,
            fixture.git(&["show", "master:Home.md"])
        );
        let content = format!("# Home\n\n{era:?} moved it.\n");
        match era {
            Era::Handshake => {
                subscribe(&client, HOME_URI).await.expect("subscribe");
                fixture.commit(&[("Home.md", &content)], "Home changes over HTTP");
                assert_eq!(next_update(&mut updates).await, HOME_URI);
            }
            Era::Stateless => {
                let mut stream = listen(&client, &[HOME_URI]).await.expect("listen");
                fixture.commit(&[("Home.md", &content)], "Home changes over HTTP");
                assert_eq!(next_listened(&mut stream).await, HOME_URI);
                stream.cancel().await.unwrap();
            }
        }
        client.cancel().await.unwrap();
    }
    daemon.shutdown().await.unwrap();
}
