//! What is never a purpose: license, copyright and SPDX paragraphs, editor
//! and tool directives (encoding lines included), usage boilerplate ("Run
//! with", "Example", "Usage"), field lists, badges and HTML, doctests and
//! shell prompts.
//!
//! Invariant: each rule here looks at one paragraph's text alone and only
//! ever rejects; none of them rewrites the text it is given.

/// Words that open a license, copyright or SPDX paragraph.
pub(super) fn opens_license(text: &str) -> bool {
    let lower = text.trim().to_lowercase();
    [
        "spdx-",
        "copyright",
        ":copyright:",
        ":license:",
        "(c)",
        "©",
        "licensed ",
        "license:",
        "licence:",
        "@license",
        "@preserve",
        "@copyright",
        "all rights reserved",
        "permission is hereby granted",
        "this program is free software",
        "this file is part of",
        "this source code is licensed",
        "use of this source code is governed",
        "unless required by applicable law",
    ]
    .iter()
    .any(|start| lower.starts_with(start))
}

/// Words that keep a license paragraph going into the next one.
pub(super) fn mentions_license(text: &str) -> bool {
    let lower = text.to_lowercase();
    [
        "licen",
        "copyright",
        "warrant",
        "spdx",
        "http://",
        "https://",
    ]
    .iter()
    .any(|word| lower.contains(word))
}

/// Lines that tell a tool or an editor something (an encoding line
/// included), never a purpose.
pub(super) fn is_directive(text: &str) -> bool {
    let lower = text.trim().to_lowercase();
    lower.contains("-*-")
        || (lower.len() < 60 && (lower.contains("coding:") || lower.contains("coding=")))
        || [
            "vim:",
            "vi:",
            "ex:",
            "shellcheck ",
            "eslint",
            "jshint",
            "jslint",
            "global ",
            "prettier-ignore",
            "@ts-",
            "<reference ",
            "go:",
            "+build",
            "nolint",
            "type:",
            "pylint:",
            "noqa",
            "flake8",
            "mypy:",
            "isort:",
            "pyright:",
            "ruff:",
            "pragma:",
            "fmt:",
            "rustfmt::",
            "biome-ignore",
            "#region",
            "#endregion",
        ]
        .iter()
        .any(|start| lower.starts_with(start))
}

/// Usage boilerplate that opens a paragraph: "Run with", "Example:",
/// "Usage: tool \[OPTIONS\]", "# Examples".
pub(super) fn is_boilerplate(first: &str) -> bool {
    let lower = first.to_lowercase();
    let bare =
        lower.trim_matches(|c: char| matches!(c, '#' | ':' | '.' | '*' | '_') || c.is_whitespace());
    const WHOLE: [&str; 14] = [
        "example",
        "examples",
        "usage",
        "run",
        "running",
        "to run",
        "how to run",
        "run with",
        "run it with",
        "synopsis",
        "quick start",
        "quickstart",
        "getting started",
        "try it",
    ];
    if WHOLE.contains(&bare) {
        return true;
    }
    if [
        "usage:",
        "example:",
        "examples:",
        "synopsis:",
        "cargo run",
        "to run ",
    ]
    .iter()
    .any(|p| bare.starts_with(p) || lower.starts_with(p))
    {
        return true;
    }
    // "Run the server with", "Run this example using:": an introduction
    // to a command.
    bare.starts_with("run ")
        && (lower.trim_end().ends_with(':')
            || [" with", " using", " via"]
                .iter()
                .any(|w| bare.ends_with(w)))
}

/// A paragraph that is only a field list (`:copyright: …`, `:orphan:`).
pub(super) fn is_metadata(paragraph: &[(usize, &str)]) -> bool {
    paragraph.iter().all(|(_, t)| {
        t.strip_prefix(':')
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(name, _)| !name.is_empty() && !name.contains(' '))
    })
}

/// A paragraph that is only badges, images, HTML or link definitions.
pub(super) fn is_decoration(paragraph: &[(usize, &str)]) -> bool {
    paragraph.iter().all(|(_, t)| {
        t.starts_with("[![")
            || t.starts_with("![")
            || t.starts_with('<')
            || (t.starts_with('[') && t.contains("]:"))
    })
}

/// Code outside a fence: a doctest or a shell prompt.
pub(super) fn is_code_line(text: &str) -> bool {
    text.starts_with(">>>") || text.starts_with("$ ") || text.starts_with("...")
}
