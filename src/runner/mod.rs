//! The job runner: turns one verified range (or one merged PR) into wiki pages.
//! It re-checks ancestry, collects the authorized evidence, spawns the job-bound
//! wiki-writer MCP child and runs the configured agent against it, then checks
//! the agent's receipt against the wiki before the job may succeed.
//!
//! Invariants: the runner never writes the wiki itself; every edit goes through
//! the writer child, and a job succeeds only on a receipt the wiki confirms.
//! For a GitHub source the wiki token reaches the writer child only through
//! the job's broker (`broker.rs`), which lives exactly as long as the job's
//! future.

pub mod agent; // what every agent kind gets and gives back
mod agent_kinds; // the job handed to the configured agent kind
mod attempt; // one attempt at a job's wiki change: writer, agent, receipt, the one publish
pub mod broker; // the per-job broker: wiki token and source files for the writer child (GitHub)
pub mod builtin; // the builtin agent: its pure planner (Home, Areas, Changelog, Dependencies) and its driver
pub mod command; // the external agent CLI backend
mod cursor; // whether a finished range is newer than the source's cursor, asked of the forge
mod job_token; // the job's wiki token: minted for one job, revoked when it ends
pub mod fact_check; // every evidence marker of the wiki judged against the source, once per job
pub mod openai; // the OpenAI-compatible chat-completions backend
pub mod receipt; // receipts and their checks against evidence and wiki
#[cfg(feature = "test-hooks")]
pub mod test_hooks; // test builds only: hold the daemon's builtin agent before a write
pub mod writer; // the job-bound writer child and its rmcp client
mod writer_client; // the runner's typed calls to its writer, one method per tool

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use crate::config::{Agent, Config, Source};
use crate::forge::evidence::{self, EvidenceBundle, JobScope, SourceError};
use crate::forge::{Forges, Refusal, SourceForge};
use crate::queue::{Completion, Job};
use crate::worker::{JobFailure, JobFuture, JobHandler};
use attempt::{AttemptInputs, Attempted, PUBLISH_ATTEMPTS};
use job_token::{JobToken, Revocations};
use receipt::{Receipt, WikiFacts};

/// A policy file larger than this is refused.
pub const MAX_POLICY_BYTES: usize = 64 * 1024;

/// A test hook: called with a number (the writer child's pid, or the builtin
/// agent's write attempt); the runner awaits the returned future.
pub type Hook = Arc<dyn Fn(u32) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// The runner's gate, right before a job's wiki token is minted: `Some`
/// rejected completion (reason `audience_mismatch: ...`) when the mapping
/// crosses an audience now, `None` to go on. A forge outage is a retryable
/// failure: nothing is minted on a guess.
pub async fn job_audience_gate(
    forge: &SourceForge<'_>,
    source: &Source,
) -> Result<Option<Completion>, JobFailure> {
    match forge.check_audience().await {
        Ok(()) => Ok(None),
        Err(Refusal::Rejected { code, message }) => Ok(Some(Completion::Rejected {
            reason: format!("{code}: {message}"),
        })),
        Err(Refusal::Unavailable { message, .. }) => Err(JobFailure::retryable(format!(
            "checking the audience of {} → {} failed: {message}",
            source.repository, source.wiki_repository
        ))),
    }
}

/// The job's work directory: `{data_dir}/jobs/{id}`.
pub fn work_dir(data_dir: &Path, job_id: i64) -> PathBuf {
    data_dir.join("jobs").join(job_id.to_string())
}

/// The job handler the daemon's workers call.
pub struct Runner {
    config: Arc<Config>,
    config_path: PathBuf,
    program: PathBuf,
    on_spawn: Option<Hook>,
    before_write: Option<Hook>,
    /// The process's forges (one GitHub client, one token cache), built
    /// once by the daemon.
    forges: Forges,
    revocations: Revocations,
    /// The wiki handles the jobs' fact checks read through, kept for the
    /// process's life: what each page blob says is remembered across jobs,
    /// so a check reads only the pages that changed since the last one.
    fact_check_wikis: Arc<crate::wiki::WikiStore>,
}

