//! A wiki page's Markdown as the dashboard shows it to people: CommonMark
//! (with GitHub's tables, strikethrough, task lists and `[[Page]]` links)
//! rendered by pulldown-cmark, with the lines of stale facts highlighted.
//!
//! The page is untrusted (anyone who may edit the wiki wrote it), so it is
//! made safe by construction, not cleaned afterwards:
//! - no raw HTML from the page reaches the output: every HTML block and
//!   every inline tag or comment is shown as escaped text, and teammem's own
//!   comments (`<!-- teammem:… -->`) are dropped (the text is folded first,
//!   [`crate::wiki::fold::fold_text`], and what HTML remains is cut again);
//!   the only tags in the output are pulldown-cmark's own and this file's
//!   fixed ones;
//! - no script-capable URL: a link keeps its destination only when that is
//!   http, https or mailto; a relative one becomes a link to the wiki's page
//!   under `/wiki/{owner}/{name}/` (built here from percent-encoded
//!   segments); anything else (`javascript:`, `data:`, `vbscript:`, a
//!   `//host` address, …) renders as its text, inert;
//! - nothing is loaded: an image renders as a link to its http(s) address
//!   (or as its alt text), never an `<img>`, so a page cannot track its
//!   readers;
//! - bounded: one pass over the parsed events plus a binary search per block
//!   for stale lines, linear in the page (at most 256 KiB); no input panics.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::ops::Range;

use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

use super::escape;

/// A stale fact of the page: its (1-based) line, and what changed it.
pub(super) struct Stale {
    pub line: usize,
    /// The source commit that changed (or deleted) the cited lines.
    pub changed_in: String,
    /// The cited file is gone at `changed_in`.
    pub deleted: bool,
    /// What the fact cites (`path Lx-Ly`), for the note's tooltip.
    pub cited: String,
}

/// Where the page's relative links point: the wiki's pages on the dashboard.
pub(super) struct Links {
    /// `/wiki/{owner}/{name}/`, percent-encoded.
    root: String,
    /// The folder of the page being rendered (empty at the wiki's top).
    folder: Vec<String>,
}

impl Links {
    /// Links from `page` (`Area-src.md`, `docs/Intro.md`) of `repository`'s wiki.
    pub(super) fn new(repository: &str, page: &str) -> Self {
        let mut folder: Vec<String> = page.split('/').map(str::to_owned).collect();
        folder.pop();
        Links {
            root: wiki_root(repository),
            folder,
        }
    }
}

/// `/wiki/{owner}/{name}/`: the index of `repository`'s wiki on the dashboard.
pub(super) fn wiki_root(repository: &str) -> String {
    format!("/wiki/{}/", encode_path(repository))
}

/// A page as HTML, and the lines of its stale facts that could not be
/// highlighted (inside an HTML or code block, or not on the page): the page
/// must say so rather than let a fact hide its staleness.
pub(super) struct Rendered {
    pub html: String,
    pub unmarked: Vec<usize>,
}

