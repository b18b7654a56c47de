//! The builtin agent's driver: it reads the wiki and the source through the
//! writer child (`read.rs`, `read_manifests.rs`), plans with
//! [`super::planner::plan_full`], and writes through the child's
//! `patch_wiki_pages` / `write_wiki_pages`, never through the engine; then
//! says what it did in a receipt.
//!
//! Invariants:
//! - a job for one merged PR (a maintainer's request, possibly for an old PR)
//!   never re-derives the current-state sections ("What is here",
//!   `Dependencies.md`, `How-to-work-here.md`): only range jobs, whose tip is the newest commit
//!   reconciled, do;
//! - every write names the snapshot it was planned on (`expected_base`) and
//!   the destination the snapshot reported (`expected_wiki_repository`);
//! - its write calls are staged by the writer and the runner publishes them
//!   as the job's one commit, so a job may use as many calls as the
//!   per-call limits need (each call builds on the previous call's sha);
//! - on `conflict` (or `outcome_unknown`) it re-reads a fresh snapshot and
//!   rebuilds its edit exactly once; entries keyed by merge sha make the
//!   rebuild skip what already landed; a second conflict ends the run with a
//!   receipt that says so;
//! - the receipt lists every PR of the evidence, and says `updated` exactly
//!   when the run staged something (pull requests recorded or only
//!   sections), for that is what the job's one commit holds.

use std::collections::{BTreeMap, BTreeSet};

use super::budget::{PAGE_BUDGET, apply_replacements};
use super::inputs::{CurrentPage, DependencyFacts, Listings};
use super::interest::areas_to_record;
use super::markers::{DEPENDENCIES, HOW_TO_WORK};
use super::plan::{NewPage, Plan, PlannedPatch};
use super::planner::plan_all;
use super::read::{HEADS_PER_JOB, View, page_key, read_listings, read_view, transient};
use super::read_how_to::read_how_to;
use super::read_manifests::read_dependencies;
use super::sections::refresh_order;
use crate::ids::Sha;
use crate::runner::agent::{AgentError, AgentOutcome, AgentTask};
use crate::runner::receipt::{PullResult, PullStatus, Receipt, ReceiptStatus};
use crate::runner::writer::{CallError, WriterClient};
use crate::wiki::{ErrorKind, WriteStatus};
use crate::writer_contract::tools::{PageArg, PatchArg, PatchArgs, ReplacementArg, WriteArgs};

/// At most this many pages per write call (DESIGN §7).
const PAGES_PER_CALL: usize = 20;
/// At most this many bytes of page content per write call (DESIGN §7), with margin.
const BYTES_PER_CALL: usize = 240 * 1024;
/// At most this many replacements per call (DESIGN §7).
const REPLACEMENTS_PER_CALL: usize = crate::wiki::validate::MAX_REPLACEMENTS;

