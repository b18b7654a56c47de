//! JavaScript and TypeScript: a leading `//` comment or a JSDoc file
//! header (`/** @file … */`), past a shebang and `"use …"` directives.
//!
//! Invariant: a `/** … */` right above the first declaration documents that
//! declaration, not the file, and is never the file's purpose; JSDoc tags
//! other than the file's own are no purpose.

use super::doc_text::{block_comment, dedent};
use super::never_a_purpose::opens_license;
use super::summary::{Summary, summary};

/// A leading `//` comment or JSDoc file header (`/** @file … */`), past a
/// shebang and `"use …"` directives; a `/** … */` right above the first
/// declaration documents that declaration, not the file.
pub(super) fn script(lines: &[&str]) -> Option<Summary> {
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

#[cfg(test)]
mod tests {
    use crate::purpose::expect::{is, none, spans};

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
}
