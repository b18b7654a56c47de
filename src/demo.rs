//! `teammem demo`: the offline end-to-end run a newcomer starts first. It
//! builds a sample source repository with merged pull requests and an
//! initialized wiki (plain local bare repositories, made with gix: no git CLI,
//! no network), starts the real daemon on loopback with the local forge and the
//! builtin agent, posts two dispatches signed and shaped exactly as the
//! post-merge workflow sends them (the second edits lines the first one's pages
//! cite), follows each job, prints the jobs, their receipts, the pages written
//! and the wiki's log (read through the wiki engine), and keeps serving the
//! dashboard until Ctrl-C (`--once`: exits after the jobs and removes the
//! temporary directory it made, unless `--keep`).
//!
//! Invariants:
//! - bad input (a busy port, a data directory that cannot be written or holds
//!   something else) is refused with one sentence before anything is written;
//! - the demo only ever deletes what an earlier demo made in the same data
//!   directory (`repos/`, `state/`), recognised by its config file;
//! - the dispatch secret is generated per run and handed to the daemon in
//!   memory: it is never in argv, the environment, a file or the output;
//! - `--once` succeeds only when both jobs succeeded with receipts that say
//!   `updated`, the wiki's history is exactly one commit per job (the
//!   receipts' commits) on the initial page, and every sample pull request is
//!   cited on the changelog and its area pages.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::config::Config;
use crate::daemon;
use crate::forge::local::sample::{SAMPLE_BRANCH, SampleSource, create_sample_source};
use crate::queue::{Job, JobState, Queue};
use crate::runner::builtin;
use crate::wiki::{Committer, Destination, PageWrite, Remote, WikiStore, create_local_wiki};

/// The sample source's name (`owner/name`).
pub const DEMO_REPOSITORY: &str = "demo/todo";
/// The config file that marks a data directory as the demo's own.
pub const DEMO_CONFIG: &str = "teammem-demo.toml";
const WIKI_BRANCH: &str = "master";
const SECRET_ENV: &str = "TEAMMEM_DEMO_SECRET";
/// The longest the demo follows its job.
const JOB_DEADLINE: Duration = Duration::from_secs(300);

/// `teammem demo`'s options.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub once: bool,
    /// With `once`: keep the temporary data directory the demo made (one
    /// given with `data_dir` is always kept).
    pub keep: bool,
    pub port: u16,
    pub data_dir: Option<PathBuf>,
}

/// Why the demo stopped: bad input or surroundings (exit 2), or the run itself
/// did not do what it should (exit 1).
#[derive(Debug)]
pub enum DemoError {
    Usage(String),
    Failed(String),
}

impl DemoError {
    pub fn exit_code(&self) -> u8 {
        match self {
            DemoError::Usage(_) => 2,
            DemoError::Failed(_) => 1,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            DemoError::Usage(m) | DemoError::Failed(m) => m,
        }
    }
}

fn failed(message: impl Into<String>) -> DemoError {
    DemoError::Failed(message.into())
}

fn port_problem(port: u16, error: &std::io::Error) -> DemoError {
    if error.kind() == std::io::ErrorKind::AddrInUse {
        DemoError::Usage(format!(
            "port {port} on 127.0.0.1 is already in use; stop what listens there or pick another port with --port N (--port 0 picks a free one)"
        ))
    } else {
        DemoError::Usage(format!(
            "cannot listen on 127.0.0.1:{port} ({error}); pick another port with --port N (--port 0 picks a free one)"
        ))
    }
}

