//! What a server is bound to and how a tool call reaches a wiki.
//!
//! Invariants:
//! - the destination wiki comes only from trusted configuration: a tool names the
//!   *source* (`repository`) and never a URL, host, path, token or remote;
//! - the writer takes its binding only from the environment (`TEAMMEM_CONFIG`,
//!   `TEAMMEM_WRITER_SOURCE`, optional `TEAMMEM_WRITER_JOB`,
//!   `TEAMMEM_WRITER_RANGE`) and serves exactly one source; any other
//!   `repository` is refused with `permission_denied` before configuration is
//!   even consulted;
//! - a writer the runner started has the job's broker socket as an inherited
//!   descriptor (`TEAMMEM_WRITER_BROKER_FD`): its destination and wiki token
//!   come from the broker, overriding what its configuration file says, so
//!   the wiki it writes is the one the runner resolved; a writer run by hand
//!   takes its destination from the configuration and its token (if any)
//!   from `TEAMMEM_WRITER_TOKEN`;
//! - a write's `expected_wiki_repository` is compared with the resolved wiki
//!   before any credential is looked at or any disk or network work starts;
//! - the writer token (from the environment or fetched once from the broker
//!   before the server starts) and the broker handle are registered with the
//!   [`SecretGuard`] before the server answers anything, and every token a [`WikiCredentials`] provider hands out
//!   is registered before it is used, so no result can carry either.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use crate::config::{self, Config, Forge, Source};
use crate::ids::Scope;
use crate::wiki::{Committer, Destination, Remote, Secret, Trailer, Wiki, WikiStore};
use crate::writer_contract::broker::{BrokerClient, WriterDestination, WriterGrant, WriterRemote};
use crate::writer_contract::{
    ENV_WRITER_SOURCE, TRAILER_JOB, TRAILER_ORIGIN, TRAILER_RANGE, TRAILER_SOURCE, WriterEnv,
};

use super::McpError;
use super::envelope::{ResolvedWiki, SecretGuard, ToolError};
use super::profile::{Profile, ServerKind};

/// The job a writer serves.
#[derive(Debug, Clone)]
pub struct WriterBinding {
    /// The one source (`owner/name`) this writer serves.
    pub source: String,
    pub job: Option<String>,
    pub range: Option<Scope>,
    /// Credential for an HTTP wiki remote; never in a result, a log line or argv.
    pub token: Option<Secret>,
    /// The job's broker: the destination's and wiki token's source (asked
    /// before the server starts) and the reader of GitHub source files.
    pub broker: Option<BrokerClient>,
    /// Descriptors inherited from the runner, not yet taken over.
    pub inherited: Inherited,
    /// The job's evidence bundle (`TEAMMEM_WRITER_EVIDENCE`); the evidence tools
    /// answer only from it.
    pub evidence: Option<PathBuf>,
}

/// Descriptor numbers a writer found in its environment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Inherited {
    pub broker_fd: Option<i32>,
    pub agent_fd: Option<i32>,
}

impl WriterBinding {
    /// The environment an operator's `teammem mcp --wiki-writer` runs with
    /// (after clearing its own): the inverse of [`Binding::writer_from_env`]
    /// for a writer without a broker. The token travels here, never in argv.
    pub fn environment(&self, config_path: &std::path::Path) -> Vec<(&'static str, String)> {
        WriterEnv {
            config_path: config_path.to_path_buf(),
            source: self.source.clone(),
            job: self.job.clone(),
            range: self.range.clone(),
            evidence: self.evidence.clone(),
            token: self.token.clone(),
            broker: false,
            agent: false,
        }
        .encode()
        .into_iter()
        .map(|(name, value)| (name, value.to_string_lossy().into_owned()))
        .collect()
    }

    /// Takes over the broker descriptor, asks it for the binding, and points
    /// the configuration's source at the destination the runner resolved.
    /// Call once, inside the runtime, before serving anything.
    pub async fn attach_broker(
        config: &mut Config,
        writer: &mut WriterBinding,
    ) -> Result<(), McpError> {
        let Some(fd) = writer.inherited.broker_fd.take() else {
            return Ok(());
        };
        let broker = BrokerClient::from_inherited(fd).map_err(McpError::Binding)?;
        let WriterGrant { destination, token } = broker.binding().await.map_err(|e| {
            McpError::Binding(format!(
                "the wiki writer could not get its binding from the job's broker: {e}"
            ))
        })?;
        bind_destination(config, &writer.source, &destination)?;
        writer.token = token.map(|t| Secret::new(t.0));
        writer.broker = Some(broker);
        Ok(())
    }
}

