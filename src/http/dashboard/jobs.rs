//! The jobs pages: the list (filtered, paged) and one job's page.
//!
//! Invariant: every value from a job, its events or its receipt is escaped
//! before it reaches the page; a viewer sees only the jobs of the sources its
//! token may act on.

use std::fmt::Write;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use super::{Peer, age, escape, internal, layout, page_error, viewer};
use crate::config::Forge;
use crate::http::AppState;
use crate::ids::RepoName;
use crate::queue::{
    Job, JobEvent, JobFilter, JobKind, JobState, QueueError, readable_utc, short_sha,
};

#[derive(Deserialize)]
pub(super) struct ListQuery {
    repository: Option<String>,
    state: Option<String>,
    cursor: Option<String>,
}

pub(super) async fn jobs_page(
    State(state): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Response {
    let viewer = match viewer(&state, &peer, &headers).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let repository = q.repository.filter(|r| !r.is_empty());
    let job_state = match q.state.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => match s.parse::<JobState>() {
            Ok(s) => Some(s),
            Err(e) => return page_error(StatusCode::BAD_REQUEST, &e.to_string()),
        },
    };
    if let Some(r) = &repository
        && !viewer.may_see(r)
    {
        return page_error(
            StatusCode::FORBIDDEN,
            "you may not see jobs of this repository",
        );
    }
    let page = match state
        .queue
        .list(&JobFilter {
            repository: repository.clone(),
            allowed_repositories: viewer.scope(),
            state: job_state,
            limit: 50,
            cursor: q.cursor,
        })
        .await
    {
        Ok(p) => p,
        Err(e) => return internal(e),
    };
    let now = chrono::Utc::now().timestamp_millis();
    let mut body = String::new();
    body.push_str("<form class=filters method=get action=\"/jobs\">");
    body.push_str("<label>Source <select name=repository><option value=\"\">all</option>");
    for s in state
        .config
        .sources
        .iter()
        .filter(|s| viewer.may_see(&s.repository))
    {
        let selected = if repository.as_deref() == Some(s.repository.as_str()) {
            " selected"
        } else {
            ""
        };
        let _ = write!(body, "<option{selected}>{}</option>", escape(&s.repository));
    }
    body.push_str(
        "</select></label> <label>State <select name=state><option value=\"\">all</option>",
    );
    for s in JobState::ALL {
        let selected = if job_state == Some(s) {
            " selected"
        } else {
            ""
        };
        let _ = write!(body, "<option{selected}>{}</option>", s.as_str());
    }
    body.push_str("</select></label> <button>Filter</button></form>");

    if page.jobs.is_empty() {
        body.push_str("<p class=empty>No jobs yet. They appear here when a post-merge workflow dispatches or a maintainer requests a PR.</p>");
    } else {
        body.push_str("<table><thead><tr><th>Job</th><th>State</th><th>Source</th><th>What</th><th>Origin</th><th>Attempts</th><th>Age</th><th>Wiki</th></tr></thead><tbody>");
        for job in &page.jobs {
            let _ = write!(
                body,
                "<tr><td><a href=\"/jobs/{id}\">#{id}</a></td><td><span class=\"state {st}\">{st}</span></td><td>{src}</td><td>{what}</td><td>{origin}</td><td>{att}/{max}</td><td title=\"{created}\">{age}</td><td><code>{wiki}</code></td></tr>",
                id = job.id,
                st = job.state.as_str(),
                src = escape(&job.source),
                what = escape(&job.brief_summary()),
                origin = job.origin.as_str(),
                att = job.attempts,
                max = job.max_attempts,
                created = readable_utc(job.created_at),
                age = age(now - job.created_at),
                wiki = escape(short_sha(&wiki_sha(job).unwrap_or_default())),
            );
        }
        body.push_str("</tbody></table>");
    }
    if let Some(c) = &page.next_cursor {
        let mut href = format!("/jobs?cursor={}", escape(c));
        if let Some(r) = &repository {
            let _ = write!(href, "&repository={}", escape(r));
        }
        if let Some(s) = job_state {
            let _ = write!(href, "&state={}", s.as_str());
        }
        let _ = write!(body, "<p><a href=\"{href}\">Older jobs →</a></p>");
    }
    Html(layout("Jobs", &body, Some(10), Some(&viewer))).into_response()
}

