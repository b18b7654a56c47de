//! Receipts: what an agent claims it did to the wiki, and the daemon's checks
//! of that claim before a job may end.
//!
//! Invariants:
//! - a receipt is parsed strictly (unknown fields, short shas, an oversized
//!   summary are refused with a sentence naming the field), and its commit
//!   ids are `Sha`s from then on;
//! - its per-PR results cover the evidence exactly: every PR of the bundle once,
//!   with its merge sha, and no PR from outside the bundle;
//! - an `updated` (or `partial`) receipt's `wiki_sha` must be reachable from the
//!   job's staged tip and descend from the base the *runner* read when the
//!   job started (the agent's own `base_sha` is not trusted for this), and
//!   carry this job's `Teammem-Job` trailer; a `no_change` receipt is refused
//!   when the job staged writes; all of this is checked before anything is
//!   published, so a receipt that does not hold publishes nothing;
//! - the status says what the job's one commit holds: `updated` may list
//!   every PR `no_change` (a commit of current-state sections only), and a
//!   `no_change` receipt never lists a PR `updated`;
//! - only a checked receipt becomes a [`Completion`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::forge::evidence::EvidenceBundle;
use crate::ids::{PullNumber, RepoName, Sha};
use crate::queue::Completion;
use crate::worker::JobFailure;

/// At most this many bytes of summary.
pub const MAX_SUMMARY_BYTES: usize = 2048;
/// At most this many pages named per pull request.
pub const MAX_PAGES_PER_PULL: usize = 200;

/// The overall outcome an agent reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptStatus {
    Updated,
    NoChange,
    Partial,
    NeedsReview,
    Failed,
}

/// The outcome for one pull request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PullStatus {
    /// Its entries were written by this job.
    Updated,
    /// Its entries were already in the wiki.
    NoChange,
    /// Deliberately left out (the summary says why).
    Skipped,
    NeedsReview,
    Failed,
}

/// One pull request's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullResult {
    pub number: PullNumber,
    pub merge_sha: Sha,
    pub status: PullStatus,
    #[serde(default)]
    pub pages: Vec<String>,
}

/// What an agent hands back at the end of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    pub status: ReceiptStatus,
    /// `owner/name` of the wiki written (as the writer reported it).
    pub wiki_repository: RepoName,
    /// The wiki tip after the agent's last write (or the unchanged tip).
    #[serde(default)]
    pub wiki_sha: Option<Sha>,
    /// The snapshot the agent started from.
    #[serde(default)]
    pub base_sha: Option<Sha>,
    pub pull_requests: Vec<PullResult>,
    pub summary: String,
}

/// A receipt as an agent writes it: its commit ids still text, so that one
/// that is not a full commit id is refused with a sentence naming its field.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReceiptText {
    status: ReceiptStatus,
    wiki_repository: String,
    #[serde(default)]
    wiki_sha: Option<String>,
    #[serde(default)]
    base_sha: Option<String>,
    pull_requests: Vec<PullResultText>,
    summary: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PullResultText {
    number: u64,
    merge_sha: String,
    status: PullStatus,
    #[serde(default)]
    pages: Vec<String>,
}

impl ReceiptText {
    fn typed(self) -> Result<Receipt, String> {
        let sha = |field: &str, text: Option<String>| {
            text.map(|text| {
                Sha::parse(&text).map_err(|_| {
                    format!("receipt.{field}: {text:?} is not a full 40-hex commit sha")
                })
            })
            .transpose()
        };
        let mut pull_requests = Vec::with_capacity(self.pull_requests.len());
        for (i, pull) in self.pull_requests.into_iter().enumerate() {
            let merge_sha = Sha::parse(&pull.merge_sha).map_err(|_| {
                format!(
                    "receipt.pull_requests[{i}].merge_sha: {:?} is not a full 40-hex sha",
                    pull.merge_sha
                )
            })?;
            let number = PullNumber::new(pull.number)
                .map_err(|e| format!("receipt.pull_requests[{i}].number: {e}"))?;
            pull_requests.push(PullResult {
                number,
                merge_sha,
                status: pull.status,
                pages: pull.pages,
            });
        }
        let wiki_repository = RepoName::parse(&self.wiki_repository).map_err(|e| {
            format!("receipt.wiki_repository: must name the wiki written as owner/name: {e}")
        })?;
        Ok(Receipt {
            status: self.status,
            wiki_repository,
            wiki_sha: sha("wiki_sha", self.wiki_sha)?,
            base_sha: sha("base_sha", self.base_sha)?,
            pull_requests,
            summary: self.summary,
        })
    }
}

