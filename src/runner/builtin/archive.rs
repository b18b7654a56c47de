//! Quarter pages: where every entry the builtin agent records stays for good.
//! Each current page (the Changelog, each `Area-<slug>` page) has one archive
//! page per quarter of its entries' merge dates (`Changelog-2026-Q3.md`,
//! `Area-src-2026-Q3.md`), split into numbered parts when one quarter holds
//! more than a page can (`Changelog-2026-Q3-2.md`, …). An entry is written
//! to its quarter page when it is recorded, beside the current page, so the
//! current page may later drop it without moving anything: nothing ever
//! moves in a burst, and a job's write is proportional to what it records.
//!
//! Invariants:
//! - every entry a job records goes on exactly one quarter page of each page
//!   family it belongs to (the newest part of its quarter, or a new part when
//!   that one is full), and no quarter page exceeds [`PAGE_BUDGET`];
//! - quarter pages are only ever inserted into after their anchor, never
//!   trimmed;
//! - an archive name never equals (case-insensitively) a current page's:
//!   area slugs that would read as a quarter page get a suffix
//!   ([`super::areas::area_slug`]).

use super::budget::PAGE_BUDGET;
use super::markers::{ARCHIVE_ANCHOR, ARCHIVES_MARKER};

/// A quarter of merge dates (oldest first when sorted); `Undated` holds
/// entries whose merge date cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Period {
    Undated,
    Quarter { year: u16, quarter: u8 },
}

impl Period {
    /// The quarter of an RFC 3339 date (`2026-08-01T…`): its first 7
    /// characters.
    pub fn of(date: &str) -> Period {
        let parsed = date.get(..7).and_then(|ym| {
            let (year, month) = ym.split_once('-')?;
            let year: u16 = year.parse().ok().filter(|y| (1000..=9999).contains(y))?;
            let month: u8 = month.parse().ok().filter(|m| (1..=12).contains(m))?;
            Some((year, month))
        });
        match parsed {
            Some((year, month)) => Period::Quarter {
                year,
                quarter: (month - 1) / 3 + 1,
            },
            None => Period::Undated,
        }
    }

    /// How the period is spelled in page names: `2026-Q3`, `undated`.
    pub fn tag(&self) -> String {
        match self {
            Period::Undated => "undated".to_owned(),
            Period::Quarter { year, quarter } => format!("{year}-Q{quarter}"),
        }
    }

    /// How the period reads: `2026 Q3`.
    pub fn label(&self) -> String {
        match self {
            Period::Undated => "undated".to_owned(),
            Period::Quarter { year, quarter } => format!("{year} Q{quarter}"),
        }
    }

    fn parse(tag: &str) -> Option<Period> {
        if tag.eq_ignore_ascii_case("undated") {
            return Some(Period::Undated);
        }
        let (year, quarter) = tag.split_once('-')?;
        let quarter = quarter
            .strip_prefix('Q')
            .or_else(|| quarter.strip_prefix('q'))?;
        let year: u16 = year.parse().ok().filter(|_| year.len() == 4)?;
        let quarter: u8 = quarter
            .parse()
            .ok()
            .filter(|q| (1..=4).contains(q) && quarter.len() == 1)?;
        Some(Period::Quarter { year, quarter })
    }
}

/// A page's name without `.md` (what a link on GitHub's flat wiki names).
pub fn page_name(path: &str) -> &str {
    path.strip_suffix(".md").unwrap_or(path)
}

/// The quarter page of `base` (a current page's name) for `period`, part
/// `part` (1 has no suffix).
pub fn archive_page(base: &str, period: Period, part: u32) -> String {
    if part <= 1 {
        format!("{base}-{}.md", period.tag())
    } else {
        format!("{base}-{}-{part}.md", period.tag())
    }
}

/// The period and part a name (without `.md`) ends with, and what comes
/// before it: `x-2026-Q3-2` → (`x`, 2026 Q3, 2).
fn split_archive_name(name: &str) -> Option<(&str, Period, u32)> {
    let parse_tail = |rest: &str| -> Option<(usize, Period)> {
        // `undated` or `YYYY-QN` at the end of `rest`, after a `-`.
        // Both spellings are 7 bytes long.
        let len = 7;
        {
            if rest.len() > len
                && rest.is_char_boundary(rest.len() - len)
                && let Some(period) = Period::parse(&rest[rest.len() - len..])
                && rest[..rest.len() - len].ends_with('-')
            {
                return Some((rest.len() - len - 1, period));
            }
        }
        None
    };
    if let Some((stem, period)) = parse_tail(name) {
        return Some((&name[..stem], period, 1));
    }
    let (rest, part) = name.rsplit_once('-')?;
    let part: u32 = part
        .parse()
        .ok()
        .filter(|p| *p >= 2 && !part.starts_with('0'))?;
    let (stem, period) = parse_tail(rest)?;
    Some((&rest[..stem], period, part))
}

