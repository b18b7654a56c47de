//! `Area-<slug>.md`: one page per area the pull requests touch, with its
//! "What is here" and "Who knows this area" sections (`super::sections`)
//! and its "Recent changes" entries, each also on the area's quarter page
//! (`super::page_family`); an area whose folder is gone at the tip says when
//! and by which pull request.
//!
//! Invariants:
//! - an area page changes only when it gets an entry it and its quarter
//!   pages lack, or when the range changed its files outside any pull
//!   request (then only its "What is here"); its kept sections are swapped
//!   whole, and only while intact (a section a person edited is left as it
//!   is, and the receipt says so);
//! - all the "What is here" sections of one job change at most
//!   [`JOB_SECTION_BYTES`], counted as the writer counts a change.

use std::collections::{BTreeMap, BTreeSet};

use super::archive::{ArchiveHeader, archives_line};
use super::areas::{ByArea, ROOT_AREA, area_base, area_label, area_page, area_title};
use super::budget::{trim_new_page, trim_patch};
use super::dependencies::dependency_note;
use super::edits::append_replacement;
use super::entries::area_entry_with;
use super::inputs::{AreaFiles, CurrentPage, DependencyFacts, Listings};
use super::markers::RECENT_ANCHOR;
use super::page_family::{NewEntries, entry_replacements, plan_archives};
use super::plan::{NewPage, Plan, PlannedPatch, Replacement};
use super::recorded::Recorded;
use super::sections::{
    JOB_SECTION_BYTES, Section, WHAT_IS_HERE_BYTES, WHAT_IS_HERE_HEADING, WHO_KNOWS_HEADING,
    edited_note, removed_section, section_span, what_is_here, who_knows_after, who_knows_span,
    without_removed_files,
};
use crate::forge::evidence::{EvidenceBundle, FileStatus, PullRequest};

/// What one area gets from a plan.
#[derive(Default)]
pub(super) struct AreaEntries {
    /// The area as first seen (newest first).
    pub(super) area: String,
    /// The entries its pages lack (empty: the page is left as it is).
    pub(super) entries: NewEntries,
    /// The authors of those entries, with counts.
    pub(super) authors: BTreeMap<String, u64>,
}

/// Every area the pull requests touch (slug → its entries), including areas
/// whose page already carries every entry.
pub(super) fn area_entries(
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
pub(super) fn is_gone(slug: &str, files: &AreaFiles) -> bool {
    slug != ROOT_AREA && files.files.is_empty() && files.omitted == 0 && !files.listing_cut
}

/// The paths the bundle's pull requests leave removed (a path removed and
/// added again later in the range is not).
pub(super) fn removed_paths(bundle: &EvidenceBundle) -> BTreeSet<String> {
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

/// The newest pull request of `grouped` (the job's, in merge order) that
/// removed a file of area `slug`.
fn removed_by<'a>(
    grouped: &[(&'a PullRequest, ByArea<'_>)],
    slug: &str,
) -> Option<&'a PullRequest> {
    grouped.iter().rev().find_map(|(pull, by_area)| {
        let (_, paths) = by_area.get(slug)?;
        pull.files
            .iter()
            .any(|f| {
                (f.status == FileStatus::Removed && paths.contains(&f.path.as_str()))
                    || f.previous_path
                        .as_deref()
                        .is_some_and(|old| paths.contains(&old))
            })
            .then_some(*pull)
    })
}

