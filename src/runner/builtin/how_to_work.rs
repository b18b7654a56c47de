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

use super::how_to_facts::{HowToFact, Topic};
use super::how_to_sources::{Kind, kind_of};
use super::inputs::CurrentPage;
use super::markdown::{code_or_text, escape_purpose};
use super::markers::{HOW_TO_ANCHOR, HOW_TO_END, HOW_TO_TOPIC_MARKER, HOW_TO_WORK};
use super::plan::{NewPage, Plan, PlannedPatch, Replacement};
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
            super::how_to_sources::MAX_HOW_TO_FILES
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
        Section::Edited => {
            out.notes
                .push(super::sections::edited_note("Commands", HOW_TO_WORK));
            None
        }
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
            PlannedPatch {
                expected_sha: page.sha.clone(),
                replacements: vec![r],
            },
        );
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::builtin::how_to_sources::read;
    use crate::runner::builtin::inputs::{DependencyFacts, Listings};
    use crate::runner::builtin::markers::HOME;
    use crate::runner::builtin::plan::engine_replacements;
    use crate::runner::builtin::planner::{apply, plan_all};
    use crate::runner::builtin::samples::*;

    fn how(files: &[(&str, &str)]) -> HowTo {
        HowTo {
            commit: tip(),
            facts: files.iter().flat_map(|(p, t)| read(p, t)).collect(),
            files: files.iter().map(|(p, _)| (*p).to_owned()).collect(),
            omitted: 0,
        }
    }

    #[test]
    fn the_page_cites_each_command_links_from_home_and_replays_to_nothing() {
        let ci = ".github/workflows/ci.yml";
        let facts = how(&[
            (
                ci,
                "jobs:\n  test:\n    steps:\n      - name: Tests\n        run: cargo test --locked\n      - name: Hostile <b>x</b> -->\n        run: echo '<!-- teammem:evidence x@y#L1 -->' && make lint\n",
            ),
            ("Makefile", "test:\n\tcargo test --locked\n"),
        ]);
        let b = bundle(vec![pull(1, "CI", 'a', &[ci])]);
        let p = plan_all(
            &b,
            &home(),
            &Listings::new(),
            &DependencyFacts::default(),
            Some(&facts),
        );
        let pages = apply(&home(), &p);
        let page = &pages[HOW_TO_WORK];
        assert!(page.starts_with("# How to work here\n"), "{page}");
        assert!(page.contains("call the MCP tool `get_context`"), "{page}");
        assert!(
            page.contains(&format!(
                "### Test {HOW_TO_TOPIC_MARKER}\n- `cargo test --locked` — CI: workflow ci.yml, job test, step “Tests” <!-- teammem:evidence {ci}@{}#L5 -->\n- `make test` — Makefile target — runs `cargo test --locked` <!-- teammem:evidence Makefile@{}#L1-L2 -->\n",
                tip(),
                tip()
            )),
            "{page}"
        );
        // Hostile text forges no marker and opens no HTML: the only markers
        // are teammem's, one evidence marker per fact line.
        assert!(!page.contains("<b>"), "{page}");
        assert_eq!(source_facts(page).len(), 3, "{page}");
        let (_, html) = rendered_items(page);
        assert!(
            html.iter().all(|h| h.starts_with("<!-- teammem:")),
            "{html:?}"
        );
        // Home links the page in its fixed place and says what agents do.
        let home_page = &pages[HOME];
        assert!(
            home_page.contains("- [Changelog](Changelog) <!-- teammem:changelog-link -->\n- [How to work here](How-to-work-here) <!-- teammem:how-to-work-link -->\n"),
            "{home_page}"
        );
        assert!(
            home_page.contains("## For coding agents\n\n<!-- teammem:coding-agents -->\n- [Before changing files call the MCP tool get_context with their paths](How-to-work-here)"),
            "{home_page}"
        );
        // Home is protected: every line the patch adds is teammem's own.
        let engine = engine_replacements(&p.patches[HOME].replacements);
        assert_eq!(
            crate::wiki::confine::first_unowned_line(&home()[HOME].content, &engine, true),
            None
        );
        // Replaying plans nothing.
        let current = as_current(pages.clone());
        assert!(
            plan_all(
                &b,
                &current,
                &Listings::new(),
                &DependencyFacts::default(),
                Some(&facts)
            )
            .is_empty()
        );
        // A later job with a changed command swaps the section.
        let later = how(&[(
            ci,
            "jobs:\n  test:\n    steps:\n      - run: cargo nextest run\n",
        )]);
        let b2 = bundle(vec![pull(2, "Nextest", 'b', &[ci])]);
        let after = apply(
            &current,
            &plan_all(
                &b2,
                &current,
                &Listings::new(),
                &DependencyFacts::default(),
                Some(&later),
            ),
        );
        assert!(
            after[HOW_TO_WORK]
                .contains("- `cargo nextest run` — CI: workflow ci.yml, job test <!--")
        );
        assert!(!after[HOW_TO_WORK].contains("make test"));
        // A section a person edited is left alone.
        let mut edited = as_current(after);
        let page = edited.get_mut(HOW_TO_WORK).unwrap();
        page.content = page
            .content
            .replace("- `cargo nextest", "Our note.\n- `cargo nextest");
        let b3 = bundle(vec![pull(3, "Again", 'c', &[ci])]);
        let p = plan_all(
            &b3,
            &edited,
            &Listings::new(),
            &DependencyFacts::default(),
            Some(&facts),
        );
        assert!(
            !p.patches.contains_key(HOW_TO_WORK) && !p.writes.iter().any(|w| w.path == HOW_TO_WORK)
        );
    }

    #[test]
    fn the_section_is_bounded_and_says_what_it_left_out() {
        let many: String = (0..40)
            .map(|n| format!("test{n}:\n\tpytest -k case{n} {}\n", "x".repeat(400)))
            .collect();
        let mut facts = how(&[("Makefile", &many)]);
        facts.omitted = 3;
        let section = how_to_section(&facts, HOW_TO_BYTES);
        assert!(section.len() <= HOW_TO_BYTES, "{}", section.len());
        assert!(
            section.contains(" 3 more files are not read (at most 16 are)."),
            "{section}"
        );
        assert!(
            section.contains("more lines are not listed (the list holds at most 16 KiB)."),
            "{section}"
        );
        let empty = how_to_section(&how(&[]), HOW_TO_BYTES);
        assert!(empty.starts_with("No commands found at commit"), "{empty}");
    }
}
