//! The pull request a commit subject names, forge-neutral: `Merge pull
//! request #N from owner/branch` (a merge commit) or `Title (#N)` (a squash
//! merge). Both forges read subjects with it: the local forge to find a
//! range's pull requests, the GitHub forge to name candidates that
//! `GET /pulls/N` confirms.
//!
//! Invariant: only those two exact shapes name a number, and only a number
//! from 1 to 12 digits; `Refs #7`, `Fix(#7)`, `(#7)` or `#0` name none.
//! A named number is a candidate, never proof that the pull request merged.

/// The PR number and kind a commit subject names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullSubject {
    /// `Merge pull request #N from owner/branch`.
    Merge(u64),
    /// `Title (#N)`.
    Squash(u64),
}

impl PullSubject {
    pub fn number(self) -> u64 {
        match self {
            PullSubject::Merge(n) | PullSubject::Squash(n) => n,
        }
    }
}

fn pr_number(text: &str) -> Option<u64> {
    if text.is_empty() || text.len() > 12 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|n| *n > 0)
}

/// Recognises a pull request from a commit subject.
pub fn parse_pull_subject(subject: &str) -> Option<PullSubject> {
    if let Some(rest) = subject.strip_prefix("Merge pull request #") {
        let (n, tail) = rest.split_once(' ')?;
        return if tail.starts_with("from ") {
            pr_number(n).map(PullSubject::Merge)
        } else {
            None
        };
    }
    let inner = subject.trim_end().strip_suffix(')')?;
    let (head, n) = inner.rsplit_once("(#")?;
    if head.trim().is_empty() || !head.ends_with(' ') {
        return None;
    }
    pr_number(n).map(PullSubject::Squash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_subjects_are_recognised() {
        assert_eq!(
            parse_pull_subject("Merge pull request #12 from octo/feature"),
            Some(PullSubject::Merge(12))
        );
        assert_eq!(
            parse_pull_subject("Add the thing (#7)"),
            Some(PullSubject::Squash(7))
        );
        assert_eq!(parse_pull_subject("Merge pull request #12"), None);
        assert_eq!(parse_pull_subject("(#7)"), None);
        assert_eq!(parse_pull_subject("Fix (#x)"), None);
        assert_eq!(parse_pull_subject("Fix (#0)"), None);
        assert_eq!(parse_pull_subject("Refs #7"), None);
        assert_eq!(parse_pull_subject("Fix(#7)"), None);
    }
}