/// The page's Markdown (teammem's markers in it or not) as HTML, the blocks
/// that hold a line of `stale` marked (`<mark class=stale>`) with a note
/// saying which commit changed the fact.
pub(super) fn render(markdown: &str, links: &Links, stale: &[Stale]) -> Rendered {
    let text = crate::wiki::fold::fold_text(markdown);
    let mut options =
        Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS | Options::ENABLE_WIKILINKS;
    if table_cells_bound(&text) <= text.len() + TABLE_CELLS_SLACK {
        options |= Options::ENABLE_TABLES;
    }
    let events: Vec<(Event, Range<usize>)> =
        Parser::new_ext(&text, options).into_offset_iter().collect();
    let (mut notes, unmarked) = stale_notes(&text, &events, stale);
    let mut out: Vec<Event> = Vec::with_capacity(events.len() + 2 * notes.len());
    // The note of the block being written, shown where its own text ends.
    let mut pending: Option<String> = None;
    // The text of the HTML block being read, shown escaped at its end.
    let mut html_block: Option<String> = None;
    // What each open link or image became, to close it alike.
    let mut opened: Vec<Opened> = Vec::new();
    let mut events = events.into_iter().enumerate().peekable();
    while let Some((at, (event, _))) = events.next() {
        match event {
            Event::Start(tag) => {
                if !is_inline(&tag.to_end()) {
                    flush(&mut pending, &mut out);
                }
                match tag {
                    Tag::HtmlBlock => html_block = Some(String::new()),
                    Tag::Link {
                        link_type,
                        dest_url,
                        title,
                        id,
                    } => match href(link_type, &dest_url, links) {
                        Some(href) => {
                            let link_type = if link_type == LinkType::Email {
                                LinkType::Email
                            } else {
                                LinkType::Inline
                            };
                            out.push(Event::Start(Tag::Link {
                                link_type,
                                dest_url: href.into(),
                                title,
                                id,
                            }));
                            opened.push(Opened::Link);
                        }
                        None => {
                            out.push(Event::Html("<span class=inert-link>".into()));
                            opened.push(Opened::Span);
                        }
                    },
                    Tag::Image {
                        dest_url, title, ..
                    } => {
                        out.push(Event::Html("<span class=image>".into()));
                        let external =
                            href(LinkType::Inline, &dest_url, links).filter(|h| is_web_address(h));
                        if let Some(href) = external {
                            out.push(Event::Start(Tag::Link {
                                link_type: LinkType::Inline,
                                dest_url: href.into(),
                                title,
                                id: CowStr::Borrowed(""),
                            }));
                            opened.push(Opened::ImageLink);
                        } else {
                            opened.push(Opened::Span);
                        }
                        let no_alt =
                            matches!(events.peek(), Some((_, (Event::End(TagEnd::Image), _))));
                        out.push(Event::Text(if no_alt { "image" } else { "image: " }.into()));
                    }
                    tag => {
                        let marked = notes.remove(&at);
                        out.push(Event::Start(tag));
                        if let Some(note) = marked {
                            out.push(Event::Html("<mark class=stale>".into()));
                            pending = Some(note);
                        }
                    }
                }
            }
            Event::End(end) => {
                if !is_inline(&end) {
                    flush(&mut pending, &mut out);
                }
                match end {
                    TagEnd::HtmlBlock => {
                        let shown = drop_markers(&html_block.take().unwrap_or_default());
                        if !shown.trim().is_empty() {
                            out.push(Event::Html("<pre class=raw-html><code>".into()));
                            out.push(Event::Text(shown.into()));
                            out.push(Event::Html("</code></pre>\n".into()));
                        }
                    }
                    TagEnd::Link | TagEnd::Image => match opened.pop() {
                        Some(Opened::Link) => out.push(Event::End(TagEnd::Link)),
                        Some(Opened::ImageLink) => {
                            out.push(Event::End(TagEnd::Link));
                            out.push(Event::Html("</span>".into()));
                        }
                        Some(Opened::Span) => out.push(Event::Html("</span>".into())),
                        None => {}
                    },
                    end => out.push(Event::End(end)),
                }
            }
            Event::Html(html) | Event::InlineHtml(html) => match html_block.as_mut() {
                Some(block) => block.push_str(&html),
                None => {
                    let shown = drop_markers(&html);
                    if !shown.is_empty() {
                        out.push(Event::Text(shown.into()));
                    }
                }
            },
            event => out.push(event),
        }
    }
    flush(&mut pending, &mut out);
    let mut html = String::with_capacity(text.len() + text.len() / 2);
    pulldown_cmark::html::push_html(&mut html, out.into_iter());
    Rendered { html, unmarked }
}

/// Table cells a page may hold beyond one per byte of its text before its
/// tables are shown as text (see [`table_cells_bound`]).
const TABLE_CELLS_SLACK: usize = 4096;

/// An upper bound on the cells pulldown-cmark would make of the page's
/// tables: for each delimiter row (`|-|:-:|`, under a line holding a `|`),
/// its columns times the lines down to the next blank one. The parser pads
/// every short row to the header's width (up to 2^18 cells per table), so a
/// few KiB of one-cell rows under a wide header would become millions of
/// cells: past one cell per byte of the page (plus [`TABLE_CELLS_SLACK`]),
/// which written cells never reach, [`render`] parses without tables and
/// the page stays linear in its size.
fn table_cells_bound(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let mut cells: usize = 0;
    let mut at = 1;
    while at < lines.len() {
        let row = lines[at].trim_start_matches(|c: char| c.is_whitespace() || c == '>');
        let is_delimiter = row.contains('-')
            && row.contains('|')
            && row
                .chars()
                .all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'));
        if !is_delimiter || !lines[at - 1].contains('|') {
            at += 1;
            continue;
        }
        let columns = row
            .split('|')
            .filter(|cell| !cell.trim().is_empty())
            .count();
        let rows = lines[at + 1..]
            .iter()
            .take_while(|line| {
                !line
                    .trim_matches(|c: char| c.is_whitespace() || c == '>')
                    .is_empty()
            })
            .count();
        cells = cells.saturating_add(columns.saturating_mul(rows + 1));
        at += rows + 1;
    }
    cells
}

