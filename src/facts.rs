//! Evidence markers: how a statement on a wiki page says what it rests on.
//!
//! A fact is one line of a page that ends with a marker
//! `<!-- teammem:evidence PATH@SHA#L10-L24 -->` (source lines at a full commit
//! sha) or `<!-- teammem:evidence #pr-42 -->` (a pull request). When the
//! runner finds the cited lines changed it keeps the citation and adds the
//! commit that changed them: `<!-- teammem:evidence PATH@SHA#L10-L24 stale=SHA2 -->`
//! (`stale=SHA2 deleted` when the file went away). The state of every fact
//! therefore lives in the wiki itself, versioned with the page; reading tools
//! and the dashboard parse it from there.
//!
//! Invariants:
//! - [`Marker`]'s `Display` and [`parse_marker`] are inverses: every marker
//!   written parses back to itself;
//! - a path is percent-encoded in the marker, so no path can end the comment,
//!   forge a second marker or split at the wrong `@`/`#`;
//! - text that starts like an evidence marker but does not parse is reported
//!   as [`Found::Unreadable`], never guessed at and never dropped;
//! - reading a page costs memory linear in its size: a fact carries its
//!   line's text cut to [`MAX_FACT_TEXT_BYTES`], and only the first
//!   [`MAX_MARKERS_PER_LINE`] markers of a line are read as facts (the rest
//!   are [`Found::Unreadable`], saying so), so a line's facts hold about 16 KiB
//!   of text at most, however many markers it repeats.

use std::fmt;

use crate::ids::{PullNumber, Sha};
use crate::pull_text::bounded;

/// What starts an evidence marker.
pub const PREFIX: &str = "<!-- teammem:evidence ";
const SUFFIX: &str = " -->";

/// Most markers of one line read as facts. A statement rests on a few
/// citations; each fact copies its line's text, so without a cap a long
/// line of repeated markers costs its length times their number.
pub const MAX_MARKERS_PER_LINE: usize = 16;

/// Longest [`Fact::text`] (cut between characters, `…` added): well above a
/// statement teammem writes or shows (`Stale.md` shows 160 characters,
/// `get_context` 400 bytes).
pub const MAX_FACT_TEXT_BYTES: usize = 1024;

/// A 1-based inclusive line range, `start <= end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lines {
    start: u32,
    end: u32,
}

impl Lines {
    pub fn new(start: u32, end: u32) -> Result<Lines, String> {
        if start == 0 || end < start {
            return Err(format!(
                "L{start}-L{end} is not a line range; lines count from 1 and the range ends at or after its start"
            ));
        }
        Ok(Lines { start, end })
    }

    pub fn start(self) -> u32 {
        self.start
    }

    pub fn end(self) -> u32 {
        self.end
    }

    /// The same range moved by `delta` lines (`None` if it would leave line 1).
    pub fn shifted(self, delta: i64) -> Option<Lines> {
        let start = i64::from(self.start) + delta;
        let end = i64::from(self.end) + delta;
        if start < 1 || end > i64::from(u32::MAX) {
            return None;
        }
        Some(Lines {
            start: start as u32,
            end: end as u32,
        })
    }
}

impl fmt::Display for Lines {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.start == self.end {
            write!(f, "L{}", self.start)
        } else {
            write!(f, "L{}-L{}", self.start, self.end)
        }
    }
}

/// What a fact cites.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Citation {
    /// Lines of a file at a commit of the source repository.
    Source {
        path: String,
        commit: Sha,
        lines: Lines,
    },
    /// A merged pull request.
    Pull(PullNumber),
}

/// Why a fact no longer holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Staleness {
    /// The source commit that changed (or deleted) the cited lines.
    pub changed_in: Sha,
    /// The cited file no longer exists at `changed_in`.
    pub deleted: bool,
}

/// One evidence marker.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Marker {
    pub citation: Citation,
    pub stale: Option<Staleness>,
}

impl Marker {
    pub fn source(path: &str, commit: Sha, lines: Lines) -> Marker {
        Marker {
            citation: Citation::Source {
                path: path.to_owned(),
                commit,
                lines,
            },
            stale: None,
        }
    }

    pub fn pull(number: PullNumber) -> Marker {
        Marker {
            citation: Citation::Pull(number),
            stale: None,
        }
    }

