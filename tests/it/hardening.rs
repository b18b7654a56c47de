//! Issue 34's smaller findings, attacked through the real `teammem` binary:
//! `/readyz` answers within a second while its PostgreSQL refuses or never
//! answers; a token whose stored scope does not parse grants nothing (and
//! `tokens list` says so); a short dispatch secret stops `check-config` and
//! `serve`, and one secret shared by two sources is warned of, never quoted;
//! `sslmode=verify-full`, which a remote database URL must name, connects
//! over TLS and refuses a certificate its root did not sign.

use std::process::Command;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::harness::daemon::{BIN, DASHBOARD_KEY_TOML, Setup};
use crate::harness::postgres;

/// A TCP proxy on loopback in front of the test PostgreSQL server that can
/// make the database refuse, or fall silent the way a partitioned network
/// does: connections stay open and nothing comes back.
struct Proxy {
    port: u16,
    mode: Arc<AtomicU8>,
    /// Cancelled to stop forwarding on every connection open at a change.
    generation: Arc<Mutex<CancellationToken>>,
}

const FORWARD: u8 = 0;
/// Open connections are reset, new ones closed at once.
const REFUSE: u8 = 1;
/// Open connections stop forwarding but stay open; new ones are accepted
/// and never answered.
const SILENT: u8 = 2;

impl Proxy {
    async fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(AtomicU8::new(FORWARD));
        let generation = Arc::new(Mutex::new(CancellationToken::new()));
        // Connections kept open and unanswered while silent.
        let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (accept_mode, accept_generation) = (mode.clone(), generation.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                match accept_mode.load(Ordering::SeqCst) {
                    REFUSE => continue,
                    SILENT => {
                        held.lock().unwrap().push(client);
                        continue;
                    }
                    _ => {}
                }
                let stop = accept_generation.lock().unwrap().clone();
                let (mode, held) = (accept_mode.clone(), held.clone());
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        () = stop.cancelled() => {
                            if mode.load(Ordering::SeqCst) == SILENT {
                                held.lock().unwrap().extend([client, server]);
                            }
                        }
                    }
                });
            }
        });
        Proxy {
            port,
            mode,
            generation,
        }
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
        let mut generation = self.generation.lock().unwrap();
        generation.cancel();
        *generation = CancellationToken::new();
    }
}

/// `GET /readyz`: its status, its body, and how long the answer took.
async fn readyz(url: &str) -> (u16, serde_json::Value, Duration) {
    let started = Instant::now();
    let answer = reqwest::Client::new()
        .get(url)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let body = answer.json().await.unwrap();
    (status, body, started.elapsed())
}

