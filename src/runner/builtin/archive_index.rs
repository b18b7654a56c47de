//! `Archive.md`: the index of the Changelog's quarter pages, newest first,
//! which Home links (so every recorded pull request is two links from Home).
//!
//! Invariant: the list between its two anchors is re-derived whole from the
//! quarter pages the Changelog links, those the wiki holds, those the plan
//! writes and those the list already names (none is ever dropped); a list a
//! person changed is left as it is, and the receipt says so; the page is
//! written when the first quarter page exists.

use std::collections::BTreeMap;

use super::archive::{ArchiveLinks, archive_page, page_name, parse_archive};
use super::edits::append_replacement;
use super::inputs::CurrentPage;
use super::markers::{ARCHIVE_INDEX, ARCHIVE_INDEX_ANCHOR, ARCHIVE_INDEX_END, CHANGELOG};
use super::plan::{NewPage, Plan, PlannedPatch, Replacement};
use super::sections::{Section, edited_note, span_between};

/// `Archive.md`: the Changelog's quarter pages, newest first, re-derived
/// between its anchors (written when the first one exists). Returns whether
/// the index exists after the plan.
pub(super) fn plan_archive_index(
    out: &mut Plan,
    pages: &BTreeMap<String, CurrentPage>,
    changelog: &ArchiveLinks,
) -> bool {
    let base = page_name(CHANGELOG);
    let current = pages.get(ARCHIVE_INDEX);
    let span = current.map_or(Section::Absent, |page| {
        span_between(
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