    pub fn is_stale(&self) -> bool {
        self.stale.is_some()
    }
}

impl fmt::Display for Marker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(PREFIX)?;
        match &self.citation {
            Citation::Source {
                path,
                commit,
                lines,
            } => write!(f, "{}@{commit}#{lines}", encode_path(path))?,
            Citation::Pull(number) => write!(f, "#pr-{number}")?,
        }
        if let Some(stale) = &self.stale {
            write!(f, " stale={}", stale.changed_in)?;
            if stale.deleted {
                f.write_str(" deleted")?;
            }
        }
        f.write_str(SUFFIX)
    }
}

/// Parses one whole marker (`<!-- teammem:evidence … -->`).
pub fn parse_marker(text: &str) -> Result<Marker, String> {
    let body = text
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.strip_suffix(SUFFIX))
        .ok_or_else(|| format!("{text:?} is not an evidence marker ({PREFIX}… -->)"))?;
    let mut words = body.split(' ');
    let cited = words.next().unwrap_or_default();
    let citation = parse_citation(cited)?;
    let mut stale = None;
    match words.next() {
        None => {}
        Some(word) => {
            let sha = word.strip_prefix("stale=").ok_or_else(|| {
                format!("{word:?} in an evidence marker is neither stale=SHA nor the end")
            })?;
            let changed_in = Sha::parse(sha)?;
            let deleted = match words.next() {
                None => false,
                Some("deleted") => true,
                Some(other) => return Err(format!("{other:?} after stale= is not `deleted`")),
            };
            stale = Some(Staleness {
                changed_in,
                deleted,
            });
        }
    }
    if let Some(extra) = words.next() {
        return Err(format!(
            "{extra:?} is left over at the end of an evidence marker"
        ));
    }
    Ok(Marker { citation, stale })
}

fn parse_citation(text: &str) -> Result<Citation, String> {
    if let Some(number) = text.strip_prefix("#pr-") {
        let number: u64 = number
            .parse()
            .map_err(|_| format!("#pr-{number} does not name a pull request by number"))?;
        return Ok(Citation::Pull(PullNumber::new(number)?));
    }
    let (located, lines) = text
        .rsplit_once('#')
        .ok_or_else(|| format!("{text:?} cites no lines; write PATH@SHA#L10-L24 or #pr-N"))?;
    let (path, commit) = located
        .rsplit_once('@')
        .ok_or_else(|| format!("{located:?} names no commit; write PATH@SHA"))?;
    let path = decode_path(path)?;
    if path.is_empty() {
        return Err("an evidence marker cites an empty path".to_owned());
    }
    Ok(Citation::Source {
        path,
        commit: Sha::parse(commit)?,
        lines: parse_lines(lines)?,
    })
}

fn parse_lines(text: &str) -> Result<Lines, String> {
    let number = |part: &str| -> Result<u32, String> {
        part.strip_prefix('L')
            .and_then(|digits| digits.parse().ok())
            .ok_or_else(|| format!("{text:?} is not a line range; write L10 or L10-L24"))
    };
    match text.split_once('-') {
        Some((start, end)) => Lines::new(number(start)?, number(end)?),
        None => {
            let line = number(text)?;
            Lines::new(line, line)
        }
    }
}

/// Percent-encodes every byte outside `A-Za-z0-9 . _ - / + ~ ,` so the path
/// contains no space, `@`, `#`, `>` or `%` of its own.
pub fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || b"._-/+~,".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn decode_path(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or_else(|| format!("{text:?} has a broken %-escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{text:?} does not decode to UTF-8"))
}

/// A fact found on a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// 0-based index of the page line that carries the marker.
    pub line: usize,
    /// The line's text without its evidence markers, trimmed, at most
    /// [`MAX_FACT_TEXT_BYTES`] (cut between characters, `…` added).
    pub text: String,
    /// Byte range of the marker in the page.
    pub span: std::ops::Range<usize>,
    pub marker: Marker,
}

/// What [`facts`] finds on a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Fact(Fact),
    /// Text that starts like a marker but does not parse, or a marker past
    /// the line's [`MAX_MARKERS_PER_LINE`], with the reason.
    Unreadable {
        line: usize,
        raw: String,
        reason: String,
    },
}