pub(super) async fn job_page(
    State(state): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let viewer = match viewer(&state, &peer, &headers).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let Some(id) = id.parse::<i64>().ok().filter(|n| *n > 0) else {
        return page_error(StatusCode::BAD_REQUEST, "a job id is a positive number");
    };
    let job = match state.queue.get(id).await {
        Ok(job) if viewer.may_see(&job.source) => job,
        Ok(_) | Err(QueueError::NotFound { .. }) => {
            return page_error(StatusCode::NOT_FOUND, &format!("job {id} not found"));
        }
        Err(e) => return internal(e),
    };
    let events = match state.queue.events(id).await {
        Ok(e) => e,
        Err(e) => return internal(e),
    };
    let links = Links::for_job(&state, &job);
    let mut body = String::new();
    let _ = write!(
        body,
        // The page's <h1> already names the job.
        "<p><span class=\"state {st}\">{st}</span></p><dl>",
        st = job.state.as_str()
    );
    let mut row = |k: &str, v: String| {
        let _ = write!(body, "<dt>{k}</dt><dd>{v}</dd>");
    };
    row("Source", escape(&job.source));
    row("Wiki destination", escape(&job.destination));
    row("What", links.what(&job));
    row(
        "Origin",
        format!("{} (by {})", job.origin.as_str(), escape(&job.actor)),
    );
    row(
        "Attempts",
        format!("{} of {}", job.attempts, job.max_attempts),
    );
    row("Created", readable_utc(job.created_at));
    if let Some(t) = job.finished_at {
        row("Finished", readable_utc(t));
    }
    if job.coalesced_count > 0 {
        row("Coalesced ranges", job.coalesced_count.to_string());
    }
    if let Some(e) = &job.last_error {
        row("Last error", escape(e));
    }
    if let Some(sha) = wiki_sha(&job) {
        row("Wiki commit", links.wiki_commit(&sha));
    }
    body.push_str("</dl>");
    body.push_str(&super::actions::forms(&viewer, &job));

    if let Some(summary) = evidence_summary(&state, job.id) {
        let _ = write!(body, "<h3>Evidence</h3><p>{}</p>", escape(&summary));
    }
    body.push_str(&attempts_html(&events));
    if let Some(receipt) = &job.receipt {
        body.push_str(&receipt_html(receipt, &links));
        body.push_str(&stale_facts_html(receipt, &links));
        match wiki_change(&state, &job, receipt).await {
            Ok(None) => {}
            Ok(Some(diff)) => body.push_str(&diff_html(&diff)),
            Err(why) => {
                let _ = write!(
                    body,
                    "<h3>Wiki change</h3><p class=unknown>not shown: {}</p>",
                    escape(&why)
                );
            }
        }
        let pretty = serde_json::to_string_pretty(receipt).unwrap_or_default();
        let _ = write!(
            body,
            "<details><summary>Raw receipt</summary><pre>{}</pre></details>",
            escape(&pretty)
        );
    }
    body.push_str("<h3>Timeline</h3><ol class=timeline>");
    for e in &events {
        body.push_str(&event_html(e));
    }
    body.push_str("</ol><p><a href=\"/jobs\">← all jobs</a></p>");
    let refresh = (!job.state.is_terminal()).then_some(5);
    Html(layout(
        &format!("Job #{}", job.id),
        &body,
        refresh,
        Some(&viewer),
    ))
    .into_response()
}

/// The diff shown on a job page is cut after this many bytes.
const MAX_SHOWN_DIFF: usize = 64 * 1024;

