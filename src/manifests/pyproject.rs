//! `pyproject.toml`: PEP 621's dependencies and extras, PEP 735's
//! dependency groups, Poetry's tables.
//!
//! Invariant: a dependency group's `{include-group = …}` entry names a group,
//! not a package, and Poetry's `python` names the interpreter: neither is a
//! dependency.

use super::dependency::{Dependency, Kind, line_no};
use super::requirements::pep508;
use super::toml::{TableMeaning, header_parts, toml_array, toml_dependencies, toml_key};

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

pub(super) fn pyproject(text: &str) -> Vec<Dependency> {
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

#[cfg(test)]
mod tests {
    use crate::manifests::Kind;
    use crate::manifests::expect::{d, deps, f, full};

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
}
