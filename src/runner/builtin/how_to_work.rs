//! `How-to-work-here.md`: how to set up, build, test, lint and run the
//! project, as the repository's own files say at the job's tip
//! ([`super::how_to_sources`]), one line per fact under its topic, each
//! citing the lines it was read from; and, in the page's header, what a
//! coding agent does with the wiki (call `get_context`, trust facts by
//! `as_of` and status).
//!
//! Invariants: the section is re-derived whole between its two anchors, and
//! only when the agent read the tip's files; every line of it carries a
//! teammem marker and every fact line an evidence marker citing its lines at
//! the tip, so the runner marks it stale when those lines change; a section
//! a person edited is left alone; the section holds at most
//! [`HOW_TO_BYTES`] and says how much it left out; commands stay code spans
//! and every other text from the repository is escaped like any untrusted
//! text.

use std::collections::{BTreeMap, BTreeSet};

use super::how_to_sources::{HowToFact, Kind, Topic, kind_of};
use super::inputs::CurrentPage;
use super::markdown::{code_or_text, escape_purpose};
use super::markers::{HOW_TO_ANCHOR, HOW_TO_END, HOW_TO_TOPIC_MARKER, HOW_TO_WORK};
use super::plan::{NewPage, PagePatch, Plan, Replacement};
use super::sections::{SECTION_FRAME, Section, span_between};
use crate::facts::Marker;
use crate::ids::Sha;

/// The section holds at most this many bytes.
pub const HOW_TO_BYTES: usize = 16 * 1024;

/// What the agent read at the job's tip for the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HowTo {
    pub commit: Sha,
    /// Every fact of every file read, in any order.
    pub facts: Vec<HowToFact>,
    /// The files read, sorted.
    pub files: Vec<String>,
    /// Files found but not read (past the per-job bound).
    pub omitted: usize,
}

/// The page's header, written once with the page (a person may change it).
const HEADER: &str = "# How to work here\n\nHow to set up, build, test, lint and run this project, as its own files say: CI workflows, task runners, package scripts and the contributing guide (kept by teammem). Each line cites the lines it was read from; when they change, the line is marked stale until teammem reads them again.\n\n## For coding agents\n\nBefore you change files, call the MCP tool `get_context` with the paths you are about to change: it answers with what each file is for, the facts that cite it, the pull requests that touched it, who knows its area and the commands below. Trust each fact by its `as_of` and its status: the lines a `stale` fact cites changed after it was written, so check the code before you rely on it.\n\n## Commands\n\n";

/// A fact's place on the page: its topic, then where it comes from (CI
/// first: it is what really runs), then its file and line.
fn order(fact: &HowToFact) -> (Topic, Option<Kind>, String, u32) {
    (
        fact.topic,
        kind_of(&fact.path),
        fact.path.clone(),
        fact.lines.start(),
    )
}

/// A fact's line.
fn fact_line(fact: &HowToFact, commit: &Sha) -> String {
    let mut text = String::from("- ");
    if let Some(command) = &fact.command {
        text.push_str(&code_or_text(command));
        text.push_str(" — ");
    }
    text.push_str(&escape_purpose(&fact.what));
    let runs: Vec<String> = fact
        .runs
        .iter()
        .filter(|r| Some(*r) != fact.command.as_ref())
        .map(|r| code_or_text(r))
        .collect();
    if !runs.is_empty() {
        text.push_str(" — runs ");
        text.push_str(&runs.join(", then "));
    }
    if fact.more > 0 {
        text.push_str(&format!(" and {} more lines", fact.more));
    }
    format!(
        "{text} {}\n",
        Marker::source(&fact.path, commit.clone(), fact.lines)
    )
}

/// The page's section: a summary line ending with [`HOW_TO_ANCHOR`], per
/// topic a heading and its facts (a command stated twice once) while they fit
/// in `cap` bytes, and [`HOW_TO_END`]. Every line carries a teammem marker.
pub fn how_to_section(how: &HowTo, cap: usize) -> String {
    let mut facts: Vec<&HowToFact> = how.facts.iter().collect();
    facts.sort_by_key(|f| order(f));
    let mut seen: BTreeSet<(Topic, Option<&str>, &[String])> = BTreeSet::new();
    let mut by_topic: BTreeMap<Topic, Vec<String>> = BTreeMap::new();
    for fact in facts {
        if fact.command.is_some() && !seen.insert((fact.topic, fact.command.as_deref(), &fact.runs))
        {
            continue;
        }
        by_topic
            .entry(fact.topic)
            .or_default()
            .push(fact_line(fact, &how.commit));
    }
    let mut body = String::new();
    let mut left_out = 0;
    for (topic, lines) in &by_topic {
        let heading = format!("### {} {HOW_TO_TOPIC_MARKER}\n", topic.heading());
        if SECTION_FRAME + body.len() + heading.len() > cap {
            left_out += lines.len();
            continue;
        }
        let mut part = heading;
        let mut kept = 0;
        for line in lines {
            if SECTION_FRAME + body.len() + part.len() + line.len() > cap {
                left_out += 1;
                continue;
            }
            part.push_str(line);
            kept += 1;
        }
        if kept > 0 {
            body.push_str(&part);
        }
    }
    let files: Vec<String> = how.files.iter().map(|f| code_or_text(f)).collect();
    let mut summary = if by_topic.is_empty() {
        format!(
            "No commands found at commit `{}` in a CI workflow (.github/workflows/), Makefile, justfile, package.json, tox.ini, noxfile.py, pyproject.toml, Cargo.toml or CONTRIBUTING.md (kept by teammem).",
            how.commit
        )
    } else {
        format!(
            "As the repository's files say at commit `{}`: {} (kept by teammem).",
            how.commit,
            files.join(", ")
        )
    };
    if how.omitted > 0 {
        summary.push_str(&format!(
            " {} more files are not read (at most {} are).",
            how.omitted,
            super::read_how_to::MAX_HOW_TO_FILES
        ));
    }
    if left_out > 0 {
        summary.push_str(&format!(
            " {left_out} more lines are not listed (the list holds at most {} KiB).",
            cap / 1024
        ));
    }
    format!("{summary} {HOW_TO_ANCHOR}\n{body}{HOW_TO_END}\n")
}

/// Plans `How-to-work-here.md` from `how` (written whole when new, its
/// section swapped when intact and different, appended when missing, left
/// alone when a person edited it); true when the page exists or will.
pub fn plan_how_to(
    out: &mut Plan,
    pages: &BTreeMap<String, CurrentPage>,
    how: Option<&HowTo>,
) -> bool {
    let current = pages.get(HOW_TO_WORK);
    let Some(how) = how else {
        return current.is_some();
    };
    let section = how_to_section(how, HOW_TO_BYTES);
    let Some(page) = current else {
        out.writes.push(NewPage {
            path: HOW_TO_WORK.into(),
            content: format!("{HEADER}{section}"),
        });
        return true;
    };
    let replacement = match span_between(&page.content, HOW_TO_ANCHOR, HOW_TO_END) {
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
            HOW_TO_WORK.into(),
            PagePatch {
                expected_sha: page.sha.clone(),
                replacements: vec![r],
            },
        );
    }
    true
}
