//! `backfill`: adoption on a repository with history. Enqueues a source's
//! earlier first-parent history as contiguous range jobs of the ordinary
//! queue, oldest first; `--status` shows how far each backfill got,
//! `--cancel` cancels a source's queued backfill ranges. Like `jobs`, it works
//! on the daemon's database directly, and asks the source's forge (local git
//! or the GitHub App) for the history.
//!
//! Invariants:
//! - bad input (an unknown source, a start that is not in the history, a
//!   malformed date) is refused before anything is written;
//! - the history ends at the source's cursor (the newest reconciled commit;
//!   what comes after it is the ordinary dispatches' and the sweep's), or at
//!   the default branch's tip when there is none yet; `--last N` starts it at
//!   the N-th newest merge (`forge::history::is_merge`, on either forge);
//! - a first-parent commit already inside a range job of the source (any
//!   origin, any state but cancelled or rejected) is not planned again, so
//!   running the same backfill twice enqueues nothing the second time;
//! - a range holds at most [`MAX_MERGES_PER_RANGE`] first-parent commits and,
//!   where the forge counts them, at most [`MAX_COMMITS_PER_RANGE`] commits
//!   (a single larger merge is a range of its own): each job stays small.

use std::collections::HashMap;

use clap::Args;

use super::{ConfigArg, Failure, OrFail, open_db, print_json, source_names};
use crate::forge::history::{
    FirstParent, HistoryStart, MAX_COMMITS_PER_RANGE, MAX_HISTORY, MAX_MERGES_PER_RANGE,
};
use crate::forge::{Ancestry, Forges, Refusal};
use crate::ids::Sha;
use crate::queue::backfill::{BackfillStatus, NewBackfill};
use crate::queue::{JobState, Queue, readable_utc, short_sha};

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").args(["last", "since", "status", "cancel"]).required(true)))]
pub(super) struct BackfillArgs {
    #[command(flatten)]
    config: ConfigArg,
    /// The source repository (owner/name)
    #[arg(long)]
    repository: Option<String>,
    /// The last N merges before the reconciled commit: first-parent commits
    /// with two or more parents, or whose subject names a pull request
    /// ("Merge pull request #N from …", "Title (#N)"); direct commits among
    /// them come along uncounted
    #[arg(long, value_name = "N")]
    last: Option<usize>,
    /// Everything after COMMIT (40 hex digits, on the default branch), or
    /// committed since DATE (YYYY-MM-DD, UTC, or RFC 3339)
    #[arg(long, value_name = "COMMIT|DATE")]
    since: Option<String>,
    /// Show every backfill (of --repository) and how far it got
    #[arg(long)]
    status: bool,
    /// Cancel the queued ranges of --repository's backfills
    #[arg(long)]
    cancel: bool,
    /// Print JSON
    #[arg(long)]
    json: bool,
}

