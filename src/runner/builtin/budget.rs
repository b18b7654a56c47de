//! Page budgets: no page the builtin agent plans exceeds [`PAGE_BUDGET`]
//! (the writer's 64 KiB page limit).
//!
//! Invariant: a current page over the budget drops its oldest entry lines
//! first (pages list newest first), and only lines that are on their quarter
//! page too (`super::archive`): every line of a page that links its quarter
//! pages, except those below its [`BEFORE_ARCHIVES_MARKER`] line (recorded
//! before quarter pages existed). Only when those are not enough do older
//! lines go, and then the page says so once, in its
//! `<!-- teammem:trimmed -->` note (they remain in its history). Only entry
//! lines are ever dropped, never a person's text or a kept section.
//! Dropping lines costs what they hold, so a full page costs each job about
//! what it adds.

use super::entries::entry_lines;
use super::inputs::CurrentPage;
use super::markers::{ARCHIVES_MARKER, BEFORE_ARCHIVES_MARKER, TRIMMED_MARKER};
use super::plan::{PlannedPatch, Replacement, engine_replacements};

/// The most bytes a page the planner writes may hold: the writer's page limit.
pub const PAGE_BUDGET: usize = crate::wiki::validate::MAX_PAGE_BYTES;

fn trimmed_note() -> String {
    format!(
        "\n_Older entries were trimmed to keep this page within 64 KiB; they remain in this page's history._ {TRIMMED_MARKER}\n"
    )
}

/// Applies replacements to a text with the writer's own patch engine (all
/// on the original text, each `old` once); `Err` says why the writer would
/// refuse them.
pub fn apply_replacements(text: &str, replacements: &[Replacement]) -> Result<String, String> {
    crate::wiki::patch::apply_replacements(text, &engine_replacements(replacements))
        .map_err(|v| v.to_string())
}

