//! Signed dispatch ingest end to end against the fake GitHub (real git history
//! behind it): one test per answer code, each forged-run variant, force-pushes,
//! tampered bodies, rate limits and outages, and every OIDC claim.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use teammem::config::Config;
use teammem::forge::github::GitHubForge;
use teammem::ids::{PullNumber, Sha};
use teammem::ingest::oidc::OidcVerifier;
use teammem::ingest::{
    DispatchHeaders, Ingest, IngestError, VerifiedDispatch, VerifiedKind, signature,
};
use teammem::secrets::{Secret, read_key_file};

use crate::harness::fake_github::{
    FakeGitHub, FakePull, FakeRun, Fault, GitRepo, OIDC_KID_1, OIDC_KID_2, OIDC_KID_UNPUBLISHED,
};

pub const SECRET: &[u8] = b"dispatch secret for tests";
pub const WORKFLOW: &str = ".github/workflows/team-memory-post-merge.yml";
pub const REQUEST_WORKFLOW: &str = ".github/workflows/team-memory-request.yml";
pub const AUDIENCE: &str = "https://teammem.test";

/// A fake GitHub with `octo/app` (private, history of 3 commits + 2 pushed),
/// `octo/oidc` (same history, OIDC required) and a ready pipeline.
pub struct Fixture {
    pub fake: FakeGitHub,
    pub _dir: tempfile::TempDir,
    pub git: GitRepo,
    pub app_id: u64,
    pub oidc_id: u64,
    pub before: String,
    pub after: String,
    pub config: Config,
    pub forge: Arc<GitHubForge>,
    pub ingest: Ingest,
}

pub fn config_text(fake: &FakeGitHub, dir: &std::path::Path, extra_sources: &str) -> String {
    let key = dir.join("app.pem");
    std::fs::write(&key, &fake.app_key_pem).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    format!(
        r#"
[server]
data_dir = "{data}"

[github]
api_url = "{url}"
git_url = "{url}"
app_id = {app_id}
private_key = {{ file = "{key}" }}
oidc_issuer = "{url}"
verify_timeout_seconds = 2

[[sources]]
repository = "octo/app"
webhook_secret_env = "TEAMMEM_TEST_SECRET"

[[sources]]
repository = "octo/oidc"
webhook_secret_env = "TEAMMEM_TEST_SECRET"
oidc_audience = "{AUDIENCE}"
{extra_sources}
"#,
        data = dir.join("data").display(),
        url = fake.url,
        app_id = fake.app_id,
        key = key.display(),
    )
}

pub fn ingest_for(config: &Config, forge: Arc<GitHubForge>, refetch: Duration) -> Ingest {
    let sources = config
        .sources
        .iter()
        .map(|s| (s.clone(), Secret::new(SECRET.to_vec())))
        .collect();
    let oidc = OidcVerifier::new(&config.github.as_ref().unwrap().oidc_issuer)
        .with_refetch_interval(refetch);
    Ingest::new(sources, Some(forge), Some(oidc))
}

impl Fixture {
    pub async fn new() -> Fixture {
        Self::with_sources("").await
    }

    pub async fn with_sources(extra: &str) -> Fixture {
        let fake = FakeGitHub::start().await;
        let dir = tempfile::tempdir().unwrap();
        let git = GitRepo::init(&dir.path().join("app"));
        git.commits(3, "base");
        let before = git.head();
        git.commits(2, "pushed");
        let after = git.head();
        let app_id = fake.add_repo("octo/app", &git, "private", true);
        let oidc_id = fake.add_repo("octo/oidc", &git, "private", true);
        for (repo, id) in [("octo/app", app_id), ("octo/oidc", oidc_id)] {
            fake.add_run(repo, 77, 1, run(id, &after));
            fake.add_run(
                repo,
                88,
                2,
                FakeRun {
                    event: "workflow_dispatch".into(),
                    path: REQUEST_WORKFLOW.into(),
                    ..run(id, &after)
                },
            );
        }
        let text = config_text(&fake, dir.path(), extra);
        let config = Config::parse(&text).unwrap();
        let gh = config.github.as_ref().unwrap();
        let key = read_key_file(match &gh.private_key {
            teammem::config::PrivateKey::File { path } => path,
            _ => unreachable!(),
        })
        .unwrap();
        let forge = Arc::new(GitHubForge::new(gh, &key).unwrap());
        let ingest = ingest_for(&config, forge.clone(), Duration::from_secs(3600));
        Fixture {
            fake,
            _dir: dir,
            git,
            app_id,
            oidc_id,
            before,
            after,
            config,
            forge,
            ingest,
        }
    }