/// What an opened link or image was turned into.
enum Opened {
    Link,
    /// An image shown as a link to its address, inside a `<span class=image>`.
    ImageLink,
    /// An inert link, or an image shown as its alt text.
    Span,
}

/// Closes the stale mark of the block being written, with its note.
fn flush(pending: &mut Option<String>, out: &mut Vec<Event>) {
    if let Some(note) = pending.take() {
        out.push(Event::Html("</mark>".into()));
        out.push(Event::Html(note.into()));
    }
}

/// Emphasis, links and the like: they never hold a block.
fn is_inline(end: &TagEnd) -> bool {
    matches!(
        end,
        TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::Link
            | TagEnd::Image
    )
}

/// Blocks whose own text a stale line can be marked in.
fn is_markable(tag: &Tag) -> bool {
    matches!(
        tag,
        Tag::Paragraph | Tag::Heading { .. } | Tag::Item | Tag::TableCell
    )
}

/// The note of each block (by its event's index) that holds a stale line:
/// the innermost markable block whose text overlaps the line (the last one
/// in document order, as blocks nest); and the lines of the stale facts no
/// block holds, in page order.
fn stale_notes(
    text: &str,
    events: &[(Event, Range<usize>)],
    stale: &[Stale],
) -> (BTreeMap<usize, String>, Vec<usize>) {
    let mut line_starts = vec![0];
    line_starts.extend(text.match_indices('\n').map(|(at, _)| at + 1));
    // Each stale line's span (without its ending), in page order.
    let mut lines: Vec<(Range<usize>, &Stale)> = stale
        .iter()
        .filter_map(|fact| {
            let start = *line_starts.get(fact.line.checked_sub(1)?)?;
            let end = line_starts.get(fact.line).copied().unwrap_or(text.len());
            let end = start + text[start..end].trim_end_matches(['\n', '\r']).len();
            (end > start).then_some((start..end, fact))
        })
        .collect();
    lines.sort_by_key(|(span, _)| span.start);
    let mut owner: Vec<Option<usize>> = vec![None; lines.len()];
    for (at, (event, range)) in events.iter().enumerate() {
        let Event::Start(tag) = event else { continue };
        if !is_markable(tag) {
            continue;
        }
        let first = lines.partition_point(|(span, _)| span.end <= range.start);
        for (k, (span, _)) in lines.iter().enumerate().skip(first) {
            if span.start >= range.end {
                break;
            }
            owner[k] = Some(at);
        }
    }
    let mut grouped: BTreeMap<usize, Vec<&Stale>> = BTreeMap::new();
    // Facts not on the page (a line past its end) hold no block either.
    let on_page: std::collections::BTreeSet<usize> =
        lines.iter().map(|(_, fact)| fact.line).collect();
    let mut unmarked: Vec<usize> = stale
        .iter()
        .map(|fact| fact.line)
        .filter(|line| !on_page.contains(line))
        .collect();
    for ((_, fact), owner) in lines.iter().zip(owner) {
        match owner {
            Some(at) => grouped.entry(at).or_default().push(fact),
            None => unmarked.push(fact.line),
        }
    }
    unmarked.sort_unstable();
    let notes = grouped
        .into_iter()
        .map(|(at, facts)| (at, note(&facts)))
        .collect();
    (notes, unmarked)
}

/// ` <span class=stale-note>stale: changed in abc1234</span>` for the
/// facts of one block (each commit once).
fn note(facts: &[&Stale]) -> String {
    let mut shown: Vec<String> = Vec::new();
    let mut titles: Vec<String> = Vec::new();
    for fact in facts {
        let short: String = fact.changed_in.chars().take(7).collect();
        let said = if fact.deleted {
            format!("deleted in {short}")
        } else {
            format!("changed in {short}")
        };
        if !shown.contains(&said) {
            shown.push(said);
        }
        titles.push(format!(
            "{} {} {}",
            fact.cited,
            if fact.deleted {
                "deleted in"
            } else {
                "changed in"
            },
            fact.changed_in
        ));
    }
    let mut out = String::new();
    let _ = write!(
        out,
        " <span class=stale-note title=\"{}\">stale: {}</span>",
        escape(&titles.join("; ")),
        escape(&shown.join(", "))
    );
    out
}

/// `html` without teammem's comments (an unterminated one runs to the end).
fn drop_markers(html: &str) -> String {
    const OPEN: &str = "<!-- teammem:";
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        rest = after.find("-->").map_or("", |end| &after[end + 3..]);
    }
    out.push_str(rest);
    out
}