impl Runner {
    /// A runner for `config` (read by the writer child from `config_path`),
    /// spawning `program mcp --wiki-writer` (the daemon's own executable),
    /// asking the process's `forges`.
    pub fn new(
        config: Arc<Config>,
        config_path: PathBuf,
        program: PathBuf,
        forges: Forges,
    ) -> Self {
        let config_path = std::fs::canonicalize(&config_path).unwrap_or(config_path);
        let fact_check_wikis =
            Arc::new(fact_check::mirrors(&config).with_deadline(attempt::FACT_CHECK_DEADLINE));
        Self {
            fact_check_wikis,
            config,
            config_path,
            program,
            on_spawn: None,
            before_write: None,
            forges,
            revocations: Revocations::default(),
        }
    }

    /// The `command` agent's settings, with the paths it must never reach.
    fn command_settings(&self) -> Option<command::CommandSettings> {
        let Agent::Command {
            argv,
            timeout,
            env_allow,
            sandbox,
            read_paths,
            connect_ports,
            max_processes,
            max_memory_mb,
        } = &self.config.agent
        else {
            return None;
        };
        let mut secret_paths = vec![
            self.config_path.clone(),
            self.config.server.data_dir.clone(),
            PathBuf::from("/run/credentials"),
        ];
        if let Some(github) = &self.config.github
            && let crate::config::PrivateKey::File { path } = &github.private_key
        {
            secret_paths.push(path.clone());
        }
        Some(command::CommandSettings {
            argv: argv.clone(),
            timeout: *timeout,
            env_allow: env_allow.clone(),
            sandbox: *sandbox,
            read_paths: read_paths.clone(),
            connect_ports: connect_ports.clone(),
            max_processes: *max_processes,
            max_memory_bytes: max_memory_mb.saturating_mul(1 << 20),
            secret_paths,
        })
    }

    /// Why this runner cannot run its jobs' agents as configured (empty: it
    /// can): the command agent's sandbox rules the kernel cannot enforce, or
    /// an allowed path that holds a secret.
    pub fn problems(&self) -> Vec<String> {
        match self.command_settings() {
            Some(settings) => {
                settings.problems(&work_dir(&self.config.server.data_dir, 0), &self.program)
            }
            None => Vec::new(),
        }
    }

    /// Observes (or holds) the writer child after it started.
    pub fn with_spawn_hook(mut self, hook: Hook) -> Self {
        self.on_spawn = Some(hook);
        self
    }

    /// Runs `hook(attempt)` before each write attempt of the builtin agent.
    pub fn with_write_hook(mut self, hook: Hook) -> Self {
        self.before_write = Some(hook);
        self
    }

