//! One attempt at a job's wiki change, after the range was verified and its
//! evidence collected: the wiki's evidence markers judged, the job's broker
//! and writer child started, the agent run, its receipt checked against what
//! the writer staged, and the staged writes published as the job's ONE
//! commit.
//!
//! Invariant: nothing reaches the wiki unless the receipt holds and ends the
//! job well; then exactly one commit does (`publish_job_changes`). A wiki
//! that moved before the publish ends the attempt as [`Attempted::WikiMoved`]
//! with nothing published, and the caller starts another on the new tip.

use std::path::Path;

use super::receipt::{self, WikiFacts};
use super::writer::{self, WriterClient, WriterLaunch};
use super::{Runner, agent, agent_kinds, broker, check, command, fact_check, random_hex};
use crate::config::{Agent, Source};
use crate::forge::SourceForge;
use crate::forge::evidence::{self, EvidenceBundle, JobScope};
use crate::queue::{Completion, Job};
use crate::worker::JobFailure;

/// How long the marker check may wait on the wiki remote.
pub(super) const FACT_CHECK_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// How many times a job starts its agent on a wiki that moved under it
/// before it gives up for this attempt (the queue retries it later).
pub(super) const PUBLISH_ATTEMPTS: u32 = 3;

/// What every attempt of one job shares.
pub(super) struct AttemptInputs<'a> {
    pub(super) job: &'a Job,
    pub(super) source: &'a Source,
    pub(super) forge: &'a SourceForge<'a>,
    pub(super) scope: &'a JobScope,
    pub(super) dir: &'a Path,
    /// The evidence as collected; each attempt judges the markers afresh.
    pub(super) bundle: &'a EvidenceBundle,
    pub(super) patches: crate::forge::evidence::PatchSet,
    pub(super) policy: Option<&'a str>,
    pub(super) wiki_token: Option<crate::wiki::Secret>,
}

/// How one attempt ended.
pub(super) enum Attempted {
    /// The job's end: published (or nothing to publish), or refused.
    Done(Completion),
    /// The wiki moved past the job's start before it could publish; nothing
    /// was published.
    WikiMoved(String),
}

