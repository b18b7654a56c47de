//! A stateful fake of GitHub's REST API on loopback (axum), backed by real git
//! repositories the test builds with the `git` CLI: compare/ancestry answers come
//! from the real commit graph (`git merge-base --is-ancestor`, `git rev-list
//! --count`). It also serves the Actions OIDC issuer (JWKS) and mints OIDC tokens.
//!
//! Invariants: App endpoints verify the JWT with the test App's public key;
//! every REST read requires an installation token the fake minted, for that
//! repository and with the permission the endpoint needs; every token request is
//! recorded so tests can check what was asked for. Faults (5xx, 429 +
//! Retry-After, rate-limit exhaustion, hanging answers) are injected per path.
//! The evidence endpoints (compare with paged commits, a commit, a pull
//! request's paged files with patches, the closed pull requests of a base
//! branch sorted and paged with `Link` headers, file contents — a directory
//! answers with its entries, as GitHub does) and a branch's
//! ref read the same git repositories; a merged pull request's `merged_at` is
//! its merge commit's committer date, as when GitHub makes that commit. And
//! [`FakeGitHub::wiki_access`] lets the smart-HTTP test server accept exactly
//! the installation tokens this fake minted for a wiki.

#![allow(dead_code, clippy::result_large_err)]

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::encoding::AsDer;
use axum::Router;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::git::{git_command, git_output, git_with_env};

/// The date every commit of a [`GitRepo`] gets unless a test names another.
const FIXED_DATE: &str = "2026-01-01T00:00:00Z";

/// Test keys are generated once per test process (RSA generation is slow in
/// debug builds): the App key, three OIDC keys, and a spare "wrong" key.
fn keys() -> &'static [(String, EncodingKey)] {
    static KEYS: std::sync::OnceLock<Vec<(String, EncodingKey)>> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| (0..5).map(|_| generate_rsa_key()).collect())
}

/// A 2048-bit RSA key that is not the App's nor an OIDC key: (PEM, encoding key).
pub fn rsa_key() -> (String, EncodingKey) {
    keys()[4].clone()
}

fn generate_rsa_key() -> (String, EncodingKey) {
    let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    let der = AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&pair).unwrap();
    let der = der.as_ref();
    let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, der);
    let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(chunk).unwrap());
        pem.push('\n');
    }
    pem.push_str("-----END PRIVATE KEY-----\n");
    let key = EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap();
    (pem, key)
}

