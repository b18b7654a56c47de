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
        source: teammem::ids::RepoName::parse(source).unwrap(),
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
    assert!(
        !refused
            .headers()
            .get_all("set-cookie")
            .iter()
            .any(|c| c.to_str().unwrap().starts_with("teammem_session=")),
        "a refused login sets no session"
    );

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
    teammem::tokens::revoke(&pool.clone().into(), "app")
        .await
        .unwrap();
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
        .unwrap();
    // The local operator's token is bound to this browser's form cookie.
    let local_form = page.headers()["set-cookie"].to_str().unwrap();
    let local_form = local_form.split(';').next().unwrap().to_string();
    let page = page.text().await.unwrap();
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
        .header("Cookie", &local_form)
        .body(format!("csrf={local_csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(retried.status(), 303);
    assert_ne!(state(&d).await, teammem::queue::JobState::Cancelled);

    d.permits.add_permits(10);
    d.shutdown().await.unwrap();
}

/// The `data-source` of each row of the sources page, in page order.
fn source_order(home: &str) -> Vec<String> {
    home.split("<tr data-source=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_string())
        .collect()
}

/// The opening `<tr …>` of `source`'s row.
fn row_of<'a>(home: &'a str, source: &str) -> &'a str {
    let start = home
        .find(&format!("<tr data-source=\"{source}\""))
        .unwrap_or_else(|| panic!("no row for {source}: {home}"));
    let end = start + home[start..].find("</tr>").unwrap();
    &home[start..end]
}

/// Commits `content` as `page` in the wiki clone `work` and pushes it; the
/// wiki's new tip.
fn edit_wiki(work: &std::path::Path, page: &str, content: &str) -> String {
    use crate::harness::git::{git, git_trimmed};
    crate::runner::fixture::write(work, page, content);
    git(work, &["add", "-A"]);
    git(work, &["commit", "-q", "-m", "A person edits the wiki"]);
    git(work, &["push", "-q", "origin", "HEAD:master"]);
    git_trimmed(work, &["rev-parse", "HEAD"])
}

