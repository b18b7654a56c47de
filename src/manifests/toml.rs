//! Line-based reading of TOML dependency tables, shared by `Cargo.toml`,
//! Poetry's tables and `pyproject.toml`: strings, keys, inline tables,
//! table headers and arrays of strings.
//!
//! Invariants: reading is linear in the text (an unclosed string is never
//! scanned twice); text that is not one of the shapes read here is skipped,
//! never guessed at; which headers hold dependencies is the caller's
//! [`TableMeaning`] to say.

use super::dependency::{Dependency, Kind, line_no};

/// A TOML string at the start of `text` (basic or literal), decoded enough
/// for names and versions, and the rest after it.
pub(super) fn toml_string(text: &str) -> Option<(String, &str)> {
    let quote = text.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let mut out = String::new();
    let mut chars = text[1..].char_indices();
    while let Some((i, c)) = chars.next() {
        if c == quote {
            return Some((out, &text[1 + i + 1..]));
        }
        if c == '\\' && quote == '"' {
            if let Some((_, next)) = chars.next() {
                out.push(match next {
                    'n' => '\n',
                    't' => '\t',
                    other => other,
                });
            }
            continue;
        }
        out.push(c);
    }
    None
}

/// A TOML key at the start of a line (bare or quoted) and the text after `=`.
pub(super) fn toml_key(line: &str) -> Option<(String, &str)> {
    let line = line.trim_start();
    let (key, rest) = if line.starts_with('"') || line.starts_with('\'') {
        toml_string(line)?
    } else {
        let end = line.find(|c: char| !(c.is_alphanumeric() || "-_.".contains(c)))?;
        (line[..end].to_owned(), &line[end..])
    };
    let rest = rest.trim_start().strip_prefix('=')?;
    (!key.is_empty()).then(|| (key, rest.trim_start()))
}

/// The value of `key = "..."` inside an inline table's text.
fn inline_field(table: &str, key: &str) -> Option<String> {
    let mut rest = table;
    while let Some(at) = rest.find(key) {
        let before = rest[..at].chars().last();
        let after = &rest[at + key.len()..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_') {
            continue;
        }
        if let Some(value) = after.trim_start().strip_prefix('=')
            && let Some((text, _)) = toml_string(value.trim_start())
        {
            return Some(text);
        }
    }
    None
}

/// Whether an inline table's text says `key = true`.
fn inline_true(table: &str, key: &str) -> bool {
    let mut rest = table;
    while let Some(at) = rest.find(key) {
        let before = rest[..at].chars().last();
        let after = &rest[at + key.len()..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == '"') {
            continue;
        }
        if let Some(value) = after.trim_start().strip_prefix('=') {
            let value = value.trim_start();
            if value.starts_with("true")
                && !value[4..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
            {
                return true;
            }
        }
    }
    false
}

/// The kind of a dependency declared `optional = true` in a table of `kind`.
fn optional_kind(kind: Kind) -> Kind {
    if kind == Kind::Normal {
        Kind::Optional
    } else {
        kind
    }
}

/// The requirement a Cargo/Poetry value states: a version string, or an
/// inline table's version (else its path, git or workspace source).
fn table_requirement(value: &str) -> Option<String> {
    if let Some((text, _)) = toml_string(value) {
        return Some(text);
    }
    if !value.starts_with('{') {
        return None;
    }
    if let Some(version) = inline_field(value, "version") {
        return Some(version);
    }
    if let Some(path) = inline_field(value, "path") {
        return Some(format!("path {path}"));
    }
    if let Some(git) = inline_field(value, "git") {
        return Some(format!("git {git}"));
    }
    if value.contains("workspace") {
        return Some("workspace".into());
    }
    Some(String::new())
}

/// What a dependency table's header says about its entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct TableMeaning {
    pub(super) kind: Option<Kind>,
    /// The one dependency a `[dependencies.NAME]` table declares.
    pub(super) single: Option<String>,
    /// `X` of a Cargo `[target.X.dependencies]` table.
    pub(super) target: Option<String>,
    /// The Poetry group of `[tool.poetry.group.NAME.dependencies]`.
    pub(super) group: Option<String>,
}

