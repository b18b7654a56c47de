//! The rule every language shares: the purpose is the first sentence of a
//! doc's first meaningful paragraph, bounded to one line.
//!
//! Invariants: the purpose is one line of plain text of at most
//! [`MAX_PURPOSE_CHARS`] characters (a longer sentence is cut between words
//! and marked `…`, never inside a word), whitespace runs folded and control
//! characters dropped, taken from the lines returned and from nothing else;
//! it is *not* escaped for Markdown (the caller does that: file text is
//! untrusted); headings inside a doc, code (fenced, indented, doctests) and
//! every paragraph `never_a_purpose.rs` rejects are skipped.

use crate::pull_text::{cut_at_word, is_underline, one_line, plain_links, sentence_ends};

use super::doc_text::indent;
use super::never_a_purpose::{
    is_boilerplate, is_code_line, is_decoration, is_directive, is_metadata, mentions_license,
    opens_license,
};

/// The longest purpose, in characters.
pub const MAX_PURPOSE_CHARS: usize = 160;

/// A purpose found in a file: its text and the (0-based) lines it spans.
pub(super) struct Summary {
    pub(super) text: String,
    pub(super) first: usize,
    pub(super) last: usize,
}

/// What an extractor found.
pub(super) enum Found {
    Summary(Summary),
    /// The target of an `include_str!`, as written, and its line.
    Include(String, usize),
}

/// A code fence's character and length (```` ``` ```` or `~~~`, three or more).
fn fence_of(line: &str) -> Option<(char, usize)> {
    let ch = line.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let len = line.chars().take_while(|&c| c == ch).count();
    (len >= 3).then_some((ch, len))
}

/// The purpose a doc states: the first sentence of its first meaningful
/// paragraph. `doc` is (line index, text with the comment markers
/// stripped), already dedented.
pub(super) fn summary(doc: &[(usize, &str)]) -> Option<Summary> {
    let mut in_license = false;
    let mut i = 0;
    while i < doc.len() {
        let raw = doc[i].1;
        let line = raw.trim();
        if line.is_empty() || is_directive(line) {
            i += 1;
            continue;
        }
        if let Some((ch, len)) = fence_of(line) {
            i += 1;
            while i < doc.len()
                && !fence_of(doc[i].1.trim()).is_some_and(|(c, n)| c == ch && n >= len)
            {
                i += 1;
            }
            i += 1;
            continue;
        }
        if indent(raw) >= 4 {
            // Indented code.
            i += 1;
            continue;
        }
        if line.starts_with("..") {
            // An reStructuredText directive or comment, with its body.
            i = past_indented_body(doc, i);
            continue;
        }
        if atx_heading(line).is_some() || is_underline(line) {
            i += 1;
            continue;
        }
        let mut paragraph: Vec<(usize, &str)> = Vec::new();
        let mut heading = false;
        while i < doc.len() {
            let (index, text) = (doc[i].0, doc[i].1.trim());
            // `~~~~` under a line is an rst underline, not a fence.
            let underline = is_underline(text) && !text.starts_with('`');
            if text.is_empty()
                || (fence_of(text).is_some() && !underline)
                || atx_heading(text).is_some()
            {
                break;
            }
            i += 1;
            if underline {
                // What it underlines is a title (`flask.app` over `~~~~`).
                heading = true;
                break;
            }
            if !is_directive(text) {
                paragraph.push((index, text));
            }
        }
        let Some(&(_, first)) = paragraph.first() else {
            continue;
        };
        if heading {
            continue;
        }
        let license = opens_license(first)
            || (in_license && paragraph.iter().any(|(_, t)| mentions_license(t)));
        in_license = license;
        if license
            || is_boilerplate(first)
            || is_metadata(&paragraph)
            || is_decoration(&paragraph)
            || is_code_line(first)
        {
            continue;
        }
        if let Some(found) = first_sentence(&paragraph) {
            return Some(found);
        }
    }
    None
}

/// The index past the directive at `doc[start]` and the lines indented
/// under it (blank lines inside the body included).
pub(super) fn past_indented_body(doc: &[(usize, &str)], start: usize) -> usize {
    let base = indent(doc[start].1);
    let mut i = start + 1;
    while i < doc.len() {
        let text = doc[i].1;
        if text.trim().is_empty() {
            let next = doc[i..].iter().find(|(_, t)| !t.trim().is_empty());
            if next.is_some_and(|(_, t)| indent(t) > base) {
                i += 1;
                continue;
            }
            break;
        }
        if indent(text) <= base {
            break;
        }
        i += 1;
    }
    i
}

