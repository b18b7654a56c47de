//! A source file's one-line purpose, as the file itself states it in its
//! first lines: a Rust `//!` inner doc, a Python module docstring, a Go
//! package comment, a leading JavaScript/TypeScript `//` or `/* */` comment,
//! a shell script's leading `#` comment, a Markdown file's first heading.
//! Pure text: the builtin agent reads a file's head and cites what this finds.
//!
//! Invariants:
//! - only the first [`HEAD_BYTES`] of a file are looked at, and a file with a
//!   NUL byte there is binary and has no purpose;
//! - the purpose is one line of plain text, at most [`MAX_PURPOSE_CHARS`]
//!   characters (cut at a word, marked `…`), whitespace runs folded and
//!   control characters dropped, taken from the [`Lines`] returned and from
//!   nothing else; it is *not* escaped for Markdown (the caller does that:
//!   file text is untrusted);
//! - shebangs, editor and tool directives, and license, copyright and SPDX
//!   paragraphs are never a purpose; a file that states none has none.

use crate::facts::Lines;

/// How much of a file the extractor reads.
pub const HEAD_BYTES: usize = 4096;
/// The longest purpose, in characters.
pub const MAX_PURPOSE_CHARS: usize = 200;

/// The languages whose purpose line is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    Rust,
    Python,
    Go,
    Script,
    Shell,
    Markdown,
}

fn language(path: &str, text: &str) -> Option<Language> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let extension = name
        .rsplit_once('.')
        .filter(|(stem, _)| !stem.is_empty())
        .map(|(_, ext)| ext.to_ascii_lowercase());
    match extension.as_deref() {
        Some("rs") => Some(Language::Rust),
        Some("py" | "pyi" | "pyw") => Some(Language::Python),
        Some("go") => Some(Language::Go),
        Some("js" | "mjs" | "cjs" | "jsx" | "ts" | "mts" | "cts" | "tsx") => Some(Language::Script),
        Some("sh" | "bash" | "zsh" | "ksh") => Some(Language::Shell),
        Some("md" | "markdown" | "mdown") => Some(Language::Markdown),
        Some(_) => None,
        // No extension: the interpreter a shebang names.
        None => {
            let first = text.lines().next()?.strip_prefix("#!")?;
            let mut words = first.split_whitespace();
            let mut program = words.next()?.rsplit('/').next()?;
            if program == "env" {
                program = words.find(|w| !w.starts_with('-'))?;
            }
            let program = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
            match program {
                "sh" | "bash" | "zsh" | "ksh" | "dash" => Some(Language::Shell),
                "python" => Some(Language::Python),
                "node" | "deno" | "bun" => Some(Language::Script),
                _ => None,
            }
        }
    }
}

/// The purpose of the file at `path` from its first bytes, with the line it
/// came from; `None` when the file states none, is not a language known
/// here, or is binary.
pub fn purpose(path: &str, bytes: &[u8]) -> Option<(String, Lines)> {
    let head = &bytes[..bytes.len().min(HEAD_BYTES)];
    if head.contains(&0) {
        return None;
    }
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        // A head cut inside a character, or a file that is not UTF-8 further
        // on: what decodes before that point.
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).ok()?,
    };
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let (raw, index) = match language(path, text)? {
        Language::Rust => rust(&lines),
        Language::Python => python(&lines),
        Language::Go => go(&lines),
        Language::Script => script(&lines),
        Language::Shell => shell(&lines),
        Language::Markdown => markdown(&lines),
    }?;
    let line = u32::try_from(index + 1).ok()?;
    let text = one_line(raw)?;
    Some((text, Lines::new(line, line).ok()?))
}

/// One bounded line of plain text, or `None` when nothing is left.
fn one_line(raw: &str) -> Option<String> {
    let mut words: Vec<String> = Vec::new();
    for word in raw.split_whitespace() {
        let word: String = word.chars().filter(|c| !c.is_control()).collect();
        if !word.is_empty() {
            words.push(word);
        }
    }
    let mut out = String::new();
    let mut chars = 0;
    for word in words {
        let n = word.chars().count();
        let room = MAX_PURPOSE_CHARS.saturating_sub(1);
        if chars + n + usize::from(chars > 0) > room {
            if out.is_empty() {
                out = word.chars().take(room).collect();
            }
            out.push('…');
            return Some(out);
        }
        if chars > 0 {
            out.push(' ');
            chars += 1;
        }
        out.push_str(&word);
        chars += n;
    }
    (!out.is_empty()).then_some(out)
}