fn public_jwk(key: &EncodingKey, kid: &str) -> Jwk {
    let mut jwk = Jwk::from_encoding_key(key, Algorithm::RS256).unwrap();
    jwk.common.key_id = Some(kid.to_string());
    jwk
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

// --- git ---------------------------------------------------------------------------

/// A real git repository built with the `git` CLI (non-bare, branch `main`).
#[derive(Debug, Clone)]
pub struct GitRepo {
    pub dir: PathBuf,
}

impl GitRepo {
    pub fn init(dir: &Path) -> GitRepo {
        std::fs::create_dir_all(dir).unwrap();
        let r = GitRepo {
            dir: dir.to_path_buf(),
        };
        r.git(&["init", "-q", "-b", "main"]);
        r.git(&["config", "user.name", "Test"]);
        r.git(&["config", "user.email", "test@example.org"]);
        r.git(&["config", "commit.gpgsign", "false"]);
        r
    }

    /// git in this repository as `Test`, at a fixed date; trimmed stdout.
    pub fn git(&self, args: &[&str]) -> String {
        self.git_at(FIXED_DATE, args)
    }

    /// git in this repository as `Test`, authored and committed at `date`.
    fn git_at(&self, date: &str, args: &[&str]) -> String {
        let env = [
            ("GIT_AUTHOR_NAME", "Test"),
            ("GIT_AUTHOR_EMAIL", "test@example.org"),
            ("GIT_COMMITTER_NAME", "Test"),
            ("GIT_COMMITTER_EMAIL", "test@example.org"),
            ("GIT_AUTHOR_DATE", date),
            ("GIT_COMMITTER_DATE", date),
        ];
        git_with_env(&self.dir, &env, args).trim().to_string()
    }

    fn git_ok(&self, args: &[&str]) -> bool {
        git_output(&self.dir, args).status.success()
    }

    /// Like [`GitRepo::commit`], authored and committed at `date` (RFC 3339)
    /// on whatever branch is checked out.
    pub fn commit_dated(&self, file: &str, subject: &str, date: &str) -> String {
        let path = self.dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push_str(subject);
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        self.git(&["add", "-A"]);
        self.git_at(date, &["commit", "-q", "-m", subject]);
        self.head()
    }

    /// The committer date of `sha` as GitHub writes times (`...Z`), if `sha`
    /// is a commit here.
    fn committed_at(&self, sha: &str) -> Option<String> {
        let sha = self.resolve(sha)?;
        let seconds: i64 = self
            .git(&["show", "-s", "--format=%ct", &sha])
            .parse()
            .ok()?;
        chrono::DateTime::from_timestamp(seconds, 0)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    }

    /// Commits a change to `file` with `subject`; returns the new SHA.
    pub fn commit(&self, file: &str, subject: &str) -> String {
        let path = self.dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push_str(subject);
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", subject]);
        self.head()
    }

    /// `n` commits in a row; returns their SHAs (oldest first).
    pub fn commits(&self, n: usize, prefix: &str) -> Vec<String> {
        (0..n)
            .map(|i| self.commit("log.txt", &format!("{prefix} {i}")))
            .collect()
    }

    /// `n` commits on top of `HEAD` in one `git fast-import` run (fast for
    /// thousands); returns the new tip.
    pub fn fast_commits(&self, n: usize) -> String {
        use std::io::Write;
        let parent = self.head();
        let mut stream = String::new();
        for i in 0..n {
            let msg = format!("bulk {i}");
            stream.push_str(&format!(
                "commit refs/heads/main\ncommitter Test <test@example.org> 1767225600 +0000\ndata {}\n{msg}\n",
                msg.len()
            ));
            if i == 0 {
                stream.push_str(&format!("from {parent}\n"));
            }
            let content = format!("{i}\n");
            stream.push_str(&format!(
                "M 100644 inline bulk.txt\ndata {}\n{content}\n",
                content.len()
            ));
        }
        let mut child = git_command(&self.dir)
            .args(["fast-import", "--quiet", "--force"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stream.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
        self.git(&["reset", "-q", "--hard", "main"]);
        self.head()
    }

    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    /// Moves `main` to `sha` (a force-push).
    pub fn reset_main(&self, sha: &str) {
        self.git(&["reset", "-q", "--hard", sha]);
    }

    fn resolve(&self, rev: &str) -> Option<String> {
        let out = git_output(
            &self.dir,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{rev}^{{commit}}"),
            ],
        );
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn is_ancestor(&self, a: &str, b: &str) -> bool {
        self.git_ok(&["merge-base", "--is-ancestor", a, b])
    }

    /// Commits as GitHub's commit objects, oldest first (`args` select them,
    /// e.g. `["b..h"]` or `["-1", sha]`).
    fn commit_objects(&self, args: &[&str], full: &str, base_url: &str) -> Vec<Value> {
        let mut cmd = vec![
            "log",
            "--reverse",
            "--format=%H%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%T%x00%B%x1e",
        ];
        cmd.extend_from_slice(args);
        let out = self.git(&cmd);
        out.split('\x1e')
            .map(|record| record.trim_start_matches('\n'))
            .filter(|record| !record.is_empty())
            .map(|record| {
                let f: Vec<&str> = record.splitn(10, '\0').collect();
                let parents: Vec<Value> = f[1]
                    .split_whitespace()
                    .map(|p| json!({
                        "sha": p,
                        "url": format!("{base_url}/repos/{full}/commits/{p}"),
                        "html_url": format!("https://github.example/{full}/commit/{p}"),
                    }))
                    .collect();
                json!({
                    "sha": f[0],
                    "node_id": format!("C_{}", f[0]),
                    "url": format!("{base_url}/repos/{full}/commits/{}", f[0]),
                    "html_url": format!("https://github.example/{full}/commit/{}", f[0]),
                    "comments_url": format!("{base_url}/repos/{full}/commits/{}/comments", f[0]),
                    "commit": {
                        "url": format!("{base_url}/repos/{full}/git/commits/{}", f[0]),
                        "author": {"name": f[2], "email": f[3], "date": f[4]},
                        "committer": {"name": f[5], "email": f[6], "date": f[7]},
                        "message": f[9].trim_end(),
                        "tree": {"sha": f[8], "url": format!("{base_url}/repos/{full}/git/trees/{}", f[8])},
                        "comment_count": 0,
                        "verification": {"verified": false, "reason": "unsigned", "signature": null, "payload": null, "verified_at": null},
                    },
                    "author": null,
                    "committer": null,
                    "parents": parents,
                })
            })
            .collect()
    }

    /// The files a merge (or squash) commit changed against its first parent,
    /// as `GET /pulls/{n}/files` lists them (sorted by path, with patches).
    fn changed_files(&self, merge: &str) -> Vec<Value> {
        let parent = format!("{merge}^1");
        let numstat = self.git(&["diff", "--no-renames", "--numstat", &parent, merge]);
        let status = self.git(&["diff", "--no-renames", "--name-status", &parent, merge]);
        let mut files = Vec::new();
        for (counts, kind) in numstat.lines().zip(status.lines()) {
            let mut c = counts.split('\t');
            let (add, del, path) = (c.next().unwrap(), c.next().unwrap(), c.next().unwrap());
            let (additions, deletions) = (
                add.parse::<u64>().unwrap_or(0),
                del.parse::<u64>().unwrap_or(0),
            );
            let status = match kind.chars().next() {
                Some('A') => "added",
                Some('D') => "removed",
                _ => "modified",
            };
            let diff = self.git(&["diff", "--no-renames", &parent, merge, "--", path]);
            let patch = diff.find("@@").map(|at| diff[at..].to_string());
            files.push(json!({
                "sha": "0000000000000000000000000000000000000000",
                "filename": path,
                "status": status,
                "additions": additions,
                "deletions": deletions,
                "changes": additions + deletions,
                "blob_url": format!("https://github.example/blob/{merge}/{path}"),
                "raw_url": format!("https://github.example/raw/{merge}/{path}"),
                "contents_url": format!("https://api.github.example/contents/{path}?ref={merge}"),
                "patch": patch,
            }));
        }
        files.sort_by(|a, b| a["filename"].as_str().cmp(&b["filename"].as_str()));
        files
    }

    fn count(&self, range: &str) -> u64 {
        self.git(&["rev-list", "--count", range]).parse().unwrap()
    }
}

// --- state -------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct FakeRepo {
    pub id: u64,
    pub full_name: String,
    pub default_branch: String,
    pub visibility: String,
    pub git: GitRepo,
    pub installation: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct FakeRun {
    pub repository_id: u64,
    pub event: String,
    pub path: String,
    pub head_branch: String,
    pub head_sha: String,
}

#[derive(Debug, Clone)]
pub struct FakePull {
    pub merged: bool,
    pub base_ref: String,
    pub merge_commit_sha: Option<String>,
    pub title: String,
}

/// What a pull request says beyond [`FakePull`] (defaults: author `octocat`,
/// empty body, no labels).
#[derive(Debug, Clone, Default)]
pub struct PullDetails {
    pub author: String,
    pub body: String,
    pub labels: Vec<String>,
}

/// One token request as the fake received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mint {
    /// The token's value (the fake's own; tests look for it in leaks).
    pub token: String,
    pub installation: u64,
    pub repositories: Vec<String>,
    pub permissions: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
struct Grant {
    owner: String,
    repositories: Vec<String>,
    permissions: HashMap<String, String>,
}

#[derive(Debug, Clone)]
pub enum Fault {
    /// Answer with this status (5xx, 403, ...).
    Status(u16),
    /// 503 with `Retry-After: secs`.
    Unavailable { retry_after: u64 },
    /// 429 with `Retry-After: secs`.
    TooManyRequests { retry_after: u64 },
    /// 403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset: now + secs`.
    RateLimitExhausted { reset_in: u64 },
    /// Never answer (until the fake is dropped); `hung` counts these.
    Hang,
}

#[derive(Default)]
struct StateInner {
    /// Every use of a bearer token: `(token, "METHOD /path")` on the API,
    /// `(token, "git read|write /path")` on the wiki's git routes.
    token_uses: Vec<(String, String)>,
    repos: HashMap<String, FakeRepo>,
    runs: HashMap<(String, u64, u64), FakeRun>,
    pulls: HashMap<(String, u64), FakePull>,
    pull_details: HashMap<(String, u64), PullDetails>,
    /// Permissions (name, access) the installation was not granted: a token
    /// request asking for one is refused with 422, as GitHub does.
    withheld: Vec<(String, String)>,
    grants: HashMap<String, Grant>,
    mints: Vec<Mint>,
    /// Tokens revoked with `DELETE /installation/token`, in order; refused
    /// on every API and git route afterwards.
    revoked: Vec<String>,
    /// (path part, whole path only?, fault).
    faults: VecDeque<(String, bool, Fault)>,
    /// `updated_at` of pull requests updated after they merged (comments, labels).
    pull_updated: HashMap<(String, u64), String>,
    requests: Vec<String>,
    /// Like `requests`, with the query string.
    targets: Vec<String>,
    jwks_fetches: usize,
    published_kids: Vec<String>,
    next_id: u64,
    /// Personal tokens → (login, account type), for `GET /user`.
    users: HashMap<String, (String, String)>,
    /// (repo lowercase, login) → (permission, role_name).
    roles: HashMap<(String, String), (String, String)>,
}

struct Shared {
    app_id: u64,
    app_key: DecodingKey,
    oidc_keys: HashMap<String, EncodingKey>,
    inner: Mutex<StateInner>,
    hung: Notify,
    never: Notify,
}

type AppState = Arc<Shared>;

/// The fake, serving on `url` until dropped.
pub struct FakeGitHub {
    pub url: String,
    pub addr: SocketAddr,
    pub app_id: u64,
    /// The test App's private key (PEM), for the daemon's key file.
    pub app_key_pem: String,
    shared: AppState,
    _server: tokio::task::JoinHandle<()>,
}

/// Key ids the fake can sign OIDC tokens with; only `published` ones are in the JWKS.
pub const OIDC_KID_1: &str = "kid-one";
pub const OIDC_KID_2: &str = "kid-two";
pub const OIDC_KID_UNPUBLISHED: &str = "kid-never";

impl FakeGitHub {
    pub async fn start() -> FakeGitHub {
        let app_id = 4242;
        let (app_key_pem, app_enc) = keys()[0].clone();
        let app_key = DecodingKey::from_jwk(&public_jwk(&app_enc, "app")).unwrap();
        let mut oidc_keys = HashMap::new();
        for (i, kid) in [OIDC_KID_1, OIDC_KID_2, OIDC_KID_UNPUBLISHED]
            .into_iter()
            .enumerate()
        {
            oidc_keys.insert(kid.to_string(), keys()[1 + i].1.clone());
        }
        let shared = Arc::new(Shared {
            app_id,
            app_key,
            oidc_keys,
            inner: Mutex::new(StateInner {
                next_id: 1000,
                published_kids: vec![OIDC_KID_1.to_string()],
                ..Default::default()
            }),
            hung: Notify::new(),
            never: Notify::new(),
        });
        let app = Router::new()
            .route("/repos/{owner}/{repo}", get(repo))
            .route("/repos/{owner}/{repo}/installation", get(installation))
            .route(
                "/repos/{owner}/{repo}/actions/runs/{run}/attempts/{attempt}",
                get(run_attempt),
            )
            .route("/repos/{owner}/{repo}/compare/{basehead}", get(compare))
            .route("/repos/{owner}/{repo}/pulls", get(list_pulls))
            .route("/repos/{owner}/{repo}/pulls/{number}", get(pull))
            .route(
                "/repos/{owner}/{repo}/pulls/{number}/files",
                get(pull_files),
            )
            .route("/repos/{owner}/{repo}/commits/{sha}", get(single_commit))
            .route(
                "/repos/{owner}/{repo}/git/ref/heads/{*branch}",
                get(branch_ref),
            )
            .route("/repos/{owner}/{repo}/contents/{*path}", get(contents))
            .route(
                "/repos/{owner}/{repo}/commits/{sha}/pulls",
                get(commit_pulls),
            )
            .route("/user", get(user))
            .route(
                "/repos/{owner}/{repo}/collaborators/{login}/permission",
                get(collaborator_permission),
            )
            .route("/app/installations/{id}/access_tokens", post(access_token))
            .route("/installation/token", axum::routing::delete(revoke_token))
            .route("/.well-known/jwks", get(jwks))
            .layer(middleware::from_fn_with_state(shared.clone(), faults))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeGitHub {
            url: format!("http://{addr}"),
            addr,
            app_id,
            app_key_pem,
            shared,
            _server: server,
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, StateInner> {
        self.shared.inner.lock().unwrap()
    }

    /// Registers `owner/name` backed by `git`; returns its numeric id. The App is
    /// installed on it unless `installed` is false.
    pub fn add_repo(
        &self,
        full_name: &str,
        git: &GitRepo,
        visibility: &str,
        installed: bool,
    ) -> u64 {
        let mut s = self.inner();
        s.next_id += 1;
        let id = s.next_id;
        let installation = installed.then(|| 7_000 + id);
        s.repos.insert(
            full_name.to_ascii_lowercase(),
            FakeRepo {
                id,
                full_name: full_name.to_string(),
                default_branch: "main".into(),
                visibility: visibility.into(),
                git: git.clone(),
                installation,
            },
        );
        id
    }

    pub fn add_run(&self, full_name: &str, run_id: u64, attempt: u64, run: FakeRun) {
        self.inner()
            .runs
            .insert((full_name.to_ascii_lowercase(), run_id, attempt), run);
    }

    pub fn add_pull(&self, full_name: &str, number: u64, pull: FakePull) {
        self.inner()
            .pulls
            .insert((full_name.to_ascii_lowercase(), number), pull);
    }

    /// The installation lacks `permission: access` (e.g. `contents: write`).
    pub fn withhold_permission(&self, permission: &str, access: &str) {
        self.inner()
            .withheld
            .push((permission.to_string(), access.to_string()));
    }

    /// Author, body and labels of pull request `number`.
    pub fn set_pull_details(&self, full_name: &str, number: u64, details: PullDetails) {
        self.inner()
            .pull_details
            .insert((full_name.to_ascii_lowercase(), number), details);
    }

    /// A check for the smart-HTTP test server: `token` is an installation token
    /// this fake minted for the wiki's repository (`/{owner}/{name}.wiki.git/...`),
    /// with `contents: write` for a push and `contents` at all for a read.
    pub fn wiki_access(&self) -> crate::harness::git_http::TokenCheck {
        let shared = self.shared.clone();
        Arc::new(move |token: &str, path: &str, write: bool| {
            let mut inner = shared.inner.lock().unwrap();
            let kind = if write { "write" } else { "read" };
            inner
                .token_uses
                .push((token.to_owned(), format!("git {kind} {path}")));
            if inner.revoked.iter().any(|t| t == token) {
                return false;
            }
            let Some(grant) = inner.grants.get(token) else {
                return false;
            };
            let mut parts = path.trim_start_matches('/').splitn(3, '/');
            let (Some(owner), Some(wiki)) = (parts.next(), parts.next()) else {
                return false;
            };
            let Some(name) = wiki.strip_suffix(".wiki.git") else {
                return false;
            };
            let access = grant.permissions.get("contents").map(String::as_str);
            grant.owner.eq_ignore_ascii_case(owner)
                && grant
                    .repositories
                    .iter()
                    .any(|r| r.eq_ignore_ascii_case(name))
                && if write {
                    access == Some("write")
                } else {
                    access.is_some()
                }
        })
    }

    /// A personal token owned by `login` (`kind`: `User` or `Bot`).
    pub fn add_user(&self, token: &str, login: &str, kind: &str) {
        self.inner()
            .users
            .insert(token.to_string(), (login.to_string(), kind.to_string()));
    }

    /// `login`'s role on `full_name` (`permission`: admin|write|read|none).
    pub fn set_role(&self, full_name: &str, login: &str, permission: &str, role_name: &str) {
        self.inner().roles.insert(
            (full_name.to_ascii_lowercase(), login.to_ascii_lowercase()),
            (permission.to_string(), role_name.to_string()),
        );
    }

    /// The next request whose path contains `path_part` gets `fault`.
    pub fn inject(&self, path_part: &str, fault: Fault) {
        self.inner()
            .faults
            .push_back((path_part.to_string(), false, fault));
    }

    /// The next request for exactly `path` (no query) gets `fault`.
    pub fn inject_exact(&self, path: &str, fault: Fault) {
        self.inner()
            .faults
            .push_back((path.to_string(), true, fault));
    }

    /// Pull request `number` was last updated at `rfc3339` (a comment after
    /// the merge, say), not when it merged.
    pub fn set_pull_updated_at(&self, full_name: &str, number: u64, rfc3339: &str) {
        self.inner().pull_updated.insert(
            (full_name.to_ascii_lowercase(), number),
            rfc3339.to_string(),
        );
    }

    /// "Rebase and merge" of pull request `number` (titled `title`) into
    /// `full_name`'s `main`: one commit per `(path, subject)` on top of
    /// `main`, dated now, with the subjects as given (GitHub adds no `#N`),
    /// and the pull request merged with `merge_commit_sha` = the last of them.
    /// Returns the new commits, oldest first.
    pub fn rebase_merge(
        &self,
        full_name: &str,
        number: u64,
        title: &str,
        changes: &[(&str, &str)],
    ) -> Vec<String> {
        let git = self.inner().repos[&full_name.to_ascii_lowercase()]
            .git
            .clone();
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let shas: Vec<String> = changes
            .iter()
            .map(|(path, subject)| git.commit_dated(path, subject, &now))
            .collect();
        self.add_pull(
            full_name,
            number,
            FakePull {
                merged: true,
                base_ref: "main".into(),
                merge_commit_sha: shas.last().cloned(),
                title: title.into(),
            },
        );
        shas
    }

    /// Makes `full_name` `public`, `private` or `internal` from now on (a
    /// repository's visibility changed while a job was queued).
    pub fn set_visibility(&self, full_name: &str, visibility: &str) {
        self.inner()
            .repos
            .get_mut(&full_name.to_ascii_lowercase())
            .expect("a repository added with add_repo")
            .visibility = visibility.to_string();
    }

    /// Grants again every permission [`FakeGitHub::withhold_permission`] withheld.
    pub fn grant_all_permissions(&self) {
        self.inner().withheld.clear();
    }

    /// Every use of `token` seen so far, in order: `METHOD /path` on the API,
    /// `git read|write /path` on the wiki's git routes.
    pub fn uses_of(&self, token: &str) -> Vec<String> {
        self.inner()
            .token_uses
            .iter()
            .filter(|(t, _)| t == token)
            .map(|(_, what)| what.clone())
            .collect()
    }

    /// Every token revoked with `DELETE /installation/token`, in order.
    pub fn revoked_tokens(&self) -> Vec<String> {
        self.inner().revoked.clone()
    }

    /// The minted tokens with `contents: write` on `repository` (`owner/name`
    /// or `name`: the token request lists names without owner).
    pub fn write_mints_for(&self, repository: &str) -> Vec<Mint> {
        let repository = repository
            .split_once('/')
            .map_or(repository, |(_, name)| name);
        self.mints()
            .into_iter()
            .filter(|m| {
                m.repositories
                    .iter()
                    .any(|r| r.eq_ignore_ascii_case(repository))
                    && m.permissions
                        .iter()
                        .any(|(p, a)| p == "contents" && a == "write")
            })
            .collect()
    }

    pub fn mints(&self) -> Vec<Mint> {
        self.inner().mints.clone()
    }

    /// Every installation token minted so far (to prove none leaks).
    pub fn minted_tokens(&self) -> Vec<String> {
        self.inner().grants.keys().cloned().collect()
    }

    /// Every request as `METHOD /path` (no query), in order.
    pub fn requests(&self) -> Vec<String> {
        self.inner().requests.clone()
    }

    /// Every request as `METHOD /path?query`, in order.
    pub fn requests_with_query(&self) -> Vec<String> {
        self.inner().targets.clone()
    }

    pub fn jwks_fetches(&self) -> usize {
        self.inner().jwks_fetches
    }

    /// Publishes (or withdraws) an OIDC key in the JWKS.
    pub fn publish_oidc_key(&self, kid: &str, published: bool) {
        let mut s = self.inner();
        s.published_kids.retain(|k| k != kid);
        if published {
            s.published_kids.push(kid.to_string());
        }
    }

    /// Waits until a request is hanging on a `Fault::Hang`.
    pub async fn hung(&self) {
        self.shared.hung.notified().await;
    }

    /// Signs `claims` as the OIDC issuer with key `kid`.
    pub fn mint_oidc(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(kid.to_string());
        jsonwebtoken::encode(&header, claims, &self.shared.oidc_keys[kid]).unwrap()
    }

    /// Valid Actions claims for `repo` (id `repository_id`), run, sha, event, workflow.
    #[allow(clippy::too_many_arguments)]
    pub fn actions_claims(
        &self,
        audience: &str,
        repo: &str,
        repository_id: u64,
        run: (u64, u64),
        sha: &str,
        event: &str,
        workflow: &str,
    ) -> Value {
        let now = now();
        json!({
            "iss": self.url,
            "aud": audience,
            "sub": format!("repo:{repo}:ref:refs/heads/main"),
            "iat": now - 5,
            "nbf": now - 5,
            "exp": now + 300,
            "repository": repo,
            "repository_id": repository_id.to_string(),
            "repository_owner": repo.split('/').next().unwrap(),
            "run_id": run.0.to_string(),
            "run_attempt": run.1.to_string(),
            "sha": sha,
            "ref": "refs/heads/main",
            "event_name": event,
            "workflow_ref": format!("{repo}/{workflow}@refs/heads/main"),
            "job_workflow_ref": format!("{repo}/{workflow}@refs/heads/main"),
        })
    }
}

// --- handlers ----------------------------------------------------------------------

fn error(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({
            "message": message,
            "documentation_url": "https://docs.github.com/rest",
            "status": status.as_u16().to_string(),
        })),
    )
        .into_response()
}

async fn faults(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let fault = {
        let mut inner = s.inner.lock().unwrap();
        inner.requests.push(format!("{} {}", req.method(), path));
        if let Some(token) = bearer(req.headers()) {
            inner
                .token_uses
                .push((token, format!("{} {}", req.method(), path)));
        }
        let target = req
            .uri()
            .path_and_query()
            .map(|pq| pq.as_str())
            .unwrap_or(&path);
        inner.targets.push(format!("{} {target}", req.method()));
        let pos = inner.faults.iter().position(|(p, exact, _)| {
            if *exact {
                path == *p
            } else {
                path.contains(p.as_str())
            }
        });
        pos.and_then(|i| inner.faults.remove(i)).map(|(_, _, f)| f)
    };
    match fault {
        None => next.run(req).await,
        Some(Fault::Status(code)) => error(StatusCode::from_u16(code).unwrap(), "injected fault"),
        Some(Fault::Unavailable { retry_after }) => {
            let mut r = error(
                StatusCode::SERVICE_UNAVAILABLE,
                "No server is currently available to service your request.",
            );
            r.headers_mut()
                .insert("retry-after", retry_after.to_string().parse().unwrap());
            r
        }
        Some(Fault::TooManyRequests { retry_after }) => {
            let mut r = error(StatusCode::TOO_MANY_REQUESTS, "secondary rate limit");
            r.headers_mut()
                .insert("retry-after", retry_after.to_string().parse().unwrap());
            r
        }
        Some(Fault::RateLimitExhausted { reset_in }) => {
            let mut r = error(StatusCode::FORBIDDEN, "API rate limit exceeded");
            let h = r.headers_mut();
            h.insert("x-ratelimit-limit", "5000".parse().unwrap());
            h.insert("x-ratelimit-remaining", "0".parse().unwrap());
            h.insert(
                "x-ratelimit-reset",
                (now() + reset_in).to_string().parse().unwrap(),
            );
            r
        }
        Some(Fault::Hang) => {
            s.hung.notify_one();
            s.never.notified().await;
            error(StatusCode::INTERNAL_SERVER_ERROR, "unreachable")
        }
    }
}

/// The URL the client reached this fake at (for the URLs in its answers).
fn base_url(headers: &HeaderMap) -> String {
    let host = headers.get("host").and_then(|h| h.to_str().ok());
    format!("http://{}", host.unwrap_or("localhost"))
}

/// Pull-request reads must pin the API version, as the forge does.
fn require_pinned_version(headers: &HeaderMap) -> Result<(), Response> {
    let pinned = headers
        .get("x-github-api-version")
        .and_then(|v| v.to_str().ok());
    if pinned == Some("2022-11-28") {
        Ok(())
    } else {
        Err(error(
            StatusCode::BAD_REQUEST,
            "pin X-GitHub-Api-Version: 2022-11-28",
        ))
    }
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let v = headers.get("authorization")?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token"))
        .then(|| token.to_string())
}

/// Verifies the App JWT the way GitHub describes: RS256, `iss` = App id,
/// not expired, lifetime at most 10 minutes.
fn check_app_jwt(s: &Shared, headers: &HeaderMap) -> Result<(), Response> {
    let unauthorized = |m: &str| error(StatusCode::UNAUTHORIZED, m);
    let token =
        bearer(headers).ok_or_else(|| unauthorized("A JSON web token could not be decoded"))?;
    let mut v = Validation::new(Algorithm::RS256);
    v.set_required_spec_claims(&["exp", "iat", "iss"]);
    v.set_issuer(&[s.app_id.to_string()]);
    v.leeway = 0;
    let data = jsonwebtoken::decode::<Value>(&token, &s.app_key, &v)
        .map_err(|e| unauthorized(&format!("A JSON web token could not be decoded: {e}")))?;
    let iat = data.claims["iat"].as_u64().unwrap_or(0);
    let exp = data.claims["exp"].as_u64().unwrap_or(0);
    if iat > now() + 1 || exp <= iat || exp - iat > 660 || exp > now() + 600 {
        return Err(unauthorized(
            "'Expiration time' claim ('exp') is too far in the future",
        ));
    }
    Ok(())
}

/// Checks an installation token covers `repo` with `permission` (`None`:
/// metadata, which every token has).
fn check_token(
    s: &Shared,
    headers: &HeaderMap,
    repo: &str,
    permission: Option<&str>,
) -> Result<FakeRepo, Response> {
    let inner = s.inner.lock().unwrap();
    let Some(token) = bearer(headers) else {
        return Err(error(StatusCode::UNAUTHORIZED, "Requires authentication"));
    };
    let Some(grant) = inner
        .grants
        .get(&token)
        .filter(|_| !inner.revoked.contains(&token))
    else {
        return Err(error(StatusCode::UNAUTHORIZED, "Bad credentials"));
    };
    let Some(r) = inner.repos.get(&repo.to_ascii_lowercase()) else {
        return Err(error(StatusCode::NOT_FOUND, "Not Found"));
    };
    let (owner, name) = r.full_name.split_once('/').unwrap();
    if !grant.owner.eq_ignore_ascii_case(owner)
        || !grant
            .repositories
            .iter()
            .any(|g| g.eq_ignore_ascii_case(name))
    {
        return Err(error(StatusCode::NOT_FOUND, "Not Found"));
    }
    if let Some(p) = permission
        && !grant.permissions.contains_key(p)
    {
        return Err(error(
            StatusCode::FORBIDDEN,
            "Resource not accessible by integration",
        ));
    }
    Ok(r.clone())
}

fn repo_json(r: &FakeRepo, base: &str) -> Value {
    let (owner, name) = r.full_name.split_once('/').unwrap();
    json!({
        "id": r.id,
        "node_id": format!("R_{}", r.id),
        "name": name,
        "full_name": r.full_name,
        "private": r.visibility != "public",
        "owner": {
            "login": owner, "id": 1, "node_id": "U_1", "avatar_url": "https://avatars.example/u/1",
            "gravatar_id": "", "url": format!("{base}/users/{owner}"),
            "html_url": format!("https://github.example/{owner}"),
            "followers_url": format!("{base}/users/{owner}/followers"),
            "following_url": format!("{base}/users/{owner}/following{{/other_user}}"),
            "gists_url": format!("{base}/users/{owner}/gists{{/gist_id}}"),
            "starred_url": format!("{base}/users/{owner}/starred{{/owner}}{{/repo}}"),
            "subscriptions_url": format!("{base}/users/{owner}/subscriptions"),
            "organizations_url": format!("{base}/users/{owner}/orgs"),
            "repos_url": format!("{base}/users/{owner}/repos"),
            "events_url": format!("{base}/users/{owner}/events{{/privacy}}"),
            "received_events_url": format!("{base}/users/{owner}/received_events"),
            "type": "Organization", "site_admin": false
        },
        "html_url": format!("https://github.example/{}", r.full_name),
        "description": null,
        "fork": false,
        "url": format!("{base}/repos/{}", r.full_name),
        "default_branch": r.default_branch,
        "visibility": r.visibility,
        "archived": false,
        "disabled": false,
        "has_wiki": true,
    })
}

async fn repo(
    State(s): State<AppState>,
    UrlPath((owner, name)): UrlPath<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let base = format!(
        "http://{}",
        headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost")
    );
    match check_token(&s, &headers, &format!("{owner}/{name}"), None) {
        Ok(r) => axum::Json(repo_json(&r, &base)).into_response(),
        Err(e) => e,
    }
}

async fn installation(
    State(s): State<AppState>,
    UrlPath((owner, name)): UrlPath<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(e) = check_app_jwt(&s, &headers) {
        return e;
    }
    let inner = s.inner.lock().unwrap();
    match inner
        .repos
        .get(&format!("{owner}/{name}").to_ascii_lowercase())
        .and_then(|r| r.installation)
    {
        Some(id) => axum::Json(json!({
            "id": id,
            "account": {"login": owner, "id": 1, "type": "Organization"},
            "app_id": s.app_id,
            "target_type": "Organization",
            "repository_selection": "selected",
            "permissions": {"metadata": "read", "contents": "write", "actions": "read", "pull_requests": "read"},
            "events": [],
        }))
        .into_response(),
        None => error(StatusCode::NOT_FOUND, "Not Found"),
    }
}

async fn access_token(
    State(s): State<AppState>,
    UrlPath(id): UrlPath<u64>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(e) = check_app_jwt(&s, &headers) {
        return e;
    }
    let Ok(req) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "Invalid request");
    };
    let repositories: Vec<String> = req["repositories"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut permissions: Vec<(String, String)> = req["permissions"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    permissions.sort();
    let mut inner = s.inner.lock().unwrap();
    let covered: Vec<&FakeRepo> = inner
        .repos
        .values()
        .filter(|r| r.installation == Some(id))
        .collect();
    let Some(owner) = covered
        .first()
        .map(|r| r.full_name.split_once('/').unwrap().0.to_string())
    else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    for name in &repositories {
        if !covered.iter().any(|r| {
            r.full_name
                .split_once('/')
                .unwrap()
                .1
                .eq_ignore_ascii_case(name)
        }) {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "There is at least one repository that does not exist or is not accessible to the parent installation.",
            );
        }
    }
    if permissions.iter().any(|p| inner.withheld.contains(p)) {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "The permissions requested are not granted to this installation.",
        );
    }
    let n = inner.mints.len() + 1;
    let token = format!("ghs_fake{n:04}{}", uuid::Uuid::new_v4().simple());
    inner.mints.push(Mint {
        token: token.clone(),
        installation: id,
        repositories: repositories.clone(),
        permissions: permissions.clone(),
    });
    inner.grants.insert(
        token.clone(),
        Grant {
            owner,
            repositories: repositories.clone(),
            permissions: permissions.iter().cloned().collect(),
        },
    );
    let expires = chrono::Utc::now() + chrono::Duration::hours(1);
    (
        StatusCode::CREATED,
        axum::Json(json!({
            "token": token,
            "expires_at": expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "permissions": permissions
                .into_iter()
                .map(|(k, v)| (k, Value::from(v)))
                .collect::<serde_json::Map<_, _>>(),
            "repository_selection": "selected",
        })),
    )
        .into_response()
}

/// `DELETE /installation/token`: revokes the token it is authenticated
/// with (204); a token this fake never minted, or one already revoked, is 401.
async fn revoke_token(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let mut inner = s.inner.lock().unwrap();
    match bearer(&headers) {
        Some(token) if inner.grants.contains_key(&token) && !inner.revoked.contains(&token) => {
            inner.revoked.push(token);
            StatusCode::NO_CONTENT.into_response()
        }
        _ => error(StatusCode::UNAUTHORIZED, "Bad credentials"),
    }
}

async fn run_attempt(
    State(s): State<AppState>,
    UrlPath((owner, name, run, attempt)): UrlPath<(String, String, u64, u64)>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("actions")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let inner = s.inner.lock().unwrap();
    let Some(fr) = inner.runs.get(&(full.to_ascii_lowercase(), run, attempt)) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let base = format!(
        "http://{}",
        headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost")
    );
    let mut repository = repo_json(&r, &base);
    repository["id"] = json!(fr.repository_id);
    axum::Json(json!({
        "id": run,
        "name": "Team memory",
        "node_id": format!("WFR_{run}"),
        "head_branch": fr.head_branch,
        "head_sha": fr.head_sha,
        "path": fr.path,
        "display_title": "Team memory",
        "run_number": run,
        "run_attempt": attempt,
        "event": fr.event,
        "status": "in_progress",
        "conclusion": null,
        "workflow_id": 1,
        "url": format!("{base}/repos/{full}/actions/runs/{run}"),
        "html_url": format!("https://github.example/{full}/actions/runs/{run}"),
        "pull_requests": [],
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "run_started_at": "2026-01-01T00:00:00Z",
        "head_commit": {"id": fr.head_sha, "tree_id": fr.head_sha, "message": "x", "timestamp": "2026-01-01T00:00:00Z"},
        "repository": repository,
        "head_repository": repository,
    }))
    .into_response()
}

/// `?per_page=&page=` of the paged endpoints (GitHub's defaults: 30, 1; at most 100).
#[derive(serde::Deserialize)]
struct Paging {
    per_page: Option<usize>,
    page: Option<usize>,
}

impl Paging {
    fn slice<T: Clone>(&self, all: &[T], default_per_page: usize) -> Vec<T> {
        let per_page = self.per_page.unwrap_or(default_per_page).clamp(1, 100);
        let page = self.page.unwrap_or(1).max(1);
        all.iter()
            .skip((page - 1) * per_page)
            .take(per_page)
            .cloned()
            .collect()
    }
}

async fn compare(
    State(s): State<AppState>,
    UrlPath((owner, name, basehead)): UrlPath<(String, String, String)>,
    Query(paging): Query<Paging>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("contents")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let Some((base, head)) = basehead.split_once("...") else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let (Some(b), Some(h)) = (r.git.resolve(base), r.git.resolve(head)) else {
        return error(StatusCode::NOT_FOUND, "No commit found for SHA");
    };
    let (status, ahead, behind) = if b == h {
        ("identical", 0, 0)
    } else if r.git.is_ancestor(&b, &h) {
        ("ahead", r.git.count(&format!("{b}..{h}")), 0)
    } else if r.git.is_ancestor(&h, &b) {
        ("behind", 0, r.git.count(&format!("{h}..{b}")))
    } else {
        (
            "diverged",
            r.git.count(&format!("{b}..{h}")),
            r.git.count(&format!("{h}..{b}")),
        )
    };
    let base_url = base_url(&headers);
    axum::Json(json!({
        "url": format!("{base_url}/repos/{full}/compare/{basehead}"),
        "html_url": format!("https://github.example/{full}/compare/{basehead}"),
        "permalink_url": format!("https://github.example/{full}/compare/{b}...{h}"),
        "diff_url": format!("https://github.example/{full}/compare/{basehead}.diff"),
        "patch_url": format!("https://github.example/{full}/compare/{basehead}.patch"),
        "base_commit": {"sha": b},
        "merge_base_commit": {"sha": if status == "behind" { h.clone() } else { b.clone() }},
        "status": status,
        "ahead_by": ahead,
        "behind_by": behind,
        "total_commits": ahead,
        "commits": if ahead > 0 {
            // Unpaged, GitHub lists at most 250 commits.
            let all = r.git.commit_objects(&[&format!("{b}..{h}")], &full, &base_url);
            let default = if paging.per_page.is_none() && paging.page.is_none() { 250 } else { 30 };
            json!(paging.slice(&all, default))
        } else {
            json!([])
        },
        "files": [],
    }))
    .into_response()
}

fn user_json(login: &str, base: &str) -> Value {
    json!({
        "login": login, "id": 7, "node_id": "U_7", "avatar_url": "https://avatars.example/u/7",
        "gravatar_id": "", "url": format!("{base}/users/{login}"),
        "html_url": format!("https://github.example/{login}"),
        "followers_url": format!("{base}/users/{login}/followers"),
        "following_url": format!("{base}/users/{login}/following{{/other_user}}"),
        "gists_url": format!("{base}/users/{login}/gists{{/gist_id}}"),
        "starred_url": format!("{base}/users/{login}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{base}/users/{login}/subscriptions"),
        "organizations_url": format!("{base}/users/{login}/orgs"),
        "repos_url": format!("{base}/users/{login}/repos"),
        "events_url": format!("{base}/users/{login}/events{{/privacy}}"),
        "received_events_url": format!("{base}/users/{login}/received_events"),
        "type": "User", "site_admin": false
    })
}

fn pull_json_with(
    full: &str,
    number: u64,
    p: &FakePull,
    base_url: &str,
    times: &PullTimes,
    details: &PullDetails,
    changed_files: Option<usize>,
) -> Value {
    let mut v = pull_json(full, number, p, base_url, times);
    let author = if details.author.is_empty() {
        "octocat"
    } else {
        &details.author
    };
    v["user"] = user_json(author, base_url);
    v["body"] = json!(details.body);
    v["labels"] = details
        .labels
        .iter()
        .enumerate()
        .map(|(i, name)| {
            json!({
                "id": 100 + i, "node_id": format!("LA_{i}"),
                "url": format!("{base_url}/repos/{full}/labels/{name}"),
                "name": name, "color": "ededed", "default": false, "description": null,
            })
        })
        .collect();
    if let Some(n) = changed_files {
        v["changed_files"] = json!(n);
    }
    v
}

/// When a pull request merged and was last updated, as GitHub reports them.
struct PullTimes {
    merged_at: Option<String>,
    updated_at: String,
}

/// A merged pull request merged when its merge commit was made (and was
/// updated then, unless a later update was set); an open one is dated at the
/// fixed creation time. `dates` caches committer dates by sha for listings.
fn pull_times(
    inner: &StateInner,
    full: &str,
    number: u64,
    p: &FakePull,
    dates: &mut HashMap<String, Option<String>>,
) -> PullTimes {
    const CREATED: &str = "2026-01-01T00:00:00Z";
    let key = (full.to_ascii_lowercase(), number);
    let merged_at = match (&p.merge_commit_sha, inner.repos.get(&key.0)) {
        (Some(sha), Some(r)) if p.merged => Some(
            dates
                .entry(sha.clone())
                .or_insert_with(|| r.git.committed_at(sha))
                .clone()
                .unwrap_or_else(|| CREATED.into()),
        ),
        _ if p.merged => Some(CREATED.into()),
        _ => None,
    };
    let updated_at = inner
        .pull_updated
        .get(&key)
        .cloned()
        .or_else(|| merged_at.clone())
        .unwrap_or_else(|| CREATED.into());
    PullTimes {
        merged_at,
        updated_at,
    }
}

fn pull_json(full: &str, number: u64, p: &FakePull, base_url: &str, times: &PullTimes) -> Value {
    json!({
        "url": format!("{base_url}/repos/{full}/pulls/{number}"),
        "id": 10_000 + number,
        "node_id": format!("PR_{number}"),
        "html_url": format!("https://github.example/{full}/pull/{number}"),
        "number": number,
        "state": if p.merged { "closed" } else { "open" },
        "locked": false,
        "title": p.title,
        "user": null,
        "body": "",
        "labels": [],
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": times.updated_at,
        "closed_at": times.merged_at,
        "merged_at": times.merged_at,
        "merge_commit_sha": p.merge_commit_sha,
        "head": {"label": "octo:feature", "ref": "feature", "sha": "1111111111111111111111111111111111111111"},
        "base": {"label": format!("octo:{}", p.base_ref), "ref": p.base_ref, "sha": "2222222222222222222222222222222222222222"},
        "merged": p.merged,
        "draft": false,
    })
}

async fn pull(
    State(s): State<AppState>,
    UrlPath((owner, name, number)): UrlPath<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(e) = check_token(&s, &headers, &full, Some("pull_requests")) {
        return e;
    }
    if let Err(e) = require_pinned_version(&headers) {
        return e;
    }
    let inner = s.inner.lock().unwrap();
    let base_url = base_url(&headers);
    let key = (full.to_ascii_lowercase(), number);
    let Some(p) = inner.pulls.get(&key) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let details = inner.pull_details.get(&key).cloned().unwrap_or_default();
    let changed = match (
        &p.merge_commit_sha,
        inner.repos.get(&full.to_ascii_lowercase()),
    ) {
        (Some(sha), Some(r)) if r.git.resolve(sha).is_some() => {
            Some(r.git.changed_files(sha).len())
        }
        _ => None,
    };
    let times = pull_times(&inner, &full, number, p, &mut HashMap::new());
    axum::Json(pull_json_with(
        &full, number, p, &base_url, &times, &details, changed,
    ))
    .into_response()
}

/// `GET /repos/{o}/{r}/pulls` query: GitHub's filters and sorts for listing.
#[derive(serde::Deserialize)]
struct PullListQuery {
    state: Option<String>,
    base: Option<String>,
    sort: Option<String>,
    direction: Option<String>,
    per_page: Option<usize>,
    page: Option<usize>,
}

/// `GET /repos/{o}/{r}/pulls`: the configured pull requests filtered by
/// `state` (default `open`; a merged one is `closed`) and `base`, sorted by
/// `created` (number order here) or `updated`, paged with GitHub's `Link`
/// header (`first`/`prev`/`next`/`last`, absent on a lone page).
async fn list_pulls(
    State(s): State<AppState>,
    UrlPath((owner, name)): UrlPath<(String, String)>,
    Query(q): Query<PullListQuery>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(e) = check_token(&s, &headers, &full, Some("pull_requests")) {
        return e;
    }
    if let Err(e) = require_pinned_version(&headers) {
        return e;
    }
    let state = q.state.clone().unwrap_or_else(|| "open".into());
    if !["open", "closed", "all"].contains(&state.as_str()) {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    }
    let sort = q.sort.clone().unwrap_or_else(|| "created".into());
    if !["created", "updated"].contains(&sort.as_str()) {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    }
    // GitHub's default direction: desc for `created`, otherwise asc.
    let descending = match q.direction.as_deref() {
        Some("asc") => false,
        Some("desc") => true,
        None => sort == "created",
        Some(_) => return error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed"),
    };
    let inner = s.inner.lock().unwrap();
    let base_url = base_url(&headers);
    let repo_key = full.to_ascii_lowercase();
    let mut dates = HashMap::new();
    let mut listed: Vec<(String, u64, Value)> = inner
        .pulls
        .iter()
        .filter(|((r, _), p)| {
            *r == repo_key
                && match state.as_str() {
                    "open" => !p.merged,
                    "closed" => p.merged,
                    _ => true,
                }
                && q.base.as_deref().is_none_or(|b| b == p.base_ref)
        })
        .map(|((_, n), p)| {
            let times = pull_times(&inner, &full, *n, p, &mut dates);
            let key = if sort == "updated" {
                times.updated_at.clone()
            } else {
                String::new()
            };
            (key, *n, pull_json(&full, *n, p, &base_url, &times))
        })
        .collect();
    // RFC 3339 UTC times in one format sort as text; ties by number.
    listed.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    if descending {
        listed.reverse();
    }
    let all: Vec<Value> = listed.into_iter().map(|(_, _, v)| v).collect();
    let per_page = q.per_page.unwrap_or(30).clamp(1, 100);
    let page = q.page.unwrap_or(1).max(1);
    let last = all.len().div_ceil(per_page).max(1);
    let items: Vec<Value> = all
        .iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .cloned()
        .collect();
    let link_to = |n: usize| {
        let mut query = vec![format!("state={state}"), format!("sort={sort}")];
        if let Some(b) = &q.base {
            query.push(format!("base={b}"));
        }
        if let Some(d) = &q.direction {
            query.push(format!("direction={d}"));
        }
        query.push(format!("per_page={per_page}"));
        query.push(format!("page={n}"));
        format!("<{base_url}/repos/{full}/pulls?{}>", query.join("&"))
    };
    let mut links = Vec::new();
    if page > 1 {
        links.push(format!("{}; rel=\"prev\"", link_to(page - 1)));
        links.push(format!("{}; rel=\"first\"", link_to(1)));
    }
    if page < last {
        links.push(format!("{}; rel=\"next\"", link_to(page + 1)));
        links.push(format!("{}; rel=\"last\"", link_to(last)));
    }
    let mut response = axum::Json(items).into_response();
    if !links.is_empty() {
        response
            .headers_mut()
            .insert("link", links.join(", ").parse().unwrap());
    }
    response
}

async fn pull_files(
    State(s): State<AppState>,
    UrlPath((owner, name, number)): UrlPath<(String, String, u64)>,
    Query(paging): Query<Paging>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("pull_requests")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let pull = s
        .inner
        .lock()
        .unwrap()
        .pulls
        .get(&(full.to_ascii_lowercase(), number))
        .cloned();
    let Some(sha) = pull.and_then(|p| p.merge_commit_sha) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let files = r.git.changed_files(&sha);
    axum::Json(paging.slice(&files, 30)).into_response()
}

async fn single_commit(
    State(s): State<AppState>,
    UrlPath((owner, name, sha)): UrlPath<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("contents")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let Some(sha) = r.git.resolve(&sha) else {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("No commit found for SHA: {sha}"),
        );
    };
    let base_url = base_url(&headers);
    let mut commit = r
        .git
        .commit_objects(&["-1", &sha], &full, &base_url)
        .remove(0);
    commit["files"] = json!(r.git.changed_files(&sha));
    axum::Json(commit).into_response()
}

