//! Which manifest a path is, and its dependencies read with the bounds
//! every format shares.
//!
//! Invariants: only the first [`MAX_MANIFEST_BYTES`] of a manifest are read
//! (cut at a line end) and at most [`MAX_ENTRIES`] dependencies are kept; a
//! manifest cut either way says so (`cut`); names, requirements, targets and
//! groups come back as one line of plain text of at most [`MAX_TEXT_CHARS`]
//! characters, control characters dropped, *not* escaped for Markdown.

use super::cargo::cargo_table;
use super::dependency::{Ecosystem, Manifest};
use super::go_mod::go_mod;
use super::package_json::package_json;
use super::pyproject::pyproject;
use super::requirements::requirements;
use super::toml::toml_dependencies;

/// The most bytes of one manifest that are read.
pub const MAX_MANIFEST_BYTES: usize = 256 * 1024;

/// The most dependencies kept from one manifest.
pub const MAX_ENTRIES: usize = 2000;

/// The longest name or requirement kept, in characters.
pub const MAX_TEXT_CHARS: usize = 200;

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

#[cfg(test)]
mod tests {
    use crate::manifests::{
        Ecosystem, MAX_ENTRIES, MAX_MANIFEST_BYTES, MAX_TEXT_CHARS, ecosystem_of, parse,
    };

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
}