    pub fn range(&self, repo: &str) -> Value {
        json!({
            "source_repository": repo, "kind": "range",
            "source_run_id": 77, "source_run_attempt": 1,
            "push_before": self.before, "push_after": self.after,
        })
    }

    pub async fn send(&self, body: &Value) -> Result<VerifiedDispatch, IngestError> {
        self.send_with(body, None).await
    }

    pub async fn send_with(
        &self,
        body: &Value,
        bearer: Option<&str>,
    ) -> Result<VerifiedDispatch, IngestError> {
        let raw = serde_json::to_vec(body).unwrap();
        self.send_raw(&raw, Some(&signature::sign(SECRET, &raw)), bearer)
            .await
    }

    pub async fn send_raw(
        &self,
        raw: &[u8],
        sig: Option<&str>,
        bearer: Option<&str>,
    ) -> Result<VerifiedDispatch, IngestError> {
        let auth = bearer.map(|t| format!("Bearer {t}"));
        let headers = DispatchHeaders {
            content_type: Some("application/json"),
            signature: sig,
            delivery: Some("d-1"),
            authorization: auth.as_deref(),
        };
        self.ingest.ingest(&headers, raw).await
    }

    /// Valid OIDC claims for the `octo/oidc` range dispatch.
    pub fn claims(&self) -> Value {
        self.fake.actions_claims(
            AUDIENCE,
            "octo/oidc",
            self.oidc_id,
            (77, 1),
            &self.after,
            "push",
            WORKFLOW,
        )
    }
}

pub fn run(repository_id: u64, head_sha: &str) -> FakeRun {
    FakeRun {
        repository_id,
        event: "push".into(),
        path: WORKFLOW.into(),
        head_branch: "main".into(),
        head_sha: head_sha.into(),
    }
}

fn code(r: Result<VerifiedDispatch, IngestError>) -> (u16, &'static str) {
    let e = r.expect_err("the dispatch must be refused");
    (status_of(&e), e.code)
}

#[tokio::test]
async fn a_verified_range_is_accepted_with_minimal_tokens() {
    let f = Fixture::new().await;
    let v = f.send(&f.range("octo/app")).await.unwrap();
    assert_eq!(v.source, "octo/app");
    assert_eq!(v.destination, "github:octo/app.wiki");
    assert_eq!(v.default_branch, "main");
    assert_eq!(
        v.kind,
        VerifiedKind::Range {
            before: Sha::parse(&f.before).unwrap(),
            after: Sha::parse(&f.after).unwrap(),
            commits: 2
        }
    );
    assert_eq!(v.run, Some(teammem::forge::RunRef { id: 77, attempt: 1 }));
    // One token per permission the calls needed, each for exactly this repository.
    let mints = f.fake.mints();
    let mut perms: Vec<_> = mints.iter().map(|m| m.permissions.clone()).collect();
    perms.sort();
    assert_eq!(
        perms,
        vec![
            vec![("actions".to_string(), "read".to_string())],
            vec![("contents".to_string(), "read".to_string())],
            vec![("metadata".to_string(), "read".to_string())],
        ]
    );
    assert!(
        mints
            .iter()
            .all(|m| m.repositories == vec!["app".to_string()])
    );
    // A second dispatch reuses the cached tokens.
    f.send(&f.range("octo/app")).await.unwrap();
    assert_eq!(f.fake.mints().len(), 3);
}

#[tokio::test]
async fn a_tampered_body_is_bad_signature_and_nothing_is_asked() {
    let f = Fixture::new().await;
    let raw = serde_json::to_vec(&f.range("octo/app")).unwrap();
    let sig = signature::sign(SECRET, &raw);
    let tampered = String::from_utf8(raw)
        .unwrap()
        .replace("\"source_run_id\":77", "\"source_run_id\":78");
    assert_eq!(
        code(f.send_raw(tampered.as_bytes(), Some(&sig), None).await),
        (401, "bad_signature")
    );
    let wrong_secret = signature::sign(b"another secret", tampered.as_bytes());
    assert_eq!(
        code(
            f.send_raw(tampered.as_bytes(), Some(&wrong_secret), None)
                .await
        ),
        (401, "bad_signature")
    );
    assert!(f.fake.requests().is_empty(), "{:?}", f.fake.requests());
}

