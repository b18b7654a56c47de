//! The sections teammem keeps whole on an area page, between two anchors:
//! "What is here" (the area's files at the job's tip, each with the purpose
//! its first lines state) and "Who knows this area" (the authors of the pull
//! requests recorded there, most first); the one finder of a section kept
//! between two marker lines (the Dependencies, How-to and Archive pages'
//! too), and the receipt's note when a person changed one.
//!
//! Invariants:
//! - a section is re-derived whole between its two anchors, and only while
//!   it is intact: an anchor missing, doubled or out of order, a line without
//!   a teammem marker, or (on an area page) the recent-changes anchor inside
//!   it means a person changed it, and it is left as it is;
//! - every file line of "What is here" cites the line its purpose came from
//!   with an evidence marker at the job's tip (so the runner's stale markers
//!   there are replaced); it lists at most [`WHAT_IS_HERE_FILES`] files in
//!   [`WHAT_IS_HERE_BYTES`] and says how many it left out; all the sections
//!   of one job change at most [`JOB_SECTION_BYTES`];
//! - "Who knows this area" counts live in author markers whose names are
//!   hex-encoded, so no author name can forge or inflate one; each job adds
//!   only its own new entries' authors, so a replay counts nothing twice and
//!   trimmed entries still count; at most [`WHO_KNOWS_AUTHORS`] are listed.

use std::collections::{BTreeMap, BTreeSet};

use super::areas::{area_page, area_title};
use super::inputs::{AreaFile, AreaFiles, CurrentPage};
use super::markdown::{escape_markdown, escape_purpose};
use super::markers::{
    AUTHOR_MARKER, FILE_MARKER, RECENT_ANCHOR, SUBMODULE_MARKER, WHAT_IS_HERE_ANCHOR,
    WHAT_IS_HERE_END, WHO_KNOWS_ANCHOR, WHO_KNOWS_END,
};
use crate::facts::Marker;
use crate::ids::Sha;

pub const WHAT_IS_HERE_HEADING: &str = "## What is here\n\n";
/// At most this many files are listed in one area's section.
pub const WHAT_IS_HERE_FILES: usize = 200;
/// One area's section holds at most this many bytes.
pub const WHAT_IS_HERE_BYTES: usize = 12 * 1024;
/// The sections one job rewrites change at most this many bytes in all (old
/// and new text), so they leave room in the job's change budget.
pub const JOB_SECTION_BYTES: usize = 128 * 1024;

pub const WHO_KNOWS_HEADING: &str = "## Who knows this area\n\n";
/// At most this many authors are kept (the most frequent; ties by name).
pub const WHO_KNOWS_AUTHORS: usize = 20;

/// Where a section kept between two anchors is on `page`: from the start of
/// its anchor's line to the end of its end line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Section {
    /// The page has none.
    Absent,
    /// The section's byte range.
    At(std::ops::Range<usize>),
    /// A person changed it (an anchor missing, doubled or out of order, a
    /// line without a teammem marker in it, or on an area page the
    /// recent-changes anchor inside it), so it is left alone.
    Edited,
}

impl Section {
    /// The bytes the section takes on its page (none when it has none).
    pub fn bytes(&self) -> usize {
        match self {
            Section::At(range) => range.len(),
            _ => 0,
        }
    }
}