impl TableMeaning {
    pub(super) fn of(kind: Kind) -> Self {
        TableMeaning {
            kind: Some(kind),
            ..Self::default()
        }
    }
}

/// The dotted parts of a table header, quotes removed.
pub(super) fn header_parts(header: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = header.trim();
    while !rest.is_empty() {
        if let Some((text, after)) = toml_string(rest) {
            parts.push(text);
            rest = after.trim_start();
        } else {
            let end = rest.find('.').unwrap_or(rest.len());
            parts.push(rest[..end].trim().to_owned());
            rest = &rest[end..];
        }
        rest = rest
            .trim_start()
            .strip_prefix('.')
            .unwrap_or(rest)
            .trim_start();
    }
    parts
}

/// Line-based TOML reading of dependency tables: `table` says which headers
/// hold dependencies (and of what kind).
pub(super) fn toml_dependencies(
    text: &str,
    table: fn(&str) -> Option<TableMeaning>,
) -> Vec<Dependency> {
    let mut out = Vec::new();
    let mut current: Option<TableMeaning> = None;
    // A `[dependencies.NAME]` table's entry, filled by its `version` line.
    let mut single: Option<usize> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(header) = trimmed.strip_prefix('[') {
            single = None;
            current = if header.starts_with('[') {
                None
            } else {
                header.rfind(']').and_then(|end| table(&header[..end]))
            };
            if let Some(meaning) = &current
                && let (Some(kind), Some(name)) = (meaning.kind, &meaning.single)
            {
                single = Some(out.len());
                out.push(Dependency {
                    target: meaning.target.clone(),
                    group: meaning.group.clone(),
                    ..Dependency::plain(name.clone(), String::new(), kind, line_no(index))
                });
            }
            continue;
        }
        let Some(meaning) = &current else {
            continue;
        };
        let Some(kind) = meaning.kind else {
            continue;
        };
        let Some((key, value)) = toml_key(trimmed) else {
            continue;
        };
        if meaning.single.is_some() {
            if let Some(at) = single {
                let found = match key.as_str() {
                    "version" => toml_string(value).map(|(v, _)| v),
                    "path" if out[at].requirement.is_empty() => {
                        toml_string(value).map(|(v, _)| format!("path {v}"))
                    }
                    "git" if out[at].requirement.is_empty() => {
                        toml_string(value).map(|(v, _)| format!("git {v}"))
                    }
                    "workspace" if out[at].requirement.is_empty() => Some("workspace".into()),
                    "optional" if value.split('#').next().map(str::trim) == Some("true") => {
                        out[at].optional = true;
                        out[at].kind = optional_kind(out[at].kind);
                        None
                    }
                    _ => None,
                };
                if let Some(found) = found {
                    out[at].requirement = found;
                }
            }
            continue;
        }
        if let Some(requirement) = table_requirement(value) {
            let optional = value.starts_with('{') && inline_true(value, "optional");
            out.push(Dependency {
                optional,
                target: meaning.target.clone(),
                group: meaning.group.clone(),
                ..Dependency::plain(
                    key,
                    requirement,
                    if optional { optional_kind(kind) } else { kind },
                    line_no(index),
                )
            });
        }
    }
    out
}