pub(super) async fn run_backfill(args: BackfillArgs) -> Result<(), Failure> {
    let (config, pool) = open_db(&args.config.config).await?;
    let queue = Queue::from_config(&config, pool);
    let source = match &args.repository {
        None => None,
        Some(repository) => Some(
            config
                .sources
                .iter()
                .find(|s| s.repository.eq_ignore_ascii_case(repository))
                .ok_or_else(|| {
                    Failure::usage(format!(
                        "--repository: {repository} is not a configured source; configured: {}",
                        source_names(&config)
                    ))
                })?,
        ),
    };
    if args.status {
        let repository = source.map(|s| s.repository.as_str());
        let backfills = queue.backfills(repository).await.or_runtime()?;
        print_status(&backfills, args.json);
        return Ok(());
    }
    let Some(source) = source else {
        return Err(Failure::usage(
            "--repository is required with --last, --since and --cancel",
        ));
    };
    let repository = source.repository.to_string();
    if args.cancel {
        let cancelled = queue
            .cancel_backfills(&repository, "cli")
            .await
            .or_runtime()?;
        let running = queue
            .backfills(Some(&repository))
            .await
            .or_runtime()?
            .iter()
            .map(|b| b.states.get(&JobState::Running).copied().unwrap_or(0))
            .sum::<u64>();
        if args.json {
            print_json(&serde_json::json!({"cancelled": cancelled, "running": running}));
        } else {
            crate::outln!(
                "cancelled {} queued backfill range(s) of {repository}{}",
                cancelled.len(),
                if running > 0 {
                    "; one range is running and finishes (cancel it with `teammem jobs cancel ID`)"
                } else {
                    ""
                }
            );
        }
        return Ok(());
    }
    let start = parse_start(args.last, args.since.as_deref())?;
    let forges = Forges::from_config(&config).await.or_usage()?;
    let forge = forges.of(source);
    let tip = forge.tip().await.map_err(forge_failure)?;
    let end = match queue.cursor(&repository).await.or_runtime()? {
        None => tip.sha.clone(),
        Some(cursor) => {
            match forge
                .ancestry(&cursor.sha, &tip.sha)
                .await
                .map_err(forge_failure)?
            {
                Ancestry::Ancestor => cursor.sha,
                Ancestry::NotAncestor => {
                    return Err(Failure::runtime(format!(
                        "the reconciled commit of {repository} ({}) is not in the history of {} (force-pushed?); run `teammem sweep reset --repository {repository}` first",
                        cursor.sha, tip.branch
                    )));
                }
            }
        }
    };
    let mut history = forge
        .first_parent_history(&end, &start, MAX_HISTORY)
        .await
        .map_err(forge_failure)?;
    if history.first().is_some_and(|first| first.parent.is_none()) {
        // A range needs a commit to start from; the root commit has none.
        history.remove(0);
    }
    let existing = queue.range_jobs(&repository).await.or_runtime()?;
    let covering: Vec<(Sha, Sha)> = existing
        .into_iter()
        .filter(|(_, _, _, state)| !matches!(state, JobState::Cancelled | JobState::Rejected))
        .map(|(_, before, after, _)| (before, after))
        .collect();
    let ranges = plan(&history, &covering);
    let spec = match (&args.last, &args.since) {
        (Some(n), _) => format!("--last {n}"),
        (_, Some(since)) => format!("--since {since}"),
        _ => unreachable!("parse_start needs one"),
    };
    if ranges.is_empty() {
        let message = match (history.first(), history.last()) {
            (Some(first), Some(last)) => format!(
                "nothing to backfill: the {} first-parent commit(s) from {} to {} of {repository} are already in range jobs (queued, running or done)",
                history.len(),
                short_sha(&first.sha),
                short_sha(&last.sha)
            ),
            _ => format!("nothing to backfill: {repository} has no history before {end} to add"),
        };
        if args.json {
            print_json(&serde_json::json!({"backfill_id": null, "ranges": 0, "message": message}));
        } else {
            crate::outln!("{message}");
        }
        return Ok(());
    }
    let planned = ranges.len();
    let stored = queue
        .enqueue_backfill(NewBackfill {
            source: repository.clone(),
            destination: source.destination(),
            spec,
            actor: "cli".into(),
            ranges: ranges.clone(),
        })
        .await
        .or_runtime()?;
    if args.json {
        print_json(&stored);
        return Ok(());
    }
    match stored.backfill_id {
        None => crate::outln!(
            "nothing to backfill: all {planned} range(s) are already queued, running or done"
        ),
        Some(id) => {
            let jobs: Vec<i64> = stored
                .enqueued
                .iter()
                .chain(&stored.requeued)
                .copied()
                .collect();
            crate::outln!(
                "backfill {id} of {repository}: {} range(s) queued, oldest first, from {} to {} (jobs {}); follow it with `teammem backfill --status --repository {repository}`",
                jobs.len(),
                short_sha(&ranges[0].0),
                short_sha(&ranges[planned - 1].1),
                ids(&jobs)
            );
            if stored.already > 0 {
                crate::outln!(
                    "{} range(s) were already queued, running or done",
                    stored.already
                );
            }
        }
    }
    Ok(())
}