    /// Runs `job`; `cursor` is its source's cursor when it started (range
    /// jobs), which says whether the range's tip is the newest reconciled.
    async fn run_job(
        &self,
        job: &Job,
        cursor: Option<crate::ids::Sha>,
    ) -> Result<Completion, JobFailure> {
        let Some(source) = self.config.source(&job.source).cloned() else {
            return Err(JobFailure::permanent(format!(
                "source {} is no longer configured; add it back to the configuration or cancel the job",
                job.source
            )));
        };
        let scope = scope_of(job);
        // A command agent this machine cannot confine never runs: refused
        // before anything is read, minted or started.
        if let Some(settings) = self.command_settings() {
            let problems = settings.problems(
                &work_dir(&self.config.server.data_dir, job.id),
                &self.program,
            );
            if !problems.is_empty() {
                return Err(JobFailure::permanent(problems.join("; ")));
            }
        }
        let forge = self.forges.of(&source);

        // 1. Ancestry, against the current default branch.
        let branch = match forge.recheck(&scope).await {
            Ok(branch) => branch,
            Err(SourceError::Rejected(reason)) => return Ok(Completion::Rejected { reason }),
            Err(e) => return Err(source_failure(e)),
        };

        // 2. Evidence, into the job's work directory.
        let (mut bundle, patches) = match forge.collect_evidence(&scope, &branch).await {
            Ok(found) => found,
            Err(SourceError::Rejected(reason)) => return Ok(Completion::Rejected { reason }),
            Err(e) => return Err(source_failure(e)),
        };
        bundle.tip_is_newest = cursor::tip_is_newest(self, job, cursor.as_ref()).await;
        let dir = work_dir(&self.config.server.data_dir, job.id);
        // Declared before everything that uses the directory, so it is
        // removed after them, however the job ends.
        let _work_dir = RemoveOnDrop(dir.clone());
        fresh_work_dir(&dir).map_err(|e| {
            JobFailure::retryable(format!(
                "cannot make the job's work directory {} afresh: {e}; check data_dir's permissions",
                dir.display()
            ))
        })?;
        let unwritable = |e: std::io::Error| {
            JobFailure::retryable(format!(
                "cannot write the evidence bundle into {}: {e}; check data_dir's permissions and free space",
                dir.display()
            ))
        };
        // A copy for the agent and the dashboard to read; the writer takes its
        // bundle and patches from the broker's memory, never from this file.
        evidence::write_bundle(&dir, &bundle).map_err(unwritable)?;
        // A range that changed files outside any pull request still moves
        // what the pages say about the tip (and its facts are judged): only
        // one that changed nothing at all is skipped.
        if bundle.pull_requests.is_empty() && bundle.direct_changes.is_empty() {
            return Ok(Completion::Skipped {
                reason: format!(
                    "no merged pull requests and no changed files in {}; nothing to reconcile",
                    scope.scope
                ),
            });
        }

        // 3. The policy, at the verified sha.
        let policy = policy(&forge, scope.tip()).await?;
        // The job's work directory holds the agent's endpoint and files: the
        // daemon's user alone may enter it.
        restrict(&dir).map_err(unwritable)?;

        // 4. The job's wiki token (GitHub), its broker, and the writer child
        // bound to this job through it. The token is this job's alone and is
        // revoked when the job ends in any way (`JobToken`).
        // Audience, on every attempt, right before a token exists (a wiki
        // that takes no token has none to cross).
        if let Some(refused) = job_audience_gate(&forge, &source).await? {
            return Ok(refused);
        }
        let token = JobToken::mint(
            &forge,
            self.config.queue.job_timeout,
            self.revocations.clone(),
        )
        .await?;
        // 4b–7, once per attempt: a wiki that moved while the job ran (a
        // person's edit) is a conflict at publish time, and the job starts
        // its agent again on the new tip with a fresh writer.
        let inputs = AttemptInputs {
            job,
            source: &source,
            forge: &forge,
            scope: &scope,
            dir: &dir,
            bundle: &bundle,
            patches: patches.unwrap_or_default(),
            policy: policy.as_deref(),
            wiki_token: token.as_ref().map(|t| t.secret().clone()),
        };
        let mut attempt = 1;
        let completion = loop {
            match self.attempt(&inputs).await? {
                Attempted::Done(completion) => break completion,
                Attempted::WikiMoved(why) if attempt < PUBLISH_ATTEMPTS => {
                    tracing::info!(target: "teammem::runner", job = job.id, attempt, reason = %why, "the wiki moved while the job ran; nothing was published; starting the agent again on the new tip");
                    attempt += 1;
                    // Each attempt's agent starts in an empty work directory:
                    // nothing the last one left there (links included) stays.
                    fresh_work_dir(&dir)
                        .and_then(|()| restrict(&dir))
                        .map_err(|e| JobFailure::retryable(format!(
                                "cannot make the job's work directory {} afresh: {e}; check data_dir's permissions",
                                dir.display()
                            )))?;
                }
                Attempted::WikiMoved(why) => {
                    return Err(JobFailure::retryable(format!(
                        "the wiki moved while the job ran, {PUBLISH_ATTEMPTS} times ({why}); nothing was published; the job retries later"
                    )));
                }
            }
        };
        if let Some(token) = token {
            token.revoke().await;
        }
        Ok(completion)
    }
}

