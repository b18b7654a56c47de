//! Which extractor a file gets: its language, from the path's extension or,
//! for a file without one, the interpreter its shebang names.
//!
//! Invariant: a file whose language is not one of [`Language`]'s has no
//! purpose (the caller never guesses at other formats).

/// The languages whose purpose line is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Language {
    Rust,
    Python,
    Go,
    Script,
    Shell,
    Markdown,
    Rst,
}

pub(super) fn language(path: &str, text: &str) -> Option<Language> {
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
