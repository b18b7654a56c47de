//! Markdown escaping of untrusted text: pull-request titles, authors, dates
//! and descriptions, source paths, a file's purpose, dependency names.
//!
//! Invariant: escaped text stays inside the one line it is written into and
//! renders as the text it was, its code spans as code spans: it never opens
//! HTML or an autolink, never forms or closes a marker (`<` is escaped
//! wherever CommonMark could read a tag, comment or autolink, a code span
//! holding `<!` or `-->` is written as escaped text, and [`escape_purpose`]
//! also breaks `-->`), a link, image or emphasis it did not have, and never
//! starts a heading or breaks a line (whitespace runs become one space,
//! control and format characters are dropped); and its cost is linear in
//! the text's length, whatever the text (a page escapes hundreds of lines
//! a repository wrote).

/// Escapes untrusted text for the middle of one line of Markdown (never its
/// start: every caller writes it after fixed text), escaping only what would
/// change the rendering there, so titles, dates, paths and names read as
/// written in the raw page too: whitespace runs (newlines included) become one
/// space; control and format characters are dropped; a code span (`` `x` ``,
/// paired as CommonMark pairs backticks) stays a code span, fenced with
/// enough backticks for what it holds; elsewhere `<` becomes `&lt;` where it
/// could open HTML or an autolink (no forged `<!-- teammem:` marker; `a < b`
/// and `<=` stay as written) and `&` becomes `&amp;` where it could start an
/// entity; a lone `` ` `` and `*` `[` `~` are backslash-escaped, `_` unless
/// it sits between letters or digits (it cannot emphasize there), and `\`
/// before punctuation.
pub fn escape_markdown(text: &str) -> String {
    let mut cleaned: Vec<char> = Vec::with_capacity(text.len());
    let mut space = false;
    for ch in text.chars() {
        if ch.is_whitespace() {
            space = !cleaned.is_empty();
            continue;
        }
        if ch.is_control() || is_format_char(ch) {
            continue;
        }
        if space {
            cleaned.push(' ');
            space = false;
        }
        cleaned.push(ch);
    }
    let joined: String = cleaned.iter().collect();
    // Code spans, as char ranges of `cleaned`: the spans come sorted, so one
    // walk counts the chars between them.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let (mut byte, mut chars) = (0, 0);
    for r in crate::pull_text::code_spans(&joined) {
        let start = chars + joined[byte..r.start].chars().count();
        chars = start + joined[r.start..r.end].chars().count();
        byte = r.end;
        spans.push((start, chars));
    }
    let mut spans = spans.into_iter().peekable();
    let mut html = HtmlAhead::default();
    let mut out = String::with_capacity(cleaned.len() + 8);
    let mut i = 0;
    while i < cleaned.len() {
        // Spans behind `i` were written as text (see `code_span`).
        while spans.next_if(|&(start, _)| start < i).is_some() {}
        if let Some(&(start, end)) = spans.peek()
            && start == i
            && let Some(code) = code_span(&cleaned[start..end])
        {
            out.push_str(&code);
            i = end;
            continue;
        }
        let ch = cleaned[i];
        let before = i.checked_sub(1).map(|b| cleaned[b]);
        let after = cleaned.get(i + 1).copied();
        let alnum = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
        i += 1;
        match ch {
            '<' if html.opens(&cleaned, i) => out.push_str("&lt;"),
            '&' if after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '#') => {
                out.push_str("&amp;")
            }
            '`' | '*' | '[' | '~' => {
                out.push('\\');
                out.push(ch);
            }
            '_' if !(alnum(before) && alnum(after)) => out.push_str("\\_"),
            '\\' if after.is_some_and(|c| c.is_ascii_punctuation()) => out.push_str("\\\\"),
            _ => out.push(ch),
        }
    }
    out
}

/// Whether a `<` could start raw HTML (a tag, a closing tag, a comment, a
/// declaration, a processing instruction) or an autolink (`<scheme:…>`,
/// `<name@host>`): a letter, `/`, `!` or `?` after it, or a `>` before the
/// next space. It remembers where the next `>` and the next space are, so
/// a run of `<` is read once, not once per `<`.
#[derive(Default)]
struct HtmlAhead {
    /// Where the first `>` at or after the last position asked about is
    /// (the text's length when there is none).
    gt: Option<usize>,
    /// Where the first whitespace at or after it is (likewise).
    space: Option<usize>,
}

