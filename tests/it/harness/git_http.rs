//! A smart-HTTP git server for tests: `git http-backend` run as CGI behind a
//! loopback axum server, serving the bare repositories a test created under its
//! root. It checks Basic auth like GitHub (`x-access-token:<token>`, 401
//! otherwise), records every request (so a test can count round trips) and can
//! inject faults (drop the answer of a receive-pack after reading its body,
//! answer with a given status). Its helpers build bare fixture repositories with
//! the git CLI ([`super::git`]), the oracle.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use base64::Engine;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::git::git;

/// A fault the server injects into the next matching request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Read the whole `POST .../git-receive-pack` body, do not run git, then
    /// break the connection without an answer.
    DropReceivePackAnswer,
    /// Run the receive-pack (the update lands), then break the connection
    /// instead of forwarding git's answer.
    ApplyThenDropReceivePackAnswer,
    /// Answer the next request whose path ends with `suffix` with `status`.
    Status { suffix: String, status: u16 },
    /// Redirect the next request whose path ends with `suffix` to `location`.
    Redirect { suffix: String, location: String },
    /// Never answer the next request whose path ends with `suffix` (after
    /// reading its body).
    Hang { suffix: String },
}

/// One request the server saw: method and path with query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    pub method: String,
    pub target: String,
}

/// Decides whether `token` may reach `path` (`write`: a receive-pack request),
/// for servers whose credentials another fake hands out (GitHub's App tokens).
pub type TokenCheck = Arc<dyn Fn(&str, &str, bool) -> bool + Send + Sync>;

struct ServerState {
    root: PathBuf,
    token: Option<String>,
    check: Option<TokenCheck>,
    requests: Mutex<Vec<SeenRequest>>,
    fault: Mutex<Option<Fault>>,
}

/// A running server. Dropping it stops accepting connections.
pub struct GitHttpServer {
    state: Arc<ServerState>,
    address: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GitHttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl GitHttpServer {
    /// Serves the bare repositories under `root`; with `token`, requests must
    /// carry Basic `x-access-token:<token>`.
    pub async fn start(root: &Path, token: Option<&str>) -> Self {
        Self::serve(root, token, None).await
    }

    /// Serves the bare repositories under `root`; every request must carry Basic
    /// `x-access-token:<token>` with a token `check` accepts for the path.
    pub async fn start_checked(root: &Path, check: TokenCheck) -> Self {
        Self::serve(root, None, Some(check)).await
    }

    async fn serve(root: &Path, token: Option<&str>, check: Option<TokenCheck>) -> Self {
        let state = Arc::new(ServerState {
            root: root.to_owned(),
            token: token.map(str::to_owned),
            check,
            requests: Mutex::new(Vec::new()),
            fault: Mutex::new(None),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let address = listener.local_addr().expect("local address");
        let router = axum::Router::new()
            .fallback(handle)
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .await
                .expect("git test server");
        });
        Self {
            state,
            address,
            task,
        }
    }

    /// The URL of the repository `<root>/<name>`.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/{name}", self.address)
    }

    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.state.requests.lock().unwrap().clone()
    }

    pub fn clear_requests(&self) {
        self.state.requests.lock().unwrap().clear();
    }

    /// Arms a fault for the next matching request.
    pub fn inject(&self, fault: Fault) {
        *self.state.fault.lock().unwrap() = Some(fault);
    }
}

fn status_response(status: StatusCode, body: &'static str) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
}

/// A response whose body fails at once: hyper then aborts the connection, so
/// the client sees headers at most and never an answer.
fn broken_response() -> Response {
    let failing = futures_util::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::other("answer dropped on purpose"))
    });
    let mut response = Response::new(Body::from_stream(failing));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        "application/x-git-receive-pack-result".parse().unwrap(),
    );
    response
}

