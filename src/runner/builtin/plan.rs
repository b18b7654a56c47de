//! The builtin agent's plan: from an evidence bundle, the current pages and
//! what the agent read, the edits of one run, deterministic, no network,
//! pure: `Changelog.md`, `Areas/<area>.md` (one page per area touched, with
//! its "What is here", "Who knows this area" and "Recent changes"),
//! `Dependencies.md` and `Home.md` (the topic index), each planned by its
//! own function.
//!
//! Invariants:
//! - every entry cites the PR number, title, author and the full merge-commit
//!   SHA, and ends with the marker `<!-- teammem:<sha> -->`; an entry whose
//!   marker is already on a page is never written again, so replaying a range
//!   plans nothing (and `Dependencies.md` changes only with new entries);
//! - existing pages are only patched at exact anchors (insert after a marker
//!   line, swap a kept section, or append at the end); new pages are written
//!   whole; every planned page fits [`super::budget::PAGE_BUDGET`].

use std::collections::{BTreeMap, BTreeSet};

use super::areas::{ByArea, area_page, area_title, by_area};
use super::budget::{apply_replacements, trim_new_page, trim_patch};
use super::dependencies::{dependency_note, plan_dependencies};
use super::entries::{area_entry_with, changelog_entry_with};
use super::inputs::{CurrentPage, DependencyFacts, Listings};
use super::markdown::escape_markdown;
use super::markers::{
    AREAS_DIR, CHANGELOG, CHANGELOG_ANCHOR, CHANGELOG_LINK_MARKER, DEPENDENCIES,
    DEPENDENCIES_LINK_MARKER, HOME, RECENT_ANCHOR, TOPICS_ANCHOR, area_link_marker, entry_marker,
};
use super::sections::{
    JOB_SECTION_BYTES, Section, WHAT_IS_HERE_BYTES, WHAT_IS_HERE_HEADING, WHO_KNOWS_HEADING,
    section_span, what_is_here, who_knows_after, who_knows_span,
};
use crate::forge::evidence::{EvidenceBundle, PullRequest};

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

