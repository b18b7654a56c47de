//! The jobs pages: the list (filtered, paged) and one job's page.
//!
//! Invariant: every value from a job, its events or its receipt is escaped
//! before it reaches the page; a viewer sees only the jobs of the sources its
//! token may act on.

use std::fmt::Write;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use super::{age, escape, internal, layout, page_error, viewer};
use crate::config::Forge;
use crate::http::AppState;
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
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Response {
    let viewer = match viewer(&state, peer, &headers).await {
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
    Html(layout("Jobs", &body, Some(10), &viewer)).into_response()
}

pub(super) async fn job_page(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let viewer = match viewer(&state, peer, &headers).await {
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

    if let Some(summary) = evidence_summary(&state, job.id) {
        let _ = write!(body, "<h3>Evidence</h3><p>{}</p>", escape(&summary));
    }
    if let Some(receipt) = &job.receipt {
        let pretty = serde_json::to_string_pretty(receipt).unwrap_or_default();
        let _ = write!(body, "<h3>Receipt</h3><pre>{}</pre>", escape(&pretty));
    }
    body.push_str("<h3>Timeline</h3><ol class=timeline>");
    for e in &events {
        body.push_str(&event_html(e));
    }
    body.push_str("</ol><p><a href=\"/jobs\">← all jobs</a></p>");
    let refresh = (!job.state.is_terminal()).then_some(5);
    Html(layout(&format!("Job #{}", job.id), &body, refresh, &viewer)).into_response()
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
    source_base: Option<String>,
    wiki_base: Option<String>,
}

impl Links {
    fn for_job(state: &AppState, job: &Job) -> Links {
        let source = state.config.source(&job.source);
        match (source, &state.config.github) {
            (Some(s), Some(gh)) if s.forge == Forge::GitHub => Links {
                source_base: Some(format!("{}/{}", gh.git_url, s.repository)),
                wiki_base: Some(format!("{}/{}/wiki", gh.git_url, s.wiki_repository)),
            },
            _ => Links {
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
        match job.job_kind() {
            Err(malformed) => escape(&malformed),
            Ok(JobKind::Range { before, after, .. }) => {
                let compare = match &self.source_base {
                    Some(b) => format!(
                        " (<a href=\"{}/compare/{}...{}\">compare</a>)",
                        escape(b),
                        escape(&before),
                        escape(&after)
                    ),
                    None => String::new(),
                };
                format!(
                    "range {}..{}{compare}",
                    self.commit(&before),
                    self.commit(&after)
                )
            }
            Ok(JobKind::PullRequest { number, merge_sha }) => {
                let pr = match &self.source_base {
                    Some(b) => format!("<a href=\"{}/pull/{number}\">PR #{number}</a>", escape(b)),
                    None => format!("PR #{number}"),
                };
                format!("{pr}, merge commit {}", self.commit(&merge_sha))
            }
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
