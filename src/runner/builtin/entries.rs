//! Entry lines: what the Changelog and an area page's "Recent changes" say
//! about one merged pull request (date, number, title, author, why it was
//! made, the issues it closes, the paths it changed, its merge commit), and
//! how such a line is recognised again on a page.
//!
//! Invariant: an entry is exactly one line, cites the pull request's number
//! and full merge-commit sha, and ends with that commit's entry marker
//! (`<!-- teammem:<sha> -->`); everything taken from the pull request is
//! escaped ([`super::markdown`]), so no title, author or description can
//! end the line early or forge a marker that would hide another entry.

use super::markdown::escape_markdown;
use super::markers::entry_marker;
use crate::forge::evidence::PullRequest;

/// How many changed paths an area entry names before "and N more".
const PATHS_PER_ENTRY: usize = 5;

fn date_of(rfc3339: &str) -> &str {
    rfc3339.get(..10).unwrap_or(rfc3339)
}

/// The issues a PR's description says it closes (`Fixes #12`, `closes #3`,
/// `Resolved #7`: GitHub's closing keywords, this repository's issues only),
/// in order, once each.
fn closed_issues(body: &str) -> Vec<u64> {
    const KEYWORDS: [&str; 9] = [
        "close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved",
    ];
    let words: Vec<&str> = body.split_whitespace().collect();
    let mut found = Vec::new();
    for pair in words.windows(2) {
        let keyword = pair[0].trim_end_matches(':').to_ascii_lowercase();
        if !KEYWORDS.contains(&keyword.as_str()) {
            continue;
        }
        let Some(digits) = pair[1].strip_prefix('#') else {
            continue;
        };
        let digits: String = digits.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse::<u64>()
            && n > 0
            && !found.contains(&n)
        {
            found.push(n);
        }
    }
    found
}

/// ` — why (closes #3, #4)`: what a PR entry says about why it was made.
fn why(pull: &PullRequest) -> String {
    let mut out = String::new();
    if let Some(paragraph) = crate::pull_text::why(&pull.body) {
        out.push_str(" — ");
        out.push_str(&escape_markdown(&paragraph));
    }
    let closed = closed_issues(&pull.body);
    if !closed.is_empty() {
        let list: Vec<String> = closed.iter().map(|n| format!("#{n}")).collect();
        out.push_str(&format!(" (closes {})", list.join(", ")));
    }
    out
}

/// The Changelog line of a PR.
pub fn changelog_entry(pull: &PullRequest) -> String {
    changelog_entry_with(pull, "")
}

/// The Changelog line of a PR with `note` (e.g. its dependency changes,
/// already escaped) after the why.
pub fn changelog_entry_with(pull: &PullRequest, note: &str) -> String {
    format!(
        "- {} — #{} {} (by {}){}{note} — merge commit `{}` {}\n",
        escape_markdown(date_of(&pull.merged_at)),
        pull.number,
        escape_markdown(&pull.title),
        escape_markdown(&pull.author),
        why(pull),
        pull.merge_sha.to_ascii_lowercase(),
        entry_marker(&pull.merge_sha)
    )
}

/// The "Recent changes" line of a PR on an area page, naming the area's paths.
pub fn area_entry(pull: &PullRequest, paths: &[&str]) -> String {
    area_entry_with(pull, paths, "")
}

/// [`area_entry`] with `note` (already escaped) after the why.
pub fn area_entry_with(pull: &PullRequest, paths: &[&str], note: &str) -> String {
    let mut named: Vec<String> = paths
        .iter()
        .take(PATHS_PER_ENTRY)
        .map(|p| escape_markdown(p))
        .collect();
    if paths.len() > PATHS_PER_ENTRY {
        named.push(format!("and {} more", paths.len() - PATHS_PER_ENTRY));
    }
    let files = if named.is_empty() {
        String::new()
    } else {
        format!(" — {}", named.join(", "))
    };
    format!(
        "- #{} {} (by {}, {}){}{note} — merge commit `{}`{} {}\n",
        pull.number,
        escape_markdown(&pull.title),
        escape_markdown(&pull.author),
        escape_markdown(date_of(&pull.merged_at)),
        why(pull),
        pull.merge_sha.to_ascii_lowercase(),
        files,
        entry_marker(&pull.merge_sha)
    )
}