impl Receipt {
    /// Parses a receipt from JSON text (an agent's final message or file).
    pub fn parse(text: &str) -> Result<Receipt, String> {
        let text = text.trim();
        // Tolerate a Markdown code fence around the JSON, nothing else.
        let text = text
            .strip_prefix("```json")
            .or_else(|| text.strip_prefix("```"))
            .and_then(|t| t.strip_suffix("```"))
            .map(str::trim)
            .unwrap_or(text);
        let receipt: ReceiptText = serde_json::from_str(text).map_err(|e| {
            format!("the agent's receipt is not valid receipt JSON: {e}; it must be one JSON object with status, wiki_repository, wiki_sha, base_sha, pull_requests and summary")
        })?;
        let receipt = receipt.typed()?;
        receipt.validate_shape()?;
        Ok(receipt)
    }

    /// Field-level rules that need no evidence.
    pub fn validate_shape(&self) -> Result<(), String> {
        if matches!(self.status, ReceiptStatus::Updated | ReceiptStatus::Partial)
            && self.wiki_sha.is_none()
        {
            return Err("receipt.wiki_sha: required when status is updated or partial".into());
        }
        if self.summary.len() > MAX_SUMMARY_BYTES {
            return Err(format!(
                "receipt.summary: {} bytes, more than {MAX_SUMMARY_BYTES}",
                self.summary.len()
            ));
        }
        for (i, pull) in self.pull_requests.iter().enumerate() {
            if pull.pages.len() > MAX_PAGES_PER_PULL
                || pull
                    .pages
                    .iter()
                    .any(|p| !p.ends_with(".md") || p.len() > 240)
            {
                return Err(format!(
                    "receipt.pull_requests[{i}].pages: at most {MAX_PAGES_PER_PULL} page paths ending in .md"
                ));
            }
        }
        let updated = self
            .pull_requests
            .iter()
            .any(|p| p.status == PullStatus::Updated);
        // An `updated` receipt whose pull requests were all on the wiki
        // before is a commit of current-state sections only ("What is here",
        // Dependencies, Home); that it holds this job's commit is checked
        // against the wiki (`check_against_wiki`).
        match self.status {
            ReceiptStatus::NoChange if updated => {
                Err("receipt.status: no_change, but a pull request has status updated".into())
            }
            _ => Ok(()),
        }
    }

    /// The per-PR results cover the bundle exactly.
    pub fn check_coverage(&self, bundle: &EvidenceBundle) -> Result<(), String> {
        let mut seen: BTreeMap<u64, &PullResult> = BTreeMap::new();
        for pull in &self.pull_requests {
            if seen.insert(pull.number.get(), pull).is_some() {
                return Err(format!(
                    "receipt.pull_requests: #{} is listed twice",
                    pull.number
                ));
            }
            match bundle.pull(pull.number.get()) {
                None => {
                    return Err(format!(
                        "receipt.pull_requests: #{} is not in this job's evidence",
                        pull.number
                    ));
                }
                Some(evidence) if !evidence.merge_sha.eq_ignore_ascii_case(&pull.merge_sha) => {
                    return Err(format!(
                        "receipt.pull_requests: #{} names merge sha {}, the evidence says {}",
                        pull.number, pull.merge_sha, evidence.merge_sha
                    ));
                }
                Some(_) => {}
            }
        }
        let missing: Vec<String> = bundle
            .pull_requests
            .iter()
            .filter(|p| !seen.contains_key(&p.number.get()))
            .map(|p| format!("#{}", p.number))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "receipt.pull_requests: no result for {} of the evidence",
                missing.join(", ")
            ))
        }
    }
}

