//! `requirements*.txt` and the PEP 508 requirement strings `pyproject.toml`
//! holds too.
//!
//! Invariant: options (`-r`, `-e`, `--hash`), comments and URL-only lines
//! are never dependencies.

use super::dependency::{Dependency, Kind, line_no};

/// A PEP 508 requirement: its name, and the rest (extras, version
/// specifiers, markers) as written.
pub(super) fn pep508(text: &str) -> Option<(String, String)> {
    let text = text.trim();
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)))
        .unwrap_or(text.len());
    let name = &text[..end];
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return None;
    }
    Some((name.to_owned(), text[end..].trim().to_owned()))
}

pub(super) fn requirements(text: &str) -> Vec<Dependency> {
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        // pip: `#` at the start or after whitespace starts a comment.
        let line = match line.find(" #").or_else(|| line.find("\t#")) {
            Some(at) => &line[..at],
            None => line,
        };
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('-') {
            continue;
        }
        let line = line.trim_end_matches('\\').trim_end();
        if let Some((name, requirement)) = pep508(line)
            && !requirement.starts_with("://")
        {
            out.push(Dependency::plain(
                name,
                requirement,
                Kind::Normal,
                line_no(index),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::manifests::Kind;
    use crate::manifests::expect::{d, deps};

    #[test]
    fn requirements_txt_shapes() {
        let text = "# pinned\nflask==3.0.2\nrequests>=2 # http\n-r base.txt\n--index-url https://x\n-e .\n\nuvicorn[standard]~=0.29; sys_platform != 'win32'\nhttps://example.com/x.whl\nlocal @ file:///tmp/x\n";
        assert_eq!(
            deps("requirements.txt", text),
            vec![
                d("flask", "==3.0.2", Kind::Normal, 2),
                d("requests", ">=2", Kind::Normal, 3),
                d(
                    "uvicorn",
                    "[standard]~=0.29; sys_platform != 'win32'",
                    Kind::Normal,
                    8
                ),
                d("local", "@ file:///tmp/x", Kind::Normal, 10),
            ]
        );
    }
}