/// Points `source` of `config` at `destination` (the runner's resolution).
fn bind_destination(
    config: &mut Config,
    source: &str,
    destination: &WriterDestination,
) -> Result<(), McpError> {
    if !destination.source.eq_ignore_ascii_case(source) {
        return Err(McpError::Binding(format!(
            "the job's broker binds this writer to {}, but {ENV_WRITER_SOURCE} names {source}",
            destination.source
        )));
    }
    match &destination.remote {
        WriterRemote::Github { git_url } => match config.github.as_mut() {
            Some(github) => github.git_url = git_url.clone(),
            None => {
                return Err(McpError::Binding(
                    "the job's broker binds this writer to a GitHub wiki, but its configuration has no [github] section".into(),
                ));
            }
        },
        WriterRemote::Local { .. } => {}
    }
    let Some(configured) = config
        .sources
        .iter_mut()
        .find(|s| s.repository.eq_ignore_ascii_case(source))
    else {
        return Err(McpError::Binding(format!(
            "{source} is not a configured source"
        )));
    };
    configured.wiki_repository = destination.wiki_repository.clone();
    configured.forge = match &destination.remote {
        WriterRemote::Github { .. } => Forge::GitHub,
        WriterRemote::Local { repo, wiki } => Forge::Local {
            repo: repo.clone(),
            wiki: wiki.clone(),
        },
    };
    Ok(())
}

/// Who is writing, for the commit trailers.
#[derive(Debug, Clone)]
pub enum WriteOrigin {
    /// The job-bound writer child.
    Job(WriterBinding),
    /// `teammem wiki write|patch` run by an operator.
    Operator,
}

/// A server's configuration and binding.
#[derive(Debug, Clone)]
pub struct Binding {
    pub config: Arc<Config>,
    pub profile: Profile,
    pub writer: Option<WriterBinding>,
}

impl Binding {
    /// `teammem mcp --config FILE [--read-only]`: read tools for every source.
    pub fn agent(config: Config, read_only: bool) -> Self {
        Self {
            config: Arc::new(config),
            profile: Profile {
                kind: ServerKind::Agent,
                read_only,
            },
            writer: None,
        }
    }

    /// `teammem mcp --wiki-writer`: the binding read from the environment
    /// (`get` is `std::env::var` in production, a map in tests).
    pub fn writer_from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self, McpError> {
        let env = WriterEnv::decode(get).map_err(McpError::Binding)?;
        let config = Config::load(&env.config_path).map_err(McpError::Config)?;
        let source = env.source;
        if !config::is_repository_name(&source) {
            return Err(McpError::Binding(format!(
                "{ENV_WRITER_SOURCE} must be owner/name, got {source:?}"
            )));
        }
        let Some(configured) = config.source(&source) else {
            return Err(McpError::Binding(format!(
                "{ENV_WRITER_SOURCE} names {source}, which is not a configured source; add it to the configuration or fix the name"
            )));
        };
        let source = configured.repository.clone();
        let inherited = Inherited {
            broker_fd: env.broker.then_some(crate::writer_contract::BROKER_FD),
            agent_fd: env.agent.then_some(crate::writer_contract::AGENT_FD),
        };
        Ok(Self {
            config: Arc::new(config),
            profile: Profile {
                kind: ServerKind::WikiWriter,
                read_only: false,
            },
            writer: Some(WriterBinding {
                source: source.to_string(),
                job: env.job,
                range: env.range,
                token: env.token,
                broker: None,
                inherited,
                evidence: env.evidence,
            }),
        })
    }
}

/// A source a call resolved to.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub source: Source,
    pub identity: ResolvedWiki,
}

/// A token provider's answer.
pub type CredentialFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Secret>, ToolError>> + Send + 'a>>;

/// Where a server gets the credential for a GitHub wiki remote when it holds no
/// writer token for it (e.g. the GitHub App's installation token, scoped to the
/// wiki's repository and to contents read or write). `Ok(None)` reads
/// anonymously. Errors are envelope errors (`authentication_error`,
/// `permission_denied`, ...) with sentences an agent can act on.
pub trait WikiCredentials: Send + Sync {
    fn token<'a>(&'a self, wiki_repository: &'a str, write: bool) -> CredentialFuture<'a>;
}