/// The area pages that get entries: new pages written whole, existing ones
/// patched (entries after the recent-changes anchor, the kept sections
/// swapped, what is missing appended), each entry also on its quarter page;
/// and the existing pages of the areas in `direct` (changed outside any pull
/// request), whose "What is here" alone is swapped when it changed.
/// The "What is here" sections come from `listings` while the job's
/// [`JOB_SECTION_BYTES`] last (counted as the writer counts a change);
/// without a listing, a section loses the lines of files the range removed.
pub(super) fn plan_area_pages(
    out: &mut Plan,
    areas: &BTreeMap<String, AreaEntries>,
    pages: &BTreeMap<String, CurrentPage>,
    listings: &Listings,
    (grouped, removed): (&[(&PullRequest, ByArea<'_>)], &BTreeSet<String>),
    direct: &BTreeMap<String, String>,
) {
    let mut section_room = JOB_SECTION_BYTES;
    for (slug, entries) in areas {
        let path = area_page(slug);
        let current = pages.get(&path);
        // An area without new entries changes only when the range changed
        // its files outside any pull request, and then only its section.
        let section_only = entries.entries.is_empty();
        if section_only && !(direct.contains_key(slug) && current.is_some()) {
            continue;
        }
        let span = current.map_or(Section::Absent, |page| section_span(&page.content));
        let old_section = match (&span, current) {
            (Section::At(range), Some(page)) => Some(&page.content[range.clone()]),
            _ => None,
        };
        // The section, when the agent derived it, the page's own is intact,
        // and the job's section budget has room for the swap.
        let derived = match (listings.get(slug), &span) {
            (Some(files), Section::Absent | Section::At(_)) => Some(if is_gone(slug, files) {
                let by = removed_by(grouped, slug).map(|p| (p.number.get(), p.merge_sha.as_str()));
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
        if section_only {
            if let (Some(page), Some(new), Some(old)) = (current, section, old_section)
                && new != old
            {
                out.patches.insert(
                    path,
                    PlannedPatch {
                        expected_sha: page.sha.clone(),
                        replacements: vec![Replacement {
                            old: old.to_owned(),
                            new,
                        }],
                    },
                );
            }
            continue;
        }
        let current_entries = entries.entries.current();
        let base = area_base(slug);
        let label = area_label(&entries.area, slug);
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

#[cfg(test)]
mod tests {
    use crate::forge::evidence::FileStatus;
    use crate::runner::builtin::inputs::Listings;
    use crate::runner::builtin::markers::entry_marker;
    use crate::runner::builtin::planner::{apply, plan, plan_with};
    use crate::runner::builtin::samples::*;

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
    fn a_file_changed_outside_any_pull_request_refreshes_only_its_areas_section() {
        let listings: Listings = [(
            "src".to_owned(),
            listing(&[("src/a.rs", None), ("src/b.rs", Some(("B.", 1)))]),
        )]
        .into();
        let first = bundle(vec![pull(1, "A", 'a', &["src/a.rs", "src/b.rs"])]);
        let pages = as_current(apply(&home(), &plan_with(&first, &home(), &listings)));
        // A direct push removed src/a.rs; no pull request is in the range.
        let mut direct = bundle(Vec::new());
        direct.direct_changes = vec!["src/a.rs".to_owned(), "elsewhere/x.rs".to_owned()];
        let now: Listings = [("src".to_owned(), listing(&[("src/b.rs", Some(("B.", 1)))]))].into();
        let planned = plan_with(&direct, &pages, &now);
        assert!(planned.writes.is_empty(), "no page is created");
        let touched: Vec<&String> = planned.patches.keys().collect();
        assert_eq!(touched, ["Area-src.md"], "only the existing area's page");
        assert_eq!(planned.patches["Area-src.md"].replacements.len(), 1);
        let after = apply(&pages, &planned);
        let page = &after["Area-src.md"];
        assert!(!page.contains("- src/a.rs "), "{page}");
        assert!(page.contains("- src/b.rs — B."), "{page}");
        // The recorded entry and the author count stay as they were.
        assert_eq!(page.matches(&entry_marker(&"a".repeat(40))).count(), 1);
        assert!(page.contains("— 1 pull request"), "{page}");
        // The same listing again: nothing to do.
        let again = as_current(after);
        assert!(plan_with(&direct, &again, &now).patches.is_empty());
    }
}
