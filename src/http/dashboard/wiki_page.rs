//! A wiki page as teammem's mirror holds it, for wikis that have no web view
//! of their own (local wikis): `/wiki/{owner}/{name}/{page}`, the Markdown
//! shown as text; `{page}` is a file (`Area-src.md`) or a page name as the
//! pages link it (`Area-src`).
//!
//! Invariant: only a configured source the viewer may see, only a page path
//! the wiki engine accepts (checked there), and the content always escaped.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};

use super::{Peer, escape, layout, page_error, viewer, wiki_of};
use crate::http::AppState;

/// A page path as URL segments (each segment percent-encoded, `/` kept).
pub(super) fn encode_path(page: &str) -> String {
    page.split('/')
        .map(|segment| {
            segment
                .bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("/")
}

pub(super) async fn page(
    State(state): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path((owner, name, page)): Path<(String, String, String)>,
) -> Response {
    let viewer = match viewer(&state, &peer, &headers).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let repository = format!("{owner}/{name}");
    let Some(source) = state
        .config
        .source(&repository)
        .filter(|s| viewer.may_see(&s.repository))
    else {
        return page_error(StatusCode::NOT_FOUND, "no such source");
    };
    // A page linked by its name, as teammem's pages link for GitHub's flat
    // wiki (`Area-src`), is its file (`Area-src.md`).
    let page = if page.ends_with(".md") {
        page
    } else {
        format!("{page}.md")
    };
    let read = async {
        let wiki = wiki_of(&state, source)?;
        wiki.get_page("HEAD", &page)
            .await
            .map_err(|e| e.to_string())
    };
    match read.await {
        Ok(found) => {
            let body = format!(
                "<p><code>{}</code> at <code>{}</code> of {}</p><pre class=page>{}</pre>",
                escape(&found.path),
                escape(&found.commit),
                escape(&source.repository),
                escape(&found.content)
            );
            Html(layout(&found.path, &body, None, Some(&viewer))).into_response()
        }
        Err(why) => page_error(StatusCode::NOT_FOUND, &why),
    }
}