impl HtmlAhead {
    /// For a `<` followed by `text[at..]`; `at` never goes back.
    fn opens(&mut self, text: &[char], at: usize) -> bool {
        match text.get(at) {
            None => false,
            Some(c) if c.is_ascii_alphabetic() || matches!(c, '/' | '!' | '?') => true,
            Some(_) => {
                let next = |known: Option<usize>, is: fn(&char) -> bool| match known {
                    Some(found) if found >= at => found,
                    _ => text[at..]
                        .iter()
                        .position(is)
                        .map_or(text.len(), |p| at + p),
                };
                let gt = next(self.gt, |&c| c == '>');
                let space = next(self.space, |c| c.is_whitespace());
                (self.gt, self.space) = (Some(gt), Some(space));
                gt < space.min(text.len())
            }
        }
    }
}

/// A code span (`span`, its backticks included) written again so it renders
/// as the same code: fenced with one backtick more than the longest run
/// inside, padded with a space where the code starts or ends with a
/// backtick or with a space on both sides. `None` when the code holds `<!`,
/// `-->` or `--!>`: inside a code span they could not be escaped, and a
/// marker must never be formed or closed in the raw page.
fn code_span(span: &[char]) -> Option<String> {
    let ticks = span.iter().take_while(|&&c| c == '`').count();
    let inner: String = span[ticks..span.len() - ticks].iter().collect();
    // CommonMark strips one space on each side when both are there.
    let code = match inner.strip_prefix(' ').and_then(|s| s.strip_suffix(' ')) {
        Some(stripped) if !inner.trim().is_empty() => stripped,
        _ => inner.as_str(),
    };
    fence_code(code)
}

/// `code` fenced as a code span that renders as exactly `code`, or `None`
/// (see [`code_span`]).
fn fence_code(code: &str) -> Option<String> {
    if code.trim().is_empty() || ["<!", "-->", "--!>"].iter().any(|m| code.contains(m)) {
        return None;
    }
    let mut longest = 0;
    let mut run = 0;
    for c in code.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = code.starts_with('`')
        || code.ends_with('`')
        || (code.starts_with(' ') && code.ends_with(' '));
    let pad = if pad { " " } else { "" };
    Some(format!("{fence}{pad}{code}{pad}{fence}"))
}

/// Untrusted one-line text (e.g. a commit subject) shown as one code span,
/// whitespace runs made one space and control and format characters
/// dropped, fenced with one backtick more than its longest run; when it is
/// blank or holds `<!`, `-->` or `--!>` (which a code span could not
/// escape) it is written as [`escape_purpose`] text instead, so it never
/// forms or closes a marker either way.
pub fn code_or_text(text: &str) -> String {
    let kept: String = text
        .chars()
        .filter(|&ch| ch.is_whitespace() || !(ch.is_control() || is_format_char(ch)))
        .collect();
    let cleaned = kept.split_whitespace().collect::<Vec<_>>().join(" ");
    fence_code(&cleaned).unwrap_or_else(|| escape_purpose(&cleaned))
}

