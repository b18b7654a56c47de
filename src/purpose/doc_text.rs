//! A doc's text with its comment markers taken off: the lines of a
//! `/* … */` block comment, leading whitespace measured and removed.
//!
//! Invariant: every line keeps its (0-based) index in the file, so a purpose
//! found in the text names the lines it came from.

/// Columns of leading whitespace (a tab counts four).
pub(super) fn indent(line: &str) -> usize {
    line.chars()
        .take_while(|c| matches!(c, ' ' | '\t'))
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum()
}

/// `doc` without the leading whitespace all its non-blank lines share.
pub(super) fn dedent<'a>(doc: &[(usize, &'a str)]) -> Vec<(usize, &'a str)> {
    let common = doc
        .iter()
        .filter(|(_, t)| !t.trim().is_empty())
        .map(|(_, t)| t.len() - t.trim_start_matches([' ', '\t']).len())
        .min()
        .unwrap_or(0);
    doc.iter()
        .map(|&(i, t)| (i, t.get(common..).unwrap_or_else(|| t.trim_start())))
        .collect()
}

/// The lines of the `/* … */` comment opening at `lines[start]` (the opener
/// and any number of `*` or `!` after it stripped, and each line's leading
/// `*`), and the index of its last line.
pub(super) fn block_comment<'a>(lines: &[&'a str], start: usize) -> (Vec<(usize, &'a str)>, usize) {
    let mut out = Vec::new();
    let first = lines[start].trim_start();
    let mut rest = first
        .strip_prefix("/*")
        .unwrap_or(first)
        .trim_start_matches(['*', '!']);
    let mut index = start;
    loop {
        let (text, closed) = match rest.find("*/") {
            Some(end) => (&rest[..end], true),
            None => (rest, false),
        };
        let text = text.trim();
        let text = text.strip_prefix('*').unwrap_or(text).trim();
        out.push((index, text));
        if closed || index + 1 >= lines.len() {
            return (out, index);
        }
        index += 1;
        rest = lines[index];
    }
}
