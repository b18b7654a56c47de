//! A source file's one-line purpose, as the file itself states it in its
//! first lines: a Rust `//!` inner doc (or the file a
//! `#![doc = include_str!("…")]` names), a Python module docstring, a Go
//! package comment, a JSDoc file header or leading JavaScript/TypeScript
//! comment, a shell script's leading `#` comment, a Markdown file's first
//! heading, an reStructuredText file's title. Pure text: the builtin agent
//! reads a file's head and cites what this finds.
//!
//! Invariants:
//! - only the first [`HEAD_BYTES`] of a file are looked at, and a file with a
//!   NUL byte there is binary and has no purpose;
//! - the purpose is the first sentence of the first meaningful paragraph, as
//!   one line of plain text of at most [`MAX_PURPOSE_CHARS`] characters (a
//!   longer sentence is cut between words and marked `…`, never inside a
//!   word), whitespace runs folded and control characters dropped, taken
//!   from the [`Lines`] returned and from nothing else; it is *not* escaped
//!   for Markdown (the caller does that: file text is untrusted);
//! - shebangs, encoding lines, editor and tool directives, license,
//!   copyright and SPDX paragraphs, field lists, headings inside a doc,
//!   badges, code (fenced, indented, doctests) and usage boilerplate ("Run
//!   with", "Example", "Usage") are never a purpose; a file that states none
//!   has none;
//! - a doc kept in another file is named, not read ([`Stated::Include`]):
//!   the path is resolved inside the repository (never above its root), and
//!   the caller reads that file and asks [`included_purpose`].

use crate::facts::Lines;
use crate::pull_text::{cut_at_word, is_underline, one_line, plain_links, sentence_ends};

/// How much of a file the extractor reads.
pub const HEAD_BYTES: usize = 4096;
/// The longest purpose, in characters.
pub const MAX_PURPOSE_CHARS: usize = 160;

/// What a file's head says about its purpose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stated {
    /// The purpose, and the lines it came from.
    Purpose(String, Lines),
    /// The file's doc is the text of another file of the repository (Rust's
    /// `#![doc = include_str!("../README.md")]`): its path, resolved from
    /// this file's directory, and the line that names it. The caller reads
    /// that file's head and asks [`included_purpose`].
    Include { path: String, line: Lines },
}

/// The languages whose purpose line is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    Rust,
    Python,
    Go,
    Script,
    Shell,
    Markdown,
    Rst,
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
        Some("rst" | "rest") => Some(Language::Rst),
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

/// A purpose found in a file: its text and the (0-based) lines it spans.
struct Summary {
    text: String,
    first: usize,
    last: usize,
}

/// What an extractor found.
enum Found {
    Summary(Summary),
    /// The target of an `include_str!`, as written, and its line.
    Include(String, usize),
}

/// The text of a file's head: `None` for a binary one.
fn head_text(bytes: &[u8]) -> Option<&str> {
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
    Some(text.strip_prefix('\u{FEFF}').unwrap_or(text))
}