/// Runs the demo to its end (after the job with `--once`, else after Ctrl-C).
pub async fn run(options: DemoOptions) -> Result<(), DemoError> {
    // Checked before anything is written. The probe's port is released again
    // so the daemon can bind it; a race with another program is reported the
    // same way when the daemon binds.
    if options.port != 0 {
        std::net::TcpListener::bind(("127.0.0.1", options.port))
            .map_err(|e| port_problem(options.port, &e))?;
    }
    let dir = prepare_data_dir(options.data_dir.as_deref())?;
    // Only a directory the demo made itself, for a run that ends on its own,
    // is removed at the end.
    let remove_at_end = options.once && !options.keep && options.data_dir.is_none();
    let layout = Layout::new(&dir);

    let sample = create_sample_source(&layout.source).map_err(|e| failed(e.to_string()))?;
    create_local_wiki(
        &layout.wiki,
        WIKI_BRANCH,
        &[PageWrite {
            path: builtin::HOME.into(),
            content: format!(
                "# todo\n\nThe team memory of {DEMO_REPOSITORY}, kept in step with what merges by teammem.\n"
            ),
        }],
        "Initial Home page",
        &Committer {
            name: "teammem demo".into(),
            email: "demo@teammem.invalid".into(),
        },
    )
    .map_err(|e| failed(format!("cannot create the demo wiki: {e}")))?;
    let config_path = layout.write_config(options.port)?;
    let config = Arc::new(Config::load(&config_path).map_err(|e| {
        failed(format!(
            "the demo's own configuration is invalid (a bug): {e}"
        ))
    })?);
    let source = config
        .source(DEMO_REPOSITORY)
        .cloned()
        .ok_or_else(|| failed("the demo's configuration lost its source (a bug)"))?;

    crate::outln!("teammem demo in {}", dir.display());
    crate::outln!(
        "  source {DEMO_REPOSITORY}: {} (branch {SAMPLE_BRANCH})",
        layout.source.display()
    );
    crate::outln!(
        "  wiki: {} (branch {WIKI_BRANCH}, one page)",
        layout.wiki.display()
    );
    crate::outln!("  merged pull requests in the sample:");
    for pull in &sample.pulls {
        crate::outln!(
            "    #{:<3} {:<40} {}  areas: {}",
            pull.number,
            pull.title,
            &pull.merge_sha[..10],
            pull.areas.join(", ")
        );
    }

    // The daemon, in this process, with a per-run dispatch secret.
    let secret = random_secret();
    let ingest = crate::ingest::Ingest::new(
        vec![(source, crate::secrets::Secret::new(secret.clone()))],
        None,
        None,
    );
    let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let daemon_options = daemon::Options {
        handler: daemon::Handler::Runner {
            config_path: config_path.clone(),
        },
        clock: Arc::new(crate::queue::SystemClock),
        on_listening: Some(Box::new(move |addr| {
            let _ = addr_tx.send(addr);
        })),
    };
    let shutdown = async move {
        tokio::select! {
            _ = stop_rx => {}
            _ = daemon::shutdown_signal() => {}
        }
    };
    let mut served = tokio::spawn(daemon::run_with_ingest(
        config.clone(),
        daemon_options,
        crate::forge::Forges::default(),
        ingest,
        shutdown,
    ));
    let addr = tokio::select! {
        addr = addr_rx => addr.map_err(|_| failed("the daemon stopped before it listened"))?,
        ended = &mut served => return Err(daemon_ended(ended, options.port)),
    };
    let base_url = format!("http://{addr}");
    crate::outln!("\ndaemon listening on {base_url} (local forge, builtin agent)");

    let outcome = follow_demo(&config, &layout, &sample, &base_url, &secret, &served).await;
    // A failed run keeps its directory to be looked at.
    let remove_at_end = remove_at_end && outcome.is_ok();
    let job_page = match &outcome {
        Ok(job_id) => format!("  (this job: {base_url}/jobs/{job_id})"),
        Err(_) => String::new(),
    };
    if options.once {
        crate::outln!(
            "\nthe dashboard served this run at {base_url}/{job_page}; it stops with --once (run `teammem demo` without --once to browse it)"
        );
    } else {
        crate::outln!("\ndashboard: {base_url}/{job_page}");
        crate::outln!(
            "  from this machine no login is needed (loopback); elsewhere sign in with a token from `teammem tokens create --config {}`",
            config_path.display()
        );
    }
    if !remove_at_end {
        crate::outln!(
            "  the wiki is a plain git repository: git --git-dir {} log -p",
            layout.wiki.display()
        );
        // The run's own secret stays in memory; serving the configuration
        // again takes a secret of the user's choosing, which their own
        // dispatches are then signed with.
        crate::outln!(
            "  to serve this configuration yourself: {SECRET_ENV}=\"$(head -c 32 /dev/urandom | base64)\" teammem serve --config {}",
            config_path.display()
        );
    }
    match &outcome {
        Ok(_) => crate::outln!("demo ok: the wiki was updated as expected"),
        Err(e) => crate::outln!("demo failed: {}", e.message()),
    }
    // Without --once the dashboard stays up, also to look at a failed run.
    if options.once || served.is_finished() {
        let _ = stop_tx.send(());
    } else {
        crate::outln!("serving until Ctrl-C");
    }
    let ended = served.await;
    if remove_at_end {
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => crate::outln!("removed {} (--keep keeps it)", dir.display()),
            Err(e) => crate::outln!("could not remove {}: {e}", dir.display()),
        }
    }
    match (outcome, ended) {
        // The daemon's own failure explains the rest.
        (_, Ok(Err(e))) => Err(daemon_ended(Ok(Err(e)), options.port)),
        (Err(e), _) => Err(e),
        (Ok(_), Ok(Ok(()))) => Ok(()),
        (Ok(_), ended) => Err(daemon_ended(ended, options.port)),
    }
}

