//! Entry lines: what the Changelog and an area page's "Recent changes" say
//! about one merged pull request (date, number, title, author, why it was
//! made, the issues it closes, the paths it changed (a renamed file as
//! `old → new`), its merge commit and,
//! for a pull request merged through another branch, the default branch's
//! merge that brought it), and how such a line is recognised again on a page.
//!
//! Invariant: an entry is exactly one line, cites the pull request's number
//! and full merge-commit sha, and ends with that commit's entry marker
//! (`<!-- teammem:<sha> -->`); everything taken from the pull request is
//! escaped ([`super::markdown`]), so no title, author, description or
//! subject of the merge it arrived through can end the line early or forge a
//! marker that would hide another entry.

use super::markdown::{code_or_text, escape_markdown};
use super::markers::entry_marker;
use crate::forge::evidence::PullRequest;

/// How many bytes of changed paths an area entry names before "and N
/// more" (the first path is always named). `get_context` links a pull
/// request to a file only through this list, so it holds every path one
/// pull request changed in an area on real histories (pallets/flask's last
/// 600 merges: at most 19 in `src/flask`; encode/httpx's 1,268: at most 22
/// in `httpx` but for one 51-file change), and is bounded so a broad change
/// (a reformat, a move) stays one line of a bounded page. At five paths,
/// the bound before, a third of httpx's recall misses were such links.
const PATH_BYTES_PER_ENTRY: usize = 1024;

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

/// ` — arrived through `Merge branch 'stable'` (abc1234)` when the PR's
/// merge commit reached the default branch through a merged branch; empty
/// otherwise. The subject is untrusted (anyone who can push a merge writes
/// it): one code span, or escaped text where a code span could not hold it.
fn arrived(pull: &PullRequest) -> String {
    let Some(through) = &pull.arrived_through else {
        return String::new();
    };
    let short: String = through
        .merge_sha
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(7)
        .collect::<String>()
        .to_ascii_lowercase();
    format!(
        " — arrived through {} ({short})",
        code_or_text(&through.subject)
    )
}

/// The Changelog line of a PR.
pub fn changelog_entry(pull: &PullRequest) -> String {
    changelog_entry_with(pull, "")
}

/// The Changelog line of a PR with `note` (e.g. its dependency changes,
/// already escaped) after the why.
pub fn changelog_entry_with(pull: &PullRequest, note: &str) -> String {
    format!(
        "- {} — #{} {} (by {}){}{note} — merge commit `{}`{} {}\n",
        escape_markdown(date_of(&pull.merged_at)),
        pull.number,
        escape_markdown(&pull.title),
        escape_markdown(&pull.author),
        why(pull),
        pull.merge_sha.to_ascii_lowercase(),
        arrived(pull),
        entry_marker(&pull.merge_sha)
    )
}

/// How an area entry names `path`: escaped, and for a file the pull request
/// renamed (by its new path or its old one) `old → new`, so the history of
/// the old path stays findable from the new one (`wiki/context` reads it
/// back).
fn named_path(pull: &PullRequest, path: &str) -> String {
    let renamed = pull.files.iter().find_map(|f| {
        let old = f.previous_path.as_deref()?;
        (f.path == path || old == path).then_some((old, f.path.as_str()))
    });
    match renamed {
        Some((old, new)) => format!("{} → {}", escape_markdown(old), escape_markdown(new)),
        None => escape_markdown(path),
    }
}

/// The "Recent changes" line of a PR on an area page, naming the area's paths.
pub fn area_entry(pull: &PullRequest, paths: &[&str]) -> String {
    area_entry_with(pull, paths, "")
}