/// `GET /repos/{r}/git/ref/heads/{branch}`: where the branch points in the
/// backing repository now (the sweep reads the default branch's tip here).
async fn branch_ref(
    State(s): State<AppState>,
    UrlPath((owner, name, branch)): UrlPath<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("contents")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let Some(sha) = r.git.resolve(&format!("refs/heads/{branch}")) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    axum::Json(json!({
        "ref": format!("refs/heads/{branch}"),
        "node_id": format!("REF_{sha}"),
        "url": format!("https://api.github.example/repos/{full}/git/refs/heads/{branch}"),
        "object": {
            "type": "commit",
            "sha": sha,
            "url": format!("https://api.github.example/repos/{full}/git/commits/{sha}"),
        },
    }))
    .into_response()
}

#[derive(serde::Deserialize)]
struct ContentsQuery {
    #[serde(rename = "ref")]
    reference: Option<String>,
}

async fn contents(
    State(s): State<AppState>,
    UrlPath((owner, name, path)): UrlPath<(String, String, String)>,
    Query(q): Query<ContentsQuery>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    let r = match check_token(&s, &headers, &full, Some("contents")) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let reference = q.reference.unwrap_or_else(|| "HEAD".into());
    let object = format!("{reference}:{path}");
    let kind = git_output(&r.git.dir, &["cat-file", "-t", &object]);
    if String::from_utf8_lossy(&kind.stdout).trim() == "tree" {
        // A directory: GitHub answers with the list of its entries.
        let names = git_output(&r.git.dir, &["ls-tree", "--name-only", &object]);
        let entries: Vec<Value> = String::from_utf8_lossy(&names.stdout)
            .lines()
            .map(|name| json!({"name": name, "path": format!("{path}/{name}")}))
            .collect();
        return axum::Json(entries).into_response();
    }
    let out = git_output(
        &r.git.dir,
        &["cat-file", "blob", &format!("{reference}:{path}")],
    );
    if !out.status.success() {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &out.stdout);
    // GitHub wraps the base64 at 60 characters.
    let wrapped: Vec<&str> = encoded
        .as_bytes()
        .chunks(60)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    axum::Json(json!({
        "type": "file",
        "encoding": "base64",
        "size": out.stdout.len(),
        "name": path.rsplit('/').next().unwrap_or(&path),
        "path": path,
        "content": wrapped.join("\n") + "\n",
        "sha": "0000000000000000000000000000000000000000",
    }))
    .into_response()
}