/// Splits items into calls of at most [`PAGES_PER_CALL`] items,
/// [`BYTES_PER_CALL`] bytes and [`REPLACEMENTS_PER_CALL`] replacements;
/// `weigh` gives an item's bytes and replacements.
fn batches<T>(items: Vec<T>, weigh: impl Fn(&T) -> (usize, usize)) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = Vec::new();
    let (mut bytes, mut replacements) = (0, 0);
    for item in items {
        let (n, r) = weigh(&item);
        match out.last_mut() {
            Some(last)
                if last.len() < PAGES_PER_CALL
                    && bytes + n <= BYTES_PER_CALL
                    && replacements + r <= REPLACEMENTS_PER_CALL =>
            {
                bytes += n;
                replacements += r;
                last.push(item);
            }
            _ => {
                (bytes, replacements) = (n, r);
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
    if numbers.is_empty() {
        return format!(
            "teammem: follow files changed outside pull requests (job {})",
            task.job_id
        );
    }
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
    Patch(String, PlannedPatch),
    Write(NewPage),
}

impl Step {
    /// The bytes and replacements the step adds to a call: the bytes are the
    /// page as the step leaves it (the writer bounds a call by the sizes of
    /// the pages it results in, patched pages whole), `pages` holding the
    /// current ones.
    fn weight(&self, pages: &BTreeMap<String, CurrentPage>) -> (usize, usize) {
        match self {
            Step::Patch(path, p) => {
                let now = pages.get(path).map_or(0, |page| page.content.len());
                let grown: usize = p.replacements.iter().map(|r| r.new.len()).sum();
                let shrunk: usize = p.replacements.iter().map(|r| r.old.len()).sum();
                ((now + grown).saturating_sub(shrunk), p.replacements.len())
            }
            Step::Write(w) => (w.content.len(), 0),
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
    for batch in batches(steps, |step| step.weight(&view.pages)) {
        let mut patches = BTreeMap::new();
        let mut pages = Vec::new();
        for step in batch {
            match step {
                Step::Patch(path, patch) => {
                    patches.insert(path, patch_arg(patch));
                }
                Step::Write(write) => pages.push(PageArg {
                    path: write.path,
                    content: write.content,
                }),
            }
        }
        let (repository, expected_wiki_repository, expected_base, message) = (
            task.repository.to_owned(),
            view.wiki_repository.clone(),
            tip.clone(),
            message.clone(),
        );
        let written = if pages.is_empty() {
            client
                .patch_pages(&PatchArgs {
                    repository,
                    expected_wiki_repository,
                    expected_base,
                    message,
                    patches,
                })
                .await
        } else {
            client
                .write_pages(&WriteArgs {
                    repository,
                    expected_wiki_repository,
                    expected_base,
                    message,
                    pages,
                    patches,
                })
                .await
        };
        let written = written.map_err(|e| (e, tip.clone(), changed))?;
        changed |= written.status == WriteStatus::Updated;
        tip = written.sha;
    }
    Ok((tip, changed))
}

/// Fits `plan` to the wiki as a person left it: a patch of a page the
/// person moved into a folder or renamed in case only goes where the person
/// put it; a new page whose name another page already has (in another folder
/// or case: two pages of one name, which a GitHub wiki cannot tell apart) is
/// not written, and that page is left alone; so is a page a patch would
/// take past [`PAGE_BUDGET`] (a person's text filled it: its oldest
/// entries dropped are not enough). Returns a note for each page not
/// written or not changed.
fn fit_to_wiki(plan: &mut Plan, view: &View) -> Vec<String> {
    let mut notes = Vec::new();
    let patches = std::mem::take(&mut plan.patches);
    plan.patches = patches
        .into_iter()
        .filter(|(path, patch)| {
            let Some(page) = view.pages.get(path) else {
                return true;
            };
            let too_big = apply_replacements(&page.content, &patch.replacements)
                .is_ok_and(|after| after.len() > PAGE_BUDGET);
            if too_big {
                tracing::warn!(page = %path, "a page a person filled is left alone: patched, it would pass the page limit");
                notes.push(format!(
                    "{path} was not changed: with the text on it, it would pass {} KiB (the writer's page limit) even without its older entries; its new entries are on its quarter pages",
                    PAGE_BUDGET / 1024
                ));
            }
            !too_big
        })
        .map(|(path, patch)| (view.moved.get(&path).cloned().unwrap_or(path), patch))
        .collect();
    plan.writes.retain(|write| {
        let taken: Vec<&String> = view
            .by_name
            .get(&page_key(&write.path))
            .into_iter()
            .flatten()
            .filter(|there| **there != write.path)
            .collect();
        if taken.is_empty() {
            return true;
        }
        let there = taken
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        tracing::warn!(page = %write.path, there = %there, "a page of this name is already on the wiki elsewhere; it is left alone and this page is not written");
        notes.push(format!(
            "{} was not written: the wiki already has a page of that name ({there})",
            write.path
        ));
        false
    });
    notes
}

/// `summary`, then what the run left alone (`notes`), within the receipt's
/// bound on a summary (the notes that do not fit are counted).
fn with_notes(summary: String, notes: &BTreeSet<String>) -> String {
    if notes.is_empty() {
        return summary;
    }
    let mut out = format!("{summary}; left alone because a person changed it:");
    for (n, note) in notes.iter().enumerate() {
        // Room for this note and for " and N more".
        if out.len() + note.len() + 2 + 32 > crate::runner::receipt::MAX_SUMMARY_BYTES {
            out.push_str(&format!(" and {} more", notes.len() - n));
            break;
        }
        out.push_str(if n == 0 { " " } else { "; " });
        out.push_str(note);
    }
    out
}

/// A planned patch as the writer takes it.
fn patch_arg(patch: PlannedPatch) -> PatchArg {
    PatchArg {
        expected_sha: patch.expected_sha,
        replacements: patch
            .replacements
            .into_iter()
            .map(|r| ReplacementArg {
                old: r.old,
                new: r.new,
            })
            .collect(),
    }
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
            status: if written.contains(&p.number.get()) {
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

/// How a run whose writes are all done reports them: `updated` when this
/// job staged anything, for the one commit holds it, whether or not a pull
/// request was newly recorded (a commit may change only current-state
/// sections: "What is here", `Dependencies.md`, `How-to-work-here.md`,
/// Home), `no_change` when it staged nothing; each pull request `updated`
/// when this job recorded it (`written`), `no_change` when it was on the wiki
/// before (or nothing was staged: the pages already said it). Returns the
/// status, the per-PR results and the summary.
fn finished(
    plan: &Plan,
    written: &BTreeSet<u64>,
    staged: bool,
    attempt: u32,
) -> (ReceiptStatus, Vec<PullResult>, String) {
    let status = if staged {
        ReceiptStatus::Updated
    } else {
        ReceiptStatus::NoChange
    };
    let summary = match (staged, written.is_empty()) {
        (true, false) => format!(
            "recorded {} pull request(s) on Home, the area pages and the Changelog{}",
            written.len(),
            rebuilt(attempt)
        ),
        (true, true) => format!(
            "every pull request of the range was already recorded; brought the pages' current-state sections up to date{}",
            rebuilt(attempt)
        ),
        (false, _) => "every pull request of the range was already recorded".to_owned(),
    };
    let mut pulls = pull_results(plan, written, None);
    if !staged {
        // Nothing staged: the writer found every planned page as planned.
        for pull in &mut pulls {
            pull.status = PullStatus::NoChange;
        }
    }
    (status, pulls, summary)
}

/// What a summary says of the attempt it was written on.
fn rebuilt(attempt: u32) -> &'static str {
    if attempt > 0 {
        " after one rebuild on a fresh snapshot"
    } else {
        ""
    }
}

/// Runs the builtin agent against the writer child.
/// A wiki commit id the writer answered, as a receipt carries it.
fn wiki_commit(text: String) -> Result<Sha, AgentError> {
    Sha::parse(&text).map_err(|e| AgentError {
        retryable: false,
        reason: format!("the writer answered a wiki commit that is not a commit id: {e}"),
    })
}

pub async fn run(client: &WriterClient, task: &AgentTask<'_>) -> Result<AgentOutcome, AgentError> {
    let mut written: BTreeSet<u64> = BTreeSet::new();
    let mut first_base: Option<String> = None;
    let mut last_tip: Option<String> = None;
    let mut listings = Listings::new();
    let mut heads = HEADS_PER_JOB;
    let mut deps: Option<DependencyFacts> = None;
    let mut how_to = None;
    let current_state = matches!(task.bundle.job.scope, crate::ids::Scope::Range { .. })
        && task.bundle.tip_is_newest;
    // What the run left alone because a person changed it, for the receipt.
    let mut notes: BTreeSet<String> = BTreeSet::new();
    // The pull requests already on the wiki when the run first planned: one
    // recorded later, by the run's own staged writes before a conflict, is
    // this job's (a rebuild reads the staged state, where it is recorded).
    let mut recorded_at_start: Option<BTreeSet<u64>> = None;
    for attempt in 0..2 {
        let view = read_view(client, task).await.map_err(|e| AgentError {
            retryable: transient(&e),
            reason: format!("the builtin agent could not read the wiki: {e}"),
        })?;
        first_base.get_or_insert_with(|| view.base.clone());
        let wiki_repository =
            crate::ids::RepoName::parse(&view.wiki_repository).map_err(|e| AgentError {
                retryable: false,
                reason: format!("the writer named a wiki that is not owner/name: {e}"),
            })?;
        // The areas that get entries have their files read (once per run),
        // by range jobs whose tip is the newest commit reconciled only: a
        // request for one (possibly old) merged PR, a retried old range or a
        // backfill range behind the cursor must not set the pages' current
        // state back to its tip.
        let areas = areas_to_record(task.bundle, &view.pages);
        if current_state && areas.iter().any(|slug| !listings.contains_key(slug)) {
            let order = refresh_order(&areas, &view.pages, task.bundle.job.tip());
            read_listings(client, task, &order, &mut listings, &mut heads)
                .await
                .map_err(|e| AgentError {
                    retryable: transient(&e),
                    reason: format!("the builtin agent could not read the source's files: {e}"),
                })?;
        }
        if deps.is_none() {
            let page_exists = view.pages.contains_key(DEPENDENCIES);
            deps = Some(
                read_dependencies(client, task, page_exists, current_state)
                    .await
                    .map_err(|e| AgentError {
                        retryable: transient(&e),
                        reason: format!(
                            "the builtin agent could not read the source's manifests: {e}"
                        ),
                    })?,
            );
        }
        if how_to.is_none() {
            let page_exists = view.pages.contains_key(HOW_TO_WORK);
            how_to = Some(
                read_how_to(client, task, page_exists, current_state)
                    .await
                    .map_err(|e| AgentError {
                        retryable: transient(&e),
                        reason: format!(
                            "the builtin agent could not read the source's build and test files: {e}"
                        ),
                    })?,
            );
        }
        let mut plan = plan_all(
            task.bundle,
            &view.pages,
            &listings,
            deps.as_ref().unwrap_or(&DependencyFacts::default()),
            how_to.as_ref().and_then(Option::as_ref),
        );
        let recorded_now: BTreeSet<u64> = plan
            .pulls
            .iter()
            .filter(|p| p.already_recorded)
            .map(|p| p.number.get())
            .collect();
        match &recorded_at_start {
            None => recorded_at_start = Some(recorded_now),
            Some(before) if last_tip.is_some() => {
                written.extend(recorded_now.difference(before).copied());
            }
            Some(_) => {}
        }
        notes.extend(fit_to_wiki(&mut plan, &view));
        for note in &plan.notes {
            if notes.insert(note.clone()) {
                tracing::warn!(
                    job = task.job_id,
                    "left alone because a person changed it: {note}"
                );
            }
        }
        if plan.is_empty() {
            // Whatever this run staged before a conflict is the job's one
            // commit, pull requests recorded or only sections.
            let (status, pull_requests, summary) =
                finished(&plan, &written, last_tip.is_some(), attempt);
            return Ok(AgentOutcome {
                receipt: Receipt {
                    status,
                    wiki_repository,
                    wiki_sha: Some(wiki_commit(last_tip.unwrap_or(view.base))?),
                    base_sha: first_base.map(wiki_commit).transpose()?,
                    pull_requests,
                    summary: with_notes(summary, &notes),
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
            .map(|p| p.number.get())
            .collect();
        match apply_plan(client, task, &view, plan.clone()).await {
            Ok((tip, changed)) => {
                let staged = changed || last_tip.is_some();
                if staged {
                    written.extend(to_write);
                }
                let (status, pull_requests, summary) = finished(&plan, &written, staged, attempt);
                return Ok(AgentOutcome {
                    receipt: Receipt {
                        status,
                        wiki_repository,
                        wiki_sha: Some(wiki_commit(if changed {
                            tip
                        } else {
                            last_tip.unwrap_or(tip)
                        })?),
                        base_sha: first_base.map(wiki_commit).transpose()?,
                        pull_requests,
                        summary: with_notes(summary, &notes),
                    },
                    retry_failed: false,
                });
            }
            // A conflict, or a write whose outcome is unknown: re-read the wiki
            // (the markers tell what landed) and rebuild once.
            Err((CallError::Tool(failure), tip, changed))
                if matches!(
                    failure.kind,
                    ErrorKind::Conflict | ErrorKind::OutcomeUnknown
                ) =>
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
                let status = if last_tip.is_some() || !written.is_empty() {
                    ReceiptStatus::Partial
                } else {
                    ReceiptStatus::Failed
                };
                return Ok(AgentOutcome {
                    receipt: Receipt {
                        status,
                        wiki_repository,
                        wiki_sha: Some(wiki_commit(last_tip.unwrap_or(view.base))?),
                        base_sha: first_base.map(wiki_commit).transpose()?,
                        pull_requests: pull_results(&plan, &written, Some(PullStatus::Failed)),
                        summary: "the wiki kept moving: a write conflicted again after one rebuild on a fresh snapshot; the job retries later".into(),
                    },
                    retry_failed: true,
                });
            }
            Err((error, _, _)) => {
                return Err(AgentError {
                    retryable: transient(&error),
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
    use crate::runner::builtin::plan::Replacement;

    #[test]
    fn a_patch_weighs_the_page_it_leaves_not_its_replacements() {
        let page = |content: String| CurrentPage {
            sha: String::new(),
            content,
        };
        // Five 60 KiB area pages, each patched with a 100-byte change: the
        // writer counts the five whole pages (300 KiB), so two calls.
        let mut pages = BTreeMap::new();
        let mut steps = Vec::new();
        for n in 0..5 {
            let path = format!("Areas/a{n}.md");
            pages.insert(path.clone(), page("x".repeat(60 * 1024)));
            let patch = PlannedPatch {
                expected_sha: String::new(),
                replacements: vec![Replacement {
                    old: "x".repeat(50),
                    new: "y".repeat(150),
                }],
            };
            steps.push(Step::Patch(path, patch));
        }
        assert_eq!(steps[0].weight(&pages), (60 * 1024 + 100, 1));
        let calls = batches(steps, |step| step.weight(&pages));
        assert_eq!(calls.iter().map(Vec::len).collect::<Vec<_>>(), vec![3, 2]);
        for call in &calls {
            let bytes: usize = call.iter().map(|step| step.weight(&pages).0).sum();
            assert!(bytes <= crate::wiki::validate::MAX_BATCH_BYTES, "{bytes}");
        }
    }

    #[test]
    fn notes_follow_the_summary_within_a_receipts_bound() {
        let none = BTreeSet::new();
        assert_eq!(with_notes("done".into(), &none), "done");
        let notes: BTreeSet<String> = (0..100)
            .map(|i| {
                format!("the What is here section of Area-{i:03}.md (its markers were edited)")
            })
            .collect();
        let summary = with_notes("recorded 1 pull request(s)".into(), &notes);
        assert!(
            summary.len() <= crate::runner::receipt::MAX_SUMMARY_BYTES,
            "{}",
            summary.len()
        );
        assert!(summary.starts_with("recorded 1 pull request(s); left alone because a person changed it: the What is here section of Area-000.md"));
        let shown = summary.matches("Area-").count();
        assert!(shown > 10 && shown < 100, "{shown}");
        assert!(
            summary.ends_with(&format!(" and {} more", 100 - shown)),
            "{summary}"
        );
    }

    #[test]
    fn a_run_that_staged_anything_says_updated_whatever_its_pull_requests_say() {
        let pull = |number: u64, already_recorded: bool| super::super::plan::PullPlan {
            number: crate::ids::PullNumber::new(number).unwrap(),
            merge_sha: Sha::parse(&format!("{number:040x}")).unwrap(),
            pages: vec!["Changelog.md".into()],
            already_recorded,
        };
        // Recorded before the run: #1. By this run's staged writes: #2.
        let plan = Plan {
            pulls: vec![pull(1, true), pull(2, true)],
            ..Plan::default()
        };
        let statuses = |pulls: &[PullResult]| pulls.iter().map(|p| p.status).collect::<Vec<_>>();
        let recorded: BTreeSet<u64> = [2].into();
        let (status, pulls, summary) = finished(&plan, &recorded, true, 1);
        assert_eq!(status, ReceiptStatus::Updated);
        assert_eq!(
            statuses(&pulls),
            [PullStatus::NoChange, PullStatus::Updated]
        );
        assert!(
            summary.contains("recorded 1 pull request(s)") && summary.contains("rebuild"),
            "{summary}"
        );
        // Staged, but only sections (a rebuild whose first call recorded no
        // pull request, or a replay that brings Home up to date): updated.
        let (status, pulls, summary) = finished(&plan, &BTreeSet::new(), true, 1);
        assert_eq!(status, ReceiptStatus::Updated);
        assert_eq!(statuses(&pulls), [PullStatus::NoChange; 2]);
        assert!(
            summary.contains("already recorded") && summary.contains("current-state"),
            "{summary}"
        );
        // Nothing staged: no_change, and no pull request updated.
        let fresh = Plan {
            pulls: vec![pull(1, true), pull(3, false)],
            ..Plan::default()
        };
        let (status, pulls, _) = finished(&fresh, &BTreeSet::new(), false, 0);
        assert_eq!(status, ReceiptStatus::NoChange);
        assert_eq!(statuses(&pulls), [PullStatus::NoChange; 2]);
        // Each of these passes the receipt's own shape rules.
        for (status, pulls) in [
            finished(&plan, &BTreeSet::new(), true, 1),
            finished(&fresh, &BTreeSet::new(), false, 0),
        ]
        .map(|(status, pulls, _)| (status, pulls))
        {
            let receipt = Receipt {
                status,
                wiki_repository: crate::ids::RepoName::parse("demo/app").unwrap(),
                wiki_sha: Some(Sha::parse(&"e".repeat(40)).unwrap()),
                base_sha: Some(Sha::parse(&"d".repeat(40)).unwrap()),
                pull_requests: pulls,
                summary: "ok".into(),
            };
            receipt.validate_shape().unwrap();
        }
    }

    #[test]
    fn batches_respect_count_size_and_replacements() {
        let items: Vec<usize> = vec![1; 45];
        let b = batches(items, |n| (*n, 0));
        assert_eq!(b.iter().map(Vec::len).collect::<Vec<_>>(), vec![20, 20, 5]);
        let big = vec![BYTES_PER_CALL / 2 + 1; 3];
        assert_eq!(batches(big, |n| (*n, 0)).len(), 3);
        // 20 area pages of 3 replacements each: 13 fit in 40.
        let patches: Vec<usize> = vec![3; 20];
        let b = batches(patches, |r| (1, *r));
        assert_eq!(b.iter().map(Vec::len).collect::<Vec<_>>(), vec![13, 7]);
        assert!(
            b.iter()
                .all(|call| call.iter().sum::<usize>() <= REPLACEMENTS_PER_CALL)
        );
    }
}