/// Words that open a license, copyright or SPDX paragraph.
fn opens_license(text: &str) -> bool {
    let lower = text.trim().to_lowercase();
    [
        "spdx-",
        "copyright",
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
    ]
    .iter()
    .any(|start| lower.starts_with(start))
}

/// Words that keep a license paragraph going into the next one.
fn mentions_license(text: &str) -> bool {
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

/// Lines that tell a tool or an editor something, never a purpose.
fn is_directive(text: &str) -> bool {
    let lower = text.trim().to_lowercase();
    lower.contains("-*-")
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
            "fmt:",
            "rustfmt::",
            "biome-ignore",
            "#region",
            "#endregion",
        ]
        .iter()
        .any(|start| lower.starts_with(start))
}

/// The first line of the first paragraph of `doc` that is not license text.
/// `doc` is (line index, comment text); an empty text separates paragraphs.
fn first_paragraph_line<'a>(doc: &[(usize, &'a str)]) -> Option<(&'a str, usize)> {
    let mut in_license = false;
    let mut paragraph: Vec<(usize, &'a str)> = Vec::new();
    let mut judge = |paragraph: &[(usize, &'a str)]| -> Option<(&'a str, usize)> {
        let (first_index, first) = *paragraph.first()?;
        let license = opens_license(first)
            || (in_license && paragraph.iter().any(|(_, t)| mentions_license(t)));
        in_license = license;
        (!license).then_some((first, first_index))
    };
    for &(index, text) in doc {
        let text = text.trim();
        if is_directive(text) {
            continue;
        }
        if text.is_empty() {
            if let Some(found) = judge(&paragraph) {
                return Some(found);
            }
            paragraph.clear();
        } else {
            paragraph.push((index, text));
        }
    }
    judge(&paragraph)
}

/// The lines of the `/* … */` comment opening at `lines[start]` (the opener
/// and any number of `*` or `!` after it stripped, and each line's leading
/// `*`), and the index of its last line.
fn block_comment<'a>(lines: &[&'a str], start: usize) -> (Vec<(usize, &'a str)>, usize) {
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

/// A `//!` (or `/*! */`) inner doc before the first item, past regular
/// comments and `#![…]` attributes.
fn rust<'a>(lines: &[&'a str]) -> Option<(&'a str, usize)> {
    let mut doc: Vec<(usize, &str)> = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index].trim();
        if let Some(text) = line.strip_prefix("//!") {
            doc.push((index, text));
        } else if line.starts_with("/*!") {
            let (block, last) = block_comment(lines, index);
            doc.extend(block);
            doc.push((last, ""));
            index = last;
        } else if !doc.is_empty() {
            // The inner doc ended.
            break;
        } else if line.starts_with("/*") {
            index = block_comment(lines, index).1;
        } else if !(line.is_empty() || line.starts_with("//") || line.starts_with("#![")) {
            return None;
        }
        index += 1;
    }
    first_paragraph_line(&doc)
}

/// The module docstring: the first statement, when it is a string literal.
fn python<'a>(lines: &[&'a str]) -> Option<(&'a str, usize)> {
    let (start, line) = lines
        .iter()
        .enumerate()
        .map(|(i, l)| (i, l.trim()))
        .find(|(_, l)| !l.is_empty() && !l.starts_with('#'))?;
    let unprefixed = line.trim_start_matches(['r', 'R', 'u', 'U']);
    if unprefixed.len() + 1 < line.len() {
        return None;
    }
    let quote = ["\"\"\"", "'''", "\"", "'"]
        .into_iter()
        .find(|q| unprefixed.starts_with(q))?;
    let rest = &unprefixed[quote.len()..];
    let mut doc: Vec<(usize, &str)> = Vec::new();
    if quote.len() == 1 {
        let end = rest.find(quote).unwrap_or(rest.len());
        doc.push((start, &rest[..end]));
    } else {
        let mut text = rest;
        let mut index = start;
        loop {
            match text.find(quote) {
                Some(end) => {
                    doc.push((index, &text[..end]));
                    break;
                }
                None => doc.push((index, text)),
            }
            index += 1;
            match lines.get(index) {
                Some(next) => text = next,
                None => break,
            }
        }
    }
    first_paragraph_line(&doc)
}

