//! The dashboard attacked from the places its trust used to reach: a loopback
//! client of another user (curl run as `nobody`) is not the local operator
//! while the daemon's own user still is; a request a proxy passed on
//! (forwarding headers) is not either; every page carries the framing,
//! CSP, caching, referrer and sniffing headers, and its stylesheet is the
//! one the CSP allows; a form token from one session (the local operator's
//! or a login's) is refused in another; `GET /logout` ends nothing and the
//! POST button does; a PostgreSQL node without a dashboard session key
//! refuses to start saying how to set one, nodes given the same key accept
//! each other's logins, a node given another key does not, and the database
//! holds no session key; the key's settings are checked and never echoed.

use std::process::Command;

use teammem::config::Config;
use teammem::queue::{JobKind, JobState, NewJob, Origin};

use crate::harness::daemon::{
    BIN, DASHBOARD_KEY, DASHBOARD_KEY_ENV, DASHBOARD_KEY_TOML, Daemon, Setup,
};
use crate::harness::{inproc, postgres};

fn config(dir: &std::path::Path) -> Config {
    Config::parse(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}/data\"\n\
         [[sources]]\nrepository = \"octo/app\"\nlocal_path = \"/srv/app.git\"\n\
         local_wiki_path = \"/srv/app.wiki.git\"\nwebhook_secret_env = \"S1\"\n\
         [queue]\nworkers = 1\n",
        dir.display()
    ))
    .unwrap()
}