async fn handle(
    State(state): State<Arc<ServerState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let target = uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    state.requests.lock().unwrap().push(SeenRequest {
        method: method.to_string(),
        target: target.clone(),
    });
    if let Some(token) = &state.token {
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{token}"))
        );
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if given != Some(expected.as_str()) {
            let mut response = status_response(StatusCode::UNAUTHORIZED, "authentication required");
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                "Basic realm=\"git\"".parse().unwrap(),
            );
            return response;
        }
    }
    if let Some(check) = &state.check {
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Basic "))
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .and_then(|raw| String::from_utf8(raw).ok())
            .and_then(|pair| pair.strip_prefix("x-access-token:").map(str::to_owned));
        let write = uri.path().ends_with("/git-receive-pack")
            || uri
                .query()
                .unwrap_or("")
                .contains("service=git-receive-pack");
        if !token.is_some_and(|t| check(&t, uri.path(), write)) {
            let mut response = status_response(StatusCode::UNAUTHORIZED, "authentication required");
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                "Basic realm=\"git\"".parse().unwrap(),
            );
            return response;
        }
    }
    let path = uri.path().to_owned();
    let is_receive_pack_post = method == Method::POST && path.ends_with("/git-receive-pack");
    let fault = {
        let mut armed = state.fault.lock().unwrap();
        let fires = match armed.as_ref() {
            Some(Fault::DropReceivePackAnswer | Fault::ApplyThenDropReceivePackAnswer) => {
                is_receive_pack_post
            }
            Some(
                Fault::Status { suffix, .. }
                | Fault::Redirect { suffix, .. }
                | Fault::Hang { suffix },
            ) => target.ends_with(suffix.as_str()),
            None => false,
        };
        if fires { armed.take() } else { None }
    };
    match fault {
        Some(Fault::DropReceivePackAnswer) => return broken_response(),
        Some(Fault::Status { status, .. }) => {
            return status_response(StatusCode::from_u16(status).unwrap(), "injected failure");
        }
        Some(Fault::Redirect { location, .. }) => {
            let mut response = status_response(StatusCode::FOUND, "moved");
            response
                .headers_mut()
                .insert(header::LOCATION, location.parse().unwrap());
            return response;
        }
        Some(Fault::Hang { .. }) => std::future::pending::<()>().await,
        _ => {}
    }
    let answer = run_http_backend(&state.root, &method, &uri, &headers, body).await;
    if fault == Some(Fault::ApplyThenDropReceivePackAnswer) {
        return broken_response();
    }
    answer
}

/// Runs `git http-backend` for one request (CGI/1.1) and turns its output
/// into a response.
async fn run_http_backend(
    root: &Path,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let mut command = tokio::process::Command::new("git");
    command
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", root)
        .env("REMOTE_USER", "x-access-token")
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("REQUEST_METHOD", method.as_str())
        .env("PATH_INFO", uri.path())
        .env("QUERY_STRING", uri.query().unwrap_or(""))
        .env("CONTENT_LENGTH", body.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    if let Some(content_type) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    {
        command.env("CONTENT_TYPE", content_type);
    }
    if let Some(protocol) = headers.get("git-protocol").and_then(|v| v.to_str().ok()) {
        command.env("GIT_PROTOCOL", protocol);
    }
    if let Some(encoding) = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
    {
        command.env("HTTP_CONTENT_ENCODING", encoding);
    }
    let mut child = command.spawn().expect("spawn git http-backend");
    let mut stdin = child.stdin.take().unwrap();
    let feed = tokio::spawn(async move {
        let _ = stdin.write_all(&body).await;
    });
    let mut output = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut output)
        .await
        .expect("read CGI output");
    let _ = feed.await;
    let _ = child.wait().await;
    cgi_to_response(&output)
}

fn cgi_to_response(output: &[u8]) -> Response {
    let split = output
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, 4))
        .or_else(|| {
            output
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|at| (at, 2))
        });
    let Some((at, separator)) = split else {
        return status_response(StatusCode::BAD_GATEWAY, "bad CGI output");
    };
    let head = String::from_utf8_lossy(&output[..at]).into_owned();
    let mut response = Response::new(Body::from(output[at + separator..].to_vec()));
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value
                .split_whitespace()
                .next()
                .and_then(|c| c.parse().ok())
                .unwrap_or(500);
            *response.status_mut() =
                StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        } else if let (Ok(name), Ok(value)) = (
            header::HeaderName::from_bytes(name.trim().as_bytes()),
            header::HeaderValue::from_str(value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// Creates an empty bare repository `<root>/<name>` (default branch `master`).
pub fn init_bare(root: &Path, name: &str) -> PathBuf {
    let path = root.join(name);
    git(
        root,
        &["init", "--quiet", "--bare", "--initial-branch=master", name],
    );
    path
}

/// Creates a bare repository `<root>/<name>` whose history is one commit per
/// entry of `commits`, each writing the given (path, content) files.
pub fn bare_with_commits(root: &Path, name: &str, commits: &[(&str, &[(&str, &str)])]) -> PathBuf {
    let bare = init_bare(root, name);
    let work = root.join(format!("{name}.work"));
    git(
        root,
        &[
            "init",
            "--quiet",
            "--initial-branch=master",
            work.to_str().unwrap(),
        ],
    );
    for (message, files) in commits {
        for (path, content) in *files {
            let file = work.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, content).unwrap();
        }
        git(&work, &["add", "--all"]);
        git(&work, &["commit", "--quiet", "-m", message]);
    }
    git(
        &work,
        &["push", "--quiet", bare.to_str().unwrap(), "master"],
    );
    std::fs::remove_dir_all(&work).unwrap();
    bare
}

/// The commit `refs/heads/<branch>` of `bare` points at.
pub fn tip(bare: &Path, branch: &str) -> String {
    git(bare, &["rev-parse", &format!("refs/heads/{branch}")])
        .trim()
        .to_owned()
}