/// The wiki as the runner read it after the agent finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WikiFacts {
    /// `owner/name` of the destination, from trusted config.
    pub wiki_repository: String,
    /// The tip the runner read before the agent started.
    pub start_base: String,
    /// Commits reachable from the destination's current tip, newest first
    /// (bounded; the tip first).
    pub history: Vec<String>,
    /// The commits after `start_base` whose message carries this job's
    /// `Teammem-Job` trailer (written through this job's writer).
    pub job_commits: Vec<String>,
}

/// Checks a receipt's claims against the wiki itself.
pub fn check_against_wiki(receipt: &Receipt, facts: &WikiFacts) -> Result<(), String> {
    if !receipt
        .wiki_repository
        .eq_ignore_ascii_case(&facts.wiki_repository)
    {
        return Err(format!(
            "receipt.wiki_repository: {:?}, but this job's wiki is {}",
            receipt.wiki_repository, facts.wiki_repository
        ));
    }
    let position = |sha: &str| {
        facts
            .history
            .iter()
            .position(|h| h.eq_ignore_ascii_case(sha))
    };
    match receipt.status {
        ReceiptStatus::Updated | ReceiptStatus::Partial => {
            let sha = receipt.wiki_sha.as_deref().unwrap_or_default();
            let Some(at) = position(sha) else {
                // Say whether the job wrote anyway: a maintainer deciding to
                // retry must know that the wiki already holds its commits.
                return Err(if facts.job_commits.is_empty() {
                    format!(
                        "receipt.wiki_sha: {sha} is not on the wiki's branch; the agent's write did not land"
                    )
                } else {
                    format!(
                        "receipt.wiki_sha: {sha} is not among this job's writes, which it staged as {}; nothing was published",
                        facts.job_commits.join(", ")
                    )
                });
            };
            if !facts
                .job_commits
                .iter()
                .any(|c| c.eq_ignore_ascii_case(sha))
            {
                return Err(format!(
                    "receipt.wiki_sha: {sha} was not written by this job's writer"
                ));
            }
            match position(&facts.start_base) {
                Some(base) if base > at => Ok(()),
                Some(base) if base == at => Err(format!(
                    "receipt.wiki_sha: {sha} is the job's starting snapshot; nothing was written"
                )),
                _ => Err(format!(
                    "receipt.wiki_sha: {sha} does not descend from the job's starting snapshot {}",
                    facts.start_base
                )),
            }
        }
        ReceiptStatus::NoChange => match receipt.wiki_sha.as_deref() {
            _ if !facts.job_commits.is_empty() => Err(format!(
                "receipt.status: no_change, but this job staged writes ({}); nothing was published",
                facts.job_commits.join(", ")
            )),
            Some(sha) if position(sha).is_none() => Err(format!(
                "receipt.wiki_sha: {sha} is not on the wiki's branch"
            )),
            _ => Ok(()),
        },
        ReceiptStatus::NeedsReview | ReceiptStatus::Failed => Ok(()),
    }
}

/// Maps a checked receipt to the job's end. `retry_failed` says whether a
/// `failed` receipt came from a transient cause (e.g. a conflict the builtin
/// agent could not resolve in its one retry).
pub fn completion(receipt: &Receipt, retry_failed: bool) -> Result<Completion, JobFailure> {
    let value = serde_json::to_value(receipt).unwrap_or(serde_json::Value::Null);
    match receipt.status {
        ReceiptStatus::Updated => Ok(Completion::Succeeded { receipt: value }),
        ReceiptStatus::NoChange => Ok(Completion::NoChange { receipt: value }),
        ReceiptStatus::Partial => Err(JobFailure {
            reason: format!(
                "the agent updated the wiki only partly: {}; the job retries and skips what is already recorded",
                one_line(&receipt.summary)
            ),
            retryable: true,
            receipt: Some(value),
        }),
        ReceiptStatus::NeedsReview => Err(JobFailure {
            reason: format!(
                "the agent asks a maintainer to review: {}; review the wiki, then retry the job",
                one_line(&receipt.summary)
            ),
            retryable: false,
            receipt: Some(value),
        }),
        ReceiptStatus::Failed => Err(JobFailure {
            reason: format!("the agent failed: {}", one_line(&receipt.summary)),
            retryable: retry_failed,
            receipt: Some(value),
        }),
    }
}

