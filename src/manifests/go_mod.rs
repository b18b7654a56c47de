//! `go.mod`: its `require` directives, one-line and blocks.
//!
//! Invariant: a requirement marked `// indirect` is [`Kind::Indirect`]; a
//! directive other than `require` declares nothing.

use super::dependency::{Dependency, Kind, line_no};

pub(super) fn go_mod(text: &str) -> Vec<Dependency> {
    let mut out = Vec::new();
    let mut block = false;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        let entry = if block {
            if trimmed.starts_with(')') {
                block = false;
                continue;
            }
            trimmed
        } else if let Some(rest) = trimmed.strip_prefix("require") {
            let rest = rest.trim_start();
            if rest.starts_with('(') {
                block = true;
                continue;
            }
            if rest.len() == trimmed.len() - "require".len() {
                // `requirex ...` is not the directive.
                continue;
            }
            rest
        } else {
            continue;
        };
        let (code, comment) = match entry.find("//") {
            Some(at) => (&entry[..at], &entry[at + 2..]),
            None => (entry, ""),
        };
        let mut words = code.split_whitespace();
        let (Some(name), Some(version)) = (words.next(), words.next()) else {
            continue;
        };
        let indirect = comment.split([';', ' ']).any(|w| w.trim() == "indirect");
        out.push(Dependency::plain(
            name.trim_matches('"').to_owned(),
            version.to_owned(),
            if indirect {
                Kind::Indirect
            } else {
                Kind::Normal
            },
            line_no(index),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::manifests::Kind;
    use crate::manifests::expect::{d, deps};

    #[test]
    fn go_mod_lines_and_blocks() {
        let text = "module example.com/app\n\ngo 1.22\n\nrequire github.com/pkg/errors v0.9.1\n\nrequire (\n\tgolang.org/x/sys v0.20.0 // indirect\n\tgithub.com/spf13/cobra v1.8.0\n)\n\nreplace github.com/x/y => ../y\n";
        assert_eq!(
            deps("go.mod", text),
            vec![
                d("github.com/pkg/errors", "v0.9.1", Kind::Normal, 5),
                d("golang.org/x/sys", "v0.20.0", Kind::Indirect, 8),
                d("github.com/spf13/cobra", "v1.8.0", Kind::Normal, 9),
            ]
        );
    }
}