/// Every evidence marker on `page`, in page order.
pub fn facts(page: &str) -> Vec<Found> {
    let mut found = Vec::new();
    let mut offset = 0;
    for (index, line) in page.split_inclusive('\n').enumerate() {
        let mut markers = Vec::new();
        let mut search = 0;
        while let Some(at) = line[search..].find(PREFIX) {
            let start = search + at;
            let end = match line[start..].find(SUFFIX) {
                Some(close) => start + close + SUFFIX.len(),
                None => line.trim_end_matches(['\n', '\r']).len(),
            };
            markers.push(start..end);
            search = end.max(start + PREFIX.len());
        }
        if !markers.is_empty() {
            let mut text = String::new();
            let mut last = 0;
            for span in &markers {
                text.push_str(&line[last..span.start]);
                last = span.end;
            }
            text.push_str(&line[last..]);
            let text = bounded(text.trim(), MAX_FACT_TEXT_BYTES);
            for (nth, span) in markers.into_iter().enumerate() {
                let raw = &line[span.clone()];
                if nth >= MAX_MARKERS_PER_LINE {
                    found.push(Found::Unreadable {
                        line: index,
                        raw: raw.to_owned(),
                        reason: format!(
                            "the line already carries {MAX_MARKERS_PER_LINE} evidence markers, the most read on one line; split the statement"
                        ),
                    });
                    continue;
                }
                match parse_marker(raw) {
                    Ok(marker) => found.push(Found::Fact(Fact {
                        line: index,
                        text: text.clone(),
                        span: offset + span.start..offset + span.end,
                        marker,
                    })),
                    Err(reason) => found.push(Found::Unreadable {
                        line: index,
                        raw: raw.to_owned(),
                        reason,
                    }),
                }
            }
        }
        offset += line.len();
    }
    found
}

