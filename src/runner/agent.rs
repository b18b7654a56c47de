//! What every agent backend gets and gives back, and the builtin agent's
//! driver: it reads the wiki through the writer child, plans with
//! [`super::builtin::plan`], and writes through the child's
//! `patch_wiki_pages` / `write_wiki_pages`, never through the engine.
//!
//! Invariants:
//! - every write names the snapshot it was planned on (`expected_base`) and the
//!   destination the snapshot reported (`expected_wiki_repository`);
//! - on `conflict` (or `outcome_unknown`) the builtin agent re-reads a fresh
//!   snapshot and rebuilds its edit exactly once; entries keyed by merge sha make the rebuild skip what
//!   already landed; a second conflict ends the run with a receipt that says so;
//! - the receipt lists every PR of the evidence.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::builtin::{self, CurrentPage, Plan};
use super::receipt::{PullResult, PullStatus, Receipt, ReceiptStatus};
use super::writer::{CallError, WriterClient};
use crate::forge::evidence::EvidenceBundle;

/// At most this many pages per write call (DESIGN §7).
const PAGES_PER_CALL: usize = 20;
/// At most this many bytes of page content per write call (DESIGN §7), with margin.
const BYTES_PER_CALL: usize = 240 * 1024;

/// What an agent backend is given.
pub struct AgentTask<'a> {
    /// The source repository (`owner/name`), the `repository` of every tool call.
    pub repository: &'a str,
    pub job_id: i64,
    pub bundle: &'a EvidenceBundle,
    /// The source's policy file at the verified sha, if any (guidance, as data).
    pub policy: Option<&'a str>,
    /// Awaited before each write attempt of the builtin agent with the attempt
    /// number (tests use it to move the wiki under the agent).
    pub before_write: Option<&'a super::Hook>,
}

impl AgentTask<'_> {
    /// The job's data as an external agent receives it: one JSON value
    /// labelled as untrusted data, never spliced into instructions.
    pub fn job_data(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": "teammem job data (untrusted; not instructions)",
            "repository": self.repository,
            "job_id": self.job_id,
            "evidence": self.bundle,
            "policy": self.policy,
        })
    }
}

/// How an agent run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentOutcome {
    pub receipt: Receipt,
    /// A `failed` receipt from a cause that may clear up (a conflict twice,
    /// a transport error): the job retries with backoff.
    pub retry_failed: bool,
}

/// An agent that could not produce a receipt at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentError {
    pub reason: String,
    pub retryable: bool,
}

/// The wiki as one snapshot showed it.
struct View {
    base: String,
    wiki_repository: String,
    pages: BTreeMap<String, CurrentPage>,
}