#[tokio::test]
async fn a_missing_signature_is_refused() {
    let f = Fixture::new().await;
    let raw = serde_json::to_vec(&f.range("octo/app")).unwrap();
    assert_eq!(
        code(f.send_raw(&raw, None, None).await),
        (401, "missing_signature")
    );
    assert!(f.fake.requests().is_empty());
}

#[tokio::test]
async fn an_unknown_source_is_forbidden() {
    let f = Fixture::new().await;
    assert_eq!(
        code(f.send(&f.range("octo/other")).await),
        (403, "unknown_source")
    );
    assert!(f.fake.requests().is_empty());
}

#[tokio::test]
async fn malformed_json_is_invalid_json() {
    let f = Fixture::new().await;
    for raw in [
        &b"{\"source_repository\": \"octo/app\""[..],
        b"[1,2]",
        b"not json",
    ] {
        let sig = signature::sign(SECRET, raw);
        assert_eq!(
            code(f.send_raw(raw, Some(&sig), None).await),
            (400, "invalid_json")
        );
    }
}

#[tokio::test]
async fn invalid_fields_are_unprocessable_after_the_signature() {
    let f = Fixture::new().await;
    let mut body = f.range("octo/app");
    body["push_before"] = json!("abc");
    assert_eq!(code(f.send(&body).await), (422, "invalid_field"));
    let mut body = f.range("octo/app");
    body["surprise"] = json!(true);
    assert_eq!(code(f.send(&body).await), (422, "invalid_field"));
    let mut body = f.range("octo/app");
    body["source_run_attempt"] = json!(0);
    assert_eq!(code(f.send(&body).await), (422, "invalid_field"));
    // An unsigned bad body is refused for its signature first.
    let raw = serde_json::to_vec(&body).unwrap();
    assert_eq!(
        code(f.send_raw(&raw, Some("sha256=00"), None).await).1,
        "bad_signature"
    );
    assert!(f.fake.requests().is_empty());
}

#[tokio::test]
async fn wrong_media_type_size_and_delivery_are_refused() {
    let f = Fixture::new().await;
    let raw = serde_json::to_vec(&f.range("octo/app")).unwrap();
    let sig = signature::sign(SECRET, &raw);
    let mut h = DispatchHeaders {
        content_type: Some("text/plain"),
        signature: Some(&sig),
        delivery: Some("d-1"),
        authorization: None,
    };
    assert_eq!(
        code(f.ingest.ingest(&h, &raw).await),
        (415, "unsupported_media_type")
    );
    h.content_type = Some("application/json");
    h.delivery = None;
    assert_eq!(
        code(f.ingest.ingest(&h, &raw).await),
        (400, "invalid_delivery")
    );
    let long = "x".repeat(129);
    h.delivery = Some(&long);
    assert_eq!(
        code(f.ingest.ingest(&h, &raw).await),
        (400, "invalid_delivery")
    );
    let mut big = f.range("octo/app");
    big["pad"] = json!("x".repeat(64 * 1024));
    let big = serde_json::to_vec(&big).unwrap();
    let big_sig = signature::sign(SECRET, &big);
    h.delivery = Some("d-1");
    h.signature = Some(&big_sig);
    assert_eq!(
        code(f.ingest.ingest(&h, &big).await),
        (413, "body_too_large")
    );
    assert!(f.fake.requests().is_empty());
}