/// `page` with the markers at the given spans replaced (spans from [`facts`]
/// of this same page; they must not overlap).
pub fn replace_markers(page: &str, edits: &[(std::ops::Range<usize>, Marker)]) -> String {
    let mut edits: Vec<_> = edits.iter().collect();
    edits.sort_by_key(|(span, _)| span.start);
    let mut out = String::with_capacity(page.len());
    let mut last = 0;
    for (span, marker) in edits {
        out.push_str(&page[last..span.start]);
        out.push_str(&marker.to_string());
        last = span.end;
    }
    out.push_str(&page[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(c: char) -> Sha {
        Sha::parse(&c.to_string().repeat(40)).unwrap()
    }

    #[test]
    fn markers_round_trip() {
        let mut stale = Marker::source("src/a b@c#d%.rs", sha('a'), Lines::new(10, 24).unwrap());
        let plain = stale.clone();
        stale.stale = Some(Staleness {
            changed_in: sha('b'),
            deleted: true,
        });
        let one_line = Marker::source("README.md", sha('c'), Lines::new(3, 3).unwrap());
        let pull = Marker::pull(PullNumber::new(42).unwrap());
        for marker in [plain, stale, one_line, pull] {
            let text = marker.to_string();
            assert!(!text[PREFIX.len()..text.len() - SUFFIX.len()].contains("-->"));
            assert_eq!(parse_marker(&text).unwrap(), marker, "{text}");
        }
        assert_eq!(
            Marker::source("src/lib.rs", sha('a'), Lines::new(1, 2).unwrap()).to_string(),
            format!("<!-- teammem:evidence src/lib.rs@{}#L1-L2 -->", sha('a'))
        );
    }

    #[test]
    fn a_hostile_path_cannot_end_the_comment_or_forge_a_marker() {
        let path = "x --> <!-- teammem:evidence y@z#L1 -->";
        let marker = Marker::source(path, sha('a'), Lines::new(1, 1).unwrap());
        let page = format!("- a fact {marker}\n");
        let found = facts(&page);
        assert_eq!(found.len(), 1);
        let Found::Fact(fact) = &found[0] else {
            panic!("{found:?}")
        };
        assert_eq!(fact.marker, marker);
        assert_eq!(fact.text, "- a fact");
    }

    #[test]
    fn facts_are_found_with_their_line_text_and_span() {
        let m1 = Marker::source("src/lib.rs", sha('a'), Lines::new(1, 5).unwrap());
        let m2 = Marker::pull(PullNumber::new(7).unwrap());
        let page = format!(
            "# Title\n\n- `lib.rs`: the crate root {m1}\nWhy: see {m2} <!-- teammem:x -->\n"
        );
        let found = facts(&page);
        assert_eq!(found.len(), 2);
        let Found::Fact(first) = &found[0] else {
            panic!()
        };
        assert_eq!(
            (first.line, first.text.as_str()),
            (2, "- `lib.rs`: the crate root")
        );
        assert_eq!(&page[first.span.clone()], m1.to_string());
        let Found::Fact(second) = &found[1] else {
            panic!()
        };
        assert_eq!(
            (second.line, second.text.as_str()),
            (3, "Why: see  <!-- teammem:x -->")
        );
    }

    #[test]
    fn malformed_markers_are_unreadable_not_guessed() {
        for bad in [
            "<!-- teammem:evidence src/lib.rs#L1 -->",
            "<!-- teammem:evidence src/lib.rs@abc#L1 -->",
            &format!("<!-- teammem:evidence src/lib.rs@{}#L0 -->", sha('a')),
            &format!("<!-- teammem:evidence src/lib.rs@{}#L9-L3 -->", sha('a')),
            &format!(
                "<!-- teammem:evidence src/lib.rs@{}#L1 stale=nope -->",
                sha('a')
            ),
            "<!-- teammem:evidence #pr-0 -->",
            "<!-- teammem:evidence src/lib.rs@",
        ] {
            let found = facts(&format!("fact {bad}\n"));
            assert!(
                matches!(found.as_slice(), [Found::Unreadable { .. }]),
                "{bad}: {found:?}"
            );
        }
    }

    #[test]
    fn replacing_a_marker_keeps_everything_else() {
        let old = Marker::source("a.rs", sha('a'), Lines::new(2, 3).unwrap());
        let page = format!("intro\n- fact {old}\nend\n");
        let Found::Fact(fact) = facts(&page).remove(0) else {
            panic!()
        };
        let moved = Marker::source("a.rs", sha('b'), fact_lines(&fact).shifted(4).unwrap());
        let updated = replace_markers(&page, &[(fact.span.clone(), moved.clone())]);
        assert_eq!(updated, format!("intro\n- fact {moved}\nend\n"));
    }

    #[test]
    fn a_line_of_many_markers_costs_memory_linear_in_its_length() {
        // 1,800 markers on a 128 KB line: each fact once copied the whole
        // line's text (115 MB here).
        let markers: String = (1..=1_800)
            .map(|n| Marker::pull(PullNumber::new(n).unwrap()).to_string())
            .collect();
        let line = format!(
            "{} {markers}\n",
            "a statement ".repeat((128 * 1024 - markers.len()) / 12)
        );
        let found = facts(&line);
        assert_eq!(found.len(), 1_800, "every marker is reported");
        let held: usize = found
            .iter()
            .map(|found| match found {
                Found::Fact(fact) => fact.text.len(),
                Found::Unreadable { raw, reason, .. } => raw.len() + reason.len(),
            })
            .sum();
        assert!(
            held <= 2 * line.len(),
            "{held} bytes for a {}-byte line",
            line.len()
        );
        for (n, found) in found.iter().enumerate() {
            let cited = Marker::pull(PullNumber::new(n as u64 + 1).unwrap());
            match found {
                Found::Fact(fact) => {
                    assert!(n < MAX_MARKERS_PER_LINE);
                    assert_eq!(fact.marker, cited);
                    assert!(fact.text.starts_with("a statement a statement"));
                    assert!(fact.text.len() <= MAX_FACT_TEXT_BYTES + '…'.len_utf8());
                    assert!(fact.text.ends_with('…'));
                }
                Found::Unreadable { raw, reason, .. } => {
                    assert!(n >= MAX_MARKERS_PER_LINE);
                    assert_eq!(*raw, cited.to_string());
                    assert!(reason.contains("split the statement"), "{reason}");
                }
            }
        }
        // A statement under the bound keeps all its text, whole.
        let one = Marker::pull(PullNumber::new(1).unwrap());
        let Found::Fact(fact) = &facts(&format!("- é {one}\n"))[0] else {
            panic!()
        };
        assert_eq!(fact.text, "- é");
        assert_eq!(bounded("aé", 2), "a…");
    }

    fn fact_lines(fact: &Fact) -> Lines {
        match &fact.marker.citation {
            Citation::Source { lines, .. } => *lines,
            Citation::Pull(_) => panic!(),
        }
    }
}