/// Everything a tool handler needs; one per server process.
pub struct Context {
    pub binding: Binding,
    pub store: WikiStore,
    pub guard: SecretGuard,
    pub credentials: Option<Arc<dyn WikiCredentials>>,
    /// The job queue and PR verification of the coordinator tools (`None`:
    /// they answer with a configuration error).
    pub coordinator: Option<crate::requests::Requests>,
    /// What this server's job has written so far; held across a write so
    /// two calls cannot both spend the same budget or stage on one base.
    pub job_writes: tokio::sync::Mutex<JobWrites>,
}

/// A job-bound writer's writes so far.
#[derive(Debug, Default)]
pub struct JobWrites {
    /// Bytes changed (`agent.max_changed_bytes`).
    pub changed_bytes: u64,
    /// The job's staged commits, not yet published (`None`: nothing staged).
    pub staged: Option<Staged>,
}

/// A job's staged writes: commits in the local object store, chained on the
/// wiki's tip as the first write found it, published as one commit by
/// `publish_job_changes` when the job succeeds.
#[derive(Debug, Clone)]
pub struct Staged {
    /// The wiki commit the job's first staged write was based on.
    pub start: String,
    /// The job's newest staged commit: what the job's reads see as `HEAD`.
    pub tip: String,
    /// Each staged write's message, in order.
    pub messages: Vec<String>,
}

impl Context {
    /// Does this server stage its writes? Only a writer the runner started
    /// (it has the job's broker) does: the runner publishes the job's
    /// changes once, when the job succeeds. A writer run by hand publishes
    /// each write.
    pub fn stages_writes(&self) -> bool {
        self.binding
            .writer
            .as_ref()
            .is_some_and(|writer| writer.broker.is_some())
    }

    /// The job's staged tip, if it staged anything.
    pub async fn staged_tip(&self) -> Option<String> {
        if !self.stages_writes() {
            return None;
        }
        let writes = self.job_writes.lock().await;
        writes.staged.as_ref().map(|staged| staged.tip.clone())
    }

    /// The commit a read at `git_ref` means: within a job that staged
    /// writes, `HEAD` is its staged tip (a job reads what it wrote).
    pub async fn read_ref(&self, git_ref: String) -> String {
        if git_ref == "HEAD"
            && let Some(tip) = self.staged_tip().await
        {
            return tip;
        }
        git_ref
    }
}

impl Context {
    /// A context with its mirrors under `{data_dir}/mirrors/` and the writer
    /// token (if any) registered with the guard.
    pub fn new(binding: Binding) -> Self {
        let store = WikiStore::new(binding.config.server.data_dir.join("mirrors"));
        let guard = SecretGuard::new();
        if let Some(token) = binding.writer.as_ref().and_then(|w| w.token.as_ref()) {
            guard.register(token);
        }
        Self {
            binding,
            store,
            guard,
            credentials: None,
            coordinator: None,
            job_writes: tokio::sync::Mutex::new(JobWrites::default()),
        }
    }

    /// Adds the job queue for the coordinator tools.
    pub fn with_coordinator(mut self, requests: crate::requests::Requests) -> Self {
        self.coordinator = Some(requests);
        self
    }

    /// Adds a token provider for GitHub wiki remotes the binding has no token for.
    pub fn with_credentials(mut self, credentials: Arc<dyn WikiCredentials>) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// Resolves a `repository` argument to a configured source this server may serve.
    pub fn resolve(&self, repository: &str) -> Result<Resolved, ToolError> {
        if let Some(writer) = &self.binding.writer
            && !writer.source.eq_ignore_ascii_case(repository)
        {
            return Err(ToolError::permission_denied(format!(
                "this wiki writer is bound to {}; it cannot serve {:?}",
                writer.source,
                shorten(repository)
            )));
        }
        if !config::is_repository_name(repository) {
            return Err(ToolError::invalid_input(format!(
                "repository must be the source repository as owner/name, got {:?}",
                shorten(repository)
            )));
        }
        // A caller limited to some repositories (a scoped token on /mcp) learns
        // nothing about the others, configured or not.
        if !super::tasks::current().may_access(repository) {
            return Err(ToolError::permission_denied(format!(
                "this token may not act on {}; use a token created for that repository",
                shorten(repository)
            )));
        }
        let Some(source) = self.binding.config.source(repository) else {
            // Only the sources this caller may read: a token whose scope names
            // a source since removed must not learn the others' names.
            let call = super::tasks::current();
            let known: Vec<&str> = self
                .binding
                .config
                .sources
                .iter()
                .map(|s| s.repository.as_str())
                .filter(|name| call.may_access(name))
                .collect();
            return Err(ToolError::not_found(format!(
                "{repository} is not a configured source; use one of: {}",
                if known.is_empty() {
                    "(none this caller may read is configured)".to_string()
                } else {
                    known.join(", ")
                }
            )));
        };
        Ok(Resolved {
            identity: ResolvedWiki {
                source_repository: source.repository.to_string(),
                wiki_repository: source.wiki_repository.to_string(),
            },
            source: source.clone(),
        })
    }

