//! The daemon's HTTP server under attack, over raw TCP against the in-process
//! daemon: a slow client is cut off at the header timeout while others are
//! served, connections beyond the limit wait while existing ones work, a slow
//! body meets the request timeout, `/v1/requests` and `/login` answer before
//! reading a body they will refuse, and the dashboard trusts a loopback peer
//! only with a loopback `Host` and while `dashboard.trust_loopback` holds.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use teammem::config::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::inproc;

fn config(dir: &std::path::Path, extra_server: &str, rest: &str) -> Config {
    Config::parse(&format!(
        r#"
[server]
listen = "127.0.0.1:0"
data_dir = "{}"
{extra_server}

[[sources]]
repository = "octo/app"
local_path = "/srv/app.git"
local_wiki_path = "/srv/app.wiki.git"
webhook_secret_env = "S1"

[queue]
workers = 1
{rest}
"#,
        dir.join("data").display()
    ))
    .unwrap()
}

/// Reads until the peer closes (or `within` passes: then panics), returning
/// what it sent.
async fn read_to_close(stream: &mut TcpStream, within: Duration) -> String {
    let mut all = Vec::new();
    let read = tokio::time::timeout(within, stream.read_to_end(&mut all)).await;
    match read {
        Ok(Ok(_)) => {}
        // A reset after the answer is a close too.
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::ConnectionReset => {}
        Ok(Err(error)) => panic!("reading failed: {error}"),
        Err(_) => panic!(
            "the server did not close the connection within {within:?}; it sent {:?}",
            String::from_utf8_lossy(&all)
        ),
    }
    String::from_utf8_lossy(&all).into_owned()
}

