//! How a job reads to a person: what it reconciles in one line, short shas,
//! and times, for the CLI and the dashboard alike.
//!
//! Invariant: neither the CLI nor the dashboard formats a job's kind, a sha
//! or a time on its own; both read them from here, so the two never disagree
//! about what a job is.

use super::model::{Job, JobKind};

impl Job {
    /// What the job reconciles, in full: `range 0123456789..abcdef0123` or
    /// `PR #12 (0123456789)` (the CLI's form).
    pub fn summary(&self) -> String {
        match &self.kind {
            JobKind::Range { before, after, .. } => {
                format!("range {}..{}", short_sha(before), short_sha(after))
            }
            JobKind::PullRequest { number, merge_sha } => {
                format!("PR #{number} ({})", short_sha(merge_sha))
            }
        }
    }

    /// What the job reconciles, for a table cell: `0123456789..abcdef0123` or
    /// `PR #12` (the dashboard's list).
    pub fn brief_summary(&self) -> String {
        match &self.kind {
            JobKind::Range { before, after, .. } => {
                format!("{}..{}", short_sha(before), short_sha(after))
            }
            JobKind::PullRequest { number, .. } => format!("PR #{number}"),
        }
    }
}

/// A commit sha cut to the ten characters people compare.
pub fn short_sha(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
}

/// Unix milliseconds as RFC 3339 UTC (`2026-12-02T13:43:15Z`); out of range,
/// the number itself.
pub fn rfc3339_utc(ms: i64) -> String {
    utc(ms, "%Y-%m-%dT%H:%M:%SZ").unwrap_or_else(|| ms.to_string())
}

/// Unix milliseconds as `2026-12-02 13:43:15 UTC`; out of range, nothing.
pub fn readable_utc(ms: i64) -> String {
    utc(ms, "%Y-%m-%d %H:%M:%S UTC").unwrap_or_default()
}

fn utc(ms: i64, format: &str) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.format(format).to_string())
}