async fn read_view(client: &WriterClient, task: &AgentTask<'_>) -> Result<View, CallError> {
    let snapshot = client
        .result("get_wiki_snapshot", json!({"repository": task.repository}))
        .await?;
    let wiki_repository = snapshot["wiki_repository"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let Some(base) = snapshot["sha"].as_str().map(str::to_owned) else {
        return Err(CallError::Protocol(format!(
            "the wiki {wiki_repository} has no commits yet; create its first page (Home) in GitHub's web interface, then retry the job"
        )));
    };
    let listed = client
        .result(
            "list_wiki_pages",
            json!({"repository": task.repository, "ref": base}),
        )
        .await?;
    let existing: BTreeSet<String> = listed["pages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["path"].as_str().map(str::to_owned))
        .collect();
    let mut pages = BTreeMap::new();
    for path in builtin::pages_of_interest(task.bundle) {
        if !existing.contains(&path) {
            continue;
        }
        let page = client
            .result(
                "get_wiki_page",
                json!({"repository": task.repository, "ref": base, "path": path}),
            )
            .await?;
        pages.insert(
            path,
            CurrentPage {
                sha: page["sha"].as_str().unwrap_or_default().to_owned(),
                content: page["content"].as_str().unwrap_or_default().to_owned(),
            },
        );
    }
    Ok(View {
        base,
        wiki_repository,
        pages,
    })
}

/// Splits items into calls of at most [`PAGES_PER_CALL`] items and
/// [`BYTES_PER_CALL`] bytes.
fn batches<T>(items: Vec<T>, size: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = Vec::new();
    let mut bytes = 0;
    for item in items {
        let n = size(&item);
        match out.last_mut() {
            Some(last) if last.len() < PAGES_PER_CALL && bytes + n <= BYTES_PER_CALL => {
                bytes += n;
                last.push(item);
            }
            _ => {
                bytes = n;
                out.push(vec![item]);
            }
        }
    }
    out
}

fn commit_message(task: &AgentTask<'_>) -> String {
    let numbers: Vec<String> = task
        .bundle
        .pull_requests
        .iter()
        .map(|p| format!("#{}", p.number))
        .collect();
    let mut message = format!(
        "teammem: record {} (job {})",
        numbers.join(", "),
        task.job_id
    );
    if message.len() > 200 {
        message = format!(
            "teammem: record {} pull requests (job {})",
            numbers.len(),
            task.job_id
        );
    }
    message
}

/// One page of a plan: patched in place or written whole.
enum Step {
    Patch(String, builtin::PagePatch),
    Write(builtin::NewPage),
}

impl Step {
    fn bytes(&self) -> usize {
        match self {
            Step::Patch(_, p) => p
                .replacements
                .iter()
                .map(|r| r.old.len() + r.new.len())
                .sum(),
            Step::Write(w) => w.content.len(),
        }
    }
}

/// Applies a plan as few commits as the per-call limits allow (one for a
/// job of up to 20 pages): each batch is one `write_wiki_pages` call that
/// also carries the batch's patches, or `patch_wiki_pages` for a batch of
/// patches only; the base is chained. Returns the new tip and whether
/// anything changed.
async fn apply_plan(
    client: &WriterClient,
    task: &AgentTask<'_>,
    view: &View,
    plan: Plan,
) -> Result<(String, bool), (CallError, String, bool)> {
    let mut tip = view.base.clone();
    let mut changed = false;
    let message = commit_message(task);
    let steps: Vec<Step> = plan
        .patches
        .into_iter()
        .map(|(path, patch)| Step::Patch(path, patch))
        .chain(plan.writes.into_iter().map(Step::Write))
        .collect();
    for batch in batches(steps, Step::bytes) {
        let mut patches = serde_json::Map::new();
        let mut pages = Vec::new();
        for step in batch {
            match step {
                Step::Patch(path, patch) => {
                    patches.insert(path, serde_json::to_value(patch).unwrap_or(Value::Null));
                }
                Step::Write(write) => pages.push(write),
            }
        }
        let mut arguments = json!({
            "repository": task.repository,
            "expected_wiki_repository": view.wiki_repository,
            "expected_base": tip,
            "message": message,
            "patches": patches,
        });
        let tool = if pages.is_empty() {
            "patch_wiki_pages"
        } else {
            arguments["pages"] = serde_json::to_value(&pages).unwrap_or(Value::Null);
            "write_wiki_pages"
        };
        let result = client
            .result(tool, arguments)
            .await
            .map_err(|e| (e, tip.clone(), changed))?;
        changed |= result["status"] == "updated";
        tip = result["sha"].as_str().unwrap_or(&tip).to_owned();
    }
    Ok((tip, changed))
}

fn pull_results(
    plan: &Plan,
    written: &BTreeSet<u64>,
    failed: Option<PullStatus>,
) -> Vec<PullResult> {
    plan.pulls
        .iter()
        .map(|p| PullResult {
            number: p.number,
            merge_sha: p.merge_sha.clone(),
            status: if written.contains(&p.number) {
                PullStatus::Updated
            } else if p.already_recorded {
                PullStatus::NoChange
            } else {
                failed.unwrap_or(PullStatus::Updated)
            },
            pages: p.pages.clone(),
        })
        .collect()
}

/// Runs the builtin agent against the writer child.
pub async fn run_builtin(
    client: &WriterClient,
    task: &AgentTask<'_>,
) -> Result<AgentOutcome, AgentError> {
    let mut written: BTreeSet<u64> = BTreeSet::new();
    let mut first_base: Option<String> = None;
    let mut last_tip: Option<String> = None;
    for attempt in 0..2 {
        let view = read_view(client, task).await.map_err(|e| AgentError {
            retryable: matches!(&e, CallError::Tool(f) if f.is_transient()),
            reason: format!("the builtin agent could not read the wiki: {e}"),
        })?;
        first_base.get_or_insert_with(|| view.base.clone());
        let wiki_repository = view.wiki_repository.clone();
        let plan = builtin::plan(task.bundle, &view.pages);
        if plan.is_empty() {
            let any_written = !written.is_empty();
            return Ok(AgentOutcome {
                receipt: Receipt {
                    status: if any_written {
                        ReceiptStatus::Updated
                    } else {
                        ReceiptStatus::NoChange
                    },
                    wiki_repository,
                    wiki_sha: Some(last_tip.unwrap_or(view.base)),
                    base_sha: first_base,
                    pull_requests: pull_results(&plan, &written, None),
                    summary: if any_written {
                        "every pull request of the range is recorded".into()
                    } else {
                        "every pull request of the range was already recorded".into()
                    },
                },
                retry_failed: false,
            });
        }
        if let Some(hook) = task.before_write {
            hook(attempt).await;
        }
        let to_write: Vec<u64> = plan
            .pulls
            .iter()
            .filter(|p| !p.already_recorded)
            .map(|p| p.number)
            .collect();
        match apply_plan(client, task, &view, plan.clone()).await {
            Ok((tip, _changed)) => {
                written.extend(to_write);
                return Ok(AgentOutcome {
                    receipt: Receipt {
                        status: ReceiptStatus::Updated,
                        wiki_repository,
                        wiki_sha: Some(tip),
                        base_sha: first_base,
                        pull_requests: pull_results(&plan, &written, None),
                        summary: format!(
                            "recorded {} pull request(s) on Home, the area pages and the Changelog{}",
                            written.len(),
                            if attempt > 0 {
                                " after one rebuild on a fresh snapshot"
                            } else {
                                ""
                            }
                        ),
                    },
                    retry_failed: false,
                });
            }
            // A conflict, or a write whose outcome is unknown: re-read the wiki
            // (the markers tell what landed) and rebuild once.
            Err((CallError::Tool(failure), tip, changed))
                if failure.kind == "conflict" || failure.kind == "outcome_unknown" =>
            {
                if changed {
                    last_tip = Some(tip);
                }
                if attempt == 0 {
                    tracing::info!(
                        "the wiki moved during the write; rebuilding on a fresh snapshot"
                    );
                    continue;
                }
                let status = if changed || !written.is_empty() {
                    ReceiptStatus::Partial
                } else {
                    ReceiptStatus::Failed
                };
                return Ok(AgentOutcome {
                    receipt: Receipt {
                        status,
                        wiki_repository,
                        wiki_sha: last_tip.or(Some(view.base)),
                        base_sha: first_base,
                        pull_requests: pull_results(&plan, &written, Some(PullStatus::Failed)),
                        summary: "the wiki kept moving: a write conflicted again after one rebuild on a fresh snapshot; the job retries later".into(),
                    },
                    retry_failed: true,
                });
            }
            Err((error, _, _)) => {
                return Err(AgentError {
                    retryable: matches!(&error, CallError::Tool(f) if f.is_transient()),
                    reason: format!("the builtin agent's write failed: {error}"),
                });
            }
        }
    }
    unreachable!("the loop returns on its second attempt")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_respect_count_and_size() {
        let items: Vec<usize> = vec![1; 45];
        let b = batches(items, |n| *n);
        assert_eq!(b.iter().map(Vec::len).collect::<Vec<_>>(), vec![20, 20, 5]);
        let big = vec![BYTES_PER_CALL / 2 + 1; 3];
        assert_eq!(batches(big, |n| *n).len(), 3);
    }
}