fn job(number: i64) -> NewJob {
    NewJob {
        source: teammem::ids::RepoName::parse("octo/app").unwrap(),
        destination: "local:octo/app".into(),
        origin: Origin::Request,
        kind: JobKind::PullRequest {
            number: teammem::ids::PullNumber::new(number as u64).unwrap(),
            merge_sha: teammem::ids::Sha::parse(&format!("{number:040x}")).unwrap(),
        },
        actor: "someone".into(),
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `name=value` of the response's `Set-Cookie` for cookie `name`.
fn set_cookie(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap().trim().to_string())
        .find(|pair| pair.starts_with(&format!("{name}=")))
}

/// The first form token on a page (a retry/cancel or log-out form).
fn csrf_of(html: &str) -> String {
    let start = html
        .find("name=csrf value=\"")
        .expect("a form with a token")
        + 17;
    html[start..start + 64].to_string()
}

/// curl's status code for `url`, run as `nobody` when `as_nobody`.
fn curl_status(url: &str, as_nobody: bool) -> String {
    let curl = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", url];
    let out = if as_nobody {
        Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .args(curl)
            .output()
    } else {
        Command::new(curl[0]).args(&curl[1..]).output()
    }
    .expect("run curl");
    assert!(
        out.status.success(),
        "curl (as nobody: {as_nobody}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_loopback_client_of_another_user_is_not_the_operator() {
    let setup = Setup::new("");
    let daemon = setup.serve(&[]);
    // The daemon's own user (this test's) is the local operator.
    assert_eq!(curl_status(&daemon.url("/jobs"), false), "200");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: cannot run a client as another user; checked the daemon's own only");
        return;
    }
    // Another user on the same machine, from the same loopback, must log in.
    for path in ["/", "/jobs", "/jobs/1"] {
        assert_eq!(curl_status(&daemon.url(path), true), "303", "{path}");
    }
    // And the daemon's own user still is the operator afterwards.
    assert_eq!(curl_status(&daemon.url("/"), false), "200");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_a_proxy_passed_on_is_not_the_operator() {
    let dir = tempfile::tempdir().unwrap();
    let d = inproc::start(config(dir.path())).await;
    let http = client();
    assert_eq!(http.get(d.url("/")).send().await.unwrap().status(), 200);
    for (name, value) in [
        ("X-Forwarded-For", "203.0.113.7"),
        ("X-Forwarded-Host", "teammem.example.org"),
        ("X-Forwarded-Proto", "https"),
        ("Forwarded", "for=203.0.113.7"),
        ("X-Real-IP", "203.0.113.7"),
        ("Via", "1.1 proxy"),
    ] {
        let r = http
            .get(d.url("/jobs"))
            .header(name, value)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 303, "{name}");
        assert_eq!(r.headers()["location"], "/login", "{name}");
    }
    d.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_answer_carries_the_security_headers() {
    use base64::Engine;
    use sha2::Digest;

    let dir = tempfile::tempdir().unwrap();
    let mut d = inproc::start(config(dir.path())).await;
    let job = d.queue.enqueue(job(12), None).await.unwrap().job;
    assert_eq!(d.started.recv().await, Some(job.id));
    let http = client();
    let forwarded = ("X-Forwarded-For", "203.0.113.7");

    let mut answers = Vec::new();
    for path in [
        "/".to_string(),
        "/jobs".into(),
        format!("/jobs/{}", job.id),
        "/jobs/999999".into(),
        "/jobs/x".into(),
        "/wiki/octo/app/Home.md".into(),
        "/wiki/octo/app/".into(),
        "/login".into(),
        "/logout".into(),
    ] {
        answers.push((
            format!("GET {path}"),
            http.get(d.url(&path)).send().await.unwrap(),
        ));
    }
    answers.push((
        "GET / forwarded".into(),
        http.get(d.url("/"))
            .header(forwarded.0, forwarded.1)
            .send()
            .await
            .unwrap(),
    ));
    answers.push((
        "POST /login (wrong token)".into(),
        http.post(d.url("/login"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("token=tmm_wrong")
            .send()
            .await
            .unwrap(),
    ));
    answers.push((
        "POST cancel (no Origin)".into(),
        http.post(d.url(&format!("/jobs/{}/cancel", job.id)))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body("csrf=00")
            .send()
            .await
            .unwrap(),
    ));
    answers.push((
        "POST /logout (foreign Origin)".into(),
        http.post(d.url("/logout"))
            .header("Origin", "https://evil.example")
            .send()
            .await
            .unwrap(),
    ));
    for (what, r) in answers {
        let h = r.headers();
        let get = |name: &str| {
            h.get(name)
                .unwrap_or_else(|| panic!("{what}: no {name} ({})", r.status()))
                .to_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(get("x-frame-options"), "DENY", "{what}");
        assert_eq!(get("cache-control"), "no-store", "{what}");
        assert_eq!(get("referrer-policy"), "same-origin", "{what}");
        assert_eq!(get("x-content-type-options"), "nosniff", "{what}");
        let csp = get("content-security-policy");
        let directives: Vec<&str> = csp.split(';').map(str::trim).collect();
        for expected in [
            "default-src 'none'",
            "frame-ancestors 'none'",
            "form-action 'self'",
            "base-uri 'none'",
        ] {
            assert!(directives.contains(&expected), "{what}: {csp}");
        }
        assert!(
            !csp.contains("unsafe") && !csp.contains("script-src"),
            "{what}: {csp}"
        );
        // The page's one stylesheet is the one the policy allows, and no
        // style attribute or script is on it (the CSP would refuse them).
        let status = r.status();
        let html = r.text().await.unwrap();
        if let Some(start) = html.find("<style>") {
            let style = &html[start + 7..html[start..].find("</style>").unwrap() + start];
            let hash =
                base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(style));
            assert!(
                directives.contains(&format!("style-src 'sha256-{hash}'").as_str()),
                "{what}: {csp}"
            );
            assert_eq!(html.matches("<style").count(), 1, "{what}");
        } else {
            assert!(
                status.is_redirection(),
                "{what}: {status} without a stylesheet"
            );
        }
        assert!(!html.contains(" style="), "{what}: {html}");
        assert!(!html.contains("<script"), "{what}");
    }
    d.permits.add_permits(10);
    d.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_token_from_one_session_fails_in_another() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let mut d = inproc::start(cfg.clone()).await;
    let pool = teammem::db::open(&cfg.server.data_dir).await.unwrap();
    let token = teammem::tokens::create(&pool.clone().into(), "alice", &[])
        .await
        .unwrap()
        .expose()
        .to_string();
    let job = d.queue.enqueue(job(12), None).await.unwrap().job;
    assert_eq!(d.started.recv().await, Some(job.id));
    let http = client();
    let own = d.url("").trim_end_matches('/').to_string();
    let page_url = d.url(&format!("/jobs/{}", job.id));
    let cancel = d.url(&format!("/jobs/{}/cancel", job.id));
    let state = || {
        let queue = d.queue.clone();
        async move { queue.get(job.id).await.unwrap().state }
    };

    // The local operator in two browsers: each gets a form cookie of its
    // own, and a token that holds only with it.
    let mut browsers = Vec::new();
    for _ in 0..2 {
        let r = http.get(&page_url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let form = set_cookie(&r, "teammem_form").expect("a form cookie for a new browser");
        let html = r.text().await.unwrap();
        assert!(html.contains("Cancel job"), "{html}");
        browsers.push((form, csrf_of(&html)));
    }
    let ((form_a, token_a), (form_b, token_b)) = (&browsers[0], &browsers[1]);
    assert_ne!(form_a, form_b);
    assert_ne!(
        token_a, token_b,
        "the local operator's token is per browser"
    );
    // The same browser sees the same token on its next page.
    let again = http
        .get(&page_url)
        .header("Cookie", form_a)
        .send()
        .await
        .unwrap();
    assert!(set_cookie(&again, "teammem_form").is_none());
    assert_eq!(&csrf_of(&again.text().await.unwrap()), token_a);
    let post = |cookie: String, token: &str, forwarded: bool| {
        let mut r = http
            .post(&cancel)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Origin", &own)
            .header("Cookie", cookie)
            .body(format!("csrf={token}"));
        if forwarded {
            r = r.header("X-Forwarded-For", "203.0.113.7");
        }
        r.send()
    };
    for (cookie, token) in [
        (form_b.clone(), token_a.as_str()),
        (form_a.clone(), token_b.as_str()),
        // No form cookie: a fresh one is minted, and no token holds with it.
        (String::new(), token_a.as_str()),
    ] {
        let r = post(cookie.clone(), token, false).await.unwrap();
        assert_eq!(r.status(), 403, "{cookie}");
        assert_eq!(state().await, JobState::Running);
    }

    // Two logins of one token, in the same second: two sessions, and the
    // first's token is worth nothing in the second.
    let login = || async {
        let r = http
            .post(d.url("/login"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("token={token}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 303);
        set_cookie(&r, "teammem_session").expect("a session cookie")
    };
    let (first, second) = (login().await, login().await);
    assert_ne!(first, second, "every login is a session of its own");
    let token_of = |session: String| {
        let r = http
            .get(&page_url)
            .header("X-Forwarded-For", "203.0.113.7")
            .header("Cookie", session);
        async move { csrf_of(&r.send().await.unwrap().text().await.unwrap()) }
    };
    let (first_token, second_token) = (
        token_of(first.clone()).await,
        token_of(second.clone()).await,
    );
    assert_ne!(first_token, second_token);
    let r = post(second.clone(), &first_token, true).await.unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(state().await, JobState::Running);

    // Each session's own token works: the local operator's cancels.
    let r = post(form_a.clone(), token_a, false).await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(state().await, JobState::Cancelled);
    d.permits.add_permits(10);
    d.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_logout_ends_nothing_and_the_post_button_does() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let d = inproc::start(cfg.clone()).await;
    let pool = teammem::db::open(&cfg.server.data_dir).await.unwrap();
    let token = teammem::tokens::create(&pool.clone().into(), "alice", &[])
        .await
        .unwrap()
        .expose()
        .to_string();
    let http = client();
    let own = d.url("").trim_end_matches('/').to_string();
    let forwarded = ("X-Forwarded-For", "203.0.113.7");
    let login = http
        .post(d.url("/login"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap();
    let session = set_cookie(&login, "teammem_session").unwrap();
    let signed_in = || {
        let r = http
            .get(d.url("/jobs"))
            .header(forwarded.0, forwarded.1)
            .header("Cookie", session.clone());
        async move { r.send().await.unwrap().status() == 200 }
    };
    assert!(signed_in().await);

    // The page's log-out control is a POST form with the session's token.
    let page = http
        .get(d.url("/jobs"))
        .header(forwarded.0, forwarded.1)
        .header("Cookie", &session)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("<form class=logout method=post action=\"/logout\">"),
        "{page}"
    );
    assert!(!page.contains("href=\"/logout\""), "{page}");
    let csrf = csrf_of(&page);

    // GET /logout (a link, an <img> elsewhere) shows the button, ends nothing.
    let r = http
        .get(d.url("/logout"))
        .header(forwarded.0, forwarded.1)
        .header("Cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(set_cookie(&r, "teammem_session").is_none());
    assert!(r.text().await.unwrap().contains("<button>log out</button>"));
    assert!(signed_in().await);

    // A POST without this dashboard's Origin, or without the token, is refused.
    let post = |origin: Option<&str>, body: String| {
        let mut r = http
            .post(d.url("/logout"))
            .header(forwarded.0, forwarded.1)
            .header("Cookie", &session)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body);
        if let Some(origin) = origin {
            r = r.header("Origin", origin);
        }
        r.send()
    };
    for (origin, body) in [
        (None, format!("csrf={csrf}")),
        (Some("https://evil.example"), format!("csrf={csrf}")),
        (Some(own.as_str()), format!("csrf={}", "0".repeat(64))),
    ] {
        let r = post(origin, body).await.unwrap();
        assert_eq!(r.status(), 403, "{origin:?}");
        assert!(set_cookie(&r, "teammem_session").is_none());
    }
    assert!(signed_in().await);

    // The button itself logs out.
    let r = post(Some(&own), format!("csrf={csrf}")).await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/login");
    let cleared = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("teammem_session="))
        .expect("the session cookie is cleared")
        .to_string();
    assert!(
        cleared.starts_with("teammem_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    d.shutdown().await.unwrap();
}

/// A PostgreSQL node's configuration, without any `[dashboard]` table.
fn pg_node(url: &str, node: &str) -> String {
    format!("node_id = \"{node}\"\n[database]\nurl = \"{url}\"\n")
}

/// Runs `teammem ARGS --config CONFIG` and waits at most `limit` for it to
/// exit; a daemon that starts instead is killed and the test fails.
fn run_expecting_exit(
    args: &[&str],
    config: &std::path::Path,
    envs: &[(&str, &str)],
) -> (Option<i32>, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .arg("--config")
        .arg(config)
        .env("TEAMMEM_LOG", "warn")
        .envs(envs.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("teammem {args:?} kept running: it started without a dashboard session key");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    (status.code(), err)
}

#[tokio::test]
async fn a_postgres_node_without_a_session_key_refuses_to_start_saying_how_to_set_it() {
    let url = postgres::server().fresh_database().await;
    let setup = Setup::new(&pg_node(&url, "node-a"));
    for command in ["serve", "check-config"] {
        let (code, err) = run_expecting_exit(&[command], &setup.config, &[]);
        assert_eq!(code, Some(2), "{command}: {err}");
        for needed in [
            "dashboard.session_key_env",
            "dashboard.session_key_file",
            "the same on every node",
            "openssl rand -hex 32",
        ] {
            assert!(err.contains(needed), "{command}: {err}");
        }
    }

    // A key too short to be one is refused too, without being echoed.
    let short = Setup::new(&format!("{}{DASHBOARD_KEY_TOML}", pg_node(&url, "node-a")));
    let (code, err) = run_expecting_exit(
        &["serve"],
        &short.config,
        &[(DASHBOARD_KEY_ENV, "tooshort-key-value")],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("needs at least 32 random bytes"), "{err}");
    assert!(!err.contains("tooshort-key-value"), "{err}");

    // The daemon itself (not only the command's checks) refuses.
    let config = Config::parse(&format!(
        "[server]\nlisten = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n{}",
        setup.data_dir().display(),
        pg_node(&url, "node-a")
    ))
    .unwrap();
    let run = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        teammem::daemon::run(
            std::sync::Arc::new(config),
            teammem::daemon::Handler::Given(std::sync::Arc::new(teammem::worker::NoRunner)),
            std::future::pending(),
        ),
    )
    .await
    .expect("the daemon returns instead of serving without a session key");
    let err = run
        .expect_err("a PostgreSQL daemon without a session key")
        .to_string();
    assert!(err.contains("dashboard.session_key_env"), "{err}");
}

#[tokio::test]
async fn nodes_given_one_key_accept_each_others_logins_and_the_database_holds_none() {
    use sqlx::Connection;

    let url = postgres::server().fresh_database().await;
    let setups: Vec<Setup> = ["node-a", "node-b", "node-c"]
        .iter()
        .map(|node| Setup::new(&format!("{}{DASHBOARD_KEY_TOML}", pg_node(&url, node))))
        .collect();
    let token = setups[0].create_token("alice", &[]);
    // Nodes a and b share the harness's key; node c was given another.
    let other_key = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
    assert_ne!(other_key, DASHBOARD_KEY);
    let nodes: Vec<Daemon> = vec![
        setups[0].serve(&[]),
        setups[1].serve(&[]),
        setups[2].serve(&[(DASHBOARD_KEY_ENV, other_key)]),
    ];
    let http = client();
    let forwarded = ("X-Forwarded-For", "203.0.113.7");
    let login = http
        .post(nodes[0].url("/login"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header(forwarded.0, forwarded.1)
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 303);
    let session = set_cookie(&login, "teammem_session").unwrap();
    let status_on = |node: &Daemon| {
        let r = http
            .get(node.url("/jobs"))
            .header(forwarded.0, forwarded.1)
            .header("Cookie", session.clone());
        async move { r.send().await.unwrap().status() }
    };
    assert_eq!(status_on(&nodes[0]).await, 200);
    assert_eq!(
        status_on(&nodes[1]).await,
        200,
        "a login on node a holds on node b"
    );
    assert_eq!(
        status_on(&nodes[2]).await,
        303,
        "a node with another key does not accept it"
    );

    // Nothing in the database signs a login: a backup holds no session key.
    let mut db = sqlx::PgConnection::connect(&url).await.unwrap();
    let keys: i64 = sqlx::query_scalar("SELECT count(*) FROM cluster_keys")
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!(keys, 0);
}

#[test]
fn the_session_key_settings_are_checked_and_never_echoed() {
    let base = "[server]\ndata_dir = \"/d\"\n[dashboard]\n";
    for (dashboard, expected) in [
        (
            "session_key_env = \"lower-case\"",
            "dashboard.session_key_env: expected the NAME of an environment variable",
        ),
        (
            "session_key_file = \"relative/key\"",
            "dashboard.session_key_file: expected an absolute path",
        ),
        (
            "session_key_env = \"K\"\nsession_key_file = \"/k\"",
            "give one of them, not both",
        ),
    ] {
        let errors = Config::parse(&format!("{base}{dashboard}")).unwrap_err();
        assert!(
            errors.to_string().contains(expected),
            "{dashboard}: {errors}"
        );
    }

    // A key file others may read is refused; a 0600 one is taken.
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = crate::harness::daemon::dashboard_key_file(dir.path());
    let config = |path: &std::path::Path| {
        Config::parse(&format!("{base}session_key_file = \"{}\"", path.display())).unwrap()
    };
    assert!(config(&path).check_environment().is_ok());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let errors = config(&path).check_environment().unwrap_err().to_string();
    assert!(errors.contains("run chmod 600 on it"), "{errors}");
    assert!(!errors.contains(DASHBOARD_KEY), "{errors}");
}
