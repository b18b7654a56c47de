//! Shell scripts: the leading `#` comment, past the shebang.
//!
//! Invariant: the comment ends at the first line of code; a comment further
//! down is never the script's purpose.

use super::doc_text::dedent;
use super::summary::{Summary, summary};

/// A leading `#` comment, past the shebang.
pub(super) fn shell(lines: &[&str]) -> Option<Summary> {
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

#[cfg(test)]
mod tests {
    use crate::purpose::expect::{is, none};

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
