//! The queue's data types: jobs, their states and kinds, what callers pass in
//! and what they get back.
//!
//! Invariant: the state diagram documented on [`JobState`] is the only one;
//! the SQL in the sibling modules moves jobs along exactly these edges, and the
//! string forms here match the `CHECK` constraints of `migrations/sqlite/0001_queue.sql` and `migrations/postgres/0001_queue.sql`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ids::{PullNumber, RepoName, Scope, Sha};

/// Where a job is in its life.
///
/// ```text
///             enqueue
///                │
///                ▼        release (shutdown; attempt not counted)
///   ┌──────── queued ◄──────────────────────────────┐
///   │            │ claim (attempt += 1, lease)       │ fail(retryable) / lease expired,
///   │ cancel     ▼                                   │ attempts < max (after backoff)
///   │         running ───────────────────────────────┘
///   │            │
///   │            ├─ complete ─► succeeded | no_change | skipped | rejected
///   │            ├─ fail(not retryable) or attempts exhausted ─► failed
///   ▼            └─ cancel (lease voided) ─► cancelled
/// cancelled
///
///   retry (maintainer): failed | cancelled | rejected ─► queued (attempts reset)
/// ```
///
/// - `queued`: waiting to be claimed, not before `run_after` (backoff).
/// - `running`: claimed by a worker holding a lease (`lease_token`,
///   `lease_until`); at most one per wiki destination.
/// - `succeeded`: the wiki was updated and the receipt checked.
/// - `no_change`: the range was reconciled and nothing needed writing.
/// - `skipped`: nothing to reconcile (a range that changed no file).
/// - `failed`: the dead-letter state: a permanent error, or `max_attempts`
///   attempts used up. A maintainer may `retry` it.
/// - `cancelled`: a maintainer stopped it before it finished.
/// - `rejected`: verification failed when the job started (e.g. the range is no
///   longer part of the default branch after a force-push).
///
/// Every state but `queued` and `running` is terminal: only a maintainer's
/// `retry` (of `failed`, `cancelled`, `rejected`) moves a job out of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Running,
    Succeeded,
    NoChange,
    Skipped,
    Failed,
    Cancelled,
    Rejected,
}

