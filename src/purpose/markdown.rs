//! Markdown: the first ATX (`# Title`) or setext (`Title` over `===`)
//! heading, outside front matter and code.
//!
//! Invariant: text inside a code fence, indented code or HTML is never a
//! heading.

use super::summary::{Summary, atx_heading, title};

/// The first ATX (`# Title`) or setext (`Title` over `===`) heading, outside
/// front matter and code fences.
pub(super) fn markdown(lines: &[&str]) -> Option<Summary> {
    let mut index = 0;
    if lines.first().is_some_and(|l| l.trim_end() == "---") {
        index = 1 + lines
            .iter()
            .skip(1)
            .position(|l| matches!(l.trim_end(), "---" | "..."))?;
        index += 1;
    }
    let mut fence: Option<&str> = None;
    while index < lines.len() {
        let raw = lines[index];
        let indent = raw.len() - raw.trim_start_matches(' ').len();
        let line = raw.trim();
        if let Some(open) = fence {
            if line.starts_with(open) {
                fence = None;
            }
        } else if indent > 3 {
            // Indented code.
        } else if line.starts_with("```") || line.starts_with("~~~") {
            fence = Some(&line[..3]);
        } else if let Some(text) = atx_heading(line) {
            if !text.is_empty() {
                return title(text, index);
            }
        } else if !line.is_empty()
            && !line.starts_with('<')
            && lines
                .get(index + 1)
                .is_some_and(|next| is_setext_underline(next))
        {
            return title(line, index);
        }
        index += 1;
    }
    None
}

fn is_setext_underline(line: &str) -> bool {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let line = line.trim();
    indent <= 3
        && !line.is_empty()
        && (line.bytes().all(|b| b == b'=') || line.bytes().all(|b| b == b'-'))
}

#[cfg(test)]
mod tests {
    use crate::purpose::expect::{is, none};

    #[test]
    fn markdown_takes_the_first_heading() {
        is("README.md", "# todo\n\nA service.\n", "todo", 1);
        is(
            "docs/a.md",
            "---\ntitle: front matter\n---\n\n<!-- a comment -->\nIntro text.\n\n## Closed heading ##\n",
            "Closed heading",
            8,
        );
        is("docs/b.markdown", "Setext title\n===\n", "Setext title", 1);
        is(
            "docs/c.md",
            "```\n# not a heading\n```\n# Real\n",
            "Real",
            4,
        );
        none("docs/d.md", "No heading here.\n");
        none("docs/e.md", "#hashtag is not a heading\n");
        is("docs/f.md", "# C# and F# #\n", "C# and F#", 1);
    }
}
