//! Prose out of untrusted text: the "why" of a pull request (the first
//! meaningful paragraph of its description), and the small text rules that
//! [`crate::purpose`] shares (sentence ends, code spans, bounded lines,
//! Markdown links reduced to their text). Pure.
//!
//! Invariants:
//! - what comes back is one line of plain text (whitespace runs folded,
//!   control characters dropped), bounded in characters, cut only at a
//!   sentence end or between words (never inside a word or a code span) and
//!   marked `…` when cut; it is *not* escaped for Markdown (the caller does
//!   that: the text is untrusted);
//! - template scaffolding is never the why: trailers (`Signed-off-by:` and
//!   the like), HTML comments (however many lines they span), checklists,
//!   headings with or without text under them, and lines that only point
//!   at issues or pull requests ("Fixes #12": the entry says what a PR
//!   closes on its own).

use std::ops::Range;

/// The longest "why", in characters.
pub const MAX_WHY_CHARS: usize = 300;

/// The first meaningful paragraph of a pull request's description, as one
/// line of at most [`MAX_WHY_CHARS`] characters; `None` when the description
/// says nothing past its template.
pub fn why(body: &str) -> Option<String> {
    let body = without_html_comments(body);
    let mut paragraph: Vec<&str> = Vec::new();
    let mut fence: Option<(char, usize)> = None;
    for line in body.lines() {
        let text = line.trim();
        if let Some((ch, len)) = fence {
            if fence_of(text).is_some_and(|(c, n)| c == ch && n >= len) {
                fence = None;
            }
            continue;
        }
        if let Some(open) = fence_of(text) {
            fence = Some(open);
            if let Some(found) = judged(&paragraph) {
                return Some(found);
            }
            paragraph.clear();
            continue;
        }
        if is_underline(text) {
            // A setext heading (text over `---` or `===`) or a thematic break:
            // what it underlines is a heading, never the why.
            paragraph.clear();
            continue;
        }
        let ends_paragraph =
            text.is_empty() || is_heading(text) || text.starts_with('|') || is_bold_label(text);
        if ends_paragraph {
            if let Some(found) = judged(&paragraph) {
                return Some(found);
            }
            paragraph.clear();
            continue;
        }
        if is_trailer(text)
            || is_checklist_item(text)
            || only_points_at_issues(text)
            || is_image_only(text)
            || is_html_only(text)
        {
            continue;
        }
        paragraph.push(text.trim_start_matches('>').trim());
    }
    judged(&paragraph)
}

/// A paragraph's text as the why, unless it is only a template label
/// ("Checklist:", "Description:").
fn judged(paragraph: &[&str]) -> Option<String> {
    if let [only] = paragraph
        && only.ends_with(':')
        && only.split_whitespace().count() <= 3
    {
        return None;
    }
    let mut joined = String::new();
    for line in paragraph {
        let (item, text) = match list_item(line) {
            Some(text) => (true, text),
            None => (false, *line),
        };
        if !joined.is_empty() {
            if item && !joined.ends_with(['.', ';', ':', '!', '?', ',']) {
                joined.push(';');
            }
            joined.push(' ');
        }
        joined.push_str(text);
    }
    // More than enough text for the room, and bounded work on a huge one.
    let mut end = joined.len().min(MAX_SCANNED_BYTES);
    while !joined.is_char_boundary(end) {
        end -= 1;
    }
    cut_prose(&plain_links(&joined[..end]), MAX_WHY_CHARS)
}

/// How much of a paragraph is read for the why.
const MAX_SCANNED_BYTES: usize = 4096;

