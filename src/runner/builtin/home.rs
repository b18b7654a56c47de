//! `Home.md`, the wiki's topic index: its "Topics" list (Changelog,
//! Dependencies, How to work here, Archive, the areas by slug, then links
//! teammem does not know, kept as they were), its "For coding agents"
//! section (call `get_context` with the paths you are about to change; trust
//! a fact by its `as_of` and status) and its "Removed areas" list.
//!
//! Invariants: Home is protected (`crate::wiki::confine`), so every line a
//! patch adds here is an anchor or a link to a wiki page ending with a
//! teammem marker (no prose, code or URL: what an agent should do is said in
//! link labels, the details on the page they link); the topics keep one
//! order whatever order the page had; an area moves between the topics and
//! "Removed areas" as its folder goes and comes back; a list whose anchor is
//! missing is appended once, at the end.

use std::collections::{BTreeMap, BTreeSet};

use super::areas::area_base;
use super::edits::{append_replacement, occurrences};
use super::inputs::CurrentPage;
use super::markers::{
    AGENTS_ANCHOR, ARCHIVE_LINK_MARKER, CHANGELOG_LINK_MARKER, DEPENDENCIES_LINK_MARKER, HOME,
    HOW_TO_WORK_BASE, HOW_TO_WORK_LINK_MARKER, REMOVED_AREAS_ANCHOR, TOPICS_ANCHOR,
    area_link_marker, removed_link_marker,
};
use super::plan::{NewPage, Plan, PlannedPatch, Replacement};

/// What Home's topics are planned from.
pub struct Topics {
    pub any_pulls: bool,
    pub dependencies_page: bool,
    pub how_to_page: bool,
    pub archive_index: bool,
    /// The areas the job's pull requests touch: slug → label.
    pub areas: BTreeMap<String, String>,
    /// Those whose folder is gone at the job's tip.
    pub gone: BTreeSet<String>,
}

/// A list of link lines on Home: its range, and each line's marker name and
/// label.
type LinkBlock = (std::ops::Range<usize>, Vec<(String, String)>);

/// The link lines of a list on Home: from the line that is exactly `anchor`
/// through the teammem link lines that follow it: (their range, each line's
/// marker name and label), when the anchor is there exactly once.
fn link_block(content: &str, anchor: &str) -> Option<LinkBlock> {
    if occurrences(content, anchor) != 1 {
        return None;
    }
    let at = content.find(anchor)?;
    if at > 0 && !content[..at].ends_with('\n') {
        return None;
    }
    let mut end = at + anchor.len();
    let mut lines = Vec::new();
    for line in content[end..].split_inclusive('\n') {
        let Some((name, label)) = parse_link_line(line) else {
            break;
        };
        lines.push((name, label));
        end += line.len();
    }
    Some((at..end, lines))
}

/// `- [label](target) <!-- teammem:name -->`: (name, label).
fn parse_link_line(line: &str) -> Option<(String, String)> {
    let line = line.trim_end();
    let rest = line.strip_prefix("- [")?;
    let (label, rest) = rest.split_once("](")?;
    let at = rest.rfind(crate::wiki::confine::MARKER)?;
    let name = rest[at + crate::wiki::confine::MARKER.len()..].strip_suffix(" -->")?;
    Some((name.to_owned(), label.to_owned()))
}

fn link_line(label: &str, target: &str, marker: &str) -> String {
    format!("- [{label}]({target}) {marker}\n")
}

/// A fixed link marker's name (`<!-- teammem:name -->` → `name`).
fn marker_name(marker: &str) -> &str {
    marker
        .trim_start_matches(crate::wiki::confine::MARKER)
        .trim_end_matches(" -->")
}

/// The "For coding agents" list: what an agent does before it changes
/// files, in link labels (Home takes only links), each linking the page
/// that says it in full.
pub fn agents_lines() -> String {
    let mut text = String::from(AGENTS_ANCHOR);
    for (label, name) in [
        (
            "Before changing files call the MCP tool get_context with their paths",
            "agents:get-context",
        ),
        (
            "Trust each fact by its as_of and status - check the code behind a stale one",
            "agents:trust",
        ),
    ] {
        text.push_str(&link_line(
            label,
            HOW_TO_WORK_BASE,
            &format!("{}{name} -->", crate::wiki::confine::MARKER),
        ));
    }
    text
}