/// Whether `href` (as [`href`] made it) leaves for the web.
fn is_web_address(href: &str) -> bool {
    let lower = href.get(..8).unwrap_or(href).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// Where a link of the page may point, or `None` (inert): http, https and
/// mailto addresses as written; an e-mail autolink (pulldown-cmark adds
/// `mailto:`); a fragment of this page; any other relative destination as
/// the wiki's page it names. A destination with any other scheme, or with
/// control characters, has none.
fn href(link_type: LinkType, dest: &str, links: &Links) -> Option<String> {
    // As a browser reads an address: tabs and line breaks anywhere are
    // ignored, as are controls and spaces at either end.
    let cleaned: String = dest
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let cleaned = cleaned.trim_matches(|c: char| c <= ' ');
    if cleaned.chars().any(|c| c.is_control()) {
        return None;
    }
    if link_type == LinkType::Email {
        return (!cleaned.contains(':')).then(|| cleaned.to_owned());
    }
    if let Some(at) = cleaned.find([':', '/', '?', '#', '\\'])
        && cleaned[at..].starts_with(':')
    {
        let scheme = cleaned[..at].to_ascii_lowercase();
        return matches!(scheme.as_str(), "http" | "https" | "mailto").then(|| cleaned.to_owned());
    }
    if cleaned.starts_with("//") || cleaned.starts_with("\\\\") || cleaned.starts_with("/\\") {
        return None;
    }
    if let Some(fragment) = cleaned.strip_prefix('#') {
        return Some(format!("#{}", encode_path(&percent_decode(fragment))));
    }
    let wiki_link = matches!(link_type, LinkType::WikiLink { .. });
    Some(page_href(links, cleaned, wiki_link))
}

/// The dashboard's address of the page a relative destination names: from
/// the linking page's folder (`/…` from the wiki's top), `.` and `..`
/// resolved (never above the top), each segment percent-encoded; a
/// `[[Page name]]`'s spaces are hyphens, as GitHub names its files.
fn page_href(links: &Links, dest: &str, wiki_link: bool) -> String {
    let (path, fragment) = match dest.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (dest, None),
    };
    let path = path.split('?').next().unwrap_or_default();
    let mut path = percent_decode(path);
    if wiki_link {
        path = path.trim().replace(' ', "-");
    }
    let mut segments: Vec<String> = if path.starts_with('/') {
        Vec::new()
    } else {
        links.folder.clone()
    };
    for segment in path.split(['/', '\\']) {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            segment => segments.push(segment.to_owned()),
        }
    }
    let mut out = links.root.clone();
    out.push_str(&encode_path(&segments.join("/")));
    if let Some(fragment) = fragment.filter(|f| !f.is_empty()) {
        out.push('#');
        out.push_str(&encode_path(&percent_decode(fragment)));
    }
    out
}