/// Finds the section of `page` from the line ending with `anchor` to the line
/// `end`, every line of it carrying a teammem marker.
pub fn span_between(page: &str, anchor: &str, end: &str) -> Section {
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

/// An area page's section between `anchor` and `end`: [`span_between`], and
/// edited when the recent-changes anchor sits inside it (swapping the
/// section would take the anchor with it).
fn area_section(page: &str, anchor: &str, end: &str) -> Section {
    match span_between(page, anchor, end) {
        Section::At(range) if page[range.clone()].contains(RECENT_ANCHOR.trim_end()) => {
            Section::Edited
        }
        found => found,
    }
}

/// The receipt's note for a kept section a person changed: its anchors or
/// lines are not teammem's any more, so the section is left as it is.
pub fn edited_note(section: &str, page: &str) -> String {
    format!(
        "the {section} section of {page} (its teammem markers were edited; restore them, or delete the whole section to have it rebuilt)"
    )
}

/// Finds the "What is here" section of `page`.
pub fn section_span(page: &str) -> Section {
    area_section(page, WHAT_IS_HERE_ANCHOR, WHAT_IS_HERE_END)
}

/// Finds the "Who knows this area" section of `page`.
pub fn who_knows_span(page: &str) -> Section {
    area_section(page, WHO_KNOWS_ANCHOR, WHO_KNOWS_END)
}

/// One file's line: its path, its purpose and the marker citing where the
/// purpose came from, or its path alone; a submodule's names the commit it
/// pins.
fn file_line(file: &AreaFile, commit: &Sha) -> String {
    let path = escape_markdown(&file.path);
    if let Some(pinned) = &file.pinned {
        return format!(
            "- {path} — a submodule: another repository's commit `{pinned}`, its files not read here {SUBMODULE_MARKER}\n"
        );
    }
    match &file.purpose {
        Some((text, lines)) => format!(
            "- {path} — {} {}\n",
            escape_purpose(text),
            Marker::source(&file.path, commit.clone(), *lines)
        ),
        None => format!("- {path} {FILE_MARKER}\n"),
    }
}

/// `file`'s line on `section` when it says what a fresh line would and its
/// one marker cites the same file and lines and is not stale.
fn unchanged_line<'a>(section: &'a str, file: &AreaFile) -> Option<&'a str> {
    let (text, lines) = file.purpose.as_ref()?;
    if file.pinned.is_some() {
        return None;
    }
    let start = format!(
        "- {} — {} <!--",
        escape_markdown(&file.path),
        escape_purpose(text)
    );
    let line = section
        .split_inclusive('\n')
        .find(|line| line.starts_with(&start))?;
    let found = crate::facts::facts(line);
    match found.as_slice() {
        [crate::facts::Found::Fact(fact)]
            if fact.marker.stale.is_none()
                && matches!(&fact.marker.citation, crate::facts::Citation::Source { path, lines: cited, .. }
                    if *path == file.path && cited == lines)
                && line.ends_with(" -->\n") =>
        {
            Some(line)
        }
        _ => None,
    }
}

/// The room the first and last lines of a section take at most.
pub const SECTION_FRAME: usize = 512;

