//! The shapes of the lines teammem's builtin agent writes, read back from
//! page text: pull-request entries (the Changelog's and an area page's),
//! "What is here" items, "Who knows this area" authors, the Dependencies
//! page's manifests and entries, area pages and their quarter pages.
//!
//! Invariants: pure; nothing here is trusted to be teammem's (a person may
//! have written any line), so a line that does not have the expected shape
//! is `None`, never a guess, every field comes back plain (Markdown escapes
//! undone) and bounded to [`MAX_FIELD_BYTES`]; no input panics; reading a
//! line takes time linear in its length, and an entry line longer than
//! [`MAX_ENTRY_LINE_BYTES`] is not read at all.
//!
//! The `wiki` layer cannot import the runner that writes these lines, so the
//! shapes are restated here; `tests/it/mcp/context.rs` reads pages the real
//! builtin agent wrote, which keeps the two in step.

/// Longest text field taken from a line (cut between characters, `…` added).
pub const MAX_FIELD_BYTES: usize = 400;

/// Longest line [`parse_entry`] reads. The runner's entry lines stay far
/// below it: a title of at most 256 bytes, a why of at most 300 characters,
/// the issues a description of at most 4 KiB closes, 1 KiB of path names
/// past the first, a merge subject of at most 256 bytes, each escaped at
/// most a few-fold (about 1 KiB on real histories, under 16 KiB in the
/// worst case).
pub const MAX_ENTRY_LINE_BYTES: usize = 32 * 1024;

/// What starts every teammem comment.
const TEAMMEM: &str = "<!-- teammem:";
pub const WHAT_IS_HERE_ANCHOR: &str = "<!-- teammem:what-is-here -->";
pub const WHAT_IS_HERE_END: &str = "<!-- teammem:what-is-here-end -->";
pub const FILE_MARKER: &str = "<!-- teammem:file -->";
pub const WHO_KNOWS_ANCHOR: &str = "<!-- teammem:who-knows -->";
pub const WHO_KNOWS_END: &str = "<!-- teammem:who-knows-end -->";
const AUTHOR_MARKER: &str = "<!-- teammem:author ";
pub const DEPENDENCIES_ANCHOR: &str = "<!-- teammem:dependencies -->";
pub const DEPENDENCIES_END: &str = "<!-- teammem:dependencies-end -->";
pub const MANIFEST_MARKER: &str = "<!-- teammem:manifest -->";
const MERGE_COMMIT: &str = " — merge commit `";
const DEPENDENCY_NOTE: &str = " — dependencies: ";

pub use crate::pull_text::bounded;

/// Markdown escapes undone: `\X` for ASCII punctuation, `&lt;`, `&gt;`,
/// `&amp;`, and a code span's backticks.
pub fn unescape(text: &str) -> String {
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '\\' if chars.peek().is_some_and(char::is_ascii_punctuation) => {
                out.extend(chars.next());
            }
            '`' => {}
            _ => out.push(ch),
        }
    }
    out
}

/// The merge sha (lowercase hex) an entry line ends with:
/// `… <!-- teammem:<40 hex> -->`.
pub fn entry_sha(line: &str) -> Option<&str> {
    let rest = line.trim_end().strip_suffix(" -->")?;
    let at = rest.len().checked_sub(40)?;
    let sha = rest.get(at..)?;
    (sha.bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        && rest[..at].ends_with(TEAMMEM))
    .then_some(sha)
}

/// One pull request's entry line, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub number: u64,
    pub title: String,
    pub author: String,
    /// `YYYY-MM-DD` as written (empty when the line has none).
    pub date: String,
    /// Why it was made (with what it closes and any later note), plain.
    pub why: String,
    /// The dependency changes the Changelog line names, plain.
    pub dependencies: Option<String>,
    pub merge_commit: String,
    /// The changed paths an area entry names (exact, unescaped).
    pub paths: Vec<String>,
    /// "and N more": paths the entry did not name.
    pub more_paths: usize,
    /// Files the pull request renamed, `(old, new)`, named `old → new` (both
    /// paths are in `paths` too).
    pub renamed: Vec<(String, String)>,
    /// The merge it reached the default branch through (subject and short
    /// sha, plain), when it came through another branch.
    pub arrived_through: Option<String>,
}

