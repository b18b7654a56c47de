//! The house rules, read from `src/`: the crate's top-level modules (`http`,
//! `mcp`, `runner`, `forge`, `queue`, `wiki`, …) never import each other in a
//! cycle and never import a module of a higher layer (every `crate::…` path,
//! imports and inline paths, comments skipped; failures name the loop or the
//! upward import); only `src/forge/github/` speaks GitHub's REST wire format,
//! and outside `src/forge/` only the files listed here, each for a question
//! only GitHub has, hold its client (source questions go through
//! `SourceForge`); no file grows past 700 production lines.

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

/// A file's production lines: everything above its `#[cfg(test)]` module.
fn production_lines(text: &str) -> usize {
    text.lines()
        .take_while(|line| !line.starts_with("#[cfg(test)]"))
        .count()
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
/// is never among them: that goes through `SourceForge`, so the runner's
/// broker, for one, reads through the forge layer and is not listed.
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
    (
        "runner/job_token.rs",
        "the job's wiki token: an installation token minted and revoked",
    ),
    (
        "runner/mod.rs",
        "the audience gate and the job's wiki token, right before it is minted",
    ),
    (
        "sweep.rs",
        "the audience check before a swept range is queued",
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
