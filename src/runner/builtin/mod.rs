//! The builtin agent: deterministic, no model. For each job it reads the
//! wiki and the source through the job's writer child, plans the edits that
//! keep `Home.md` (topic index), `Area-<slug>.md` (one page per area
//! touched: "What is here", "Who knows this area", "Recent changes"),
//! `Changelog.md`, the quarter pages of both and their index `Archive.md`,
//! `Dependencies.md` and `How-to-work-here.md` in step with the merged pull requests, and writes
//! them through the writer child.
//!
//! The wing, one idea per file (reading order):
//! - `markers.rs`: page names, anchors and the teammem markers lines end with;
//! - `inputs.rs`: what the planner is given (current pages, area files,
//!   dependency facts);
//! - `areas.rs`: what an area is, its slug and page, grouping paths by area;
//! - `markdown.rs`: escaping untrusted text;
//! - `entries.rs`: one pull request's entry line;
//! - `sections.rs`: the kept sections ("What is here", "Who knows this
//!   area") and the one section finder;
//! - `budget.rs`: the 64 KiB page budget: current pages drop their oldest
//!   entries, which their quarter pages hold;
//! - `archive.rs`: quarter pages (`Changelog-2026-Q3.md`, …), where every
//!   entry stays;
//! - `dependencies.rs`: `Dependencies.md` and dependency notes;
//! - `how_to_facts.rs`, `how_to_sources.rs`, `how_to_ci.rs`,
//!   `how_to_package.rs`, `how_to_files.rs`, `how_to_work.rs`: what the
//!   repository's own files say about building, testing, linting and
//!   running it (the facts and topics, which files are read, the readers),
//!   and `How-to-work-here.md`;
//! - `home.rs`: `Home.md` (topics, "For coding agents", removed areas);
//! - `plan.rs`: what a plan is (new pages, patches, what each pull request
//!   gets), below every page family;
//! - `planner.rs`: the plan's entry points, which call one function per
//!   page family: `changelog.rs` (`Changelog.md`), `area_pages.rs`
//!   (`Area-<slug>.md`), `archive_index.rs` (`Archive.md`), and the
//!   dependencies, how-to and home files above;
//! - `recorded.rs`: which entries each page family already carries;
//! - `page_family.rs`: new entries placed on a current page and its quarter
//!   pages;
//! - `edits.rs`: the edits a plan makes to an existing page (at an anchor
//!   found once, or appended);
//! - `interest.rs`: the pages and areas a plan reads before it plans;
//! - `read.rs`, `read_manifests.rs`, `read_how_to.rs`: what the driver reads
//!   through the writer;
//! - `driver.rs`: the run (read, plan, write, rebuild once on conflict,
//!   receipt).
//!
//! Invariant kept across the wing: the planner is pure (same bundle, pages
//! and reads, same plan), and the builtin agent never writes the wiki
//! except through the writer child's tools; each file states the invariants
//! of its own part.

mod archive;
mod archive_index;
mod area_pages;
mod areas;
mod budget;
mod changelog;
mod dependencies;
mod driver;
mod edits;
mod entries;
mod home;
mod how_to_ci;
mod how_to_facts;
mod how_to_files;
mod how_to_package;
mod how_to_sources;
mod how_to_work;
mod inputs;
mod interest;
mod markdown;
mod markers;
mod page_family;
mod plan;
mod planner;
mod read;
mod read_how_to;
mod read_manifests;
mod recorded;
#[cfg(test)]
pub(super) mod samples;
mod sections;

pub use archive::{Period, archive_page};
pub use areas::{ROOT_AREA, area_label, area_of, area_page, area_slug};
pub use budget::PAGE_BUDGET;
pub use dependencies::{
    CHANGES_PER_ENTRY, DEPENDENCIES_BYTES, MAX_MANIFESTS, dependencies_section, dependency_note,
};
pub use driver::run;
pub use entries::{area_entry, area_entry_with, changelog_entry, changelog_entry_with};
pub use how_to_work::HOW_TO_BYTES;
pub use inputs::{AreaFile, AreaFiles, CurrentPage, DependencyFacts, Listings, TipManifests};
pub use interest::{
    archives_of_interest, areas_to_record, pages_of_interest, quarters_of_interest,
};
pub use markdown::{escape_markdown, escape_purpose};
pub use markers::{
    ARCHIVE_INDEX, AREA_PREFIX, CHANGELOG, CHANGELOG_ANCHOR, DEPENDENCIES, DEPENDENCIES_ANCHOR,
    DEPENDENCIES_END, HOME, HOW_TO_ANCHOR, HOW_TO_END, HOW_TO_TOPIC_MARKER, HOW_TO_WORK,
    RECENT_ANCHOR, TOPICS_ANCHOR, WHAT_IS_HERE_ANCHOR, WHAT_IS_HERE_END, WHO_KNOWS_ANCHOR,
    WHO_KNOWS_END, entry_marker,
};
pub use plan::{NewPage, Plan, PlannedPatch, PullPlan, Replacement};
pub use planner::{apply, plan, plan_full, plan_with};
pub use read::HEADS_PER_JOB;
pub use read_manifests::CHANGE_READS_PER_JOB;
pub use sections::{
    JOB_SECTION_BYTES, Section, WHAT_IS_HERE_BYTES, WHAT_IS_HERE_FILES, WHO_KNOWS_AUTHORS,
    refresh_order, section_span, what_is_here, who_knows,
};
