//! A source's wiki as teammem's mirror holds it, for people: the index of its
//! pages at `/wiki/{owner}/{name}/` (with or without the slash), and each
//! page at `/wiki/{owner}/{name}/{page}` rendered from its Markdown
//! (`markdown.rs`), teammem's markers hidden and the statements whose
//! evidence marker says stale highlighted; `{page}` is a file
//! (`Area-src.md`) or a page name as the pages link it (`Area-src`).
//!
//! Invariant: only a configured source the viewer may see, only a page path
//! the wiki engine accepts (checked there), and the page's content only
//! through the renderer, which lets none of its HTML or script-capable URLs
//! through.

use std::fmt::Write;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};

use super::markdown::{self, Links, Stale, encode_path};
use super::{Peer, Viewer, escape, layout, page_error, viewer};
use crate::config::Source;
use crate::http::AppState;
use crate::queue::short_sha;

/// The viewer, and the source `{owner}/{name}` if they may see it (a 404
/// page otherwise, the same for a source that is not configured).
async fn viewer_and_source<'s>(
    state: &'s AppState,
    peer: &Peer,
    headers: &HeaderMap,
    owner: &str,
    name: &str,
) -> Result<(Viewer, &'s Source), Response> {
    let viewer = viewer(state, peer, headers).await?;
    let repository = format!("{owner}/{name}");
    match state
        .config
        .source(&repository)
        .filter(|s| viewer.may_see(&s.repository))
    {
        Some(source) => Ok((viewer, source)),
        None => Err(page_error(StatusCode::NOT_FOUND, "no such source")),
    }
}

/// `/wiki/{owner}/{name}/`: a link to each page of the wiki at its tip,
/// Home first.
pub(super) async fn index(
    State(state): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path((owner, name)): Path<(String, String)>,
) -> Response {
    let (viewer, source) = match viewer_and_source(&state, &peer, &headers, &owner, &name).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    let read = async {
        let (wiki, at) = state.wiki_reads.open(&state.config, source)?;
        let list = wiki.list_pages(&at).await.map_err(|e| e.to_string())?;
        state.wiki_reads.found_tip(source, &at, &list.commit);
        Ok::<_, String>(list)
    };
    let list = match read.await {
        Ok(list) => list,
        Err(why) => return page_error(StatusCode::NOT_FOUND, &why),
    };
    let root = markdown::wiki_root(&source.repository);
    let mut body = format!(
        "<p>The pages of the wiki of <b>{}</b> at commit <code title=\"{}\">{}</code>: {} page{}{}.</p><ul class=pages>",
        escape(&source.repository),
        escape(&list.commit),
        escape(short_sha(&list.commit)),
        list.total,
        if list.total == 1 { "" } else { "s" },
        if list.truncated {
            format!(", the first {} listed", list.pages.len())
        } else {
            String::new()
        }
    );
    // Home first, as a wiki opens there; the rest by path.
    let (home, rest): (Vec<_>, Vec<_>) = list.pages.iter().partition(|p| p.path == "Home.md");
    for page in home.into_iter().chain(rest) {
        let name = page.path.strip_suffix(".md").unwrap_or(&page.path);
        let _ = write!(
            body,
            "<li><a href=\"{root}{}\">{}</a></li>",
            escape(&encode_path(name)),
            escape(name)
        );
    }
    body.push_str("</ul>");
    let title = format!("Wiki of {}", source.repository);
    Html(layout(&title, &body, None, Some(&viewer))).into_response()
}

/// `/wiki/{owner}/{name}/{page}`: the page rendered.
pub(super) async fn page(
    State(state): State<AppState>,
    peer: Peer,
    headers: HeaderMap,
    Path((owner, name, page)): Path<(String, String, String)>,
) -> Response {
    let (viewer, source) = match viewer_and_source(&state, &peer, &headers, &owner, &name).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    // A page linked by its name, as teammem's pages link for GitHub's flat
    // wiki (`Area-src`), is its file (`Area-src.md`).
    let page = if page.ends_with(".md") {
        page
    } else {
        format!("{page}.md")
    };
    let read = async {
        let (wiki, at) = state.wiki_reads.open(&state.config, source)?;
        let found = wiki.get_page(&at, &page).await.map_err(|e| e.to_string())?;
        state.wiki_reads.found_tip(source, &at, &found.commit);
        Ok::<_, String>(found)
    };
    let found = match read.await {
        Ok(found) => found,
        Err(why) => return page_error(StatusCode::NOT_FOUND, &why),
    };
    // The stale facts as the wiki read knows them (`get_wiki_page`'s
    // citations): the line each is on, and what changed it.
    let stale: Vec<Stale> = crate::wiki::fold::fold(&found.content)
        .citations
        .into_iter()
        .filter(|c| c.status == "stale")
        .map(|c| Stale {
            line: c.line,
            changed_in: c.changed_in.unwrap_or_default(),
            deleted: c.deleted,
            cited: match (c.path, c.lines, c.pull_request) {
                (Some(path), Some(lines), _) => format!("{path} {lines}"),
                (Some(path), None, _) => path,
                (None, _, Some(pr)) => format!("#{pr}"),
                _ => String::new(),
            },
        })
        .collect();
    let links = Links::new(&source.repository, &found.path);
    let rendered = markdown::render(&found.content, &links, &stale);
    let stale_summary = stale_summary(stale.len(), &rendered.unmarked);
    let rendered = rendered.html;
    let body = format!(
        "<p class=crumbs><a href=\"{root}\">wiki of {repository}</a> · <code>{path}</code> at <code title=\"{commit}\">{short}</code>{stale_summary}</p><article class=wiki>{rendered}</article>",
        root = markdown::wiki_root(&source.repository),
        repository = escape(&source.repository),
        path = escape(&found.path),
        commit = escape(&found.commit),
        short = escape(short_sha(&found.commit)),
    );
    Html(layout(&found.path, &body, None, Some(&viewer))).into_response()
}

/// What the page's header says of its stale facts: how many, and the lines
/// of those that could not be highlighted (in an HTML or code block), so no
/// fact hides that it is stale.
fn stale_summary(stale: usize, unmarked: &[usize]) -> String {
    const LINES_NAMED: usize = 10;
    let plural = if stale == 1 { "" } else { "s" };
    match (stale, unmarked.len()) {
        (0, _) => String::new(),
        (n, 0) => format!(" · <span class=stale-count>{n} stale fact{plural} (highlighted)</span>"),
        (n, k) => {
            let mut named: Vec<String> = unmarked
                .iter()
                .take(LINES_NAMED)
                .map(|line| line.to_string())
                .collect();
            if k > LINES_NAMED {
                named.push(format!("and {} more", k - LINES_NAMED));
            }
            format!(
                " · <span class=stale-count>{n} stale fact{plural} ({} highlighted; not highlighted, inside HTML or code: line{} {})</span>",
                n - k,
                if k == 1 { "" } else { "s" },
                named.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::stale_summary;

    #[test]
    fn the_header_names_the_stale_facts_it_could_not_highlight() {
        assert_eq!(stale_summary(0, &[]), "");
        assert!(stale_summary(2, &[]).contains("2 stale facts (highlighted)"));
        let said = stale_summary(3, &[4]);
        assert!(
            said.contains(
                "3 stale facts (2 highlighted; not highlighted, inside HTML or code: line 4)"
            ),
            "{said}"
        );
        let many: Vec<usize> = (1..=12).collect();
        let said = stale_summary(12, &many);
        assert!(
            said.contains("lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, and 2 more)"),
            "{said}"
        );
    }
}