/// Step 3: the source's policy file at the verified sha, if it has one.
async fn policy(forge: &SourceForge<'_>, sha: &str) -> Result<Option<String>, JobFailure> {
    let Some(policy_path) = forge.source().policy_path.clone() else {
        return Ok(None);
    };
    match forge.read_file(sha, &policy_path, MAX_POLICY_BYTES).await {
        Ok(text) => Ok(text),
        Err(SourceError::Invalid(reason)) => Err(JobFailure::permanent(format!(
            "the policy file {policy_path} cannot be used: {reason}; keep it UTF-8 and at most {MAX_POLICY_BYTES} bytes"
        ))),
        Err(e) => Err(source_failure(e)),
    }
}

/// A job's work directory, removed when the job ends: it holds private
/// evidence and patches, and what the dashboard shows lives in the database.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        match std::fs::remove_dir_all(&self.0) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(target: "teammem::runner", dir = %self.0.display(), error = %e, "cannot remove the job's work directory")
            }
        }
    }
}

/// Makes the job's work directory afresh, 0700: whatever an earlier attempt
/// left there (a crash skips [`RemoveOnDrop`]), links its agent planted
/// included, is removed without following a link, so nothing the runner
/// writes later lands outside.
fn fresh_work_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::symlink_metadata(dir) {
        // remove_dir_all never follows a link inside the tree.
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(dir)?,
        // A link (or anything else) where the directory belongs: only it goes.
        Ok(_) => std::fs::remove_file(dir)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::DirBuilder::new().mode(0o700).create(dir)
}

/// Makes the job's work directory 0700.
fn restrict(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// A random lowercase hex string of `bytes` bytes.
fn random_hex(bytes: usize) -> String {
    use rand::RngCore;
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

impl JobHandler for Runner {
    fn run<'a>(&'a self, job: &'a Job) -> JobFuture<'a> {
        Box::pin(self.run_job(job, None))
    }

    fn run_from<'a>(&'a self, job: &'a Job, cursor: Option<crate::ids::Sha>) -> JobFuture<'a> {
        Box::pin(self.run_job(job, cursor))
    }

    fn drain(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.revocations.drain(std::time::Duration::from_secs(10)))
    }

    fn problems(&self) -> Vec<String> {
        Runner::problems(self)
    }

    fn agent_isolation(&self) -> Option<String> {
        let settings = self.command_settings()?;
        let policy = settings.policy(&work_dir(&self.config.server.data_dir, 0), &self.program);
        Some(crate::sandbox::support(&self.program).isolation(&policy))
    }

    fn cursor_move<'a>(
        &'a self,
        job: &'a Job,
        cursor: Option<&'a crate::ids::Sha>,
    ) -> crate::worker::CursorFuture<'a> {
        Box::pin(cursor::decide(self, job, cursor))
    }
}

/// The receipt's coverage and its claims against the wiki.
pub fn check(receipt: &Receipt, bundle: &EvidenceBundle, facts: &WikiFacts) -> Result<(), String> {
    receipt.validate_shape()?;
    receipt.check_coverage(bundle)?;
    receipt::check_against_wiki(receipt, facts)
}

fn source_failure(e: SourceError) -> JobFailure {
    JobFailure::new(e.to_string(), matches!(e, SourceError::Unavailable(_)))
}

/// What the job may reconcile: its kind, which the queue built and checked
/// when it read the job's row.
pub fn scope_of(job: &Job) -> JobScope {
    JobScope {
        job_id: job.id,
        scope: job.kind.scope(),
    }
}