#[tokio::test]
async fn forged_runs_are_run_mismatch() {
    let f = Fixture::new().await;
    let other_sha = f.git.git(&["rev-parse", "HEAD~1"]);
    let variants = [
        (
            "another repository",
            FakeRun {
                repository_id: 999_999,
                ..run(f.app_id, &f.after)
            },
        ),
        (
            "another workflow",
            FakeRun {
                path: ".github/workflows/evil.yml@refs/heads/main".into(),
                ..run(f.app_id, &f.after)
            },
        ),
        (
            "another branch",
            FakeRun {
                head_branch: "feature".into(),
                ..run(f.app_id, &f.after)
            },
        ),
        (
            "another event",
            FakeRun {
                event: "pull_request".into(),
                ..run(f.app_id, &f.after)
            },
        ),
        ("another head sha", run(f.app_id, &other_sha)),
    ];
    for (i, (what, forged)) in variants.into_iter().enumerate() {
        let run_id = 500 + i as u64;
        f.fake.add_run("octo/app", run_id, 1, forged);
        let mut body = f.range("octo/app");
        body["source_run_id"] = json!(run_id);
        assert_eq!(code(f.send(&body).await), (409, "run_mismatch"), "{what}");
    }
    // A path with an @ref suffix naming the right workflow is fine.
    f.fake.add_run(
        "octo/app",
        600,
        1,
        FakeRun {
            path: format!("{WORKFLOW}@refs/heads/main"),
            ..run(f.app_id, &f.after)
        },
    );
    let mut body = f.range("octo/app");
    body["source_run_id"] = json!(600);
    f.send(&body).await.unwrap();
    // A run that does not exist.
    body["source_run_id"] = json!(601);
    assert_eq!(code(f.send(&body).await), (409, "run_not_found"));
}

#[tokio::test]
async fn a_range_that_is_not_a_fast_forward_is_refused() {
    let f = Fixture::new().await;
    // A commit on a side branch: not a descendant of `before`'s successor chain.
    f.git.git(&["checkout", "-q", "-b", "side", &f.before]);
    let side = f.git.commit("side.txt", "side work");
    f.git.git(&["checkout", "-q", "main"]);
    let mut body = f.range("octo/app");
    body["push_before"] = json!(side);
    assert_eq!(code(f.send(&body).await), (409, "not_fast_forward"));
    // Reversed range: before is a descendant of after.
    let mut body = f.range("octo/app");
    body["push_before"] = json!(f.after);
    body["push_after"] = json!(f.before);
    f.fake.add_run("octo/app", 77, 1, run(f.app_id, &f.before));
    assert_eq!(code(f.send(&body).await), (409, "not_fast_forward"));
    // A commit GitHub does not know.
    let mut body = f.range("octo/app");
    body["push_before"] = json!("1234567890123456789012345678901234567890");
    f.fake.add_run("octo/app", 77, 1, run(f.app_id, &f.after));
    assert_eq!(code(f.send(&body).await), (409, "unknown_commit"));
}

#[tokio::test]
async fn a_force_pushed_default_branch_is_not_on_default_branch() {
    let f = Fixture::new().await;
    f.send(&f.range("octo/app")).await.unwrap();
    // Force-push main back to `before` plus a different commit.
    f.git.reset_main(&f.before);
    f.git.commit("other.txt", "rewritten history");
    assert_eq!(
        code(f.send(&f.range("octo/app")).await),
        (409, "not_on_default_branch")
    );
}

#[tokio::test]
async fn more_than_a_thousand_commits_is_range_too_large() {
    let f = Fixture::new().await;
    let tip = f.git.fast_commits(1001);
    f.fake.add_run("octo/app", 77, 1, run(f.app_id, &tip));
    let mut body = f.range("octo/app");
    body["push_after"] = json!(tip);
    assert_eq!(code(f.send(&body).await), (409, "range_too_large"));
}

#[tokio::test]
async fn zero_shas_and_empty_ranges_are_refused_before_any_call() {
    let f = Fixture::new().await;
    let mut body = f.range("octo/app");
    body["push_before"] = json!("0".repeat(40));
    assert_eq!(code(f.send(&body).await), (409, "zero_sha"));
    let mut body = f.range("octo/app");
    body["push_before"] = json!(f.after);
    assert_eq!(code(f.send(&body).await), (409, "empty_range"));
    assert!(f.fake.requests().is_empty(), "{:?}", f.fake.requests());
}

fn pull_body(n: u64) -> Value {
    json!({"source_repository": "octo/app", "kind": "pull_request",
           "source_run_id": 88, "source_run_attempt": 2, "pull_number": n})
}

