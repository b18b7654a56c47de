//! The builtin agent's plan: from an evidence bundle, the current pages and
//! what the agent read, the edits of one run, deterministic, no network,
//! pure: `Changelog.md`, `Area-<slug>.md` (one page per area touched, with
//! its "What is here", "Who knows this area" and "Recent changes"), the
//! quarter pages of both (`super::archive`), `Archive.md` (the index of the
//! Changelog's quarters), `Dependencies.md`, `How-to-work-here.md` and
//! `Home.md` (the topic index, `super::home`), each planned by its own
//! function.
//!
//! Invariants:
//! - every entry cites the PR number, title, author and the full merge-commit
//!   SHA, and ends with the marker `<!-- teammem:<sha> -->`; an entry whose
//!   marker is already on its current page or one of its quarter pages is
//!   never written again, so replaying a range plans nothing (and
//!   `Dependencies.md` changes only with new entries);
//! - every new entry goes on its current page and on its quarter page, so a
//!   current page may drop its oldest lines without losing any (every
//!   recorded pull request stays on the Changelog page of its quarter, linked
//!   from `Archive.md`, which Home links: two links from Home);
//! - existing pages are only patched at exact anchors (insert after a marker
//!   line, swap a kept section or a marker line, or append at the end); new
//!   pages are written whole; every planned page fits
//!   [`super::budget::PAGE_BUDGET`];
//! - Home lists its topics in one order (Changelog, Dependencies, How to
//!   work here, Archive, areas by slug, then "Removed areas"), each area
//!   named as in the tree.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::archive::{
    ArchiveHeader, ArchiveLinks, Period, archive_base, archive_page, archives_line,
    linked_archives, new_archive_page, page_name, parse_archive, parts, placement,
};
use super::areas::{
    ByArea, ROOT_AREA, area_base, area_label, area_page, area_title, by_area, slug_of_page,
};
use super::budget::{apply_replacements, trim_new_page, trim_patch};
use super::dependencies::{dependency_note, plan_dependencies};
use super::entries::{area_entry_with, changelog_entry_with, entry_lines, entry_shas};
use super::home::{Topics, plan_home};
use super::how_to_work::{HowTo, plan_how_to};
use super::inputs::{AreaFiles, CurrentPage, DependencyFacts, Listings};
use super::markers::{
    ARCHIVE_ANCHOR, ARCHIVE_INDEX, ARCHIVE_INDEX_ANCHOR, ARCHIVE_INDEX_END, ARCHIVES_MARKER,
    BEFORE_ARCHIVES_MARKER, CHANGELOG, CHANGELOG_ANCHOR, DEPENDENCIES, HOME, HOW_TO_WORK,
    RECENT_ANCHOR,
};
use super::sections::{
    JOB_SECTION_BYTES, Section, WHAT_IS_HERE_BYTES, WHAT_IS_HERE_HEADING, WHO_KNOWS_HEADING,
    removed_section, section_span, what_is_here, who_knows_after, who_knows_span,
    without_removed_files,
};
use crate::forge::evidence::{EvidenceBundle, FileStatus, PullRequest};

/// Full content for a new page (`write_wiki_pages`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPage {
    pub path: String,
    pub content: String,
}

/// One exact-anchor replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    pub old: String,
    pub new: String,
}

/// Replacements the plan makes in one existing page (sent as `patch_wiki_pages`;
/// the writer's own is `wiki::PagePatch`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedPatch {
    pub expected_sha: String,
    pub replacements: Vec<Replacement>,
}

/// What the plan does for one pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullPlan {
    pub number: u64,
    pub merge_sha: String,
    /// The current pages that carry (or will carry) the PR's entry.
    pub pages: Vec<String>,
    /// True when every page already carried the entry.
    pub already_recorded: bool,
}

/// The edits of one run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub writes: Vec<NewPage>,
    pub patches: BTreeMap<String, PlannedPatch>,
    pub pulls: Vec<PullPlan>,
    /// What the plan leaves alone because a person changed it (a kept
    /// section whose anchors or lines were edited), for the receipt.
    pub notes: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.patches.is_empty()
    }

    /// The slugs of the area pages (not their quarter pages) the plan writes
    /// or patches.
    pub fn area_slugs(&self) -> BTreeSet<String> {
        self.writes
            .iter()
            .map(|w| w.path.as_str())
            .chain(self.patches.keys().map(String::as_str))
            .filter_map(slug_of_page)
            .map(str::to_owned)
            .collect()
    }
}

/// The merge shas each page family (a current page's name) already carries,
/// on its current page or any of its quarter pages.
struct Recorded(BTreeMap<String, HashSet<String>>);

impl Recorded {
    fn new(pages: &BTreeMap<String, CurrentPage>) -> Recorded {
        let mut families: BTreeMap<String, HashSet<String>> = BTreeMap::new();
        for (path, page) in pages {
            let base = if path == CHANGELOG || slug_of_page(path).is_some() {
                page_name(path)
            } else if let Some(base) = archive_base(path) {
                base
            } else {
                continue;
            };
            families
                .entry(base.to_owned())
                .or_default()
                .extend(entry_shas(&page.content).map(str::to_owned));
        }
        Recorded(families)
    }

    fn has(&self, base: &str, sha: &str) -> bool {
        self.0
            .get(base)
            .is_some_and(|shas| shas.contains(&sha.to_ascii_lowercase()))
    }
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
    plan_all(bundle, pages, listings, deps, None)
}

