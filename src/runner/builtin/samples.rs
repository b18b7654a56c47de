//! Test builds only: the one sample evidence bundle (and its parts) the
//! builtin agent's unit tests (and the receipt checks') build on, the pages they start from, and how
//! they read a page back (as a CommonMark renderer shows it, and its facts).
//!
//! Invariant: every sample is a bundle the real forges could produce (full
//! shas, a range scope, merge commits on the first-parent path), so what a
//! test proves of the planner holds for a real job.

use std::collections::{BTreeMap, BTreeSet};

use super::areas::slug_of_page;
use super::inputs::{AreaFile, AreaFiles, CurrentPage};
use super::markers::HOME;
use super::plan::Plan;
use crate::facts::Lines;
use crate::forge::evidence::{
    BUNDLE_VERSION, ChangedFile, CommitInfo, EvidenceBundle, FileStatus, ForgeKind, JobScope,
    PullRequest, SourceInfo,
};
use crate::ids::Sha;

/// A full sha of one repeated hex digit.
pub fn sha(c: char) -> String {
    c.to_string().repeat(40)
}

/// The job's tip in [`bundle`].
pub fn tip() -> Sha {
    Sha::parse(&"f".repeat(40)).unwrap()
}

/// A merged pull request by Zoë whose merge commit is `sha_char` repeated,
/// modifying `paths`.
pub fn pull(number: u64, title: &str, sha_char: char, paths: &[&str]) -> PullRequest {
    PullRequest {
        number: crate::ids::PullNumber::new(number).unwrap(),
        title: title.into(),
        body: String::new(),
        body_truncated: false,
        author: "Zoë".into(),
        labels: vec![],
        merged_at: "2026-11-30T10:00:00Z".into(),
        merge_sha: Sha::parse(&sha_char.to_string().repeat(40)).unwrap(),
        files: paths
            .iter()
            .map(|p| ChangedFile {
                path: (*p).into(),
                status: FileStatus::Modified,
                additions: 1,
                deletions: 0,
                previous_path: None,
            })
            .collect(),
        files_truncated: false,
        arrived_through: None,
    }
}

/// A pull request `n` merged on `date` touching `paths`, with a long
/// title (entries of a few hundred bytes, as on real pages).
pub fn dated(n: u64, date: &str, paths: &[&str]) -> PullRequest {
    let mut p = pull(
        n,
        &format!("Change number {n} of a long history, with a title as long as real ones are"),
        'a',
        paths,
    );
    p.merge_sha = crate::ids::Sha::parse(&format!("{n:040x}")).unwrap();
    p.merged_at = format!("{date}T10:00:00Z");
    p
}

/// `pull` by `author`.
pub fn by(author: &str, pull: PullRequest) -> PullRequest {
    PullRequest {
        author: author.into(),
        ..pull
    }
}

/// A range job of `demo/app` (`00…01..ff…ff`) with `pulls` and no commits.
pub fn bundle(pulls: Vec<PullRequest>) -> EvidenceBundle {
    EvidenceBundle {
        version: BUNDLE_VERSION,
        source: SourceInfo {
            repository: crate::ids::RepoName::parse("demo/app").unwrap(),
            forge: ForgeKind::Local,
            default_branch: "main".into(),
        },
        job: JobScope {
            job_id: 1,
            scope: crate::ids::Scope::Range {
                before: crate::ids::Sha::parse(&("0".repeat(39) + "1")).unwrap(),
                after: crate::ids::Sha::parse(&"f".repeat(40)).unwrap(),
            },
        },
        commits: vec![],
        commits_truncated: false,
        pull_requests: pulls,
        pull_requests_truncated: false,
        stale_facts: Vec::new(),
        marker_rewrites: Default::default(),
        direct_changes: Vec::new(),
        direct_changes_truncated: false,
        tip_is_newest: true,
    }
}