/// The base (current page name) of a quarter page path.
pub fn archive_base(path: &str) -> Option<&str> {
    split_archive_name(path.strip_suffix(".md")?).map(|(stem, _, _)| stem)
}

/// Whether a page name (without `.md`) reads as a quarter page of some base.
pub fn looks_like_archive(name: &str) -> bool {
    split_archive_name(name).is_some()
}

/// The period and part of `path` when it is a quarter page of `base`.
pub fn parse_archive(base: &str, path: &str) -> Option<(Period, u32)> {
    let (stem, period, part) = split_archive_name(path.strip_suffix(".md")?)?;
    (stem == base).then_some((period, part))
}

/// The parts of `base`'s quarter page of `period` among `paths`, ascending.
pub fn parts<'a>(paths: impl Iterator<Item = &'a String>, base: &str, period: Period) -> Vec<u32> {
    let mut found: Vec<u32> = paths
        .filter_map(|path| parse_archive(base, path))
        .filter(|(p, _)| *p == period)
        .map(|(_, part)| part)
        .collect();
    found.sort_unstable();
    found.dedup();
    found
}

/// What a quarter page says about itself.
pub struct ArchiveHeader<'a> {
    /// `Changelog`, `Area: src`.
    pub title: &'a str,
    /// What its entries are: `Merged pull requests`, `Pull requests that
    /// changed files under `src/``.
    pub what: &'a str,
    /// The current page's label and name, linked from the quarter page.
    pub current: (&'a str, &'a str),
}

/// A new quarter page holding `entries` (newest first).
pub fn new_archive_page(
    header: &ArchiveHeader<'_>,
    period: Period,
    part: u32,
    entries: &str,
) -> String {
    let part_label = if part > 1 {
        format!(", part {part}")
    } else {
        String::new()
    };
    format!(
        "# {}, {}{part_label}\n\n{} in {}, newest first as recorded (kept by teammem). The current page is [{}]({}); every quarter of the Changelog is on [Archive](Archive).\n\n{ARCHIVE_ANCHOR}{entries}",
        header.title,
        period.label(),
        header.what,
        period.label(),
        header.current.0,
        header.current.1,
    )
}

/// The quarter pages a current page links: (period, part) newest first.
pub type ArchiveLinks = std::collections::BTreeSet<(Period, u32)>;

/// The quarter pages of `base` that a line ending in [`ARCHIVES_MARKER`]
/// links (`](base-2026-Q3)` targets), read back from `content`.
pub fn linked_archives(content: &str, base: &str) -> ArchiveLinks {
    let mut found = ArchiveLinks::new();
    let Some(line) = content
        .lines()
        .find(|line| line.trim_end().ends_with(ARCHIVES_MARKER))
    else {
        return found;
    };
    for piece in line.split("](").skip(1) {
        if let Some(target) = piece.split(')').next()
            && let Some(at) = parse_archive(base, &format!("{target}.md"))
        {
            found.insert(at);
        }
    }
    found
}

/// A current page's line linking its quarter pages, newest first, ending in
/// [`ARCHIVES_MARKER`].
pub fn archives_line(base: &str, links: &ArchiveLinks) -> String {
    let listed: Vec<String> = links
        .iter()
        .rev()
        .map(|&(period, part)| {
            let label = if part > 1 {
                format!("{} part {part}", period.label())
            } else {
                period.label()
            };
            format!(
                "[{label}]({})",
                page_name(&archive_page(base, period, part))
            )
        })
        .collect();
    format!(
        "Every entry is also kept on the page of its quarter: {} {ARCHIVES_MARKER}\n",
        listed.join(", ")
    )
}