/// Each attempt: from a `claimed` event to the event that ended it.
fn attempts_html(events: &[JobEvent]) -> String {
    let mut rows = String::new();
    let mut number = 0;
    for (i, e) in events.iter().enumerate() {
        if e.event != "claimed" {
            continue;
        }
        number += 1;
        let end = events[i + 1..].first();
        let (outcome, took, why) = match end {
            Some(end) => (
                escape(&end.event),
                age(end.at - e.at),
                escape(end.detail.as_deref().unwrap_or("")),
            ),
            None => ("running".to_string(), "—".to_string(), String::new()),
        };
        let _ = write!(
            rows,
            "<tr><td>{number}</td><td>{worker}</td><td>{at}</td><td>{took}</td><td>{outcome}</td><td>{why}</td></tr>",
            worker = escape(&e.actor),
            at = readable_utc(e.at),
        );
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "<h3>Attempts</h3><table class=attempts><thead><tr><th>#</th><th>Worker</th><th>Started</th><th>Took</th><th>Outcome</th><th>Reason</th></tr></thead><tbody>{rows}</tbody></table>"
    )
}

/// The receipt's pull requests as a table, each page linked into the wiki
/// when it lives on GitHub.
fn receipt_html(receipt: &serde_json::Value, links: &Links) -> String {
    let mut out = String::from("<h3>Receipt</h3>");
    if let Some(summary) = receipt.get("summary").and_then(|s| s.as_str()) {
        let _ = write!(out, "<p>{}</p>", escape(summary));
    }
    let pulls = receipt
        .get("pull_requests")
        .and_then(|p| p.as_array())
        .cloned()
        .unwrap_or_default();
    if pulls.is_empty() {
        return out;
    }
    out.push_str("<table class=receipt><thead><tr><th>PR</th><th>Status</th><th>Pages</th></tr></thead><tbody>");
    for pull in &pulls {
        let number = pull.get("number").and_then(|n| n.as_u64()).unwrap_or(0);
        let status = pull.get("status").and_then(|s| s.as_str()).unwrap_or("?");
        let pages: Vec<String> = pull
            .get("pages")
            .and_then(|p| p.as_array())
            .map(|pages| {
                pages
                    .iter()
                    .filter_map(|p| p.as_str())
                    .map(|page| links.wiki_page(page))
                    .collect()
            })
            .unwrap_or_default();
        let _ = write!(
            out,
            "<tr><td>#{number}</td><td><span class=\"state {st}\">{st}</span></td><td>{pages}</td></tr>",
            st = escape(status),
            pages = pages.join(", "),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// The facts the runner found stale when the job started (`stale_facts`,
/// kept beside the agent's receipt): what each page says that its cited
/// source lines no longer support.
fn stale_facts_html(receipt: &serde_json::Value, links: &Links) -> String {
    let facts = receipt
        .get("stale_facts")
        .and_then(|f| f.as_array())
        .cloned()
        .unwrap_or_default();
    if facts.is_empty() {
        return String::new();
    }
    let text = |fact: &serde_json::Value, key: &str| {
        fact.get(key)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let mut out = format!(
        "<h3>Stale facts ({})</h3><p>Statements whose cited source lines changed; the agent was asked to fix them, and the rest are listed on the wiki's Stale page.</p><table class=stale><thead><tr><th>Page</th><th>Fact</th><th>Cited</th><th>Changed in</th></tr></thead><tbody>",
        facts.len()
    );
    for fact in &facts {
        let changed_in = text(fact, "changed_in");
        let deleted = fact.get("deleted").and_then(|d| d.as_bool()) == Some(true);
        let _ = write!(
            out,
            "<tr><td>{page}</td><td>{fact_text}</td><td><code>{path}</code> {lines} at <code>{cited}</code></td><td><code>{changed}</code>{deleted}</td></tr>",
            page = links.wiki_page(&text(fact, "page")),
            fact_text = escape(&text(fact, "fact")),
            path = escape(&text(fact, "path")),
            lines = escape(&text(fact, "lines")),
            cited = escape(short_sha(&text(fact, "cited_commit"))),
            changed = escape(short_sha(&changed_in)),
            deleted = if deleted { " (file deleted)" } else { "" },
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// The job's change to the wiki, `base_sha..wiki_sha` of its receipt, read
/// from this node's mirror of the wiki (`None` when the job changed nothing).
async fn wiki_change(
    state: &AppState,
    job: &Job,
    receipt: &serde_json::Value,
) -> Result<Option<String>, String> {
    let sha = |key: &str| receipt.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    let (Some(base), Some(tip)) = (sha("base_sha"), sha("wiki_sha")) else {
        return Ok(None);
    };
    if base.eq_ignore_ascii_case(&tip) {
        return Ok(None);
    }
    let source = state
        .config
        .source(&job.source)
        .ok_or("the job's source is no longer configured")?;
    let wiki = state.wiki_reads.wiki(&state.config, source)?;
    let diff = wiki.diff(&base, &tip).await.map_err(|e| e.to_string())?;
    Ok(Some(diff.diff))
}

/// A unified diff as escaped lines, added and removed ones marked; cut at
/// [`MAX_SHOWN_DIFF`] bytes.
fn diff_html(diff: &str) -> String {
    let (shown, cut) = crate::forge::evidence::bound(diff, MAX_SHOWN_DIFF);
    let mut out = String::from("<h3>Wiki change</h3><pre class=diff>");
    for line in shown.lines() {
        let class =
            if line.starts_with("+++") || line.starts_with("---") || line.starts_with("diff ") {
                "file"
            } else if line.starts_with('+') {
                "add"
            } else if line.starts_with('-') {
                "del"
            } else if line.starts_with("@@") {
                "hunk"
            } else {
                ""
            };
        // One block per line and no newline between them: a newline after a
        // block inside <pre> rendered as a blank line after every line.
        let _ = write!(out, "<span class=\"{class}\">{}</span>", escape(line));
    }
    out.push_str("</pre>");
    if cut {
        let _ = write!(
            out,
            "<p>The diff is cut at {} KiB.</p>",
            MAX_SHOWN_DIFF / 1024
        );
    }
    out
}

fn event_html(e: &JobEvent) -> String {
    format!(
        "<li><time>{}</time> <b>{}</b> <span class=actor>{}</span> {}</li>",
        readable_utc(e.at),
        escape(&e.event),
        escape(&e.actor),
        escape(e.detail.as_deref().unwrap_or(""))
    )
}

/// A one-line summary of the job's evidence bundle, when the runner left one.
fn evidence_summary(state: &AppState, id: i64) -> Option<String> {
    let path = state
        .config
        .server
        .data_dir
        .join("jobs")
        .join(id.to_string())
        .join("evidence.json");
    let meta = std::fs::metadata(&path).ok()?;
    if meta.len() > 16 * 1024 * 1024 {
        return Some("evidence bundle too large to summarise here".into());
    }
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
    let count = |k: &str| doc.get(k).and_then(|v| v.as_array()).map_or(0, Vec::len);
    Some(format!(
        "{} commits, {} merged pull requests",
        count("commits"),
        count("pull_requests")
    ))
}

/// Links into the forge for a job's source and wiki (GitHub sources only).
struct Links {
    /// The job's source.
    source: RepoName,
    source_base: Option<String>,
    wiki_base: Option<String>,
}

impl Links {
    fn for_job(state: &AppState, job: &Job) -> Links {
        let source = state.config.source(&job.source);
        match (source, &state.config.github) {
            (Some(s), Some(gh)) if s.forge == Forge::GitHub => Links {
                source: job.source.clone(),
                source_base: Some(format!("{}/{}", gh.git_url, s.repository)),
                wiki_base: Some(format!("{}/{}/wiki", gh.git_url, s.wiki_repository)),
            },
            _ => Links {
                source: job.source.clone(),
                source_base: None,
                wiki_base: None,
            },
        }
    }

    fn commit(&self, sha: &str) -> String {
        match &self.source_base {
            Some(b) => format!(
                "<a href=\"{}/commit/{}\"><code>{}</code></a>",
                escape(b),
                escape(sha),
                escape(short_sha(sha))
            ),
            None => format!(
                "<code title=\"{0}\">{1}</code>",
                escape(sha),
                escape(short_sha(sha))
            ),
        }
    }

    fn what(&self, job: &Job) -> String {
        match &job.kind {
            JobKind::Range { before, after, .. } => {
                let compare = match &self.source_base {
                    Some(b) => format!(
                        " (<a href=\"{}/compare/{}...{}\">compare</a>)",
                        escape(b),
                        escape(before),
                        escape(after)
                    ),
                    None => String::new(),
                };
                format!(
                    "range {}..{}{compare}",
                    self.commit(before),
                    self.commit(after)
                )
            }
            JobKind::PullRequest { number, merge_sha } => {
                let pr = match &self.source_base {
                    Some(b) => format!("<a href=\"{}/pull/{number}\">PR #{number}</a>", escape(b)),
                    None => format!("PR #{number}"),
                };
                format!("{pr}, merge commit {}", self.commit(merge_sha))
            }
        }
    }

    /// A wiki page: a link to it on GitHub, else to teammem's page view.
    fn wiki_page(&self, page: &str) -> String {
        match &self.wiki_base {
            Some(b) => format!(
                "<a href=\"{}/{}\">{}</a>",
                escape(b),
                escape(&github_page_name(page)),
                escape(page)
            ),
            None => format!(
                "<a href=\"/wiki/{}/{}\"><code>{}</code></a>",
                escape(&self.source),
                escape(&super::markdown::encode_path(page)),
                escape(page)
            ),
        }
    }

    fn wiki_commit(&self, sha: &str) -> String {
        match &self.wiki_base {
            Some(b) => format!(
                "<a href=\"{}/_compare/{}\"><code>{}</code></a>",
                escape(b),
                escape(sha),
                escape(sha)
            ),
            None => format!("<code>{}</code>", escape(sha)),
        }
    }
}

fn wiki_sha(job: &Job) -> Option<String> {
    job.receipt
        .as_ref()?
        .get("wiki_sha")?
        .as_str()
        .map(str::to_string)
}

/// GitHub's wiki URL segment of a page path: the file name without `.md`,
/// spaces as dashes, percent-encoded (GitHub wikis are flat by name).
fn github_page_name(page: &str) -> String {
    let name = page.rsplit('/').next().unwrap_or(page);
    let name = name.strip_suffix(".md").unwrap_or(name).replace(' ', "-");
    super::markdown::encode_path(&name)
}

#[cfg(test)]
mod tests {
    use super::diff_html;

    #[test]
    fn a_diff_shows_each_line_once_with_no_blank_line_between() {
        let diff = "diff --git a/Home.md b/Home.md\n@@ -1,2 +1,2 @@\n # Home\n-old <b>\n+new\n";
        let html = diff_html(diff);
        let pre = html
            .split_once("<pre class=diff>")
            .and_then(|(_, rest)| rest.split_once("</pre>"))
            .map(|(pre, _)| pre)
            .unwrap();
        // Every line is one block; a newline between blocks in <pre> would
        // render as an empty line after each.
        assert!(!pre.contains('\n'), "{pre}");
        assert_eq!(pre.matches("<span").count(), 5, "{pre}");
        assert!(
            pre.contains("<span class=\"del\">-old &lt;b&gt;</span>"),
            "{pre}"
        );
        assert!(pre.contains("<span class=\"add\">+new</span>"), "{pre}");
    }
}