fn daemon_ended(
    ended: Result<Result<(), daemon::DaemonError>, tokio::task::JoinError>,
    port: u16,
) -> DemoError {
    match ended {
        Ok(Err(daemon::DaemonError::Listen { source, .. })) => port_problem(port, &source),
        Ok(Err(e)) => failed(format!("the daemon stopped: {e}")),
        Ok(Ok(())) => failed("the daemon stopped (Ctrl-C?) before the demo finished"),
        Err(e) => failed(format!("the daemon task failed: {e}")),
    }
}

/// Where the demo keeps things inside its data directory.
struct Layout {
    root: PathBuf,
    source: PathBuf,
    wiki: PathBuf,
    state: PathBuf,
}

impl Layout {
    fn new(root: &Path) -> Layout {
        Layout {
            root: root.to_path_buf(),
            source: root.join("repos").join("todo.git"),
            wiki: root.join("repos").join("todo.wiki.git"),
            state: root.join("state"),
        }
    }

    /// Writes the daemon's configuration (also read by the writer child).
    fn write_config(&self, port: u16) -> Result<PathBuf, DemoError> {
        let quoted = |p: &Path| -> Result<String, DemoError> {
            let text = p.to_str().ok_or_else(|| {
                DemoError::Usage(format!(
                    "{} is not valid UTF-8; choose a data directory with a plain name using --data-dir DIR",
                    p.display()
                ))
            })?;
            // A JSON string is a valid TOML basic string.
            Ok(serde_json::to_string(text).expect("strings serialize"))
        };
        let text = format!(
            "# Made by `teammem demo`; everything in this directory belongs to the demo.\n\
             [server]\n\
             listen = \"127.0.0.1:{port}\"\n\
             data_dir = {state}\n\n\
             [[sources]]\n\
             repository = \"{DEMO_REPOSITORY}\"\n\
             local_path = {source}\n\
             local_wiki_path = {wiki}\n\
             webhook_secret_env = \"{SECRET_ENV}\"\n\n\
             [queue]\n\
             workers = 1\n\n\
             [agent]\n\
             kind = \"builtin\"\n",
            state = quoted(&self.state)?,
            source = quoted(&self.source)?,
            wiki = quoted(&self.wiki)?,
        );
        let path = self.root.join(DEMO_CONFIG);
        std::fs::write(&path, text).map_err(|e| {
            DemoError::Usage(format!(
                "cannot write {} ({e}); choose a writable directory with --data-dir DIR",
                path.display()
            ))
        })?;
        Ok(path)
    }
}

