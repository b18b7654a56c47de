//! The dashboard over real HTTP: local viewers see it, forwarded or remote ones
//! must log in with a token (signed HttpOnly SameSite cookie), token scopes
//! apply, revocation ends sessions, and untrusted text is escaped.

use teammem::config::Config;
use teammem::queue::{JobKind, NewJob, Origin};

use crate::harness::inproc;

fn config(dir: &std::path::Path) -> Config {
    Config::parse(&format!(
        r#"
[server]
listen = "127.0.0.1:0"
data_dir = "{}/data"

[[sources]]
repository = "octo/app"
local_path = "/srv/app.git"
local_wiki_path = "/srv/app.wiki.git"
webhook_secret_env = "S1"

[[sources]]
repository = "octo/lib"
local_path = "/srv/lib.git"
local_wiki_path = "/srv/lib.wiki.git"
webhook_secret_env = "S2"

[queue]
workers = 1
"#,
        dir.display()
    ))
    .unwrap()
}

fn job(source: &str, number: i64, actor: &str) -> NewJob {
    NewJob {
        source: source.into(),
        destination: format!("local:{source}"),
        origin: Origin::Request,
        kind: JobKind::PullRequest {
            number: teammem::ids::PullNumber::new(number as u64).unwrap(),
            merge_sha: teammem::ids::Sha::parse(&format!("{number:040x}")).unwrap(),
        },
        actor: actor.into(),
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_viewers_see_jobs_and_remote_ones_must_log_in() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let mut d = inproc::start(cfg.clone()).await;
    let pool = teammem::db::open(&cfg.server.data_dir).await.unwrap();
    let app_token = teammem::tokens::create(&pool.clone().into(), "app", &["octo/app".into()])
        .await
        .unwrap()
        .expose()
        .to_string();

    let app_job = d
        .queue
        .enqueue(job("octo/app", 12, "<script>alert(1)</script>"), None)
        .await
        .unwrap()
        .job;
    d.queue
        .enqueue(job("octo/lib", 34, "someone"), None)
        .await
        .unwrap();
    assert_eq!(d.started.recv().await, Some(app_job.id));

    let http = client();
    // A loopback client without forwarding headers is the local operator.
    let page = http.get(d.url("/jobs")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("octo/app") && html.contains("octo/lib"),
        "{html}"
    );
    // The home page lists the sources, each with its jobs in flight.
    let home = http
        .get(d.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        home.contains("data-source=\"octo/app\"") && home.contains("data-source=\"octo/lib\""),
        "{home}"
    );
    assert!(html.contains("http-equiv=\"refresh\""));
    assert!(html.contains("name=viewport"));

    let detail = http
        .get(d.url(&format!("/jobs/{}", app_job.id)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        detail.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{detail}"
    );
    assert!(!detail.contains("<script>"));
    assert!(
        detail.contains("enqueued") && detail.contains("claimed"),
        "{detail}"
    );

    // Through a proxy (forwarding headers) the same client must log in.
    let forwarded = http
        .get(d.url("/"))
        .header("X-Forwarded-For", "203.0.113.7")
        .send()
        .await
        .unwrap();
    assert_eq!(forwarded.status(), 303);
    assert_eq!(forwarded.headers()["location"], "/login");

    let refused = http
        .post(d.url("/login"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("token=tmm_wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert!(refused.headers().get("set-cookie").is_none());

    let login = http
        .post(d.url("/login"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("token={app_token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 303);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(
        !cookie.contains(&app_token),
        "the cookie must not carry the token"
    );
    let session = cookie.split(';').next().unwrap().to_string();

    let scoped = http
        .get(d.url("/jobs"))
        .header("X-Forwarded-For", "203.0.113.7")
        .header("Cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(scoped.status(), 200);
    let html = scoped.text().await.unwrap();
    assert!(html.contains("PR #12"), "{html}");
    assert!(
        !html.contains("PR #34"),
        "a token limited to octo/app must not see octo/lib jobs"
    );
    let home = http
        .get(d.url("/"))
        .header("X-Forwarded-For", "203.0.113.7")
        .header("Cookie", &session)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(home.contains("data-source=\"octo/app\""), "{home}");
    assert!(
        !home.contains("octo/lib"),
        "a token limited to octo/app must not see the octo/lib source: {home}"
    );

    // A tampered cookie is worth nothing.
    let tampered = session.replace("teammem_session=", "teammem_session=00");
    let r = http
        .get(d.url("/"))
        .header("X-Forwarded-For", "203.0.113.7")
        .header("Cookie", tampered)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);

    // Revoking the token ends the session.
    teammem::tokens::revoke(&pool.clone().into(), "app").await.unwrap();
    let r = http
        .get(d.url("/"))
        .header("X-Forwarded-For", "203.0.113.7")
        .header("Cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);

    d.permits.add_permits(10);
    d.shutdown().await.unwrap();
}

/// The form token of the job page `html` (its retry or cancel form).
fn csrf_of(html: &str) -> String {
    let start = html.find("name=csrf value=\"").expect("an action form") + 17;
    html[start..start + 64].to_string()
}

/// The retry and cancel buttons, attacked: no Origin, a foreign one, a missing
/// or another session's token each change nothing; the real form works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_actions_need_the_dashboards_own_origin_and_the_sessions_token() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let mut d = inproc::start(cfg.clone()).await;
    let pool = teammem::db::open(&cfg.server.data_dir).await.unwrap();
    let token = |name: &'static str| {
        let pool = pool.clone();
        async move {
            teammem::tokens::create(&pool.clone().into(), name, &[])
                .await
                .unwrap()
                .expose()
                .to_string()
        }
    };
    let (alice, bob) = (token("alice").await, token("bob").await);
    let job = d
        .queue
        .enqueue(job("octo/app", 12, "someone"), None)
        .await
        .unwrap()
        .job;
    assert_eq!(d.started.recv().await, Some(job.id));

    let http = client();
    let own = d.url("").trim_end_matches('/').to_string();
    let page = http
        .get(d.url(&format!("/jobs/{}", job.id)))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Cancel job"),
        "a running job can be cancelled: {page}"
    );
    let local_csrf = csrf_of(&page);
    let cancel = d.url(&format!("/jobs/{}/cancel", job.id));
    let post = |origin: Option<&str>, body: String, cookie: Option<&str>, forwarded: bool| {
        let mut r = http
            .post(&cancel)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body);
        if let Some(origin) = origin {
            r = r.header("Origin", origin);
        }
        if let Some(cookie) = cookie {
            r = r.header("Cookie", cookie);
        }
        if forwarded {
            r = r.header("X-Forwarded-For", "203.0.113.7");
        }
        r.send()
    };
    let state = |d: &inproc::Running| {
        let queue = d.queue.clone();
        async move { queue.get(job.id).await.unwrap().state }
    };

    // Refused, and nothing changes.
    let form = format!("csrf={local_csrf}");
    for (origin, body, expected) in [
        (None, form.clone(), 403),
        (Some("https://evil.example"), form.clone(), 403),
        (
            Some(own.as_str()),
            "csrf=".to_string() + &"0".repeat(64),
            403,
        ),
        (Some(own.as_str()), String::new(), 400),
    ] {
        let r = post(origin, body, None, false).await.unwrap();
        assert_eq!(r.status(), expected, "{origin:?}");
        assert_eq!(state(&d).await, teammem::queue::JobState::Running);
    }
    // A remote viewer without a session is sent to log in.
    let r = post(Some(&own), form.clone(), None, true).await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(state(&d).await, teammem::queue::JobState::Running);

    // Another session's token is worth nothing in this one.
    let login = |token: String| {
        let http = http.clone();
        let url = d.url("/login");
        async move {
            let r = http
                .post(url)
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(format!("token={token}"))
                .send()
                .await
                .unwrap();
            let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
            cookie.split(';').next().unwrap().to_string()
        }
    };
    let (alice_session, bob_session) = (login(alice).await, login(bob).await);
    let alice_page = http
        .get(d.url(&format!("/jobs/{}", job.id)))
        .header("X-Forwarded-For", "203.0.113.7")
        .header("Cookie", &alice_session)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let alice_csrf = csrf_of(&alice_page);
    assert_ne!(alice_csrf, local_csrf);
    let r = post(
        Some(&own),
        format!("csrf={alice_csrf}"),
        Some(&bob_session),
        true,
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(state(&d).await, teammem::queue::JobState::Running);

    // The real form, from the dashboard's own page, cancels; then retries.
    let r = post(
        Some(&own),
        format!("csrf={alice_csrf}"),
        Some(&alice_session),
        true,
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(state(&d).await, teammem::queue::JobState::Cancelled);
    let events = d.queue.events(job.id).await.unwrap();
    assert!(
        events.iter().any(|e| e.actor == "dashboard: alice"),
        "the audit trail names who pressed the button"
    );
    let retried = http
        .post(d.url(&format!("/jobs/{}/retry", job.id)))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Origin", &own)
        .body(format!("csrf={local_csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(retried.status(), 303);
    assert_ne!(state(&d).await, teammem::queue::JobState::Cancelled);

    d.permits.add_permits(10);
    d.shutdown().await.unwrap();
}