/// A page path as URL segments (each segment percent-encoded, `/` kept).
pub(super) fn encode_path(page: &str) -> String {
    page.split('/')
        .map(|segment| {
            segment
                .bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// `%XX` escapes decoded (bytes that do not make UTF-8 are replaced).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|b| hex(*b)),
                bytes.get(i + 2).and_then(|b| hex(*b)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links() -> Links {
        Links::new("octo/app", "Home.md")
    }

    fn html(markdown: &str) -> String {
        render(markdown, &links(), &[]).html
    }

    /// Every tag of `out` is one this renderer may write, with only the
    /// attributes it writes, and every link goes where links may go.
    fn assert_only_known_markup(out: &str) {
        const TAGS: &[&str] = &[
            "a",
            "p",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "ul",
            "ol",
            "li",
            "em",
            "strong",
            "del",
            "code",
            "pre",
            "blockquote",
            "table",
            "thead",
            "tbody",
            "tr",
            "th",
            "td",
            "hr",
            "br",
            "input",
            "span",
            "mark",
        ];
        const ATTRIBUTES: &[&str] = &[
            "href", "title", "class", "start", "type", "disabled", "checked", "style",
        ];
        let mut rest = out;
        while let Some(at) = rest.find('<') {
            rest = &rest[at + 1..];
            let end = rest.find('>').expect("every tag is closed");
            let tag = rest[..end].trim_start_matches('/').trim_end_matches('/');
            rest = &rest[end..];
            let mut parts = tag.splitn(2, ' ');
            let name = parts.next().unwrap_or_default();
            assert!(TAGS.contains(&name), "tag <{name}> in {out}");
            let mut attributes = parts.next().unwrap_or_default();
            while !attributes.trim().is_empty() {
                let attribute = attributes.trim_start();
                let name_end = attribute.find(['=', ' ']).unwrap_or(attribute.len());
                let attribute_name = &attribute[..name_end];
                assert!(
                    ATTRIBUTES.contains(&attribute_name),
                    "attribute {attribute_name:?} of <{name}> in {out}"
                );
                let after = &attribute[name_end..];
                let (value, remaining) = if let Some(quoted) = after.strip_prefix("=\"") {
                    let close = quoted.find('"').expect("a closed attribute value");
                    (&quoted[..close], &quoted[close + 1..])
                } else if let Some(bare) = after.strip_prefix('=') {
                    let close = bare.find(' ').unwrap_or(bare.len());
                    (&bare[..close], &bare[close..])
                } else {
                    ("", after)
                };
                if attribute_name == "href" {
                    assert!(
                        ["/wiki/octo/app/", "#", "http://", "https://", "mailto:"]
                            .iter()
                            .any(|p| value.starts_with(p)),
                        "href {value:?} in {out}"
                    );
                }
                if attribute_name == "style" {
                    assert!(
                        value.starts_with("text-align: "),
                        "style {value:?} in {out}"
                    );
                }
                attributes = remaining;
            }
        }
    }

    #[test]
    fn the_markup_check_catches_what_it_must() {
        for bad in [
            "<img src=x>",
            "<p onclick=\"x\">",
            "<a href=\"javascript:x\">",
            "<a href=\"//evil.example\">",
            "<script>",
            "<span style=\"color:red\">",
        ] {
            let caught = std::panic::catch_unwind(|| assert_only_known_markup(bad));
            assert!(caught.is_err(), "{bad} passed the check");
        }
        assert_only_known_markup("<p><a href=\"/wiki/octo/app/Home\" title=\"t\">x</a></p>");
    }

    #[test]
    fn markdown_renders_as_people_read_it() {
        let out = html(
            "# Title\n\nSome *emphasis*, **strong**, ~~gone~~ and `code`.\n\n- one\n- two\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\n- [x] done\n\n> quoted\n\n```\nfn main() {}\n```\n",
        );
        for expected in [
            "<h1>Title</h1>",
            "<em>emphasis</em>",
            "<strong>strong</strong>",
            "<del>gone</del>",
            "<code>code</code>",
            "<li>one</li>",
            "<table>",
            "<td>1</td>",
            "type=\"checkbox\"",
            "<blockquote>",
            "<pre><code>fn main() {}",
        ] {
            assert!(out.contains(expected), "{expected:?} in {out}");
        }
        assert_only_known_markup(&out);
    }

    #[test]
    fn no_html_of_the_page_and_no_script_capable_url_reaches_the_output() {
        let hostile = [
            (
                "<script>document.title='pwned'</script>\n",
                "&lt;script&gt;",
            ),
            (
                "<img src=x onerror=\"document.title='pwned'\">\n",
                "&lt;img",
            ),
            ("text <img src=x onerror=alert(1)> more\n", "&lt;img src=x"),
            ("a <b onclick=alert(1)>bold</b>\n", "&lt;b onclick"),
            (
                "<iframe src=\"https://evil.example\"></iframe>\n",
                "&lt;iframe",
            ),
            ("<style>body{display:none}</style>\n", "&lt;style&gt;"),
            ("<div>\n\n*md inside*\n\n</div>\n", "&lt;div&gt;"),
            ("<svg onload=alert(1)>\n", "&lt;svg"),
            ("<a href=\"javascript:alert(1)\">x</a>\n", "&lt;a href"),
            ("[x](javascript:alert(1))\n", "inert-link"),
            ("[x](JaVaScRiPt:alert(1))\n", "inert-link"),
            ("[x](java&#09;script:alert(1))\n", "inert-link"),
            ("[x](&#106;avascript:alert(1))\n", "inert-link"),
            ("[x]( <javascript:alert(1)>)\n", "x"),
            ("[x](vbscript:msgbox(1))\n", "inert-link"),
            ("[x](data:text/html;base64,PHNjcmlwdD4=)\n", "inert-link"),
            ("[x](//evil.example/path)\n", "inert-link"),
            ("[x](/\\evil.example/path)\n", "inert-link"),
            ("[x][r]\n\n[r]: javascript:alert(1)\n", "inert-link"),
            ("<javascript:alert(1)>\n", "inert-link"),
            ("[[javascript:alert(1)]]\n", "inert-link"),
            ("![t](javascript:alert(1))\n", "image: t"),
            ("![t](data:image/png;base64,AAAA)\n", "image: t"),
            ("[x](\"onmouseover=alert(1))\n", "x"),
            (
                "[x](https://ok.example/\"onmouseover=\"alert(1))\n",
                "https://ok.example/",
            ),
        ];
        for (page, expected) in hostile {
            let out = html(page);
            assert!(out.contains(expected), "{expected:?} for {page:?} in {out}");
            assert_only_known_markup(&out);
            let lower = out.to_ascii_lowercase();
            assert!(!lower.contains("<a href=\"javascript"), "{page:?}: {out}");
            assert!(!lower.contains("<a href=\"data"), "{page:?}: {out}");
        }
    }

    #[test]
    fn allowed_links_keep_their_address() {
        let out = html(
            "[web](https://example.com/a?b=1#c) [plain](http://example.com) [mail](mailto:a@example.com) <b@example.com> <https://auto.example>\n",
        );
        for expected in [
            "<a href=\"https://example.com/a?b=1#c\">web</a>",
            "<a href=\"http://example.com\">plain</a>",
            "<a href=\"mailto:a@example.com\">mail</a>",
            "<a href=\"mailto:b@example.com\">b@example.com</a>",
            "<a href=\"https://auto.example\">https://auto.example</a>",
        ] {
            assert!(out.contains(expected), "{expected:?} in {out}");
        }
        assert_only_known_markup(&out);
    }

    #[test]
    fn images_are_never_loaded() {
        let out = html(
            "![pixel](https://tracker.example/p.gif) ![](https://tracker.example/q.gif) ![local](diagram.png)\n",
        );
        assert!(!out.contains("<img"), "{out}");
        assert!(
            out.contains(
                "<span class=image><a href=\"https://tracker.example/p.gif\">image: pixel</a></span>"
            ),
            "{out}"
        );
        assert!(
            out.contains(">image</a></span>"),
            "an image without alt text: {out}"
        );
        assert!(
            out.contains("<span class=image>image: local</span>"),
            "{out}"
        );
        assert_only_known_markup(&out);
    }

    #[test]
    fn links_between_pages_work_with_and_without_md() {
        let out = html(
            "[a](Area-src) [b](Area-src.md) [[Area-src]] [[Area src]] [[Shown|Area-src]] [c](Area-src#Who-knows) [d](#top) [e](Page%20Name) [f](../../../Home) [g](/Home.md?x=1)\n",
        );
        for expected in [
            "<a href=\"/wiki/octo/app/Area-src\">a</a>",
            "<a href=\"/wiki/octo/app/Area-src.md\">b</a>",
            "<a href=\"/wiki/octo/app/Area-src\">Area-src</a>",
            "<a href=\"/wiki/octo/app/Area-src\">Area src</a>",
            "<a href=\"/wiki/octo/app/Area-src#Who-knows\">c</a>",
            "<a href=\"#top\">d</a>",
            "<a href=\"/wiki/octo/app/Page%20Name\">e</a>",
            "<a href=\"/wiki/octo/app/Home\">f</a>",
            "<a href=\"/wiki/octo/app/Home.md\">g</a>",
        ] {
            assert!(out.contains(expected), "{expected:?} in {out}");
        }
        assert!(
            out.contains(">Shown</a>") || out.contains(">Area-src</a>"),
            "{out}"
        );
        // From a page in a folder, relative to that folder.
        let nested = render(
            "[up](../Home) [here](Next)",
            &Links::new("octo/app", "guide/Intro.md"),
            &[],
        )
        .html;
        assert!(nested.contains("href=\"/wiki/octo/app/Home\""), "{nested}");
        assert!(
            nested.contains("href=\"/wiki/octo/app/guide/Next\""),
            "{nested}"
        );
        assert_only_known_markup(&out);
    }

    #[test]
    fn teammem_markers_are_never_shown() {
        let a = "a".repeat(40);
        let page = format!(
            "# T <!-- teammem:section -->\n\nThe files. <!-- teammem:what-is-here -->\n- x.rs — X. <!-- teammem:evidence x.rs@{a}#L2-L4 -->\n<!-- teammem:what-is-here-end -->\n\n<!-- teammem:changelog -->\n\nHalf <!-- teammem:evidence z.rs\nplain <!-- a person's comment -->\n"
        );
        let out = html(&page);
        assert!(!out.contains("teammem"), "{out}");
        assert!(
            out.contains("<h1>T</h1>") && out.contains("<li>x.rs — X.</li>"),
            "{out}"
        );
        assert!(
            out.contains("&lt;!-- a person&#39;s comment --&gt;")
                || out.contains("&lt;!-- a person's comment --&gt;"),
            "{out}"
        );
        // Raw HTML that holds a marker: the marker goes, the rest is text.
        let out = html("<div>\n<!-- teammem:x -->\n</div>\n");
        assert!(
            !out.contains("teammem") && out.contains("&lt;div&gt;"),
            "{out}"
        );
        assert_eq!(drop_markers("a<!-- teammem:x -->b<!-- teammem:y"), "ab");
    }

    #[test]
    fn stale_facts_are_highlighted_with_the_commit_that_changed_them() {
        let (a, b) = ("a".repeat(40), "b".repeat(40));
        let page = format!(
            "# T\n\n- fresh. <!-- teammem:evidence x.rs@{a}#L1 -->\n- old. <!-- teammem:evidence y.rs@{a}#L2 stale={b} -->\n  - nested\n\nA paragraph\nover two lines. <!-- teammem:evidence z.rs@{a}#L3 stale={b} deleted -->\n\n| k | v |\n|---|---|\n| cell | held. <!-- teammem:evidence w.rs@{a}#L4 stale={b} --> |\n"
        );
        let stale: Vec<Stale> = crate::wiki::fold::fold(&page)
            .citations
            .into_iter()
            .filter(|c| c.status == "stale")
            .map(|c| Stale {
                line: c.line,
                changed_in: c.changed_in.unwrap_or_default(),
                deleted: c.deleted,
                cited: c.path.unwrap_or_default(),
            })
            .collect();
        assert_eq!(stale.len(), 3);
        let out = render(&page, &links(), &stale).html;
        assert!(
            out.contains("<li>fresh.</li>"),
            "a current fact is not marked: {out}"
        );
        assert!(
            out.contains(&format!(
                "<li><mark class=stale>old.</mark> <span class=stale-note title=\"y.rs changed in {b}\">stale: changed in bbbbbbb</span>\n<ul>"
            )),
            "{out}"
        );
        assert!(out.contains("<li>nested</li>"), "{out}");
        assert!(
            out.contains("<p><mark class=stale>A paragraph\nover two lines.</mark> <span class=stale-note title=\"z.rs deleted in"),
            "{out}"
        );
        assert!(
            out.contains(">stale: deleted in bbbbbbb</span></p>"),
            "{out}"
        );
        assert!(
            out.contains("<td><mark class=stale>held.</mark> <span class=stale-note"),
            "{out}"
        );
        assert_eq!(out.matches("class=stale>").count(), 3, "{out}");
        assert!(!out.contains("teammem"), "{out}");
        assert_only_known_markup(&out);
        assert!(render(&page, &links(), &stale).unmarked.is_empty());
        // A stale fact pulled into an HTML block or a code block cannot be
        // highlighted: the render says which lines, for the page to name.
        let hiding = format!(
            "<div>\nOld. <!-- teammem:evidence a.rs@{a}#L1 stale={b} -->\n\n    code <!-- teammem:evidence c.rs@{a}#L1 stale={b} -->\n\nShown. <!-- teammem:evidence d.rs@{a}#L1 stale={b} -->\n"
        );
        let stale: Vec<Stale> = [2, 4, 6]
            .map(|line| Stale {
                line,
                changed_in: b.clone(),
                deleted: false,
                cited: String::new(),
            })
            .into();
        let rendered = render(&hiding, &links(), &stale);
        assert_eq!(rendered.unmarked, [2, 4], "{}", rendered.html);
        assert_eq!(
            rendered.html.matches("<mark class=stale>").count(),
            1,
            "{}",
            rendered.html
        );
    }

    #[test]
    fn tables_padded_past_their_text_are_shown_as_text() {
        // A wide header over one-cell rows: the parser would pad each row to
        // 362 cells (2.4 MB of HTML from 2.9 KB).
        let table = format!(
            "|{}\n|{}\n{}\n",
            "a|".repeat(362),
            "-|".repeat(362),
            "x\n".repeat(724)
        );
        for page in [
            table.clone(),
            table.repeat(4),
            format!("> {}", table.replace('\n', "\n> ")),
        ] {
            let out = html(&page);
            assert!(
                out.len() < 16 * page.len(),
                "{} bytes of HTML from {}",
                out.len(),
                page.len()
            );
            assert!(!out.contains("<table>"), "{}", &out[..200]);
            assert_only_known_markup(&out);
        }
        // Tables as people write them still render, however many.
        let row = "| name | kind | since | owner | notes |\n";
        let fair = format!("{row}|---|---|---|---|---|\n{}\n", row.repeat(400)).repeat(20);
        let out = html(&fair);
        assert_eq!(out.matches("<table>").count(), 20);
        assert_eq!(out.matches("<td>name</td>").count(), 20 * 400);
        // Short rows under a narrow header are padded as GitHub pads them.
        let out = html("| a | b | c |\n|---|---|---|\n| 1 |\n");
        assert!(out.contains("<td>1</td><td></td><td></td>"), "{out}");
    }

    #[test]
    fn large_and_many_inputs_are_bounded() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        // A 64 KiB line of hostile text.
        let line = "<script>x</script>[y](javascript:z) ".repeat(64 * 1024 / 36);
        let out = html(&line);
        assert!(!out.contains("<script") && !out.contains("<a href=\"javascript"));
        assert!(out.len() < line.len() * 4, "output grows linearly");
        // 10,000 stale markers, each on its own list item.
        let page: String = (0..10_000)
            .map(|i| {
                format!(
                    "- fact {i} <!-- teammem:evidence f.rs@{a}#L{} stale={b} -->\n",
                    i + 1
                )
            })
            .collect();
        let stale: Vec<Stale> = (0..10_000)
            .map(|i| Stale {
                line: i + 1,
                changed_in: b.clone(),
                deleted: false,
                cited: "f.rs".into(),
            })
            .collect();
        let out = render(&page, &links(), &stale).html;
        assert_eq!(out.matches("<mark class=stale>").count(), 10_000);
        assert!(!out.contains("teammem"));
        // 10,000 markers on one line, and stale lines that are not there.
        let crowded = format!(
            "x {}\n",
            format!("<!-- teammem:evidence f.rs@{a}#L1 --> ").repeat(10_000)
        );
        let beyond = [usize::MAX, 0, 99].map(|line| Stale {
            line,
            changed_in: b.clone(),
            deleted: false,
            cited: String::new(),
        });
        let rendered = render(&crowded, &links(), &beyond);
        assert_eq!(
            rendered.unmarked,
            [0, 99, usize::MAX],
            "facts not on the page are not highlighted"
        );
        let out = rendered.html;
        assert_eq!(out.trim(), "<p>x</p>");
        // Deep nesting and unbalanced brackets.
        for deep in [
            ">".repeat(10_000) + " q\n",
            "[".repeat(10_000) + "\n",
            "*a ".repeat(10_000) + "\n",
            "- ".repeat(5_000) + "x\n",
            "<".repeat(10_000) + "\n",
        ] {
            let out = html(&deep);
            assert_only_known_markup(&out);
        }
    }

    #[test]
    fn random_pages_of_tricky_pieces_keep_every_invariant() {
        const PIECES: &[&str] = &[
            "<",
            ">",
            "[",
            "]",
            "(",
            ")",
            "!",
            "*",
            "`",
            "\n",
            "\n\n",
            " ",
            "javascript:",
            "https://x.example/",
            "<!-- teammem:evidence a.rs@",
            "-->",
            "<script>",
            "</script>",
            "|",
            "- ",
            "# ",
            "> ",
            "&#106;",
            "\\",
            "\"",
            "'",
            "[[",
            "]]",
            "mailto:",
            "%2e%2e",
            "..",
            "/",
            "\t",
            "    ",
            "1. ",
            "~~",
            "_",
            "data:",
            "<img src=x onerror=y>",
            "|---|",
            "<div>",
            "![",
            "](",
            "text",
            "&amp;",
            "\r\n",
            "<!--",
            "//",
        ];
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |bound: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) as usize) % bound
        };
        for _ in 0..2_000 {
            let page: String = (0..next(60)).map(|_| PIECES[next(PIECES.len())]).collect();
            let stale: Vec<Stale> = (0..next(4))
                .map(|_| Stale {
                    line: next(12),
                    changed_in: "c".repeat(40),
                    deleted: next(2) == 0,
                    cited: "<x.rs>".into(),
                })
                .collect();
            let out = render(&page, &links(), &stale).html;
            assert_only_known_markup(&out);
            assert!(
                !out.contains("&lt;!-- teammem:"),
                "{page:?} shows a marker: {out}"
            );
            let lower = out.to_ascii_lowercase();
            assert!(
                !lower.contains("<a href=\"javascript") && !lower.contains("<a href=\"data"),
                "{page:?}: {out}"
            );
        }
    }
}