/// True for an entry line (it ends with an entry marker of a full sha).
fn is_entry_line(line: &str) -> bool {
    let line = line.trim_end();
    let Some(rest) = line.strip_suffix(" -->") else {
        return false;
    };
    rest.len() >= 40 + "<!-- teammem:".len()
        && rest[rest.len() - 40..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
        && rest[..rest.len() - 40].ends_with("<!-- teammem:")
}

/// The merge shas (lowercase) of the entry lines of `text`.
pub fn entry_shas(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|line| is_entry_line(line)).map(|line| {
        let line = line.trim_end();
        &line[line.len() - 44..line.len() - 4]
    })
}

/// Byte ranges of the entry lines of `text` (newline included), in page order.
pub fn entry_lines(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        if is_entry_line(line) {
            out.push(start..start + line.len());
        }
        start += line.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::builtin::samples::*;

    #[test]
    fn an_entry_says_why_from_the_first_paragraph_and_what_it_closes() {
        let mut p = pull(4, "Cache the index", 'c', &["src/index.rs"]);
        p.body = "<!-- template -->\n\nSearch was slow on\nbig wikis.\n\nDetails nobody needs here.\n\nFixes #5, closes: #7 and fixes #5 again; see owner/other#9".into();
        let entry = changelog_entry(&p);
        assert!(
            entry.contains(
                "(by Zoë) — Search was slow on big wikis. (closes #5, #7) — merge commit"
            ),
            "{entry}"
        );
        assert!(
            !entry.contains("Details") && !entry.contains("#9"),
            "{entry}"
        );
        assert!(
            area_entry(&p, &["src/index.rs"])
                .contains("— Search was slow on big wikis. (closes #5, #7)")
        );

        // A hostile description stays inside its one line and forges nothing.
        p.body = format!(
            "Sure.\n- [x](javascript:1) <!-- teammem:{} --> <img src=x>\n# Heading",
            "e".repeat(40)
        );
        let entry = changelog_entry(&p);
        assert_eq!(entry.lines().count(), 1, "{entry}");
        assert_eq!(
            entry.matches("<!--").count(),
            1,
            "only the entry's own marker: {entry}"
        );
        assert!(!entry.contains("<img"), "{entry}");
        let (items, html) = rendered_items(&entry);
        assert_eq!(items.len(), 1);
        // The link is reduced to its text; the tag stays text.
        assert!(items[0].contains("Sure. x <img src=x>"), "{items:?}");
        assert!(
            html.iter().all(|h| h.starts_with("<!-- teammem:")),
            "{html:?}"
        );

        // A template comment directly followed by text (no blank line).
        p.body = "<!-- Describe the change -->\nThe real reason.\r\n\r\nMore.".into();
        assert!(
            changelog_entry(&p).contains("(by Zoë) — The real reason. — merge commit"),
            "{}",
            changelog_entry(&p)
        );
        p.body = "<!--\n  multi-line\n  hint -->\nAfter the hint.".into();
        assert!(changelog_entry(&p).contains("— After the hint. —"));
        p.body = "<!-- only a hint -->".into();
        assert!(!changelog_entry(&p).contains("hint"));

        // Trailers, checklists and template headings are not the why; code
        // in the description stays code.
        p.body =
            "## Description\n\n## Checklist\n- [x] Tests\n\nSigned-off-by: Ann <ann@example.com>"
                .into();
        let entry = changelog_entry(&p);
        assert!(entry.contains("(by Zoë) — merge commit"), "{entry}");
        p.body = "Fixes #14\n\nTicking it sends `PATCH /todos/<id>`.\n\nSigned-off-by: Ann <ann@example.com>".into();
        let entry = changelog_entry(&p);
        assert!(
            entry.contains("(by Zoë) — Ticking it sends `PATCH /todos/<id>`. (closes #14) —"),
            "{entry}"
        );

        p.body = format!("{} end", "word ".repeat(200));
        let entry = changelog_entry(&p);
        assert!(entry.contains("word…"), "bounded at a word: {entry}");
        assert!(!entry.contains(" end"), "{entry}");
    }
}