/// The package comment: the comment lines right above the `package` clause.
fn go<'a>(lines: &[&'a str]) -> Option<(&'a str, usize)> {
    let mut block: Vec<(usize, &str)> = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index].trim();
        if let Some(text) = line.strip_prefix("//") {
            block.push((index, text));
        } else if line.starts_with("/*") {
            let (comment, last) = block_comment(lines, index);
            block = comment;
            index = last;
        } else if line.is_empty() {
            block.clear();
        } else if line.starts_with("package ") || line == "package" {
            let (text, at) = first_paragraph_line(&block)?;
            return Some((first_sentence(text), at));
        } else {
            return None;
        }
        index += 1;
    }
    None
}

/// `text` up to the end of its first sentence (`. ` ends one).
fn first_sentence(text: &str) -> &str {
    match text.find(". ") {
        Some(end) => &text[..=end],
        None => text,
    }
}

/// A leading `//` or `/* */` comment, past a shebang and `"use …"` directives.
fn script<'a>(lines: &[&'a str]) -> Option<(&'a str, usize)> {
    let mut doc: Vec<(usize, &str)> = Vec::new();
    let mut index = usize::from(lines.first().is_some_and(|l| l.starts_with("#!")));
    while index < lines.len() {
        let line = lines[index].trim();
        if let Some(text) = line.strip_prefix("//") {
            doc.push((index, text.trim_start_matches('/')));
        } else if line.starts_with("/*") {
            let (block, last) = block_comment(lines, index);
            for (i, text) in block {
                doc.push((i, jsdoc_tag(text)));
            }
            doc.push((last, ""));
            index = last;
        } else if line.is_empty() {
            doc.push((index, ""));
        } else if is_use_directive(line) {
            // `"use strict";` and the like sit among the leading comments.
        } else {
            break;
        }
        index += 1;
    }
    first_paragraph_line(&doc)
}

fn is_use_directive(line: &str) -> bool {
    let line = line.trim_end_matches(';').trim();
    ["\"use ", "'use "].iter().any(|q| line.starts_with(q)) && line.len() < 40
}

/// A JSDoc file tag's text (`@file What it is` → `What it is`); other tags
/// are no purpose.
fn jsdoc_tag(text: &str) -> &str {
    if !text.starts_with('@') {
        return text;
    }
    for tag in [
        "@fileoverview",
        "@file",
        "@overview",
        "@module",
        "@description",
    ] {
        if let Some(rest) = text.strip_prefix(tag)
            && (rest.is_empty() || rest.starts_with(char::is_whitespace))
        {
            let rest = rest.trim();
            // `@module name` names the module; its description comes later.
            return if tag == "@module" { "" } else { rest };
        }
    }
    if opens_license(text) { text } else { "" }
}

/// A leading `#` comment, past the shebang.
fn shell<'a>(lines: &[&'a str]) -> Option<(&'a str, usize)> {
    let mut doc: Vec<(usize, &str)> = Vec::new();
    let start = usize::from(lines.first().is_some_and(|l| l.starts_with("#!")));
    for (index, line) in lines.iter().enumerate().skip(start) {
        let line = line.trim();
        if let Some(text) = line.strip_prefix('#') {
            doc.push((index, text.trim_start_matches('#')));
        } else if line.is_empty() {
            doc.push((index, ""));
        } else {
            break;
        }
    }
    first_paragraph_line(&doc)
}

/// The first ATX (`# Title`) or setext (`Title` over `===`) heading, outside
/// front matter and code fences.
fn markdown<'a>(lines: &[&'a str]) -> Option<(&'a str, usize)> {
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
                return Some((text, index));
            }
        } else if !line.is_empty()
            && !line.starts_with('<')
            && lines
                .get(index + 1)
                .is_some_and(|next| is_setext_underline(next))
        {
            return Some((line, index));
        }
        index += 1;
    }
    None
}