/// Replacements in one existing page (`patch_wiki_pages`).
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Whether the page at `path` already carries the entry of merge commit `sha`.
fn recorded(pages: &BTreeMap<String, CurrentPage>, path: &str, sha: &str) -> bool {
    pages
        .get(path)
        .is_some_and(|p| p.content.contains(&entry_marker(sha)))
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
    let grouped: Vec<(&PullRequest, ByArea<'_>)> = bundle
        .pull_requests
        .iter()
        .map(|pull| (pull, by_area(pull)))
        .collect();
    let mut out = Plan {
        pulls: pull_plans(&grouped, pages),
        ..Plan::default()
    };
    plan_changelog(&mut out, &grouped, pages, deps);
    let areas = area_entries(&grouped, pages, deps);
    plan_area_pages(&mut out, &areas, pages, listings);
    // Dependencies.md changes only with new entries: a job that records
    // nothing (a replay) changes nothing.
    let dependencies_page = if out.is_empty() {
        pages.contains_key(DEPENDENCIES)
    } else {
        plan_dependencies(&mut out, pages, deps)
    };
    plan_home(
        &mut out,
        !bundle.pull_requests.is_empty(),
        pages,
        areas.keys(),
        dependencies_page,
    );
    out
}

/// The slugs of the areas whose pages a plan for `bundle` against `pages`
/// writes or patches: those of a pull request's paths whose page does not
/// carry its entry yet. (The driver reads these areas' files before it
/// plans.)
pub fn areas_to_record(
    bundle: &EvidenceBundle,
    pages: &BTreeMap<String, CurrentPage>,
) -> BTreeSet<String> {
    bundle
        .pull_requests
        .iter()
        .flat_map(|pull| {
            by_area(pull)
                .into_keys()
                .filter(|slug| !recorded(pages, &area_page(slug), &pull.merge_sha))
        })
        .collect()
}

/// What the plan does for each pull request, in merge order: the pages that
/// carry its entry, and whether all of them already do.
fn pull_plans(
    grouped: &[(&PullRequest, ByArea<'_>)],
    pages: &BTreeMap<String, CurrentPage>,
) -> Vec<PullPlan> {
    grouped
        .iter()
        .map(|(pull, areas)| {
            let mut touched = vec![CHANGELOG.to_owned()];
            let mut all_recorded = recorded(pages, CHANGELOG, &pull.merge_sha);
            for slug in areas.keys() {
                let page = area_page(slug);
                all_recorded &= recorded(pages, &page, &pull.merge_sha);
                touched.push(page);
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

/// `Changelog.md`: the entries it lacks, newest first, after its anchor (or
/// a new page).
fn plan_changelog(
    out: &mut Plan,
    grouped: &[(&PullRequest, ByArea<'_>)],
    pages: &BTreeMap<String, CurrentPage>,
    deps: &DependencyFacts,
) {
    // Newest first on every page: walk the PRs in reverse merge order.
    let mut changelog = String::new();
    for (pull, _) in grouped.iter().rev() {
        if !recorded(pages, CHANGELOG, &pull.merge_sha) {
            changelog.push_str(&changelog_entry_with(
                pull,
                &dependency_note(deps, pull, None),
            ));
        }
    }
    if changelog.is_empty() {
        return;
    }
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

/// What one area gets from a plan.
#[derive(Default)]
struct AreaEntries {
    /// The area as first seen (newest first).
    area: String,
    /// The entries its page lacks, newest first (empty: the page is left as
    /// it is).
    entries: String,
    /// The authors of those entries, with counts.
    authors: BTreeMap<String, u64>,
}

/// Every area the pull requests touch (slug → its entries), including areas
/// whose page already carries every entry.
fn area_entries(
    grouped: &[(&PullRequest, ByArea<'_>)],
    pages: &BTreeMap<String, CurrentPage>,
    deps: &DependencyFacts,
) -> BTreeMap<String, AreaEntries> {
    let mut areas: BTreeMap<String, AreaEntries> = BTreeMap::new();
    for (pull, by_area) in grouped.iter().rev() {
        for (slug, (area, paths)) in by_area {
            let slot = areas.entry(slug.clone()).or_insert_with(|| AreaEntries {
                area: area.clone(),
                ..AreaEntries::default()
            });
            if recorded(pages, &area_page(slug), &pull.merge_sha) {
                continue;
            }
            *slot.authors.entry(pull.author.clone()).or_insert(0) += 1;
            let note = dependency_note(deps, pull, Some(paths));
            slot.entries.push_str(&area_entry_with(pull, paths, &note));
        }
    }
    areas
}

/// The area pages that get entries: new pages written whole, existing ones
/// patched (entries after the recent-changes anchor, the kept sections
/// swapped, what is missing appended). The "What is here" sections come from
/// `listings` while the job's [`JOB_SECTION_BYTES`] last.
fn plan_area_pages(
    out: &mut Plan,
    areas: &BTreeMap<String, AreaEntries>,
    pages: &BTreeMap<String, CurrentPage>,
    listings: &Listings,
) {
    let mut section_room = JOB_SECTION_BYTES;
    for (slug, entries) in areas {
        if entries.entries.is_empty() {
            continue;
        }
        let path = area_page(slug);
        let current = pages.get(&path);
        let span = current.map_or(Section::Absent, |page| section_span(&page.content));
        // The section, when the agent derived it, the page's own is intact,
        // and the job's section budget has room for the swap.
        let section = match (listings.get(slug), &span) {
            (Some(files), Section::Absent | Section::At(_)) => {
                let text = what_is_here(&entries.area, files, WHAT_IS_HERE_BYTES);
                let cost = span.bytes() + text.len();
                (cost <= section_room).then(|| {
                    section_room -= cost;
                    text
                })
            }
            _ => None,
        };
        // Who knows: the counts the page keeps plus this plan's entries.
        let who_span = current.map_or(Section::Absent, |page| who_knows_span(&page.content));
        let who = who_knows_after(&who_span, current, &entries.authors);
        match current {
            None => out.writes.push(NewPage {
                content: trim_new_page(new_area_page(
                    &entries.area,
                    slug,
                    section.as_deref(),
                    who.as_deref().unwrap_or_default(),
                    &entries.entries,
                )),
                path,
            }),
            Some(page) => {
                let mut patch = PagePatch {
                    expected_sha: page.sha.clone(),
                    replacements: area_replacements(
                        page,
                        &entries.entries,
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
/// recent-changes anchor, and each kept section (new text, where the page
/// has it) swapped when it changed; what the page lacks is appended.
fn area_replacements(
    page: &CurrentPage,
    entries: &str,
    (section, span): (Option<String>, Section),
    (who, who_span): (Option<String>, Section),
) -> Vec<Replacement> {
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
    replacements
}

/// `Home.md`: a topic index linking the Changelog (once there are pull
/// requests), the Dependencies page (when it exists or will) and every area
/// page touched, each link added once.
fn plan_home<'a>(
    out: &mut Plan,
    any_pulls: bool,
    pages: &BTreeMap<String, CurrentPage>,
    slugs: impl Iterator<Item = &'a String>,
    dependencies_page: bool,
) {
    let mut links = String::new();
    let home = pages.get(HOME);
    let home_has = |marker: &str| home.is_some_and(|p| p.content.contains(marker));
    if any_pulls && !home_has(CHANGELOG_LINK_MARKER) {
        links.push_str(&changelog_link());
    }
    if dependencies_page && !home_has(DEPENDENCIES_LINK_MARKER) {
        links.push_str(&dependencies_link());
    }
    for slug in slugs {
        if !home_has(&area_link_marker(slug)) {
            links.push_str(&topic_line(slug));
        }
    }
    if links.is_empty() {
        return;
    }
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
        out.extend(by_area(pull).keys().map(|slug| area_page(slug)));
    }
    out
}

pub fn new_changelog(entries: &str) -> String {
    format!(
        "# Changelog\n\nMerged pull requests, newest first (kept by teammem).\n\n{CHANGELOG_ANCHOR}{entries}"
    )
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

fn dependencies_link() -> String {
    format!("- [Dependencies](Dependencies) {DEPENDENCIES_LINK_MARKER}\n")
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
    fn a_range_without_pull_requests_plans_nothing() {
        assert!(plan(&bundle(vec![]), &home()).is_empty());
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
}
