//! Coverage on two generated trees shaped like real projects: a Python web
//! framework (modules under license headers and encoding lines, docstrings
//! in several styles, tests without docstrings, `.rst` documentation) and a
//! Rust web framework (crates with `//!` docs and `include_str!` READMEs,
//! examples whose doc is only "Run with"). Each generated file carries the
//! purpose a reader would name (or none); `bench/purpose.sh` prints the
//! numbers.
//!
//! Invariant: the test fails when any generated file's purpose differs from
//! the one a reader would name.

use std::collections::BTreeMap;

use super::{MAX_PURPOSE_CHARS, Stated, included_purpose, stated};

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
        let run =
            format!("//! Run with\n//!\n//! ```not_rust\n//! cargo run -p {example}\n//! ```\n");
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