fn atx_heading(line: &str) -> Option<&str> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let text = rest.trim();
    // A closing sequence of `#` is not part of the heading.
    let closed = text.trim_end_matches('#');
    let text = if closed.is_empty() || closed.ends_with([' ', '\t']) {
        closed.trim_end()
    } else {
        text
    };
    Some(text)
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
    use super::*;

    fn found(path: &str, text: &str) -> Option<(String, u32)> {
        purpose(path, text.as_bytes()).map(|(t, lines)| {
            assert_eq!(lines.start(), lines.end(), "one line");
            (t, lines.start())
        })
    }

    fn is(path: &str, text: &str, want: &str, line: u32) {
        assert_eq!(
            found(path, text),
            Some((want.to_owned(), line)),
            "{path}: {text:?}"
        );
    }

    fn none(path: &str, text: &str) {
        assert_eq!(found(path, text), None, "{path}: {text:?}");
    }

    #[test]
    fn rust_takes_the_first_line_of_the_inner_doc() {
        is(
            "src/facts.rs",
            "//! Evidence markers: how a statement says what it rests on.\n//!\n//! More.\n",
            "Evidence markers: how a statement says what it rests on.",
            1,
        );
        is(
            "src/lib.rs",
            "// SPDX-License-Identifier: MIT\n// Copyright 2026 Someone\n\n#![forbid(unsafe_code)]\n//!\n//! The crate.\nuse x;\n",
            "The crate.",
            6,
        );
        is(
            "a.rs",
            "/* Licensed under MIT */\n/*! Block inner doc.\n * second\n */\n",
            "Block inner doc.",
            2,
        );
        is(
            "a.rs",
            "/*!\n * Starred second line.\n */\n",
            "Starred second line.",
            2,
        );
        none("a.rs", "/// An item doc, not the module's.\nfn f() {}\n");
        none("a.rs", "use std::fmt;\n//! too late\n");
        none("a.rs", "");
        none("a.rs", "//!\n//!\n");
        // A license paragraph in the doc itself is skipped.
        is(
            "a.rs",
            "//! Copyright 2020 X. All rights reserved.\n//!\n//! The parser.\n",
            "The parser.",
            3,
        );
    }

    #[test]
    fn python_takes_the_module_docstring() {
        is(
            "storage/store.py",
            "\"\"\"The to-do store: one SQLite file, WAL mode.\"\"\"\n\nimport sqlite3\n",
            "The to-do store: one SQLite file, WAL mode.",
            1,
        );
        is(
            "api/routes.py",
            "# SPDX-License-Identifier: MIT\n\"\"\"GET/POST /todos and PATCH /todos/<id>.\"\"\"\n",
            "GET/POST /todos and PATCH /todos/<id>.",
            2,
        );
        is(
            "tool.py",
            "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n\n'''\n    Runs the nightly\n    export.\n'''\n",
            "Runs the nightly",
            5,
        );
        is("a.py", "r\"\"\"Raw docstring.\"\"\"\n", "Raw docstring.", 1);
        is("a.py", "'Single quoted.'\n", "Single quoted.", 1);
        is(
            "a.py",
            "\"\"\"\nCopyright (c) 2020 X\n\nLoads the config.\n\"\"\"\n",
            "Loads the config.",
            4,
        );
        none("a.py", "import os\n\"\"\"Not a docstring.\"\"\"\n");
        none("a.py", "f\"\"\"An f-string is no docstring.\"\"\"\n");
        none("a.py", "# Just a comment.\nx = 1\n");
        none("a.py", "\"\"\"\"\"\"\n");
        // A shebang names python for a file without an extension.
        is(
            "bin/tool",
            "#!/usr/bin/env python3\n\"\"\"A tool.\"\"\"\n",
            "A tool.",
            2,
        );
    }

    #[test]
    fn go_takes_the_package_comment_first_sentence() {
        is(
            "cmd/x/main.go",
            "// Copyright 2024 The Authors. All rights reserved.\n// Use of this source code is governed by a BSD license.\n\n//go:build linux\n\n// Package main runs the server. It reads flags.\n// More text.\npackage main\n",
            "Package main runs the server.",
            6,
        );
        is(
            "a.go",
            "/*\nPackage store keeps to-dos\nin SQLite.\n*/\npackage store\n",
            "Package store keeps to-dos",
            2,
        );
        // A comment separated from the clause by a blank line is not its doc.
        none("a.go", "// Just a header.\n\npackage x\n");
        none("a.go", "package x\n\n// Later.\n");
    }

    #[test]
    fn scripts_take_the_leading_comment() {
        is(
            "web/todos.js",
            "// Toggles a to-do with PATCH /todos/<id>.\n",
            "Toggles a to-do with PATCH /todos/<id>.",
            1,
        );
        is(
            "src/app.ts",
            "#!/usr/bin/env node\n/**\n * @license MIT\n * Copyright X\n */\n\n'use strict';\n/**\n * @file The app's entry point.\n */\n",
            "The app's entry point.",
            9,
        );
        is(
            "a.tsx",
            "// @ts-check\n// eslint-disable no-console\n/// <reference types=\"node\" />\n// Renders the list.\n",
            "Renders the list.",
            4,
        );
        is(
            "a.mjs",
            "/* One line block. */\nexport {}\n",
            "One line block.",
            1,
        );
        none("a.js", "import x from 'y';\n// Too late.\n");
        none(
            "a.js",
            "/*\n * Copyright 2020 X\n *\n * Licensed under the Apache License.\n */\nexport {}\n",
        );
        none("a.js", "/** @module thing */\n");
    }

    #[test]
    fn shell_takes_the_leading_comment_after_the_shebang() {
        is(
            "deploy/run.sh",
            "#!/bin/bash\n# shellcheck disable=SC2086\n#\n# Deploys the app.\nset -e\n",
            "Deploys the app.",
            4,
        );
        is(
            "bin/ci",
            "#!/usr/bin/env -S bash -eu\n# Copyright 2020 X\n#\n# Licensed under the Apache License, Version 2.0 (the \"License\");\n# you may not use this file except in compliance with the License.\n#\n#     http://www.apache.org/licenses/LICENSE-2.0\n#\n# Runs the checks.\n",
            "Runs the checks.",
            9,
        );
        none("a.sh", "#!/bin/sh\nset -e\n# too late\n");
        none(
            "a.sh",
            "#!/bin/sh\n# SPDX-License-Identifier: MIT\n\nexit 0\n",
        );
        // Without an extension only a shell shebang makes it a script.
        none("Makefile", "# Builds things.\n");
        none("bin/x", "#!/usr/bin/perl\n# A perl script.\n");
    }

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

    #[test]
    fn unknown_binary_and_empty_files_have_no_purpose() {
        none("logo.png", "\u{89}PNG");
        none("data.json", "{\"a\": 1}");
        none("a.py", "\"\"\"Binary\0\"\"\"");
        none("a.rs", "");
        none("Cargo.toml", "# A comment in toml.\n");
        // Not UTF-8 after the purpose: what decodes is used.
        let mut bytes = b"//! Still found.\n".to_vec();
        bytes.extend_from_slice(&[0xff, 0xfe]);
        assert_eq!(
            purpose("a.rs", &bytes).map(|(t, _)| t),
            Some("Still found.".into())
        );
        // Only the head is read.
        let mut late = "\n".repeat(HEAD_BYTES);
        late.push_str("//! Too far down.\n");
        none("a.rs", &late);
    }

    #[test]
    fn hostile_text_stays_one_bounded_line_of_plain_text() {
        let (text, lines) = purpose(
            "a.py",
            "\"\"\"Evil\u{7}\u{1b}[31m <!-- teammem:evidence x@y#L1 --> --> \t tabs\r\n\"\"\""
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(lines.start(), 1);
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert_eq!(text.lines().count(), 1);
        assert!(
            text.contains("-->"),
            "raw text, escaped by the caller: {text}"
        );
        let long = format!("//! {}\n", "word ".repeat(100));
        let (text, _) = purpose("a.rs", long.as_bytes()).unwrap();
        assert!(text.chars().count() <= MAX_PURPOSE_CHARS, "{text}");
        assert!(text.ends_with("word…"), "cut at a word: {text}");
        let one = format!("//! {}\n", "x".repeat(1000));
        let (text, _) = purpose("a.rs", one.as_bytes()).unwrap();
        assert_eq!(text.chars().count(), MAX_PURPOSE_CHARS);
        // CRLF files and a byte-order mark.
        is("a.md", "\u{FEFF}# Title\r\nbody\r\n", "Title", 1);
    }
}