impl Runner {
    /// One attempt at the job's wiki change: the markers judged, the writer
    /// started, the agent run, its receipt checked against what it staged,
    /// and the staged writes published as ONE commit only when the receipt
    /// ends the job well. Any other end publishes nothing: the writer, and
    /// what it staged, die with this future.
    pub(super) async fn attempt(
        &self,
        inputs: &AttemptInputs<'_>,
    ) -> Result<Attempted, JobFailure> {
        let AttemptInputs {
            job,
            source,
            forge,
            scope,
            dir,
            ..
        } = *inputs;
        let unwritable = |e: std::io::Error| {
            JobFailure::retryable(format!(
                "cannot write the evidence bundle into {}: {e}; check data_dir's permissions and free space",
                dir.display()
            ))
        };
        let mut bundle = inputs.bundle.clone();
        // 4b. Every evidence marker on the wiki, judged against the source at
        // the job's tip: stale facts go to the agent, marker rewrites to the
        // writer, which folds them into the job's one commit.
        if let Ok(mirror) = fact_check::mirror_in(
            &self.fact_check_wikis,
            &self.config,
            source,
            inputs.wiki_token.clone(),
        ) {
            let updates = fact_check::check(&mirror, forge, scope.tip(), job.id).await;
            if !updates.stale.is_empty() || !updates.rewrites.is_empty() {
                bundle.stale_facts = updates.stale;
                bundle.marker_rewrites = updates.rewrites;
            }
        }
        let evidence_path = evidence::write_bundle(dir, &bundle).map_err(unwritable)?;
        let destination = crate::writer_contract::broker::WriterDestination::of(
            source,
            self.config.github.as_ref().map(|g| g.git_url.as_str()),
        )
        .map_err(JobFailure::permanent)?;
        let (broker, broker_end) = broker::Broker::start(broker::BrokerJob {
            source: source.clone(),
            destination,
            bundle: bundle.clone(),
            patches: inputs.patches.clone(),
            forges: self.forges.clone(),
            wiki_token: inputs.wiki_token.clone(),
        })
        .map_err(|e| JobFailure::new(e.reason, e.retryable))?;
        let (endpoint, agent_listener) = match self.agent_endpoint(dir)? {
            Some((endpoint, listener)) => (Some(endpoint), Some(listener)),
            None => (None, None),
        };
        let launch = WriterLaunch {
            program: self.program.clone(),
            config_path: self.config_path.clone(),
            source: source.repository.to_string(),
            job_id: job.id,
            range: scope.scope.clone(),
            evidence: evidence_path,
            broker: Some(broker_end),
            agent_listener,
            path: std::env::var_os("PATH"),
            log_filter: std::env::var_os("TEAMMEM_LOG"),
        };
        let client = WriterClient::spawn(launch)
            .await
            .map_err(JobFailure::retryable)?;
        if let (Some(hook), Some(pid)) = (&self.on_spawn, client.pid()) {
            hook(pid).await;
        }
        let start = client.snapshot(&source.repository).await.map_err(|e| {
            JobFailure::retryable(format!("reading the wiki's starting snapshot failed: {e}"))
        })?;
        let Some(start_base) = start.result.sha else {
            return Err(JobFailure::permanent(format!(
                "the wiki of {} has no commits yet; create its first page (Home), then retry the job",
                source.repository
            )));
        };

        // 5. The agent.
        let task = agent::AgentTask {
            repository: &source.repository,
            job_id: job.id,
            bundle: &bundle,
            policy: inputs.policy,
            before_write: self.before_write.as_ref(),
        };
        let command = self.command_settings();
        let outcome = agent_kinds::run(
            &self.config.agent,
            &client,
            &task,
            dir,
            endpoint.as_ref(),
            command.as_ref(),
        )
        .await
        .map_err(|e| JobFailure::new(e.reason, e.retryable))?;

        // 6. The receipt, checked against the evidence and the job's staged
        // writes (the writer's HEAD is the job's staged tip).
        client.count_steps_as(None);
        let facts = wiki_facts(&client, source, job.id, start_base).await?;
        // A receipt that does not hold is still kept with the failure: what
        // the agent claimed is what a maintainer reviews before a retry.
        check(&outcome.receipt, &bundle, &facts).map_err(|reason| JobFailure {
            reason: format!("the agent's receipt does not hold: {reason}"),
            retryable: false,
            receipt: serde_json::to_value(&outcome.receipt).ok(),
        })?;
        let mut receipt = outcome.receipt;
        // Only a receipt that ends the job well publishes anything.
        receipt::completion(&receipt, outcome.retry_failed)?;

        // 7. Publish: the job's staged writes as its one commit; with none,
        // the runner's marker rewrites alone, when it has any.
        let mut rewrites_alone = None;
        if !facts.job_commits.is_empty() || !bundle.marker_rewrites.is_empty() {
            let published = match client.publish_job_changes(&source.repository).await {
                Ok(published) => published,
                Err(writer::CallError::Tool(failure))
                    if failure.kind == crate::wiki::ErrorKind::Conflict =>
                {
                    return Ok(Attempted::WikiMoved(failure.message));
                }
                Err(e) => {
                    return Err(JobFailure {
                        reason: format!("publishing the job's changes to the wiki failed: {e}"),
                        retryable: true,
                        receipt: serde_json::to_value(&receipt).ok(),
                    });
                }
            };
            if facts.job_commits.is_empty() {
                if published.status == crate::wiki::WriteStatus::Updated {
                    rewrites_alone = Some(published.sha.clone());
                }
            } else if receipt.wiki_sha.is_some() {
                receipt.wiki_sha =
                    Some(
                        crate::ids::Sha::parse(&published.sha).map_err(|e| JobFailure {
                            reason: format!(
                                "the writer published a wiki commit that is not a commit id: {e}"
                            ),
                            retryable: true,
                            receipt: serde_json::to_value(&receipt).ok(),
                        })?,
                    );
            }
        }
        client.close().await;
        drop(broker);
        let mut completion = receipt::completion(&receipt, outcome.retry_failed)?;
        // The agent changed nothing, the runner's rewrites did: the job
        // committed, so it succeeded, and its receipt names that commit.
        if let (Some(sha), Completion::NoChange { receipt }) = (&rewrites_alone, &completion) {
            let mut receipt = receipt.clone();
            if let Some(fields) = receipt.as_object_mut() {
                fields.insert("marker_rewrites_commit".to_owned(), sha.clone().into());
            }
            completion = Completion::Succeeded { receipt };
        }
        // The runner's own finding, kept beside the agent's receipt for the
        // job page: the facts that were stale when the job started.
        if !bundle.stale_facts.is_empty()
            && let Completion::Succeeded { receipt } | Completion::NoChange { receipt } =
                &mut completion
            && let Some(fields) = receipt.as_object_mut()
        {
            fields.insert(
                "stale_facts".to_owned(),
                serde_json::to_value(&bundle.stale_facts).unwrap_or_default(),
            );
        }
        Ok(Attempted::Done(completion))
    }
    /// A `command` agent reaches the writer through a socket in the work
    /// directory, and the writer answers only a connection that first sends
    /// the job's capability: 32 random bytes, written (hex) into a file in
    /// the same directory, which only this job's sandbox can read, and handed
    /// to the writer over its gate. Knowing the socket's path (any process
    /// can list `/proc/net/unix`) is not enough. Other agents need none.
    fn agent_endpoint(
        &self,
        dir: &Path,
    ) -> Result<Option<(command::Endpoint, writer::AgentListener)>, JobFailure> {
        let Agent::Command { .. } = &self.config.agent else {
            return Ok(None);
        };
        let capability = crate::writer_contract::new_capability();
        let capability_path = dir.join(command::CAPABILITY_FILE);
        let mut line = capability.expose().to_vec();
        line.push(b'\n');
        let written = command::write_new(&capability_path, &line);
        zeroize::Zeroize::zeroize(&mut line);
        written.map_err(|e| JobFailure::retryable(format!(
                "cannot write the agent's capability file {}: {e}; check data_dir's permissions and free space",
                capability_path.display()
            )))?;
        let socket = dir.join(format!("mcp-{}.sock", random_hex(16)));
        let listener = std::os::unix::net::UnixListener::bind(&socket).map_err(|e| JobFailure::permanent(format!(
                "cannot make the agent's endpoint {}: {e}; choose a shorter server.data_dir (a socket path has at most 107 bytes) or check its permissions",
                socket.display()
            )))?;
        let listener = writer::AgentListener::new(std::os::fd::OwnedFd::from(listener), &capability)
            .map_err(|e| JobFailure::retryable(format!(
                    "cannot make the gate of the agent's endpoint: {e}; the daemon may be out of file descriptors"
                )))?;
        Ok(Some((
            command::Endpoint {
                program: self.program.clone(),
                socket,
                capability: capability_path,
            },
            listener,
        )))
    }
}

/// Reads the destination's current tip and recent history through the writer.
async fn wiki_facts(
    client: &WriterClient,
    source: &Source,
    job_id: i64,
    start_base: String,
) -> Result<WikiFacts, JobFailure> {
    let failure = |e: writer::CallError| {
        JobFailure::retryable(format!("reading the wiki to check the receipt failed: {e}"))
    };
    let snapshot = client.snapshot(&source.repository).await.map_err(failure)?;
    let tip = snapshot.result.sha.unwrap_or_else(|| start_base.clone());
    let history = client
        .history(&source.repository, &tip, 100)
        .await
        .map_err(failure)?;
    let trailer = format!("{}: {job_id}", crate::writer_contract::TRAILER_JOB);
    let mut shas = Vec::new();
    let mut job_commits = Vec::new();
    let mut before_base = true;
    for commit in history.commits {
        if commit.sha.eq_ignore_ascii_case(&start_base) {
            before_base = false;
        }
        if before_base && commit.message.lines().any(|line| line.trim() == trailer) {
            job_commits.push(commit.sha.clone());
        }
        shas.push(commit.sha);
    }
    Ok(WikiFacts {
        wiki_repository: snapshot.wiki_repository,
        start_base,
        history: shas,
        job_commits,
    })
}