impl JobState {
    /// Every state, in the order of the diagram.
    pub const ALL: [JobState; 8] = [
        JobState::Queued,
        JobState::Running,
        JobState::Succeeded,
        JobState::NoChange,
        JobState::Skipped,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Rejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Running => "running",
            JobState::Succeeded => "succeeded",
            JobState::NoChange => "no_change",
            JobState::Skipped => "skipped",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Rejected => "rejected",
        }
    }

    /// True for the states a job only leaves by a maintainer's retry (or never).
    pub fn is_terminal(self) -> bool {
        !matches!(self, JobState::Queued | JobState::Running)
    }

    /// True for the states `cancel` accepts.
    pub fn can_cancel(self) -> bool {
        matches!(self, JobState::Queued | JobState::Running)
    }

    /// True for the states `retry` accepts.
    pub fn can_retry(self) -> bool {
        matches!(
            self,
            JobState::Failed | JobState::Cancelled | JobState::Rejected
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name that is not one of [`JobState::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown job state {0:?}; expected one of queued, running, succeeded, no_change, skipped, failed, cancelled, rejected"
)]
pub struct UnknownState(pub String);

impl FromStr for JobState {
    type Err = UnknownState;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str() == text)
            .ok_or_else(|| UnknownState(text.to_owned()))
    }
}

/// Who or what asked for the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// The post-merge workflow's signed dispatch.
    Dispatch,
    /// A maintainer's request (HTTP API, CLI, request workflow, MCP).
    Request,
    /// The scheduler closing a gap after a lost dispatch.
    Sweep,
    /// An operator on the command line.
    Manual,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Dispatch => "dispatch",
            Origin::Request => "request",
            Origin::Sweep => "sweep",
            Origin::Manual => "manual",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        [
            Origin::Dispatch,
            Origin::Request,
            Origin::Sweep,
            Origin::Manual,
        ]
        .into_iter()
        .find(|origin| origin.as_str() == text)
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a new job reconciles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum JobKind {
    /// The pushes `before..after` on the default branch. `run_id` and
    /// `run_attempt` name the Actions run that dispatched it (absent for the
    /// local forge and for sweeps).
    Range {
        before: Sha,
        after: Sha,
        run_id: Option<i64>,
        run_attempt: Option<i64>,
    },
    /// One merged pull request, pinned to its merge commit.
    PullRequest { number: PullNumber, merge_sha: Sha },
}

impl JobKind {
    /// What the job reconciles, without who dispatched it.
    pub fn scope(&self) -> Scope {
        match self {
            JobKind::Range { before, after, .. } => Scope::Range {
                before: before.clone(),
                after: after.clone(),
            },
            JobKind::PullRequest { number, merge_sha } => Scope::PullRequest {
                number: *number,
                merge_sha: merge_sha.clone(),
            },
        }
    }

    pub fn name(&self) -> JobKindName {
        match self {
            JobKind::Range { .. } => JobKindName::Range,
            JobKind::PullRequest { .. } => JobKindName::PullRequest,
        }
    }
}

/// A job kind's fields as the flat, nullable columns of a `jobs` row (and of
/// the job's JSON): `None` where the kind has no such field. Written by
/// [`JobKind::columns`]; read back into a kind only by `rows.rs`, which
/// refuses a combination no kind has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KindColumns<'a> {
    pub push_before: Option<&'a Sha>,
    pub push_after: Option<&'a Sha>,
    pub run_id: Option<i64>,
    pub run_attempt: Option<i64>,
    pub pull_number: Option<PullNumber>,
    pub merge_sha: Option<&'a Sha>,
}

impl JobKind {
    /// The kind's fields as the row's columns.
    pub fn columns(&self) -> KindColumns<'_> {
        match self {
            JobKind::Range {
                before,
                after,
                run_id,
                run_attempt,
            } => KindColumns {
                push_before: Some(before),
                push_after: Some(after),
                run_id: *run_id,
                run_attempt: *run_attempt,
                pull_number: None,
                merge_sha: None,
            },
            JobKind::PullRequest { number, merge_sha } => KindColumns {
                push_before: None,
                push_after: None,
                run_id: None,
                run_attempt: None,
                pull_number: Some(*number),
                merge_sha: Some(merge_sha),
            },
        }
    }

    /// A range's `(before, after)`; `None` for other kinds.
    pub fn range(&self) -> Option<(&Sha, &Sha)> {
        match self {
            JobKind::Range { before, after, .. } => Some((before, after)),
            JobKind::PullRequest { .. } => None,
        }
    }
}

/// The kind of a job, without its fields: the `jobs.kind` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKindName {
    Range,
    PullRequest,
}

impl JobKindName {
    pub fn as_str(self) -> &'static str {
        match self {
            JobKindName::Range => "range",
            JobKindName::PullRequest => "pull_request",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "range" => Some(JobKindName::Range),
            "pull_request" => Some(JobKindName::PullRequest),
            _ => None,
        }
    }
}

impl fmt::Display for JobKindName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A job to enqueue. The caller has already authenticated and verified it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewJob {
    /// Source repository, `owner/name`.
    pub source: RepoName,
    /// Wiki destination id (from trusted config); one running job each.
    pub destination: String,
    pub origin: Origin,
    pub kind: JobKind,
    /// Who asked (recorded in the `enqueued` event and on the job).
    pub actor: String,
}

/// A stored job, built once from its row by `rows.rs`: its kind is typed, so
/// a row whose columns do not form a [`JobKind`] is an error when it is read,
/// never a job a worker could be handed. Times are unix milliseconds.
///
/// Its JSON (the HTTP API's job) is flat as the row is: `kind` is the kind's
/// name ([`JobKindName`]) and the kind's fields sit beside it
/// ([`KindColumns`], `null` where the kind has none).
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: i64,
    /// Source repository, `owner/name`: a row naming anything else is
    /// refused when read.
    pub source: RepoName,
    pub destination: String,
    pub origin: Origin,
    /// What the job reconciles (a range's `after` moved forward by
    /// coalescing).
    pub kind: JobKind,
    pub state: JobState,
    /// Attempts started (claims), reset by a maintainer's retry.
    pub attempts: i64,
    pub max_attempts: i64,
    /// Not claimable before this instant.
    pub run_after: i64,
    pub created_at: i64,
    pub updated_at: i64,
    /// When the latest attempt was claimed.
    pub started_at: Option<i64>,
    /// When the job reached its terminal state.
    pub finished_at: Option<i64>,
    pub last_error: Option<String>,
    pub receipt: Option<serde_json::Value>,
    /// How many later ranges were merged into this job.
    pub coalesced_count: i64,
    /// Who enqueued it.
    pub actor: String,
    /// The worker holding the lease (or that held it last).
    pub lease_owner: Option<String>,
    /// When the current lease expires (running jobs only).
    pub lease_until: Option<i64>,
}

/// A [`Job`] as its JSON shows it: the kind flat, as in the row.
#[derive(Serialize)]
struct FlatJob<'a> {
    id: i64,
    source: &'a str,
    destination: &'a str,
    origin: Origin,
    kind: JobKindName,
    #[serde(flatten)]
    columns: KindColumns<'a>,
    state: JobState,
    attempts: i64,
    max_attempts: i64,
    run_after: i64,
    created_at: i64,
    updated_at: i64,
    started_at: Option<i64>,
    finished_at: Option<i64>,
    last_error: Option<&'a str>,
    receipt: Option<&'a serde_json::Value>,
    coalesced_count: i64,
    actor: &'a str,
    lease_owner: Option<&'a str>,
    lease_until: Option<i64>,
}

impl Serialize for Job {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        FlatJob {
            id: self.id,
            source: self.source.as_str(),
            destination: &self.destination,
            origin: self.origin,
            kind: self.kind.name(),
            columns: self.kind.columns(),
            state: self.state,
            attempts: self.attempts,
            max_attempts: self.max_attempts,
            run_after: self.run_after,
            created_at: self.created_at,
            updated_at: self.updated_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            last_error: self.last_error.as_deref(),
            receipt: self.receipt.as_ref(),
            coalesced_count: self.coalesced_count,
            actor: &self.actor,
            lease_owner: self.lease_owner.as_deref(),
            lease_until: self.lease_until,
        }
        .serialize(serializer)
    }
}

/// What `enqueue` did with a new job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "disposition", rename_all = "snake_case")]
pub enum Disposition {
    /// A new job was stored.
    Created,
    /// The range was merged into the still-queued job `into`, whose `after`
    /// moved forward.
    Coalesced { into: i64 },
    /// The identity or delivery id was seen before: the existing job.
    Duplicate,
}

/// The answer of `enqueue`: the job that now stands for the request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Enqueued {
    pub job: Job,
    pub disposition: Disposition,
}

/// The right to work on one running job. Every worker write presents it; it
/// stops working once the job was rescued, cancelled or finished.
#[derive(Clone, PartialEq, Eq)]
pub struct Lease {
    pub job_id: i64,
    pub token: String,
}

impl fmt::Debug for Lease {
    // The token is a capability: keep it out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("job_id", &self.job_id)
            .field("token", &"<redacted>")
            .finish()
    }
}

/// A claimed job and the lease that fences its worker's writes.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub job: Job,
    pub lease: Lease,
}

/// How a running job ended without an error.
#[derive(Debug, Clone, PartialEq)]
pub enum Completion {
    /// The wiki was updated; the receipt says how.
    Succeeded { receipt: serde_json::Value },
    /// The range was reconciled and nothing needed writing.
    NoChange { receipt: serde_json::Value },
    /// Nothing to reconcile.
    Skipped { reason: String },
    /// Verification failed when the job started.
    Rejected { reason: String },
}

impl Completion {
    pub fn state(&self) -> JobState {
        match self {
            Completion::Succeeded { .. } => JobState::Succeeded,
            Completion::NoChange { .. } => JobState::NoChange,
            Completion::Skipped { .. } => JobState::Skipped,
            Completion::Rejected { .. } => JobState::Rejected,
        }
    }
}

impl Completion {
    /// True for the completions that reconcile a job's range (`succeeded`,
    /// `no_change`, `skipped`): only these may move a source's cursor.
    pub fn reconciles(&self) -> bool {
        !matches!(self, Completion::Rejected { .. })
    }
}

/// What a range job that reconciled its range does to its source's cursor
/// (the newest reconciled commit). The runner decides, because only the forge
/// knows the commit graph; the queue stores the decision in the completion's
/// transaction, and never moves the cursor to a commit it cannot tell is
/// newer: a retried old range, an old backfill range or a sweep never lowers
/// it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CursorMove {
    /// Nobody asked the forge. The cursor moves only where the queue can tell
    /// on its own that this is forward: the source has no cursor yet, or the
    /// job's range starts at the cursor (ranges are verified to descend from
    /// their start).
    #[default]
    Unchecked,
    /// The forge says the job's `after` descends from `from`: the cursor
    /// moves when it still names `from` (or in the [`CursorMove::Unchecked`]
    /// cases); if it moved meanwhile, it stays where it is.
    Descends { from: Sha },
    /// The forge says the job's `after` is not newer than the cursor (an old
    /// range retried or backfilled): the cursor stays.
    Stays,
}

/// Which jobs `list` returns, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFilter {
    /// Only jobs of this source (`owner/name`).
    pub repository: Option<String>,
    /// Only jobs of any of these sources (a token limited to repositories);
    /// `Some(vec![])` matches nothing.
    pub allowed_repositories: Option<Vec<String>>,
    pub state: Option<JobState>,
    /// Page size, 1 to [`MAX_PAGE_SIZE`].
    pub limit: u32,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// The largest page `list` returns.
pub const MAX_PAGE_SIZE: u32 = 100;

/// The page size when the caller does not say.
pub const DEFAULT_PAGE_SIZE: u32 = 50;

impl Default for JobFilter {
    fn default() -> Self {
        Self {
            repository: None,
            allowed_repositories: None,
            state: None,
            limit: DEFAULT_PAGE_SIZE,
            cursor: None,
        }
    }
}

/// One page of `list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobPage {
    pub jobs: Vec<Job>,
    /// Pass back as `JobFilter::cursor` for the next (older) page; `None` on
    /// the last page.
    pub next_cursor: Option<String>,
}

/// One entry of a job's audit trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEvent {
    pub id: i64,
    pub job_id: i64,
    pub at: i64,
    pub actor: String,
    pub event: String,
    pub detail: Option<String>,
}

/// The last reconciled commit of a source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceCursor {
    pub source: String,
    pub sha: Sha,
    /// The job whose success advanced it (`None` when set by hand).
    pub job_id: Option<i64>,
    pub updated_at: i64,
}