/// The sources page counts each wiki's stale facts on teammem's own copy of
/// it: a wiki with stale markers shows their number and sorts before the
/// sources that are simply up to date, a clean wiki shows none, a wiki that
/// cannot be read says why, and fixing the facts (a new wiki commit) is seen
/// on the next load. The facts' own text never reaches the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sources_page_counts_stale_facts_and_lists_those_wikis_first() {
    use crate::harness::fake_github::GitRepo;
    let dir = tempfile::tempdir().unwrap();
    let (app, lib) = (dir.path().join("app"), dir.path().join("lib"));
    let app_src = GitRepo::init(&app.join("src"));
    app_src.commits(1, "app");
    let lib_src = GitRepo::init(&lib.join("src"));
    lib_src.commits(1, "lib");
    let app_wiki = crate::runner::fixture::wiki(&app);
    let lib_wiki = crate::runner::fixture::wiki(&lib);
    let head = lib_src.head();
    let marker = |stale: &str| format!("<!-- teammem:evidence log.txt@{head}#L1-L1{stale} -->");
    let stale = format!(" stale={head}");
    let facts = |first: &str, second: &str| {
        format!(
            "# Facts\n\n\
             - The log <script>alert(1)</script> has one line. {}\n\
             - The log is plain text. {}\n\
             - The log is small. {}\n\
             - Broken <!-- teammem:evidence log.txt@nothex#L1 -->\n",
            marker(first),
            marker(second),
            marker(""),
        )
    };
    let stale_tip = edit_wiki(&lib.join("wiki-seed"), "Facts.md", &facts(&stale, &stale));
    // A clean wiki: one fresh fact.
    edit_wiki(&app.join("wiki-seed"), "Facts.md", &facts("", ""));

    let cfg = Config::parse(&format!(
        r#"
[server]
listen = "127.0.0.1:0"
data_dir = "{data}/data"

[dashboard]
forge_timeout_seconds = 30

[[sources]]
repository = "octo/app"
local_path = "{app_src}"
local_wiki_path = "{app_wiki}"
webhook_secret_env = "S1"

[[sources]]
repository = "octo/lib"
local_path = "{lib_src}"
local_wiki_path = "{lib_wiki}"
webhook_secret_env = "S2"

[[sources]]
repository = "octo/gone"
local_path = "{data}/gone.git"
local_wiki_path = "{data}/gone.wiki.git"
webhook_secret_env = "S3"
"#,
        data = dir.path().display(),
        app_src = app_src.dir.display(),
        app_wiki = app_wiki.display(),
        lib_src = lib_src.dir.display(),
        lib_wiki = lib_wiki.display(),
    ))
    .unwrap();
    let d = inproc::start(cfg).await;
    for (source, repo) in [("octo/app", &app_src), ("octo/lib", &lib_src)] {
        d.queue
            .advance_cursor(source, &teammem::ids::Sha::parse(&repo.head()).unwrap())
            .await
            .unwrap();
    }
    let http = client();
    let home = || async {
        http.get(d.url("/"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };

    let page = home().await;
    // The unreadable source needs attention first; then stale facts; then
    // the source that is simply up to date, although its name sorts first.
    assert_eq!(source_order(&page), ["octo/gone", "octo/lib", "octo/app"]);
    let lib_row = row_of(&page, "octo/lib");
    assert!(
        lib_row.contains("data-attention=\"stale facts\" data-stale-facts=\"2\""),
        "{lib_row}"
    );
    assert!(
        lib_row.contains(&format!(
            "<span class=stale-count title=\"counted at wiki commit {stale_tip}\">2 stale facts</span>"
        )),
        "{lib_row}"
    );
    let app_row = row_of(&page, "octo/app");
    assert!(
        app_row.contains("data-attention=\"up to date\" data-stale-facts=\"0\"")
            && !app_row.contains("stale-count"),
        "{app_row}"
    );
    let gone_row = row_of(&page, "octo/gone");
    assert!(
        gone_row.contains(
            "<td><span class=unknown>unknown: configuration_error: the local wiki repository could not be opened; check local_wiki_path</span></td>"
        ) && !gone_row.contains("data-stale-facts"),
        "{gone_row}"
    );
    assert!(
        !page.contains("<script>") && !page.contains("has one line"),
        "{page}"
    );

    // One fact fixed: the count follows the wiki's new commit.
    let one_left = edit_wiki(&lib.join("wiki-seed"), "Facts.md", &facts("", &stale));
    let page = home().await;
    assert!(
        row_of(&page, "octo/lib").contains(&format!(
            "title=\"counted at wiki commit {one_left}\">1 stale fact</span>"
        )),
        "{page}"
    );
    assert_eq!(source_order(&page), ["octo/gone", "octo/lib", "octo/app"]);

    // All fixed: octo/lib is up to date and sorts by name again.
    edit_wiki(&lib.join("wiki-seed"), "Facts.md", &facts("", ""));
    let page = home().await;
    assert!(
        row_of(&page, "octo/lib").contains("data-attention=\"up to date\" data-stale-facts=\"0\""),
        "{page}"
    );
    assert_eq!(source_order(&page), ["octo/gone", "octo/app", "octo/lib"]);

    d.shutdown().await.unwrap();
}

/// Wiki views read a GitHub wiki through one store, asking the remote for
/// its tip at most once per ten seconds however many views come; and a
/// signed-in viewer spends its token's request allowance (`[limits]`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wiki_views_ask_the_remote_once_and_signed_in_viewers_are_rate_limited() {
    use crate::harness::fake_github::{FakeGitHub, GitRepo};
    use crate::harness::git_http::{GitHttpServer, bare_with_commits};
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let github = FakeGitHub::start().await;
    let scratch = GitRepo::init(&dir.path().join("scratch"));
    scratch.commit("README.md", "Initial commit");
    github.add_repo("octo/app", &scratch, "public", true);
    let served = dir.path().join("served");
    std::fs::create_dir_all(served.join("octo")).unwrap();
    bare_with_commits(
        &served,
        "octo/app.wiki.git",
        &[(
            "Initial",
            &[
                ("Home.md", "# Home\n\nThe [guide](Guide).\n"),
                ("Guide.md", "# Guide\n"),
            ],
        )],
    );
    let git = GitHttpServer::start(&served, None).await;
    let key = dir.path().join("app.pem");
    std::fs::write(&key, &github.app_key_pem).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let cfg = Config::parse(&format!(
        r#"
[server]
listen = "127.0.0.1:0"
data_dir = "{data}"

[limits]
requests_per_second = 1
request_burst = 3

[github]
api_url = "{api}"
git_url = "http://127.0.0.1:{port}"
app_id = {app_id}
private_key = {{ file = "{key}" }}

[[sources]]
repository = "octo/app"
webhook_secret_env = "TEAMMEM_TEST_UNSET_SECRET"
"#,
        data = dir.path().join("data").display(),
        api = github.url,
        port = git.port(),
        app_id = github.app_id,
        key = key.display(),
    ))
    .unwrap();
    let d = inproc::start(cfg.clone()).await;
    let http = client();
    let fetches = || {
        git.requests()
            .iter()
            .filter(|r| r.target.contains("app.wiki.git") && r.target.contains("upload-pack"))
            .count()
    };
    // The local operator (no allowance to spend) views the index and both
    // pages, again and again: the first view fetches, the rest read it.
    let first = http.get(d.url("/wiki/octo/app/")).send().await.unwrap();
    assert_eq!(first.status(), 200);
    assert!(first.text().await.unwrap().contains("Guide"));
    let after_first = fetches();
    assert!(after_first >= 1, "the first view asks the remote");
    for path in [
        "/wiki/octo/app/",
        "/wiki/octo/app/Home",
        "/wiki/octo/app/Guide",
    ]
    .repeat(4)
    {
        let view = http.get(d.url(path)).send().await.unwrap();
        assert_eq!(view.status(), 200, "{path}");
    }
    assert_eq!(
        fetches(),
        after_first,
        "views within ten seconds read the tip found"
    );

    // A signed-in viewer past its burst is refused, before any wiki read.
    let pool = teammem::db::open(&cfg.server.data_dir).await.unwrap();
    let token = teammem::tokens::create(&pool.into(), "viewer", &["octo/app".into()])
        .await
        .unwrap()
        .expose()
        .to_string();
    let login = http
        .post(d.url("/login"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(format!("token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 303);
    let session = login.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let view = http
            .get(d.url("/wiki/octo/app/Home"))
            .header("X-Forwarded-For", "203.0.113.7")
            .header("Cookie", &session)
            .send()
            .await
            .unwrap();
        statuses.push(view.status().as_u16());
    }
    assert_eq!(&statuses[..3], [200, 200, 200], "{statuses:?}");
    assert!(statuses[3..].contains(&429), "{statuses:?}");
    d.shutdown().await.unwrap();
}