/// ` — arrived through SUBJECT (abc1234)` at the start of `rest`: the note,
/// plain, and what follows it.
fn arrived(rest: &str) -> (Option<String>, &str) {
    const NOTE: &str = " — arrived through ";
    let Some(note) = rest.strip_prefix(NOTE) else {
        return (None, rest);
    };
    for (at, _) in note.match_indices(" (") {
        // Only ` (` + seven hex digits + `)` can be the short sha: checked in
        // place, not by searching on for a `)` (quadratic over many ` (`).
        let short = &note[at + 2..];
        let shape = short.as_bytes();
        if shape.len() >= 8
            && shape[..7].iter().all(u8::is_ascii_hexdigit)
            && shape[7] == b')'
            && (short[8..].is_empty() || short[8..].starts_with(" — "))
        {
            let after = &short[8..];
            let text = format!("{} ({})", unescape(&note[..at]), &short[..7]);
            return (Some(bounded(&text, MAX_FIELD_BYTES)), after);
        }
    }
    (None, rest)
}

/// Reads an entry line of either shape:
/// `- DATE — #N TITLE (by AUTHOR) — WHY — merge commit `SHA` <!-- teammem:SHA -->`
/// (Changelog) or `- #N TITLE (by AUTHOR, DATE) — WHY — merge commit `SHA` — PATHS <!-- teammem:SHA -->`
/// (area page).
pub fn parse_entry(line: &str) -> Option<Entry> {
    if line.len() > MAX_ENTRY_LINE_BYTES {
        return None;
    }
    read_entry(line)
}

/// [`parse_entry`] without the length bound (linear in the line's length).
fn read_entry(line: &str) -> Option<Entry> {
    let sha = entry_sha(line)?.to_owned();
    let body = line.trim().strip_prefix("- ")?;
    let body = &body[..body.rfind(TEAMMEM)?];
    let at = body.rfind(MERGE_COMMIT)?;
    let (head, tail) = (&body[..at], &body[at + MERGE_COMMIT.len()..]);
    let tail = tail.trim_end();
    let after_sha = tail.strip_prefix(sha.as_str())?.strip_prefix('`')?;
    let (mut paths, mut more_paths, mut renamed) = (Vec::new(), 0, Vec::new());
    let (arrived_through, after_sha) = arrived(after_sha);
    if let Some(list) = after_sha.strip_prefix(" — ") {
        for named in list.split(", ") {
            let more = named
                .strip_prefix("and ")
                .and_then(|n| n.strip_suffix(" more"))
                .and_then(|n| n.parse::<usize>().ok());
            match (more, named.split_once(" → ")) {
                (Some(n), _) => more_paths = n,
                (None, Some((old, new))) => {
                    let (old, new) = (unescape(old), unescape(new));
                    paths.extend([new.clone(), old.clone()]);
                    renamed.push((old, new));
                }
                (None, None) => paths.push(unescape(named)),
            }
        }
    }
    let (date, rest) = match head.get(..10) {
        Some(date) if is_date(date) && head[10..].starts_with(" — #") => {
            (Some(date.to_owned()), &head[10 + " — ".len()..])
        }
        _ => (None, head),
    };
    let rest = rest.strip_prefix('#')?;
    let digits = rest.find(' ')?;
    let number: u64 = rest[..digits].parse().ok()?;
    let rest = &rest[digits + 1..];
    // The author's group closes at the first `)` that ends the head or
    // comes before ` — `, with a ` (by ` before it: one after the first
    // ` (by ` (found once, so the scan stays linear).
    let from = rest.find(" (by ")? + " (by ".len();
    let close = rest[from..]
        .match_indices(')')
        .map(|(i, _)| from + i)
        .find(|&i| {
            let after = &rest[i + 1..];
            after.is_empty() || after.starts_with(" — ")
        })?;
    let by = rest[..close].rfind(" (by ")?;
    let title = &rest[..by];
    let mut author = &rest[by + " (by ".len()..close];
    let date = match date {
        Some(date) => date,
        None => {
            let (name, date) = author.rsplit_once(", ")?;
            author = name;
            date.to_owned()
        }
    };
    let mut why = rest[close + 1..]
        .strip_prefix(" — ")
        .unwrap_or_default()
        .to_owned();
    let mut dependencies = None;
    if let Some(at) = why.find(DEPENDENCY_NOTE) {
        dependencies = Some(bounded(
            &unescape(&why[at + DEPENDENCY_NOTE.len()..]),
            MAX_FIELD_BYTES,
        ));
        why.truncate(at);
    } else if let Some(note) = why.strip_prefix("dependencies: ") {
        dependencies = Some(bounded(&unescape(note), MAX_FIELD_BYTES));
        why.clear();
    }
    Some(Entry {
        arrived_through,
        number,
        title: bounded(&unescape(title), MAX_FIELD_BYTES),
        author: bounded(&unescape(author), MAX_FIELD_BYTES),
        date: unescape(&date),
        why: bounded(&unescape(&why), MAX_FIELD_BYTES),
        dependencies,
        merge_commit: sha,
        paths,
        more_paths,
        renamed,
    })
}

fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// An author line of "Who knows this area": the name (from the marker's
/// hex, so the name as recorded) and the pull-request count.
pub fn parse_author(line: &str) -> Option<(String, u64)> {
    let at = line.find(AUTHOR_MARKER)?;
    let rest = line[at + AUTHOR_MARKER.len()..].trim_end();
    let rest = rest.strip_suffix("-->")?.trim_end();
    let (count, hex) = rest.split_once(' ')?;
    let count: u64 = count.parse().ok()?;
    if hex.len() % 2 != 0 || hex.len() > 2 * MAX_FIELD_BYTES {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    let name = String::from_utf8(bytes?).ok()?;
    Some((name, count))
}

/// A "What is here" item without a purpose: `- PATH <!-- teammem:file -->`.
pub fn listed_file(line: &str) -> Option<String> {
    let path = line.trim().strip_suffix(FILE_MARKER)?.trim();
    let path = path.strip_prefix("- ")?;
    Some(unescape(path))
}

/// The text after `- PATH — ` of a "What is here" item or a dependency line
/// (`- flask — ==3.1.0`): `(before, after)` around the first ` — `, plain.
pub fn split_item(text: &str) -> Option<(String, String)> {
    let text = text.trim().strip_prefix("- ")?;
    let (before, after) = text.split_once(" — ")?;
    Some((unescape(before), unescape(after)))
}

/// The folder an area page is about, from its first description line:
/// `Some("api/")` for "files under `api/`", `Some("")` for "at the
/// repository root".
pub fn area_folder(page: &str) -> Option<String> {
    for line in page.lines().take(12) {
        if let Some(at) = line.find("files under `") {
            let rest = &line[at + "files under `".len()..];
            let end = rest.find('`')?;
            return Some(unescape(&rest[..end]));
        }
        if line.contains("files at the repository root") {
            return Some(String::new());
        }
    }
    None
}

/// The current page a quarter page belongs to: `Area-api-2026-Q1.md` →
/// `Area-api.md` (`-YYYY-QN` or `-undated`, then an optional part `-K`).
pub fn quarter_base(path: &str) -> Option<String> {
    let name = path.strip_suffix(".md")?;
    let tail = |rest: &str| -> Option<usize> {
        let len = 7;
        let at = rest.len().checked_sub(len)?;
        let tag = rest.get(at..)?;
        let quarter = tag
            .get(..4)
            .is_some_and(|y| y.bytes().all(|b| b.is_ascii_digit()))
            && tag.get(4..6).is_some_and(|q| q.eq_ignore_ascii_case("-q"))
            && tag.get(6..).is_some_and(|n| ("1"..="4").contains(&n));
        (quarter || tag.eq_ignore_ascii_case("undated"))
            .then_some(at)
            .filter(|&at| at > 1 && rest[..at].ends_with('-'))
    };
    if let Some(at) = tail(name) {
        return Some(format!("{}.md", &name[..at - 1]));
    }
    let (rest, part) = name.rsplit_once('-')?;
    part.parse::<u32>().ok().filter(|p| *p >= 2)?;
    let at = tail(rest)?;
    Some(format!("{}.md", &rest[..at - 1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "2e9a3bee300a020c426b9fde945cca5a741dd3ff";

    #[test]
    fn both_entry_shapes_read_back() {
        let changelog = format!(
            "- 2026-01-05 — #5 One store per user (by Bob) — Each user gets their own SQLite file. (closes #15) — dependencies: flask ==3.0.0 → ==3.1.0 (pyproject.toml) — merge commit `{SHA}` <!-- teammem:{SHA} -->"
        );
        let entry = parse_entry(&changelog).unwrap();
        assert_eq!(entry.number, 5);
        assert_eq!(entry.title, "One store per user");
        assert_eq!(entry.author, "Bob");
        assert_eq!(entry.date, "2026-01-05");
        assert_eq!(
            entry.why,
            "Each user gets their own SQLite file. (closes #15)"
        );
        assert_eq!(
            entry.dependencies.as_deref(),
            Some("flask ==3.0.0 → ==3.1.0 (pyproject.toml)")
        );
        assert!(entry.paths.is_empty());

        let area = format!(
            "- #4 Mark \\*done\\* (by Alice (QA), 2026-01-05) — Sends `PATCH /todos/<id>`. — merge commit `{SHA}` — web/index.html, web/my\\_todos.js, and 3 more <!-- teammem:{SHA} -->"
        );
        let entry = parse_entry(&area).unwrap();
        assert_eq!((entry.number, entry.title.as_str()), (4, "Mark *done*"));
        assert_eq!(entry.author, "Alice (QA)");
        assert_eq!(entry.date, "2026-01-05");
        assert_eq!(entry.why, "Sends PATCH /todos/<id>.");
        assert_eq!(entry.paths, ["web/index.html", "web/my_todos.js"]);
        assert_eq!(entry.more_paths, 3);

        // Through another branch's merge (its subject may hold anything).
        let through = format!(
            "- #8 T (by A, 2026-02-01) — Why. — merge commit `{SHA}` — arrived through `Merge (x) — y, z` (abc1234) — a.rs, b.rs <!-- teammem:{SHA} -->"
        );
        let entry = parse_entry(&through).unwrap();
        assert_eq!(
            entry.arrived_through.as_deref(),
            Some("Merge (x) — y, z (abc1234)")
        );
        assert_eq!(entry.paths, ["a.rs", "b.rs"]);
        let through = format!(
            "- 2026-02-01 — #8 T (by A) — merge commit `{SHA}` — arrived through Merge \\`x (abc1234) <!-- teammem:{SHA} -->"
        );
        let entry = parse_entry(&through).unwrap();
        assert_eq!(entry.arrived_through.as_deref(), Some("Merge `x (abc1234)"));
        assert!(entry.paths.is_empty());

        // No why at all.
        let bare =
            format!("- #7 T (by A, 2026-02-01) — merge commit `{SHA}` <!-- teammem:{SHA} -->");
        assert_eq!(parse_entry(&bare).unwrap().why, "");
        for broken in [
            format!("- #x T (by A) — merge commit `{SHA}` <!-- teammem:{SHA} -->"),
            format!("- #7 no author — merge commit `{SHA}` <!-- teammem:{SHA} -->"),
            format!("#7 T (by A, d) <!-- teammem:{SHA} -->"),
            format!(
                "- #7 T (by A, d) — merge commit `{SHA}` <!-- teammem:{} -->",
                "A".repeat(40)
            ),
            "- é — merge commit ` <!-- teammem:".into(),
        ] {
            assert_eq!(parse_entry(&broken), None, "{broken}");
        }
    }

    #[test]
    fn a_hostile_entry_line_is_read_in_linear_time() {
        // Each `)` before ` — ` once searched the whole head before it for
        // ` (by `, and each ` (` of an arrived-through note searched on for a
        // `)`: 2 MiB lines took seconds to minutes.
        let tail = format!(" — merge commit `{SHA}` <!-- teammem:{SHA} -->");
        let many = 2 * 1024 * 1024 / 4;
        let closes = format!("- #1 T{}{tail}", ") — ".repeat(many));
        let opens = format!(
            "- #1 T (by A, 2026-01-05) — merge commit `{SHA}` — arrived through {}x) <!-- teammem:{SHA} -->",
            " (".repeat(many)
        );
        let titled = format!(
            "- #1 {}T (by A, 2026-01-05) — Why.{tail}",
            "x) — ".repeat(many / 2)
        );
        let started = std::time::Instant::now();
        assert_eq!(read_entry(&closes), None);
        let arrived = read_entry(&opens).unwrap();
        assert_eq!(
            (arrived.arrived_through, arrived.author),
            (None, "A".into())
        );
        let entry = read_entry(&titled).unwrap();
        assert_eq!((entry.author.as_str(), entry.why.as_str()), ("A", "Why."));
        assert!(entry.title.starts_with("x) — x) — "), "{}", entry.title);
        for line in [&closes, &opens, &titled] {
            assert!(line.len() > MAX_ENTRY_LINE_BYTES);
            assert_eq!(parse_entry(line), None);
        }
        let elapsed = started.elapsed();
        assert!(elapsed.as_secs_f64() < 1.0, "{elapsed:?}");

        // The same shape under the bound is read.
        let titled = format!(
            "- #1 {}T (by A, 2026-01-05) — Why.{tail}",
            "x) — ".repeat(1_000)
        );
        assert_eq!(parse_entry(&titled).unwrap().why, "Why.");
    }

    #[test]
    fn authors_items_areas_and_quarters() {
        assert_eq!(
            parse_author("- Zoë — 2 pull requests <!-- teammem:author 2 5a6fc3ab -->"),
            Some(("Zoë".into(), 2))
        );
        assert_eq!(parse_author("- x <!-- teammem:author 2 5 -->"), None);
        assert_eq!(
            listed_file("- storage/schema\\_v1.sql <!-- teammem:file -->").as_deref(),
            Some("storage/schema_v1.sql")
        );
        assert_eq!(
            split_item("- api/routes.py — PATCH /todos/&lt;id>"),
            Some(("api/routes.py".into(), "PATCH /todos/<id>".into()))
        );
        assert_eq!(
            area_folder(
                "# Area: api\n\nPull requests that changed files under `api/` (kept by teammem).\n"
            )
            .as_deref(),
            Some("api/")
        );
        assert_eq!(
            quarter_base("Area-api-2026-Q1.md").as_deref(),
            Some("Area-api.md")
        );
        assert_eq!(
            quarter_base("Changelog-2026-Q3-2.md").as_deref(),
            Some("Changelog.md")
        );
        assert_eq!(
            quarter_base("Changelog-undated.md").as_deref(),
            Some("Changelog.md")
        );
        assert_eq!(quarter_base("Area-api.md"), None);
        assert_eq!(quarter_base("Area-x-2026-Q5.md"), None);
        assert_eq!(bounded("aé", 2), "a…");
    }
}