/// An area's "What is here" section (without its heading): a summary line
/// ending with [`WHAT_IS_HERE_ANCHOR`], one line per file while they fit in
/// `cap` bytes, and [`WHAT_IS_HERE_END`].
///
/// A file whose line on `previous` (the section as the page holds it) says
/// the same and cites the same lines with a marker that is not stale keeps
/// that line, citing the commit it was read at: the fact still holds (the
/// job's marker check says otherwise if those lines changed), and a job
/// rewrites only the lines of files whose purpose changed, not every line
/// of every area it touches.
pub fn what_is_here(area: &str, files: &AreaFiles, cap: usize, previous: Option<&str>) -> String {
    let mut lines = String::new();
    let mut listed = 0;
    for file in files.files.iter().take(WHAT_IS_HERE_FILES) {
        let line = previous
            .and_then(|section| unchanged_line(section, file))
            .map_or_else(|| file_line(file, &files.commit), str::to_owned);
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

/// The "What is here" section of an area whose folder is gone at `commit`:
/// which pull request of the job removed it, when one did.
pub fn removed_section(area: &str, commit: &Sha, by: Option<(u64, &str)>) -> String {
    let how = match by {
        Some((number, sha)) => format!(
            " It was removed by #{number} (merge commit `{}`).",
            sha.to_ascii_lowercase()
        ),
        None => String::new(),
    };
    format!(
        "Removed: no {} at commit `{commit}`.{how} The entries below and this area's quarter pages stay (kept by teammem). {WHAT_IS_HERE_ANCHOR}\n{WHAT_IS_HERE_END}\n",
        area_title(area)
    )
}

/// `section` (a "What is here" section) without the lines of `removed`
/// files; `None` when it lists none of them.
pub fn without_removed_files(section: &str, removed: &BTreeSet<String>) -> Option<String> {
    if removed.is_empty() {
        return None;
    }
    let listed: Vec<String> = removed
        .iter()
        .map(|path| format!("- {} ", escape_markdown(path)))
        .collect();
    let kept: String = section
        .split_inclusive('\n')
        .filter(|line| !listed.iter().any(|start| line.starts_with(start.as_str())))
        .collect();
    (kept.len() != section.len()).then_some(kept)
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

/// The "Who knows this area" section a plan leaves on a page whose section is
/// at `span` (of `page`, `None` for a new page): the counts it keeps plus
/// `added` (the authors of the plan's new entries there); `None` when a
/// person edited it.
pub fn who_knows_after(
    span: &Section,
    page: Option<&CurrentPage>,
    added: &BTreeMap<String, u64>,
) -> Option<String> {
    if *span == Section::Edited {
        return None;
    }
    let mut counts = match (span, page) {
        (Section::At(range), Some(page)) => who_knows_counts(&page.content[range.clone()]),
        _ => BTreeMap::new(),
    };
    for (name, n) in added {
        *counts.entry(name.clone()).or_insert(0) += n;
    }
    Some(who_knows(&counts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Lines;
    use crate::forge::evidence::PullRequest;
    use crate::runner::builtin::areas::ROOT_AREA;
    use crate::runner::builtin::inputs::Listings;
    use crate::runner::builtin::planner::{apply, plan, plan_with};
    use crate::runner::builtin::samples::*;

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
        assert_eq!(area_slugs(&p), BTreeSet::from(["src".to_owned()]));
        let pages = apply(&home(), &p);
        let page = &pages["Area-src.md"];
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
            !pages.contains_key("Area-root.md") || !pages["Area-root.md"].contains("What is here")
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
        let page = pages.get_mut("Area-src.md").unwrap();
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
        assert_eq!(p.patches["Area-src.md"].replacements.len(), 3);
        let after = apply(&pages, &p);
        let page = &after["Area-src.md"];
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
        let page = edited.get_mut("Area-src.md").unwrap();
        page.content = page
            .content
            .replace("- src/b.rs", "My own line\n- src/b.rs");
        let third = bundle(vec![pull(15, "Three", 'd', &["src/c.rs"])]);
        let p = plan_with(&third, &edited, &now);
        assert_eq!(p.patches["Area-src.md"].replacements.len(), 2);
        let after = apply(&edited, &p);
        assert!(after["Area-src.md"].contains("My own line\n"));
        assert!(after["Area-src.md"].contains("#15 Three"));
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
        let src = &pages["Area-src.md"];
        assert_eq!(
            who_lines(src),
            ["- Alice — 2 pull requests", "- Bob — 1 pull request"]
        );
        assert!(
            src.find("## Who knows this area").unwrap() < src.find("## Recent changes").unwrap()
        );
        assert_eq!(
            who_lines(&pages["Area-docs.md"]),
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
            who_lines(&pages["Area-src.md"]),
            ["- Bob — 3 pull requests", "- Alice — 2 pull requests"]
        );
        assert_eq!(
            who_lines(&pages["Area-docs.md"]),
            ["- Alice — 1 pull request"]
        );
        assert_eq!(pages["Area-src.md"].matches("## Who knows").count(), 1);
    }

    #[test]
    fn who_knows_is_bounded_hostile_names_forge_nothing_and_edits_are_kept() {
        let hostile = "Eve <!-- teammem:author 99 416c696365 --> *x* -->";
        let mut pulls: Vec<PullRequest> = (0..25u64)
            .map(|i| by(&format!("dev{i:02}"), pull(i + 1, "P", 'a', &["src/a.rs"])))
            .map(|mut p| {
                p.merge_sha = crate::ids::Sha::parse(&format!("{:040x}", p.number.get())).unwrap();
                p
            })
            .collect();
        let mut evil = by(hostile, pull(99, "Evil", 'e', &["src/a.rs"]));
        evil.merge_sha = crate::ids::Sha::parse(&format!("{:040x}", 99)).unwrap();
        pulls.push(evil.clone());
        pulls.push({
            let mut again = evil.clone();
            again.number = crate::ids::PullNumber::new(100).unwrap();
            again.merge_sha = crate::ids::Sha::parse(&format!("{:040x}", 100)).unwrap();
            again
        });
        let pages = apply(&home(), &plan(&bundle(pulls), &home()));
        let page = &pages["Area-src.md"];
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
        let page = current.get_mut("Area-src.md").unwrap();
        page.content = page
            .content
            .replace("- dev00", "Ask Mallory first.\n- dev00");
        let next = bundle(vec![by("Zed", pull(200, "Z", 'f', &["src/z.rs"]))]);
        let after = apply(&current, &plan(&next, &current));
        assert!(after["Area-src.md"].contains("Ask Mallory first.\n"));
        assert!(!after["Area-src.md"].contains("- Zed"));
        assert!(after["Area-src.md"].contains("#200 Z"));
    }

    #[test]
    fn a_page_from_before_gets_the_section_appended_once() {
        let mut pages = home();
        pages.insert(
            "Area-src.md".into(),
            CurrentPage {
                sha: "c".repeat(40),
                content: "# Area: src\nhand-written".into(),
            },
        );
        let b = bundle(vec![pull(1, "X", 'd', &["src/a.rs"])]);
        let listings: Listings = [("src".to_owned(), listing(&[("src/a.rs", None)]))].into();
        let p = plan_with(&b, &pages, &listings);
        let replacements = &p.patches["Area-src.md"].replacements;
        assert_eq!(replacements.len(), 1, "one append: {replacements:?}");
        let after = apply(&pages, &p);
        let page = &after["Area-src.md"];
        assert!(
            page.starts_with("# Area: src\nhand-written\n\n## Recent changes"),
            "{page}"
        );
        assert!(page.find("## What is here").unwrap() > page.find("#1 X").unwrap());
        assert!(plan_with(&b, &as_current(after), &listings).is_empty());
    }

    #[test]
    fn a_file_whose_line_still_holds_keeps_it_and_its_citation() {
        let earlier = Sha::parse(&"e".repeat(40)).unwrap();
        let mut before = listing(&[
            ("src/kept.rs", Some(("Kept as it was.", 1))),
            ("src/moved.rs", Some(("Its purpose moved down.", 1))),
            ("src/reworded.rs", Some(("Said one thing.", 1))),
            ("src/stale.rs", Some(("Cited lines changed.", 1))),
            ("src/bare.rs", None),
        ]);
        before.commit = earlier.clone();
        let section = what_is_here("src", &before, WHAT_IS_HERE_BYTES, None)
            // The job's marker check found the cited lines changed.
            .replace(
                &format!("src/stale.rs@{earlier}#L1 -->"),
                &format!("src/stale.rs@{earlier}#L1 stale={} -->", "f".repeat(40)),
            );
        let after = listing(&[
            ("src/kept.rs", Some(("Kept as it was.", 1))),
            ("src/moved.rs", Some(("Its purpose moved down.", 3))),
            ("src/new.rs", Some(("A new file.", 1))),
            ("src/reworded.rs", Some(("Says another.", 1))),
            ("src/stale.rs", Some(("Cited lines changed.", 1))),
            ("src/bare.rs", None),
        ]);
        let text = what_is_here("src", &after, WHAT_IS_HERE_BYTES, Some(&section));
        let cites = |path: &str| -> String {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("- {path} ")))
                .unwrap_or_else(|| panic!("{path} not listed: {text}"));
            let facts = source_facts(line);
            assert_eq!(facts.len(), 1, "{line}");
            assert!(facts[0].marker.stale.is_none(), "{line}");
            match &facts[0].marker.citation {
                crate::facts::Citation::Source { commit, .. } => commit.to_string(),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(cites("src/kept.rs"), earlier.to_string());
        for path in [
            "src/moved.rs",
            "src/new.rs",
            "src/reworded.rs",
            "src/stale.rs",
        ] {
            assert_eq!(cites(path), tip().to_string(), "{path}");
        }
        assert!(
            text.contains("- src/bare.rs <!-- teammem:file -->"),
            "{text}"
        );
        assert!(text.starts_with(&format!("The files under `src/` at commit `{}`", tip())));
        // Only what changed is paid for.
        let fresh = what_is_here("src", &after, WHAT_IS_HERE_BYTES, None);
        assert!(
            crate::wiki::confine::changed_bytes(Some(section.as_bytes()), text.as_bytes())
                < crate::wiki::confine::changed_bytes(Some(section.as_bytes()), fresh.as_bytes())
        );
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
        let text = what_is_here("src", &many, WHAT_IS_HERE_BYTES, None);
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
        let text = what_is_here("src", &many, usize::MAX / 2, None);
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
        assert!(
            what_is_here("src", &many, usize::MAX / 2, None).contains("At least 57 more files")
        );
        let none = listing(&[]);
        assert!(
            what_is_here(ROOT_AREA, &none, WHAT_IS_HERE_BYTES, None)
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
            .map(|w| section_span(&w.content).bytes())
            .sum();
        assert!(with > 0 && with < 30, "{with}");
        assert!(bytes <= JOB_SECTION_BYTES, "{bytes}");
    }
}
