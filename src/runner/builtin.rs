//! The builtin agent's edit planner: deterministic, no network, pure. From an
//! evidence bundle, the current pages and the files of the areas touched (as
//! the agent read them at the job's tip) it computes the edits that keep
//! `Home.md` (topic index), `Areas/<area>.md` (one page per area touched, with
//! a "What is here" list of the area's files, a "Who knows this area" list of
//! its authors and a "Recent changes" list), `Changelog.md`, and
//! `Dependencies.md` (the dependencies the manifests at the job's tip
//! declare, see [`plan_full`]) in step.
//!
//! Invariants:
//! - every entry cites the PR number, title, author and the full merge-commit
//!   SHA, and ends with the marker `<!-- teammem:<sha> -->`; an entry whose
//!   marker is already on a page is never written again, so replaying a range
//!   plans nothing;
//! - existing pages are only patched at exact anchors (insert after a marker
//!   line, or append at the end); new pages are written whole;
//! - untrusted text (titles, authors, paths, a file's purpose) is escaped so
//!   it renders as text: it cannot open HTML, forge or close a marker, start a
//!   heading or break a line;
//! - an area page's "What is here" section is re-derived whole, between its
//!   two anchors, each time a job records an entry on the page: every file
//!   line cites the line its purpose came from with an evidence marker at the
//!   job's tip (so the runner's stale markers there are replaced); it lists at
//!   most [`WHAT_IS_HERE_FILES`] files in [`WHAT_IS_HERE_BYTES`] and says how
//!   many it left out; every one of its lines carries a teammem marker, and a
//!   section whose anchors or lines a person changed is left as it is; all the
//!   sections of one job change at most [`JOB_SECTION_BYTES`];
//! - an area page's "Who knows this area" section ranks the authors of the
//!   pull requests recorded on it, most first: each job adds its own new
//!   entries' authors to the counts the section keeps in its author markers
//!   (names hex-encoded there, so no name can forge one), so a replay counts
//!   nothing twice and trimmed entries still count; at most
//!   [`WHO_KNOWS_AUTHORS`] are listed, and a section a person edited is left
//!   as it is;
//! - `Dependencies.md` is re-derived whole between its two anchors when the
//!   agent read the tip's manifests; each dependency line cites its
//!   declaring line at the tip, every line carries a teammem marker, and a
//!   page a person edited there is left alone; an entry names at most
//!   [`CHANGES_PER_ENTRY`] dependency changes;
//! - no planned page exceeds [`PAGE_BUDGET`] (the writer's 64 KiB page limit):
//!   the oldest entry lines are dropped first and the page says so once, in
//!   its `<!-- teammem:trimmed -->` note: a page that drops entries it held
//!   points at its history; a new page that cannot hold all of its first
//!   job's entries names the pull requests it left out. (A range replayed
//!   after its entries were trimmed would record them again.)

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::facts::{Lines, Marker};
use crate::forge::evidence::{EvidenceBundle, PullRequest};
use crate::ids::Sha;

pub const HOME: &str = "Home.md";
pub const CHANGELOG: &str = "Changelog.md";
/// The folder of the area pages.
pub const AREAS_DIR: &str = "Areas";
/// The area of files at the repository root.
pub const ROOT_AREA: &str = "root";

/// The anchor lines new entries are inserted after.
pub const CHANGELOG_ANCHOR: &str = "<!-- teammem:changelog -->\n";
pub const RECENT_ANCHOR: &str = "<!-- teammem:recent-changes -->\n";
pub const TOPICS_ANCHOR: &str = "<!-- teammem:topics -->\n";

/// The most bytes a page the planner writes may hold: the writer's page limit.
pub const PAGE_BUDGET: usize = crate::wiki::validate::MAX_PAGE_BYTES;

/// Marks the note that says older entries were trimmed.
const TRIMMED_MARKER: &str = "<!-- teammem:trimmed -->";

fn trimmed_note() -> String {
    format!(
        "\n_Older entries were trimmed to keep this page within 64 KiB; they remain in this page's history._ {TRIMMED_MARKER}\n"
    )
}

/// How many changed paths an area entry names before "and N more".
const PATHS_PER_ENTRY: usize = 5;

/// The marker that keys an entry by its merge commit.
pub fn entry_marker(sha: &str) -> String {
    format!("<!-- teammem:{} -->", sha.to_ascii_lowercase())
}

fn area_link_marker(slug: &str) -> String {
    format!("<!-- teammem:area:{slug} -->")
}

const CHANGELOG_LINK_MARKER: &str = "<!-- teammem:changelog-link -->";

/// Ends the first line of an area page's "What is here" section.
pub const WHAT_IS_HERE_ANCHOR: &str = "<!-- teammem:what-is-here -->";
/// The last line of the section.
pub const WHAT_IS_HERE_END: &str = "<!-- teammem:what-is-here-end -->";
/// Ends the line of a file that states no purpose.
const FILE_MARKER: &str = "<!-- teammem:file -->";
const WHAT_IS_HERE_HEADING: &str = "## What is here\n\n";
/// At most this many files are listed in one area's section.
pub const WHAT_IS_HERE_FILES: usize = 200;
/// One area's section holds at most this many bytes.
pub const WHAT_IS_HERE_BYTES: usize = 12 * 1024;
/// The sections one job rewrites change at most this many bytes in all (old
/// and new text), so they leave room in the job's change budget.
pub const JOB_SECTION_BYTES: usize = 128 * 1024;

/// Ends the first line of an area page's "Who knows this area" section.
pub const WHO_KNOWS_ANCHOR: &str = "<!-- teammem:who-knows -->";
/// The last line of the section.
pub const WHO_KNOWS_END: &str = "<!-- teammem:who-knows-end -->";
const WHO_KNOWS_HEADING: &str = "## Who knows this area\n\n";
/// Starts the marker that ends an author's line: the count, then the name
/// in lowercase hex (so no name can end or forge the marker).
const AUTHOR_MARKER: &str = "<!-- teammem:author ";
/// At most this many authors are kept (the most frequent; ties by name).
pub const WHO_KNOWS_AUTHORS: usize = 20;

/// One file of an area at the job's tip, with its purpose (the plain text
/// and the line it came from) if it states one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AreaFile {
    pub path: String,
    pub purpose: Option<(String, Lines)>,
}

/// An area's files at one commit, as the agent read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AreaFiles {
    pub commit: Sha,
    /// Sorted by path.
    pub files: Vec<AreaFile>,
    /// Files of the area that are not in `files`.
    pub omitted: usize,
    /// The area's listing was cut, so `omitted` is a lower bound.
    pub listing_cut: bool,
}

/// Area slug → its files; an area without an entry keeps its section as it is.
pub type Listings = BTreeMap<String, AreaFiles>;

/// A page as it is at the snapshot the plan starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentPage {
    /// Blob sha (the patch's `expected_sha`).
    pub sha: String,
    pub content: String,
}

/// Full content for a new page (`write_wiki_pages`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewPage {
    pub path: String,
    pub content: String,
}

/// One exact-anchor replacement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replacement {
    pub old: String,
    pub new: String,
}

/// Replacements in one existing page (`patch_wiki_pages`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PagePatch {
    pub expected_sha: String,
    pub replacements: Vec<Replacement>,
}

/// What the plan does for one pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullPlan {
    pub number: u64,
    pub merge_sha: String,
    /// Pages that carry (or will carry) the PR's entry.
    pub pages: Vec<String>,
    /// True when every page already carried the entry.
    pub already_recorded: bool,
}

/// The edits of one run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub writes: Vec<NewPage>,
    pub patches: BTreeMap<String, PagePatch>,
    pub pulls: Vec<PullPlan>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.patches.is_empty()
    }

    /// The slugs of the area pages the plan writes or patches.
    pub fn area_slugs(&self) -> BTreeSet<String> {
        let prefix = format!("{AREAS_DIR}/");
        self.writes
            .iter()
            .map(|w| w.path.as_str())
            .chain(self.patches.keys().map(String::as_str))
            .filter_map(|p| p.strip_prefix(&prefix)?.strip_suffix(".md"))
            .map(str::to_owned)
            .collect()
    }
}

/// The area of a changed path: its first segment, `root` for top-level files.
pub fn area_of(path: &str) -> String {
    match path.split_once('/') {
        Some((first, _)) if !first.is_empty() => first.to_owned(),
        _ => ROOT_AREA.to_owned(),
    }
}

const DEVICE_NAMES: [&str; 22] = [
    "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8",
    "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
];

/// A page-path-safe, case-folded name for an area: lowercase letters and
/// digits (any script), `-`, `_`; everything else becomes `-`; never empty,
/// never a device name or a git-reserved name, at most 64 bytes.
pub fn area_slug(area: &str) -> String {
    let mut slug = String::new();
    for ch in area.chars().flat_map(char::to_lowercase) {
        let keep = ch.is_alphanumeric() || ch == '-' || ch == '_';
        let next = if keep { ch } else { '-' };
        if next == '-' && slug.ends_with('-') {
            continue;
        }
        if slug.len() + next.len_utf8() > 64 {
            break;
        }
        slug.push(next);
    }
    let slug = slug.trim_matches('-').to_owned();
    let reserved = slug.is_empty()
        || DEVICE_NAMES.contains(&slug.as_str())
        || slug == "git"
        || slug.starts_with("git~");
    if reserved {
        format!("area-{slug}").trim_end_matches('-').to_owned()
    } else {
        slug
    }
}

/// The page of an area slug.
pub fn area_page(slug: &str) -> String {
    format!("{AREAS_DIR}/{slug}.md")
}

/// Escapes untrusted text for the middle of one line of Markdown (never its
/// start: every caller writes it after fixed text), escaping only what would
/// change the rendering there, so titles, dates, paths and names read as
/// written in the raw page too: whitespace runs (newlines included) become one
/// space; control and format characters are dropped; `<` becomes `&lt;` (no
/// HTML, no autolink, no forged `<!-- teammem:` marker) and `&` becomes
/// `&amp;` where it could start an entity; `` ` `` `*` `[` `~` are
/// backslash-escaped, `_` unless it sits between letters or digits (it cannot
/// emphasize there), and `\` before punctuation.
pub fn escape_markdown(text: &str) -> String {
    let mut cleaned: Vec<char> = Vec::with_capacity(text.len());
    let mut space = false;
    for ch in text.chars() {
        if ch.is_whitespace() {
            space = !cleaned.is_empty();
            continue;
        }
        if ch.is_control() || is_format_char(ch) {
            continue;
        }
        if space {
            cleaned.push(' ');
            space = false;
        }
        cleaned.push(ch);
    }
    let mut out = String::with_capacity(cleaned.len() + 8);
    for (i, &ch) in cleaned.iter().enumerate() {
        let before = i.checked_sub(1).map(|b| cleaned[b]);
        let after = cleaned.get(i + 1).copied();
        let alnum = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
        match ch {
            '<' => out.push_str("&lt;"),
            '&' if after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '#') => {
                out.push_str("&amp;")
            }
            '`' | '*' | '[' | '~' => {
                out.push('\\');
                out.push(ch);
            }
            '_' if !(alnum(before) && alnum(after)) => out.push_str("\\_"),
            '\\' if after.is_some_and(|c| c.is_ascii_punctuation()) => out.push_str("\\\\"),
            _ => out.push(ch),
        }
    }
    out
}