/// Creates (or resets, if an earlier demo made it) the data directory and
/// checks that it can be written.
fn prepare_data_dir(requested: Option<&Path>) -> Result<PathBuf, DemoError> {
    let choose = "choose a writable directory with --data-dir DIR";
    let dir = match requested {
        Some(dir) => std::path::absolute(dir).map_err(|e| {
            DemoError::Usage(format!("--data-dir {}: {e}; {choose}", dir.display()))
        })?,
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or_default();
            std::env::temp_dir().join(format!("teammem-demo-{}-{nanos:x}", std::process::id()))
        }
    };
    if dir.exists() && !dir.is_dir() {
        return Err(DemoError::Usage(format!(
            "{} is not a directory; {choose}",
            dir.display()
        )));
    }
    if dir.is_dir() {
        let entries = std::fs::read_dir(&dir).map_err(|e| {
            DemoError::Usage(format!("cannot read {} ({e}); {choose}", dir.display()))
        })?;
        let empty = entries.into_iter().next().is_none();
        if !empty && !dir.join(DEMO_CONFIG).is_file() {
            return Err(DemoError::Usage(format!(
                "{} is not empty and holds no earlier demo; choose a new or empty directory with --data-dir DIR",
                dir.display()
            )));
        }
    }
    std::fs::create_dir_all(&dir).map_err(|e| {
        DemoError::Usage(format!("cannot create {} ({e}); {choose}", dir.display()))
    })?;
    let probe = dir.join(".teammem-demo-probe");
    std::fs::write(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| {
            DemoError::Usage(format!("cannot write in {} ({e}); {choose}", dir.display()))
        })?;
    // An earlier demo's repositories and state are replaced, nothing else.
    let layout = Layout::new(&dir);
    for old in [dir.join("repos"), layout.state] {
        if old.exists() {
            std::fs::remove_dir_all(&old).map_err(|e| {
                DemoError::Usage(format!(
                    "cannot remove the earlier demo's {} ({e}); {choose}",
                    old.display()
                ))
            })?;
        }
    }
    std::fs::create_dir_all(dir.join("repos")).map_err(|e| {
        DemoError::Usage(format!("cannot write in {} ({e}); {choose}", dir.display()))
    })?;
    Ok(dir)
}

fn random_secret() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// The dispatch body exactly as the post-merge workflow's `printf` builds it
/// (the demo stands in for workflow run `run`, attempt 1).
fn dispatch_body(run: u8, before: &str, after: &str) -> String {
    format!(
        r#"{{"source_repository":"{DEMO_REPOSITORY}","kind":"range","source_run_id":{run},"source_run_attempt":1,"push_before":"{before}","push_after":"{after}"}}"#
    )
}

/// Sends both dispatches in turn, follows each job and checks the wiki;
/// returns the last job's id.
async fn follow_demo(
    config: &Config,
    layout: &Layout,
    sample: &SampleSource,
    base_url: &str,
    secret: &str,
    served: &tokio::task::JoinHandle<Result<(), daemon::DaemonError>>,
) -> Result<i64, DemoError> {
    let pool = crate::db::open_configured(config)
        .await
        .map_err(|e| failed(format!("cannot open the demo database: {e}")))?;
    let queue = Queue::from_config(config, pool);
    let mut jobs = Vec::new();
    for (run, before, after) in [
        (1, &sample.base, &sample.first_head),
        (2, &sample.first_head, &sample.head),
    ] {
        if run == 2 {
            crate::outln!(
                "\nthe second dispatch: two more merged pull requests edit lines the pages cite (a docstring, a dependency) and move others"
            );
        }
        let job_id = dispatch(run, before, after, base_url, secret).await?;
        let job = wait_for_job(&queue, job_id, served).await?;
        print_job(&queue, &job).await;
        jobs.push(job);
    }

    let store = WikiStore::new(config.server.data_dir.join("demo-reads"));
    let wiki = store
        .wiki(&Destination {
            id: format!("demo:{DEMO_REPOSITORY}"),
            remote: Remote::LocalBare {
                path: layout.wiki.clone(),
            },
        })
        .map_err(|e| failed(format!("cannot open the demo wiki: {e}")))?;
    print_wiki(&wiki, &jobs).await;
    check_expected(&wiki, &jobs, sample).await?;
    Ok(jobs.last().map_or(0, |job| job.id))
}