/// `--last N` or `--since COMMIT|DATE` (clap makes sure one is given).
fn parse_start(last: Option<usize>, since: Option<&str>) -> Result<HistoryStart, Failure> {
    match (last, since) {
        (Some(n), _) if n == 0 || n > MAX_HISTORY => Err(Failure::usage(format!(
            "--last: expected 1 to {MAX_HISTORY} merges, got {n}"
        ))),
        (Some(n), _) => Ok(HistoryStart::Last(n)),
        (None, Some(text)) => {
            let text = text.trim();
            if text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Sha::parse(text)
                    .map(HistoryStart::After)
                    .map_err(|e| Failure::usage(format!("--since: {e}")));
            }
            if let Ok(date) = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
                let midnight = date.and_hms_opt(0, 0, 0).expect("midnight exists");
                return Ok(HistoryStart::Since(midnight.and_utc().timestamp()));
            }
            if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
                return Ok(HistoryStart::Since(at.timestamp()));
            }
            Err(Failure::usage(format!(
                "--since: {text:?} is neither a full commit id (40 hex digits) nor a date (YYYY-MM-DD or RFC 3339)"
            )))
        }
        (None, None) => Err(Failure::usage("give --last N or --since COMMIT|DATE")),
    }
}

/// The ranges to enqueue, oldest first: the first-parent commits of
/// `history` (oldest first) not inside any range of `covering`, in runs cut
/// into ranges of at most [`MAX_MERGES_PER_RANGE`] commits and (where known)
/// [`MAX_COMMITS_PER_RANGE`] entered commits.
pub fn plan(history: &[FirstParent], covering: &[(Sha, Sha)]) -> Vec<(Sha, Sha)> {
    let Some(start) = history.first().and_then(|first| first.parent.clone()) else {
        return Vec::new();
    };
    // Position of each boundary: -1 the history's start, i its i-th commit.
    let mut index: HashMap<&Sha, i64> = HashMap::new();
    index.insert(&start, -1);
    for (i, commit) in history.iter().enumerate() {
        index.insert(&commit.sha, i as i64);
    }
    let last = history.len() as i64 - 1;
    let mut covered = vec![false; history.len()];
    for (before, after) in covering {
        let (from, to) = match (index.get(before), index.get(after)) {
            (Some(&b), Some(&a)) if b < a => (b + 1, a),
            // Ends past the history's end (newer): from its start on.
            (Some(&b), None) => (b + 1, last),
            // Starts before the history (older): up to its end.
            (None, Some(&a)) => (0, a),
            _ => continue,
        };
        for i in from.max(0)..=to.min(last) {
            covered[i as usize] = true;
        }
    }
    let mut ranges = Vec::new();
    let mut open: Option<(usize, usize, u64)> = None; // (first, count, entered)
    let before_of = |i: usize| {
        if i == 0 {
            start.clone()
        } else {
            history[i - 1].sha.clone()
        }
    };
    for (i, commit) in history.iter().enumerate() {
        if covered[i] {
            if let Some((first, _, _)) = open.take() {
                ranges.push((before_of(first), history[i - 1].sha.clone()));
            }
            continue;
        }
        let entered = commit.entered.unwrap_or(1);
        if let Some((first, count, sum)) = open
            && (count >= MAX_MERGES_PER_RANGE || sum + entered > MAX_COMMITS_PER_RANGE)
        {
            ranges.push((before_of(first), history[i - 1].sha.clone()));
            open = None;
        }
        open = Some(match open {
            None => (i, 1, entered),
            Some((first, count, sum)) => (first, count + 1, sum + entered),
        });
    }
    if let Some((first, _, _)) = open {
        ranges.push((before_of(first), history[history.len() - 1].sha.clone()));
    }
    ranges
}

