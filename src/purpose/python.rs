//! Python: the module docstring, past a shebang, an encoding line and a
//! license header.
//!
//! Invariant: only a string literal that is the module's first statement is
//! a docstring; its first line stands on its own (PEP 257).

use super::doc_text::dedent;
use super::summary::{Summary, summary};

/// The module docstring: the first statement, when it is a string literal
/// (past comments: a shebang, an encoding line, a license header).
pub(super) fn python(lines: &[&str]) -> Option<Summary> {
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

#[cfg(test)]
mod tests {
    use crate::purpose::expect::{is, none, spans};

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
}