/// Adds replacements to `patch` that drop the oldest entry lines of `page`
/// (the last ones: pages list newest first) until the patched page fits
/// [`PAGE_BUDGET`]: lines on their quarter page first, then (with the
/// trimmed note, once) lines recorded before quarter pages existed. One
/// replacement per run of adjacent dropped lines.
pub fn trim_patch(page: &CurrentPage, patch: &mut PlannedPatch) {
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
    let lines: Vec<std::ops::Range<usize>> = entry_lines(&page.content)
        .into_iter()
        .filter(|line| {
            !taken
                .iter()
                .any(|t| line.start < t.end && t.start < line.end)
        })
        .collect();
    // Lines on their quarter page: all of a page that links its quarters,
    // except those below the before-archives line.
    let archived_until = if page.content.contains(ARCHIVES_MARKER) {
        page.content
            .find(BEFORE_ARCHIVES_MARKER)
            .unwrap_or(page.content.len())
    } else {
        0
    };
    let (archived, older): (Vec<_>, Vec<_>) = lines
        .into_iter()
        .partition(|line| line.end <= archived_until);
    let mut need = after - PAGE_BUDGET;
    let mut dropped: Vec<std::ops::Range<usize>> = Vec::new();
    let mut freed = 0;
    for range in archived.iter().rev() {
        if freed >= need {
            break;
        }
        freed += range.len();
        dropped.push(range.clone());
    }
    let mut note = String::new();
    if freed < need {
        if !page.content.contains(TRIMMED_MARKER) {
            note = trimmed_note();
            need += note.len();
        }
        for range in older.iter().rev() {
            if freed >= need {
                break;
            }
            freed += range.len();
            dropped.push(range.clone());
        }
    }
    dropped.sort_by_key(|r| r.start);
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

/// Cuts the oldest entry lines of a new page's content until it fits. A new
/// page's entries are all on their quarter pages (written in the same plan),
/// which the page links, so nothing is lost and no note is needed.
pub fn trim_new_page(content: String) -> String {
    if content.len() <= PAGE_BUDGET {
        return content;
    }
    let lines = entry_lines(&content);
    let need = content.len() - PAGE_BUDGET;
    let mut freed = 0;
    let mut cut = lines.len();
    while cut > 0 && freed < need {
        cut -= 1;
        freed += lines[cut].len();
    }
    let mut kept = content;
    for line in lines[cut..].iter().rev() {
        kept.replace_range(line.clone(), "");
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::builtin::changelog::new_changelog;
    use crate::runner::builtin::entries::changelog_entry;
    use crate::runner::builtin::markers::*;
    use crate::runner::builtin::planner::{apply, plan};
    use crate::runner::builtin::samples::*;
    use std::collections::BTreeMap;

    /// A Changelog of `n` entries (shas from `n` down to 1, newest first)
    /// whose length is `target` bytes, padded with a non-entry line; with a
    /// line linking its quarter pages when `archived`.
    fn full_changelog(n: u64, target: usize, archived: bool) -> (CurrentPage, Vec<String>) {
        let mut entries = String::new();
        let mut shas = Vec::new();
        for i in (1..=n).rev() {
            let mut p = pull(i, "A change of a reasonable length", 'a', &["src/a.rs"]);
            p.merge_sha = crate::ids::Sha::parse(&format!("{i:040x}")).unwrap();
            shas.push(p.merge_sha.to_string());
            entries.push_str(&changelog_entry(&p));
        }
        let head = "# Changelog\n\nFiller: ".to_owned();
        let links = if archived {
            let q4 = crate::runner::builtin::archive::Period::of("2026-11-30");
            crate::runner::builtin::archive::archives_line("Changelog", &[(q4, 1)].into())
        } else {
            String::new()
        };
        let tail = format!("\n\n{links}{CHANGELOG_ANCHOR}{entries}");
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

    fn newest() -> crate::forge::evidence::PullRequest {
        let mut newest = pull(999, "A change of a reasonable length", 'f', &[]);
        newest.merge_sha = crate::ids::Sha::parse(&"f".repeat(40)).unwrap();
        newest
    }

    #[test]
    fn a_full_changelog_drops_its_oldest_entries_which_its_quarter_pages_hold() {
        let b = bundle(vec![newest()]);
        let added = changelog_entry(&newest()).len();
        // Exactly at the limit after the insert: nothing is dropped.
        let (page, _) = full_changelog(250, PAGE_BUDGET - added, true);
        let pages: BTreeMap<String, CurrentPage> = [(CHANGELOG.to_owned(), page)].into();
        let p = plan(&b, &pages);
        assert_eq!(p.patches[CHANGELOG].replacements.len(), 1);
        assert_eq!(apply(&pages, &p)[CHANGELOG].len(), PAGE_BUDGET);

        // Over it: the oldest entries go, silently (they are on their quarter
        // pages), and the page fits.
        let (page, shas) = full_changelog(250, PAGE_BUDGET - added + 1, true);
        let pages: BTreeMap<String, CurrentPage> = [(CHANGELOG.to_owned(), page)].into();
        let after = apply(&pages, &plan(&b, &pages));
        let text = &after[CHANGELOG];
        assert!(text.len() <= PAGE_BUDGET, "{}", text.len());
        assert!(text.contains(&entry_marker(&newest().merge_sha)));
        assert!(!text.contains(&entry_marker(shas.last().unwrap())));
        assert!(text.contains(&entry_marker(&shas[shas.len() - 3])));
        assert!(!text.contains(TRIMMED_MARKER), "no note: nothing is lost");
        assert!(after["Changelog-2026-Q4.md"].contains(&entry_marker(&newest().merge_sha)));
    }

    #[test]
    fn entries_from_before_quarter_pages_are_trimmed_last_and_with_a_note() {
        let b = bundle(vec![newest()]);
        let (page, shas) = full_changelog(250, PAGE_BUDGET - 100, false);
        let pages: BTreeMap<String, CurrentPage> = [(CHANGELOG.to_owned(), page)].into();
        let after = apply(&pages, &plan(&b, &pages));
        let text = &after[CHANGELOG];
        assert!(text.len() <= PAGE_BUDGET, "{}", text.len());
        assert!(text.contains(&entry_marker(&newest().merge_sha)));
        assert!(text.contains(BEFORE_ARCHIVES_MARKER));
        assert!(!text.contains(&entry_marker(shas.last().unwrap())));
        assert_eq!(text.matches(TRIMMED_MARKER).count(), 1);
        assert!(
            text.trim_end().ends_with(TRIMMED_MARKER),
            "the note closes the list"
        );
    }

    #[test]
    fn a_new_page_over_the_limit_keeps_its_newest_entries() {
        let entries: String = (1..=400u64)
            .rev()
            .map(|i| {
                let mut p = pull(i, "A change of a reasonable length", 'a', &[]);
                p.merge_sha = crate::ids::Sha::parse(&format!("{i:040x}")).unwrap();
                changelog_entry(&p)
            })
            .collect();
        let text = trim_new_page(new_changelog("", &entries));
        assert!(text.len() <= PAGE_BUDGET);
        assert!(PAGE_BUDGET - text.len() < 400, "it keeps what fits");
        assert!(text.contains(&entry_marker(&format!("{:040x}", 400))));
        assert!(!text.contains(&entry_marker(&format!("{:040x}", 1))));
        assert!(!text.contains(TRIMMED_MARKER));
    }
}
