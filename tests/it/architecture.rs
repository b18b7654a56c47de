//! The house rules, read from `src/`: the crate's top-level modules (`http`,
//! `mcp`, `runner`, `forge`, `queue`, `wiki`, …) never import each other in a
//! cycle and never import a module of a higher layer (every `crate::…` path,
//! imports and inline paths, comments skipped; failures name the loop or the
//! upward import); within each directory of `src/`, files never import each
//! other in a circle either (the shortest is named); only `src/forge/github/`
//! speaks GitHub's REST wire format, and outside `src/forge/` only the files
//! listed here, each for a question only GitHub has, hold its client (source
//! questions go through `SourceForge`); no file grows past 700 production
//! lines.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

/// Which top-level modules each top-level module refers to.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The top-level module a file under `src/` belongs to (`None` for the crate
/// root files `lib.rs` and `main.rs`).
fn top_module(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_owned())
}

/// The top-level modules named by `crate::` paths in `source`, with
/// `use crate::{a, b::c}` groups expanded and comments ignored.
fn referenced_modules(source: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in source.lines() {
        let code = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let preceded_by_ident = rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
            rest = &rest[at + "crate::".len()..];
            if preceded_by_ident {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                for item in group.split([',', '}']) {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        found.insert(name);
                    }
                    if item.contains('}') {
                        break;
                    }
                }
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// Multi-line `use crate::{…}` groups are joined onto one line first.
fn join_use_groups(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut depth = 0usize;
    for line in source.lines() {
        let trimmed = line.trim_start();
        if depth == 0
            && !(trimmed.starts_with("use crate::{") || trimmed.starts_with("pub use crate::{"))
        {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        out.push_str(trimmed);
        out.push(if depth == 0 { '\n' } else { ' ' });
    }
    out
}

fn graph_of_tree(src: &Path) -> Graph {
    let mut graph = Graph::new();
    let mut pending = vec![src.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("src/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).expect("under src/");
            let Some(module) = top_module(relative) else {
                continue;
            };
            let source = std::fs::read_to_string(&path).expect("a readable source file");
            let edges = graph.entry(module.clone()).or_default();
            for target in referenced_modules(&join_use_groups(&source)) {
                if target != module {
                    edges.insert(target);
                }
            }
        }
    }
    graph
}

/// The shortest cycle through the graph, as `a → b → … → a`, if any.
fn shortest_cycle(graph: &Graph) -> Option<Vec<String>> {
    let mut best: Option<Vec<String>> = None;
    for start in graph.keys() {
        // Breadth-first from `start` back to `start`.
        let mut came_from: BTreeMap<&String, &String> = BTreeMap::new();
        let mut queue: VecDeque<&String> = VecDeque::from([start]);
        let mut closed_by: Option<&String> = None;
        'search: while let Some(node) = queue.pop_front() {
            for next in graph.get(node).into_iter().flatten() {
                if next == start {
                    closed_by = Some(node);
                    break 'search;
                }
                if !came_from.contains_key(next) && graph.contains_key(next) {
                    came_from.insert(next, node);
                    queue.push_back(next);
                }
            }
        }
        let Some(mut node) = closed_by else {
            continue;
        };
        let mut path = vec![start.clone()];
        let mut back = vec![node.clone()];
        while node != start {
            node = came_from[node];
            if node != start {
                back.push(node.clone());
            }
        }
        path.extend(back.into_iter().rev());
        path.push(start.clone());
        if best.as_ref().is_none_or(|b| path.len() < b.len()) {
            best = Some(path);
        }
    }
    best
}

#[test]
fn the_top_level_modules_import_each_other_in_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph_of_tree(&src);
    for expected in ["http", "mcp", "runner", "forge", "queue", "wiki", "config"] {
        assert!(
            graph.contains_key(expected),
            "src/ has no module {expected}; the test reads the wrong tree: {:?}",
            graph.keys()
        );
    }
    if let Some(cycle) = shortest_cycle(&graph) {
        panic!(
            "top-level modules import each other in a cycle: {}; move the shared contract below both",
            cycle.join(" → ")
        );
    }
}

#[test]
fn a_deliberate_cycle_is_found_and_named() {
    let files = [
        (
            "http/mod.rs",
            "use crate::queue::Queue;\nuse crate::{mcp, wiki::Wiki};\n",
        ),
        (
            "mcp/context.rs",
            "use crate::{\n    queue,\n    runner::broker::Client,\n};\n",
        ),
        (
            "runner/mod.rs",
            "// use crate::http is only a comment\nfn f() { crate::mcp::serve(); }\n",
        ),
        ("queue/mod.rs", "use crate::db;\n"),
        ("wiki/mod.rs", "let s = \"not::crate::http\";\n"),
    ];
    let mut graph = Graph::new();
    for (path, source) in files {
        let module = top_module(Path::new(path)).unwrap();
        let edges = graph.entry(module.clone()).or_default();
        edges.extend(
            referenced_modules(&join_use_groups(source))
                .into_iter()
                .filter(|m| *m != module),
        );
    }
    assert_eq!(
        graph["http"],
        BTreeSet::from(["queue".into(), "mcp".into(), "wiki".into()])
    );
    assert_eq!(
        graph["mcp"],
        BTreeSet::from(["queue".into(), "runner".into()])
    );
    assert!(graph["wiki"].is_empty(), "{:?}", graph["wiki"]);
    assert_eq!(
        shortest_cycle(&graph).unwrap(),
        ["mcp", "runner", "mcp"].map(String::from)
    );

    // Without the runner's call back into mcp there is no cycle.
    graph.get_mut("runner").unwrap().clear();
    assert_eq!(shortest_cycle(&graph), None);
}

/// The layers of ARCHITECTURE.md, bottom first: a module may refer only to
/// modules of its own layer or below. (Within the ground layer the
/// cycle test above keeps the order honest.)
const LAYERS: &[&[&str]] = &[
    &[
        "ids",
        "facts",
        "staleness",
        "purpose",
        "pull_text",
        "manifests",
        "secrets",
        "metrics",
        "stdout",
        "db",
        "config",
        "queue",
        "wiki",
        "tokens",
        "sandbox",
    ],
    &["forge"],
    &["ingest", "requests", "writer_contract"],
    &[
        "mcp",
        "worker",
        "runner",
        "relay",
        "sweep",
        "freshness",
        "scheduler",
        "cluster",
    ],
    &["http", "daemon", "demo", "cli"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

#[test]
fn every_module_has_a_layer_and_no_import_points_up() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = graph_of_tree(&src);
    let mut upward = Vec::new();
    for (module, uses) in &graph {
        let Some(own) = layer_of(module) else {
            panic!(
                "src/{module} is in no layer; add it to ARCHITECTURE.md's layering rule and to LAYERS here"
            );
        };
        for used in uses {
            if let Some(theirs) = layer_of(used)
                && theirs > own
            {
                upward.push(format!(
                    "{module} (layer {}) → {used} (layer {})",
                    own + 1,
                    theirs + 1
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports point up a layer: {upward:#?}; move the shared contract below both"
    );
}

/// Every `.rs` file under `dir`, as (path relative to `src/`, text).
fn sources(src: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(src).unwrap().display().to_string();
                out.push((relative, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn only_forge_github_speaks_githubs_rest_api() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut outside = Vec::new();
    for (path, text) in sources(&src) {
        if path.starts_with("forge/github/") {
            continue;
        }
        for wire in [
            "vnd.github",
            "X-GitHub-Api-Version",
            "\"/repos/{",
            "/repos/{}",
        ] {
            if text.contains(wire) {
                outside.push(format!("{path}: {wire}"));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "GitHub's REST wire format outside src/forge/github/: {outside:?}; call the forge instead"
    );
}

/// A file's production lines: all of its lines but those of its
/// `#[cfg(test)]` items, wherever they stand (a test module in the middle,
/// a test-only function inside an `impl`), so production code after a test
/// item counts too.
fn production_lines(text: &str) -> usize {
    without_test_items(&code_only(text)).lines().count()
}

#[test]
fn production_lines_count_to_the_end_of_the_file_without_test_items() {
    let text = "//! A file.\nfn a() {}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { let _ = \"}\"; }\n}\n\nfn b() {\n    let s = \"one\n    two\";\n}\n#[cfg(test)]\nfn helper() {}\n";
    // The doc line, `a`, the blank line, `b`'s four lines (a string across
    // two of them), and one line where each test item stood.
    assert_eq!(
        production_lines(text),
        9,
        "{:?}",
        without_test_items(&code_only(text))
    );
}

/// Most production lines one file may hold: one idea per file.
const MAX_PRODUCTION_LINES: usize = 700;

/// Files still over the limit, each with the most it may hold until it is
/// split; none may grow, and one that got under the limit leaves this list.
const OVER_THE_LIMIT: &[(&str, usize)] = &[];

#[test]
fn no_file_holds_more_than_700_production_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    for (path, text) in sources(&src) {
        let lines = production_lines(&text);
        match OVER_THE_LIMIT.iter().find(|(p, _)| *p == path) {
            Some((_, ceiling)) if lines > *ceiling => problems.push(format!(
                "{path}: {lines} production lines, more than its {ceiling}; split it instead of growing it"
            )),
            Some(_) if lines <= MAX_PRODUCTION_LINES => problems.push(format!(
                "{path}: {lines} production lines, within the limit now; remove it from OVER_THE_LIMIT"
            )),
            Some(_) => {}
            None if lines > MAX_PRODUCTION_LINES => problems.push(format!(
                "{path}: {lines} production lines, more than {MAX_PRODUCTION_LINES}; split it by idea"
            )),
            None => {}
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The files outside `src/forge/` (and `src/config/`, which defines `Forge`)
/// that match on `Forge`, each with why: where a wiki lives, or what only
/// GitHub has. None of them answers a question of the source's code
/// (verification, tip, ancestry, re-check, evidence, history, file reads):
/// those go through `SourceForge`, decided in `forge/source.rs`.
const FORGE_MATCHES: &[(&str, &str)] = &[
    (
        "cli/serve.rs",
        "start-up checks only GitHub has (the App, audiences)",
    ),
    (
        "freshness.rs",
        "a local wiki with no commit yet reads as nothing stale",
    ),
    ("http/dashboard/jobs.rs", "links to GitHub's pages"),
    (
        "mcp/context.rs",
        "where the wiki lives (the writer's remote)",
    ),
    (
        "requests/mod.rs",
        "maintainer requests are GitHub's (PR verification, users)",
    ),
    (
        "runner/fact_check.rs",
        "where the wiki lives and whether it is mirrored",
    ),
    (
        "writer_contract/broker.rs",
        "where the wiki lives (the writer's remote)",
    ),
];

/// The files outside `src/forge/` that reach into the local forge's own
/// module, each with why.
const LOCAL_FORGE_USES: &[(&str, &str)] = &[("demo.rs", "the demo's sample source repository")];

/// The files outside `src/forge/` that hold the GitHub client itself
/// (`GitHubForge`, `forge::github`, or `.github()` from `Forges` or a
/// `SourceForge`), each with the question only GitHub has that they ask of
/// it. A source question (files, listings, evidence, verification, history)
/// is never among them, and nothing in `runner/` is: the runner asks the
/// source's `SourceForge` for everything, its broker's file reads, the
/// audience gate and the job's wiki token (`forge/wiki_token.rs`) included.
const GITHUB_CLIENT_USES: &[(&str, &str)] = &[
    (
        "cli/serve.rs",
        "start-up checks of the App's key, and `check-installations`",
    ),
    (
        "http/mcp.rs",
        "private GitHub wikis read with the App's read-only installation token",
    ),
    (
        "ingest/mod.rs",
        "forges built around a given client (tests, the demo)",
    ),
    (
        "mcp/app_credentials.rs",
        "the App's read-only installation token for private wikis",
    ),
    (
        "mcp/mod.rs",
        "private GitHub wikis read with the App's read-only installation token",
    ),
    (
        "requests/mod.rs",
        "maintainer requests are GitHub's (PR verification, token owners)",
    ),
];

/// The files of `sources` (outside `skip`) whose code (comments skipped)
/// holds any of `needles`.
fn files_holding(sources: &[(String, String)], skip: &[&str], needles: &[&str]) -> Vec<String> {
    sources
        .iter()
        .filter(|(path, _)| !skip.iter().any(|s| path.starts_with(s)))
        .filter(|(_, text)| {
            text.lines()
                .map(|line| line.split("//").next().unwrap_or(""))
                .any(|code| needles.iter().any(|n| code.contains(n)))
        })
        .map(|(path, _)| path.clone())
        .collect()
}

#[test]
fn only_forge_decides_which_forge_answers_a_source_question() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let all = sources(&src);
    for (found, listed, what) in [
        (
            files_holding(
                &all,
                &["forge/", "config/"],
                &["Forge::Local", "Forge::GitHub"],
            ),
            FORGE_MATCHES,
            "match on Forge",
        ),
        (
            files_holding(&all, &["forge/"], &["forge::local"]),
            LOCAL_FORGE_USES,
            "use forge::local",
        ),
        (
            files_holding(
                &all,
                &["forge/"],
                &["GitHubForge", "forge::github", ".github()"],
            ),
            GITHUB_CLIENT_USES,
            "hold the GitHub client",
        ),
    ] {
        let listed: Vec<String> = listed.iter().map(|(p, _)| p.to_string()).collect();
        let unlisted: Vec<&String> = found.iter().filter(|p| !listed.contains(p)).collect();
        let stale: Vec<&String> = listed.iter().filter(|p| !found.contains(p)).collect();
        assert!(
            unlisted.is_empty(),
            "{unlisted:?} {what} outside src/forge/: ask the source's SourceForge (forge/source.rs) instead, or, if it decides where a wiki lives or what only GitHub has, list it with why in tests/it/architecture.rs"
        );
        assert!(
            stale.is_empty(),
            "{stale:?} no longer {what}: remove them from the list in tests/it/architecture.rs"
        );
    }
}

/// `source` with comments, string literals and character literals blanked
/// out (a lifetime stays), so no path is read from text that is not code;
/// the line breaks inside what was blanked stay, so lines still count.
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let at = |i: usize, text: &str| {
        text.chars()
            .enumerate()
            .all(|(k, c)| chars.get(i + k) == Some(&c))
    };
    while i < chars.len() {
        let c = chars[i];
        let after_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if at(i, "//") {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if at(i, "/*") {
            let start = i;
            let mut depth = 0;
            while i < chars.len() {
                if at(i, "/*") {
                    depth += 1;
                    i += 2;
                } else if at(i, "*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
            out.extend(
                chars[start..i.min(chars.len())]
                    .iter()
                    .filter(|&&c| c == '\n'),
            );
        } else if !after_ident && (at(i, "r#") || at(i, "r\"") || at(i, "br#") || at(i, "br\"")) {
            // A raw string: `r"…"`, `r#"…"#`, `br##"…"##`.
            let start = i;
            i += if c == 'b' { 2 } else { 1 };
            let hashes = chars[i..].iter().take_while(|&&h| h == '#').count();
            i += hashes + 1;
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            while i < chars.len() && !at(i, &close) {
                i += 1;
            }
            i += close.len();
            out.push_str("\"\"");
            out.extend(
                chars[start..i.min(chars.len())]
                    .iter()
                    .filter(|&&c| c == '\n'),
            );
        } else if c == '"' {
            let start = i;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
            out.extend(
                chars[start..i.min(chars.len())]
                    .iter()
                    .filter(|&&c| c == '\n'),
            );
        } else if c == '\'' && chars.get(i + 1) == Some(&'\\') {
            // An escaped character literal: `'\n'`, `'\''`, `'\u{1F600}'`.
            i += 3;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `code` (from [`code_only`]) without its `#[cfg(test)]` items: a test
/// module's imports are not the file's.
fn without_test_items(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        // The item ends at its first `;` outside braces, or at the brace
        // that closes its first block.
        let mut depth = 0usize;
        let mut end = item.len();
        for (k, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Every path in `code` that starts at `crate::`, `super::` or `self::`, as
/// its segments, with `{…}` groups (nested too) expanded into one path
/// each: `use super::{a::B, c}` gives `super::a::B` and `super::c`.
fn module_paths(code: &str) -> Vec<Vec<String>> {
    fn ident(rest: &str) -> Option<(&str, &str)> {
        let end = rest
            .char_indices()
            .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
            .map_or(rest.len(), |(k, _)| k);
        (end > 0 && !rest.starts_with(|c: char| c.is_ascii_digit()))
            .then(|| (&rest[..end], &rest[end..]))
    }
    /// Reads one path (and its groups) from `rest` after `prefix`; returns
    /// what follows it.
    fn tree<'a>(mut rest: &'a str, prefix: &[String], out: &mut Vec<Vec<String>>) -> &'a str {
        let mut segments = prefix.to_vec();
        loop {
            rest = rest.trim_start();
            if let Some(group) = rest.strip_prefix('{') {
                rest = group;
                loop {
                    rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
                    if rest.is_empty() {
                        return rest;
                    }
                    if let Some(after) = rest.strip_prefix('}') {
                        return after;
                    }
                    let before = rest.len();
                    rest = tree(rest, &segments, out);
                    if rest.len() == before {
                        // Not a path (`*`, `as`, …): step over one character.
                        rest = &rest[rest.chars().next().map_or(0, char::len_utf8)..];
                    }
                }
            }
            let Some((name, after)) = ident(rest) else {
                if !segments.len().eq(&prefix.len()) {
                    out.push(segments);
                }
                return rest;
            };
            segments.push(name.to_owned());
            let trimmed = after.trim_start();
            match trimmed.strip_prefix("::") {
                Some(next) => rest = next,
                None => {
                    out.push(segments);
                    return after;
                }
            }
        }
    }
    let mut out = Vec::new();
    for start in ["crate", "super", "self"] {
        let mut from = 0;
        while let Some(found) = code[from..].find(start) {
            let at = from + found;
            from = at + start.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            if !code[from..].trim_start().starts_with("::") {
                continue;
            }
            tree(&code[at..], &[], &mut out);
        }
    }
    out
}

/// The module path of a file under `src/` (`runner/builtin/plan.rs` is
/// `runner::builtin::plan`, `runner/builtin/mod.rs` is `runner::builtin`,
/// `lib.rs` is the crate root).
fn module_of(relative: &str) -> Vec<String> {
    let stem = relative.strip_suffix(".rs").unwrap_or(relative);
    let mut segments: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if matches!(
        segments.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        segments.pop();
    }
    segments
}

/// For each directory of `src/` (`"runner/builtin"`), which of its files and
/// subdirectories (`plan`, `context`, …) refer to which siblings: a
/// `crate::`, `super::` or `self::` path in the production code (comments,
/// strings and `#[cfg(test)]` items skipped) that lands in a sibling, or
/// anywhere below it. A subdirectory counts as one node; paths through a
/// parent's re-export land on the parent and count for no sibling. The crate
/// root's own directory is left to the top-level test above.
fn sibling_graphs(files: &[(String, String)]) -> BTreeMap<String, Graph> {
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(path, _)| module_of(path)).collect();
    let mut graphs: BTreeMap<String, Graph> = BTreeMap::new();
    for (path, text) in files {
        let own = module_of(path);
        for found in module_paths(&without_test_items(&code_only(text))) {
            let mut base = own.clone();
            let mut rest = found.as_slice();
            if rest.first().is_some_and(|s| s == "crate") {
                base.clear();
                rest = &rest[1..];
            } else {
                while let Some(first) = rest.first() {
                    match first.as_str() {
                        "super" => {
                            base.pop();
                        }
                        "self" => {}
                        _ => break,
                    }
                    rest = &rest[1..];
                }
            }
            base.extend(rest.iter().cloned());
            let Some(target) = (0..=base.len())
                .rev()
                .map(|n| base[..n].to_vec())
                .find(|prefix| modules.contains(prefix))
            else {
                continue;
            };
            let shared = own.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if shared == 0 || own.len() == shared || target.len() == shared {
                continue;
            }
            graphs
                .entry(own[..shared].join("/"))
                .or_default()
                .entry(own[shared].clone())
                .or_default()
                .insert(target[shared].clone());
        }
    }
    graphs
}

/// Sibling imports left out of the circle search, each with why. A circle
/// they close is another change's to break; once it is, its entry goes.
const KNOWN_FILE_CIRCLES: &[(&str, &str, &str, &str)] = &[(
    "wiki/context",
    "brief",
    "answer",
    "answer.rs <-> brief.rs: the shared item types move below both in the get_context work under way (#35); remove this entry when it lands",
)];

#[test]
fn files_within_a_directory_import_each_other_in_no_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graphs = sibling_graphs(&sources(&src));
    for expected in ["runner", "runner/builtin", "http/dashboard", "wiki", "mcp"] {
        assert!(
            graphs.contains_key(expected),
            "src/{expected} has no sibling imports; the test reads the wrong tree: {:?}",
            graphs.keys()
        );
    }
    for (dir, from, to, _) in KNOWN_FILE_CIRCLES {
        if let Some(edges) = graphs.get_mut(*dir).and_then(|g| g.get_mut(*from)) {
            edges.remove(*to);
        }
    }
    let circles: Vec<String> = graphs
        .iter()
        .filter_map(|(dir, graph)| {
            shortest_cycle(graph).map(|cycle| format!("src/{dir}: {}", cycle.join(" → ")))
        })
        .collect();
    assert!(
        circles.is_empty(),
        "files import each other in a circle: {circles:#?}; move what they share below both (a small file of its own, or the lower file)"
    );
}

#[test]
fn a_deliberate_file_circle_is_found_and_named() {
    let files = [
        ("runner/mod.rs", "pub mod agent;\npub mod builtin;\n"),
        (
            "runner/agent.rs",
            "use super::builtin::plan::Plan; // super::openai is only a comment\n",
        ),
        (
            "runner/openai.rs",
            "fn f() { let s = \"super::agent::X\"; let c = '{'; }\n#[cfg(test)]\nmod tests {\n    use super::super::agent::Task;\n}\n",
        ),
        (
            "runner/builtin/mod.rs",
            "mod plan;\nmod changelog;\npub use plan::Plan;\n",
        ),
        (
            "runner/builtin/plan.rs",
            "use super::{\n    changelog::{plan_changelog, Links},\n    markers::*,\n};\n",
        ),
        (
            "runner/builtin/changelog.rs",
            "fn f<'a>(p: &'a str) { crate::runner::builtin::plan::check(p); }\n",
        ),
        (
            "runner/builtin/markers.rs",
            "pub const HOME: &str = r#\"self::x\"#;\n",
        ),
    ];
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    let mut graphs = sibling_graphs(&files);
    let builtin = &graphs["runner/builtin"];
    assert_eq!(
        builtin["plan"],
        BTreeSet::from(["changelog".into(), "markers".into()])
    );
    assert_eq!(builtin["changelog"], BTreeSet::from(["plan".into()]));
    assert!(!builtin.contains_key("markers"), "{builtin:?}");
    // A comment, a string and a test module are not imports.
    assert_eq!(
        graphs["runner"],
        Graph::from([("agent".into(), BTreeSet::from(["builtin".into()]))])
    );
    assert_eq!(
        shortest_cycle(&graphs["runner/builtin"]).unwrap(),
        ["changelog", "plan", "changelog"].map(String::from)
    );

    // Without the changelog's call back into the plan there is no circle.
    graphs
        .get_mut("runner/builtin")
        .unwrap()
        .remove("changelog");
    assert_eq!(shortest_cycle(&graphs["runner/builtin"]), None);
}