/// Unicode format characters (bidi overrides, zero-width joiners, ...).
fn is_format_char(ch: char) -> bool {
    matches!(ch,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

fn date_of(rfc3339: &str) -> &str {
    rfc3339.get(..10).unwrap_or(rfc3339)
}

/// The longest "why" an entry quotes from a PR's description.
const MAX_WHY_CHARS: usize = 280;

/// The first paragraph of a PR's description, as one bounded line (cut at a
/// word, marked with `…`); `None` when the description is empty.
fn first_paragraph(body: &str) -> Option<String> {
    let body = without_comment_lines(body);
    let paragraph = body.split("\n\n").map(str::trim).find(|p| !p.is_empty())?;
    let words: Vec<&str> = paragraph.split_whitespace().collect();
    let mut line = String::new();
    for word in words {
        if line.chars().count() + word.chars().count() + 1 > MAX_WHY_CHARS {
            line.push('…');
            break;
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    (!line.is_empty()).then_some(line)
}

/// A description without the HTML comments that open a line (PR template
/// hints), even when text follows on the next line with no blank line between;
/// text after a comment's `-->` on its closing line is kept. Lines come back
/// joined by `\n`, so `\r\n` descriptions split into paragraphs too.
fn without_comment_lines(body: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let mut in_comment = false;
    for line in body.lines() {
        let mut rest = line;
        if !in_comment && rest.trim_start().starts_with("<!--") {
            in_comment = true;
            rest = &rest.trim_start()[4..];
        }
        if in_comment {
            match rest.find("-->") {
                Some(end) => {
                    in_comment = false;
                    let after = rest[end + 3..].trim();
                    if !after.is_empty() {
                        kept.push(after);
                    }
                }
                None => continue,
            }
            continue;
        }
        kept.push(line);
    }
    kept.join("\n")
}

/// The issues a PR's description says it closes (`Fixes #12`, `closes #3`,
/// `Resolved #7`: GitHub's closing keywords, this repository's issues only),
/// in order, once each.
fn closed_issues(body: &str) -> Vec<u64> {
    const KEYWORDS: [&str; 9] = [
        "close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved",
    ];
    let words: Vec<&str> = body.split_whitespace().collect();
    let mut found = Vec::new();
    for pair in words.windows(2) {
        let keyword = pair[0].trim_end_matches(':').to_ascii_lowercase();
        if !KEYWORDS.contains(&keyword.as_str()) {
            continue;
        }
        let Some(digits) = pair[1].strip_prefix('#') else {
            continue;
        };
        let digits: String = digits.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse::<u64>()
            && n > 0
            && !found.contains(&n)
        {
            found.push(n);
        }
    }
    found
}

/// ` — why (closes #3, #4)`: what a PR entry says about why it was made.
fn why(pull: &PullRequest) -> String {
    let mut out = String::new();
    if let Some(paragraph) = first_paragraph(&pull.body) {
        out.push_str(" — ");
        out.push_str(&escape_markdown(&paragraph));
    }
    let closed = closed_issues(&pull.body);
    if !closed.is_empty() {
        let list: Vec<String> = closed.iter().map(|n| format!("#{n}")).collect();
        out.push_str(&format!(" (closes {})", list.join(", ")));
    }
    out
}

/// The Changelog line of a PR.
pub fn changelog_entry(pull: &PullRequest) -> String {
    changelog_entry_with(pull, "")
}

/// The Changelog line of a PR with `note` (e.g. its dependency changes,
/// already escaped) after the why.
pub fn changelog_entry_with(pull: &PullRequest, note: &str) -> String {
    format!(
        "- {} — #{} {} (by {}){}{note} — merge commit `{}` {}\n",
        escape_markdown(date_of(&pull.merged_at)),
        pull.number,
        escape_markdown(&pull.title),
        escape_markdown(&pull.author),
        why(pull),
        pull.merge_sha.to_ascii_lowercase(),
        entry_marker(&pull.merge_sha)
    )
}

/// The "Recent changes" line of a PR on an area page, naming the area's paths.
pub fn area_entry(pull: &PullRequest, paths: &[&str]) -> String {
    area_entry_with(pull, paths, "")
}

/// [`area_entry`] with `note` (already escaped) after the why.
pub fn area_entry_with(pull: &PullRequest, paths: &[&str], note: &str) -> String {
    let mut named: Vec<String> = paths
        .iter()
        .take(PATHS_PER_ENTRY)
        .map(|p| escape_markdown(p))
        .collect();
    if paths.len() > PATHS_PER_ENTRY {
        named.push(format!("and {} more", paths.len() - PATHS_PER_ENTRY));
    }
    let files = if named.is_empty() {
        String::new()
    } else {
        format!(" — {}", named.join(", "))
    };
    format!(
        "- #{} {} (by {}, {}){}{note} — merge commit `{}`{} {}\n",
        pull.number,
        escape_markdown(&pull.title),
        escape_markdown(&pull.author),
        escape_markdown(date_of(&pull.merged_at)),
        why(pull),
        pull.merge_sha.to_ascii_lowercase(),
        files,
        entry_marker(&pull.merge_sha)
    )
}

fn area_title(area: &str) -> String {
    if area == ROOT_AREA {
        "files at the repository root".to_owned()
    } else {
        format!("files under `{}/`", area.replace('`', "'"))
    }
}

fn new_area_page(
    area: &str,
    slug: &str,
    section: Option<&str>,
    who: &str,
    entries: &str,
) -> String {
    let what = section
        .map(|s| format!("{WHAT_IS_HERE_HEADING}{s}\n"))
        .unwrap_or_default();
    format!(
        "# Area: {}\n\nPull requests that changed {} (kept by teammem).\n\n{what}{WHO_KNOWS_HEADING}{who}\n## Recent changes\n\n{RECENT_ANCHOR}{entries}",
        escape_markdown(slug),
        area_title(area)
    )
}

/// A file's purpose as Markdown: escaped like a title, and with no `-->` (or
/// `--!>`) that could close a comment.
pub fn escape_purpose(text: &str) -> String {
    escape_markdown(text)
        .replace("-->", "--&gt;")
        .replace("--!>", "--!&gt;")
}

/// One file's line: its path, its purpose and the marker citing where the
/// purpose came from, or its path alone.
fn file_line(file: &AreaFile, commit: &Sha) -> String {
    let path = escape_markdown(&file.path);
    match &file.purpose {
        Some((text, lines)) => format!(
            "- {path} — {} {}\n",
            escape_purpose(text),
            Marker::source(&file.path, commit.clone(), *lines)
        ),
        None => format!("- {path} {FILE_MARKER}\n"),
    }
}

/// The room the first and last lines of a section take at most.
const SECTION_FRAME: usize = 512;

/// An area's "What is here" section (without its heading): a summary line
/// ending with [`WHAT_IS_HERE_ANCHOR`], one line per file while they fit in
/// `cap` bytes, and [`WHAT_IS_HERE_END`].
pub fn what_is_here(area: &str, files: &AreaFiles, cap: usize) -> String {
    let mut lines = String::new();
    let mut listed = 0;
    for file in files.files.iter().take(WHAT_IS_HERE_FILES) {
        let line = file_line(file, &files.commit);
        if SECTION_FRAME + lines.len() + line.len() > cap {
            break;
        }
        lines.push_str(&line);
        listed += 1;
    }
    let omitted = files.omitted + (files.files.len() - listed);
    let place = area_title(area);
    let mut summary = if listed == 0 && omitted == 0 && !files.listing_cut {
        format!("No {place} at commit `{}` (kept by teammem).", files.commit)
    } else {
        format!(
            "The {place} at commit `{}`, each with the purpose its first lines state (kept by teammem).",
            files.commit
        )
    };
    if omitted > 0 || files.listing_cut {
        let at_least = if files.listing_cut { "At least " } else { "" };
        let noun = if omitted == 1 && !files.listing_cut {
            "file is"
        } else {
            "files are"
        };
        summary.push_str(&format!(
            " {at_least}{omitted} more {noun} not listed (the list holds at most {WHAT_IS_HERE_FILES} files in {} KiB).",
            cap / 1024
        ));
    }
    format!("{summary} {WHAT_IS_HERE_ANCHOR}\n{lines}{WHAT_IS_HERE_END}\n")
}

/// Where the "What is here" section is on `page`: from the start of its
/// anchor's line to the end of its end line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Section {
    /// The page has none.
    Absent,
    /// The section's byte range.
    At(std::ops::Range<usize>),
    /// A person changed it (an anchor missing, doubled or out of order, a
    /// line without a teammem marker in it, or the recent-changes anchor
    /// inside it), so it is left alone.
    Edited,
}

impl Section {
    fn len(&self) -> usize {
        match self {
            Section::At(range) => range.len(),
            _ => 0,
        }
    }
}

/// The order in which a job reads its areas' files, for when its budget of
/// file heads does not cover them all: areas whose page has no "What is
/// here" section yet come first (in slug order), then the others from a
/// place that moves with the job's tip, so that jobs touching the same many
/// areas refresh different ones in turn instead of the same first few.
pub fn refresh_order(
    slugs: &BTreeSet<String>,
    pages: &BTreeMap<String, CurrentPage>,
    tip: &Sha,
) -> Vec<String> {
    let has_section = |slug: &String| {
        pages
            .get(&area_page(slug))
            .is_some_and(|page| section_span(&page.content) != Section::Absent)
    };
    let (mut first, rest): (Vec<String>, Vec<String>) =
        slugs.iter().cloned().partition(|slug| !has_section(slug));
    if !rest.is_empty() {
        let start = (tip.spread("areas") % rest.len() as u64) as usize;
        first.extend(rest[start..].iter().chain(&rest[..start]).cloned());
    }
    first
}

/// Finds the "What is here" section of `page`.
pub fn section_span(page: &str) -> Section {
    span_between(page, WHAT_IS_HERE_ANCHOR, WHAT_IS_HERE_END)
}

/// Finds the section of `page` from the line ending with `anchor` to the line
/// `end`, every line of it carrying a teammem marker.
fn span_between(page: &str, anchor: &str, end: &str) -> Section {
    let (anchor_text, end_text) = (anchor, end);
    match (
        page.matches(anchor_text).count(),
        page.matches(end_text).count(),
    ) {
        (0, 0) => return Section::Absent,
        (1, 1) => {}
        _ => return Section::Edited,
    }
    let (Some(anchor), Some(end)) = (page.find(anchor_text), page.find(end_text)) else {
        return Section::Edited;
    };
    if end < anchor {
        return Section::Edited;
    }
    let start = page[..anchor].rfind('\n').map_or(0, |i| i + 1);
    let stop = page[end..].find('\n').map_or(page.len(), |i| end + i + 1);
    let span = &page[start..stop];
    let edited = span
        .split_inclusive('\n')
        .any(|line| !line.contains(crate::wiki::confine::MARKER))
        || span.contains(RECENT_ANCHOR.trim_end());
    if edited {
        return Section::Edited;
    }
    Section::At(start..stop)
}

/// The authors and their counts in a "Who knows this area" section, read
/// back from the author markers (lines without one are ignored).
fn who_knows_counts(section: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in section.lines() {
        let Some(at) = line.rfind(AUTHOR_MARKER) else {
            continue;
        };
        let Some(rest) = line[at + AUTHOR_MARKER.len()..].strip_suffix(" -->") else {
            continue;
        };
        let Some((count, hex)) = rest.split_once(' ') else {
            continue;
        };
        let (Ok(count), Some(name)) = (count.parse::<u64>(), unhex(hex)) else {
            continue;
        };
        *counts.entry(name).or_insert(0) += count;
    }
    counts
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<String> {
    if !text.len().is_multiple_of(2) || text.is_empty() {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// An area's "Who knows this area" section (without its heading): the
/// authors of the pull requests recorded on the page, most first, each with
/// its count, at most [`WHO_KNOWS_AUTHORS`].
pub fn who_knows(counts: &BTreeMap<String, u64>) -> String {
    let mut ranked: Vec<(&String, &u64)> = counts.iter().filter(|(_, n)| **n > 0).collect();
    ranked.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
    let left_out = ranked.len().saturating_sub(WHO_KNOWS_AUTHORS);
    let mut text = String::from(
        "The authors of the pull requests teammem recorded here, most first (kept by teammem).",
    );
    if left_out > 0 {
        text.push_str(&format!(
            " {left_out} more are not listed (the list keeps the {WHO_KNOWS_AUTHORS} most frequent)."
        ));
    }
    text.push_str(&format!(" {WHO_KNOWS_ANCHOR}\n"));
    for (name, count) in ranked.into_iter().take(WHO_KNOWS_AUTHORS) {
        let noun = if *count == 1 {
            "pull request"
        } else {
            "pull requests"
        };
        text.push_str(&format!(
            "- {} — {count} {noun} {AUTHOR_MARKER}{count} {} -->\n",
            escape_purpose(name),
            hex(name)
        ));
    }
    text.push_str(WHO_KNOWS_END);
    text.push('\n');
    text
}

fn new_changelog(entries: &str) -> String {
    format!(
        "# Changelog\n\nMerged pull requests, newest first (kept by teammem).\n\n{CHANGELOG_ANCHOR}{entries}"
    )
}

fn topic_line(slug: &str) -> String {
    format!(
        "- [{}]({AREAS_DIR}/{slug}) {}\n",
        escape_markdown(slug),
        area_link_marker(slug)
    )
}

fn changelog_link() -> String {
    format!("- [Changelog](Changelog) {CHANGELOG_LINK_MARKER}\n")
}

/// Counts the non-overlapping occurrences of `needle` in `haystack`.
fn occurrences(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// A replacement that inserts `block` right after `anchor` when the anchor
/// occurs exactly once, or appends `fallback(block)` at the end otherwise.
fn insert_after_anchor(
    page: &CurrentPage,
    anchor: &str,
    block: &str,
    fallback: impl FnOnce(&str) -> String,
) -> Replacement {
    if occurrences(&page.content, anchor) == 1 {
        Replacement {
            old: anchor.to_owned(),
            new: format!("{anchor}{block}"),
        }
    } else {
        let sep = if page.content.is_empty() || page.content.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        Replacement {
            old: String::new(),
            new: format!("{sep}{}", fallback(block)),
        }
    }
}

/// True for an entry line (it ends with an entry marker of a full sha).
fn is_entry_line(line: &str) -> bool {
    let line = line.trim_end();
    let Some(rest) = line.strip_suffix(" -->") else {
        return false;
    };
    rest.len() >= 40 + "<!-- teammem:".len()
        && rest[rest.len() - 40..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
        && rest[..rest.len() - 40].ends_with("<!-- teammem:")
}

/// Byte ranges of the entry lines of `text` (newline included), in page order.
fn entry_lines(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        if is_entry_line(line) {
            out.push(start..start + line.len());
        }
        start += line.len();
    }
    out
}

/// Applies replacements to a text with the writer's own patch engine (all
/// on the original text, each `old` once); `Err` says why the writer would
/// refuse them.
fn apply_replacements(text: &str, replacements: &[Replacement]) -> Result<String, String> {
    let engine: Vec<crate::wiki::patch::Replacement> = replacements
        .iter()
        .map(|r| crate::wiki::patch::Replacement {
            old: r.old.clone(),
            new: r.new.clone(),
        })
        .collect();
    crate::wiki::patch::apply_replacements(text, &engine).map_err(|v| v.to_string())
}

/// Adds replacements to `patch` that drop the oldest entry lines of `page`
/// (the last ones: pages list newest first) until the patched page fits
/// [`PAGE_BUDGET`], leaving the trimmed note once. One replacement per run
/// of adjacent dropped lines, so a page trimmed from the bottom costs one.
fn trim_patch(page: &CurrentPage, patch: &mut PagePatch) {
    let Ok(after) = apply_replacements(&page.content, &patch.replacements) else {
        return;
    };
    let after = after.len();
    if after <= PAGE_BUDGET {
        return;
    }
    // Lines the patch already replaces are not dropped again.
    let taken: Vec<std::ops::Range<usize>> = patch
        .replacements
        .iter()
        .filter(|r| !r.old.is_empty())
        .filter_map(|r| page.content.find(&r.old).map(|at| at..at + r.old.len()))
        .collect();
    let note = if page.content.contains(TRIMMED_MARKER) {
        String::new()
    } else {
        trimmed_note()
    };
    let need = after + note.len() - PAGE_BUDGET;
    let lines: Vec<std::ops::Range<usize>> = entry_lines(&page.content)
        .into_iter()
        .filter(|line| {
            !taken
                .iter()
                .any(|t| line.start < t.end && t.start < line.end)
        })
        .collect();
    let mut dropped: Vec<std::ops::Range<usize>> = Vec::new();
    let mut freed = 0;
    for range in lines.iter().rev() {
        if freed >= need {
            break;
        }
        freed += range.len();
        dropped.push(range.clone());
    }
    dropped.reverse();
    // Merge adjacent lines into runs.
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    for range in dropped {
        match runs.last_mut() {
            Some(last) if last.end == range.start => last.end = range.end,
            _ => runs.push(range),
        }
    }
    let count = runs.len();
    for (i, run) in runs.into_iter().enumerate() {
        patch.replacements.push(Replacement {
            old: page.content[run].to_owned(),
            new: if i + 1 == count {
                note.clone()
            } else {
                String::new()
            },
        });
    }
}

/// Cuts the oldest entry lines of a new page's content until it fits. The
/// entries cut were never on this page, so its history does not hold them:
/// the note names their pull requests instead.
fn trim_new_page(content: String) -> String {
    if content.len() <= PAGE_BUDGET {
        return content;
    }
    let lines = entry_lines(&content);
    // Cut from the oldest until the page and a note naming the cut fit.
    for keep in (0..lines.len()).rev() {
        let cut = &lines[keep..];
        let note = left_out_note(cut.iter().map(|line| &content[line.clone()]));
        let size = content.len() - cut.iter().map(|line| line.len()).sum::<usize>() + note.len();
        if size <= PAGE_BUDGET || keep == 0 {
            let mut kept = content.clone();
            for line in cut.iter().rev() {
                kept.replace_range(line.clone(), "");
            }
            kept.push_str(&note);
            return kept;
        }
    }
    content
}

/// How many pull-request numbers a left-out note spells out before "and N
/// more".
const LEFT_OUT_NAMED: usize = 12;

/// The note of a new page that left out `cut` (entry lines, newest first):
/// how many, and which pull requests, in runs of consecutive numbers.
fn left_out_note<'a>(cut: impl Iterator<Item = &'a str>) -> String {
    let mut numbers: Vec<u64> = Vec::new();
    let mut count = 0;
    for line in cut {
        count += 1;
        numbers.extend(pull_number_of_entry(line));
    }
    numbers.sort_unstable();
    numbers.dedup();
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for n in numbers {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == n => *end = n,
            _ => runs.push((n, n)),
        }
    }
    let mut named: Vec<String> = runs
        .iter()
        .take(LEFT_OUT_NAMED)
        .map(|&(start, end)| match end - start {
            0 => format!("#{start}"),
            1 => format!("#{start}, #{end}"),
            _ => format!("#{start}–#{end}"),
        })
        .collect();
    if runs.len() > LEFT_OUT_NAMED {
        named.push(format!("and {} more", runs.len() - LEFT_OUT_NAMED));
    }
    let (noun, verb) = if count == 1 {
        ("entry", "was")
    } else {
        ("entries", "were")
    };
    let which = if named.is_empty() {
        String::new()
    } else {
        format!(" ({})", named.join(", "))
    };
    format!(
        "\n_To keep this page within 64 KiB, its {count} oldest {noun}{which} {verb} left out; their merge commits are in the source's history._ {TRIMMED_MARKER}\n"
    )
}

/// The pull-request number an entry line names: the first `#N` in it (entries
/// start with the date or the number, and the title comes after it).
fn pull_number_of_entry(line: &str) -> Option<u64> {
    let at = line.find('#')?;
    let digits: String = line[at + 1..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Plans the edits for `bundle` against `pages` (the current contents of the
/// pages it may touch; absent = the page does not exist), leaving every
/// "What is here" section as it is.
pub fn plan(bundle: &EvidenceBundle, pages: &BTreeMap<String, CurrentPage>) -> Plan {
    plan_with(bundle, pages, &Listings::new())
}

/// [`plan`], with the "What is here" section of each area page that gets an
/// entry re-derived from `listings` (areas it does not name keep theirs).
pub fn plan_with(
    bundle: &EvidenceBundle,
    pages: &BTreeMap<String, CurrentPage>,
    listings: &Listings,
) -> Plan {
    plan_full(bundle, pages, listings, &DependencyFacts::default())
}

/// [`plan_with`], with each entry naming its PR's dependency changes and
/// `Dependencies.md` re-derived from `deps` (when it holds the tip's manifests).
pub fn plan_full(
    bundle: &EvidenceBundle,
    pages: &BTreeMap<String, CurrentPage>,
    listings: &Listings,
    deps: &DependencyFacts,
) -> Plan {
    let recorded = |path: &str, sha: &str| {
        pages
            .get(path)
            .is_some_and(|p| p.content.contains(&entry_marker(sha)))
    };

    // Newest first on every page: walk the PRs in reverse merge order.
    let newest_first: Vec<&PullRequest> = bundle.pull_requests.iter().rev().collect();

    let mut changelog = String::new();
    // slug -> (area name as seen first, entries)
    let mut areas: BTreeMap<String, (String, String)> = BTreeMap::new();
    // slug -> the authors of the entries this plan adds there, with counts
    let mut authors: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let mut pulls = Vec::new();
    for pull in bundle.pull_requests.iter() {
        let mut by_area: BTreeMap<String, (String, Vec<&str>)> = BTreeMap::new();
        for file in &pull.files {
            let area = area_of(&file.path);
            let entry = by_area
                .entry(area_slug(&area))
                .or_insert_with(|| (area, Vec::new()));
            entry.1.push(&file.path);
        }
        let mut touched = vec![CHANGELOG.to_owned()];
        let mut all_recorded = recorded(CHANGELOG, &pull.merge_sha);
        for slug in by_area.keys() {
            let page = area_page(slug);
            all_recorded &= recorded(&page, &pull.merge_sha);
            touched.push(page);
        }
        pulls.push(PullPlan {
            number: pull.number,
            merge_sha: pull.merge_sha.clone(),
            pages: touched,
            already_recorded: all_recorded,
        });
    }
    for pull in newest_first {
        if !recorded(CHANGELOG, &pull.merge_sha) {
            changelog.push_str(&changelog_entry_with(
                pull,
                &dependency_note(deps, pull, None),
            ));
        }
        let mut by_area: BTreeMap<String, (String, Vec<&str>)> = BTreeMap::new();
        for file in &pull.files {
            let area = area_of(&file.path);
            by_area
                .entry(area_slug(&area))
                .or_insert_with(|| (area, Vec::new()))
                .1
                .push(&file.path);
        }
        for (slug, (area, paths)) in by_area {
            let page = area_page(&slug);
            if !recorded(&page, &pull.merge_sha) {
                *authors
                    .entry(slug.clone())
                    .or_default()
                    .entry(pull.author.clone())
                    .or_insert(0) += 1;
            }
            let slot = areas.entry(slug).or_insert_with(|| (area, String::new()));
            if !recorded(&page, &pull.merge_sha) {
                let note = dependency_note(deps, pull, Some(&paths));
                slot.1.push_str(&area_entry_with(pull, &paths, &note));
            }
        }
    }

    let mut out = Plan {
        pulls,
        ..Plan::default()
    };

    if !changelog.is_empty() {
        match pages.get(CHANGELOG) {
            None => out.writes.push(NewPage {
                path: CHANGELOG.into(),
                content: trim_new_page(new_changelog(&changelog)),
            }),
            Some(page) => {
                let r = insert_after_anchor(page, CHANGELOG_ANCHOR, &changelog, |b| {
                    format!("\n{CHANGELOG_ANCHOR}{b}")
                });
                let mut patch = PagePatch {
                    expected_sha: page.sha.clone(),
                    replacements: vec![r],
                };
                trim_patch(page, &mut patch);
                out.patches.insert(CHANGELOG.into(), patch);
            }
        }
    }

    let mut section_room = JOB_SECTION_BYTES;
    for (slug, (area, entries)) in &areas {
        if entries.is_empty() {
            continue;
        }
        let path = area_page(slug);
        let current = pages.get(&path);
        let span = current.map_or(Section::Absent, |page| section_span(&page.content));
        // The section, when the agent derived it, the page's own is intact,
        // and the job's section budget has room for the swap.
        let section = match (listings.get(slug), &span) {
            (Some(files), Section::Absent | Section::At(_)) => {
                let text = what_is_here(area, files, WHAT_IS_HERE_BYTES);
                let cost = span.len() + text.len();
                (cost <= section_room).then(|| {
                    section_room -= cost;
                    text
                })
            }
            _ => None,
        };
        // Who knows: the counts the page keeps plus this plan's entries.
        let who_span = current.map_or(Section::Absent, |page| {
            span_between(&page.content, WHO_KNOWS_ANCHOR, WHO_KNOWS_END)
        });
        let who = match (&who_span, current) {
            (Section::Edited, _) => None,
            (span, page) => {
                let mut counts = match (span, page) {
                    (Section::At(range), Some(page)) => {
                        who_knows_counts(&page.content[range.clone()])
                    }
                    _ => BTreeMap::new(),
                };
                for (name, n) in authors.get(slug).into_iter().flatten() {
                    *counts.entry(name.clone()).or_insert(0) += n;
                }
                Some(who_knows(&counts))
            }
        };
        match current {
            None => out.writes.push(NewPage {
                content: trim_new_page(new_area_page(
                    area,
                    slug,
                    section.as_deref(),
                    who.as_deref().unwrap_or_default(),
                    entries,
                )),
                path,
            }),
            Some(page) => {
                let mut replacements = Vec::new();
                let mut append = String::new();
                if occurrences(&page.content, RECENT_ANCHOR) == 1 {
                    replacements.push(Replacement {
                        old: RECENT_ANCHOR.to_owned(),
                        new: format!("{RECENT_ANCHOR}{entries}"),
                    });
                } else {
                    append.push_str(&format!("\n## Recent changes\n\n{RECENT_ANCHOR}{entries}"));
                }
                match (section, span) {
                    (Some(section), Section::At(old)) if page.content[old.clone()] != section => {
                        replacements.push(Replacement {
                            old: page.content[old].to_owned(),
                            new: section,
                        });
                    }
                    (Some(section), Section::Absent) => {
                        append.push_str(&format!("\n{WHAT_IS_HERE_HEADING}{section}"));
                    }
                    _ => {}
                }
                match (who, who_span) {
                    (Some(who), Section::At(old)) if page.content[old.clone()] != who => {
                        replacements.push(Replacement {
                            old: page.content[old].to_owned(),
                            new: who,
                        });
                    }
                    (Some(who), Section::Absent) => {
                        append.push_str(&format!("\n{WHO_KNOWS_HEADING}{who}"));
                    }
                    _ => {}
                }
                if !append.is_empty() {
                    let sep = if page.content.is_empty() || page.content.ends_with('\n') {
                        ""
                    } else {
                        "\n"
                    };
                    replacements.push(Replacement {
                        old: String::new(),
                        new: format!("{sep}{append}"),
                    });
                }
                let mut patch = PagePatch {
                    expected_sha: page.sha.clone(),
                    replacements,
                };
                trim_patch(page, &mut patch);
                out.patches.insert(path, patch);
            }
        }
    }

    // Dependencies.md changes only with new entries: a job that records
    // nothing (a replay) changes nothing.
    let dependencies_page = if out.is_empty() {
        pages.contains_key(DEPENDENCIES)
    } else {
        plan_dependencies(&mut out, pages, deps)
    };

    // Home: a topic index linking the Changelog and every area page.
    let mut links = String::new();
    let home = pages.get(HOME);
    let home_has = |marker: &str| home.is_some_and(|p| p.content.contains(marker));
    if !bundle.pull_requests.is_empty() && !home_has(CHANGELOG_LINK_MARKER) {
        links.push_str(&changelog_link());
    }
    if dependencies_page && !home_has(DEPENDENCIES_LINK_MARKER) {
        links.push_str(&dependencies_link());
    }
    let slugs: BTreeSet<&String> = areas.keys().collect();
    for slug in slugs {
        if !home_has(&area_link_marker(slug)) {
            links.push_str(&topic_line(slug));
        }
    }
    if !links.is_empty() {
        match home {
            None => out.writes.push(NewPage {
                path: HOME.into(),
                content: format!("# Home\n\n## Topics\n\n{TOPICS_ANCHOR}{links}"),
            }),
            Some(page) => {
                let r = insert_after_anchor(page, TOPICS_ANCHOR, &links, |b| {
                    format!("\n## Topics\n\n{TOPICS_ANCHOR}{b}")
                });
                out.patches.insert(
                    HOME.into(),
                    PagePatch {
                        expected_sha: page.sha.clone(),
                        replacements: vec![r],
                    },
                );
            }
        }
    }
    out
}

/// The pages a plan for `bundle` may read: Home, Changelog, Dependencies and
/// the area pages.
pub fn pages_of_interest(bundle: &EvidenceBundle) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = [
        HOME.to_owned(),
        CHANGELOG.to_owned(),
        DEPENDENCIES.to_owned(),
    ]
    .into();
    for pull in &bundle.pull_requests {
        for file in &pull.files {
            out.insert(area_page(&area_slug(&area_of(&file.path))));
        }
    }
    out
}

/// The page that lists the dependencies the manifests declare.
pub const DEPENDENCIES: &str = "Dependencies.md";
/// Ends the first line of the Dependencies page's section.
pub const DEPENDENCIES_ANCHOR: &str = "<!-- teammem:dependencies -->";
/// The last line of the section.
pub const DEPENDENCIES_END: &str = "<!-- teammem:dependencies-end -->";
/// Ends a line of the section that cites nothing (a manifest's heading).
const MANIFEST_MARKER: &str = "<!-- teammem:manifest -->";
const DEPENDENCIES_LINK_MARKER: &str = "<!-- teammem:dependencies-link -->";
/// The section holds at most this many bytes (the page stays within its budget).
pub const DEPENDENCIES_BYTES: usize = 48 * 1024;
/// How many dependency changes an entry names before "and N more".
pub const CHANGES_PER_ENTRY: usize = 10;

/// The manifests at the job's tip, as the agent read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TipManifests {
    pub commit: Sha,
    /// Sorted by path.
    pub manifests: Vec<(String, crate::manifests::Manifest)>,
    /// Manifests found but not read (past the per-job bound).
    pub omitted: usize,
}

/// What the agent learned about dependencies for one job.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DependencyFacts {
    /// The tip's manifests; `None` leaves `Dependencies.md` as it is.
    pub tip: Option<TipManifests>,
    /// Lowercase merge sha → (manifest path, its changes) for each manifest
    /// the PR touched whose before and after the agent could read.
    pub changes: BTreeMap<String, Vec<(String, Vec<crate::manifests::Change>)>>,
}

fn dependencies_link() -> String {
    format!("- [Dependencies](Dependencies) {DEPENDENCIES_LINK_MARKER}\n")
}

fn requirement_text(requirement: &str) -> String {
    if requirement.is_empty() {
        "any version".to_owned()
    } else {
        escape_purpose(requirement)
    }
}

fn kind_prefix(kind: crate::manifests::Kind) -> String {
    kind.label().map(|k| format!("{k} ")).unwrap_or_default()
}

/// ` — dependencies: + a 1; − b; dev c 1 → 2 (Cargo.toml)`: a PR's
/// dependency changes in the manifests among `paths` (all when `None`),
/// at most [`CHANGES_PER_ENTRY`]; empty when there are none.
pub fn dependency_note(
    deps: &DependencyFacts,
    pull: &PullRequest,
    paths: Option<&[&str]>,
) -> String {
    use crate::manifests::Change;
    let Some(changed) = deps.changes.get(&pull.merge_sha.to_ascii_lowercase()) else {
        return String::new();
    };
    let mut groups = Vec::new();
    let mut shown = 0;
    let mut total = 0;
    for (path, changes) in changed {
        if paths.is_some_and(|p| !p.contains(&path.as_str())) || changes.is_empty() {
            continue;
        }
        total += changes.len();
        let mut items = Vec::new();
        for change in changes {
            if shown == CHANGES_PER_ENTRY {
                break;
            }
            shown += 1;
            items.push(match change {
                Change::Added {
                    name,
                    kind,
                    requirement,
                } => format!(
                    "+ {}{} {}",
                    kind_prefix(*kind),
                    escape_purpose(name),
                    requirement_text(requirement)
                ),
                Change::Removed { name, kind, .. } => {
                    format!("− {}{}", kind_prefix(*kind), escape_purpose(name))
                }
                Change::Changed {
                    name,
                    kind,
                    old,
                    new,
                } => format!(
                    "{}{} {} → {}",
                    kind_prefix(*kind),
                    escape_purpose(name),
                    requirement_text(old),
                    requirement_text(new)
                ),
            });
        }
        if !items.is_empty() {
            groups.push(format!("{} ({})", items.join("; "), escape_markdown(path)));
        }
    }
    if groups.is_empty() {
        return String::new();
    }
    let more = if total > shown {
        format!("; and {} more", total - shown)
    } else {
        String::new()
    };
    format!(" — dependencies: {}{more}", groups.join("; "))
}

/// The Dependencies page's section: a summary line ending with
/// [`DEPENDENCIES_ANCHOR`], per manifest a heading and one line per
/// dependency citing its declaring line at the tip, while they fit in `cap`
/// bytes, and [`DEPENDENCIES_END`]. Every line carries a teammem marker.
pub fn dependencies_section(tip: &TipManifests, cap: usize) -> String {
    let mut body = String::new();
    let mut left_out = 0;
    for (path, manifest) in &tip.manifests {
        let cut = if manifest.cut {
            format!(
                " — only its first {} KiB or {} entries are read",
                crate::manifests::MAX_MANIFEST_BYTES / 1024,
                crate::manifests::MAX_ENTRIES
            )
        } else {
            String::new()
        };
        let heading = format!(
            "### {} ({}){cut} {MANIFEST_MARKER}\n",
            escape_markdown(path),
            manifest.ecosystem.label()
        );
        if SECTION_FRAME + body.len() + heading.len() > cap {
            left_out += manifest.dependencies.len();
            continue;
        }
        body.push_str(&heading);
        if manifest.dependencies.is_empty() {
            body.push_str(&format!("- no dependencies declared {MANIFEST_MARKER}\n"));
        }
        for dep in &manifest.dependencies {
            let Ok(lines) = Lines::new(dep.line, dep.line) else {
                continue;
            };
            let kind = dep
                .kind
                .label()
                .map(|k| format!(" ({k})"))
                .unwrap_or_default();
            let line = format!(
                "- {} — {}{kind} {}\n",
                escape_purpose(&dep.name),
                requirement_text(&dep.requirement),
                Marker::source(path, tip.commit.clone(), lines)
            );
            if SECTION_FRAME + body.len() + line.len() > cap {
                left_out += 1;
                continue;
            }
            body.push_str(&line);
        }
    }
    let mut summary = if tip.manifests.is_empty() {
        format!(
            "No manifests (Cargo.toml, package.json, pyproject.toml, go.mod, requirements*.txt) at the repository root or in its top-level folders at commit `{}` (kept by teammem).",
            tip.commit
        )
    } else {
        format!(
            "The dependencies the manifests declare at commit `{}`, each with the line that declares it (kept by teammem).",
            tip.commit
        )
    };
    if tip.omitted > 0 {
        summary.push_str(&format!(
            " {} more manifests are not read (at most {MAX_MANIFESTS} are).",
            tip.omitted
        ));
    }
    if left_out > 0 {
        summary.push_str(&format!(
            " {left_out} more dependencies are not listed (the list holds at most {} KiB).",
            cap / 1024
        ));
    }
    format!("{summary} {DEPENDENCIES_ANCHOR}\n{body}{DEPENDENCIES_END}\n")
}

/// The most manifests one job reads for the Dependencies page.
pub const MAX_MANIFESTS: usize = 20;

/// Where the section between `anchor` and `end` is on `page`, like
/// [`section_span`]: edited when an anchor is missing, doubled or out of
/// order, or a line in it has no teammem marker.
fn marked_span(page: &str, anchor: &str, end: &str) -> Section {
    match (page.matches(anchor).count(), page.matches(end).count()) {
        (0, 0) => return Section::Absent,
        (1, 1) => {}
        _ => return Section::Edited,
    }
    let (Some(at), Some(stop_at)) = (page.find(anchor), page.find(end)) else {
        return Section::Edited;
    };
    if stop_at < at {
        return Section::Edited;
    }
    let start = page[..at].rfind('\n').map_or(0, |i| i + 1);
    let stop = page[stop_at..]
        .find('\n')
        .map_or(page.len(), |i| stop_at + i + 1);
    let edited = page[start..stop]
        .split_inclusive('\n')
        .any(|line| !line.contains(crate::wiki::confine::MARKER));
    if edited {
        Section::Edited
    } else {
        Section::At(start..stop)
    }
}

/// Plans `Dependencies.md` from `deps.tip` (written whole when new, its
/// section swapped when intact and different, left alone when a person
/// edited it); true when the page exists or will.
fn plan_dependencies(
    out: &mut Plan,
    pages: &BTreeMap<String, CurrentPage>,
    deps: &DependencyFacts,
) -> bool {
    let current = pages.get(DEPENDENCIES);
    let Some(tip) = &deps.tip else {
        return current.is_some();
    };
    let section = dependencies_section(tip, DEPENDENCIES_BYTES);
    match current {
        None if tip.manifests.is_empty() => false,
        None => {
            out.writes.push(NewPage {
                path: DEPENDENCIES.into(),
                content: format!("# Dependencies\n\n{section}"),
            });
            true
        }
        Some(page) => {
            let replacement =
                match marked_span(&page.content, DEPENDENCIES_ANCHOR, DEPENDENCIES_END) {
                    Section::At(old) if page.content[old.clone()] != section => Some(Replacement {
                        old: page.content[old].to_owned(),
                        new: section,
                    }),
                    Section::Absent => {
                        let sep = if page.content.is_empty() || page.content.ends_with('\n') {
                            ""
                        } else {
                            "\n"
                        };
                        Some(Replacement {
                            old: String::new(),
                            new: format!("{sep}\n{section}"),
                        })
                    }
                    _ => None,
                };
            if let Some(r) = replacement {
                out.patches.insert(
                    DEPENDENCIES.into(),
                    PagePatch {
                        expected_sha: page.sha.clone(),
                        replacements: vec![r],
                    },
                );
            }
            true
        }
    }
}

/// Applies a plan to the pages in memory, as the writer would (for tests and
/// for checking a plan before sending it): the pages after the edit.
pub fn apply(pages: &BTreeMap<String, CurrentPage>, plan: &Plan) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = pages
        .iter()
        .map(|(k, v)| (k.clone(), v.content.clone()))
        .collect();
    for write in &plan.writes {
        out.insert(write.path.clone(), write.content.clone());
    }
    for (path, patch) in &plan.patches {
        let text = out.get(path).cloned().unwrap_or_default();
        let result = apply_replacements(&text, &patch.replacements)
            .unwrap_or_else(|why| panic!("the writer would refuse the patch of {path}: {why}"));
        out.insert(path.clone(), result);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forge::evidence::{
        BUNDLE_VERSION, ChangedFile, FileStatus, JobScope, PullRequest, SourceInfo,
    };

    #[test]
    fn areas_without_a_section_are_read_first_and_the_rest_rotate_with_the_tip() {
        let slugs: BTreeSet<String> = ["a", "b", "c", "d", "e"].map(String::from).into();
        let page = |content: &str| CurrentPage {
            sha: String::new(),
            content: content.to_owned(),
        };
        let section = format!("# x\n\n{WHAT_IS_HERE_ANCHOR}\n{WHAT_IS_HERE_END}\n");
        let mut pages = BTreeMap::new();
        for slug in ["a", "c", "e"] {
            pages.insert(area_page(slug), page(&section));
        }
        pages.insert(area_page("d"), page("# d\n\nNo section.\n"));
        let mut starts = BTreeSet::new();
        for n in 0..40u8 {
            let tip = Sha::parse(&format!("{:040x}", u128::from(n) * 7919)).unwrap();
            let order = refresh_order(&slugs, &pages, &tip);
            // "b" has no page, "d" a page without the section: both first.
            assert_eq!(order[..2], ["b", "d"], "{order:?}");
            let rest: Vec<&str> = order[2..].iter().map(String::as_str).collect();
            assert!(
                [["a", "c", "e"], ["c", "e", "a"], ["e", "a", "c"]]
                    .contains(&rest[..].try_into().unwrap()),
                "{rest:?} is not a rotation"
            );
            assert_eq!(refresh_order(&slugs, &pages, &tip), order, "stable per tip");
            starts.insert(rest[0].to_owned());
        }
        assert_eq!(
            starts.len(),
            3,
            "every area with a section comes first at some tip"
        );
    }

    fn pull(number: u64, title: &str, sha_char: char, paths: &[&str]) -> PullRequest {
        PullRequest {
            number,
            title: title.into(),
            body: String::new(),
            body_truncated: false,
            author: "Zoë".into(),
            labels: vec![],
            merged_at: "2026-11-30T10:00:00Z".into(),
            merge_sha: sha_char.to_string().repeat(40),
            files: paths
                .iter()
                .map(|p| ChangedFile {
                    path: (*p).into(),
                    status: FileStatus::Modified,
                    additions: 1,
                    deletions: 0,
                })
                .collect(),
            files_truncated: false,
        }
    }

    fn bundle(pulls: Vec<PullRequest>) -> EvidenceBundle {
        EvidenceBundle {
            version: BUNDLE_VERSION,
            source: SourceInfo {
                repository: "demo/app".into(),
                forge: "local".into(),
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
        }
    }

    fn home() -> BTreeMap<String, CurrentPage> {
        [(
            HOME.to_owned(),
            CurrentPage {
                sha: "h".repeat(40),
                content: "# Welcome\n".into(),
            },
        )]
        .into()
    }

    fn as_current(pages: BTreeMap<String, String>) -> BTreeMap<String, CurrentPage> {
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

    /// A Changelog of `n` entries (shas from `n` down to 1, newest first)
    /// whose length is `target` bytes, padded with a non-entry line.
    fn full_changelog(n: u64, target: usize) -> (CurrentPage, Vec<String>) {
        let mut entries = String::new();
        let mut shas = Vec::new();
        for i in (1..=n).rev() {
            let mut p = pull(i, "A change of a reasonable length", 'a', &["src/a.rs"]);
            p.merge_sha = format!("{i:040x}");
            shas.push(p.merge_sha.clone());
            entries.push_str(&changelog_entry(&p));
        }
        let head = "# Changelog\n\nFiller: ".to_owned();
        let tail = format!("\n\n{CHANGELOG_ANCHOR}{entries}");
        let filler = "x".repeat(target - head.len() - tail.len());
        let content = format!("{head}{filler}{tail}");
        assert_eq!(content.len(), target);
        (
            CurrentPage {
                sha: "c".repeat(40),
                content,
            },
            shas,
        )
    }

    #[test]
    fn the_markers_are_the_ones_confinement_protects() {
        let marker = crate::wiki::confine::MARKER;
        assert!(entry_marker(&"a".repeat(40)).starts_with(marker));
        assert!(TOPICS_ANCHOR.starts_with(marker));
    }

    #[test]
    fn the_changelog_is_trimmed_from_its_oldest_entry_at_the_page_limit() {
        let mut newest = pull(999, "A change of a reasonable length", 'f', &[]);
        newest.merge_sha = "f".repeat(40);
        let added = changelog_entry(&newest).len();
        let b = bundle(vec![newest.clone()]);

        // Exactly at the limit after the insert: nothing is trimmed.
        let (page, _) = full_changelog(250, PAGE_BUDGET - added);
        let pages: BTreeMap<String, CurrentPage> = [(CHANGELOG.to_owned(), page)].into();
        let p = plan(&b, &pages);
        assert_eq!(p.patches[CHANGELOG].replacements.len(), 1);
        let after = apply(&pages, &p);
        assert_eq!(after[CHANGELOG].len(), PAGE_BUDGET);

        // One byte more: the oldest entry goes, the page says so, and it fits.
        let (page, shas) = full_changelog(250, PAGE_BUDGET - added + 1);
        let pages: BTreeMap<String, CurrentPage> = [(CHANGELOG.to_owned(), page)].into();
        let p = plan(&b, &pages);
        assert_eq!(p.patches[CHANGELOG].replacements.len(), 2);
        let after = apply(&pages, &p);
        let text = &after[CHANGELOG];
        assert!(text.len() <= PAGE_BUDGET, "{}", text.len());
        assert!(text.contains(&entry_marker(&newest.merge_sha)));
        let oldest = shas.last().unwrap();
        assert!(
            !text.contains(&entry_marker(oldest)),
            "the oldest entry is gone"
        );
        assert!(text.contains(&entry_marker(&shas[shas.len() - 2])));
        assert_eq!(text.matches(TRIMMED_MARKER).count(), 1);
        assert!(
            text.trim_end().ends_with(TRIMMED_MARKER),
            "the note closes the list"
        );

        // The next run trims again without a second note.
        let pages: BTreeMap<String, CurrentPage> = [(
            CHANGELOG.to_owned(),
            CurrentPage {
                sha: "d".repeat(40),
                content: text.clone(),
            },
        )]
        .into();
        let mut next = pull(1000, "Another change of a reasonable length", 'e', &[]);
        next.merge_sha = "e".repeat(40);
        let after = apply(&pages, &plan(&bundle(vec![next.clone()]), &pages));
        let text = &after[CHANGELOG];
        assert!(text.len() <= PAGE_BUDGET);
        assert!(text.contains(&entry_marker(&next.merge_sha)));
        assert_eq!(text.matches(TRIMMED_MARKER).count(), 1);
    }

    #[test]
    fn a_new_page_over_the_limit_keeps_its_newest_entries() {
        let entries: String = (1..=400u64)
            .rev()
            .map(|i| {
                let mut p = pull(i, "A change of a reasonable length", 'a', &[]);
                p.merge_sha = format!("{i:040x}");
                changelog_entry(&p)
            })
            .collect();
        let text = trim_new_page(new_changelog(&entries));
        assert!(text.len() <= PAGE_BUDGET);
        assert!(text.contains(&entry_marker(&format!("{:040x}", 400))));
        assert!(!text.contains(&entry_marker(&format!("{:040x}", 1))));
        assert_eq!(text.matches(TRIMMED_MARKER).count(), 1);
        // The note names exactly the entries it left out.
        let oldest_kept = (1..=400u64)
            .find(|i| text.contains(&entry_marker(&format!("{i:040x}"))))
            .unwrap();
        let left_out = oldest_kept - 1;
        assert!(
            text.contains(&format!(
                "_To keep this page within 64 KiB, its {left_out} oldest entries (#1–#{left_out}) were left out;"
            )),
            "{}",
            &text[text.len() - 300..]
        );
        assert!((oldest_kept..=400).all(|i| text.contains(&entry_marker(&format!("{i:040x}")))));
    }

    #[test]
    fn a_left_out_note_names_runs_of_pull_requests_and_counts_the_rest() {
        let line =
            |n: u64| format!("- #{n} Title #999 (by A, 2026-01-05) <!-- teammem:{n:040x} -->\n");
        let lines: Vec<String> = [9, 3, 4, 5, 7, 1].into_iter().map(line).collect();
        let note = left_out_note(lines.iter().map(String::as_str));
        assert!(
            note.contains("its 6 oldest entries (#1, #3–#5, #7, #9) were left out;"),
            "{note}"
        );
        let one = left_out_note(std::iter::once(line(2).as_str()));
        assert!(
            one.contains("its 1 oldest entry (#2) was left out;"),
            "{one}"
        );
        let many: Vec<String> = (0..20).map(|i| line(i * 2)).collect();
        let note = left_out_note(many.iter().map(String::as_str));
        assert!(note.contains("#22, and 8 more) were left out"), "{note}");
        assert!(note.trim_end().ends_with(TRIMMED_MARKER));
    }

    #[test]
    fn a_first_run_writes_new_pages_and_patches_home() {
        let b = bundle(vec![
            pull(12, "Faster search", 'a', &["src/search.rs", "README.md"]),
            pull(13, "Docs", 'b', &["docs/guide.md"]),
        ]);
        let plan = plan(&b, &home());
        let written: Vec<&str> = plan.writes.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(
            written,
            vec![CHANGELOG, "Areas/docs.md", "Areas/root.md", "Areas/src.md"]
        );
        assert_eq!(plan.patches.keys().collect::<Vec<_>>(), vec![HOME]);
        let pages = apply(&home(), &plan);
        let changelog = &pages[CHANGELOG];
        // Newest first, full shas, authors, markers.
        let i13 = changelog.find("#13").unwrap();
        let i12 = changelog.find("#12").unwrap();
        assert!(i13 < i12, "{changelog}");
        assert!(changelog.contains(&"a".repeat(40)));
        assert!(changelog.contains(&entry_marker(&"b".repeat(40))));
        assert!(changelog.contains("by Zoë"));
        assert!(pages["Areas/src.md"].contains("## Recent changes"));
        assert!(pages["Areas/src.md"].contains("src/search.rs"));
        assert!(!pages["Areas/src.md"].contains("#13"));
        let home = &pages[HOME];
        assert!(home.starts_with("# Welcome\n"));
        for link in ["(Areas/src)", "(Areas/docs)", "(Areas/root)", "(Changelog)"] {
            assert!(home.contains(link), "{home}");
        }
        assert_eq!(plan.pulls.len(), 2);
        assert!(plan.pulls.iter().all(|p| !p.already_recorded));
        assert_eq!(
            plan.pulls[0].pages,
            vec![CHANGELOG, "Areas/root.md", "Areas/src.md"]
        );
    }

    #[test]
    fn replaying_a_range_plans_nothing() {
        let b = bundle(vec![pull(12, "Faster search", 'a', &["src/a.rs"])]);
        let after = as_current(apply(&home(), &plan(&b, &home())));
        let again = plan(&b, &after);
        assert!(again.is_empty(), "{again:?}");
        assert!(again.pulls.iter().all(|p| p.already_recorded));
    }

    #[test]
    fn a_later_range_patches_after_the_anchors_and_keeps_old_entries() {
        let first = bundle(vec![pull(12, "One", 'a', &["src/a.rs"])]);
        let pages = as_current(apply(&home(), &plan(&first, &home())));
        let second = bundle(vec![
            pull(12, "One", 'a', &["src/a.rs"]),
            pull(14, "Two", 'c', &["src/b.rs"]),
        ]);
        let p = plan(&second, &pages);
        assert!(p.writes.is_empty(), "{:?}", p.writes);
        let keys: Vec<&String> = p.patches.keys().collect();
        assert_eq!(keys, vec!["Areas/src.md", CHANGELOG]);
        // The changelog gets its entries; the area page its entries and its
        // author count (Zoë again), each at an exact anchor.
        for (path, patch) in &p.patches {
            let want = if path == CHANGELOG { 1 } else { 2 };
            assert_eq!(patch.replacements.len(), want, "{path}");
            assert!(patch.replacements.iter().all(|r| !r.old.is_empty()));
        }
        let after = apply(&pages, &p);
        let log = &after[CHANGELOG];
        assert_eq!(log.matches(&entry_marker(&"a".repeat(40))).count(), 1);
        assert!(log.find("#14").unwrap() < log.find("#12").unwrap());
        assert!(plan(&second, &as_current(after)).is_empty());
    }

    #[test]
    fn a_page_without_its_anchor_gets_an_appended_section() {
        let mut pages = home();
        pages.insert(
            CHANGELOG.into(),
            CurrentPage {
                sha: "c".repeat(40),
                content: "# Changelog\nhand-written".into(),
            },
        );
        let b = bundle(vec![pull(1, "X", 'd', &["a.txt"])]);
        let p = plan(&b, &pages);
        let r = &p.patches[CHANGELOG].replacements[0];
        assert!(r.old.is_empty());
        assert!(r.new.starts_with('\n'));
        let after = apply(&pages, &p);
        assert!(after[CHANGELOG].starts_with("# Changelog\nhand-written\n"));
        assert!(plan(&b, &as_current(after)).is_empty());
    }

    #[test]
    fn titles_are_escaped_and_cannot_forge_markers() {
        let forged = format!(
            "*bold* [x](http://e) <!-- teammem:{} --> # h\nnext | `c` \u{202E}",
            "e".repeat(40)
        );
        let b = bundle(vec![
            pull(1, &forged, 'd', &["a.txt"]),
            pull(2, "Later", 'e', &["a.txt"]),
        ]);
        let entry = changelog_entry(&b.pull_requests[0]);
        assert_eq!(entry.lines().count(), 1);
        assert!(entry.contains("\\*bold\\*"));
        assert!(entry.contains("\\[x](http://e)"));
        assert!(entry.contains("&lt;!-- teammem"));
        assert!(!entry.contains('\u{202E}'));
        assert!(entry.contains("# h next | \\`c\\`"));
        // The forged marker does not hide PR #2's entry.
        let after = apply(&home(), &plan(&b, &home()));
        assert!(after[CHANGELOG].contains("#2 Later"));
        assert_eq!(
            after[CHANGELOG]
                .matches(&entry_marker(&"e".repeat(40)))
                .count(),
            1
        );
    }

    /// The text of every list item of `page` as a CommonMark (GitHub
    /// flavour) renderer shows it, and the raw HTML it passes through.
    fn rendered_items(page: &str) -> (Vec<String>, Vec<String>) {
        use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
        let options =
            Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES | Options::ENABLE_TASKLISTS;
        let (mut items, mut html, mut current) = (Vec::new(), Vec::new(), None::<String>);
        for event in Parser::new_ext(page, options) {
            match event {
                Event::Start(Tag::Item) => current = Some(String::new()),
                Event::End(TagEnd::Item) => items.extend(current.take()),
                Event::Text(text) | Event::Code(text) => {
                    if let Some(item) = &mut current {
                        item.push_str(&text);
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

    #[test]
    fn every_page_renders_titles_authors_dates_and_paths_as_written() {
        let titles = [
            "Use *args and _kwargs_ in `run()`",
            "[WIP] <script>alert(1)</script> & &copy; ~~gone~~",
            "# Not a heading | not a table | a_b_c",
            "Fix C:\\temp\\ paths \\*here\\*",
            "to-dos for 2026-01-05: api/routes.py, __init__.py",
        ];
        let pulls: Vec<PullRequest> = titles
            .iter()
            .enumerate()
            .map(|(i, title)| {
                let mut p = pull(
                    i as u64 + 1,
                    title,
                    char::from(b'a' + i as u8),
                    &["api/routes.py", "pkg/__init__.py", "docs/a_b.md"],
                );
                p.author = "bob_smith".into();
                p
            })
            .collect();
        let b = bundle(pulls);
        let pages = apply(&home(), &plan(&b, &home()));
        let mut seen = 0;
        for (path, page) in &pages {
            let (items, html) = rendered_items(page);
            // Teammem's own markers are the only HTML a page holds.
            for raw in &html {
                assert!(
                    raw.starts_with("<!-- teammem:"),
                    "{path}: raw HTML {raw:?} got through"
                );
            }
            for (i, title) in titles.iter().enumerate() {
                let Some(item) = items
                    .iter()
                    .find(|item| item.contains(&format!("#{} ", i + 1)))
                else {
                    continue;
                };
                seen += 1;
                assert!(
                    item.contains(title),
                    "{path}: {title:?} renders as {item:?}"
                );
                assert!(item.contains("bob_smith"), "{path}: {item:?}");
                assert!(item.contains("2026-11-30"), "{path}: {item:?}");
            }
            if path.starts_with("Areas/") {
                assert!(
                    items.iter().any(|item| item.contains("api/routes.py")
                        || item.contains("pkg/__init__.py")
                        || item.contains("docs/a_b.md")),
                    "{path}: paths render as written: {items:?}"
                );
            }
        }
        assert!(
            seen >= titles.len() * 2,
            "every PR on the Changelog and an area page"
        );
        // And the raw text is not buried in backslashes.
        let changelog = &pages[CHANGELOG];
        for plain in [
            "2026-11-30",
            "bob_smith",
            "api/routes.py",
            "a_b_c",
            "to-dos",
        ] {
            assert!(
                changelog.contains(plain) || pages.values().any(|p| p.contains(plain)),
                "{plain}"
            );
        }
    }

    #[test]
    fn an_entry_says_why_from_the_first_paragraph_and_what_it_closes() {
        let mut p = pull(4, "Cache the index", 'c', &["src/index.rs"]);
        p.body = "<!-- template -->\n\nSearch was slow on\nbig wikis.\n\nDetails nobody needs here.\n\nFixes #5, closes: #7 and fixes #5 again; see owner/other#9".into();
        let entry = changelog_entry(&p);
        assert!(
            entry.contains(
                "(by Zoë) — Search was slow on big wikis. (closes #5, #7) — merge commit"
            ),
            "{entry}"
        );
        assert!(
            !entry.contains("Details") && !entry.contains("#9"),
            "{entry}"
        );
        assert!(
            area_entry(&p, &["src/index.rs"])
                .contains("— Search was slow on big wikis. (closes #5, #7)")
        );

        // A hostile description stays inside its one line and forges nothing.
        p.body = format!(
            "Sure.\n- [x](javascript:1) <!-- teammem:{} --> <img src=x>\n# Heading",
            "e".repeat(40)
        );
        let entry = changelog_entry(&p);
        assert_eq!(entry.lines().count(), 1, "{entry}");
        assert_eq!(
            entry.matches("<!--").count(),
            1,
            "only the entry's own marker: {entry}"
        );
        assert!(!entry.contains("<img"), "{entry}");
        let (items, html) = rendered_items(&entry);
        assert_eq!(items.len(), 1);
        assert!(items[0].contains("Sure. - [x](javascript:1)"), "{items:?}");
        assert!(
            html.iter().all(|h| h.starts_with("<!-- teammem:")),
            "{html:?}"
        );

        // A template comment directly followed by text (no blank line).
        p.body = "<!-- Describe the change -->\nThe real reason.\r\n\r\nMore.".into();
        assert!(
            changelog_entry(&p).contains("(by Zoë) — The real reason. — merge commit"),
            "{}",
            changelog_entry(&p)
        );
        p.body = "<!--\n  multi-line\n  hint -->\nAfter the hint.".into();
        assert!(changelog_entry(&p).contains("— After the hint. —"));
        p.body = "<!-- only a hint -->".into();
        assert!(!changelog_entry(&p).contains("hint"));

        p.body = format!("{} end", "word ".repeat(200));
        let entry = changelog_entry(&p);
        assert!(entry.contains("word…"), "bounded at a word: {entry}");
        assert!(!entry.contains(" end"), "{entry}");
    }

    #[test]
    fn unicode_titles_survive() {
        let b = bundle(vec![pull(3, "Ünïcode 日本語 🚀", 'f', &["ü/x"])]);
        let after = apply(&home(), &plan(&b, &home()));
        assert!(after[CHANGELOG].contains("Ünïcode 日本語 🚀"));
        assert!(after.contains_key("Areas/ü.md"));
    }

    #[test]
    fn areas_map_to_safe_case_folded_pages() {
        assert_eq!(area_of("src/lib.rs"), "src");
        assert_eq!(area_of("README.md"), ROOT_AREA);
        assert_eq!(area_of("/abs"), ROOT_AREA);
        assert_eq!(area_slug("Docs"), "docs");
        assert_eq!(area_slug(".github"), "github");
        assert_eq!(area_slug("a:b<c>"), "a-b-c");
        assert_eq!(area_slug("CON"), "area-con");
        assert_eq!(area_slug(".git"), "area-git");
        assert_eq!(area_slug("..."), "area");
        assert_eq!(area_slug("-x-"), "x");
        assert!(area_slug(&"x".repeat(300)).len() <= 64);
        // Two spellings of one area share one page.
        let b = bundle(vec![pull(1, "A", 'a', &["Docs/a", "docs/b"])]);
        let p = plan(&b, &home());
        assert_eq!(
            p.writes
                .iter()
                .filter(|w| w.path == "Areas/docs.md")
                .count(),
            1
        );
    }

    #[test]
    fn a_range_without_pull_requests_plans_nothing() {
        assert!(plan(&bundle(vec![]), &home()).is_empty());
    }

    fn tip() -> Sha {
        Sha::parse(&"f".repeat(40)).unwrap()
    }

    fn listing(files: &[(&str, Option<(&str, u32)>)]) -> AreaFiles {
        AreaFiles {
            commit: tip(),
            files: files
                .iter()
                .map(|(path, purpose)| AreaFile {
                    path: (*path).into(),
                    purpose: purpose.map(|(t, l)| (t.to_owned(), Lines::new(l, l).unwrap())),
                })
                .collect(),
            omitted: 0,
            listing_cut: false,
        }
    }

    fn source_facts(page: &str) -> Vec<crate::facts::Fact> {
        crate::facts::facts(page)
            .into_iter()
            .map(|f| match f {
                crate::facts::Found::Fact(fact) => fact,
                other => panic!("unreadable marker {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_new_area_page_says_what_is_here_with_cited_purposes() {
        let b = bundle(vec![pull(12, "Faster search", 'a', &["src/search.rs"])]);
        let listings: Listings = [(
            "src".to_owned(),
            listing(&[
                ("src/lib.rs", Some(("The crate.", 1))),
                ("src/search.rs", Some(("Search: BM25 over pages.", 3))),
                ("src/data.bin", None),
            ]),
        )]
        .into();
        let p = plan_with(&b, &home(), &listings);
        assert_eq!(p.area_slugs(), BTreeSet::from(["src".to_owned()]));
        let pages = apply(&home(), &p);
        let page = &pages["Areas/src.md"];
        let what = page
            .find("## What is here\n\nThe files under `src/` at commit")
            .unwrap();
        assert!(what < page.find("## Recent changes").unwrap(), "{page}");
        assert!(
            page.contains("- src/lib.rs — The crate. <!-- teammem:evidence src/lib.rs@"),
            "{page}"
        );
        assert!(
            page.contains(&format!("- src/data.bin {FILE_MARKER}\n")),
            "{page}"
        );
        let facts = source_facts(page);
        assert_eq!(facts.len(), 2);
        assert!(
            facts[1].text.ends_with("Search: BM25 over pages."),
            "{:?}",
            facts[1]
        );
        assert_eq!(
            facts[1].marker.citation,
            crate::facts::Citation::Source {
                path: "src/search.rs".into(),
                commit: tip(),
                lines: Lines::new(3, 3).unwrap()
            }
        );
        // Every line of the section carries a marker (guarded pages may
        // replace only such lines), and the page renders the list as items.
        let Section::At(span) = section_span(page) else {
            panic!("no section: {page}")
        };
        assert!(
            page[span]
                .lines()
                .all(|l| l.contains(crate::wiki::confine::MARKER))
        );
        let (items, html) = rendered_items(page);
        assert!(
            items
                .iter()
                .any(|i| i.trim_end() == "src/search.rs — Search: BM25 over pages."),
            "{items:?}"
        );
        assert!(
            html.iter().all(|h| h.starts_with("<!-- teammem:")),
            "{html:?}"
        );
        // No listing for an area: its page has no section.
        assert!(
            !pages.contains_key("Areas/root.md")
                || !pages["Areas/root.md"].contains("What is here")
        );
        // Replaying the range plans nothing, section included.
        assert!(plan_with(&b, &as_current(pages), &listings).is_empty());
    }

    #[test]
    fn a_later_entry_re_derives_the_section_and_drops_its_stale_markers() {
        let first = bundle(vec![pull(12, "One", 'a', &["src/a.rs"])]);
        let mut old = listing(&[("src/a.rs", Some(("Old purpose.", 1)))]);
        old.commit = Sha::parse(&"a".repeat(40)).unwrap();
        let listings: Listings = [("src".to_owned(), old)].into();
        let mut pages = as_current(apply(&home(), &plan_with(&first, &home(), &listings)));
        // The runner marked the cited line stale since.
        let page = pages.get_mut("Areas/src.md").unwrap();
        let marker = format!("src/a.rs@{}#L1 -->", "a".repeat(40));
        assert!(page.content.contains(&marker), "{}", page.content);
        page.content = page.content.replace(
            &marker,
            &format!(
                "src/a.rs@{}#L1 stale={} -->",
                "a".repeat(40),
                "c".repeat(40)
            ),
        );
        page.content.push_str("\nA person's note.\n");
        let second = bundle(vec![pull(14, "Two", 'c', &["src/b.rs"])]);
        let now: Listings = [(
            "src".to_owned(),
            listing(&[("src/a.rs", Some(("New purpose.", 2))), ("src/b.rs", None)]),
        )]
        .into();
        let p = plan_with(&second, &pages, &now);
        assert!(p.writes.is_empty());
        // Entries, the section, the author count.
        assert_eq!(p.patches["Areas/src.md"].replacements.len(), 3);
        let after = apply(&pages, &p);
        let page = &after["Areas/src.md"];
        assert!(!page.contains("stale="), "{page}");
        assert!(!page.contains("Old purpose"), "{page}");
        assert!(
            page.contains(&format!(
                "New purpose. <!-- teammem:evidence src/a.rs@{}#L2 -->",
                "f".repeat(40)
            )),
            "{page}"
        );
        assert_eq!(page.matches("## What is here").count(), 1);
        assert!(page.ends_with("A person's note.\n"));
        assert!(page.contains("#14 Two") && page.contains("#12 One"));
        // A section a person edited inside is left as it is; the entry still lands.
        let mut edited = as_current(after);
        let page = edited.get_mut("Areas/src.md").unwrap();
        page.content = page
            .content
            .replace("- src/b.rs", "My own line\n- src/b.rs");
        let third = bundle(vec![pull(15, "Three", 'd', &["src/c.rs"])]);
        let p = plan_with(&third, &edited, &now);
        assert_eq!(p.patches["Areas/src.md"].replacements.len(), 2);
        let after = apply(&edited, &p);
        assert!(after["Areas/src.md"].contains("My own line\n"));
        assert!(after["Areas/src.md"].contains("#15 Three"));
    }

    fn by(author: &str, pull: PullRequest) -> PullRequest {
        PullRequest {
            author: author.into(),
            ..pull
        }
    }

    /// The author lines of an area page's "Who knows this area" section.
    fn who_lines(page: &str) -> Vec<String> {
        let Section::At(span) = span_between(page, WHO_KNOWS_ANCHOR, WHO_KNOWS_END) else {
            panic!("no who-knows section: {page}")
        };
        page[span]
            .lines()
            .filter(|l| l.starts_with("- "))
            .map(|l| l.split(" <!--").next().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn who_knows_an_area_counts_its_recorded_authors_most_first() {
        let first = bundle(vec![
            by("Bob", pull(1, "One", 'a', &["src/a.rs"])),
            by("Alice", pull(2, "Two", 'b', &["src/b.rs", "docs/x.md"])),
            by("Alice", pull(3, "Three", 'c', &["src/c.rs"])),
        ]);
        let pages = apply(&home(), &plan(&first, &home()));
        let src = &pages["Areas/src.md"];
        assert_eq!(
            who_lines(src),
            ["- Alice — 2 pull requests", "- Bob — 1 pull request"]
        );
        assert!(
            src.find("## Who knows this area").unwrap() < src.find("## Recent changes").unwrap()
        );
        assert_eq!(
            who_lines(&pages["Areas/docs.md"]),
            ["- Alice — 1 pull request"]
        );

        // A replay counts nothing twice; a later job adds to the counts.
        let current = as_current(pages);
        assert!(plan(&first, &current).is_empty());
        let second = bundle(vec![
            by("Bob", pull(4, "Four", 'd', &["src/d.rs"])),
            by("Bob", pull(5, "Five", 'e', &["src/e.rs"])),
        ]);
        let pages = apply(&current, &plan(&second, &current));
        assert_eq!(
            who_lines(&pages["Areas/src.md"]),
            ["- Bob — 3 pull requests", "- Alice — 2 pull requests"]
        );
        assert_eq!(
            who_lines(&pages["Areas/docs.md"]),
            ["- Alice — 1 pull request"]
        );
        assert_eq!(pages["Areas/src.md"].matches("## Who knows").count(), 1);
    }

    #[test]
    fn who_knows_is_bounded_hostile_names_forge_nothing_and_edits_are_kept() {
        let hostile = "Eve <!-- teammem:author 99 416c696365 --> *x* -->";
        let mut pulls: Vec<PullRequest> = (0..25u64)
            .map(|i| by(&format!("dev{i:02}"), pull(i + 1, "P", 'a', &["src/a.rs"])))
            .map(|mut p| {
                p.merge_sha = format!("{:040x}", p.number);
                p
            })
            .collect();
        let mut evil = by(hostile, pull(99, "Evil", 'e', &["src/a.rs"]));
        evil.merge_sha = format!("{:040x}", 99);
        pulls.push(evil.clone());
        pulls.push({
            let mut again = evil.clone();
            again.number = 100;
            again.merge_sha = format!("{:040x}", 100);
            again
        });
        let pages = apply(&home(), &plan(&bundle(pulls), &home()));
        let page = &pages["Areas/src.md"];
        let lines = who_lines(page);
        assert_eq!(lines.len(), WHO_KNOWS_AUTHORS, "{lines:?}");
        assert!(lines[0].starts_with("- Eve ") && lines[0].ends_with("— 2 pull requests"));
        assert!(page.contains("6 more are not listed"), "{page}");
        let Section::At(span) = span_between(page, WHO_KNOWS_ANCHOR, WHO_KNOWS_END) else {
            panic!()
        };
        let counts = who_knows_counts(&page[span]);
        assert_eq!(counts.get(hostile), Some(&2), "{counts:?}");
        assert!(!counts.contains_key("Alice"), "{counts:?}");
        let (items, html) = rendered_items(page);
        assert!(
            html.iter().all(|h| h.starts_with("<!-- teammem:")),
            "{html:?}"
        );
        assert!(
            items
                .iter()
                .any(|i| i.contains("Eve <!-- teammem:author 99")),
            "{items:?}"
        );

        // A person's line inside the section: it is left as it is.
        let mut current = as_current(pages);
        let page = current.get_mut("Areas/src.md").unwrap();
        page.content = page
            .content
            .replace("- dev00", "Ask Mallory first.\n- dev00");
        let next = bundle(vec![by("Zed", pull(200, "Z", 'f', &["src/z.rs"]))]);
        let after = apply(&current, &plan(&next, &current));
        assert!(after["Areas/src.md"].contains("Ask Mallory first.\n"));
        assert!(!after["Areas/src.md"].contains("- Zed"));
        assert!(after["Areas/src.md"].contains("#200 Z"));
    }

    #[test]
    fn a_page_from_before_gets_the_section_appended_once() {
        let mut pages = home();
        pages.insert(
            "Areas/src.md".into(),
            CurrentPage {
                sha: "c".repeat(40),
                content: "# Area: src\nhand-written".into(),
            },
        );
        let b = bundle(vec![pull(1, "X", 'd', &["src/a.rs"])]);
        let listings: Listings = [("src".to_owned(), listing(&[("src/a.rs", None)]))].into();
        let p = plan_with(&b, &pages, &listings);
        let replacements = &p.patches["Areas/src.md"].replacements;
        assert_eq!(replacements.len(), 1, "one append: {replacements:?}");
        let after = apply(&pages, &p);
        let page = &after["Areas/src.md"];
        assert!(
            page.starts_with("# Area: src\nhand-written\n\n## Recent changes"),
            "{page}"
        );
        assert!(page.find("## What is here").unwrap() > page.find("#1 X").unwrap());
        assert!(plan_with(&b, &as_current(after), &listings).is_empty());
    }

    #[test]
    fn a_section_is_bounded_and_says_what_it_left_out() {
        let files: Vec<(String, Option<(&str, u32)>)> = (0..250)
            .map(|i| {
                (
                    format!("src/f{i:03}.rs"),
                    Some(("A purpose of a reasonable length for one file.", 1)),
                )
            })
            .collect();
        let refs: Vec<(&str, Option<(&str, u32)>)> =
            files.iter().map(|(p, x)| (p.as_str(), *x)).collect();
        let mut many = listing(&refs);
        many.omitted = 7;
        let text = what_is_here("src", &many, WHAT_IS_HERE_BYTES);
        assert!(text.len() <= WHAT_IS_HERE_BYTES, "{}", text.len());
        let listed = text.lines().filter(|l| l.starts_with("- ")).count();
        assert!(listed > 10 && listed < WHAT_IS_HERE_FILES, "{listed}");
        assert!(
            text.contains(&format!(
                " {} more files are not listed (the list holds at most 200 files in 12 KiB).",
                250 - listed + 7
            )),
            "{}",
            text.lines().next().unwrap()
        );
        // Without the byte cap the file cap holds.
        let text = what_is_here("src", &many, usize::MAX / 2);
        assert_eq!(
            text.lines().filter(|l| l.starts_with("- ")).count(),
            WHAT_IS_HERE_FILES
        );
        assert!(
            text.contains(" 57 more files are not listed"),
            "{}",
            text.lines().next().unwrap()
        );
        many.listing_cut = true;
        assert!(what_is_here("src", &many, usize::MAX / 2).contains("At least 57 more files"));
        let none = listing(&[]);
        assert!(
            what_is_here(ROOT_AREA, &none, WHAT_IS_HERE_BYTES)
                .starts_with("No files at the repository root at commit")
        );

        // The sections of one job share one budget: later areas keep theirs.
        let areas: Vec<String> = (0..30).map(|i| format!("a{i:02}/x.rs")).collect();
        let paths: Vec<&str> = areas.iter().map(String::as_str).collect();
        let b = bundle(vec![pull(1, "Wide", 'a', &paths)]);
        let listings: Listings = (0..30)
            .map(|i| {
                let mut l = many.clone();
                l.listing_cut = false;
                (format!("a{i:02}"), l)
            })
            .collect();
        let p = plan_with(&b, &home(), &listings);
        let with: usize = p
            .writes
            .iter()
            .filter(|w| w.content.contains(WHAT_IS_HERE_ANCHOR))
            .count();
        let bytes: usize = p
            .writes
            .iter()
            .map(|w| section_span(&w.content).len())
            .sum();
        assert!(with > 0 && with < 30, "{with}");
        assert!(bytes <= JOB_SECTION_BYTES, "{bytes}");
    }

    #[test]
    fn a_hostile_purpose_renders_as_text_and_forges_no_marker() {
        let hostile = format!(
            "*x* [a](javascript:1) <img src=x> <!-- teammem:evidence z@{}#L1 --> --> --!> _u_ `c` {}",
            "e".repeat(40),
            '\u{202E}'
        );
        let files = listing(&[("src/evil.py", Some((hostile.as_str(), 1)))]);
        let text = what_is_here("src", &files, WHAT_IS_HERE_BYTES);
        let line = text
            .lines()
            .find(|l| l.starts_with("- src/evil.py"))
            .unwrap();
        assert_eq!(line.matches("<!--").count(), 1, "{line}");
        assert_eq!(line.matches("-->").count(), 1, "{line}");
        assert!(!line.contains('\u{202E}'));
        let facts = source_facts(&text);
        assert_eq!(facts.len(), 1);
        assert!(
            matches!(&facts[0].marker.citation, crate::facts::Citation::Source { path, .. } if path == "src/evil.py")
        );
        let (items, html) = rendered_items(&text);
        assert!(
            html.iter().all(|h| h.starts_with("<!-- teammem:")),
            "{html:?}"
        );
        let shown = items.iter().find(|i| i.starts_with("src/evil.py")).unwrap();
        assert!(
            shown.contains("*x* [a](javascript:1) <img src=x> <!-- teammem:evidence"),
            "renders as written: {shown}"
        );
        assert!(shown.contains("--> --!> _u_ `c`"), "{shown}");
        // A hostile path is escaped too and its marker still parses.
        let files = listing(&[("src/<b> -->\n.rs", Some(("ok", 1)))]);
        let text = what_is_here("src", &files, WHAT_IS_HERE_BYTES);
        assert_eq!(source_facts(&text).len(), 1);
        assert_eq!(text.lines().count(), 3, "{text}");
    }

    #[test]
    fn pages_of_interest_name_every_touched_area() {
        let b = bundle(vec![pull(1, "A", 'a', &["x/y", "z"])]);
        let set: Vec<String> = pages_of_interest(&b).into_iter().collect();
        assert_eq!(
            set,
            vec!["Areas/root.md", "Areas/x.md", CHANGELOG, DEPENDENCIES, HOME]
        );
    }

    fn tip_manifests(text: &str) -> TipManifests {
        TipManifests {
            commit: tip(),
            manifests: vec![(
                "Cargo.toml".into(),
                crate::manifests::parse("Cargo.toml", text).unwrap(),
            )],
            omitted: 0,
        }
    }

    #[test]
    fn dependencies_page_cites_lines_notes_changes_and_replays_to_nothing() {
        let old = crate::manifests::parse(
            "Cargo.toml",
            "[dependencies]\ntokio = \"1.38\"\nregex = \"1\"\n",
        );
        let new_text = "[dependencies]\ntokio = \"1.40\"\nserde = \"1.0\"\n[dev-dependencies]\n\"<b>evil\" = \"-->\"\n";
        let new = crate::manifests::parse("Cargo.toml", new_text);
        let b = bundle(vec![pull(7, "Bump", 'a', &["Cargo.toml"])]);
        let deps = DependencyFacts {
            tip: Some(tip_manifests(new_text)),
            changes: [(
                "a".repeat(40),
                vec![(
                    "Cargo.toml".to_owned(),
                    crate::manifests::diff(old.as_ref(), new.as_ref()),
                )],
            )]
            .into(),
        };
        let p = plan_full(&b, &home(), &Listings::new(), &deps);
        let pages = apply(&home(), &p);
        let page = &pages[DEPENDENCIES];
        assert!(page.starts_with("# Dependencies\n\n"), "{page}");
        assert!(
            page.contains(&format!(
                "- tokio — 1.40 <!-- teammem:evidence Cargo.toml@{}#L2 -->",
                "f".repeat(40)
            )),
            "{page}"
        );
        assert!(
            page.contains("(dev) <!-- teammem:evidence Cargo.toml@"),
            "{page}"
        );
        assert!(!page.contains("<b>"), "{page}");
        let facts = source_facts(page);
        assert_eq!(facts.len(), 3, "{page}");
        let (_, html) = rendered_items(page);
        assert!(
            html.iter().all(|h| h.starts_with("<!-- teammem:")),
            "{html:?}"
        );
        assert!(pages[HOME].contains("[Dependencies](Dependencies)"));
        let entry = " — dependencies: + dev &lt;b>evil --&gt;; − regex; + serde 1.0; tokio 1.38 → 1.40 (Cargo.toml) — ";
        assert!(pages[CHANGELOG].contains(entry), "{}", pages[CHANGELOG]);
        assert!(pages["Areas/root.md"].contains(entry));
        // Replaying plans nothing.
        assert!(plan_full(&b, &as_current(pages.clone()), &Listings::new(), &deps).is_empty());
        // A later tip swaps the section; a page a person edited is left alone.
        let mut later = deps.clone();
        later.tip.as_mut().unwrap().commit = Sha::parse(&"9".repeat(40)).unwrap();
        let current = as_current(pages);
        let p = plan_full(
            &bundle(vec![pull(8, "X", 'b', &["Cargo.toml"])]),
            &current,
            &Listings::new(),
            &later,
        );
        let after = apply(&current, &p);
        assert!(after[DEPENDENCIES].contains(&format!("Cargo.toml@{}#L2", "9".repeat(40))));
        assert!(!after[DEPENDENCIES].contains(&"f".repeat(40)));
        let mut edited = as_current(after);
        let page = edited.get_mut(DEPENDENCIES).unwrap();
        page.content = page.content.replace("- serde", "My note\n- serde");
        let p = plan_full(
            &bundle(vec![pull(9, "Y", 'c', &["Cargo.toml"])]),
            &edited,
            &Listings::new(),
            &deps,
        );
        assert!(!p.patches.contains_key(DEPENDENCIES));
        assert!(!p.writes.iter().any(|w| w.path == DEPENDENCIES));
    }

    #[test]
    fn a_dependency_note_is_bounded() {
        let many: String = (0..15).map(|i| format!("p{i:02}==1\n")).collect();
        let new = crate::manifests::parse("requirements.txt", &many);
        let deps = DependencyFacts {
            tip: None,
            changes: [(
                "a".repeat(40),
                vec![(
                    "requirements.txt".to_owned(),
                    crate::manifests::diff(None, new.as_ref()),
                )],
            )]
            .into(),
        };
        let p = pull(1, "Many", 'a', &["requirements.txt"]);
        let note = dependency_note(&deps, &p, None);
        assert_eq!(note.matches("+ p").count(), CHANGES_PER_ENTRY, "{note}");
        assert!(note.ends_with("(requirements.txt); and 5 more"), "{note}");
        assert!(dependency_note(&deps, &p, Some(&["other.txt"])).is_empty());
        // No tip manifests and no page: no Dependencies page.
        let b = bundle(vec![p]);
        let pages = apply(&home(), &plan_full(&b, &home(), &Listings::new(), &deps));
        assert!(!pages.contains_key(DEPENDENCIES));
        assert!(!pages[HOME].contains("Dependencies"));
    }
}
