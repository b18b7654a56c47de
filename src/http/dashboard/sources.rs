//! The sources page (the dashboard's home): one row per configured source
//! the viewer may see, with the commit its memory is reconciled to, how far
//! the default branch has moved past it, the stale facts on its wiki (and a
//! link to the wiki's pages on the dashboard), the
//! jobs in flight for its wiki and its last job and failure; the sources that
//! need an operator come first; a backfill in progress shows under its
//! source's status ("backfill: N of M ranges done").
//!
//! Invariant: every value from the configuration, the queue, a forge or a
//! wiki is escaped; the page waits on forges (and stale-fact counts) at most
//! `dashboard.forge_timeout_seconds` and never on a git fetch (see
//! `freshness.rs`).

use std::fmt::Write;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Response};

use super::{Peer, age, escape, internal, layout, viewer};
use crate::forge::Lag;
use crate::freshness::{FactsAnswer, LagAnswer, SourceRow};
use crate::http::AppState;
use crate::queue::backfill::BackfillStatus;
use crate::queue::{readable_utc, short_sha};

pub(super) async fn page(
    State(state): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
) -> Response {
    let viewer = match viewer(&state, &peer, &headers).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let rows = match state
        .freshness
        .sources(&state.config, &state.queue, &state.forges, |r| {
            viewer.may_see(r)
        })
        .await
    {
        Ok(rows) => rows,
        Err(e) => return internal(e),
    };
    let now = chrono::Utc::now().timestamp_millis();
    let scope = viewer.scope();
    let finished = match state
        .queue
        .finished_since(now - 24 * 3_600_000, scope.as_deref())
        .await
    {
        Ok(finished) => finished,
        Err(e) => return internal(e),
    };
    // Backfills in progress, by source (`teammem backfill`).
    let backfills: Vec<BackfillStatus> = match state.queue.backfills(None).await {
        Ok(all) => all.into_iter().filter(|b| b.in_flight() > 0).collect(),
        Err(e) => return internal(e),
    };
    let body =
        render_with_backfills(&rows, &backfills, now) + &super::chart::last_day(&finished, now);
    Html(layout("Sources", &body, Some(30), Some(&viewer))).into_response()
}

/// The page's body for `rows` at `now` (unix ms), without backfills.
#[cfg(test)]
fn render(rows: &[SourceRow], now: i64) -> String {
    render_with_backfills(rows, &[], now)
}