fn print_status(backfills: &[BackfillStatus], json: bool) {
    if json {
        let rows: Vec<serde_json::Value> = backfills
            .iter()
            .map(|b| {
                let mut value = serde_json::to_value(b).unwrap_or_default();
                value["done"] = b.done().into();
                value["in_flight"] = b.in_flight().into();
                value
            })
            .collect();
        print_json(&rows);
        return;
    }
    if backfills.is_empty() {
        crate::outln!("no backfills");
        return;
    }
    for b in backfills {
        let count = |state: JobState| b.states.get(&state).copied().unwrap_or(0);
        let phase = if b.in_flight() > 0 {
            "in progress"
        } else {
            "ended"
        };
        crate::outln!(
            "backfill {} of {} ({}), {}: {} of {} ranges done; {} running, {} queued, {} failed, {} cancelled; {}..{}, started {}",
            b.id,
            b.source,
            b.spec,
            phase,
            b.done(),
            b.ranges,
            count(JobState::Running),
            count(JobState::Queued),
            count(JobState::Failed) + count(JobState::Rejected),
            count(JobState::Cancelled),
            short_sha(&b.first_sha),
            short_sha(&b.last_sha),
            readable_utc(b.created_at)
        );
    }
}

fn ids(jobs: &[i64]) -> String {
    match jobs {
        [] => "none".into(),
        [one] => one.to_string(),
        [first, .., last] if last - first + 1 == jobs.len() as i64 => format!("{first}–{last}"),
        many => many
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn forge_failure(refusal: Refusal) -> Failure {
    match refusal {
        Refusal::Rejected { code, message } => Failure::runtime(format!("{code}: {message}")),
        Refusal::Unavailable { message, .. } => Failure::runtime(format!(
            "the forge could not answer: {message}; nothing was enqueued, try again later"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(n: u64) -> Sha {
        Sha::parse(&format!("{n:040x}")).unwrap()
    }

    /// First-parent commits 1..=n (parent of commit 1 is 0), each bringing
    /// `entered[i]` commits when given.
    fn chain(n: u64, entered: &[(u64, u64)]) -> Vec<FirstParent> {
        (1..=n)
            .map(|i| FirstParent {
                sha: sha(i),
                parent: Some(sha(i - 1)),
                time: i as i64,
                entered: Some(
                    entered
                        .iter()
                        .find(|(at, _)| *at == i)
                        .map_or(1, |(_, e)| *e),
                ),
            })
            .collect()
    }

    #[test]
    fn ranges_are_contiguous_oldest_first_and_at_most_25_merges() {
        let ranges = plan(&chain(60, &[]), &[]);
        assert_eq!(
            ranges,
            vec![(sha(0), sha(25)), (sha(25), sha(50)), (sha(50), sha(60))]
        );
    }

    #[test]
    fn a_range_holds_at_most_200_commits_and_a_big_merge_stands_alone() {
        let ranges = plan(&chain(6, &[(2, 150), (3, 60), (5, 500)]), &[]);
        assert_eq!(
            ranges,
            vec![
                (sha(0), sha(2)),
                (sha(2), sha(4)),
                (sha(4), sha(5)),
                (sha(5), sha(6))
            ]
        );
    }

    #[test]
    fn history_inside_existing_ranges_is_not_planned_again() {
        let history = chain(30, &[]);
        // The same plan again: nothing.
        let first = plan(&history, &[]);
        assert_eq!(plan(&history, &first), vec![]);
        // A dispatch covering 10..=12, one from before the history to 3, and
        // one from 28 to past its end.
        let covering = [(sha(9), sha(12)), (sha(100), sha(3)), (sha(27), sha(999))];
        assert_eq!(
            plan(&history, &covering),
            vec![(sha(3), sha(9)), (sha(12), sha(27))]
        );
    }

    #[test]
    fn since_parses_a_commit_a_date_or_refuses_clearly() {
        assert_eq!(
            parse_start(None, Some(&"a".repeat(40))).ok(),
            Some(HistoryStart::After(Sha::parse(&"a".repeat(40)).unwrap()))
        );
        assert_eq!(
            parse_start(None, Some("2024-01-02")).ok(),
            Some(HistoryStart::Since(1_704_153_600))
        );
        assert_eq!(
            parse_start(None, Some("2024-01-02T01:00:00+01:00")).ok(),
            Some(HistoryStart::Since(1_704_153_600))
        );
        let refused = parse_start(None, Some("last tuesday")).err().unwrap();
        assert!(
            refused.message.contains("neither a full commit id"),
            "{}",
            refused.message
        );
        assert!(parse_start(Some(0), None).is_err());
    }
}