#[tokio::test]
async fn pull_requests_must_be_merged_into_the_default_branch() {
    let f = Fixture::new().await;
    let merged = |sha: &str, base: &str| FakePull {
        merged: true,
        base_ref: base.into(),
        merge_commit_sha: Some(sha.into()),
        title: "A change".into(),
    };
    f.fake.add_pull("octo/app", 1, merged(&f.after, "main"));
    f.fake.add_pull(
        "octo/app",
        2,
        FakePull {
            merged: false,
            merge_commit_sha: None,
            ..merged(&f.after, "main")
        },
    );
    f.fake.add_pull("octo/app", 3, merged(&f.after, "release"));
    let v = f.send(&pull_body(1)).await.unwrap();
    assert_eq!(
        v.kind,
        VerifiedKind::PullRequest {
            number: PullNumber::new(1).unwrap(),
            merge_sha: Sha::parse(&f.after).unwrap()
        }
    );
    assert!(
        f.fake
            .mints()
            .iter()
            .any(|m| m.permissions == vec![("pull_requests".to_string(), "read".to_string())])
    );
    assert_eq!(code(f.send(&pull_body(2)).await), (409, "pull_not_merged"));
    assert_eq!(
        code(f.send(&pull_body(3)).await),
        (409, "not_on_default_branch")
    );
    assert_eq!(code(f.send(&pull_body(4)).await), (409, "pull_not_found"));
    // The request workflow's run must be a workflow_dispatch of the request workflow.
    let mut body = pull_body(1);
    body["source_run_id"] = json!(77);
    body["source_run_attempt"] = json!(1);
    assert_eq!(code(f.send(&body).await), (409, "run_mismatch"));
    // Merged, but the merge commit was force-pushed away since.
    f.git.reset_main(&f.before);
    assert_eq!(
        code(f.send(&pull_body(1)).await),
        (409, "not_on_default_branch")
    );
}

#[tokio::test]
async fn outages_and_rate_limits_are_unavailable_with_retry_after() {
    let f = Fixture::new().await;
    f.fake.inject("/repos/octo/app", Fault::Status(502));
    let e = f.send(&f.range("octo/app")).await.unwrap_err();
    assert_eq!((status_of(&e), e.code), (503, "upstream_unavailable"));
    assert!(e.retry_after.unwrap() >= 1);

    f.fake
        .inject("/compare/", Fault::TooManyRequests { retry_after: 17 });
    let e = f.send(&f.range("octo/app")).await.unwrap_err();
    assert_eq!(
        (status_of(&e), e.code, e.retry_after),
        (503, "upstream_unavailable", Some(17))
    );

    f.fake.inject(
        "/actions/runs/",
        Fault::RateLimitExhausted { reset_in: 120 },
    );
    let e = f.send(&f.range("octo/app")).await.unwrap_err();
    assert_eq!(status_of(&e), 503);
    let wait = e.retry_after.unwrap();
    assert!((100..=121).contains(&wait), "{wait}");

    let fresh = Fixture::new().await;
    fresh.fake.inject("/access_tokens", Fault::Status(500));
    assert_eq!(
        code(fresh.send(&fresh.range("octo/app")).await),
        (503, "upstream_unavailable")
    );

    // Still fine afterwards.
    f.send(&f.range("octo/app")).await.unwrap();
}

#[tokio::test]
async fn a_hanging_github_hits_the_deadline() {
    let f = Fixture::new().await;
    f.fake.inject("/compare/", Fault::Hang);
    let body = f.range("octo/app");
    let (r, ()) = tokio::join!(f.send(&body), f.fake.hung());
    let e = r.unwrap_err();
    assert_eq!((status_of(&e), e.code), (503, "upstream_unavailable"));
    assert!(e.retry_after.is_some());
}

#[tokio::test]
async fn an_uninstalled_app_is_refused() {
    let f = Fixture::with_sources(
        r#"
[[sources]]
repository = "octo/bare"
webhook_secret_env = "TEAMMEM_TEST_SECRET"
"#,
    )
    .await;
    f.fake.add_repo("octo/bare", &f.git, "private", false);
    assert_eq!(
        code(f.send(&f.range("octo/bare")).await),
        (409, "not_installed")
    );
}

#[tokio::test]
async fn wiki_audience_rules_hold_across_repositories() {
    let f = Fixture::with_sources(
        r#"
[[sources]]
repository = "octo/private-src"
wiki_repository = "octo/public-wiki"
webhook_secret_env = "TEAMMEM_TEST_SECRET"

[[sources]]
repository = "octo/public-src"
wiki_repository = "octo/public-wiki"
webhook_secret_env = "TEAMMEM_TEST_SECRET"

[[sources]]
repository = "octo/public-two"
wiki_repository = "octo/private-wiki"
webhook_secret_env = "TEAMMEM_TEST_SECRET"
"#,
    )
    .await;
    for (repo, vis) in [
        ("octo/private-src", "private"),
        ("octo/public-src", "public"),
        ("octo/public-two", "public"),
    ] {
        let id = f.fake.add_repo(repo, &f.git, vis, true);
        f.fake.add_run(repo, 77, 1, run(id, &f.after));
    }
    f.fake.add_repo("octo/public-wiki", &f.git, "public", true);
    f.fake
        .add_repo("octo/private-wiki", &f.git, "internal", true);
    assert_eq!(
        code(f.send(&f.range("octo/private-src")).await),
        (409, "audience_mismatch")
    );
    assert_eq!(
        code(f.send(&f.range("octo/public-two")).await),
        (409, "audience_mismatch")
    );
    let v = f.send(&f.range("octo/public-src")).await.unwrap();
    assert_eq!(v.destination, "github:octo/public-wiki.wiki");
}