/// Posts one signed dispatch; returns the job it was queued as.
async fn dispatch(
    run: u8,
    before: &str,
    after: &str,
    base_url: &str,
    secret: &str,
) -> Result<i64, DemoError> {
    let body = dispatch_body(run, before, after);
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(body.as_bytes());
    let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| failed(format!("cannot build an HTTP client: {e}")))?;
    let answer = http
        .post(format!("{base_url}/v1/dispatch"))
        .header("Content-Type", "application/json")
        .header("X-Hub-Signature-256", signature)
        .header("X-TeamMem-Delivery", uuid::Uuid::new_v4().to_string())
        .body(body)
        .send()
        .await
        .map_err(|e| failed(format!("cannot reach the demo daemon: {e}")))?;
    let status = answer.status().as_u16();
    let doc: Value = answer.json().await.unwrap_or_default();
    let Some(job_id) = doc["job_id"].as_i64().filter(|_| status == 202) else {
        return Err(failed(format!(
            "the daemon refused the demo's dispatch ({status}): {}",
            doc["error"]["message"].as_str().unwrap_or("no explanation")
        )));
    };
    crate::outln!(
        "POST /v1/dispatch (signed like the post-merge workflow) range {}..{} -> {status}, job {job_id}",
        &before[..10],
        &after[..10]
    );
    Ok(job_id)
}