fn split_lines(text: &str) -> Vec<&str> {
    text.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

/// What the file at `path` states about its purpose from its first bytes;
/// `None` when it states none, is not a language known here, or is binary.
pub fn stated(path: &str, bytes: &[u8]) -> Option<Stated> {
    let text = head_text(bytes)?;
    let lines = split_lines(text);
    let found = match language(path, text)? {
        Language::Rust => rust(&lines)?,
        Language::Python => Found::Summary(python(&lines)?),
        Language::Go => Found::Summary(go(&lines)?),
        Language::Script => Found::Summary(script(&lines)?),
        Language::Shell => Found::Summary(shell(&lines)?),
        Language::Markdown => Found::Summary(markdown(&lines)?),
        Language::Rst => Found::Summary(rst(&lines)?),
    };
    let line = |index: usize| u32::try_from(index + 1).ok();
    match found {
        Found::Summary(s) => Some(Stated::Purpose(
            s.text,
            Lines::new(line(s.first)?, line(s.last)?).ok()?,
        )),
        Found::Include(target, at) => Some(Stated::Include {
            path: resolve(path, &target)?,
            line: Lines::new(line(at)?, line(at)?).ok()?,
        }),
    }
}

/// The purpose of the file at `path` from its first bytes, with the lines it
/// came from; `None` when the file states none here (also when its doc is
/// another file's: see [`stated`]).
pub fn purpose(path: &str, bytes: &[u8]) -> Option<(String, Lines)> {
    match stated(path, bytes)? {
        Stated::Purpose(text, lines) => Some((text, lines)),
        Stated::Include { .. } => None,
    }
}

/// The purpose an included doc (a crate's `README.md`, read from its first
/// bytes) states: the first sentence of its first meaningful paragraph,
/// past its title, badges, HTML and code.
pub fn included_purpose(bytes: &[u8]) -> Option<String> {
    let text = head_text(bytes)?;
    let lines = split_lines(text);
    let mut start = 0;
    if lines.first().is_some_and(|l| l.trim_end() == "---") {
        // Front matter.
        start = 2 + lines
            .iter()
            .skip(1)
            .position(|l| matches!(l.trim_end(), "---" | "..."))?;
    }
    let doc: Vec<(usize, &str)> = lines.iter().copied().enumerate().skip(start).collect();
    summary(&doc).map(|s| s.text)
}

/// `target` (as an `include_str!` in the file at `from` names it) as a path
/// of the repository; `None` for an absolute path or one above the root.
fn resolve(from: &str, target: &str) -> Option<String> {
    if target.is_empty() || target.starts_with('/') || target.contains('\\') {
        return None;
    }
    let mut parts: Vec<&str> = from.split('/').collect();
    parts.pop();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            name => parts.push(name),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Words that open a license, copyright or SPDX paragraph.
fn opens_license(text: &str) -> bool {
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

/// Lines that tell a tool or an editor something (an encoding line
/// included), never a purpose.
fn is_directive(text: &str) -> bool {
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
fn is_boilerplate(first: &str) -> bool {
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
fn is_metadata(paragraph: &[(usize, &str)]) -> bool {
    paragraph.iter().all(|(_, t)| {
        t.strip_prefix(':')
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(name, _)| !name.is_empty() && !name.contains(' '))
    })
}

/// A paragraph that is only badges, images, HTML or link definitions.
fn is_decoration(paragraph: &[(usize, &str)]) -> bool {
    paragraph.iter().all(|(_, t)| {
        t.starts_with("[![")
            || t.starts_with("![")
            || t.starts_with('<')
            || (t.starts_with('[') && t.contains("]:"))
    })
}

/// Code outside a fence: a doctest or a shell prompt.
fn is_code_line(text: &str) -> bool {
    text.starts_with(">>>") || text.starts_with("$ ") || text.starts_with("...")
}

/// A code fence's character and length (```` ``` ```` or `~~~`, three or more).
fn fence_of(line: &str) -> Option<(char, usize)> {
    let ch = line.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let len = line.chars().take_while(|&c| c == ch).count();
    (len >= 3).then_some((ch, len))
}

/// Columns of leading whitespace (a tab counts four).
fn indent(line: &str) -> usize {
    line.chars()
        .take_while(|c| matches!(c, ' ' | '\t'))
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum()
}

/// `doc` without the leading whitespace all its non-blank lines share.
fn dedent<'a>(doc: &[(usize, &'a str)]) -> Vec<(usize, &'a str)> {
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

/// The purpose a doc states: the first sentence of its first meaningful
/// paragraph. `doc` is (line index, text with the comment markers
/// stripped), already dedented.
fn summary(doc: &[(usize, &str)]) -> Option<Summary> {
    let mut in_license = false;
    let mut i = 0;
    while i < doc.len() {
        let raw = doc[i].1;
        let line = raw.trim();
        if line.is_empty() || is_directive(line) {
            i += 1;
            continue;
        }
        if let Some((ch, len)) = fence_of(line) {
            i += 1;
            while i < doc.len()
                && !fence_of(doc[i].1.trim()).is_some_and(|(c, n)| c == ch && n >= len)
            {
                i += 1;
            }
            i += 1;
            continue;
        }
        if indent(raw) >= 4 {
            // Indented code.
            i += 1;
            continue;
        }
        if line.starts_with("..") {
            // An reStructuredText directive or comment, with its body.
            i = past_indented_body(doc, i);
            continue;
        }
        if atx_heading(line).is_some() || is_underline(line) {
            i += 1;
            continue;
        }
        let mut paragraph: Vec<(usize, &str)> = Vec::new();
        let mut heading = false;
        while i < doc.len() {
            let (index, text) = (doc[i].0, doc[i].1.trim());
            // `~~~~` under a line is an rst underline, not a fence.
            let underline = is_underline(text) && !text.starts_with('`');
            if text.is_empty()
                || (fence_of(text).is_some() && !underline)
                || atx_heading(text).is_some()
            {
                break;
            }
            i += 1;
            if underline {
                // What it underlines is a title (`flask.app` over `~~~~`).
                heading = true;
                break;
            }
            if !is_directive(text) {
                paragraph.push((index, text));
            }
        }
        let Some(&(_, first)) = paragraph.first() else {
            continue;
        };
        if heading {
            continue;
        }
        let license = opens_license(first)
            || (in_license && paragraph.iter().any(|(_, t)| mentions_license(t)));
        in_license = license;
        if license
            || is_boilerplate(first)
            || is_metadata(&paragraph)
            || is_decoration(&paragraph)
            || is_code_line(first)
        {
            continue;
        }
        if let Some(found) = first_sentence(&paragraph) {
            return Some(found);
        }
    }
    None
}

/// The index past the directive at `doc[start]` and the lines indented
/// under it (blank lines inside the body included).
fn past_indented_body(doc: &[(usize, &str)], start: usize) -> usize {
    let base = indent(doc[start].1);
    let mut i = start + 1;
    while i < doc.len() {
        let text = doc[i].1;
        if text.trim().is_empty() {
            let next = doc[i..].iter().find(|(_, t)| !t.trim().is_empty());
            if next.is_some_and(|(_, t)| indent(t) > base) {
                i += 1;
                continue;
            }
            break;
        }
        if indent(text) <= base {
            break;
        }
        i += 1;
    }
    i
}

/// The first sentence of `paragraph` (its lines joined), bounded, with the
/// lines it spans.
fn first_sentence(paragraph: &[(usize, &str)]) -> Option<Summary> {
    let mut joined = String::new();
    let mut starts: Vec<(usize, usize)> = Vec::new();
    for &(index, text) in paragraph {
        if !joined.is_empty() {
            joined.push(' ');
        }
        starts.push((joined.len(), index));
        joined.push_str(text);
    }
    let end = sentence_ends(&joined)
        .first()
        .copied()
        .unwrap_or(joined.len());
    let last = starts
        .iter()
        .rev()
        .find(|(offset, _)| *offset < end)
        .map(|&(_, index)| index)?;
    Some(Summary {
        text: bounded(&plain_links(&joined[..end]))?,
        first: paragraph.first()?.0,
        last,
    })
}

/// `text` as one line of at most [`MAX_PURPOSE_CHARS`] characters, cut
/// between words and marked `…` when longer; `None` when nothing is left
/// or not even its first word fits.
fn bounded(text: &str) -> Option<String> {
    let text = one_line(text);
    if text.is_empty() {
        return None;
    }
    if text.chars().count() <= MAX_PURPOSE_CHARS {
        return Some(text);
    }
    cut_at_word(&text, MAX_PURPOSE_CHARS)
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

/// The string literal of a `#![doc = include_str!("…")]` attribute (also
/// inside `cfg_attr`).
fn doc_include(line: &str) -> Option<&str> {
    if !line.starts_with("#![") || !line.contains("doc") {
        return None;
    }
    let after = line.split_once("include_str!(")?.1.trim_start();
    let literal = after.strip_prefix('"')?;
    let end = literal.find('"')?;
    let target = &literal[..end];
    (!target.contains('\\')).then_some(target)
}

/// A `//!` (or `/*! */`) inner doc before the first item, past regular
/// comments and `#![…]` attributes; or, when an attribute takes the crate's
/// doc from a file first, that file.
fn rust(lines: &[&str]) -> Option<Found> {
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
        } else if let Some(target) = doc_include(line) {
            return Some(Found::Include(target.to_owned(), index));
        } else if line.starts_with("/*") {
            index = block_comment(lines, index).1;
        } else if !(line.is_empty() || line.starts_with("//") || line.starts_with("#![")) {
            return None;
        }
        index += 1;
    }
    summary(&dedent(&doc)).map(Found::Summary)
}

/// The module docstring: the first statement, when it is a string literal
/// (past comments: a shebang, an encoding line, a license header).
fn python(lines: &[&str]) -> Option<Summary> {
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
    // PEP 257: the first line stands on its own, the rest share an indent.
    let mut trimmed = vec![(doc[0].0, doc[0].1.trim())];
    trimmed.extend(dedent(&doc[1..]));
    summary(&trimmed)
}

/// The package comment: the comment lines right above the `package` clause.
fn go(lines: &[&str]) -> Option<Summary> {
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
            return summary(&dedent(&block));
        } else {
            return None;
        }
        index += 1;
    }
    None
}

