//! The dependencies a package manifest declares (`Cargo.toml`,
//! `package.json`, `pyproject.toml`, `go.mod`, `requirements*.txt`), each
//! with its version requirement as written, its kind and the line it is
//! declared on, and the difference between two versions of one manifest.
//! Cargo's `optional = true` and `[target.X.*]` tables, and PEP 735's
//! `[dependency-groups]` (whose `{include-group = …}` entries are not
//! dependencies), are read too. Pure text: the builtin agent reads the files
//! and cites what this finds.
//!
//! Invariants:
//! - only the first [`MAX_MANIFEST_BYTES`] of a manifest are read and at most
//!   [`MAX_ENTRIES`] dependencies are kept; a manifest cut either way says so
//!   (`cut`);
//! - every dependency's line is the 1-based line its name is declared on in
//!   the text given, so an evidence marker can cite it;
//! - names and requirements are plain text bounded to [`MAX_TEXT_CHARS`]
//!   characters, *not* escaped for Markdown (the caller does that: manifest
//!   text is untrusted); text that is not one of the shapes read here is
//!   skipped, never guessed at.

use std::collections::BTreeMap;

/// The most bytes of one manifest that are read.
pub const MAX_MANIFEST_BYTES: usize = 256 * 1024;
/// The most dependencies kept from one manifest.
pub const MAX_ENTRIES: usize = 2000;
/// The longest name or requirement kept, in characters.
pub const MAX_TEXT_CHARS: usize = 200;

/// The package ecosystem a manifest belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ecosystem {
    Cargo,
    Npm,
    Python,
    Go,
}

impl Ecosystem {
    pub fn label(self) -> &'static str {
        match self {
            Ecosystem::Cargo => "Rust, Cargo",
            Ecosystem::Npm => "JavaScript, npm",
            Ecosystem::Python => "Python",
            Ecosystem::Go => "Go modules",
        }
    }
}

/// What a dependency is needed for, where the format says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Normal,
    Dev,
    Build,
    Peer,
    Optional,
    /// A Go requirement marked `// indirect`.
    Indirect,
}

impl Kind {
    /// The word a page shows after the requirement (none for normal ones).
    pub fn label(self) -> Option<&'static str> {
        match self {
            Kind::Normal => None,
            Kind::Dev => Some("dev"),
            Kind::Build => Some("build"),
            Kind::Peer => Some("peer"),
            Kind::Optional => Some("optional"),
            Kind::Indirect => Some("indirect"),
        }
    }
}

/// One declared dependency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    pub name: String,
    /// As written (`^1.2`, `>=2,<3`, `v1.9.0`, `path ../core`); empty = any.
    pub requirement: String,
    pub kind: Kind,
    /// 1-based line of the declaration.
    pub line: u32,
    /// Installed only when a feature, extra or platform asks for it: Cargo's
    /// and Poetry's `optional = true` (a normal dependency's kind is then
    /// [`Kind::Optional`]; a build dependency keeps [`Kind::Build`]), npm's
    /// `optionalDependencies`, PEP 621's `optional-dependencies`.
    pub optional: bool,
    /// The platform a Cargo `[target.X.*]` table limits it to, as written
    /// (`cfg(unix)`, `x86_64-pc-windows-msvc`).
    pub target: Option<String>,
    /// The named group it is declared in: a PEP 735 `[dependency-groups]`
    /// group, a PEP 621 extra, a Poetry group.
    pub group: Option<String>,
}

impl Dependency {
    /// A dependency neither optional, platform-bound nor in a group.
    fn plain(name: String, requirement: String, kind: Kind, line: u32) -> Self {
        Dependency {
            name,
            requirement,
            kind,
            line,
            optional: false,
            target: None,
            group: None,
        }
    }
}

/// A manifest's dependencies, in declaration order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub ecosystem: Ecosystem,
    pub dependencies: Vec<Dependency>,
    /// The text was over [`MAX_MANIFEST_BYTES`] or declared more than
    /// [`MAX_ENTRIES`] dependencies: the list is a prefix.
    pub cut: bool,
}