/// `body` without its HTML comments (`<!-- … -->`, over any number of
/// lines, anywhere in a line); an unclosed comment hides the rest, as a
/// renderer would.
fn without_html_comments(body: &str) -> String {
    let body = body.replace("\r\n", "\n").replace('\r', "\n");
    let mut out = String::with_capacity(body.len());
    let mut rest = body.as_str();
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        match rest[start + 4..].find("-->") {
            Some(end) => rest = &rest[start + 4 + end + 3..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// A code fence's character and length (```` ``` ```` or `~~~`, three or more).
fn fence_of(line: &str) -> Option<(char, usize)> {
    let ch = line.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let len = line.chars().take_while(|&c| c == ch).count();
    (len >= 3).then_some((ch, len))
}

/// `---`, `===`, `***`, `~~~~`…: a setext underline, an rst adornment or a
/// thematic break (three or more of one punctuation character).
pub(crate) fn is_underline(line: &str) -> bool {
    let line = line.trim();
    let mut chars = line.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    "=-~^\"'`#*+:._".contains(first)
        && line.chars().filter(|c| !c.is_whitespace()).count() >= 3
        && line.chars().all(|c| c == first || c == ' ')
}

/// An ATX heading (`## Description`), with or without text.
fn is_heading(line: &str) -> bool {
    let hashes = line.len() - line.trim_start_matches('#').len();
    (1..=6).contains(&hashes)
        && line[hashes..]
            .chars()
            .next()
            .is_none_or(char::is_whitespace)
}

/// A line that is only bold text (`**Description**`, `__Why:__`), the way
/// templates write a heading.
fn is_bold_label(line: &str) -> bool {
    let line = line.trim_end_matches(':');
    ["**", "__"].iter().any(|m| {
        line.len() > 4
            && line.starts_with(m)
            && line.ends_with(m)
            && !line[2..line.len() - 2].contains(m)
    })
}

/// A Git trailer (`Signed-off-by: A <a@b>`, `Change-Id: I…`, `Cc: …`), or
/// the line `git cherry-pick -x` adds.
fn is_trailer(line: &str) -> bool {
    if line.starts_with("(cherry picked from commit ") {
        return true;
    }
    let Some((token, value)) = line.split_once(':') else {
        return false;
    };
    if value.is_empty() || !value.starts_with(' ') || token.is_empty() {
        return false;
    }
    let token = token.to_ascii_lowercase();
    if !token.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return false;
    }
    const KNOWN: [&str; 12] = [
        "cc",
        "change-id",
        "bug",
        "link",
        "closes",
        "fixes",
        "refs",
        "ref",
        "release-note",
        "backport-of",
        "pr-url",
        "reviewed-on",
    ];
    // A trailer's value is a name, an address or an id; a sentence after
    // `Bug:` is prose.
    let value = value.trim();
    let words = value.split_whitespace().count();
    let reference = value.contains('@') || value.contains('#') || value.contains("://");
    // `Signed-off-by`, `Co-authored-by`, `Reviewed-by`, `Acked-by`,
    // `Tested-by`, `Reported-by`, `Suggested-by`, `Helped-by`…
    (token.ends_with("-by") && (reference || words <= 4))
        || (KNOWN.contains(&token.as_str()) && (reference || words <= 2))
}

/// `- [ ] item`, `* [x] item`, `1. [X] item`.
fn is_checklist_item(line: &str) -> bool {
    list_item(line).is_some_and(|rest| {
        ["[ ]", "[x]", "[X]"].iter().any(|b| {
            rest.starts_with(b) && rest[3..].chars().next().is_none_or(char::is_whitespace)
        })
    })
}

/// The text of a list item line (`- a`, `* a`, `+ a`, `1. a`, `1) a`).
fn list_item(line: &str) -> Option<&str> {
    if let Some(rest) = line
        .strip_prefix("- ")
        .or_else(|| line.strip_prefix("* "))
        .or_else(|| line.strip_prefix("+ "))
    {
        return Some(rest.trim_start());
    }
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if (1..=9).contains(&digits) {
        let rest = &line[digits..];
        return rest
            .strip_prefix(". ")
            .or_else(|| rest.strip_prefix(") "))
            .map(str::trim_start);
    }
    None
}

/// A line that only points elsewhere: closing keywords and references to
/// issues and pull requests or URLs ("Fixes #12", "Closes: owner/repo#3,
/// #4", "Follow-up to #40", "See https://…"), with no prose of its own.
fn only_points_at_issues(line: &str) -> bool {
    const WORDS: [&str; 33] = [
        "fix",
        "fixes",
        "fixed",
        "fixing",
        "close",
        "closes",
        "closed",
        "closing",
        "resolve",
        "resolves",
        "resolved",
        "resolving",
        "see",
        "ref",
        "refs",
        "references",
        "related",
        "relates",
        "to",
        "part",
        "of",
        "follow-up",
        "followup",
        "follows",
        "up",
        "for",
        "issue",
        "issues",
        "pr",
        "also",
        "and",
        "cf",
        "supersedes",
    ];
    let line = list_item(line).unwrap_or(line);
    let mut references = 0;
    for word in line.split_whitespace() {
        let word = word.trim_matches(|c: char| matches!(c, ',' | ';' | ':' | '.' | '(' | ')'));
        if word.is_empty() || WORDS.contains(&word.to_ascii_lowercase().as_str()) {
            continue;
        }
        if is_reference(word) {
            references += 1;
        } else {
            return false;
        }
    }
    references > 0
}

/// `#12`, `owner/repo#12`, `GH-12`, a URL, or a Markdown link to one.
fn is_reference(word: &str) -> bool {
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if word.starts_with('[') && word.contains("](") {
        return true;
    }
    if let Some((repo, n)) = word.rsplit_once('#') {
        return number(n)
            && (repo.is_empty()
                || repo
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.')));
    }
    word.strip_prefix("GH-").is_some_and(number)
        || word.starts_with("https://")
        || word.starts_with("http://")
        || (word.starts_with('<') && word.ends_with('>') && word.contains("://"))
}

/// A line that is only an image (`![screenshot](…)`, or a linked badge).
fn is_image_only(line: &str) -> bool {
    (line.starts_with("![") || line.starts_with("[![")) && line.ends_with(')')
}

/// A line that is only HTML tags (`<details>`, `<img src=…>`,
/// `<summary>Notes</summary>`).
fn is_html_only(line: &str) -> bool {
    line.starts_with('<')
        && line.ends_with('>')
        && line[1..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')
}

/// The byte ranges of `text`'s code spans (backticks included), paired as
/// CommonMark pairs them: a run of n backticks opens a span that the next
/// run of exactly n backticks closes; an unmatched run is literal text.
pub fn code_spans(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let run_at = |at: usize| bytes[at..].iter().take_while(|&&b| b == b'`').count();
    let mut spans = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'`' {
            at += 1;
            continue;
        }
        let open = run_at(at);
        let mut probe = at + open;
        let mut closed = None;
        while probe < bytes.len() {
            if bytes[probe] == b'`' {
                let run = run_at(probe);
                if run == open {
                    closed = Some(probe + run);
                    break;
                }
                probe += run;
            } else {
                probe += 1;
            }
        }
        match closed {
            Some(end) => {
                spans.push(at..end);
                at = end;
            }
            None => at += open,
        }
    }
    spans
}

fn inside(spans: &[Range<usize>], at: usize) -> bool {
    spans.iter().any(|s| s.start < at && at < s.end)
}

/// Markdown and rustdoc links reduced to their text (`[text](url)`,
/// `[text][ref]`, `` [`Type`] `` → `text`, `` `Type` ``); images to their
/// alt text. A `[` right after a word (`list[str]`) and brackets inside code
/// spans are left alone.
pub fn plain_links(text: &str) -> String {
    let spans = code_spans(text);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        let ch = rest.chars().next().unwrap_or(' ');
        let in_code = spans.iter().any(|s| s.start <= at && at < s.end);
        let image = rest.starts_with("![");
        let opens = !in_code
            && (image || ch == '[')
            && !text[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '!');
        if opens {
            let label_start = at + if image { 2 } else { 1 };
            if let Some(close) = closing_bracket(text, label_start, &spans) {
                let label = &text[label_start..close];
                let mut end = close + 1;
                let after = &text[end..];
                if let Some(target) = after.strip_prefix('(') {
                    match target.find(')') {
                        Some(n) => end += 1 + n + 1,
                        None => {
                            out.push(ch);
                            at += ch.len_utf8();
                            continue;
                        }
                    }
                } else if let Some(reference) = after.strip_prefix('[') {
                    if let Some(n) = reference.find(']') {
                        end += 1 + n + 1;
                    }
                } else if after.starts_with(':') {
                    // A link reference definition, not a link.
                    out.push(ch);
                    at += ch.len_utf8();
                    continue;
                }
                out.push_str(&plain_links(label));
                at = end;
                continue;
            }
        }
        out.push(ch);
        at += ch.len_utf8();
    }
    out
}

/// The `]` that closes a link label opened at `from` (nested brackets
/// counted, code spans skipped), on the same paragraph.
fn closing_bracket(text: &str, from: usize, spans: &[Range<usize>]) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text[from..].char_indices() {
        let at = from + i;
        if spans.iter().any(|s| s.start <= at && at < s.end) {
            continue;
        }
        match c {
            '[' => depth += 1,
            ']' if depth == 0 => return (i > 0).then_some(at),
            ']' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// Abbreviations whose period ends no sentence.
const ABBREVIATIONS: [&str; 12] = [
    "e.g", "i.e", "etc", "vs", "cf", "approx", "incl", "resp", "mr", "dr", "no", "fig",
];

/// Byte offsets just past each sentence end of `text` (`.`, `!` or `?`,
/// closing quotes or brackets after it, then whitespace and no lowercase
/// letter, or the end), outside code spans, in order.
pub fn sentence_ends(text: &str) -> Vec<usize> {
    let spans = code_spans(text);
    let mut ends = Vec::new();
    for (at, c) in text.char_indices() {
        if !matches!(c, '.' | '!' | '?') || inside(&spans, at) {
            continue;
        }
        let mut end = at + 1;
        end += text[end..]
            .chars()
            .take_while(|c| matches!(c, ')' | '"' | '\'' | '’' | '”' | '*' | '_'))
            .map(char::len_utf8)
            .sum::<usize>();
        let after = &text[end..];
        if after.starts_with(['.', '!', '?']) {
            continue;
        }
        if !(after.is_empty() || after.starts_with(char::is_whitespace)) {
            continue;
        }
        if after
            .trim_start()
            .chars()
            .next()
            .is_some_and(char::is_lowercase)
        {
            continue;
        }
        if c == '.' {
            let word = text[..at]
                .rsplit(|c: char| c.is_whitespace() || c == '(')
                .next()
                .unwrap_or("")
                .to_lowercase();
            if ABBREVIATIONS.contains(&word.as_str()) || text[..at].ends_with('.') {
                continue;
            }
        }
        ends.push(end);
    }
    ends
}

/// `text` as one line: whitespace runs folded to one space, control and
/// format characters dropped.
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        let word: String = word
            .chars()
            .filter(|c| !c.is_control() && !is_format_char(*c))
            .collect();
        if word.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&word);
    }
    out
}

/// Unicode format characters (bidi overrides, zero-width joiners, …).
fn is_format_char(ch: char) -> bool {
    matches!(ch,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// `text` cut to at most `max` bytes between characters, `…` added when
/// cut: the one rule for a bounded field (a fact's text, a context line).
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("{}…", &text[..text.floor_char_boundary(max)])
}

/// `text` (folded to one line) in at most `max` characters: whole if it
/// fits; else up to its last sentence end that keeps at least a third of
/// the room, then ` …`; else up to the last space outside a code span that
/// fits, then `…`. `None` when nothing is left, or when not even the first
/// word fits (a cut word is no text).
pub fn cut_prose(text: &str, max: usize) -> Option<String> {
    let text = one_line(text);
    if text.is_empty() {
        return None;
    }
    if text.chars().nth(max).is_none() {
        return Some(text);
    }
    // Only the first `max` characters can be kept; a few times more are
    // read to pair code spans and judge sentence ends at the edge.
    let limit = text
        .char_indices()
        .nth(max * 4)
        .map_or(text.len(), |(i, _)| i);
    let window = &text[..limit];
    let chars_to = |at: usize| window[..at].chars().count();
    if let Some(end) = sentence_ends(window)
        .into_iter()
        .take_while(|&end| chars_to(end) + 2 <= max)
        .last()
        .filter(|&end| chars_to(end) * 3 >= max)
    {
        return Some(format!("{} …", &window[..end]));
    }
    cut_at_word(window, max)
}

/// The longest prefix of `text` (one line) ending between two words,
/// outside code spans (paired over all of `text`), that fits `max`
/// characters with `…` after it.
pub fn cut_at_word(text: &str, max: usize) -> Option<String> {
    let spans = code_spans(text);
    let cut = text
        .char_indices()
        .take(max)
        .filter(|&(at, c)| c == ' ' && !inside(&spans, at))
        .map(|(at, _)| at)
        .last()?;
    let kept = text[..cut].trim_end_matches([',', ';', ':', ' ']);
    (!kept.is_empty()).then(|| format!("{kept}…"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is(body: &str, want: Option<&str>) {
        assert_eq!(why(body).as_deref(), want, "{body:?}");
    }

    #[test]
    fn trailers_are_not_the_why() {
        // A squash merge's description: the commit messages, then trailers.
        is(
            "Signed-off-by: Ann Example <ann@example.com>\nCo-authored-by: Bo <bo@example.com>\n",
            None,
        );
        is(
            "Search was slow on big wikis.\n\nSigned-off-by: Ann Example <ann@example.com>",
            Some("Search was slow on big wikis."),
        );
        is(
            "Co-Authored-By: Bo <bo@example.com>\nReviewed-by: C <c@d>\nAcked-by: D <d@e>\nTested-by: E <e@f>\nChange-Id: I0123456789abcdef\nCc: stable@vger.kernel.org\n\nThe cache keyed entries by path only.",
            Some("The cache keyed entries by path only."),
        );
        // Inside a paragraph, the trailer line alone goes.
        is(
            "Handle empty bodies.\nSigned-off-by: Ann <ann@example.com>\n(cherry picked from commit 0123abc)",
            Some("Handle empty bodies."),
        );
        // A sentence with a colon in it is prose.
        is(
            "Note: the old flag still works.",
            Some("Note: the old flag still works."),
        );
    }

    #[test]
    fn html_comments_of_any_length_are_not_the_why() {
        is(
            "<!--\nThank you for your contribution!\nPlease describe the change.\n-->\n\nThe index was rebuilt on every read.",
            Some("The index was rebuilt on every read."),
        );
        is(
            "<!-- Describe the change -->\nThe real reason.\r\n\r\nMore.",
            Some("The real reason."),
        );
        is("Keeps <!-- hidden --> the rest.", Some("Keeps the rest."));
        is("<!-- only a hint -->", None);
        is("<!-- never closed\nPlease fill in", None);
    }

    #[test]
    fn checklists_and_empty_template_headings_are_not_the_why() {
        let template = "## Description\n\n## Checklist\n\n- [ ] Tests added\n- [x] Docs updated\n* [X] Changelog entry\n1. [ ] Signed the CLA\n";
        is(template, None);
        is(
            "## Description\n\nThe router matched trailing slashes twice.\n\n## Checklist\n- [x] Tests",
            Some("The router matched trailing slashes twice."),
        );
        is(
            "### Summary\nAdds `Router::fallback`.\n",
            Some("Adds `Router::fallback`."),
        );
        is(
            "**Description**\n\nA setext one follows.\n",
            Some("A setext one follows."),
        );
        is(
            "Description\n-----------\n\nWhy it matters.\n",
            Some("Why it matters."),
        );
        // A label over a checklist is a template's, not prose.
        is("Checklist:\n- [ ] tests\n- [ ] docs", None);
        // A list of changes is prose, joined into one line.
        is(
            "This PR:\n- adds a cache\n- drops the old index\n",
            Some("This PR: adds a cache; drops the old index"),
        );
    }

    #[test]
    fn lines_that_only_point_at_issues_are_not_the_why() {
        is("Fixes #12", None);
        is("Closes: owner/repo#3, #4.\nFollow-up to #40", None);
        is(
            "Resolves https://github.com/o/r/issues/5\n\nUploads were truncated at 2 GiB.",
            Some("Uploads were truncated at 2 GiB."),
        );
        is("See GH-123 and [#7](https://x/7)", None);
        // Prose that also names an issue stays.
        is(
            "Fixes #12 by caching the index.",
            Some("Fixes #12 by caching the index."),
        );
    }

    #[test]
    fn code_links_and_images_read_as_text() {
        is(
            "Bumps [serde](https://github.com/serde-rs/serde) from 1.0.1 to 1.0.2.\n<details>\n<summary>Release notes</summary>",
            Some("Bumps serde from 1.0.1 to 1.0.2."),
        );
        is(
            "![screenshot](https://x/y.png)\n\n`PATCH /todos/<id>` now answers 404 for a missing id.",
            Some("`PATCH /todos/<id>` now answers 404 for a missing id."),
        );
        // A fenced block is not the why; the prose after it is.
        is(
            "```\nstack trace\n```\n\nThe parser panicked on empty input.",
            Some("The parser panicked on empty input."),
        );
        // Brackets in code spans and after words are text.
        assert_eq!(
            plain_links("`a[b](c)` and list[str]"),
            "`a[b](c)` and list[str]"
        );
        assert_eq!(
            plain_links("Uses [`Router`] and [x][y]."),
            "Uses `Router` and x."
        );
        assert_eq!(
            plain_links("[docs]: https://docs.rs"),
            "[docs]: https://docs.rs"
        );
    }

    #[test]
    fn long_descriptions_are_cut_on_a_sentence_or_a_word() {
        let first = "The wiki grew past 64 KiB on busy repositories, and every job then rewrote the whole page.";
        let body = format!("{first} {}\n", "Another sentence follows here. ".repeat(20));
        let cut = why(&body).unwrap();
        assert!(cut.chars().count() <= MAX_WHY_CHARS, "{cut}");
        assert!(cut.ends_with(". …"), "on a sentence: {cut}");
        assert!(cut.starts_with(first), "{cut}");

        let words = format!("{} end", "word ".repeat(200));
        let cut = why(&words).unwrap();
        assert!(cut.chars().count() <= MAX_WHY_CHARS, "{cut}");
        assert!(cut.ends_with("word…"), "at a word: {cut}");

        // Never inside a code span.
        let body = format!("{}`a b c d e f g` tail", "x ".repeat(145));
        let cut = cut_prose(&body, MAX_WHY_CHARS).unwrap();
        assert!(!cut.contains('`'), "{cut}");
        assert!(cut.ends_with("x…"), "{cut}");
        // One word longer than the room is no text.
        assert_eq!(cut_prose(&"x".repeat(400), MAX_WHY_CHARS), None);
    }

    #[test]
    fn sentence_ends_skip_abbreviations_code_and_lowercase_continuations() {
        let text = "Uses e.g. `a. B` here. Then v1.2 ships! Done";
        let ends: Vec<&str> = sentence_ends(text).iter().map(|&e| &text[..e]).collect();
        assert_eq!(
            ends,
            [
                "Uses e.g. `a. B` here.",
                "Uses e.g. `a. B` here. Then v1.2 ships!"
            ]
        );
        assert_eq!(sentence_ends("Wait... what. Ok."), [13, 17]);
        assert_eq!(sentence_ends("He said \"go.\" Then"), [13]);
    }

    #[test]
    fn code_spans_pair_like_commonmark() {
        let text = "a `b` c ``d ` e`` `f";
        let spans: Vec<&str> = code_spans(text).into_iter().map(|r| &text[r]).collect();
        assert_eq!(spans, ["`b`", "``d ` e``"]);
        assert!(code_spans("no code").is_empty());
    }
}