/// The strings of a TOML array that starts at `start` (just after `[`) on
/// line `first`, with their line indexes.
///
/// Linear in the text: once a basic (`"`) string on a line runs to the
/// line's end unclosed, no later `"` on that line can open one that closes
/// (each later `"` was an escaped character of the first, so both scans
/// agree from there on), and it is not scanned again. Without that, a line
/// of `"\"\"\…` costs a scan to the line's end per quote.
pub(super) fn toml_array(
    lines: &[&str],
    first: usize,
    start: &str,
) -> (Vec<(String, usize)>, usize) {
    let mut out = Vec::new();
    let mut index = first;
    let mut rest = start;
    // Whether a basic string on line `index` was found unclosed.
    let mut unclosed_basic = false;
    loop {
        let trimmed = rest.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            index += 1;
            unclosed_basic = false;
            match lines.get(index) {
                Some(line) => rest = line,
                None => return (out, index),
            }
            continue;
        }
        if trimmed.starts_with(']') {
            return (out, index);
        }
        if let Some(table) = trimmed.strip_prefix('{') {
            // An inline table (PEP 735's `{include-group = "…"}`) is not a
            // requirement: skip it whole; one with a string unclosed on its
            // line ends the line (so the scan stays linear).
            rest = skip_inline_table(table);
            continue;
        }
        let string = if unclosed_basic && trimmed.starts_with('"') {
            None
        } else {
            toml_string(trimmed)
        };
        if let Some((text, after)) = string {
            out.push((text, index));
            rest = after;
        } else {
            unclosed_basic |= trimmed.starts_with('"');
            // A comma, or something this reader does not know: skip one char.
            let mut chars = trimmed.chars();
            chars.next();
            rest = chars.as_str();
        }
    }
}

/// The text after the `}` closing an inline table whose text (after its
/// `{`) starts `text`; empty when the table does not close on this line.
fn skip_inline_table(text: &str) -> &str {
    let mut rest = text;
    loop {
        let Some(at) = rest.find(['}', '"', '\'']) else {
            return "";
        };
        if rest[at..].starts_with('}') {
            return &rest[at + 1..];
        }
        match toml_string(&rest[at..]) {
            Some((_, after)) => rest = after,
            None => return "",
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::manifests::{MAX_MANIFEST_BYTES, parse};

    /// A pyproject.toml whose dependency array holds one line of `"\`
    /// repeated to about `bytes` (every quote opens a basic string that never
    /// closes), then one real dependency.
    fn unclosed_strings(bytes: usize) -> String {
        format!(
            "[project]\ndependencies = [\n{}\n\"after>=1\",\n]\n",
            "\"\\".repeat(bytes / 2)
        )
    }

    /// The least time of up to three parses of `text` (the least is the one
    /// the machine's noise touched least); one parse over a second is enough.
    fn least_parse_time(text: &str) -> std::time::Duration {
        let mut least = std::time::Duration::MAX;
        for _ in 0..3 {
            let started = std::time::Instant::now();
            let manifest = parse("pyproject.toml", text).unwrap();
            least = least.min(started.elapsed());
            assert_eq!(manifest.dependencies.len(), 1);
            assert_eq!(manifest.dependencies[0].name, "after");
            assert!(!manifest.cut);
            if least > std::time::Duration::from_secs(1) {
                break;
            }
        }
        least
    }

    #[test]
    fn unclosed_strings_cost_linear_time() {
        let small = unclosed_strings(16 * 1024);
        let big = unclosed_strings(MAX_MANIFEST_BYTES - 64);
        assert!(big.len() <= MAX_MANIFEST_BYTES && big.len() > 250 * 1024);
        let small = least_parse_time(&small);
        // A quadratic scanner spends seconds here already (and minutes on
        // the big one in a debug build): say so at once.
        assert!(
            small < std::time::Duration::from_millis(500),
            "16 KiB took {small:?}"
        );
        let big = least_parse_time(&big);
        // 16 times the input: linear is about 16 times the time, quadratic
        // about 256 times (1.5 s for 64 KiB before the scanner was linear).
        let ratio = big.as_secs_f64() / small.as_secs_f64().max(1e-6);
        assert!(
            ratio < 64.0 && big < std::time::Duration::from_secs(1),
            "256 KiB took {big:?}, 16 KiB {small:?}: {ratio:.0} times"
        );
    }
}