/// Reads one response head (up to the blank line) within `within`, or `None`.
async fn read_head(stream: &mut TcpStream, within: Duration) -> Option<String> {
    let mut head = Vec::new();
    let deadline = Instant::now() + within;
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        let left = deadline.checked_duration_since(Instant::now())?;
        match tokio::time::timeout(left, stream.read(&mut byte)).await {
            Ok(Ok(1)) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

async fn get(addr: SocketAddr, path: &str, host: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    read_to_close(&mut stream, Duration::from_secs(10)).await
}

fn status(response: &str) -> &str {
    response.split(' ').nth(1).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_is_cut_off_at_the_header_timeout_while_others_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let d = inproc::start(config(dir.path(), "header_timeout_seconds = 1", "")).await;
    let addr = d.addr;

    // Several attackers, each sending its request head one byte a second.
    let mut attackers = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        attackers.push(tokio::spawn(async move {
            let started = Instant::now();
            let head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaa\r\n\r\n";
            let (mut reader, mut writer) = stream.split();
            let drip = async {
                for byte in head {
                    if writer.write_all(&[*byte]).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            };
            let mut seen = Vec::new();
            tokio::select! {
                () = drip => panic!("the whole slow head was accepted"),
                read = tokio::time::timeout(Duration::from_secs(6), reader.read_to_end(&mut seen)) => {
                    assert!(read.is_ok(), "not closed within 6 s");
                }
            }
            started.elapsed()
        }));
    }
    // Meanwhile other clients are answered promptly.
    let http = reqwest::Client::new();
    for _ in 0..5 {
        let started = Instant::now();
        let health = http.get(d.url("/healthz")).send().await.unwrap();
        assert_eq!(health.status(), 200);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for attacker in attackers {
        let closed_after = attacker.await.unwrap();
        assert!(
            closed_after >= Duration::from_millis(900) && closed_after < Duration::from_secs(4),
            "closed after {closed_after:?}, the header timeout is 1 s"
        );
    }
    d.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_limit_wait_while_existing_ones_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = inproc::start(config(
        dir.path(),
        "max_connections = 2\nheader_timeout_seconds = 30",
        "",
    ))
    .await;
    let addr = d.addr;
    let mut first = TcpStream::connect(addr).await.unwrap();
    let mut second = TcpStream::connect(addr).await.unwrap();
    // Both are served: a request on the first is answered (keep-alive).
    first
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let head = read_head(&mut first, Duration::from_secs(5))
        .await
        .expect("an answer");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    // A third connection is not served while both slots are taken.
    let mut third = TcpStream::connect(addr).await.unwrap();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(
        read_head(&mut third, Duration::from_millis(800)).await,
        None,
        "a connection beyond max_connections must wait"
    );
    // The existing connection keeps working meanwhile.
    second
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let head = read_head(&mut second, Duration::from_secs(5))
        .await
        .expect("an answer");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    // Closing one frees its slot, and the waiting one is answered.
    drop(first);
    let answer = read_to_close(&mut third, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(second);
    d.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_read_only_after_authentication_and_only_so_much() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "request_timeout_seconds = 1", "");
    let d = inproc::start(cfg.clone()).await;
    let pool = teammem::db::open(&cfg.server.data_dir).await.unwrap();
    let token = teammem::tokens::create(&pool.clone().into(), "ops", &[])
        .await
        .unwrap()
        .expose()
        .to_string();

    // The head announces 1 MiB, and no byte of it is sent: the answer must
    // come anyway, so it was given without reading the body.
    let announce = |path: &str, content_type: &str, extra: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\nContent-Length: 1048576\r\n{extra}\r\n"
        )
    };
    for (request, expected) in [
        (announce("/v1/requests", "application/json", ""), "401"),
        (
            announce(
                "/v1/requests",
                "application/json",
                "Authorization: Bearer tmm_not_a_token\r\n",
            ),
            "401",
        ),
        (
            announce(
                "/v1/requests",
                "application/json",
                &format!("Authorization: Bearer {token}\r\n"),
            ),
            "413",
        ),
        (
            announce("/login", "application/x-www-form-urlencoded", ""),
            "413",
        ),
    ] {
        let mut stream = TcpStream::connect(d.addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let head = read_head(&mut stream, Duration::from_secs(5))
            .await
            .unwrap_or_else(|| panic!("no answer before the body to {request:?}"));
        assert_eq!(status(&head), expected, "{request:?}: {head}");
    }

    // A body without a declared length is cut at the limit, too.
    let mut stream = TcpStream::connect(d.addr).await.unwrap();
    let chunk = " ".repeat(20 * 1024);
    stream
        .write_all(
            format!(
                "POST /v1/requests HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
                chunk.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let head = read_head(&mut stream, Duration::from_secs(5))
        .await
        .expect("an answer");
    assert_eq!(status(&head), "413", "{head}");
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    // A login from another site's page is refused before its body is read.
    let foreign = http
        .post(d.url("/login"))
        .header("Origin", "https://evil.example")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);
    assert!(foreign.headers().get("set-cookie").is_none());
    // From its own page it works.
    let own = http
        .post(d.url("/login"))
        .header("Origin", format!("http://{}", d.addr))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 303);
    assert!(own.headers().get("set-cookie").is_some());

    // A body that trickles in meets the request timeout (1 s).
    let mut stream = TcpStream::connect(d.addr).await.unwrap();
    stream
        .write_all(b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 40\r\n\r\ntoken=")
        .await
        .unwrap();
    let started = Instant::now();
    let head = read_head(&mut stream, Duration::from_secs(5))
        .await
        .expect("an answer at the request timeout");
    assert_eq!(status(&head), "408", "{head}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    d.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_trust_needs_a_loopback_host_and_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let d = inproc::start(config(dir.path(), "", "")).await;
    let local = format!("127.0.0.1:{}", d.addr.port());
    assert_eq!(status(&get(d.addr, "/", &local).await), "200");
    assert_eq!(status(&get(d.addr, "/", "localhost").await), "200");
    // A DNS-rebound name, or a same-host proxy passing the public name on.
    let rebound = get(d.addr, "/", "evil.example").await;
    assert_eq!(status(&rebound), "303", "{rebound}");
    assert!(rebound.contains("location: /login"), "{rebound}");
    assert_eq!(
        status(&get(d.addr, "/", "127.0.0.1.evil.example").await),
        "303"
    );
    d.shutdown().await.unwrap();

    // With a public URL that is not loopback, loopback trust is off ...
    let dir = tempfile::tempdir().unwrap();
    let public = "public_url = \"https://teammem.example.org\"";
    let d = inproc::start(config(dir.path(), public, "")).await;
    let local = format!("127.0.0.1:{}", d.addr.port());
    assert_eq!(status(&get(d.addr, "/", &local).await), "303");
    d.shutdown().await.unwrap();

    // ... unless the operator turns it on.
    let dir = tempfile::tempdir().unwrap();
    let d = inproc::start(config(
        dir.path(),
        public,
        "[dashboard]\ntrust_loopback = true",
    ))
    .await;
    let local = format!("127.0.0.1:{}", d.addr.port());
    assert_eq!(status(&get(d.addr, "/", &local).await), "200");
    assert_eq!(status(&get(d.addr, "/", "evil.example").await), "303");
    d.shutdown().await.unwrap();

    // A loopback public URL keeps the default on.
    let dir = tempfile::tempdir().unwrap();
    let d = inproc::start(config(
        dir.path(),
        "public_url = \"http://localhost:8080\"",
        "",
    ))
    .await;
    let local = format!("127.0.0.1:{}", d.addr.port());
    assert_eq!(status(&get(d.addr, "/", &local).await), "200");
    d.shutdown().await.unwrap();
}