async fn wait_for_job(
    queue: &Queue,
    id: i64,
    served: &tokio::task::JoinHandle<Result<(), daemon::DaemonError>>,
) -> Result<Job, DemoError> {
    crate::outln!("waiting for job {id} ...");
    let deadline = Instant::now() + JOB_DEADLINE;
    loop {
        let job = queue
            .get(id)
            .await
            .map_err(|e| failed(format!("cannot read job {id}: {e}")))?;
        if !matches!(job.state, JobState::Queued | JobState::Running) {
            return Ok(job);
        }
        if Instant::now() > deadline {
            return Err(failed(format!(
                "job {id} is still {} after {} s; see `teammem jobs show {id}`",
                job.state.as_str(),
                JOB_DEADLINE.as_secs()
            )));
        }
        // Not awaited here: `run` collects the daemon's own result later.
        if served.is_finished() {
            return Err(failed(format!(
                "the daemon stopped while job {id} was {}",
                job.state.as_str()
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn print_job(queue: &Queue, job: &Job) {
    crate::outln!(
        "\njob {}: {} (attempts {}/{})",
        job.id,
        job.state.as_str(),
        job.attempts,
        job.max_attempts
    );
    if let Some(e) = &job.last_error {
        crate::outln!("  last error: {e}");
    }
    if let Ok(events) = queue.events(job.id).await {
        for e in events {
            crate::outln!(
                "  {}  {:<10} {:<16} {}",
                chrono::DateTime::from_timestamp_millis(e.at)
                    .map(|t| t.format("%H:%M:%S%.3f").to_string())
                    .unwrap_or_default(),
                e.actor,
                e.event,
                e.detail.as_deref().unwrap_or("")
            );
        }
    }
    if let Some(receipt) = &job.receipt {
        crate::outln!(
            "\nreceipt:\n{}",
            serde_json::to_string_pretty(receipt).unwrap_or_default()
        );
    }
}

/// The pages the receipts name, in path order.
fn receipt_pages(jobs: &[Job]) -> Vec<String> {
    let mut pages: Vec<String> = jobs
        .iter()
        .filter_map(|job| job.receipt.as_ref())
        .flat_map(|r| r["pull_requests"].as_array().cloned().unwrap_or_default())
        .flat_map(|p| p["pages"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.as_str().map(str::to_owned))
        .collect();
    pages.sort();
    pages.dedup();
    pages
}

/// The pages the jobs wrote, as the last job left them, and the wiki's log.
async fn print_wiki(wiki: &crate::wiki::Wiki, jobs: &[Job]) {
    let at = jobs
        .last()
        .and_then(|job| job.receipt.as_ref())
        .and_then(|r| r["wiki_sha"].as_str())
        .unwrap_or("HEAD")
        .to_owned();
    for path in receipt_pages(jobs) {
        match wiki.get_page(&at, &path).await {
            Ok(page) => crate::outln!("\n--- {path} ---\n{}", page.content.trim_end()),
            Err(e) => crate::outln!("\n--- {path} --- (cannot read: {e})"),
        }
    }
    match wiki.history("HEAD", None, 20).await {
        Ok(history) => {
            crate::outln!("\nwiki log:");
            for c in history.commits {
                let subject = c.message.lines().next().unwrap_or_default();
                crate::outln!("  {}  {}  {subject}", &c.sha[..10], c.time);
            }
        }
        Err(e) => crate::outln!("\nwiki log: cannot read it: {e}"),
    }
}

/// "Updated as expected": see the module's invariants.
async fn check_expected(
    wiki: &crate::wiki::Wiki,
    jobs: &[Job],
    sample: &SampleSource,
) -> Result<(), DemoError> {
    let not_as_expected =
        |why: String| failed(format!("the wiki was not updated as expected: {why}"));
    let mut wiki_shas = Vec::new();
    for job in jobs {
        if job.state != JobState::Succeeded {
            return Err(not_as_expected(format!(
                "job {} ended {} {}",
                job.id,
                job.state.as_str(),
                job.last_error.as_deref().unwrap_or("")
            )));
        }
        let receipt = job.receipt.clone().unwrap_or_default();
        if receipt["status"] != "updated" {
            return Err(not_as_expected(format!(
                "job {}'s receipt status is {}, not updated",
                job.id, receipt["status"]
            )));
        }
        wiki_shas.push(receipt["wiki_sha"].as_str().unwrap_or_default().to_owned());
    }
    // One commit per job, in order, on top of the initial page.
    let history = wiki
        .history("HEAD", None, 20)
        .await
        .map_err(|e| failed(format!("cannot read the demo wiki: {e}")))?;
    let newest: Vec<String> = history.commits.iter().map(|c| c.sha.clone()).collect();
    wiki_shas.reverse();
    if newest.len() != jobs.len() + 1 || newest[..jobs.len()] != wiki_shas[..] {
        return Err(not_as_expected(format!(
            "the wiki's history {newest:?} is not one commit per job ({wiki_shas:?}, newest first) on the initial page"
        )));
    }
    let read = |path: String| async move {
        wiki.get_page("HEAD", &path)
            .await
            .map(|p| p.content)
            .map_err(|e| not_as_expected(format!("{path}: {e}")))
    };
    let changelog = read(builtin::CHANGELOG.to_owned()).await?;
    for pull in &sample.pulls {
        if !changelog.contains(&pull.merge_sha) {
            return Err(not_as_expected(format!(
                "{} does not cite #{} ({})",
                builtin::CHANGELOG,
                pull.number,
                pull.merge_sha
            )));
        }
        for area in &pull.areas {
            let path = builtin::area_page(&builtin::area_slug(area));
            let page = read(path.clone()).await?;
            if !page.contains(&pull.merge_sha) {
                return Err(not_as_expected(format!(
                    "{path} does not cite #{} ({})",
                    pull.number, pull.merge_sha
                )));
            }
        }
    }
    Ok(())
}