/// [`area_entry`] with `note` (already escaped) after the why.
pub fn area_entry_with(pull: &PullRequest, paths: &[&str], note: &str) -> String {
    let mut named: Vec<String> = Vec::new();
    let mut bytes = 0;
    for path in paths {
        let name = named_path(pull, path);
        bytes += name.len() + ", ".len();
        if !named.is_empty() && bytes > PATH_BYTES_PER_ENTRY {
            break;
        }
        named.push(name);
    }
    if paths.len() > named.len() {
        named.push(format!("and {} more", paths.len() - named.len()));
    }
    let files = if named.is_empty() {
        String::new()
    } else {
        format!(" — {}", named.join(", "))
    };
    format!(
        "- #{} {} (by {}, {}){}{note} — merge commit `{}`{}{} {}\n",
        pull.number,
        escape_markdown(&pull.title),
        escape_markdown(&pull.author),
        escape_markdown(date_of(&pull.merged_at)),
        why(pull),
        pull.merge_sha.to_ascii_lowercase(),
        arrived(pull),
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

    #[test]
    fn an_area_entry_names_every_path_of_a_broad_change_up_to_its_byte_bound() {
        use crate::wiki::context::lines::parse_entry;
        // A refactor across 22 files of one area (encode/httpx's broadest
        // but one): every file is named, so get_context links each to it.
        let files: Vec<String> = (0..22)
            .map(|i| format!("httpx/_module_{i:02}.py"))
            .collect();
        let paths: Vec<&str> = files.iter().map(String::as_str).collect();
        let p = pull(3012, "Drop Python 3.8", 'c', &paths);
        let entry = parse_entry(area_entry(&p, &paths).trim_end()).expect("an entry line");
        assert_eq!(entry.paths, files);
        assert_eq!(entry.more_paths, 0);

        // A move of 500 files stays one bounded line that counts the rest.
        let files: Vec<String> = (0..500)
            .map(|i| format!("src/pkg/module_{i:03}.py"))
            .collect();
        let paths: Vec<&str> = files.iter().map(String::as_str).collect();
        let p = pull(3245, "Move to a src directory", 'd', &paths);
        let line = area_entry(&p, &paths);
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(
            line.len() < PATH_BYTES_PER_ENTRY + 512,
            "{} bytes",
            line.len()
        );
        let entry = parse_entry(line.trim_end()).expect("an entry line");
        assert!(entry.paths.len() > 30, "{}", entry.paths.len());
        assert_eq!(entry.paths[..], files[..entry.paths.len()]);
        assert_eq!(entry.paths.len() + entry.more_paths, 500);

        // One path longer than the bound is still named.
        let long = format!("src/{}.py", "a".repeat(2 * PATH_BYTES_PER_ENTRY));
        let p = pull(7, "Generated", 'e', &[long.as_str(), "src/b.py"]);
        let entry = parse_entry(area_entry(&p, &[long.as_str(), "src/b.py"]).trim_end()).unwrap();
        assert_eq!((entry.paths, entry.more_paths), (vec![long.clone()], 1));
    }

    #[test]
    fn an_entry_says_through_which_merge_a_pull_request_arrived() {
        use crate::forge::evidence::ArrivedThrough;
        let mut p = pull(21, "Fix the stable parser", 'c', &["src/parse.rs"]);
        assert!(!changelog_entry(&p).contains("arrived"));
        let through = |subject: &str| ArrivedThrough {
            merge_sha: crate::ids::Sha::parse(&format!("ABC1234{}", "0".repeat(33))).unwrap(),
            subject: subject.into(),
        };
        p.arrived_through = Some(through("Merge branch 'stable'"));
        let entry = changelog_entry(&p);
        assert!(
            entry.contains(&format!(
                "merge commit `{}` — arrived through `Merge branch 'stable'` (abc1234) <!-- teammem:{} -->",
                "c".repeat(40),
                "c".repeat(40)
            )),
            "{entry}"
        );
        let area = area_entry(&p, &["src/parse.rs"]);
        assert!(
            area.contains(
                "— arrived through `Merge branch 'stable'` (abc1234) — src/parse.rs <!--"
            ),
            "{area}"
        );

        // Hostile subjects: a newline, a forged marker (inside and outside a
        // code span), a comment closer, a link, an image, HTML, backtick runs
        // and a bidi override. Each entry stays one line whose only HTML is
        // its own marker, renders no link or image, and is still found by
        // its marker.
        let forged = format!("<!-- teammem:{} -->", "e".repeat(40));
        let hostile = [
            format!("Merge\n# Heading {forged} [x](javascript:1) ![i](http://e/i.png) <b>x</b>"),
            format!("`{forged}` -->"),
            "Merge `` a`b `` and ``` ```` ``` \u{202E}".to_string(),
            "` ".to_string(),
            "--!> <img src=x onerror=alert(1)> *em* _u_".to_string(),
            String::new(),
        ];
        for subject in &hostile {
            p.arrived_through = Some(through(subject));
            for entry in [changelog_entry(&p), area_entry(&p, &["src/parse.rs"])] {
                assert_eq!(entry.lines().count(), 1, "{subject:?}: {entry}");
                assert!(!entry.contains('\u{202E}'), "{entry}");
                assert_eq!(entry.matches("<!--").count(), 1, "{subject:?}: {entry}");
                assert_eq!(entry.matches("-->").count(), 1, "{subject:?}: {entry}");
                assert_eq!(entry_shas(&entry).collect::<Vec<_>>(), vec!["c".repeat(40)]);
                let (items, html) = rendered_items(&entry);
                assert_eq!(items.len(), 1, "{subject:?}: {entry}");
                assert_eq!(
                    html.len(),
                    1,
                    "{subject:?}: only the entry's marker: {html:?}"
                );
                assert!(html[0].starts_with("<!-- teammem:cccc"), "{html:?}");
                assert!(items[0].contains("arrived through"), "{items:?}");
                assert!(
                    items[0].trim_end().ends_with("(abc1234)")
                        || items[0].contains("(abc1234) — src/parse.rs"),
                    "{items:?}"
                );
                use pulldown_cmark::{Event, Parser, Tag};
                assert!(
                    !Parser::new(&entry).any(|e| matches!(
                        e,
                        Event::Start(Tag::Link { .. } | Tag::Image { .. } | Tag::Heading { .. })
                    )),
                    "{subject:?}: {entry}"
                );
            }
        }
        // A subject with code reads as written, in one code span.
        p.arrived_through = Some(through("Merge `` a`b `` in"));
        let (items, _) = rendered_items(&changelog_entry(&p));
        assert!(
            items[0].contains("arrived through `Merge `` a`b `` in` (abc1234)"),
            "{items:?}"
        );
    }
}