/// Where new entries of one quarter go: `(part, entries newest first, new
/// page?)` for each page written, given the newest existing part's size (if
/// any) and the entries (newest first). Entries fill the newest part while
/// it has room, then new parts of at most [`PAGE_BUDGET`] each, oldest
/// entries first, so parts stay in order.
pub fn placement(
    newest: Option<(u32, usize)>,
    header_bytes: usize,
    entries: &[String],
) -> Vec<(u32, Vec<String>, bool)> {
    let mut out: Vec<(u32, Vec<String>, bool)> = Vec::new();
    let mut oldest_first = entries.iter().rev().peekable();
    let mut next_part = 1;
    if let Some((part, size)) = newest {
        next_part = part + 1;
        let mut taken = Vec::new();
        let mut size = size;
        while let Some(line) = oldest_first.peek() {
            if size + line.len() > PAGE_BUDGET {
                break;
            }
            size += line.len();
            taken.push((*line).clone());
            oldest_first.next();
        }
        if !taken.is_empty() {
            taken.reverse();
            out.push((part, taken, false));
        }
    }
    while oldest_first.peek().is_some() {
        let mut taken: Vec<String> = Vec::new();
        let mut size = header_bytes;
        while let Some(line) = oldest_first.peek() {
            if !taken.is_empty() && size + line.len() > PAGE_BUDGET {
                break;
            }
            size += line.len();
            taken.push((*line).clone());
            oldest_first.next();
        }
        taken.reverse();
        out.push((next_part, taken, true));
        next_part += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarters_are_read_from_merge_dates_and_named_flat() {
        assert_eq!(
            Period::of("2026-08-01T10:00:00Z"),
            Period::Quarter {
                year: 2026,
                quarter: 3
            }
        );
        assert_eq!(Period::of("2026-12-31").tag(), "2026-Q4");
        assert_eq!(Period::of("2026-01-01").label(), "2026 Q1");
        assert_eq!(Period::of("not a date"), Period::Undated);
        assert_eq!(Period::of("2026-13-01"), Period::Undated);
        assert!(Period::of("2025-12-01") < Period::of("2026-01-01"));
        assert!(Period::Undated < Period::of("1999-01-01"));
        let q3 = Period::of("2026-07-01");
        assert_eq!(archive_page("Changelog", q3, 1), "Changelog-2026-Q3.md");
        assert_eq!(archive_page("Area-src", q3, 2), "Area-src-2026-Q3-2.md");
        assert_eq!(
            parse_archive("Area-src", "Area-src-2026-Q3-2.md"),
            Some((q3, 2))
        );
        assert_eq!(
            parse_archive("Area-src", "Area-src-2026-Q3.md"),
            Some((q3, 1))
        );
        assert_eq!(parse_archive("Area-src", "Area-src-x-2026-Q3.md"), None);
        assert_eq!(parse_archive("Area-src", "Area-src.md"), None);
        assert_eq!(parse_archive("Area-src", "Area-src-2026-Q3-1.md"), None);
        assert_eq!(parse_archive("Area-src", "Area-src-2026-Q3-02.md"), None);
        assert_eq!(
            parse_archive("Changelog", "Changelog-undated-3.md"),
            Some((Period::Undated, 3))
        );
        assert!(looks_like_archive("Area-release-2026-q3"));
        assert!(looks_like_archive("x-2026-Q1-12"));
        assert!(!looks_like_archive("x-2026-Q5"));
        assert!(!looks_like_archive("x-2026"));
        let paths: Vec<String> = [
            "Changelog-2026-Q3.md",
            "Changelog-2026-Q3-3.md",
            "Changelog-2026-Q3-2.md",
            "Changelog-2026-Q2.md",
            "Area-x-2026-Q3.md",
        ]
        .map(String::from)
        .into();
        assert_eq!(parts(paths.iter(), "Changelog", q3), vec![1, 2, 3]);
    }

    #[test]
    fn a_current_page_links_its_quarters_newest_first_and_reads_them_back() {
        let q = |y, n| Period::Quarter {
            year: y,
            quarter: n,
        };
        let links: ArchiveLinks = [(q(2026, 2), 1), (q(2026, 3), 1), (q(2026, 3), 2)].into();
        let line = archives_line("Area-src", &links);
        assert!(
            line.starts_with("Every entry is also kept on the page of its quarter: [2026 Q3 part 2](Area-src-2026-Q3-2), [2026 Q3](Area-src-2026-Q3), [2026 Q2](Area-src-2026-Q2) <!-- teammem:archives -->"),
            "{line}"
        );
        assert_eq!(linked_archives(&format!("# x\n{line}"), "Area-src"), links);
    }

    #[test]
    fn entries_fill_the_newest_part_then_new_parts_in_order() {
        let entries: Vec<String> = (0..10)
            .rev()
            .map(|i| format!("{i}{}\n", "x".repeat(19_999)))
            .collect();
        // The newest part has room for one more.
        let placed = placement(Some((1, PAGE_BUDGET - 30_000)), 500, &entries);
        assert_eq!(placed[0].0, 1);
        assert!(!placed[0].2);
        assert_eq!(placed[0].1.len(), 1);
        assert!(
            placed[0].1[0].starts_with('0'),
            "the oldest entry fills the old part"
        );
        let sizes: Vec<(u32, usize, bool)> = placed
            .iter()
            .map(|(p, e, new)| (*p, e.len(), *new))
            .collect();
        assert_eq!(
            sizes,
            vec![(1, 1, false), (2, 3, true), (3, 3, true), (4, 3, true)]
        );
        // Newest first within each part, and parts in order.
        assert!(placed[3].1[0].starts_with('9'));
        for (_, lines, _) in &placed {
            assert!(500 + lines.iter().map(String::len).sum::<usize>() <= PAGE_BUDGET);
        }
        // No page yet: parts from 1.
        assert_eq!(placement(None, 500, &entries[..1])[0].0, 1);
    }
}