/// The ecosystem of a manifest path, `None` for a file that is not one.
pub fn ecosystem_of(path: &str) -> Option<Ecosystem> {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name {
        "Cargo.toml" => Some(Ecosystem::Cargo),
        "package.json" => Some(Ecosystem::Npm),
        "pyproject.toml" => Some(Ecosystem::Python),
        "go.mod" => Some(Ecosystem::Go),
        _ if name.starts_with("requirements") && name.ends_with(".txt") => Some(Ecosystem::Python),
        _ => None,
    }
}

/// The dependencies the manifest at `path` declares in `text`; `None` when
/// `path` is not a manifest.
pub fn parse(path: &str, text: &str) -> Option<Manifest> {
    let ecosystem = ecosystem_of(path)?;
    let name = path.rsplit('/').next().unwrap_or(path);
    let mut cut = false;
    let text = if text.len() > MAX_MANIFEST_BYTES {
        cut = true;
        let mut end = MAX_MANIFEST_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        &text[..text[..end].rfind('\n').map_or(end, |i| i + 1)]
    } else {
        text
    };
    let mut dependencies = match name {
        "Cargo.toml" => toml_dependencies(text, cargo_table),
        "pyproject.toml" => pyproject(text),
        "package.json" => package_json(text),
        "go.mod" => go_mod(text),
        _ => requirements(text),
    };
    if dependencies.len() > MAX_ENTRIES {
        dependencies.truncate(MAX_ENTRIES);
        cut = true;
    }
    for d in &mut dependencies {
        d.name = bounded(&d.name);
        d.requirement = bounded(&d.requirement);
        d.target = d.target.as_deref().map(bounded);
        d.group = d.group.as_deref().map(bounded);
    }
    Some(Manifest {
        ecosystem,
        dependencies,
        cut,
    })
}

/// One line of text, control characters dropped, at most [`MAX_TEXT_CHARS`].
fn bounded(text: &str) -> String {
    let clean: String = text
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .filter(|c| !c.is_control())
        .collect();
    let clean = clean.trim();
    if clean.chars().count() <= MAX_TEXT_CHARS {
        return clean.to_owned();
    }
    let mut out: String = clean.chars().take(MAX_TEXT_CHARS - 1).collect();
    out.push('…');
    out
}

fn line_no(index: usize) -> u32 {
    u32::try_from(index + 1).unwrap_or(u32::MAX)
}