// --- OIDC ----------------------------------------------------------------------------

#[tokio::test]
async fn a_valid_oidc_token_is_accepted_and_required() {
    let f = Fixture::new().await;
    let token = f.fake.mint_oidc(OIDC_KID_1, &f.claims());
    f.send_with(&f.range("octo/oidc"), Some(&token))
        .await
        .unwrap();
    assert_eq!(
        code(f.send(&f.range("octo/oidc")).await),
        (401, "oidc_missing")
    );
}

#[tokio::test]
async fn each_wrong_oidc_claim_is_refused() {
    let f = Fixture::new().await;
    let cases: Vec<(&str, Value, &str)> = vec![
        ("iss", json!("https://evil.example"), "oidc_issuer"),
        ("aud", json!("https://other.example"), "oidc_audience"),
        ("repository", json!("octo/app"), "oidc_claim_mismatch"),
        ("repository_id", json!("31337"), "oidc_claim_mismatch"),
        ("run_id", json!("78"), "oidc_claim_mismatch"),
        ("run_attempt", json!("2"), "oidc_claim_mismatch"),
        ("sha", json!(f.before), "oidc_claim_mismatch"),
        (
            "event_name",
            json!("workflow_dispatch"),
            "oidc_claim_mismatch",
        ),
        (
            "workflow_ref",
            json!("octo/oidc/.github/workflows/other.yml@refs/heads/main"),
            "oidc_claim_mismatch",
        ),
        (
            "workflow_ref",
            json!(format!("octo/app/{WORKFLOW}@refs/heads/main")),
            "oidc_claim_mismatch",
        ),
        ("exp", json!(teammem_now() - 3600), "oidc_expired"),
        ("nbf", json!(teammem_now() + 3600), "oidc_not_yet_valid"),
    ];
    for (claim, value, expected) in cases {
        let mut claims = f.claims();
        claims[claim] = value.clone();
        let token = f.fake.mint_oidc(OIDC_KID_1, &claims);
        assert_eq!(
            code(f.send_with(&f.range("octo/oidc"), Some(&token)).await),
            (401, expected),
            "{claim} = {value}"
        );
    }
    // A claim missing altogether.
    let mut claims = f.claims();
    claims.as_object_mut().unwrap().remove("run_id");
    let token = f.fake.mint_oidc(OIDC_KID_1, &claims);
    assert_eq!(
        code(f.send_with(&f.range("octo/oidc"), Some(&token)).await),
        (401, "oidc_invalid")
    );
    // A token signed by a key that does not match its kid.
    let good = f.fake.mint_oidc(OIDC_KID_1, &f.claims());
    let other = f.fake.mint_oidc(OIDC_KID_2, &f.claims());
    let forged = format!(
        "{}.{}",
        good.rsplit_once('.').unwrap().0,
        other.rsplit_once('.').unwrap().1
    );
    assert_eq!(
        code(f.send_with(&f.range("octo/oidc"), Some(&forged)).await),
        (401, "oidc_invalid")
    );
    assert_eq!(
        code(f.send_with(&f.range("octo/oidc"), Some("not.a.jwt")).await),
        (401, "oidc_invalid")
    );
}

fn teammem_now() -> u64 {
    crate::harness::fake_github::now()
}

