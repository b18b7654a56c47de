//! Page budgets: no page the builtin agent plans exceeds [`PAGE_BUDGET`]
//! (the writer's 64 KiB page limit).
//!
//! Invariant: a page over the budget loses its oldest entry lines first
//! (pages list newest first) and says so once, in its
//! `<!-- teammem:trimmed -->` note: a page that drops entries it held points
//! at its history; a new page that cannot hold all of its first job's
//! entries names the pull requests it left out. Only entry lines are ever
//! dropped, never a person's text or a kept section. (A range replayed after
//! its entries were trimmed would record them again.)

use super::entries::{entry_lines, pull_number_of_entry};
use super::inputs::CurrentPage;
use super::markers::TRIMMED_MARKER;
use super::plan::{PagePatch, Replacement};

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
    let engine: Vec<crate::wiki::patch::Replacement> = replacements
        .iter()
        .map(|r| crate::wiki::patch::Replacement {
            old: r.old.clone(),
            new: r.new.clone(),
        })
        .collect();
    crate::wiki::patch::apply_replacements(text, &engine).map_err(|v| v.to_string())
}

/// Adds replacements to `patch` that drop the oldest entry lines of `page`
/// (the last ones: pages list newest first) until the patched page fits
/// [`PAGE_BUDGET`], leaving the trimmed note once. One replacement per run
/// of adjacent dropped lines, so a page trimmed from the bottom costs one.
pub fn trim_patch(page: &CurrentPage, patch: &mut PagePatch) {
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
    let note = if page.content.contains(TRIMMED_MARKER) {
        String::new()
    } else {
        trimmed_note()
    };
    let need = after + note.len() - PAGE_BUDGET;
    let lines: Vec<std::ops::Range<usize>> = entry_lines(&page.content)
        .into_iter()
        .filter(|line| {
            !taken
                .iter()
                .any(|t| line.start < t.end && t.start < line.end)
        })
        .collect();
    let mut dropped: Vec<std::ops::Range<usize>> = Vec::new();
    let mut freed = 0;
    for range in lines.iter().rev() {
        if freed >= need {
            break;
        }
        freed += range.len();
        dropped.push(range.clone());
    }
    dropped.reverse();
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

/// Cuts the oldest entry lines of a new page's content until it fits. The
/// entries cut were never on this page, so its history does not hold them:
/// the note names their pull requests instead.
pub fn trim_new_page(content: String) -> String {
    if content.len() <= PAGE_BUDGET {
        return content;
    }
    let lines = entry_lines(&content);
    // Cut from the oldest until the page and a note naming the cut fit.
    for keep in (0..lines.len()).rev() {
        let cut = &lines[keep..];
        let note = left_out_note(cut.iter().map(|line| &content[line.clone()]));
        let size = content.len() - cut.iter().map(|line| line.len()).sum::<usize>() + note.len();
        if size <= PAGE_BUDGET || keep == 0 {
            let mut kept = content.clone();
            for line in cut.iter().rev() {
                kept.replace_range(line.clone(), "");
            }
            kept.push_str(&note);
            return kept;
        }
    }
    content
}

/// How many pull-request numbers a left-out note spells out before "and N
/// more".
const LEFT_OUT_NAMED: usize = 12;

/// The note of a new page that left out `cut` (entry lines, newest first):
/// how many, and which pull requests, in runs of consecutive numbers.
fn left_out_note<'a>(cut: impl Iterator<Item = &'a str>) -> String {
    let mut numbers: Vec<u64> = Vec::new();
    let mut count = 0;
    for line in cut {
        count += 1;
        numbers.extend(pull_number_of_entry(line));
    }
    numbers.sort_unstable();
    numbers.dedup();
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for n in numbers {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == n => *end = n,
            _ => runs.push((n, n)),
        }
    }
    let mut named: Vec<String> = runs
        .iter()
        .take(LEFT_OUT_NAMED)
        .map(|&(start, end)| match end - start {
            0 => format!("#{start}"),
            1 => format!("#{start}, #{end}"),
            _ => format!("#{start}–#{end}"),
        })
        .collect();
    if runs.len() > LEFT_OUT_NAMED {
        named.push(format!("and {} more", runs.len() - LEFT_OUT_NAMED));
    }
    let (noun, verb) = if count == 1 {
        ("entry", "was")
    } else {
        ("entries", "were")
    };
    let which = if named.is_empty() {
        String::new()
    } else {
        format!(" ({})", named.join(", "))
    };
    format!(
        "\n_To keep this page within 64 KiB, its {count} oldest {noun}{which} {verb} left out; their merge commits are in the source's history._ {TRIMMED_MARKER}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::builtin::entries::changelog_entry;
    use crate::runner::builtin::markers::*;
    use crate::runner::builtin::plan::{apply, new_changelog, plan};
    use crate::runner::builtin::samples::*;
    use std::collections::BTreeMap;

    /// A Changelog of `n` entries (shas from `n` down to 1, newest first)
    /// whose length is `target` bytes, padded with a non-entry line.
    fn full_changelog(n: u64, target: usize) -> (CurrentPage, Vec<String>) {
        let mut entries = String::new();
        let mut shas = Vec::new();
        for i in (1..=n).rev() {
            let mut p = pull(i, "A change of a reasonable length", 'a', &["src/a.rs"]);
            p.merge_sha = format!("{i:040x}");
            shas.push(p.merge_sha.clone());
            entries.push_str(&changelog_entry(&p));
        }
        let head = "# Changelog\n\nFiller: ".to_owned();
        let tail = format!("\n\n{CHANGELOG_ANCHOR}{entries}");
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

    #[test]
    fn the_changelog_is_trimmed_from_its_oldest_entry_at_the_page_limit() {
        let mut newest = pull(999, "A change of a reasonable length", 'f', &[]);
        newest.merge_sha = "f".repeat(40);
        let added = changelog_entry(&newest).len();
        let b = bundle(vec![newest.clone()]);

        // Exactly at the limit after the insert: nothing is trimmed.
        let (page, _) = full_changelog(250, PAGE_BUDGET - added);
        let pages: BTreeMap<String, CurrentPage> = [(CHANGELOG.to_owned(), page)].into();
        let p = plan(&b, &pages);
        assert_eq!(p.patches[CHANGELOG].replacements.len(), 1);
        let after = apply(&pages, &p);
        assert_eq!(after[CHANGELOG].len(), PAGE_BUDGET);

        // One byte more: the oldest entry goes, the page says so, and it fits.
        let (page, shas) = full_changelog(250, PAGE_BUDGET - added + 1);
        let pages: BTreeMap<String, CurrentPage> = [(CHANGELOG.to_owned(), page)].into();
        let p = plan(&b, &pages);
        assert_eq!(p.patches[CHANGELOG].replacements.len(), 2);
        let after = apply(&pages, &p);
        let text = &after[CHANGELOG];
        assert!(text.len() <= PAGE_BUDGET, "{}", text.len());
        assert!(text.contains(&entry_marker(&newest.merge_sha)));
        let oldest = shas.last().unwrap();
        assert!(
            !text.contains(&entry_marker(oldest)),
            "the oldest entry is gone"
        );
        assert!(text.contains(&entry_marker(&shas[shas.len() - 2])));
        assert_eq!(text.matches(TRIMMED_MARKER).count(), 1);
        assert!(
            text.trim_end().ends_with(TRIMMED_MARKER),
            "the note closes the list"
        );

        // The next run trims again without a second note.
        let pages: BTreeMap<String, CurrentPage> = [(
            CHANGELOG.to_owned(),
            CurrentPage {
                sha: "d".repeat(40),
                content: text.clone(),
            },
        )]
        .into();
        let mut next = pull(1000, "Another change of a reasonable length", 'e', &[]);
        next.merge_sha = "e".repeat(40);
        let after = apply(&pages, &plan(&bundle(vec![next.clone()]), &pages));
        let text = &after[CHANGELOG];
        assert!(text.len() <= PAGE_BUDGET);
        assert!(text.contains(&entry_marker(&next.merge_sha)));
        assert_eq!(text.matches(TRIMMED_MARKER).count(), 1);
    }

    #[test]
    fn a_new_page_over_the_limit_keeps_its_newest_entries() {
        let entries: String = (1..=400u64)
            .rev()
            .map(|i| {
                let mut p = pull(i, "A change of a reasonable length", 'a', &[]);
                p.merge_sha = format!("{i:040x}");
                changelog_entry(&p)
            })
            .collect();
        let text = trim_new_page(new_changelog(&entries));
        assert!(text.len() <= PAGE_BUDGET);
        assert!(text.contains(&entry_marker(&format!("{:040x}", 400))));
        assert!(!text.contains(&entry_marker(&format!("{:040x}", 1))));
        assert_eq!(text.matches(TRIMMED_MARKER).count(), 1);
        // The note names exactly the entries it left out.
        let oldest_kept = (1..=400u64)
            .find(|i| text.contains(&entry_marker(&format!("{i:040x}"))))
            .unwrap();
        let left_out = oldest_kept - 1;
        assert!(
            text.contains(&format!(
                "_To keep this page within 64 KiB, its {left_out} oldest entries (#1–#{left_out}) were left out;"
            )),
            "{}",
            &text[text.len() - 300..]
        );
        assert!((oldest_kept..=400).all(|i| text.contains(&entry_marker(&format!("{i:040x}")))));
    }

    #[test]
    fn a_left_out_note_names_runs_of_pull_requests_and_counts_the_rest() {
        let line =
            |n: u64| format!("- #{n} Title #999 (by A, 2026-01-05) <!-- teammem:{n:040x} -->\n");
        let lines: Vec<String> = [9, 3, 4, 5, 7, 1].into_iter().map(line).collect();
        let note = left_out_note(lines.iter().map(String::as_str));
        assert!(
            note.contains("its 6 oldest entries (#1, #3–#5, #7, #9) were left out;"),
            "{note}"
        );
        let one = left_out_note(std::iter::once(line(2).as_str()));
        assert!(
            one.contains("its 1 oldest entry (#2) was left out;"),
            "{one}"
        );
        let many: Vec<String> = (0..20).map(|i| line(i * 2)).collect();
        let note = left_out_note(many.iter().map(String::as_str));
        assert!(note.contains("#22, and 8 more) were left out"), "{note}");
        assert!(note.trim_end().ends_with(TRIMMED_MARKER));
    }
}