/// A load balancer's or Kubernetes' probe gives up after a second: `/readyz`
/// must say "not ready" (503, naming the database) within it, whether the
/// database refuses connections or never answers; once it is back, ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_within_a_second_while_the_database_refuses_or_is_silent() {
    let direct = postgres::server().fresh_database().await;
    let name = direct.rsplit('/').next().unwrap().to_string();
    let proxy = Proxy::start(postgres::server().port()).await;
    let setup = Setup::new(&format!(
        "node_id = \"node-a\"\n[database]\nurl = \"postgres://teammem_test@127.0.0.1:{}/{name}\"\n{DASHBOARD_KEY_TOML}",
        proxy.port
    ));
    let daemon = tokio::task::block_in_place(|| setup.serve(&[]));
    let url = daemon.url("/readyz");
    let (status, body, _) = readyz(&url).await;
    assert_eq!(status, 200, "{body}");

    for (mode, cause) in [
        (REFUSE, "database unreachable"),
        (SILENT, "database unreachable: no answer within 800 ms"),
    ] {
        proxy.set(mode);
        for _ in 0..3 {
            let (status, body, took) = readyz(&url).await;
            assert!(
                took < Duration::from_secs(1),
                "/readyz took {took:?} with the database {}: {body}",
                if mode == REFUSE { "refusing" } else { "silent" }
            );
            assert_eq!(status, 503, "{body}");
            let problems = body["problems"].to_string();
            assert!(problems.contains(cause), "{problems}");
        }
        proxy.set(FORWARD);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (status, body, _) = readyz(&url).await;
            if status == 200 {
                break;
            }
            assert!(Instant::now() < deadline, "not ready again: {body}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    drop(daemon);
}

/// A hand-edited or damaged scope (`octo/app` instead of `["octo/app"]`)
/// used to read as "every source". It now grants nothing: the token is
/// refused (401) where a token made the same way with a readable scope is
/// served, and `tokens list` shows it as unreadable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_whose_stored_scope_does_not_parse_grants_nothing() {
    let setup = Setup::new("");
    let damaged = setup.create_token("damaged", &[]);
    let readable = setup.create_token("readable", &[]);
    let database = setup.data_dir().join("teammem.db");
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", database.display()))
        .await
        .unwrap();
    sqlx::query("UPDATE api_tokens SET repositories = 'octo/app' WHERE name = 'damaged'")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let daemon = tokio::task::block_in_place(|| setup.serve(&[]));
    let jobs = |token: String| {
        let url = daemon.url("/v1/jobs");
        async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(jobs(readable).await, 200);
    assert_eq!(
        jobs(damaged).await,
        401,
        "an unreadable scope grants nothing"
    );
    drop(daemon);

    let list = setup.run(&["tokens", "list"]);
    assert!(list.status.success(), "{list:?}");
    let list = String::from_utf8(list.stdout).unwrap();
    let line = |name: &str| {
        list.lines()
            .find(|l| l.starts_with(&format!("{name}\t")))
            .unwrap_or_else(|| panic!("{name} not listed: {list}"))
            .to_string()
    };
    assert!(
        line("damaged").contains("unreadable scope: grants nothing"),
        "{list}"
    );
    assert!(line("readable").contains("\tall sources\t"), "{list}");
}

/// Two local sources (real, empty bare repositories) reading their dispatch
/// secrets from `S_APP` and `S_LIB`.
fn two_sources() -> Setup {
    let setup = Setup::new("");
    let mut tables = String::new();
    for (name, secret) in [("app", "S_APP"), ("lib", "S_LIB")] {
        let repo = setup.dir.path().join(format!("{name}.git"));
        let wiki = setup.dir.path().join(format!("{name}.wiki.git"));
        for path in [&repo, &wiki] {
            crate::harness::git::git(
                setup.dir.path(),
                &["init", "-q", "--bare", path.to_str().unwrap()],
            );
        }
        tables.push_str(&format!(
            "[[sources]]\nrepository = \"octo/{name}\"\nlocal_path = \"{}\"\nlocal_wiki_path = \"{}\"\nwebhook_secret_env = \"{secret}\"\n",
            repo.display(),
            wiki.display()
        ));
    }
    let mut config = std::fs::read_to_string(&setup.config).unwrap();
    config.push_str(&tables);
    std::fs::write(&setup.config, config).unwrap();
    setup
}

/// `teammem COMMAND --config <setup's>` with the two secrets; exit code,
/// stdout and stderr.
fn run_with(setup: &Setup, command: &str, app: &str, lib: &str) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .arg(command)
        .arg("--config")
        .arg(&setup.config)
        .env("TEAMMEM_LOG", "warn")
        .env("S_APP", app)
        .env("S_LIB", lib)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A dispatch secret of a few bytes falls to guessing: `check-config` and
/// `serve` refuse it, saying how to make a good one, without quoting it.
/// One value shared by two sources (a leak of one signs for the other) is
/// warned of by name, never by value; distinct long secrets pass quietly.
#[test]
fn short_dispatch_secrets_are_refused_and_shared_ones_warned_of() {
    let setup = two_sources();
    let long_app = "a1".repeat(32);
    let long_lib = "b2".repeat(32);

    let short = "hunter2-is-31-bytes-long-secret";
    assert_eq!(short.len(), 31);
    for command in ["check-config", "serve"] {
        let (code, _, stderr) = run_with(&setup, command, short, &long_lib);
        assert_eq!(code, Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains(
                "sources[0].webhook_secret_env: environment variable S_APP holds a dispatch secret of 31 bytes; it needs at least 32"
            ),
            "{command}: {stderr}"
        );
        assert!(stderr.contains("openssl rand -hex 32"), "{stderr}");
        assert!(
            !stderr.contains(short),
            "the secret is never quoted: {stderr}"
        );
    }

    let (code, stdout, stderr) = run_with(&setup, "check-config", &long_app, &long_app);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout.trim(), "ok");
    assert!(
        stderr.contains(
            "sources[0] (octo/app, S_APP), sources[1] (octo/lib, S_LIB) use one dispatch secret"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains(&long_app), "never quoted: {stderr}");

    let (code, _, stderr) = run_with(&setup, "check-config", &long_app, &long_lib);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("dispatch secret"), "{stderr}");
}