#[tokio::test]
async fn an_unknown_kid_refetches_once_then_refuses() {
    let f = Fixture::new().await;
    // Zero refetch spacing so rotation is visible; the spacing itself is tested below.
    let ingest = ingest_for(&f.config, f.forge.clone(), Duration::ZERO);
    let send = |token: String| {
        let raw = serde_json::to_vec(&f.range("octo/oidc")).unwrap();
        let sig = signature::sign(SECRET, &raw);
        let ingest = &ingest;
        async move {
            let auth = format!("Bearer {token}");
            let h = DispatchHeaders {
                content_type: Some("application/json"),
                signature: Some(&sig),
                delivery: Some("d-1"),
                authorization: Some(&auth),
            };
            ingest.ingest(&h, &raw).await
        }
    };
    send(f.fake.mint_oidc(OIDC_KID_1, &f.claims()))
        .await
        .unwrap();
    assert_eq!(f.fake.jwks_fetches(), 1);
    // Cached: no new fetch.
    send(f.fake.mint_oidc(OIDC_KID_1, &f.claims()))
        .await
        .unwrap();
    assert_eq!(f.fake.jwks_fetches(), 1);
    // Rotation: kid two appears in the JWKS; the unknown kid triggers one refetch.
    f.fake.publish_oidc_key(OIDC_KID_2, true);
    send(f.fake.mint_oidc(OIDC_KID_2, &f.claims()))
        .await
        .unwrap();
    assert_eq!(f.fake.jwks_fetches(), 2);
    // Never published: one refetch, then refused.
    let e = send(f.fake.mint_oidc(OIDC_KID_UNPUBLISHED, &f.claims()))
        .await
        .unwrap_err();
    assert_eq!((status_of(&e), e.code), (401, "oidc_unknown_key"));
    assert_eq!(f.fake.jwks_fetches(), 3);

    // With the default spacing, forged kids cannot make the daemon hammer the issuer.
    let before = f.fake.jwks_fetches();
    for _ in 0..3 {
        let e = f
            .send_with(
                &f.range("octo/oidc"),
                Some(&f.fake.mint_oidc(OIDC_KID_UNPUBLISHED, &f.claims())),
            )
            .await
            .unwrap_err();
        assert_eq!(e.code, "oidc_unknown_key");
    }
    assert_eq!(f.fake.jwks_fetches(), before + 1);
}

/// While one verification waits on a JWKS fetch that hangs (a token with a
/// key id not yet cached), a token signed with a cached key verifies at once.
#[tokio::test]
async fn a_hanging_jwks_fetch_holds_up_only_the_verification_that_needs_it() {
    use crate::harness::fake_github::{FakeGitHub, Fault, OIDC_KID_1, OIDC_KID_2};
    let fake = FakeGitHub::start().await;
    let verifier = Arc::new(OidcVerifier::new(&fake.url).with_refetch_interval(Duration::ZERO));
    let claims = fake.actions_claims(
        AUDIENCE,
        "octo/oidc",
        1,
        (5, 1),
        &"a".repeat(40),
        "push",
        ".github/workflows/team-memory-post-merge.yml",
    );
    let known = fake.mint_oidc(OIDC_KID_1, &claims);
    verifier.verify_token(&known, AUDIENCE).await.unwrap();
    assert_eq!(fake.jwks_fetches(), 1);

    fake.inject("/.well-known/jwks", Fault::Hang);
    let unknown = fake.mint_oidc(OIDC_KID_2, &claims);
    let slow = tokio::spawn({
        let verifier = verifier.clone();
        async move { verifier.verify_token(&unknown, AUDIENCE).await }
    });
    fake.hung().await;
    tokio::time::timeout(
        Duration::from_secs(5),
        verifier.verify_token(&known, AUDIENCE),
    )
    .await
    .expect("a cached key does not wait on the hanging fetch")
    .unwrap();
    slow.abort();

    // iat: a token issued in the future or long ago is refused by name.
    let now = crate::harness::fake_github::now();
    for (iat, exp) in [(now + 600, now + 900), (now - 7200, now + 60)] {
        let mut claims = claims.clone();
        claims["iat"] = json!(iat);
        claims["nbf"] = json!(now - 5);
        claims["exp"] = json!(exp);
        let token = fake.mint_oidc(OIDC_KID_1, &claims);
        let err = verifier.verify_token(&token, AUDIENCE).await.unwrap_err();
        assert_eq!(
            (status_of(&err), err.code),
            (401, "oidc_issued_at"),
            "{}",
            err.message
        );
    }
}

/// The status a refusal is answered with, through the one error→HTTP mapping.
fn status_of(e: &teammem::ingest::IngestError) -> u16 {
    teammem::http::ApiError::from(e.clone()).status.as_u16()
}