/// Collapses whitespace and trims the trailing period for an error message.
pub fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (bounded, _) = crate::forge::evidence::bound(&joined, 512);
    bounded.trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(c: char) -> String {
        c.to_string().repeat(40)
    }

    /// The builtin's sample bundle with pull requests #1 (merge `a…a`)
    /// and #2 (merge `b…b`).
    fn bundle() -> EvidenceBundle {
        use crate::runner::builtin::samples::{bundle, pull};
        bundle(vec![pull(1, "t", 'a', &[]), pull(2, "t", 'b', &[])])
    }

    fn receipt(status: &str, pulls: &str) -> String {
        format!(
            r#"{{"status":"{status}","wiki_repository":"demo/app","wiki_sha":"{}","base_sha":"{}","pull_requests":{pulls},"summary":"ok."}}"#,
            sha('e'),
            sha('d')
        )
    }

    fn both(status: &str) -> String {
        format!(
            r#"[{{"number":1,"merge_sha":"{}","status":"{status}","pages":["Changelog.md"]}},{{"number":2,"merge_sha":"{}","status":"{status}"}}]"#,
            sha('a'),
            sha('b')
        )
    }

    fn facts(history: &[char]) -> WikiFacts {
        WikiFacts {
            wiki_repository: "demo/app".into(),
            start_base: sha('d'),
            history: history.iter().map(|c| sha(*c)).collect(),
            job_commits: vec![sha('e')],
        }
    }

    #[test]
    fn a_good_receipt_parses_covers_and_checks() {
        let r = Receipt::parse(&receipt("updated", &both("updated"))).unwrap();
        r.check_coverage(&bundle()).unwrap();
        check_against_wiki(&r, &facts(&['e', 'c', 'd'])).unwrap();
        assert!(matches!(
            completion(&r, false),
            Ok(Completion::Succeeded { .. })
        ));
        // A code fence around it is tolerated.
        let fenced = format!("```json\n{}\n```", receipt("updated", &both("updated")));
        assert_eq!(Receipt::parse(&fenced).unwrap(), r);
    }

    #[test]
    fn malformed_receipts_name_the_field() {
        let bad = receipt("updated", &both("updated")).replace(&sha('e'), "abc");
        assert!(
            Receipt::parse(&bad)
                .unwrap_err()
                .contains("receipt.wiki_sha")
        );
        let extra =
            receipt("updated", &both("updated")).replace("\"summary\"", "\"x\":1,\"summary\"");
        assert!(
            Receipt::parse(&extra)
                .unwrap_err()
                .contains("unknown field")
        );
        assert!(Receipt::parse("I updated the wiki!").is_err());
        // Ids that are not what they name are refused naming the field.
        let zero = receipt("updated", &both("updated")).replace(r#""number":1"#, r#""number":0"#);
        assert!(
            Receipt::parse(&zero)
                .unwrap_err()
                .starts_with("receipt.pull_requests[0].number:")
        );
        let nameless = receipt("updated", &both("updated")).replace("demo/app", "demo app");
        assert!(
            Receipt::parse(&nameless)
                .unwrap_err()
                .starts_with("receipt.wiki_repository:")
        );
        let short = receipt("updated", &both("updated")).replace(&sha('e'), "eee");
        assert!(
            Receipt::parse(&short)
                .unwrap_err()
                .starts_with("receipt.wiki_sha:")
        );
        let lying = receipt("no_change", &both("updated"));
        assert!(
            Receipt::parse(&lying)
                .unwrap_err()
                .contains("receipt.status")
        );
        // Sections only: updated, every pull request already recorded.
        assert!(Receipt::parse(&receipt("updated", &both("no_change"))).is_ok());
        let long = receipt("updated", &both("updated")).replace("ok.", &"x".repeat(3000));
        assert!(
            Receipt::parse(&long)
                .unwrap_err()
                .contains("receipt.summary")
        );
    }

    #[test]
    fn coverage_must_match_the_evidence_exactly() {
        let one = format!(
            r#"[{{"number":1,"merge_sha":"{}","status":"updated"}}]"#,
            sha('a')
        );
        let r = Receipt::parse(&receipt("updated", &one)).unwrap();
        assert!(r.check_coverage(&bundle()).unwrap_err().contains("#2"));
        let foreign = both("updated").replace("\"number\":2", "\"number\":3");
        let r = Receipt::parse(&receipt("updated", &foreign)).unwrap();
        assert!(
            r.check_coverage(&bundle())
                .unwrap_err()
                .contains("#3 is not in this job's evidence")
        );
        let wrong_sha = both("updated").replace(&sha('b'), &sha('c'));
        let r = Receipt::parse(&receipt("updated", &wrong_sha)).unwrap();
        assert!(
            r.check_coverage(&bundle())
                .unwrap_err()
                .contains("merge sha")
        );
    }

    #[test]
    fn the_wiki_must_confirm_an_update() {
        let r = Receipt::parse(&receipt("updated", &both("updated"))).unwrap();
        // Not on the branch, and the job wrote nothing.
        let nothing_written = WikiFacts {
            job_commits: vec![],
            ..facts(&['c', 'd'])
        };
        assert!(
            check_against_wiki(&r, &nothing_written)
                .unwrap_err()
                .contains("did not land")
        );
        // Not among the job's writes, though it staged some: the reason says
        // what it staged and that nothing was published.
        let other_write = WikiFacts {
            job_commits: vec![sha('f')],
            ..facts(&['f', 'd'])
        };
        let landed = check_against_wiki(&r, &other_write).unwrap_err();
        assert!(
            landed.contains(&format!("staged as {}", sha('f')))
                && landed.contains("nothing was published")
                && !landed.contains("did not land"),
            "{landed}"
        );
        // On the branch but not descending from the start.
        assert!(
            check_against_wiki(&r, &facts(&['c', 'e']))
                .unwrap_err()
                .contains("does not descend")
        );
        // Someone else's commit is not this job's write.
        let foreign = WikiFacts {
            job_commits: vec![sha('c')],
            ..facts(&['e', 'c', 'd'])
        };
        assert!(
            check_against_wiki(&r, &foreign)
                .unwrap_err()
                .contains("not written by this job")
        );
        // Another destination.
        let mut other = facts(&['e', 'd']);
        other.wiki_repository = "evil/wiki".into();
        assert!(
            check_against_wiki(&r, &other)
                .unwrap_err()
                .contains("wiki_repository")
        );
    }

    #[test]
    fn statuses_map_to_job_ends() {
        let no = Receipt::parse(&receipt("no_change", &both("no_change"))).unwrap();
        let quiet = WikiFacts {
            job_commits: vec![],
            ..facts(&['e', 'd'])
        };
        check_against_wiki(&no, &quiet).unwrap();
        // A no_change receipt from a job that staged writes is a lie.
        assert!(
            check_against_wiki(&no, &facts(&['e', 'd']))
                .unwrap_err()
                .contains("this job staged writes")
        );
        assert!(matches!(
            completion(&no, false),
            Ok(Completion::NoChange { .. })
        ));
        let partial = Receipt::parse(&receipt("partial", &both("updated"))).unwrap();
        assert!(completion(&partial, false).unwrap_err().retryable);
        let review = Receipt::parse(&receipt("needs_review", &both("needs_review"))).unwrap();
        assert!(!completion(&review, false).unwrap_err().retryable);
        let failed = Receipt::parse(&receipt("failed", &both("failed"))).unwrap();
        let f = completion(&failed, true).unwrap_err();
        assert!(f.retryable);
        assert_eq!(f.reason, "the agent failed: ok");
    }
}