/// A leading `//` comment or JSDoc file header (`/** @file … */`), past a
/// shebang and `"use …"` directives; a `/** … */` right above the first
/// declaration documents that declaration, not the file.
fn script(lines: &[&str]) -> Option<Summary> {
    let mut doc: Vec<(usize, &str)> = Vec::new();
    let mut index = usize::from(lines.first().is_some_and(|l| l.starts_with("#!")));
    while index < lines.len() {
        let line = lines[index].trim();
        if let Some(text) = line.strip_prefix("//") {
            doc.push((index, text.trim_start_matches('/')));
        } else if line.starts_with("/*") {
            let (block, last) = block_comment(lines, index);
            let file_header = block.iter().any(|(_, t)| is_file_tag(t));
            let next = lines.get(last + 1).map(|l| l.trim()).unwrap_or("");
            let declaration_doc = line.starts_with("/**")
                && !file_header
                && !(next.is_empty()
                    || next.starts_with("//")
                    || next.starts_with("/*")
                    || is_use_directive(next));
            if declaration_doc && !block.iter().any(|(_, t)| opens_license(t)) {
                break;
            }
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
    summary(&dedent(&doc))
}

fn is_use_directive(line: &str) -> bool {
    let line = line.trim_end_matches(';').trim();
    ["\"use ", "'use "].iter().any(|q| line.starts_with(q)) && line.len() < 40
}

/// A JSDoc tag that says the comment is about the file.
fn is_file_tag(text: &str) -> bool {
    ["@file", "@fileoverview", "@overview", "@module"]
        .iter()
        .any(|tag| {
            text.strip_prefix(tag)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace))
        })
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
fn shell(lines: &[&str]) -> Option<Summary> {
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
    summary(&dedent(&doc))
}

/// A heading's text as a purpose.
fn title(text: &str, index: usize) -> Option<Summary> {
    Some(Summary {
        text: bounded(&plain_links(text))?,
        first: index,
        last: index,
    })
}

/// The first ATX (`# Title`) or setext (`Title` over `===`) heading, outside
/// front matter and code fences.
fn markdown(lines: &[&str]) -> Option<Summary> {
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

/// An reStructuredText document's title: the first text line under an
/// adornment (`===` below it, or above and below it), past directives,
/// comments, targets and field lists.
fn rst(lines: &[&str]) -> Option<Summary> {
    let doc: Vec<(usize, &str)> = lines.iter().copied().enumerate().collect();
    let adornment = |line: &str| {
        let line = line.trim_end();
        is_underline(line) && !line.starts_with(' ') && !line.contains(' ')
    };
    let mut i = 0;
    while i < doc.len() {
        let line = doc[i].1.trim_end();
        if line.trim().is_empty() || indent(line) > 0 {
            i += 1;
        } else if line.starts_with("..") {
            i = past_indented_body(&doc, i);
        } else if adornment(line) {
            // An overline: the title is the next line, under a matching
            // underline.
            if let (Some(text), Some(under)) = (lines.get(i + 1), lines.get(i + 2))
                && !text.trim().is_empty()
                && under.trim_end() == line
            {
                return title(text.trim(), i + 1);
            }
            i += 1;
        } else if lines.get(i + 1).is_some_and(|next| adornment(next)) {
            return title(line.trim(), i);
        } else {
            i += 1;
        }
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

    fn found(path: &str, text: &str) -> Option<(String, u32, u32)> {
        purpose(path, text.as_bytes()).map(|(t, lines)| (t, lines.start(), lines.end()))
    }

    /// The purpose `want`, from line `line` alone.
    fn is(path: &str, text: &str, want: &str, line: u32) {
        spans(path, text, want, line, line);
    }

    /// The purpose `want`, from lines `first` to `last`.
    fn spans(path: &str, text: &str, want: &str, first: u32, last: u32) {
        assert_eq!(
            found(path, text),
            Some((want.to_owned(), first, last)),
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
            "/* Licensed under MIT */\n/*! Block inner doc.\n * Second sentence.\n */\n",
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
        spans(
            "tool.py",
            "#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n\n'''\n    Runs the nightly\n    export.\n'''\n",
            "Runs the nightly export.",
            5,
            6,
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
        spans(
            "a.go",
            "/*\nPackage store keeps to-dos\nin SQLite. It is safe.\n*/\npackage store\n",
            "Package store keeps to-dos in SQLite.",
            2,
            3,
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
        // One word longer than the room is no purpose (a word is never cut).
        let one = format!("//! {}\n", "x".repeat(1000));
        assert_eq!(purpose("a.rs", one.as_bytes()), None);
        // CRLF files and a byte-order mark.
        is("a.md", "\u{FEFF}# Title\r\nbody\r\n", "Title", 1);
    }
    #[test]
    fn python_docstrings_after_licenses_encoding_lines_and_titles() {
        // Pallets' old style: an encoding line, the module's dotted name as
        // an rst title, the purpose, then field lists.
        is(
            "src/flask/app.py",
            "# -*- coding: utf-8 -*-\n\"\"\"\n    flask.app\n    ~~~~~~~~~\n\n    This module implements the central WSGI application object.\n\n    :copyright: 2010 Pallets\n    :license: BSD-3-Clause\n\"\"\"\n",
            "This module implements the central WSGI application object.",
            6,
        );
        // An Apache header, then a docstring whose sentence spans two lines.
        spans(
            "falcon/app.py",
            "# Copyright 2013 by Rackspace Hosting, Inc.\n#\n# Licensed under the Apache License, Version 2.0 (the \"License\");\n# you may not use this file except in compliance with the License.\n\n\"\"\"Falcon App class: the WSGI entry point\nof every application. More below.\"\"\"\n",
            "Falcon App class: the WSGI entry point of every application.",
            6,
            7,
        );
        is(
            "a.py",
            "# coding=utf-8\n# vim: set fileencoding=utf-8 :\n'''Helpers for JSON.'''\n",
            "Helpers for JSON.",
            3,
        );
        // Usage first, then the purpose; a literal block after `::` is code.
        is(
            "cli.py",
            "\"\"\"Usage: python -m app.cli [OPTIONS]\n\nRuns the app's command line.\n\nExample::\n\n    python -m app.cli run\n\"\"\"\n",
            "Runs the app's command line.",
            3,
        );
        is(
            "doc.py",
            "\"\"\"\nExample::\n\n    >>> import app\n\n>>> app.run()\n\nRuns apps.\n\"\"\"\n",
            "Runs apps.",
            8,
        );
        // A module without a docstring has no purpose.
        none(
            "b.py",
            "# -*- coding: utf-8 -*-\nfrom __future__ import annotations\n\nimport os\n",
        );
    }

    #[test]
    fn rst_files_take_their_title() {
        is(
            "docs/quickstart.rst",
            "Quickstart\n==========\n\nEager to get started?\n",
            "Quickstart",
            1,
        );
        is(
            "docs/api.rst",
            ".. currentmodule:: flask\n\n.. _api:\n\nAPI\n---\n",
            "API",
            5,
        );
        is(
            "docs/index.rst",
            ":orphan:\n\n.. image:: _static/logo.png\n    :align: center\n\n=====================\nWelcome to Flask\n=====================\n",
            "Welcome to Flask",
            7,
        );
        is(
            "docs/x.rst",
            ".. comment\n   spanning lines\n\n   and a blank\n\nReal Title\n~~~~~~~~~~\n",
            "Real Title",
            6,
        );
        none("docs/changes.rst", ".. include:: ../CHANGES.rst\n");
        none("docs/plain.rst", "Just a paragraph.\n");
    }

    #[test]
    fn rust_docs_skip_usage_boilerplate_and_headings() {
        // An example whose doc is only how to run it states no purpose.
        none(
            "examples/hello/src/main.rs",
            "//! Run with\n//!\n//! ```not_rust\n//! cargo run -p example-hello-world\n//! ```\n\nuse axum::Router;\n",
        );
        is(
            "examples/ws/src/main.rs",
            "//! Example websocket server.\n//!\n//! Run the server with\n//! ```not_rust\n//! cargo run -p example-websockets\n//! ```\n",
            "Example websocket server.",
            1,
        );
        none(
            "src/a.rs",
            "//! # Example\n//!\n//! ```rust\n//! let app = Router::new();\n//! ```\n",
        );
        is(
            "src/b.rs",
            "//! Example:\n//!\n//!     let x = 1;\n//!\n//! # Overview\n//!\n//! Handlers for [`Router`]s, see [the guide](https://x).\n",
            "Handlers for `Router`s, see the guide.",
            7,
        );
        is(
            "src/c.rs",
            "//! Run this example using:\n//!\n//! $ cargo run\n//!\n//! Serves static files.\n",
            "Serves static files.",
            5,
        );
        // The sentence goes on past the first line.
        spans(
            "src/extract/mod.rs",
            "//! Types and traits for extracting data from\n//! requests.\n//!\n//! # Example\n",
            "Types and traits for extracting data from requests.",
            1,
            2,
        );
    }

    #[test]
    fn a_long_first_sentence_is_cut_between_words() {
        let sentence = "Extractor and response for working with form data that is sent in the body of a request or in the query string of a GET request, with rejections for every failure there is.";
        let (text, _) =
            purpose("src/form.rs", format!("//! {sentence} More.\n").as_bytes()).unwrap();
        assert!(text.chars().count() <= MAX_PURPOSE_CHARS, "{text}");
        assert!(text.ends_with('…'), "{text}");
        let kept = text.trim_end_matches('…');
        assert!(sentence.starts_with(kept), "{text}");
        assert!(
            sentence[kept.len()..].starts_with(' '),
            "cut between words: {text}"
        );
        // Two sentences: only the first, whole.
        is(
            "a.rs",
            "//! Serves files, e.g. `index.html`. Also other things.\n",
            "Serves files, e.g. `index.html`.",
            1,
        );
    }

    #[test]
    fn a_crate_doc_from_a_file_is_named_for_the_caller() {
        let lib = "#![cfg_attr(docsrs, feature(doc_auto_cfg))]\n#![doc = include_str!(\"../README.md\")]\n#![warn(missing_docs)]\n";
        assert_eq!(
            stated("axum-extra/src/lib.rs", lib.as_bytes()),
            Some(Stated::Include {
                path: "axum-extra/README.md".into(),
                line: Lines::new(2, 2).unwrap(),
            })
        );
        assert_eq!(purpose("axum-extra/src/lib.rs", lib.as_bytes()), None);
        assert_eq!(
            stated(
                "src/lib.rs",
                b"#![cfg_attr(feature = \"docs\", doc = include_str!(\"docs/lib.md\"))]\n"
            ),
            Some(Stated::Include {
                path: "src/docs/lib.md".into(),
                line: Lines::new(1, 1).unwrap(),
            })
        );
        // Never above the repository's root, never absolute.
        assert_eq!(
            stated("src/lib.rs", b"#![doc = include_str!(\"../../x.md\")]\n"),
            None
        );
        assert_eq!(
            stated("lib.rs", b"#![doc = include_str!(\"/etc/passwd\")]\n"),
            None
        );
        // A `//!` doc written first wins.
        is(
            "src/lib.rs",
            "//! The crate.\n#![doc = include_str!(\"../README.md\")]\n",
            "The crate.",
            1,
        );
        let readme = "# axum-extra\n\n[![Build status](https://github.com/tokio-rs/axum/actions/workflows/CI.yml/badge.svg?branch=main)](https://github.com/tokio-rs/axum/actions)\n[![Crates.io](https://img.shields.io/crates/v/axum-extra)](https://crates.io/crates/axum-extra)\n\n<div align=\"center\">\n\nExtra utilities for [`axum`]. More below.\n\n[`axum`]: https://crates.io/crates/axum\n";
        assert_eq!(
            included_purpose(readme.as_bytes()).as_deref(),
            Some("Extra utilities for `axum`.")
        );
        assert_eq!(included_purpose(b"# Title only\n"), None);
        assert_eq!(included_purpose(b"\0binary"), None);
    }

    #[test]
    fn jsdoc_file_headers_and_declaration_docs() {
        spans(
            "src/app.js",
            "/**\n * @fileoverview Routes requests to\n * handlers. Loaded first.\n * @author Someone\n */\nimport x from 'y';\n",
            "Routes requests to handlers.",
            2,
            3,
        );
        // A JSDoc right above the first declaration documents it, not the file.
        none(
            "src/add.ts",
            "/**\n * Adds two numbers.\n */\nexport function add(a, b) {}\n",
        );
        is(
            "src/b.ts",
            "// Usage: node b.js FILE\n//\n// Converts the file to JSON.\n",
            "Converts the file to JSON.",
            3,
        );
    }

    #[test]
    fn shell_and_go_skip_usage_and_cut_at_sentences() {
        is(
            "deploy.sh",
            "#!/bin/sh\n# Usage: ./deploy.sh ENV\n#\n# Deploys the app to ENV. Needs ssh.\n",
            "Deploys the app to ENV.",
            4,
        );
        is(
            "a.go",
            "// Package routes maps URLs to handlers. See the README.\npackage routes\n",
            "Package routes maps URLs to handlers.",
            1,
        );
    }
}

/// Coverage on two generated trees shaped like real projects: a Python web
/// framework (modules under license headers and encoding lines, docstrings
/// in several styles, tests without docstrings, `.rst` documentation) and a
/// Rust web framework (crates with `//!` docs and `include_str!` READMEs,
/// examples whose doc is only "Run with"). Each generated file carries the
/// purpose a reader would name (or none); `bench/purpose.sh` prints the
/// numbers.
#[cfg(test)]
mod coverage {
    use std::collections::BTreeMap;

    use super::*;

    /// The purpose the builtin agent gets for `path`: an included doc is
    /// read from the tree, as the caller does.
    fn purpose_in(path: &str, text: &str, tree: &BTreeMap<&str, &str>) -> Option<String> {
        match stated(path, text.as_bytes())? {
            Stated::Purpose(text, _) => Some(text),
            Stated::Include { path, .. } => included_purpose(tree.get(path.as_str())?.as_bytes()),
        }
    }

    /// What a reader would call a file's purpose.
    #[derive(Debug, Clone)]
    enum Want {
        Nothing,
        Exact(String),
        /// A first sentence longer than the room: this prefix, cut with `…`.
        Cut(String),
    }

    struct Tree {
        files: BTreeMap<String, (String, Want)>,
    }

    impl Tree {
        fn new() -> Self {
            Tree {
                files: BTreeMap::new(),
            }
        }
        fn add(&mut self, path: &str, text: &str, want: Want) {
            self.files.insert(path.to_owned(), (text.to_owned(), want));
        }
    }

    fn exact(s: &str) -> Want {
        Want::Exact(s.to_owned())
    }

    fn title_case(name: &str) -> String {
        let mut c = name.chars();
        c.next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default()
    }

    const APACHE: &str = "# Copyright 2010 Pallets\n#\n# Licensed under the Apache License, Version 2.0 (the \"License\");\n# you may not use this file except in compliance with the License.\n# You may obtain a copy of the License at\n#\n#     http://www.apache.org/licenses/LICENSE-2.0\n#\n# Unless required by applicable law or agreed to in writing, software\n# distributed under the License is distributed on an \"AS IS\" BASIS.\n";

    /// A Python web framework shaped like the one replayed in issue 36.
    fn python_framework() -> Tree {
        let mut t = Tree::new();
        let modules = [
            "app",
            "blueprints",
            "cli",
            "config",
            "ctx",
            "debughelpers",
            "globals",
            "helpers",
            "logging",
            "sessions",
            "signals",
            "templating",
            "testing",
            "typing",
            "views",
            "wrappers",
            "__main__",
            "json/__init__",
            "json/provider",
            "json/tag",
            "sansio/app",
            "sansio/blueprints",
            "sansio/scaffold",
            "sansio/README",
            "routing",
            "exceptions",
            "datastructures",
            "formparser",
            "http",
            "local",
            "security",
            "serving",
            "urls",
            "utils",
            "wsgi",
            "middleware/proxy_fix",
            "middleware/shared_data",
            "middleware/dispatcher",
            "middleware/lint",
            "middleware/profiler",
        ];
        for (i, module) in modules.iter().enumerate() {
            let name = module.rsplit('/').next().unwrap().trim_matches('_');
            let path = format!("src/framework/{module}.py");
            let dotted = format!("framework.{}", module.replace('/', "."));
            match i % 6 {
                0 => t.add(
                    &path,
                    &format!("{APACHE}\n\"\"\"Implements the {name} machinery that\napplications and blueprints share. Details follow.\n\nMore.\n\"\"\"\nimport os\n"),
                    exact(&format!("Implements the {name} machinery that applications and blueprints share.")),
                ),
                1 => t.add(
                    &path,
                    &format!("# -*- coding: utf-8 -*-\n\"\"\"\n    {dotted}\n    {}\n\n    This module implements the {name} helpers.\n\n    :copyright: 2010 Pallets\n    :license: BSD-3-Clause, see LICENSE for more details.\n\"\"\"\nimport sys\n", "~".repeat(dotted.len())),
                    exact(&format!("This module implements the {name} helpers.")),
                ),
                2 => t.add(
                    &path,
                    "from __future__ import annotations\n\nimport typing as t\n\n\nclass X:\n    pass\n",
                    Want::Nothing,
                ),
                3 => t.add(
                    &path,
                    &format!("#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n# SPDX-License-Identifier: BSD-3-Clause\n\"\"\"{} support for the framework.\"\"\"\n", title_case(name)),
                    exact(&format!("{} support for the framework.", title_case(name))),
                ),
                4 => t.add(
                    &path,
                    &format!("# coding: utf-8\n# Copyright (c) 2010 Pallets\n# All rights reserved.\n\n'''\nThe {name} layer: request and response objects for WSGI.\n\nUsage::\n\n    from framework import {name}\n'''\n"),
                    exact(&format!("The {name} layer: request and response objects for WSGI.")),
                ),
                _ => t.add(
                    &path,
                    &format!("\"\"\"Usage: python -m framework.{name} [OPTIONS]\n\nRuns the {name} command\nfrom the shell.\n\"\"\"\n"),
                    exact(&format!("Runs the {name} command from the shell.")),
                ),
            }
        }
        for i in 0..60 {
            let path = format!("tests/test_case_{i:02}.py");
            if i % 5 == 0 {
                t.add(
                    &path,
                    &format!("\"\"\"Tests for case {i}: the request context\nis pushed and popped.\"\"\"\nimport pytest\n"),
                    exact(&format!("Tests for case {i}: the request context is pushed and popped.")),
                );
            } else {
                t.add(
                    &path,
                    "import pytest\n\nimport framework\n\n\ndef test_it(app):\n    assert app\n",
                    Want::Nothing,
                );
            }
        }
        t.add(
            "tests/conftest.py",
            "import os\nimport pytest\n",
            Want::Nothing,
        );
        let topics = [
            "installation",
            "quickstart",
            "tutorial",
            "templating",
            "testing",
            "errorhandling",
            "debugging",
            "logging",
            "config",
            "signals",
            "views",
            "lifecycle",
            "appcontext",
            "reqcontext",
            "blueprints",
            "extensions",
            "cli",
            "server",
            "shell",
            "patterns",
            "security",
            "deploying",
            "async-await",
            "api",
            "design",
            "extensiondev",
            "license",
            "contributing",
            "changes",
            "index",
        ];
        for (i, topic) in topics.iter().enumerate() {
            for part in 0..3 {
                let path = if part == 0 {
                    format!("docs/{topic}.rst")
                } else {
                    format!("docs/{topic}/part{part}.rst")
                };
                let title = format!("{} part {part}", title_case(topic));
                let line = |c: char| c.to_string().repeat(title.len());
                let (text, want) = match (i + part) % 6 {
                    0 => (
                        format!(
                            "{title}\n{}\n\nEager to get started? This page gives an introduction.\n",
                            line('=')
                        ),
                        exact(&title),
                    ),
                    1 => (
                        format!(
                            ".. currentmodule:: framework\n\n{title}\n{}\n\nText.\n",
                            line('-')
                        ),
                        exact(&title),
                    ),
                    2 => (
                        format!(
                            ":orphan:\n\n{title}\n{}\n\n.. code-block:: python\n\n    x = 1\n",
                            line('~')
                        ),
                        exact(&title),
                    ),
                    3 => (
                        format!("{}\n{title}\n{}\n\nIntro.\n", line('='), line('=')),
                        exact(&title),
                    ),
                    4 => (
                        format!(".. _{topic}-{part}:\n\n{title}\n{}\n", line('^')),
                        exact(&title),
                    ),
                    _ => (".. include:: ../CHANGES.rst\n".to_owned(), Want::Nothing),
                };
                t.add(&path, &text, want);
            }
        }
        t.add(
            "docs/conf.py",
            "project = \"Framework\"\ncopyright = \"2010 Pallets\"\n",
            Want::Nothing,
        );
        for (i, name) in ["__init__", "auth", "blog", "db", "schema", "views"]
            .iter()
            .enumerate()
        {
            let path = format!("examples/tutorial/app/{name}.py");
            if i % 2 == 0 {
                t.add(
                    &path,
                    &format!("\"\"\"The tutorial's {name} blueprint.\"\"\"\n"),
                    exact(&format!("The tutorial's {name} blueprint.")),
                );
            } else {
                t.add(&path, "import functools\n", Want::Nothing);
            }
        }
        for example in ["tutorial", "javascript", "celery"] {
            t.add(
                &format!("examples/{example}/README.rst"),
                &format!(
                    "{example} example\n{}\n\nHow to run it.\n",
                    "=".repeat(example.len() + 8)
                ),
                exact(&format!("{example} example")),
            );
        }
        t.add(
            "README.md",
            "# Framework\n\nA lightweight WSGI web application framework.\n",
            exact("Framework"),
        );
        t.add(
            "CHANGES.rst",
            "Version 3.1.0\n-------------\n\nUnreleased\n",
            exact("Version 3.1.0"),
        );
        for other in [
            "pyproject.toml",
            "tox.ini",
            "LICENSE.txt",
            ".pre-commit-config.yaml",
            "requirements/dev.txt",
            "requirements/docs.txt",
            ".github/workflows/tests.yaml",
        ] {
            t.add(other, "# not source\n", Want::Nothing);
        }
        t
    }

    /// A Rust web framework shaped like the one replayed in issue 36.
    fn rust_framework() -> Tree {
        let mut t = Tree::new();
        let long = "Extractor and response for working with form data that is sent in the body of a request or in the query string of a GET request, with rejections for every failure";
        t.add(
            "web/src/lib.rs",
            "//! web is a web application framework that focuses on ergonomics and modularity.\n//!\n//! # High-level features\n//!\n//! - Route requests to handlers with a macro free API.\n#![warn(missing_docs)]\n",
            exact("web is a web application framework that focuses on ergonomics and modularity."),
        );
        let modules = [
            "body",
            "boxed",
            "error",
            "extension",
            "form",
            "json",
            "handler/mod",
            "handler/future",
            "handler/service",
            "extract/mod",
            "extract/path/mod",
            "extract/path/de",
            "extract/query",
            "extract/rejection",
            "extract/ws",
            "extract/multipart",
            "extract/state",
            "extract/raw_form",
            "extract/matched_path",
            "extract/nested_path",
            "middleware/mod",
            "middleware/from_fn",
            "middleware/map_request",
            "middleware/map_response",
            "response/mod",
            "response/redirect",
            "response/sse",
            "routing/mod",
            "routing/method_routing",
            "routing/route",
            "routing/path_router",
            "routing/strip_prefix",
            "routing/url_params",
            "routing/into_make_service",
            "routing/method_filter",
            "serve/mod",
            "serve/listener",
            "test_helpers/mod",
            "test_helpers/test_client",
            "util",
            "macros",
            "docs",
        ];
        for (i, module) in modules.iter().enumerate() {
            let name = module.trim_end_matches("/mod").rsplit('/').next().unwrap();
            let path = format!("web/src/{module}.rs");
            match i % 6 {
                0 => t.add(
                    &path,
                    &format!("//! Types and traits for extracting {name} data from\n//! requests.\n//!\n//! # Example\n//!\n//! ```rust\n//! use web::{name};\n//! ```\n\nuse crate::x;\n"),
                    exact(&format!("Types and traits for extracting {name} data from requests.")),
                ),
                1 => t.add(
                    &path,
                    "//! # Example\n//!\n//! ```rust\n//! let app = Router::new();\n//! ```\n",
                    Want::Nothing,
                ),
                2 => t.add(&path, "use crate::body::Body;\n\npub struct Thing;\n", Want::Nothing),
                3 => t.add(
                    &path,
                    &format!("//! Routing between [`Service`]s and handlers for {name}.\n\nuse x;\n"),
                    exact(&format!("Routing between `Service`s and handlers for {name}.")),
                ),
                4 => t.add(
                    &path,
                    &format!("// Copyright (c) 2019 The Web Authors\n// SPDX-License-Identifier: MIT\n\n//! {} middleware.\n//!\n//! See [`crate::middleware`] for more details.\n", title_case(name)),
                    exact(&format!("{} middleware.", title_case(name))),
                ),
                _ => t.add(
                    &path,
                    &format!("//! {long} ({name}).\n"),
                    Want::Cut("Extractor and response for working with form data that is sent in the body of a request".into()),
                ),
            }
        }
        for i in 0..20 {
            t.add(
                &format!("web/src/routing/tests/case_{i}.rs"),
                "use super::*;\n\n#[crate::test]\nasync fn it() {}\n",
                Want::Nothing,
            );
        }
        for (krate, what) in [
            ("web-core", "Core types and traits for"),
            ("web-extra", "Extra utilities for"),
            ("web-macros", "Macros for"),
        ] {
            t.add(
                &format!("{krate}/src/lib.rs"),
                "#![cfg_attr(docsrs, feature(doc_auto_cfg))]\n#![doc = include_str!(\"../README.md\")]\n#![warn(missing_docs)]\n\nmod x;\n",
                exact(&format!("{what} `web`.")),
            );
            t.add(
                &format!("{krate}/README.md"),
                &format!("# {krate}\n\n[![Build status](https://github.com/o/web/actions/workflows/CI.yml/badge.svg?branch=main)](https://github.com/o/web/actions)\n[![Crates.io](https://img.shields.io/crates/v/{krate})](https://crates.io/crates/{krate})\n\n{what} [`web`].\n\nMore information about this crate can be found in the [crate documentation][docs].\n\n[docs]: https://docs.rs/{krate}\n"),
                exact(krate),
            );
            t.add(
                &format!("{krate}/CHANGELOG.md"),
                "# Changelog\n\nAll notable changes.\n",
                exact("Changelog"),
            );
            for (i, module) in [
                "body",
                "extract",
                "response",
                "typed_header",
                "routing",
                "handler",
                "either",
                "json_lines",
            ]
            .iter()
            .enumerate()
            {
                let path = format!("{krate}/src/{module}.rs");
                if i % 3 == 2 {
                    t.add(&path, "use crate::x;\n", Want::Nothing);
                } else {
                    t.add(
                        &path,
                        &format!("//! Additional types for\n//! {module} handling.\n"),
                        exact(&format!("Additional types for {module} handling.")),
                    );
                }
            }
        }
        for i in 0..30 {
            let kind = if i % 2 == 0 { "pass" } else { "fail" };
            t.add(
                &format!("web-macros/tests/debug_handler/{kind}/case_{i}.rs"),
                "use web_macros::debug_handler;\n\nfn main() {}\n",
                Want::Nothing,
            );
        }
        for i in 0..45 {
            let example = format!("example-{i:02}");
            let run = format!(
                "//! Run with\n//!\n//! ```not_rust\n//! cargo run -p {example}\n//! ```\n"
            );
            let path = format!("examples/{example}/src/main.rs");
            if i < 29 {
                t.add(&path, &format!("{run}\nuse web::Router;\n"), Want::Nothing);
            } else {
                t.add(
                    &path,
                    &format!("//! Example showing how to use feature {i}.\n//!\n{run}"),
                    exact(&format!("Example showing how to use feature {i}.")),
                );
            }
            t.add(
                &format!("examples/{example}/Cargo.toml"),
                "[package]\n",
                Want::Nothing,
            );
        }
        t.add("README.md", "# web\n\nA web framework.\n", exact("web"));
        t.add(
            "ECOSYSTEM.md",
            "# Community Projects\n",
            exact("Community Projects"),
        );
        t.add(".github/workflows/CI.yml", "name: CI\n", Want::Nothing);
        t
    }

    /// A source file: a language whose files state their purpose.
    fn is_source(path: &str) -> bool {
        let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
        matches!(
            ext,
            "py" | "pyi" | "rs" | "go" | "js" | "ts" | "sh" | "md" | "rst"
        )
    }

    struct Score {
        source: usize,
        with_purpose: usize,
        right: usize,
        right_purposes: usize,
        wrong: Vec<String>,
    }

    fn score(tree: &Tree) -> Score {
        let texts: BTreeMap<&str, &str> = tree
            .files
            .iter()
            .map(|(p, (t, _))| (p.as_str(), t.as_str()))
            .collect();
        let mut s = Score {
            source: 0,
            with_purpose: 0,
            right: 0,
            right_purposes: 0,
            wrong: Vec::new(),
        };
        for (path, (text, want)) in &tree.files {
            if !is_source(path) {
                continue;
            }
            s.source += 1;
            let got = purpose_in(path, text, &texts);
            s.with_purpose += usize::from(got.is_some());
            let ok = match (want, &got) {
                (Want::Nothing, None) => true,
                (Want::Exact(w), Some(g)) => w == g,
                (Want::Cut(prefix), Some(g)) => {
                    g.starts_with(prefix.as_str())
                        && g.ends_with('…')
                        && g.chars().count() <= MAX_PURPOSE_CHARS
                }
                _ => false,
            };
            if ok {
                s.right += 1;
                s.right_purposes += usize::from(got.is_some());
            } else {
                s.wrong.push(format!("{path}: want {want:?}, got {got:?}"));
            }
        }
        s
    }

    fn report(name: &str, tree: &Tree) -> Score {
        let s = score(tree);
        let pct = |n: usize| 100.0 * n as f64 / s.source.max(1) as f64;
        let stating = tree
            .files
            .iter()
            .filter(|(p, (_, w))| is_source(p) && !matches!(w, Want::Nothing))
            .count();
        println!(
            "{name}: {} source files, {} of them state a purpose; {} got one ({:.1}% coverage), {} the right one ({:.1}% of source files, {:.1}% of those stating one); {} files wrong or missed",
            s.source,
            stating,
            s.with_purpose,
            pct(s.with_purpose),
            s.right_purposes,
            pct(s.right_purposes),
            100.0 * s.right_purposes as f64 / stating.max(1) as f64,
            s.wrong.len(),
        );
        for w in s.wrong.iter().take(8) {
            println!("  wrong: {w}");
        }
        s
    }

    #[test]
    fn coverage_on_generated_trees() {
        let python = report("python web framework", &python_framework());
        let rust = report("rust web framework", &rust_framework());
        assert!(python.wrong.is_empty(), "{:#?}", python.wrong);
        assert!(rust.wrong.is_empty(), "{:#?}", rust.wrong);
    }
}