/// `Home.md`: its topics re-derived in one order (Changelog, Dependencies,
/// How to work here, Archive, the areas by slug, then links teammem does not
/// know, kept), its "For coding agents" list, and its "Removed areas" list
/// (areas whose folder is gone, by slug). An area moves between the two
/// lists as its folder goes and comes back.
pub fn plan_home(out: &mut Plan, pages: &BTreeMap<String, CurrentPage>, topics: &Topics) {
    let home = pages.get(HOME);
    let content = home.map_or("", |page| page.content.as_str());
    let topic_block = link_block(content, TOPICS_ANCHOR);
    let removed_block = link_block(content, REMOVED_AREAS_ANCHOR);
    let agents_block = link_block(content, AGENTS_ANCHOR);
    let had = |block: &Option<LinkBlock>, name: &str| {
        block
            .as_ref()
            .is_some_and(|(_, lines)| lines.iter().any(|(n, _)| n == name))
    };
    let mut fixed = String::new();
    let changelog_name = marker_name(CHANGELOG_LINK_MARKER);
    let dependencies_name = marker_name(DEPENDENCIES_LINK_MARKER);
    let how_to_name = marker_name(HOW_TO_WORK_LINK_MARKER);
    let archive_name = marker_name(ARCHIVE_LINK_MARKER);
    if topics.any_pulls || had(&topic_block, changelog_name) {
        fixed.push_str(&link_line("Changelog", "Changelog", CHANGELOG_LINK_MARKER));
    }
    if topics.dependencies_page || had(&topic_block, dependencies_name) {
        fixed.push_str(&link_line(
            "Dependencies",
            "Dependencies",
            DEPENDENCIES_LINK_MARKER,
        ));
    }
    if topics.how_to_page || had(&topic_block, how_to_name) {
        fixed.push_str(&link_line(
            "How to work here",
            HOW_TO_WORK_BASE,
            HOW_TO_WORK_LINK_MARKER,
        ));
    }
    if topics.archive_index || had(&topic_block, archive_name) {
        fixed.push_str(&link_line("Archive", "Archive", ARCHIVE_LINK_MARKER));
    }
    // slug → label, for the topics and the removed list.
    let mut current: BTreeMap<String, String> = BTreeMap::new();
    let mut removed: BTreeMap<String, String> = BTreeMap::new();
    let mut others = String::new();
    let fixed_names = [changelog_name, dependencies_name, how_to_name, archive_name];
    if let Some((range, lines)) = &topic_block {
        for (name, label) in lines {
            if let Some(slug) = name.strip_prefix("area:") {
                current.insert(slug.to_owned(), label.clone());
            } else if !fixed_names.contains(&name.as_str()) {
                // A link teammem does not write any more: kept as it was.
                if let Some(line) = content[range.clone()]
                    .lines()
                    .find(|l| parse_link_line(l).is_some_and(|(n, _)| &n == name))
                {
                    others.push_str(line);
                    others.push('\n');
                }
            }
        }
    }
    if let Some((_, lines)) = &removed_block {
        for (name, label) in lines {
            if let Some(slug) = name.strip_prefix("removed:") {
                removed.insert(slug.to_owned(), label.clone());
            }
        }
    }
    for (slug, label) in &topics.areas {
        if topics.gone.contains(slug) {
            current.remove(slug);
            removed.insert(slug.clone(), label.clone());
        } else {
            removed.remove(slug);
            current.insert(slug.clone(), label.clone());
        }
    }
    let mut topic_lines = String::from(TOPICS_ANCHOR);
    topic_lines.push_str(&fixed);
    for (slug, label) in &current {
        topic_lines.push_str(&link_line(label, &area_base(slug), &area_link_marker(slug)));
    }
    topic_lines.push_str(&others);
    let removed_lines = (!removed.is_empty() || removed_block.is_some()).then(|| {
        let mut text = String::from(REMOVED_AREAS_ANCHOR);
        for (slug, label) in &removed {
            text.push_str(&link_line(
                label,
                &area_base(slug),
                &removed_link_marker(slug),
            ));
        }
        text
    });
    // The agents' list goes with the How-to page it links.
    let agents = (topics.how_to_page || agents_block.is_some()).then(agents_lines);
    let Some(page) = home else {
        if topic_lines == TOPICS_ANCHOR {
            return;
        }
        let mut content = format!("# Home\n\n## Topics\n\n{topic_lines}");
        if let Some(agents) = agents {
            content.push_str(&format!("\n## For coding agents\n\n{agents}"));
        }
        if let Some(removed) = removed_lines.filter(|r| r != REMOVED_AREAS_ANCHOR) {
            content.push_str(&format!("\n## Removed areas\n\n{removed}"));
        }
        out.writes.push(NewPage {
            path: HOME.into(),
            content,
        });
        return;
    };
    let mut replacements = Vec::new();
    let mut append = String::new();
    match &topic_block {
        Some((range, _)) if content[range.clone()] != topic_lines => {
            replacements.push(Replacement {
                old: content[range.clone()].to_owned(),
                new: topic_lines,
            });
        }
        None if topic_lines != TOPICS_ANCHOR => {
            append.push_str(&format!("\n## Topics\n\n{topic_lines}"));
        }
        _ => {}
    }
    match (&agents_block, agents) {
        (Some((range, _)), Some(lines)) if content[range.clone()] != lines => {
            replacements.push(Replacement {
                old: content[range.clone()].to_owned(),
                new: lines,
            });
        }
        (None, Some(lines)) => {
            append.push_str(&format!("\n## For coding agents\n\n{lines}"));
        }
        _ => {}
    }
    match (&removed_block, removed_lines) {
        (Some((range, _)), Some(lines)) if content[range.clone()] != lines => {
            replacements.push(Replacement {
                old: content[range.clone()].to_owned(),
                new: lines,
            });
        }
        (None, Some(lines)) if lines != REMOVED_AREAS_ANCHOR => {
            append.push_str(&format!("\n## Removed areas\n\n{lines}"));
        }
        _ => {}
    }
    if !append.is_empty() {
        replacements.push(append_replacement(page, &append));
    }
    if !replacements.is_empty() {
        out.patches.insert(
            HOME.into(),
            PlannedPatch {
                expected_sha: page.sha.clone(),
                replacements,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::forge::evidence::FileStatus;
    use crate::runner::builtin::inputs::Listings;
    use crate::runner::builtin::markers::HOME;
    use crate::runner::builtin::plan::engine_replacements;
    use crate::runner::builtin::planner::{apply, plan_with};
    use crate::runner::builtin::samples::*;

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
        let engine = engine_replacements(&p.patches[HOME].replacements);
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
}