    /// The write precondition: `expected_wiki_repository` must name the resolved
    /// wiki. Checked before any credential, disk or network use.
    pub fn check_destination(resolved: &Resolved, expected: &str) -> Result<(), ToolError> {
        if !config::is_repository_name(expected) {
            return Err(ToolError::invalid_input(format!(
                "expected_wiki_repository must be owner/name as returned by get_wiki_snapshot, got {:?}",
                shorten(expected)
            )));
        }
        if !expected.eq_ignore_ascii_case(&resolved.identity.wiki_repository) {
            return Err(ToolError::new(
                crate::wiki::ErrorKind::DestinationChanged,
                format!(
                    "the wiki of {} is now {}, not {expected}; read a fresh snapshot and re-establish the destination before writing",
                    resolved.identity.source_repository, resolved.identity.wiki_repository
                ),
            ));
        }
        Ok(())
    }

    /// A handle on the resolved source's wiki; `write` asks for a credential
    /// that may write.
    pub async fn wiki(&self, resolved: &Resolved, write: bool) -> Result<Wiki, ToolError> {
        let source = &resolved.source;
        let remote = match &source.forge {
            Forge::Local { wiki, .. } => Remote::LocalBare { path: wiki.clone() },
            Forge::GitHub => {
                let Some(github) = &self.binding.config.github else {
                    return Err(ToolError::configuration(
                        "the source lives on GitHub but the configuration has no [github] section",
                    ));
                };
                Remote::Http {
                    url: format!("{}/{}.wiki.git", github.git_url, source.wiki_repository),
                    token: self.token_for(source, write).await?,
                }
            }
        };
        let destination = Destination {
            id: source.destination(),
            remote,
        };
        Ok(self.store.wiki(&destination)?)
    }

    /// The credential for a source's wiki remote: the writer's token for its one
    /// source, else the provider's (registered with the guard first), else none.
    async fn token_for(&self, source: &Source, write: bool) -> Result<Option<Secret>, ToolError> {
        if let Some(writer) = &self.binding.writer
            && writer.source.eq_ignore_ascii_case(&source.repository)
            && writer.token.is_some()
        {
            return Ok(writer.token.clone());
        }
        let Some(credentials) = &self.credentials else {
            return Ok(None);
        };
        let token = credentials.token(&source.wiki_repository, write).await?;
        if let Some(token) = &token {
            self.guard.register(token);
        }
        Ok(token)
    }

    /// The committer of wiki writes (`[github] bot_name/bot_email`).
    pub fn committer(&self) -> Committer {
        Committer {
            name: self.binding.config.bot.name.clone(),
            email: self.binding.config.bot.email.clone(),
        }
    }
}

/// The trailers a write commit carries.
pub fn trailers(origin: &WriteOrigin, source: &str) -> Vec<Trailer> {
    let trailer = |key: &str, value: &str| Trailer {
        key: key.to_owned(),
        value: value.to_owned(),
    };
    let mut out = Vec::new();
    match origin {
        WriteOrigin::Job(writer) => {
            if let Some(job) = &writer.job {
                out.push(trailer(TRAILER_JOB, job));
            }
            out.push(trailer(TRAILER_SOURCE, source));
            if let Some(range) = &writer.range {
                out.push(trailer(TRAILER_RANGE, &range.to_string()));
            }
        }
        WriteOrigin::Operator => {
            out.push(trailer(TRAILER_SOURCE, source));
            out.push(trailer(TRAILER_ORIGIN, "operator"));
        }
    }
    out
}

/// An argument echoed in a message, bounded.
fn shorten(text: &str) -> &str {
    match text.char_indices().nth(100) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}