/// [`plan_full`], with `How-to-work-here.md` re-derived from `how` (when the
/// agent read the tip's files for it).
pub fn plan_all(
    bundle: &EvidenceBundle,
    pages: &BTreeMap<String, CurrentPage>,
    listings: &Listings,
    deps: &DependencyFacts,
    how: Option<&HowTo>,
) -> Plan {
    let grouped: Vec<(&PullRequest, ByArea<'_>)> = bundle
        .pull_requests
        .iter()
        .map(|pull| (pull, by_area(pull)))
        .collect();
    let recorded = Recorded::new(pages);
    let mut out = Plan {
        pulls: pull_plans(&grouped, &recorded),
        ..Plan::default()
    };
    let changelog_links = plan_changelog(&mut out, &grouped, pages, deps, &recorded);
    let areas = area_entries(&grouped, deps, &recorded);
    let removed = removed_paths(bundle);
    plan_area_pages(&mut out, &areas, pages, listings, (bundle, &removed));
    // Dependencies.md and How-to-work-here.md change only with new entries:
    // a job that records nothing (a replay) changes nothing.
    let records = !out.is_empty();
    let dependencies_page = if !records {
        pages.contains_key(DEPENDENCIES)
    } else {
        plan_dependencies(&mut out, pages, deps)
    };
    let how_to_page = if records {
        plan_how_to(&mut out, pages, how)
    } else {
        pages.contains_key(HOW_TO_WORK)
    };
    let archive_index = plan_archive_index(&mut out, pages, &changelog_links);
    let topics = Topics {
        any_pulls: !bundle.pull_requests.is_empty(),
        dependencies_page,
        how_to_page,
        archive_index,
        areas: areas
            .iter()
            .map(|(slug, a)| (slug.clone(), area_label(&a.area, slug)))
            .collect(),
        gone: areas
            .keys()
            .filter(|slug| {
                listings
                    .get(*slug)
                    .is_some_and(|files| is_gone(slug, files))
            })
            .cloned()
            .collect(),
    };
    plan_home(&mut out, pages, &topics);
    out
}

/// The slugs of the areas whose pages a plan for `bundle` against `pages`
/// writes or patches: those of a pull request's paths whose page (or its
/// quarter pages) does not carry its entry yet. (The driver reads these
/// areas' files before it plans.)
pub fn areas_to_record(
    bundle: &EvidenceBundle,
    pages: &BTreeMap<String, CurrentPage>,
) -> BTreeSet<String> {
    let recorded = Recorded::new(pages);
    bundle
        .pull_requests
        .iter()
        .flat_map(|pull| {
            by_area(pull)
                .into_keys()
                .filter(|slug| !recorded.has(&area_base(slug), &pull.merge_sha))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What the plan does for each pull request, in merge order: the pages that
/// carry its entry, and whether all of them already do.
fn pull_plans(grouped: &[(&PullRequest, ByArea<'_>)], recorded: &Recorded) -> Vec<PullPlan> {
    grouped
        .iter()
        .map(|(pull, areas)| {
            let mut touched = vec![CHANGELOG.to_owned()];
            let mut all_recorded = recorded.has(page_name(CHANGELOG), &pull.merge_sha);
            for slug in areas.keys() {
                all_recorded &= recorded.has(&area_base(slug), &pull.merge_sha);
                touched.push(area_page(slug));
            }
            PullPlan {
                number: pull.number,
                merge_sha: pull.merge_sha.clone(),
                pages: touched,
                already_recorded: all_recorded,
            }
        })
        .collect()
}

/// At most this many bytes of one job's new entries go on a current page
/// (its newest ones): every entry goes on its quarter page, and a job that
/// records many at once (a backfill, a long coalesced range) would
/// otherwise pay for a page of them twice.
pub const CURRENT_ENTRIES_PER_JOB: usize = 16 * 1024;

/// New entry lines of one page family: in page order (newest first), and
/// by quarter (each newest first).
#[derive(Default)]
struct NewEntries {
    lines: Vec<String>,
    by_period: BTreeMap<Period, Vec<String>>,
}

impl NewEntries {
    fn push(&mut self, pull: &PullRequest, line: String) {
        self.lines.push(line.clone());
        self.by_period
            .entry(Period::of(&pull.merged_at))
            .or_default()
            .push(line);
    }

    fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The entries the current page gets: the newest, within
    /// [`CURRENT_ENTRIES_PER_JOB`] (at least one).
    fn current(&self) -> String {
        let mut out = String::new();
        for line in &self.lines {
            if !out.is_empty() && out.len() + line.len() > CURRENT_ENTRIES_PER_JOB {
                break;
            }
            out.push_str(line);
        }
        out
    }
}

/// The quarter pages of `base` after the plan: those its current page links,
/// those `pages` holds, and those the plan writes.
fn links_of(pages: &BTreeMap<String, CurrentPage>, base: &str, current: &str) -> ArchiveLinks {
    let mut links = pages
        .get(current)
        .map(|page| linked_archives(&page.content, base))
        .unwrap_or_default();
    links.extend(pages.keys().filter_map(|path| parse_archive(base, path)));
    links
}

/// Writes `entries` to their quarter pages of `base` (the newest part of each
/// quarter while it has room, then new parts); returns every quarter page of
/// `base` after the plan.
fn plan_archives(
    out: &mut Plan,
    pages: &BTreeMap<String, CurrentPage>,
    (base, current): (&str, &str),
    header: &ArchiveHeader<'_>,
    entries: &NewEntries,
) -> ArchiveLinks {
    let mut links = links_of(pages, base, current);
    for (period, lines) in &entries.by_period {
        let newest = parts(pages.keys(), base, *period).last().map(|&part| {
            (
                part,
                pages[&archive_page(base, *period, part)].content.len(),
            )
        });
        let header_bytes = new_archive_page(header, *period, 2, "").len();
        for (part, lines, new) in placement(newest, header_bytes, lines) {
            let path = archive_page(base, *period, part);
            let block: String = lines.concat();
            links.insert((*period, part));
            if new {
                out.writes.push(NewPage {
                    content: new_archive_page(header, *period, part, &block),
                    path,
                });
            } else {
                let page = &pages[&path];
                let r = insert_after_anchor(page, ARCHIVE_ANCHOR, &block, |b| {
                    format!("\n{ARCHIVE_ANCHOR}{b}")
                });
                out.patches.insert(
                    path,
                    PlannedPatch {
                        expected_sha: page.sha.clone(),
                        replacements: vec![r],
                    },
                );
            }
        }
    }
    links
}

/// The line a current page says it holds entries recorded before quarter
/// pages existed below.
fn before_archives_line() -> String {
    format!(
        "_Entries below were recorded before quarter pages existed; they are on this page and in its history only._ {BEFORE_ARCHIVES_MARKER}\n"
    )
}

/// The byte range of the one line of `content` that ends with `marker`
/// (newline included), when exactly one does.
fn marker_line(content: &str, marker: &str) -> Option<std::ops::Range<usize>> {
    let mut found = None;
    let mut start = 0;
    for line in content.split_inclusive('\n') {
        if line.trim_end().ends_with(marker) {
            if found.is_some() {
                return None;
            }
            found = Some(start..start + line.len());
        }
        start += line.len();
    }
    found
}

/// The replacements that put `entries` after `anchor` on an existing current
/// page and keep its archives line in step, and what to append when the page
/// lacks the anchor (`heading` titles it). A page that had entries but no
/// archives line gets one, and its old entries are marked as recorded before
/// quarter pages existed.
fn entry_replacements(
    page: &CurrentPage,
    anchor: &str,
    entries: &str,
    archives: &str,
    heading: &str,
) -> (Vec<Replacement>, String) {
    let content = &page.content;
    let mut replacements = Vec::new();
    let mut append = String::new();
    let anchored = occurrences(content, anchor) == 1;
    match marker_line(content, ARCHIVES_MARKER) {
        Some(line) => {
            if content[line.clone()] != *archives {
                replacements.push(Replacement {
                    old: content[line].to_owned(),
                    new: archives.to_owned(),
                });
            }
            if anchored {
                replacements.push(Replacement {
                    old: anchor.to_owned(),
                    new: format!("{anchor}{entries}"),
                });
            } else {
                append.push_str(&format!("\n{heading}{anchor}{entries}"));
            }
        }
        None if anchored => {
            // Entries already on quarter pages (the page links one of them:
            // a person mangled its archives line) are not "before" them.
            let linked = archives
                .split("](")
                .skip(1)
                .filter_map(|piece| piece.split(')').next())
                .any(|target| content.contains(&format!("]({target})")));
            let before = if entry_lines(content).is_empty() || linked {
                String::new()
            } else {
                before_archives_line()
            };
            replacements.push(Replacement {
                old: anchor.to_owned(),
                new: format!("{archives}\n{anchor}{entries}{before}"),
            });
        }
        None => append.push_str(&format!("\n{heading}{archives}\n{anchor}{entries}")),
    }
    (replacements, append)
}

/// The one replacement that appends `append` to `page` (after a newline
/// when its last line has none).
pub(super) fn append_replacement(page: &CurrentPage, append: &str) -> Replacement {
    let sep = if page.content.is_empty() || page.content.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    Replacement {
        old: String::new(),
        new: format!("{sep}{append}"),
    }
}

fn changelog_header() -> ArchiveHeader<'static> {
    ArchiveHeader {
        title: "Changelog",
        what: "Merged pull requests",
        current: ("Changelog", "Changelog"),
    }
}

/// `Changelog.md`: the entries it lacks, newest first, after its anchor (or
/// a new page), each also on its quarter page; returns the Changelog's
/// quarter pages after the plan.
fn plan_changelog(
    out: &mut Plan,
    grouped: &[(&PullRequest, ByArea<'_>)],
    pages: &BTreeMap<String, CurrentPage>,
    deps: &DependencyFacts,
    recorded: &Recorded,
) -> ArchiveLinks {
    let base = page_name(CHANGELOG);
    // Newest first on every page: walk the PRs in reverse merge order.
    let mut entries = NewEntries::default();
    for (pull, _) in grouped.iter().rev() {
        if !recorded.has(base, &pull.merge_sha) {
            let line = changelog_entry_with(pull, &dependency_note(deps, pull, None));
            entries.push(pull, line);
        }
    }
    if entries.is_empty() {
        return links_of(pages, base, CHANGELOG);
    }
    let current = entries.current();
    let links = plan_archives(out, pages, (base, CHANGELOG), &changelog_header(), &entries);
    let archives = archives_line(base, &links);
    match pages.get(CHANGELOG) {
        None => out.writes.push(NewPage {
            path: CHANGELOG.into(),
            content: trim_new_page(new_changelog(&archives, &current)),
        }),
        Some(page) => {
            let (mut replacements, append) =
                entry_replacements(page, CHANGELOG_ANCHOR, &current, &archives, "");
            if !append.is_empty() {
                replacements.push(append_replacement(page, &append));
            }
            let mut patch = PlannedPatch {
                expected_sha: page.sha.clone(),
                replacements,
            };
            trim_patch(page, &mut patch);
            out.patches.insert(CHANGELOG.into(), patch);
        }
    }
    links
}

/// What one area gets from a plan.
#[derive(Default)]
struct AreaEntries {
    /// The area as first seen (newest first).
    area: String,
    /// The entries its pages lack (empty: the page is left as it is).
    entries: NewEntries,
    /// The authors of those entries, with counts.
    authors: BTreeMap<String, u64>,
}

/// Every area the pull requests touch (slug → its entries), including areas
/// whose page already carries every entry.
fn area_entries(
    grouped: &[(&PullRequest, ByArea<'_>)],
    deps: &DependencyFacts,
    recorded: &Recorded,
) -> BTreeMap<String, AreaEntries> {
    let mut areas: BTreeMap<String, AreaEntries> = BTreeMap::new();
    for (pull, by_area) in grouped.iter().rev() {
        for (slug, (area, paths)) in by_area {
            let slot = areas.entry(slug.clone()).or_insert_with(|| AreaEntries {
                area: area.clone(),
                ..AreaEntries::default()
            });
            if recorded.has(&area_base(slug), &pull.merge_sha) {
                continue;
            }
            *slot.authors.entry(pull.author.clone()).or_insert(0) += 1;
            let note = dependency_note(deps, pull, Some(paths));
            slot.entries.push(pull, area_entry_with(pull, paths, &note));
        }
    }
    areas
}

/// Whether an area's listing at the tip shows its folder gone (the root's
/// files never are an area that can go).
fn is_gone(slug: &str, files: &AreaFiles) -> bool {
    slug != ROOT_AREA && files.files.is_empty() && files.omitted == 0 && !files.listing_cut
}

/// The paths the bundle's pull requests leave removed (a path removed and
/// added again later in the range is not).
fn removed_paths(bundle: &EvidenceBundle) -> BTreeSet<String> {
    let mut removed = BTreeSet::new();
    for pull in &bundle.pull_requests {
        for file in &pull.files {
            if file.status == FileStatus::Removed {
                removed.insert(file.path.clone());
            } else {
                removed.remove(&file.path);
            }
            // A rename leaves its old path removed.
            if let Some(old) = &file.previous_path {
                removed.insert(old.clone());
            }
        }
    }
    removed
}

/// The newest pull request of `bundle` that removed a file of area `slug`.
fn removed_by<'a>(bundle: &'a EvidenceBundle, slug: &str) -> Option<&'a PullRequest> {
    bundle.pull_requests.iter().rev().find(|pull| {
        by_area(pull).get(slug).is_some_and(|(_, paths)| {
            pull.files.iter().any(|f| {
                (f.status == FileStatus::Removed && paths.contains(&f.path.as_str()))
                    || f.previous_path
                        .as_deref()
                        .is_some_and(|old| paths.contains(&old))
            })
        })
    })
}

/// The area pages that get entries: new pages written whole, existing ones
/// patched (entries after the recent-changes anchor, the kept sections
/// swapped, what is missing appended), each entry also on its quarter page.
/// The "What is here" sections come from `listings` while the job's
/// [`JOB_SECTION_BYTES`] last (counted as the writer counts a change);
/// without a listing, a section loses the lines of files the range removed.
fn plan_area_pages(
    out: &mut Plan,
    areas: &BTreeMap<String, AreaEntries>,
    pages: &BTreeMap<String, CurrentPage>,
    listings: &Listings,
    (bundle, removed): (&EvidenceBundle, &BTreeSet<String>),
) {
    let mut section_room = JOB_SECTION_BYTES;
    for (slug, entries) in areas {
        if entries.entries.is_empty() {
            continue;
        }
        let current_entries = entries.entries.current();
        let path = area_page(slug);
        let base = area_base(slug);
        let label = area_label(&entries.area, slug);
        let current = pages.get(&path);
        let span = current.map_or(Section::Absent, |page| section_span(&page.content));
        let old_section = match (&span, current) {
            (Section::At(range), Some(page)) => Some(&page.content[range.clone()]),
            _ => None,
        };
        // The section, when the agent derived it, the page's own is intact,
        // and the job's section budget has room for the swap.
        let derived = match (listings.get(slug), &span) {
            (Some(files), Section::Absent | Section::At(_)) => Some(if is_gone(slug, files) {
                let by = removed_by(bundle, slug).map(|p| (p.number, p.merge_sha.as_str()));
                removed_section(&entries.area, &files.commit, by)
            } else {
                what_is_here(&entries.area, files, WHAT_IS_HERE_BYTES, old_section)
            }),
            (None, Section::At(_)) => {
                old_section.and_then(|old| without_removed_files(old, removed))
            }
            _ => None,
        };
        if span == Section::Edited {
            out.notes.push(edited_note("What is here", &path));
        }
        let section = derived.and_then(|text| {
            let cost = crate::wiki::confine::changed_bytes(
                old_section.map(str::as_bytes),
                text.as_bytes(),
            ) as usize;
            (cost <= section_room).then(|| {
                section_room -= cost;
                text
            })
        });
        // Who knows: the counts the page keeps plus this plan's entries.
        let who_span = current.map_or(Section::Absent, |page| who_knows_span(&page.content));
        let who = who_knows_after(&who_span, current, &entries.authors);
        if who_span == Section::Edited {
            out.notes.push(edited_note("Who knows this area", &path));
        }
        let header = ArchiveHeader {
            title: &format!("Area: {label}"),
            what: &format!("Pull requests that changed {}", area_title(&entries.area)),
            current: (&label, &base),
        };
        let links = plan_archives(out, pages, (&base, &path), &header, &entries.entries);
        let archives = archives_line(&base, &links);
        match current {
            None => out.writes.push(NewPage {
                content: trim_new_page(new_area_page(
                    &entries.area,
                    &label,
                    section.as_deref(),
                    who.as_deref().unwrap_or_default(),
                    &archives,
                    &current_entries,
                )),
                path,
            }),
            Some(page) => {
                let mut patch = PlannedPatch {
                    expected_sha: page.sha.clone(),
                    replacements: area_replacements(
                        page,
                        (&current_entries, &archives),
                        (section, span),
                        (who, who_span),
                    ),
                };
                trim_patch(page, &mut patch);
                out.patches.insert(path, patch);
            }
        }
    }
}

/// The replacements of an existing area page: `entries` after its
/// recent-changes anchor with its archives line in step, and each kept
/// section (new text, where the page has it) swapped when it changed; what
/// the page lacks is appended.
fn area_replacements(
    page: &CurrentPage,
    (entries, archives): (&str, &str),
    (section, span): (Option<String>, Section),
    (who, who_span): (Option<String>, Section),
) -> Vec<Replacement> {
    let (mut replacements, mut append) = entry_replacements(
        page,
        RECENT_ANCHOR,
        entries,
        archives,
        "## Recent changes\n\n",
    );
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
        replacements.push(append_replacement(page, &append));
    }
    replacements
}

/// `Archive.md`: the Changelog's quarter pages, newest first, re-derived
/// between its anchors (written when the first one exists). Returns whether
/// the index exists after the plan.
fn plan_archive_index(
    out: &mut Plan,
    pages: &BTreeMap<String, CurrentPage>,
    changelog: &ArchiveLinks,
) -> bool {
    let base = page_name(CHANGELOG);
    let current = pages.get(ARCHIVE_INDEX);
    let span = current.map_or(Section::Absent, |page| {
        super::sections::span_between(
            &page.content,
            ARCHIVE_INDEX_ANCHOR.trim_end(),
            ARCHIVE_INDEX_END.trim_end(),
        )
    });
    let mut links = changelog.clone();
    if let (Some(page), Section::At(range)) = (current, &span) {
        for line in page.content[range.clone()].lines() {
            if let Some(target) = line.split("](").nth(1).and_then(|t| t.split(')').next())
                && let Some(at) = parse_archive(base, &format!("{target}.md"))
            {
                links.insert(at);
            }
        }
    }
    if links.is_empty() {
        return current.is_some();
    }
    let mut block = String::from(ARCHIVE_INDEX_ANCHOR);
    for &(period, part) in links.iter().rev() {
        let name = page_name(&archive_page(base, period, part)).to_owned();
        let label = if part > 1 {
            format!("Changelog, {} part {part}", period.label())
        } else {
            format!("Changelog, {}", period.label())
        };
        block.push_str(&format!(
            "- [{label}]({name}) <!-- teammem:archive:{name} -->\n"
        ));
    }
    block.push_str(ARCHIVE_INDEX_END);
    match (current, span) {
        (None, _) => out.writes.push(NewPage {
            path: ARCHIVE_INDEX.into(),
            content: format!(
                "# Archive\n\nEvery pull request teammem recorded is on the Changelog page of its quarter, newest quarter first (kept by teammem). Each area page links the quarter pages of its own entries.\n\n{block}"
            ),
        }),
        (Some(page), Section::At(range)) => {
            if page.content[range.clone()] != block {
                out.patches.insert(
                    ARCHIVE_INDEX.into(),
                    PlannedPatch {
                        expected_sha: page.sha.clone(),
                        replacements: vec![Replacement {
                            old: page.content[range].to_owned(),
                            new: block,
                        }],
                    },
                );
            }
        }
        (Some(page), Section::Absent) => {
            out.patches.insert(
                ARCHIVE_INDEX.into(),
                PlannedPatch {
                    expected_sha: page.sha.clone(),
                    replacements: vec![append_replacement(page, &format!("\n{block}"))],
                },
            );
        }
        // A person changed the list: it is left as it is.
        (Some(_), Section::Edited) => out.notes.push(edited_note("archive index", ARCHIVE_INDEX)),
    }
    true
}

/// The pages a plan for `bundle` may read besides the quarter pages: Home,
/// Changelog, Dependencies, How to work here, Archive and the area pages.
pub fn pages_of_interest(bundle: &EvidenceBundle) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = [
        HOME.to_owned(),
        CHANGELOG.to_owned(),
        DEPENDENCIES.to_owned(),
        HOW_TO_WORK.to_owned(),
        ARCHIVE_INDEX.to_owned(),
    ]
    .into();
    for pull in &bundle.pull_requests {
        out.extend(by_area(pull).keys().map(|slug| area_page(slug)));
    }
    out
}

/// The quarters whose pages a plan for `bundle` reads, by page family
/// (a current page's name): the quarter of each pull request's merge date,
/// for the Changelog and each area it touches (so an entry is found wherever
/// it went, and new ones go after the newest part).
pub fn quarters_of_interest(bundle: &EvidenceBundle) -> BTreeSet<(String, Period)> {
    let mut wanted = BTreeSet::new();
    for pull in &bundle.pull_requests {
        let period = Period::of(&pull.merged_at);
        wanted.insert((page_name(CHANGELOG).to_owned(), period));
        for slug in by_area(pull).keys() {
            wanted.insert((area_base(slug), period));
        }
    }
    wanted
}

/// The quarter pages among `existing` (a complete listing) a plan for
/// `bundle` reads: every part of each of [`quarters_of_interest`].
pub fn archives_of_interest(
    bundle: &EvidenceBundle,
    existing: &BTreeSet<String>,
) -> BTreeSet<String> {
    let wanted = quarters_of_interest(bundle);
    existing
        .iter()
        .filter(|path| {
            archive_base(path).is_some_and(|base| {
                parse_archive(base, path)
                    .is_some_and(|(period, _)| wanted.contains(&(base.to_owned(), period)))
            })
        })
        .cloned()
        .collect()
}

pub fn new_changelog(archives: &str, entries: &str) -> String {
    format!(
        "# Changelog\n\nMerged pull requests, newest first (kept by teammem).\n\n{archives}\n{CHANGELOG_ANCHOR}{entries}"
    )
}

fn new_area_page(
    area: &str,
    label: &str,
    section: Option<&str>,
    who: &str,
    archives: &str,
    entries: &str,
) -> String {
    let what = section
        .map(|s| format!("{WHAT_IS_HERE_HEADING}{s}\n"))
        .unwrap_or_default();
    format!(
        "# Area: {label}\n\nPull requests that changed {} (kept by teammem).\n\n{what}{WHO_KNOWS_HEADING}{who}\n## Recent changes\n\n{archives}\n{RECENT_ANCHOR}{entries}",
        area_title(area)
    )
}

/// The receipt's note for a kept section a person changed: its anchors or
/// lines are not teammem's any more, so the section is left as it is.
pub(super) fn edited_note(section: &str, page: &str) -> String {
    format!(
        "the {section} section of {page} (its teammem markers were edited; restore them, or delete the whole section to have it rebuilt)"
    )
}

/// Counts the non-overlapping occurrences of `needle` in `haystack`.
pub(super) fn occurrences(haystack: &str, needle: &str) -> usize {
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
        append_replacement(page, &fallback(block))
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
    use crate::runner::builtin::budget::PAGE_BUDGET;
    use crate::runner::builtin::markers::entry_marker;
    use crate::runner::builtin::samples::*;

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
            vec![
                "Changelog-2026-Q4.md",
                CHANGELOG,
                "Area-docs-2026-Q4.md",
                "Area-docs.md",
                "Area-root-2026-Q4.md",
                "Area-root.md",
                "Area-src-2026-Q4.md",
                "Area-src.md",
                ARCHIVE_INDEX,
            ]
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
        assert!(pages["Area-src.md"].contains("## Recent changes"));
        assert!(pages["Area-src.md"].contains("src/search.rs"));
        assert!(!pages["Area-src.md"].contains("#13"));
        let home = &pages[HOME];
        assert!(home.starts_with("# Welcome\n"));
        // One order: Changelog, Archive, then the areas by slug.
        assert!(
            home.ends_with(
                "<!-- teammem:topics -->\n- [Changelog](Changelog) <!-- teammem:changelog-link -->\n- [Archive](Archive) <!-- teammem:archive-link -->\n- [docs](Area-docs) <!-- teammem:area:docs -->\n- [root](Area-root) <!-- teammem:area:root -->\n- [src](Area-src) <!-- teammem:area:src -->\n"
            ),
            "{home}"
        );
        // Every entry is on its quarter page too, which the pages link.
        assert!(pages["Changelog-2026-Q4.md"].contains(&entry_marker(&"b".repeat(40))));
        assert!(changelog.contains("[2026 Q4](Changelog-2026-Q4) <!-- teammem:archives -->"));
        assert!(pages["Area-src-2026-Q4.md"].contains("#12 Faster search"));
        assert!(pages[ARCHIVE_INDEX].contains(
            "- [Changelog, 2026 Q4](Changelog-2026-Q4) <!-- teammem:archive:Changelog-2026-Q4 -->"
        ));
        assert_eq!(plan.pulls.len(), 2);
        assert!(plan.pulls.iter().all(|p| !p.already_recorded));
        assert_eq!(
            plan.pulls[0].pages,
            vec![CHANGELOG, "Area-root.md", "Area-src.md"]
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
        assert_eq!(
            keys,
            vec![
                "Area-src-2026-Q4.md",
                "Area-src.md",
                "Changelog-2026-Q4.md",
                CHANGELOG,
            ]
        );
        // The changelog and the quarter pages get their entries; the area
        // page its entries and its author count (Zoë again), each at an
        // exact anchor.
        for (path, patch) in &p.patches {
            let want = if path == "Area-src.md" { 2 } else { 1 };
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
    fn a_range_without_pull_requests_plans_nothing() {
        assert!(plan(&bundle(vec![]), &home()).is_empty());
    }

    #[test]
    fn pages_of_interest_name_every_touched_area() {
        let b = bundle(vec![pull(1, "A", 'a', &["x/y", "z"])]);
        let set: Vec<String> = pages_of_interest(&b).into_iter().collect();
        assert_eq!(
            set,
            vec![
                "Archive.md",
                "Area-root.md",
                "Area-x.md",
                CHANGELOG,
                DEPENDENCIES,
                HOME,
                HOW_TO_WORK
            ]
        );
    }

    #[test]
    fn the_areas_to_record_are_the_area_pages_the_plan_touches() {
        let slugs = |names: &[&str]| -> BTreeSet<String> {
            names.iter().map(|n| (*n).to_owned()).collect()
        };
        let first = bundle(vec![
            pull(12, "One", 'a', &["src/a.rs", "README.md"]),
            pull(13, "Two", 'b', &["docs/x.md", "Docs/y.md"]),
        ]);
        let planned = plan(&first, &home());
        assert_eq!(areas_to_record(&first, &home()), planned.area_slugs());
        assert_eq!(
            areas_to_record(&first, &home()),
            slugs(&["docs", "root", "src"])
        );
        let pages = as_current(apply(&home(), &planned));
        assert!(areas_to_record(&first, &pages).is_empty());
        let second = bundle(vec![
            pull(12, "One", 'a', &["src/a.rs", "README.md"]),
            pull(14, "Three", 'c', &["src/b.rs"]),
        ]);
        assert_eq!(areas_to_record(&second, &pages), slugs(&["src"]));
        assert_eq!(
            areas_to_record(&second, &pages),
            plan(&second, &pages).area_slugs()
        );
    }

    /// A pull request `n` merged on `date` touching `paths`, with a long
    /// title (entries of a few hundred bytes, as on real pages).
    fn dated(n: u64, date: &str, paths: &[&str]) -> PullRequest {
        let mut p = pull(
            n,
            &format!("Change number {n} of a long history, with a title as long as real ones are"),
            'a',
            paths,
        );
        p.merge_sha = format!("{n:040x}");
        p.merged_at = format!("{date}T10:00:00Z");
        p
    }

    #[test]
    fn a_long_history_keeps_every_entry_on_one_quarter_page_and_each_job_small() {
        // 1,200 pull requests over nine months, 4 per job, all in one area:
        // the current pages fill up, the quarter pages take everything.
        let mut pages = as_current(apply(&home(), &Plan::default()));
        let mut all = Vec::new();
        for job in 0..300u64 {
            let pulls: Vec<PullRequest> = (0..4)
                .map(|i| {
                    let n = job * 4 + i + 1;
                    let month = (n * 9 / 1200) % 12 + 1;
                    let year = 2024 + n * 9 / 1200 / 12;
                    dated(n, &format!("{year}-{month:02}-15"), &["src/lib.rs"])
                })
                .collect();
            all.extend(pulls.clone());
            let p = plan(&bundle(pulls), &pages);
            let after = apply(&pages, &p);
            // The job costs what it adds (each entry twice, on the current
            // and the quarter page) plus what it drops, never a page's size.
            let cost: u64 = after
                .iter()
                .map(|(path, text)| {
                    crate::wiki::confine::changed_bytes(
                        pages.get(path).map(|p| p.content.as_bytes()),
                        text.as_bytes(),
                    )
                })
                .sum();
            assert!(cost < 16 * 1024, "job {job} changes {cost} bytes");
            for (path, text) in &after {
                assert!(text.len() <= PAGE_BUDGET, "{path}: {}", text.len());
            }
            pages = as_current(after);
        }
        // Every pull request is on exactly one Changelog quarter page and one
        // of the area's, the one of its merge date, and each quarter page is
        // linked from the archive index (the Changelog's) or the area page.
        let index = &pages[ARCHIVE_INDEX].content;
        let area = &pages["Area-src.md"].content;
        for p in &all {
            let marker = entry_marker(&p.merge_sha);
            let period = Period::of(&p.merged_at);
            for (base, linked_from) in [("Changelog", index), ("Area-src", area)] {
                let holding: Vec<&String> = pages
                    .iter()
                    .filter(|(path, page)| {
                        parse_archive(base, path).is_some() && page.content.contains(&marker)
                    })
                    .map(|(path, _)| path)
                    .collect();
                assert_eq!(holding.len(), 1, "#{} on {holding:?}", p.number);
                assert_eq!(parse_archive(base, holding[0]).unwrap().0, period);
                assert!(
                    linked_from.contains(&format!("({})", page_name(holding[0]))),
                    "{} is not linked",
                    holding[0]
                );
            }
        }
        // Busy quarters were split into parts; the current pages hold the newest.
        assert!(
            pages.keys().any(|k| k.ends_with("-2.md")),
            "{:?}",
            pages.keys()
        );
        assert!(
            pages[CHANGELOG]
                .content
                .contains(&entry_marker(&format!("{:040x}", 1200)))
        );
        assert!(!pages[CHANGELOG].content.contains(TRIMMED_NOTE_MARKER));
        // Home reaches them: Home → Archive → quarter page.
        assert!(
            pages[HOME]
                .content
                .contains("- [Archive](Archive) <!-- teammem:archive-link -->")
        );
        // Replaying an old job finds its entries on their quarter pages.
        let old = bundle(all[..4].to_vec());
        assert!(plan(&old, &pages).is_empty());
        assert!(areas_to_record(&old, &pages).is_empty());
    }

    const TRIMMED_NOTE_MARKER: &str = "<!-- teammem:trimmed -->";

    #[test]
    fn a_changelog_from_before_quarter_pages_keeps_its_old_entries_marked() {
        let mut pages = home();
        let old_entry =
            crate::runner::builtin::entries::changelog_entry(&dated(1, "2025-01-02", &[]));
        pages.insert(
            CHANGELOG.into(),
            CurrentPage {
                sha: "c".repeat(40),
                content: format!("# Changelog\n\n{CHANGELOG_ANCHOR}{old_entry}"),
            },
        );
        let p = plan(&bundle(vec![dated(2, "2026-01-02", &["a.txt"])]), &pages);
        let after = apply(&pages, &p);
        let log = &after[CHANGELOG];
        let archives = log.find(ARCHIVES_MARKER).unwrap();
        let new = log.find("#2 ").unwrap();
        let before = log.find(BEFORE_ARCHIVES_MARKER).unwrap();
        let old = log.find("#1 ").unwrap();
        assert!(archives < new && new < before && before < old, "{log}");
        assert!(
            plan(
                &bundle(vec![dated(2, "2026-01-02", &["a.txt"])]),
                &as_current(after)
            )
            .is_empty()
        );
    }

    #[test]
    fn home_lists_topics_in_one_order_and_moves_a_removed_area() {
        let mut pages = home();
        // A Home from before: links in the order they came, to Areas/ pages.
        pages.get_mut(HOME).unwrap().content = "# Welcome\n\n## Topics\n\n<!-- teammem:topics -->\n- [web](Areas/web) <!-- teammem:area:web -->\n- [Changelog](Changelog) <!-- teammem:changelog-link -->\n- [Team](Team) <!-- teammem:team -->\n\nA person's words.\n".into();
        let b = bundle(vec![pull(
            1,
            "CI",
            'a',
            &[".github/workflows/ci.yml", "old/x.py"],
        )]);
        let mut listings = Listings::new();
        listings.insert(
            "github".into(),
            listing(&[(".github/workflows/ci.yml", None)]),
        );
        listings.insert("old".into(), listing(&[]));
        let mut b = b;
        b.pull_requests[0].files[1].status = FileStatus::Removed;
        let p = plan_with(&b, &pages, &listings);
        let after = apply(&pages, &p);
        let home = &after[HOME];
        assert!(
            home.contains("<!-- teammem:topics -->\n- [Changelog](Changelog) <!-- teammem:changelog-link -->\n- [Archive](Archive) <!-- teammem:archive-link -->\n- [.github](Area-github) <!-- teammem:area:github -->\n- [web](Area-web) <!-- teammem:area:web -->\n- [Team](Team) <!-- teammem:team -->\n\nA person's words.\n"),
            "{home}"
        );
        assert!(
            home.ends_with("## Removed areas\n\n<!-- teammem:removed-areas -->\n- [old](Area-old) <!-- teammem:removed:old -->\n"),
            "{home}"
        );
        // Home is protected: every line the patch adds is teammem's own.
        let engine: Vec<crate::wiki::patch::Replacement> = p.patches[HOME]
            .replacements
            .iter()
            .map(|r| crate::wiki::patch::Replacement {
                old: r.old.clone(),
                new: r.new.clone(),
            })
            .collect();
        let original = &pages[HOME].content;
        assert_eq!(
            crate::wiki::confine::first_unmarked_replacement(original, &engine),
            None
        );
        assert_eq!(
            crate::wiki::confine::first_unowned_line(original, &engine, true),
            None
        );
        // The removed area's page says when and by which pull request.
        let old = &after["Area-old.md"];
        assert!(
            old.contains(&format!("Removed: no files under `old/` at commit `{}`. It was removed by #1 (merge commit `{}`).", tip(), "a".repeat(40))),
            "{old}"
        );
        assert!(after["Area-github.md"].starts_with("# Area: .github\n"));
        // The folder comes back: the area returns to the topics.
        let current = as_current(after);
        let mut back = bundle(vec![pull(2, "Back", 'b', &["old/y.py"])]);
        back.pull_requests[0].files[0].status = FileStatus::Added;
        let listings: Listings = [("old".to_owned(), listing(&[("old/y.py", None)]))].into();
        let home = apply(&current, &plan_with(&back, &current, &listings))[HOME].clone();
        assert!(
            home.contains("- [old](Area-old) <!-- teammem:area:old -->"),
            "{home}"
        );
        assert!(home.ends_with("<!-- teammem:removed-areas -->\n"), "{home}");
    }

    #[test]
    fn a_deleted_file_leaves_what_is_here_without_a_listing() {
        let listings: Listings = [(
            "src".to_owned(),
            listing(&[("src/a.rs", None), ("src/b.rs", Some(("B.", 1)))]),
        )]
        .into();
        let first = bundle(vec![pull(1, "A", 'a', &["src/a.rs"])]);
        let pages = as_current(apply(&home(), &plan_with(&first, &home(), &listings)));
        assert!(
            pages["Area-src.md"]
                .content
                .contains("- src/a.rs <!-- teammem:file -->")
        );
        let mut gone = bundle(vec![pull(2, "Drop a", 'b', &["src/a.rs"])]);
        gone.pull_requests[0].files[0].status = FileStatus::Removed;
        let after = apply(&pages, &plan(&gone, &pages));
        assert!(
            !after["Area-src.md"].contains("- src/a.rs "),
            "{}",
            after["Area-src.md"]
        );
        assert!(after["Area-src.md"].contains("- src/b.rs — B."));
    }

    #[test]
    fn a_job_of_many_entries_puts_only_its_newest_on_the_current_pages() {
        let pulls: Vec<PullRequest> = (1..=200)
            .map(|n| dated(n, "2026-02-01", &["src/a.rs"]))
            .collect();
        let after = apply(&home(), &plan(&bundle(pulls.clone()), &home()));
        for (page, base) in [(CHANGELOG, "Changelog"), ("Area-src.md", "Area-src")] {
            let shown = entry_lines(&after[page]);
            let bytes: usize = shown.iter().map(|r| r.len()).sum();
            assert!(bytes <= CURRENT_ENTRIES_PER_JOB, "{page}: {bytes}");
            assert!(after[page].contains(&entry_marker(&pulls[199].merge_sha)));
            assert!(!after[page].contains(&entry_marker(&pulls[0].merge_sha)));
            for p in &pulls {
                let on = after
                    .iter()
                    .filter(|(path, text)| {
                        parse_archive(base, path).is_some()
                            && text.contains(&entry_marker(&p.merge_sha))
                    })
                    .count();
                assert_eq!(on, 1, "#{} on {page}'s quarter pages", p.number);
            }
        }
    }
}