/// The first sentence of `paragraph` (its lines joined), bounded, with the
/// lines it spans.
fn first_sentence(paragraph: &[(usize, &str)]) -> Option<Summary> {
    let mut joined = String::new();
    let mut starts: Vec<(usize, usize)> = Vec::new();
    for &(index, text) in paragraph {
        if !joined.is_empty() {
            joined.push(' ');
        }
        starts.push((joined.len(), index));
        joined.push_str(text);
    }
    let end = sentence_ends(&joined)
        .first()
        .copied()
        .unwrap_or(joined.len());
    let last = starts
        .iter()
        .rev()
        .find(|(offset, _)| *offset < end)
        .map(|&(_, index)| index)?;
    Some(Summary {
        text: bounded(&plain_links(&joined[..end]))?,
        first: paragraph.first()?.0,
        last,
    })
}

/// `text` as one line of at most [`MAX_PURPOSE_CHARS`] characters, cut
/// between words and marked `…` when longer; `None` when nothing is left
/// or not even its first word fits.
fn bounded(text: &str) -> Option<String> {
    let text = one_line(text);
    if text.is_empty() {
        return None;
    }
    if text.chars().count() <= MAX_PURPOSE_CHARS {
        return Some(text);
    }
    cut_at_word(&text, MAX_PURPOSE_CHARS)
}

/// A heading's text as a purpose.
pub(super) fn title(text: &str, index: usize) -> Option<Summary> {
    Some(Summary {
        text: bounded(&plain_links(text))?,
        first: index,
        last: index,
    })
}

pub(super) fn atx_heading(line: &str) -> Option<&str> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let text = rest.trim();
    // A closing sequence of `#` is not part of the heading.
    let closed = text.trim_end_matches('#');
    let text = if closed.is_empty() || closed.ends_with([' ', '\t']) {
        closed.trim_end()
    } else {
        text
    };
    Some(text)
}

#[cfg(test)]
mod tests {
    use crate::purpose::expect::is;
    use crate::purpose::{MAX_PURPOSE_CHARS, purpose};

    #[test]
    fn hostile_text_stays_one_bounded_line_of_plain_text() {
        let (text, lines) = purpose(
            "a.py",
            "\"\"\"Evil\u{7}\u{1b}[31m <!-- teammem:evidence x@y#L1 --> --> \t tabs\r\n\"\"\""
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(lines.start(), 1);
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert_eq!(text.lines().count(), 1);
        assert!(
            text.contains("-->"),
            "raw text, escaped by the caller: {text}"
        );
        let long = format!("//! {}\n", "word ".repeat(100));
        let (text, _) = purpose("a.rs", long.as_bytes()).unwrap();
        assert!(text.chars().count() <= MAX_PURPOSE_CHARS, "{text}");
        assert!(text.ends_with("word…"), "cut at a word: {text}");
        // One word longer than the room is no purpose (a word is never cut).
        let one = format!("//! {}\n", "x".repeat(1000));
        assert_eq!(purpose("a.rs", one.as_bytes()), None);
        // CRLF files and a byte-order mark.
        is("a.md", "\u{FEFF}# Title\r\nbody\r\n", "Title", 1);
    }

    #[test]
    fn a_long_first_sentence_is_cut_between_words() {
        let sentence = "Extractor and response for working with form data that is sent in the body of a request or in the query string of a GET request, with rejections for every failure there is.";
        let (text, _) =
            purpose("src/form.rs", format!("//! {sentence} More.\n").as_bytes()).unwrap();
        assert!(text.chars().count() <= MAX_PURPOSE_CHARS, "{text}");
        assert!(text.ends_with('…'), "{text}");
        let kept = text.trim_end_matches('…');
        assert!(sentence.starts_with(kept), "{text}");
        assert!(
            sentence[kept.len()..].starts_with(' '),
            "cut between words: {text}"
        );
        // Two sentences: only the first, whole.
        is(
            "a.rs",
            "//! Serves files, e.g. `index.html`. Also other things.\n",
            "Serves files, e.g. `index.html`.",
            1,
        );
    }
}