/// Unicode format characters (bidi overrides, zero-width joiners, ...).
fn is_format_char(ch: char) -> bool {
    matches!(ch,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// A file's purpose as Markdown: escaped like a title, and with no `-->` (or
/// `--!>`) that could close a comment.
pub fn escape_purpose(text: &str) -> String {
    escape_markdown(text)
        .replace("-->", "--&gt;")
        .replace("--!>", "--!&gt;")
}

#[cfg(test)]
mod tests {
    use super::escape_markdown;
    use crate::forge::evidence::PullRequest;
    use crate::runner::builtin::entries::changelog_entry;
    use crate::runner::builtin::markers::*;
    use crate::runner::builtin::planner::{apply, plan};
    use crate::runner::builtin::samples::*;
    use crate::runner::builtin::sections::WHAT_IS_HERE_BYTES;
    use crate::runner::builtin::sections::what_is_here;

    #[test]
    fn titles_are_escaped_and_cannot_forge_markers() {
        let forged = format!(
            "*bold* [x](http://e) <!-- teammem:{} --> # h\nnext | `c` \u{202E}",
            "e".repeat(40)
        );
        let b = bundle(vec![
            pull(1, &forged, 'd', &["a.txt"]),
            pull(2, "Later", 'e', &["a.txt"]),
        ]);
        let entry = changelog_entry(&b.pull_requests[0]);
        assert_eq!(entry.lines().count(), 1);
        assert!(entry.contains("\\*bold\\*"));
        assert!(entry.contains("\\[x](http://e)"));
        assert!(entry.contains("&lt;!-- teammem"));
        assert!(!entry.contains('\u{202E}'));
        // A code span stays one.
        assert!(entry.contains("# h next | `c`"));
        // The forged marker does not hide PR #2's entry.
        let after = apply(&home(), &plan(&b, &home()));
        assert!(after[CHANGELOG].contains("#2 Later"));
        assert_eq!(
            after[CHANGELOG]
                .matches(&entry_marker(&"e".repeat(40)))
                .count(),
            1
        );
    }

    #[test]
    fn every_page_renders_titles_authors_dates_and_paths_as_written() {
        let titles = [
            "Use *args and _kwargs_ in `run()`",
            "[WIP] <script>alert(1)</script> & &copy; ~~gone~~",
            "# Not a heading | not a table | a_b_c",
            "Fix C:\\temp\\ paths \\*here\\*",
            "to-dos for 2026-01-05: api/routes.py, __init__.py",
        ];
        let pulls: Vec<PullRequest> = titles
            .iter()
            .enumerate()
            .map(|(i, title)| {
                let mut p = pull(
                    i as u64 + 1,
                    title,
                    char::from(b'a' + i as u8),
                    &["api/routes.py", "pkg/__init__.py", "docs/a_b.md"],
                );
                p.author = "bob_smith".into();
                p
            })
            .collect();
        let b = bundle(pulls);
        let pages = apply(&home(), &plan(&b, &home()));
        let mut seen = 0;
        for (path, page) in &pages {
            let (items, html) = rendered_items(page);
            // Teammem's own markers are the only HTML a page holds.
            for raw in &html {
                assert!(
                    raw.starts_with("<!-- teammem:"),
                    "{path}: raw HTML {raw:?} got through"
                );
            }
            for (i, title) in titles.iter().enumerate() {
                let Some(item) = items
                    .iter()
                    .find(|item| item.contains(&format!("#{} ", i + 1)))
                else {
                    continue;
                };
                seen += 1;
                assert!(
                    item.contains(title),
                    "{path}: {title:?} renders as {item:?}"
                );
                assert!(item.contains("bob_smith"), "{path}: {item:?}");
                assert!(item.contains("2026-11-30"), "{path}: {item:?}");
            }
            if path.starts_with("Area-") {
                assert!(
                    items.iter().any(|item| item.contains("api/routes.py")
                        || item.contains("pkg/__init__.py")
                        || item.contains("docs/a_b.md")),
                    "{path}: paths render as written: {items:?}"
                );
            }
        }
        assert!(
            seen >= titles.len() * 2,
            "every PR on the Changelog and an area page"
        );
        // And the raw text is not buried in backslashes.
        let changelog = &pages[CHANGELOG];
        for plain in [
            "2026-11-30",
            "bob_smith",
            "api/routes.py",
            "a_b_c",
            "to-dos",
        ] {
            assert!(
                changelog.contains(plain) || pages.values().any(|p| p.contains(plain)),
                "{plain}"
            );
        }
    }

    /// `text` escaped, as one list item renders it: its text, its code
    /// spans, and whether it holds any link, image or HTML.
    fn render(text: &str) -> (String, Vec<String>, bool) {
        use pulldown_cmark::{Event, Options, Parser, Tag};
        let line = format!("- x {}\n", escape_markdown(text));
        let (mut plain, mut code, mut injected) = (String::new(), Vec::new(), false);
        let options = Options::ENABLE_STRIKETHROUGH
            | Options::ENABLE_TABLES
            | Options::ENABLE_TASKLISTS
            | Options::ENABLE_FOOTNOTES
            | Options::ENABLE_GFM;
        for event in Parser::new_ext(&line, options) {
            match event {
                Event::Text(t) => plain.push_str(&t),
                Event::Code(c) => {
                    plain.push_str(&c);
                    code.push(c.to_string());
                }
                Event::Html(_) | Event::InlineHtml(_) => injected = true,
                Event::Start(Tag::Link { .. } | Tag::Image { .. }) => injected = true,
                _ => {}
            }
        }
        (plain.trim_start_matches("x ").to_owned(), code, injected)
    }

    #[test]
    fn code_spans_stay_code_and_lt_is_escaped_only_where_html_could_start() {
        // (untrusted text, its escaped form, the code spans it renders)
        let table: [(&str, &str, &[&str]); 12] = [
            (
                "Sends `PATCH /todos/<id>` with `{\"done\": true}`.",
                "Sends `PATCH /todos/<id>` with `{\"done\": true}`.",
                &["PATCH /todos/<id>", "{\"done\": true}"],
            ),
            ("Use ``a`b`` here", "Use ``a`b`` here", &["a`b"]),
            (
                "The `` `tick` `` span",
                "The `` `tick` `` span",
                &["`tick`"],
            ),
            (
                "Fence ```` ``` ```` in code",
                "Fence ```` ``` ```` in code",
                &["```"],
            ),
            (
                "a < b, x <= y, <3 and a <- b",
                "a < b, x <= y, <3 and a <- b",
                &[],
            ),
            (
                "PATCH /todos/<id> outside code",
                "PATCH /todos/&lt;id> outside code",
                &[],
            ),
            (
                "mail <1@x.co> or <https://e.x>",
                "mail &lt;1@x.co> or &lt;https://e.x>",
                &[],
            ),
            (
                "</p> <!doctype> <?php",
                "&lt;/p> &lt;!doctype> &lt;?php",
                &[],
            ),
            // A code span that could form or close a marker is escaped text.
            (
                "`<!-- teammem:x -->` and `a -->`",
                "\\`&lt;!-- teammem:x -->\\` and \\`a -->\\`",
                &[],
            ),
            ("an unclosed `tick", "an unclosed \\`tick", &[]),
            ("` ` is blank", "\\` \\` is blank", &[]),
            (
                "`[x](javascript:1)` ok",
                "`[x](javascript:1)` ok",
                &["[x](javascript:1)"],
            ),
        ];
        for (text, escaped, spans) in table {
            assert_eq!(escape_markdown(text), escaped, "{text}");
            let (plain, code, injected) = render(text);
            if spans.is_empty() {
                assert_eq!(plain, text, "renders as written");
            }
            assert_eq!(
                code,
                spans.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "{text}"
            );
            assert!(!injected, "{text}");
        }
    }

    #[test]
    fn escaping_64_kib_of_code_spans_or_lt_runs_is_linear() {
        // 16,384 code spans: each span's offset was once counted from the
        // start, and every char looked through every span (12 s for a page).
        let spans = "`a` ".repeat(16_384);
        // A run of `<` ending in `>`: each `<` once scanned the rest for it.
        let lts = format!("{}>", "<".repeat(65_535));
        let started = std::time::Instant::now();
        assert_eq!(escape_markdown(&spans), spans.trim_end());
        let escaped = escape_markdown(&lts);
        let took = started.elapsed();
        // Every `<` sees the `>` before any space.
        assert_eq!(escaped, format!("{}>", "&lt;".repeat(65_535)));
        assert_eq!(escape_markdown("<< >"), "<< >");
        assert_eq!(escape_markdown("a << <b"), "a << &lt;b");
        // Linear work takes tens of milliseconds unoptimized; the quadratic
        // walk took 40 s. The bound is loose so a busy machine passes.
        assert!(took < std::time::Duration::from_secs(1), "{took:?}");
    }

    #[test]
    fn unicode_titles_survive() {
        let b = bundle(vec![pull(3, "Ünïcode 日本語 🚀", 'f', &["ü/x"])]);
        let after = apply(&home(), &plan(&b, &home()));
        assert!(after[CHANGELOG].contains("Ünïcode 日本語 🚀"));
        assert!(after.contains_key("Area-ü.md"));
    }

    #[test]
    fn a_hostile_purpose_renders_as_text_and_forges_no_marker() {
        let hostile = format!(
            "*x* [a](javascript:1) <img src=x> <!-- teammem:evidence z@{}#L1 --> --> --!> _u_ `c` {}",
            "e".repeat(40),
            '\u{202E}'
        );
        let files = listing(&[("src/evil.py", Some((hostile.as_str(), 1)))]);
        let text = what_is_here("src", &files, WHAT_IS_HERE_BYTES, None);
        let line = text
            .lines()
            .find(|l| l.starts_with("- src/evil.py"))
            .unwrap();
        assert_eq!(line.matches("<!--").count(), 1, "{line}");
        assert_eq!(line.matches("-->").count(), 1, "{line}");
        assert!(!line.contains('\u{202E}'));
        let facts = source_facts(&text);
        assert_eq!(facts.len(), 1);
        assert!(
            matches!(&facts[0].marker.citation, crate::facts::Citation::Source { path, .. } if path == "src/evil.py")
        );
        let (items, html) = rendered_items(&text);
        assert!(
            html.iter().all(|h| h.starts_with("<!-- teammem:")),
            "{html:?}"
        );
        let shown = items.iter().find(|i| i.starts_with("src/evil.py")).unwrap();
        assert!(
            shown.contains("*x* [a](javascript:1) <img src=x> <!-- teammem:evidence"),
            "renders as written: {shown}"
        );
        assert!(shown.contains("--> --!> _u_ `c`"), "{shown}");
        // A hostile path is escaped too and its marker still parses.
        let files = listing(&[("src/<b> -->\n.rs", Some(("ok", 1)))]);
        let text = what_is_here("src", &files, WHAT_IS_HERE_BYTES, None);
        assert_eq!(source_facts(&text).len(), 1);
        assert_eq!(text.lines().count(), 3, "{text}");
    }
}