/// Runs `openssl ARGS` in `dir`, failing the test with its output.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

/// In `dir`: a CA (`ca.pem`), a server certificate it signed for
/// `127.0.0.1` (`server.crt`, `server.key`), and a second CA
/// (`other-ca.pem`) that signed nothing the server presents.
fn certificates(dir: &std::path::Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=teammem test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=another CA",
            "-keyout",
            "other-ca.key",
            "-out",
            "other-ca.pem",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(dir.join("san.ext"), "subjectAltName = IP:127.0.0.1\n").unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ],
    );
}

/// `sslmode=verify-full`, what a remote `database.url` must say, really
/// connects over TLS (sqlx is built with it: without, every such URL fails
/// to connect), and refuses a server whose certificate the named root did
/// not sign: a server with TLS switched on, certificates made by openssl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_connects_over_tls_and_refuses_an_unknown_certificate() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use teammem::config::Postgres;

    let server = postgres::own_durable_server();
    let url = server.fresh_database().await;
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    let data: String = sqlx::query_scalar("SHOW data_directory")
        .fetch_one(&admin)
        .await
        .unwrap();
    let data = std::path::PathBuf::from(data);
    let owner = std::fs::metadata(&data).unwrap();
    let certs = tempfile::tempdir().unwrap();
    tokio::task::block_in_place(|| certificates(certs.path()));
    // The server reads its certificate and key from its data directory;
    // the key must be its own user's and private.
    for name in ["server.crt", "server.key"] {
        let to = data.join(name);
        std::fs::copy(certs.path().join(name), &to).unwrap();
        std::os::unix::fs::chown(&to, Some(owner.uid()), Some(owner.gid())).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    sqlx::query("ALTER SYSTEM SET ssl = on")
        .execute(&admin)
        .await
        .unwrap();
    let reloaded: bool = sqlx::query_scalar("SELECT pg_reload_conf()")
        .fetch_one(&admin)
        .await
        .unwrap();
    assert!(reloaded);

    let with = |root: &str| Postgres {
        url: format!(
            "{url}?sslmode=verify-full&sslrootcert={}",
            certs.path().join(root).display()
        ),
        password_env: None,
        max_connections: 1,
    };
    // The reload is asynchronous: the first connections may still meet a
    // server without TLS.
    let deadline = Instant::now() + Duration::from_secs(30);
    let pool = loop {
        match teammem::db::connect_postgres(&with("ca.pem"), "node-tls").await {
            Ok(pool) => break pool,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "verify-full never connected: {e}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let encrypted: bool =
        sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(encrypted, "the connection is not TLS");

    let refused = teammem::db::connect_postgres(&with("other-ca.pem"), "node-tls")
        .await
        .expect_err("a certificate the named root did not sign was accepted");
    assert!(refused.to_string().contains("cannot connect"), "{refused}");
}