/// A TOML string at the start of `text` (basic or literal), decoded enough
/// for names and versions, and the rest after it.
fn toml_string(text: &str) -> Option<(String, &str)> {
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
fn toml_key(line: &str) -> Option<(String, &str)> {
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
struct TableMeaning {
    kind: Option<Kind>,
    /// The one dependency a `[dependencies.NAME]` table declares.
    single: Option<String>,
    /// `X` of a Cargo `[target.X.dependencies]` table.
    target: Option<String>,
    /// The Poetry group of `[tool.poetry.group.NAME.dependencies]`.
    group: Option<String>,
}

impl TableMeaning {
    fn of(kind: Kind) -> Self {
        TableMeaning {
            kind: Some(kind),
            ..Self::default()
        }
    }
}

/// What a Cargo table header means: the kind of the dependencies in it, the
/// one dependency a `[dependencies.NAME]` table declares, and the platform
/// of a `[target.X.…]` table.
fn cargo_table(header: &str) -> Option<TableMeaning> {
    let parts = header_parts(header);
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let kind_of = |word: &str| match word {
        "dependencies" => Some(Kind::Normal),
        "dev-dependencies" | "dev_dependencies" => Some(Kind::Dev),
        "build-dependencies" | "build_dependencies" => Some(Kind::Build),
        _ => None,
    };
    let (target, tail) = match parts.as_slice() {
        ["target", platform, rest @ ..] => (Some((*platform).to_owned()), rest),
        ["workspace", rest @ ..] => (None, rest),
        rest => (None, rest),
    };
    let (word, single) = match tail {
        [word] => (word, None),
        [word, name] => (word, Some((*name).to_owned())),
        _ => return None,
    };
    Some(TableMeaning {
        kind: Some(kind_of(word)?),
        single,
        target,
        group: None,
    })
}

/// The dotted parts of a table header, quotes removed.
fn header_parts(header: &str) -> Vec<String> {
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
fn toml_dependencies(text: &str, table: fn(&str) -> Option<TableMeaning>) -> Vec<Dependency> {
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

/// A PEP 508 requirement: its name, and the rest (extras, version
/// specifiers, markers) as written.
fn pep508(text: &str) -> Option<(String, String)> {
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

/// The strings of a TOML array that starts at `start` (just after `[`) on
/// line `first`, with their line indexes.
///
/// Linear in the text: once a basic (`"`) string on a line runs to the
/// line's end unclosed, no later `"` on that line can open one that closes
/// (each later `"` was an escaped character of the first, so both scans
/// agree from there on), and it is not scanned again. Without that, a line
/// of `"\"\"\…` costs a scan to the line's end per quote.
fn toml_array(lines: &[&str], first: usize, start: &str) -> (Vec<(String, usize)>, usize) {
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

fn poetry_table(header: &str) -> Option<TableMeaning> {
    let parts = header_parts(header);
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    match parts.as_slice() {
        ["tool", "poetry", "dependencies"] => Some(TableMeaning::of(Kind::Normal)),
        ["tool", "poetry", "dev-dependencies"] => Some(TableMeaning::of(Kind::Dev)),
        ["tool", "poetry", "group", group, "dependencies"] => Some(TableMeaning {
            group: Some((*group).to_owned()),
            ..TableMeaning::of(Kind::Dev)
        }),
        _ => None,
    }
}

fn pyproject(text: &str) -> Vec<Dependency> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut table = String::new();
    let mut index = 0;
    while index < lines.len() {
        let trimmed = lines[index].trim();
        if let Some(header) = trimmed.strip_prefix('[') {
            table = header
                .rfind(']')
                .map(|end| header_parts(&header[..end]).join("."))
                .unwrap_or_default();
            index += 1;
            continue;
        }
        // PEP 621's dependencies and extras, PEP 735's dependency groups
        // (whose `{include-group = "…"}` entries name a group, not a package).
        let (kind, optional, grouped) = match table.as_str() {
            "project" => (Some(Kind::Normal), false, false),
            "project.optional-dependencies" => (Some(Kind::Optional), true, true),
            "dependency-groups" => (Some(Kind::Dev), false, true),
            _ => (None, false, false),
        };
        if let (Some(kind), Some((key, value))) = (kind, toml_key(trimmed))
            && (grouped || key == "dependencies")
            && let Some(start) = value.strip_prefix('[')
        {
            let (strings, last) = toml_array(&lines, index, start);
            for (text, at) in strings {
                if let Some((name, requirement)) = pep508(&text) {
                    out.push(Dependency {
                        optional,
                        group: grouped.then(|| key.clone()),
                        ..Dependency::plain(name, requirement, kind, line_no(at))
                    });
                }
            }
            index = last + 1;
            continue;
        }
        index += 1;
    }
    // Poetry's tables, which name the interpreter as `python` (not a package).
    out.extend(
        toml_dependencies(text, poetry_table)
            .into_iter()
            .filter(|d| !d.name.eq_ignore_ascii_case("python")),
    );
    out.sort_by_key(|d| d.line);
    out
}

fn requirements(text: &str) -> Vec<Dependency> {
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

fn go_mod(text: &str) -> Vec<Dependency> {
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

/// A JSON string token at the start of `text`: decoded, and its byte length.
fn json_string(text: &str) -> Option<(String, usize)> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'"') {
        return None;
    }
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => {
                let raw = &text[..=i];
                let decoded = serde_json::from_str::<String>(raw).ok()?;
                return Some((decoded, i + 1));
            }
            _ => i += 1,
        }
    }
    None
}

/// package.json's dependency objects, walked token by token so each name
/// keeps its line (a cut or broken file yields what precedes the break).
fn package_json(text: &str) -> Vec<Dependency> {
    let kind_of = |key: &str| match key {
        "dependencies" => Some(Kind::Normal),
        "devDependencies" => Some(Kind::Dev),
        "peerDependencies" => Some(Kind::Peer),
        "optionalDependencies" => Some(Kind::Optional),
        _ => None,
    };
    let mut out = Vec::new();
    // Per open container: is it an object, and the key whose value comes next.
    let mut stack: Vec<(bool, Option<String>)> = Vec::new();
    // The kind of the dependency object we are in, at depth 2.
    let mut section: Option<Kind> = None;
    let mut expect_key = false;
    let mut line = 0usize;
    let mut key_line = 0usize;
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => line += 1,
            b'{' | b'[' => {
                let object = bytes[i] == b'{';
                if stack.len() == 1 && object {
                    section = stack[0].1.as_deref().and_then(kind_of);
                }
                stack.push((object, None));
                expect_key = object;
            }
            b'}' | b']' => {
                stack.pop();
                if stack.len() < 2 {
                    section = None;
                }
                if let Some(top) = stack.last_mut() {
                    top.1 = None;
                }
                expect_key = false;
            }
            b',' => {
                expect_key = stack.last().is_some_and(|t| t.0);
                if let Some(top) = stack.last_mut() {
                    top.1 = None;
                }
            }
            b':' => expect_key = false,
            b'"' => {
                let Some((value, len)) = json_string(&text[i..]) else {
                    break;
                };
                if expect_key {
                    key_line = line;
                    if let Some(top) = stack.last_mut() {
                        top.1 = Some(value);
                    }
                } else if stack.len() == 2
                    && let Some(kind) = section
                    && let Some(name) = stack[1].1.take()
                {
                    out.push(Dependency {
                        optional: kind == Kind::Optional,
                        ..Dependency::plain(name, value, kind, line_no(key_line))
                    });
                }
                line += text[i..i + len].matches('\n').count();
                i += len;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// How one dependency differs between two versions of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added {
        name: String,
        kind: Kind,
        requirement: String,
    },
    Removed {
        name: String,
        kind: Kind,
        requirement: String,
    },
    Changed {
        name: String,
        kind: Kind,
        old: String,
        new: String,
    },
}

/// What changed from `old` to `new` (either may be absent: the manifest was
/// added or removed), by (name, kind), sorted by name then kind.
pub fn diff(old: Option<&Manifest>, new: Option<&Manifest>) -> Vec<Change> {
    let index = |m: Option<&Manifest>| -> BTreeMap<(String, Kind), String> {
        m.into_iter()
            .flat_map(|m| &m.dependencies)
            .map(|d| ((d.name.clone(), d.kind), d.requirement.clone()))
            .collect()
    };
    let (old, new) = (index(old), index(new));
    let mut out = Vec::new();
    for ((name, kind), requirement) in &new {
        match old.get(&(name.clone(), *kind)) {
            None => out.push(Change::Added {
                name: name.clone(),
                kind: *kind,
                requirement: requirement.clone(),
            }),
            Some(before) if before != requirement => out.push(Change::Changed {
                name: name.clone(),
                kind: *kind,
                old: before.clone(),
                new: requirement.clone(),
            }),
            Some(_) => {}
        }
    }
    for ((name, kind), requirement) in &old {
        if !new.contains_key(&(name.clone(), *kind)) {
            out.push(Change::Removed {
                name: name.clone(),
                kind: *kind,
                requirement: requirement.clone(),
            });
        }
    }
    out.sort_by(|a, b| a.key().cmp(&b.key()));
    out
}

impl Change {
    fn key(&self) -> (&str, Kind) {
        match self {
            Change::Added { name, kind, .. }
            | Change::Removed { name, kind, .. }
            | Change::Changed { name, kind, .. } => (name, *kind),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deps(path: &str, text: &str) -> Vec<(String, String, Kind, u32)> {
        parse(path, text)
            .unwrap()
            .dependencies
            .into_iter()
            .map(|d| (d.name, d.requirement, d.kind, d.line))
            .collect()
    }

    fn d(name: &str, req: &str, kind: Kind, line: u32) -> (String, String, Kind, u32) {
        (name.into(), req.into(), kind, line)
    }

    #[test]
    fn manifests_are_known_by_name() {
        assert_eq!(ecosystem_of("Cargo.toml"), Some(Ecosystem::Cargo));
        assert_eq!(ecosystem_of("web/package.json"), Some(Ecosystem::Npm));
        assert_eq!(
            ecosystem_of("api/requirements-dev.txt"),
            Some(Ecosystem::Python)
        );
        assert_eq!(ecosystem_of("go.mod"), Some(Ecosystem::Go));
        assert_eq!(ecosystem_of("pyproject.toml"), Some(Ecosystem::Python));
        assert_eq!(ecosystem_of("src/cargo.toml"), None);
        assert_eq!(ecosystem_of("requirements.md"), None);
        assert!(parse("README.md", "x").is_none());
    }

    #[test]
    fn cargo_every_shape() {
        let text = r#"[package]
name = "app"
version = "0.1.0"

[dependencies]
serde = "1.0" # comment
tokio = { version = "1.38", features = ["rt"] }
core = { path = "../core" }
fork = { git = "https://example.com/fork.git", branch = "x" }
"quoted-name" = '2'
shared = { workspace = true }

[dev-dependencies]
proptest = "1"

[build-dependencies]
cc = "1.0.83"

[target.'cfg(unix)'.dependencies]
libc = "0.2"

[dependencies.regex]
version = "1.10"
default-features = false

[workspace.dependencies]
anyhow = "1"

[[bin]]
name = "not-a-dep"
[features]
default = ["x"]
"#;
        assert_eq!(
            deps("Cargo.toml", text),
            vec![
                d("serde", "1.0", Kind::Normal, 6),
                d("tokio", "1.38", Kind::Normal, 7),
                d("core", "path ../core", Kind::Normal, 8),
                d("fork", "git https://example.com/fork.git", Kind::Normal, 9),
                d("quoted-name", "2", Kind::Normal, 10),
                d("shared", "workspace", Kind::Normal, 11),
                d("proptest", "1", Kind::Dev, 14),
                d("cc", "1.0.83", Kind::Build, 17),
                d("libc", "0.2", Kind::Normal, 20),
                d("regex", "1.10", Kind::Normal, 22),
                d("anyhow", "1", Kind::Normal, 27),
            ]
        );
    }

    #[test]
    fn package_json_every_section_with_lines() {
        let text = r#"{
  "name": "web",
  "version": "1.0.0",
  "scripts": { "dependencies": "not this" },
  "dependencies": {
    "react": "^18.2.0",
    "@scope/pkg": "~1.0"
  },
  "devDependencies": { "vitest": "1.6.0" },
  "peerDependencies": {
    "react-dom": ">=18"
  },
  "optionalDependencies": {
    "fsevents": "*"
  },
  "nested": { "dependencies": { "no": "1" } }
}"#;
        assert_eq!(
            deps("package.json", text),
            vec![
                d("react", "^18.2.0", Kind::Normal, 6),
                d("@scope/pkg", "~1.0", Kind::Normal, 7),
                d("vitest", "1.6.0", Kind::Dev, 9),
                d("react-dom", ">=18", Kind::Peer, 11),
                d("fsevents", "*", Kind::Optional, 14),
            ]
        );
        // A broken file yields what precedes the break; never a panic.
        let broken = &text[..text.find("vitest").unwrap() + 3];
        assert_eq!(deps("package.json", broken).len(), 2);
        assert!(deps("package.json", "[1, {\"a\": }").is_empty());
    }

    #[test]
    fn pyproject_every_shape() {
        let text = r#"[project]
name = "api"
dependencies = [
    "flask>=3.0",  # web
    "requests[socks] ==2.31 ; python_version < '3.13'",
    'pydantic',
]

[project.optional-dependencies]
test = ["pytest>=8", "coverage"]

[tool.poetry.dependencies]
python = "^3.10"
httpx = "^0.27"
rich = { version = "13.7", optional = true }

[tool.poetry.group.dev.dependencies]
black = "24.1"
"#;
        assert_eq!(
            deps("pyproject.toml", text),
            vec![
                d("flask", ">=3.0", Kind::Normal, 4),
                d(
                    "requests",
                    "[socks] ==2.31 ; python_version < '3.13'",
                    Kind::Normal,
                    5
                ),
                d("pydantic", "", Kind::Normal, 6),
                d("pytest", ">=8", Kind::Optional, 10),
                d("coverage", "", Kind::Optional, 10),
                d("httpx", "^0.27", Kind::Normal, 14),
                d("rich", "13.7", Kind::Optional, 15),
                d("black", "24.1", Kind::Dev, 18),
            ]
        );
    }

    /// Every field of every dependency: name, requirement, kind, line,
    /// optional, target, group.
    type Full = (
        String,
        String,
        Kind,
        u32,
        bool,
        Option<String>,
        Option<String>,
    );

    fn full(path: &str, text: &str) -> Vec<Full> {
        parse(path, text)
            .unwrap()
            .dependencies
            .into_iter()
            .map(|d| {
                (
                    d.name,
                    d.requirement,
                    d.kind,
                    d.line,
                    d.optional,
                    d.target,
                    d.group,
                )
            })
            .collect()
    }

    fn f(
        name: &str,
        req: &str,
        kind: Kind,
        line: u32,
        optional: bool,
        target: Option<&str>,
        group: Option<&str>,
    ) -> Full {
        (
            name.into(),
            req.into(),
            kind,
            line,
            optional,
            target.map(Into::into),
            group.map(Into::into),
        )
    }

    #[test]
    fn cargo_optional_and_target_tables() {
        // Shaped like reqwest's and tokio's manifests.
        let text = r#"[package]
name = "reqwest"
version = "0.12.8"

[features]
json = ["dep:serde_json"]
optional = []

[dependencies]
base64 = "0.22"
serde_json = { version = "1.0", optional = true }
futures-util = { version = "0.3.28", default-features = false, optional=true }
cookie_crate = { version = "0.18.0", package = "cookie", optional = true }
not-optional = { version = "1", features = ["optional"] }
also-not = { version = "1", optional = false }
optional-looking = { version = "2", non_optional = true }

[dependencies.hickory-resolver]
version = "0.24"
optional = true # feature hickory-dns
features = ["tokio-runtime"]

[target.'cfg(not(target_arch = "wasm32"))'.dependencies]
tokio = { version = "1.0", default-features = false, features = ["net", "time"] }
rustls = { version = "0.23.4", optional = true, default-features = false }

[target.'cfg(windows)'.dependencies]
windows-registry = "0.2"

[target.x86_64-pc-windows-msvc.dev-dependencies]
winapi = "0.3"

[target."cfg(unix)".build-dependencies]
pkg-config = { version = "0.3", optional = true }

[target.'cfg(target_arch = "wasm32")'.dependencies.js-sys]
version = "0.3.45"
optional = true

[dev-dependencies]
hyper = { version = "1.1", features = ["server"] }
"#;
        let unix = Some("cfg(unix)");
        let native = Some(r#"cfg(not(target_arch = "wasm32"))"#);
        let wasm = Some(r#"cfg(target_arch = "wasm32")"#);
        assert_eq!(
            full("Cargo.toml", text),
            vec![
                f("base64", "0.22", Kind::Normal, 10, false, None, None),
                f("serde_json", "1.0", Kind::Optional, 11, true, None, None),
                f(
                    "futures-util",
                    "0.3.28",
                    Kind::Optional,
                    12,
                    true,
                    None,
                    None
                ),
                f(
                    "cookie_crate",
                    "0.18.0",
                    Kind::Optional,
                    13,
                    true,
                    None,
                    None
                ),
                f("not-optional", "1", Kind::Normal, 14, false, None, None),
                f("also-not", "1", Kind::Normal, 15, false, None, None),
                f("optional-looking", "2", Kind::Normal, 16, false, None, None),
                f(
                    "hickory-resolver",
                    "0.24",
                    Kind::Optional,
                    18,
                    true,
                    None,
                    None
                ),
                f("tokio", "1.0", Kind::Normal, 24, false, native, None),
                f("rustls", "0.23.4", Kind::Optional, 25, true, native, None),
                f(
                    "windows-registry",
                    "0.2",
                    Kind::Normal,
                    28,
                    false,
                    Some("cfg(windows)"),
                    None
                ),
                f(
                    "winapi",
                    "0.3",
                    Kind::Dev,
                    31,
                    false,
                    Some("x86_64-pc-windows-msvc"),
                    None
                ),
                // An optional build dependency stays a build dependency.
                f("pkg-config", "0.3", Kind::Build, 34, true, unix, None),
                f("js-sys", "0.3.45", Kind::Optional, 36, true, wasm, None),
                f("hyper", "1.1", Kind::Dev, 41, false, None, None),
            ]
        );
        // Making a dependency optional shows in the diff as a change of kind.
        let before = parse("Cargo.toml", "[dependencies]\nserde_json = \"1.0\"\n").unwrap();
        let after = parse(
            "Cargo.toml",
            "[dependencies]\nserde_json = { version = \"1.0\", optional = true }\n",
        )
        .unwrap();
        assert_eq!(
            diff(Some(&before), Some(&after)),
            vec![
                Change::Removed {
                    name: "serde_json".into(),
                    kind: Kind::Normal,
                    requirement: "1.0".into()
                },
                Change::Added {
                    name: "serde_json".into(),
                    kind: Kind::Optional,
                    requirement: "1.0".into()
                },
            ]
        );
    }

    #[test]
    fn pyproject_dependency_groups_pep_735() {
        // Shaped like the PEP's own examples and uv's documentation.
        let text = r#"[project]
name = "example"
requires-python = ">=3.10"
dependencies = ["httpx>=0.27"]

[project.optional-dependencies]
cli = ["rich>=13", "click"]

[dependency-groups]
test = [
    "pytest>=8",
    "coverage[toml]",
]
lint = ["ruff==0.6.9", {include-group = "typing"}]
typing = ["mypy>=1.11", "types-requests"]
dev = [
  { include-group = "test" },
  { include-group = "lint" },  # not packages
  "pre-commit",
]
"docs" = ["sphinx>=7; python_version >= '3.10'"]
odd = [{include-group = "a}\"b"}, "after-odd"]
broken = [{include-group = "never closed
  "after-broken",
]

[tool.uv]
dev-dependencies = ["not-read-here"]

[tool.poetry.group.docs.dependencies]
mkdocs = "^1.6"
"#;
        let group = |g| Some(g);
        assert_eq!(
            full("pyproject.toml", text),
            vec![
                f("httpx", ">=0.27", Kind::Normal, 4, false, None, None),
                f("rich", ">=13", Kind::Optional, 7, true, None, group("cli")),
                f("click", "", Kind::Optional, 7, true, None, group("cli")),
                f("pytest", ">=8", Kind::Dev, 11, false, None, group("test")),
                f(
                    "coverage",
                    "[toml]",
                    Kind::Dev,
                    12,
                    false,
                    None,
                    group("test")
                ),
                f("ruff", "==0.6.9", Kind::Dev, 14, false, None, group("lint")),
                f(
                    "mypy",
                    ">=1.11",
                    Kind::Dev,
                    15,
                    false,
                    None,
                    group("typing")
                ),
                f(
                    "types-requests",
                    "",
                    Kind::Dev,
                    15,
                    false,
                    None,
                    group("typing")
                ),
                f("pre-commit", "", Kind::Dev, 19, false, None, group("dev")),
                f(
                    "sphinx",
                    ">=7; python_version >= '3.10'",
                    Kind::Dev,
                    21,
                    false,
                    None,
                    group("docs")
                ),
                f("after-odd", "", Kind::Dev, 22, false, None, group("odd")),
                f(
                    "after-broken",
                    "",
                    Kind::Dev,
                    24,
                    false,
                    None,
                    group("broken")
                ),
                f("mkdocs", "^1.6", Kind::Dev, 31, false, None, group("docs")),
            ]
        );
        // Names of included groups never become dependencies.
        let names: Vec<String> = full("pyproject.toml", text)
            .into_iter()
            .map(|d| d.0)
            .collect();
        for group in ["typing", "test", "lint", "a", "never"] {
            assert!(
                !names.iter().any(|n| n == group),
                "{group} read as a package"
            );
        }
    }

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

    #[test]
    fn hostile_text_is_bounded_plain_text() {
        let long = "v".repeat(500);
        let text = format!(
            "[dependencies]\n\"evil\\n<!-- teammem:x -->\" = \"{long}\"\n\"\u{202E}x\" = \"1\u{0007}\"\n"
        );
        let found = parse("Cargo.toml", &text).unwrap().dependencies;
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].name, "evil <!-- teammem:x -->");
        assert_eq!(found[0].requirement.chars().count(), MAX_TEXT_CHARS);
        assert!(found[0].requirement.ends_with('…'));
        assert_eq!(found[1].requirement, "1");
    }

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

    #[test]
    fn bounds_cut_and_say_so() {
        let many: String = (0..2500).map(|i| format!("p{i}==1\n")).collect();
        let m = parse("requirements.txt", &many).unwrap();
        assert_eq!(m.dependencies.len(), MAX_ENTRIES);
        assert!(m.cut);
        let big = format!(
            "flask==3\n{}",
            "# pad\n".repeat(MAX_MANIFEST_BYTES / 6 + 10)
        );
        let big = format!("{big}late==1\n");
        let m = parse("requirements.txt", &big).unwrap();
        assert!(m.cut);
        assert_eq!(m.dependencies.len(), 1);
        assert!(!parse("requirements.txt", "a==1\n").unwrap().cut);
    }

    #[test]
    fn diff_added_removed_changed() {
        let old = parse(
            "Cargo.toml",
            "[dependencies]\nserde = \"1.0\"\nregex = \"1\"\ntokio = \"1.38\"\n[dev-dependencies]\nx = \"1\"\n",
        )
        .unwrap();
        let new = parse(
            "Cargo.toml",
            "[dependencies]\ntokio = \"1.40\"\nserde = \"1.0\"\nanyhow = \"1\"\nx = \"1\"\n",
        )
        .unwrap();
        let kinds = |c: &Change| c.key().1;
        let changes = diff(Some(&old), Some(&new));
        assert_eq!(
            changes,
            vec![
                Change::Added {
                    name: "anyhow".into(),
                    kind: Kind::Normal,
                    requirement: "1".into()
                },
                Change::Removed {
                    name: "regex".into(),
                    kind: Kind::Normal,
                    requirement: "1".into()
                },
                Change::Changed {
                    name: "tokio".into(),
                    kind: Kind::Normal,
                    old: "1.38".into(),
                    new: "1.40".into()
                },
                Change::Added {
                    name: "x".into(),
                    kind: Kind::Normal,
                    requirement: "1".into()
                },
                Change::Removed {
                    name: "x".into(),
                    kind: Kind::Dev,
                    requirement: "1".into()
                },
            ]
        );
        assert_eq!(kinds(&changes[4]), Kind::Dev);
        assert_eq!(diff(None, Some(&old)).len(), 4);
        assert!(diff(Some(&old), Some(&old)).is_empty());
        assert_eq!(diff(Some(&old), None).len(), 4);
    }
}