/// The page's body, with the backfills in progress (`teammem backfill`)
/// under their source's status: "backfill: N of M ranges done".
pub fn render_with_backfills(rows: &[SourceRow], backfills: &[BackfillStatus], now: i64) -> String {
    if rows.is_empty() {
        return "<p class=empty>No sources you may see. Sources are configured in teammem.toml ([[sources]]).</p>".into();
    }
    let mut body = String::from(
        "<table class=sources><thead><tr><th>Source</th><th>Status</th><th>Reconciled to</th><th>Behind</th><th>Stale facts</th><th>In flight</th><th>Last job</th><th>Last failure</th></tr></thead><tbody>",
    );
    for row in rows {
        let reconciled = match &row.cursor {
            Some(c) => format!(
                "<code title=\"{sha}\">{short}</code> <span title=\"{at}\">{age} ago</span>",
                sha = escape(&c.sha),
                short = escape(short_sha(&c.sha)),
                at = readable_utc(c.updated_at),
                age = age(now - c.updated_at),
            ),
            None => "—".into(),
        };
        let behind = match &row.lag {
            LagAnswer::Known(Lag::UpToDate { .. }) => "up to date".to_string(),
            LagAnswer::Known(Lag::Behind {
                commits,
                counted_all,
                since,
                ..
            }) => {
                let plus = if *counted_all { "" } else { "+" };
                let noun = if *commits == 1 { "commit" } else { "commits" };
                let waiting = since
                    .map(|s| format!(", oldest {} old", age(now - s * 1000)))
                    .unwrap_or_default();
                format!("{commits}{plus} {noun}{waiting}")
            }
            LagAnswer::Known(Lag::Diverged { tip }) => format!(
                "diverged: the reconciled commit is not in the branch's history (tip <code>{}</code>)",
                escape(short_sha(tip))
            ),
            LagAnswer::Unknown(why) => {
                format!("<span class=unknown>unknown: {}</span>", escape(why))
            }
        };
        let (stale, stale_attribute) = match &row.facts {
            FactsAnswer::Counted { stale: 0, .. } => {
                ("—".to_string(), " data-stale-facts=\"0\"".to_string())
            }
            FactsAnswer::Counted {
                commit,
                stale,
                truncated,
            } => {
                let plus = if *truncated { "+" } else { "" };
                let noun = if *stale == 1 { "fact" } else { "facts" };
                let at = commit
                    .as_deref()
                    .map(|c| format!(" title=\"counted at wiki commit {}\"", escape(c)))
                    .unwrap_or_default();
                (
                    format!("<span class=stale-count{at}>{stale}{plus} stale {noun}</span>"),
                    format!(" data-stale-facts=\"{stale}\""),
                )
            }
            FactsAnswer::Unknown(why) => (
                format!("<span class=unknown>unknown: {}</span>", escape(why)),
                String::new(),
            ),
        };
        let last_job = match &row.last_job {
            Some(job) => format!(
                "<a href=\"/jobs/{id}\">#{id}</a> <span class=\"state {st}\">{st}</span> <span title=\"{at}\">{age} ago</span>",
                id = job.id,
                st = job.state.as_str(),
                at = readable_utc(job.updated_at),
                age = age(now - job.updated_at),
            ),
            None => "—".into(),
        };
        let last_failure = match &row.last_failure {
            Some(job) => format!(
                "<a href=\"/jobs/{id}\">#{id}</a> {reason}",
                id = job.id,
                reason = escape(job.last_error.as_deref().unwrap_or("(no reason recorded)")),
            ),
            None => "—".into(),
        };
        let backfill: String = backfills
            .iter()
            .filter(|b| b.source.eq_ignore_ascii_case(&row.repository))
            .map(|b| {
                format!(
                    "<br><small class=backfill data-backfill=\"{id}\" title=\"{spec}, from {first} to {last}\">backfill: {done} of {total} ranges done</small>",
                    id = b.id,
                    spec = escape(&b.spec),
                    first = escape(short_sha(&b.first_sha)),
                    last = escape(short_sha(&b.last_sha)),
                    done = b.done(),
                    total = b.ranges,
                )
            })
            .collect();
        let _ = write!(
            body,
            "<tr data-source=\"{src}\" data-attention=\"{attn}\"{stale_attribute}><td><a href=\"/jobs?repository={src}\">{src}</a><br><small><a class=wiki-link href=\"{wiki}\">wiki</a> · {dest}</small></td><td><span class=\"attention {attn_class}\">{attn}</span>{backfill}</td><td>{reconciled}</td><td>{behind}</td><td>{stale}</td><td>{running} running, {queued} queued</td><td>{last_job}</td><td>{last_failure}</td></tr>",
            src = escape(&row.repository),
            dest = escape(&row.destination),
            wiki = escape(&super::markdown::wiki_root(&row.repository)),
            attn = row.attention.as_str(),
            attn_class = row.attention.as_str().replace(' ', "-"),
            running = row.running,
            queued = row.queued,
        );
    }
    body.push_str("</tbody></table>");
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::freshness::Attention;
    use crate::ids::Sha;
    use crate::queue::{Job, JobKind, JobState, Origin, SourceCursor};

    fn failed_job(reason: &str) -> Job {
        Job {
            id: 7,
            source: crate::ids::RepoName::parse("octo/app").unwrap(),
            destination: "github:octo/app.wiki".into(),
            origin: Origin::Request,
            kind: JobKind::PullRequest {
                number: crate::ids::PullNumber::new(3).unwrap(),
                merge_sha: Sha::parse(&"c".repeat(40)).unwrap(),
            },
            state: JobState::Failed,
            attempts: 8,
            max_attempts: 8,
            run_after: 0,
            created_at: 0,
            updated_at: 1_000,
            started_at: None,
            finished_at: Some(1_000),
            last_error: Some(reason.into()),
            receipt: None,
            coalesced_count: 0,
            actor: "test".into(),
            lease_owner: None,
            lease_until: None,
        }
    }

    #[test]
    fn hostile_reasons_and_names_are_escaped() {
        let job = failed_job("<script>alert('reason')</script>");
        let row = SourceRow {
            repository: "octo/app".into(),
            destination: "local:/srv/<b>wiki</b>.git".into(),
            cursor: Some(SourceCursor {
                source: "octo/app".into(),
                sha: Sha::parse(&"a".repeat(40)).unwrap(),
                job_id: None,
                updated_at: 0,
            }),
            lag: LagAnswer::Unknown("GitHub said <img src=x onerror=alert(1)>".into()),
            running: 0,
            queued: 1,
            last_job: Some(job.clone()),
            last_failure: Some(job),
            facts: FactsAnswer::Unknown("the wiki said <u>no</u>".into()),
            attention: Attention::Failing,
        };
        let html = render(&[row], 61_000);
        assert!(
            !html.contains("<script>")
                && !html.contains("<img")
                && !html.contains("<b>")
                && !html.contains("<u>")
        );
        assert!(
            html.contains(
                "<span class=unknown>unknown: the wiki said &lt;u&gt;no&lt;/u&gt;</span>"
            ),
            "{html}"
        );
        assert!(!html.contains("data-stale-facts"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(&#39;reason&#39;)&lt;/script&gt;"),
            "{html}"
        );
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{html}"
        );
        assert!(html.contains("data-attention=\"failing\""), "{html}");
        assert!(html.contains("0 running, 1 queued"), "{html}");
    }

    #[test]
    fn lag_reads_as_commits_and_age() {
        let tip = Sha::parse(&"b".repeat(40)).unwrap();
        let row = |lag| SourceRow {
            repository: "octo/app".into(),
            destination: "d".into(),
            cursor: None,
            lag: LagAnswer::Known(lag),
            running: 0,
            queued: 0,
            last_job: None,
            last_failure: None,
            facts: FactsAnswer::Unknown("x".into()),
            attention: Attention::Stalled,
        };
        let now = 10 * 3_600_000;
        let behind = render(
            &[row(Lag::Behind {
                tip: tip.clone(),
                commits: 1,
                counted_all: true,
                since: Some(0),
            })],
            now,
        );
        assert!(behind.contains("1 commit, oldest 10h old"), "{behind}");
        let many = render(
            &[row(Lag::Behind {
                tip: tip.clone(),
                commits: 10_000,
                counted_all: false,
                since: None,
            })],
            now,
        );
        assert!(many.contains("10000+ commits<"), "{many}");
        assert!(render(&[row(Lag::Diverged { tip })], now).contains("diverged"));
    }

    #[test]
    fn stale_facts_show_their_count_and_a_clean_wiki_none() {
        let row = |facts| SourceRow {
            repository: "octo/app".into(),
            destination: "d".into(),
            cursor: None,
            lag: LagAnswer::Known(Lag::UpToDate {
                tip: Sha::parse(&"b".repeat(40)).unwrap(),
            }),
            running: 0,
            queued: 0,
            last_job: None,
            last_failure: None,
            facts,
            attention: Attention::StaleFacts,
        };
        let counted = |stale, truncated| FactsAnswer::Counted {
            commit: Some("c".repeat(40)),
            stale,
            truncated,
        };
        let three = render(&[row(counted(3, false))], 0);
        assert!(
            three.contains(&format!(
                "<td><span class=stale-count title=\"counted at wiki commit {}\">3 stale facts</span></td>",
                "c".repeat(40)
            )),
            "{three}"
        );
        assert!(three.contains("data-stale-facts=\"3\""), "{three}");
        assert!(three.contains("data-attention=\"stale facts\""), "{three}");
        assert!(three.contains("class=\"attention stale-facts\""), "{three}");
        assert!(render(&[row(counted(1, false))], 0).contains(">1 stale fact<"));
        assert!(render(&[row(counted(150, true))], 0).contains(">150+ stale facts<"));
        let clean = render(&[row(counted(0, false))], 0);
        assert!(
            !clean.contains("stale-count") && clean.contains("<td>up to date</td><td>—</td>"),
            "{clean}"
        );
        assert!(clean.contains("data-stale-facts=\"0\""), "{clean}");
        let empty = render(
            &[row(FactsAnswer::Counted {
                commit: None,
                stale: 0,
                truncated: false,
            })],
            0,
        );
        assert!(
            !empty.contains("stale-count") && empty.contains("<td>up to date</td><td>—</td>"),
            "{empty}"
        );
    }

    #[test]
    fn a_backfill_in_progress_shows_under_its_source() {
        let row = |repository: &str| SourceRow {
            repository: repository.into(),
            destination: "d".into(),
            cursor: None,
            lag: LagAnswer::Unknown("x".into()),
            running: 1,
            queued: 3,
            last_job: None,
            last_failure: None,
            facts: FactsAnswer::Unknown("x".into()),
            attention: Attention::CatchingUp,
        };
        let backfill = BackfillStatus {
            id: 7,
            source: "octo/app".into(),
            spec: "--since <b>".into(),
            first_sha: "a".repeat(40),
            last_sha: "b".repeat(40),
            actor: "cli".into(),
            created_at: 0,
            ranges: 5,
            states: [
                (crate::queue::JobState::Succeeded, 1),
                (crate::queue::JobState::NoChange, 1),
                (crate::queue::JobState::Running, 1),
                (crate::queue::JobState::Queued, 2),
            ]
            .into_iter()
            .collect(),
        };
        let html = render_with_backfills(&[row("octo/app"), row("octo/lib")], &[backfill], 0);
        assert_eq!(
            html.matches("backfill: 2 of 5 ranges done").count(),
            1,
            "{html}"
        );
        assert!(html.contains("--since &lt;b&gt;"), "{html}");
        assert!(!html.contains("<b>"), "{html}");
    }
}
