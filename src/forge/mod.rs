//! Where sources live: `github/` (the only code that talks to GitHub's REST API)
//! and `local/` (plain git repositories on this machine, read with gix).
//!
//! Both answer the same questions — is this push range a fast-forward that is
//! still on the default branch, was this PR merged into it — and both refuse with
//! a [`Refusal`] whose `code` names the check that failed. Invariant: a forge
//! never says yes on a guess; anything it could not establish is a refusal
//! (`Rejected`) or "ask again later" (`Unavailable`).

pub mod evidence; // the evidence bundle of one job: what a forge produces, bounded, and its file form
pub mod github;
pub mod history; // the default branch's first-parent history, for backfills
pub mod local;
pub mod merged_in; // the order a range's commits entered the default branch, and through which merge
pub mod pull_subject; // the pull request a merge or squash commit's subject names, for both forges
pub mod source; // the façade: one GitHub client per process, one SourceForge per source
pub mod wiki_token; // a job's wiki write token, minted and revoked by the source's forge

pub use source::{Forges, SourceForge};
pub use wiki_token::WikiToken;

/// At most this many commits in one dispatched range.
pub const MAX_RANGE_COMMITS: u64 = 1000;

/// The all-zero SHA git uses for "no commit" (branch creation/deletion).
pub const ZERO_SHA: &str = "0000000000000000000000000000000000000000";

/// A workflow run a dispatch names (`source_run_id`, `source_run_attempt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunRef {
    pub id: u64,
    pub attempt: u64,
}

/// What the forge established about a run (GitHub only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedRun {
    pub id: u64,
    pub attempt: u64,
    pub head_sha: String,
}

/// A push range the forge vouches for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedRange {
    pub default_branch: String,
    /// Commits in `before..after`.
    pub commits: u64,
    /// GitHub's numeric repository id (`None` for local sources).
    pub repository_id: Option<u64>,
    pub run: Option<VerifiedRun>,
}

/// A merged pull request the forge vouches for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedPull {
    pub number: PullNumber,
    /// The merge (or squash) commit on the default branch.
    pub merge_sha: Sha,
    pub default_branch: String,
    pub repository_id: Option<u64>,
    pub run: Option<VerifiedRun>,
}

/// A source's default branch and the commit it points at now (the sweep's
/// first question to a forge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchTip {
    pub branch: String,
    /// The commit the branch points at.
    pub sha: Sha,
}

/// How far the default branch has moved past a remembered commit (the
/// dashboard's freshness question). `commits` is exact up to
/// [`MAX_LAG_COUNTED`]; past it the walk stops and says `counted_all: false`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lag {
    /// The remembered commit is the branch's tip.
    UpToDate { tip: Sha },
    /// The branch holds `commits` commits after the remembered one; the
    /// oldest of them was committed at `since` (unix seconds), when known.
    Behind {
        tip: Sha,
        commits: u64,
        counted_all: bool,
        since: Option<i64>,
    },
    /// The remembered commit is not in the branch's history (force-push).
    Diverged { tip: Sha },
}

/// How many commits a lag count walks before it stops counting.
pub const MAX_LAG_COUNTED: u64 = 10_000;

/// How a remembered commit relates to the default branch's tip (the sweep's
/// second question).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ancestry {
    /// The commit is the tip or one of its ancestors: `commit..tip` is a
    /// fast-forward range.
    Ancestor,
    /// The commit is not in the tip's history (the branch was force-pushed, or
    /// the commit is gone).
    NotAncestor,
}

/// Why a forge would not vouch for a dispatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A check failed; `code` names it (`not_fast_forward`, `run_mismatch`, ...).
    Rejected { code: &'static str, message: String },
    /// The forge could not be asked (rate limit, outage, deadline); retry later.
    Unavailable { retry_after: u64, message: String },
}

impl Refusal {
    pub fn rejected(code: &'static str, message: impl Into<String>) -> Self {
        Refusal::Rejected {
            code,
            message: message.into(),
        }
    }

    pub fn unavailable(retry_after: u64, message: impl Into<String>) -> Self {
        Refusal::Unavailable {
            retry_after: retry_after.max(1),
            message: message.into(),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Refusal::Rejected { code, .. } => code,
            Refusal::Unavailable { .. } => "upstream_unavailable",
        }
    }
}

pub use crate::ids::is_full_sha;
use crate::ids::{PullNumber, Sha};

/// Checks that need no forge: zero SHAs and empty ranges are refused before any call.
pub fn precheck_range(before: &str, after: &str) -> Result<(), Refusal> {
    if before == ZERO_SHA || after == ZERO_SHA {
        return Err(Refusal::rejected(
            "zero_sha",
            "push_before and push_after must name commits; a zero SHA (branch creation or deletion) is not a range to reconcile",
        ));
    }
    if before.eq_ignore_ascii_case(after) {
        return Err(Refusal::rejected(
            "empty_range",
            "push_before equals push_after; the range is empty",
        ));
    }
    Ok(())
}