/// [`bundle`] of `repository` for the range `0..b` of commits `a` (parent
/// `0`) and `b` (parent `a`), each a PR merge adding one of `files`.
pub fn range(repository: &str, files: [&str; 2]) -> EvidenceBundle {
    let full = |c: char| Sha::parse(&sha(c)).expect("a sample commit id");
    let commit = |s: char, parent: char| CommitInfo {
        sha: full(s),
        parents: vec![full(parent)],
        author: "Zoë".into(),
        committed_at: "2026-11-30T10:00:00Z".into(),
        subject: "change".into(),
    };
    let added = |number: u64, s: char, path: &str| {
        let mut p = pull(number, "change", s, &[path]);
        p.files[0].status = FileStatus::Added;
        p
    };
    let mut b = bundle(vec![added(1, 'a', files[0]), added(2, 'b', files[1])]);
    b.source.repository = crate::ids::RepoName::parse(repository).unwrap();
    b.job.scope = crate::ids::Scope::Range {
        before: Sha::parse(&sha('0')).unwrap(),
        after: Sha::parse(&sha('b')).unwrap(),
    };
    b.commits = vec![commit('a', '0'), commit('b', 'a')];
    b
}

/// A wiki holding only a hand-written Home.
pub fn home() -> BTreeMap<String, CurrentPage> {
    [(
        HOME.to_owned(),
        CurrentPage {
            sha: "h".repeat(40),
            content: "# Welcome\n".into(),
        },
    )]
    .into()
}

/// Pages as a snapshot would show them (each with a placeholder blob sha).
pub fn as_current(pages: BTreeMap<String, String>) -> BTreeMap<String, CurrentPage> {
    pages
        .into_iter()
        .map(|(k, content)| {
            (
                k,
                CurrentPage {
                    sha: "s".repeat(40),
                    content,
                },
            )
        })
        .collect()
}

/// An area's files at [`tip`], each with its purpose (text, line) if any.
pub fn listing(files: &[(&str, Option<(&str, u32)>)]) -> AreaFiles {
    AreaFiles {
        commit: tip(),
        files: files
            .iter()
            .map(|(path, purpose)| AreaFile {
                path: (*path).into(),
                purpose: purpose.map(|(t, l)| (t.to_owned(), Lines::new(l, l).unwrap())),
                pinned: None,
            })
            .collect(),
        omitted: 0,
        listing_cut: false,
    }
}

/// The facts of `page`'s evidence markers (every marker must parse).
pub fn source_facts(page: &str) -> Vec<crate::facts::Fact> {
    crate::facts::facts(page)
        .into_iter()
        .map(|f| match f {
            crate::facts::Found::Fact(fact) => fact,
            other => panic!("unreadable marker {other:?}"),
        })
        .collect()
}

/// The text of every list item of `page` as a CommonMark (GitHub
/// flavour) renderer shows it, and the raw HTML it passes through.
pub fn rendered_items(page: &str) -> (Vec<String>, Vec<String>) {
    use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
    let options =
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
    let (mut items, mut html, mut current) = (Vec::new(), Vec::new(), None::<String>);
    for event in Parser::new_ext(page, options) {
        match event {
            Event::Start(Tag::Item) => current = Some(String::new()),
            Event::End(TagEnd::Item) => items.extend(current.take()),
            Event::Text(text) => {
                if let Some(item) = &mut current {
                    item.push_str(&text);
                }
            }
            // A code span reads as written: in backticks.
            Event::Code(text) => {
                if let Some(item) = &mut current {
                    item.push('`');
                    item.push_str(&text);
                    item.push('`');
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some(item) = &mut current {
                    item.push(' ');
                }
            }
            Event::Html(raw) | Event::InlineHtml(raw) => html.push(raw.to_string()),
            _ => {}
        }
    }
    (items, html)
}

/// The slugs of the area pages (not their quarter pages) `plan` writes or
/// patches.
pub fn area_slugs(plan: &Plan) -> BTreeSet<String> {
    plan.writes
        .iter()
        .map(|w| w.path.as_str())
        .chain(plan.patches.keys().map(String::as_str))
        .filter_map(slug_of_page)
        .map(str::to_owned)
        .collect()
}