async fn user(State(s): State<AppState>, headers: HeaderMap) -> Response {
    let inner = s.inner.lock().unwrap();
    match bearer(&headers).and_then(|t| inner.users.get(&t).cloned()) {
        Some((login, kind)) => {
            axum::Json(serde_json::json!({"login": login, "id": 1, "type": kind})).into_response()
        }
        None => error(StatusCode::UNAUTHORIZED, "Bad credentials"),
    }
}

async fn collaborator_permission(
    State(s): State<AppState>,
    UrlPath((owner, name, login)): UrlPath<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(e) = check_token(&s, &headers, &full, None) {
        return e;
    }
    let inner = s.inner.lock().unwrap();
    match inner
        .roles
        .get(&(full.to_ascii_lowercase(), login.to_ascii_lowercase()))
    {
        Some((permission, role_name)) => axum::Json(serde_json::json!({
            "permission": permission,
            "role_name": role_name,
            "user": {"login": login},
        }))
        .into_response(),
        None => error(StatusCode::NOT_FOUND, &format!("{login} is not a user")),
    }
}

async fn commit_pulls(
    State(s): State<AppState>,
    UrlPath((owner, name, sha)): UrlPath<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    let full = format!("{owner}/{name}");
    if let Err(e) = check_token(&s, &headers, &full, Some("pull_requests")) {
        return e;
    }
    let inner = s.inner.lock().unwrap();
    let base_url = base_url(&headers);
    let list: Vec<Value> = inner
        .pulls
        .iter()
        .filter(|((r, _), p)| {
            *r == full.to_ascii_lowercase() && p.merge_commit_sha.as_deref() == Some(sha.as_str())
        })
        .map(|((_, n), p)| {
            let times = pull_times(&inner, &full, *n, p, &mut HashMap::new());
            pull_json(&full, *n, p, &base_url, &times)
        })
        .collect();
    axum::Json(list).into_response()
}

async fn jwks(State(s): State<AppState>) -> Response {
    let mut inner = s.inner.lock().unwrap();
    inner.jwks_fetches += 1;
    let keys = inner
        .published_kids
        .iter()
        .map(|kid| public_jwk(&s.oidc_keys[kid], kid))
        .collect();
    axum::Json(JwkSet { keys }).into_response()
}
