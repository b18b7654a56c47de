//! How-to facts from the files besides CI and `package.json`: `Makefile`
//! and `justfile` targets, `tox.ini` environments, `noxfile.py` sessions,
//! `pyproject.toml` tools and scripts, a Cargo workspace's members and
//! `CONTRIBUTING.md`'s headings and shell commands, each read line by line.
//!
//! Invariants: pure; every fact cites the lines that state it (a target's
//! line through its recipe, a script's line, a section's header); targets
//! that are special, patterns, files or private are not commands to offer,
//! nor are Makefile variable assignments (of any flavour, target-specific
//! ones too) or the lines of a `define … endef`; a shape these readers do
//! not follow yields no fact.
//! Each reader stops at [`FACTS_PER_FILE`] facts and copies into a fact at
//! most [`RUN_LINES`] of a recipe and [`TEXT_BYTES`] of a heading, help or
//! comment it shares with others, so a hostile file costs memory in
//! proportion to its size, not to the targets or commands it repeats.

use super::how_to_facts::{
    FACTS_PER_FILE, HowToFact, RUN_LINES, TEXT_BYTES, Topic, cite, clip, command_fact, shell_lines,
    topic_of,
};

/// Lines after `from` that belong to it: indented (by a tab or spaces) or
/// blank, up to the last indented one; (last line, their texts).
fn indented_body<'a>(lines: &[&'a str], from: usize, tab_only: bool) -> (usize, Vec<&'a str>) {
    let mut end = from;
    let mut body = Vec::new();
    for (n, l) in lines.iter().enumerate().skip(from + 1) {
        let inside = if tab_only {
            l.starts_with('\t')
        } else {
            l.starts_with([' ', '\t'])
        };
        if inside && !l.trim().is_empty() {
            end = n;
            body.push(*l);
        } else if !l.trim().is_empty() {
            break;
        }
    }
    (end, body)
}

/// A task runner's target name: letters, digits, `-`, `_`.
fn is_target_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Make's directives: a line that opens with one is no rule, whatever
/// colon it holds (`vpath %.c src:lib`).
const MAKE_DIRECTIVES: &[&str] = &[
    "include", "-include", "sinclude", "vpath", "export", "unexport", "override", "private",
    "undefine", "ifeq", "ifneq", "ifdef", "ifndef", "else", "endif", "define", "endef", "load",
    "-load",
];

/// A `Makefile`'s targets (not special, pattern or file targets, nor
/// variable assignments of any flavour, target-specific ones included, nor
/// lines inside `define … endef`), each as `make <target>` with the first
/// [`RUN_LINES`] of its recipe and how many more it has.
pub(super) fn makefile(path: &str, lines: &[&str]) -> Vec<HowToFact> {
    let mut facts = Vec::new();
    // How deep inside `define … endef` (they nest): those lines are a
    // variable's text, not rules.
    let mut defining = 0usize;
    for (n, line) in lines.iter().enumerate() {
        if facts.len() >= FACTS_PER_FILE {
            break;
        }
        // Make reads `define` and `endef` only on lines not starting with a tab.
        if line.starts_with('\t') {
            continue;
        }
        let opens = line
            .split_whitespace()
            .find(|w| !["override", "export", "private"].contains(w));
        if opens == Some("define") {
            defining += 1;
            continue;
        }
        if defining > 0 {
            if line.split_whitespace().next() == Some("endef") {
                defining -= 1;
            }
            continue;
        }
        if line.starts_with([' ', '#', '.'])
            || MAKE_DIRECTIVES.contains(&line.split_whitespace().next().unwrap_or_default())
        {
            continue;
        }
        let Some((targets, rest)) = line.split_once(':') else {
            continue;
        };
        // `:=`, `::=`, `:::=` assign; `a:: b` is a double-colon rule.
        let rest = rest.strip_prefix(':').unwrap_or(rest);
        if rest.trim_start_matches(':').starts_with('=')
            || targets.contains('=')
            || targets.contains('$')
        {
            continue;
        }
        // `test: CFLAGS = -g` sets a variable for `test`; it is no recipe.
        if rest
            .split(['#', ';'])
            .next()
            .unwrap_or_default()
            .contains('=')
        {
            continue;
        }
        let help = clip(
            rest.split_once("##").map(|(_, h)| h.trim()).unwrap_or(""),
            TEXT_BYTES,
        );
        let (end, body) = indented_body(lines, n, true);
        let Some(cited) = cite(n, end) else { continue };
        let runs = shell_lines(body.iter().map(|l| l.trim_start_matches(['\t', '@', '-'])));
        // Read once per rule, however many targets share the recipe.
        let by_runs = topic_of("", &runs.join("\n"));
        let more = runs.len().saturating_sub(RUN_LINES);
        let shown: Vec<String> = runs.into_iter().take(RUN_LINES).collect();
        let what = if help.is_empty() {
            "Makefile target".to_owned()
        } else {
            format!("Makefile target: {help}")
        };
        for target in targets.split_whitespace().filter(|t| is_target_name(t)) {
            if facts.len() >= FACTS_PER_FILE {
                break;
            }
            let topic = topic_of(&format!("{target} {help}"), "")
                .or(by_runs)
                .unwrap_or(Topic::Other);
            let mut fact = command_fact(
                path,
                (topic, cited),
                Some(format!("make {target}")),
                what.clone(),
                shown.clone(),
            );
            fact.more = more;
            facts.push(fact);
        }
    }
    facts
}

/// A `justfile`'s public recipes, each as `just <name>` with its body and
/// the comment above it.
pub(super) fn justfile(path: &str, lines: &[&str]) -> Vec<HowToFact> {
    let mut facts = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        if facts.len() >= FACTS_PER_FILE {
            break;
        }
        if line.starts_with([' ', '\t', '#', '[']) || line.contains(":=") {
            continue;
        }
        let first = line.split_whitespace().next().unwrap_or_default();
        if ["set", "alias", "export", "import", "mod"].contains(&first) {
            continue;
        }
        let Some((head, _)) = line.split_once(':') else {
            continue;
        };
        let name = head
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .trim_start_matches('@');
        if !is_target_name(name) || name.starts_with('_') {
            continue;
        }
        let above = n.checked_sub(1).map(|p| lines[p].trim());
        if above == Some("[private]") {
            continue;
        }
        let doc = above
            .and_then(|a| a.strip_prefix('#'))
            .map(|d| clip(d.trim(), TEXT_BYTES))
            .unwrap_or_default();
        let (end, body) = indented_body(lines, n, false);
        let runs = shell_lines(body.iter().map(|l| l.trim().trim_start_matches(['@', '-'])));
        let Some(cited) = cite(n, end) else { continue };
        let topic = topic_of(&format!("{name} {doc}"), &runs.join("\n")).unwrap_or(Topic::Other);
        let what = if doc.is_empty() {
            "justfile recipe".to_owned()
        } else {
            format!("justfile recipe: {doc}")
        };
        facts.push(command_fact(
            path,
            (topic, cited),
            Some(format!("just {name}")),
            what,
            runs,
        ));
    }
    facts
}

/// INI/TOML sections: (header line, name, the lines up to the next header).
fn sections(lines: &[&str]) -> Vec<(usize, String, usize)> {
    let mut out: Vec<(usize, String, usize)> = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let t = line.trim();
        if let Some(name) = t
            .strip_prefix('[')
            .and_then(|r| r.split_once(']'))
            .map(|(name, _)| name)
            .filter(|_| !t.starts_with("[["))
        {
            if let Some(last) = out.last_mut() {
                last.2 = n;
            }
            out.push((n, name.trim().to_owned(), lines.len()));
        }
    }
    out
}

/// `key = value` (INI, with continuation lines indented below it) in
/// `lines[from..to]`: (first line, last line, the value's lines).
fn ini_value(
    lines: &[&str],
    (from, to): (usize, usize),
    key: &str,
) -> Option<(usize, usize, Vec<String>)> {
    for n in from..to {
        let Some((k, v)) = lines[n].split_once('=') else {
            continue;
        };
        if lines[n].starts_with([' ', '\t']) || k.trim() != key {
            continue;
        }
        let mut values: Vec<String> = Vec::new();
        if !v.trim().is_empty() {
            values.push(v.trim().to_owned());
        }
        let mut end = n;
        for (m, l) in lines.iter().enumerate().take(to).skip(n + 1) {
            if l.starts_with([' ', '\t']) && !l.trim().is_empty() {
                values.push(l.trim().to_owned());
                end = m;
            } else if !l.trim().is_empty() {
                break;
            }
        }
        return Some((n, end, values));
    }
    None
}

/// `tox.ini`: `tox` runs the env list; each environment's commands as
/// `tox -e <name>` (the bare `[testenv]`'s as `tox`).
pub(super) fn tox(path: &str, lines: &[&str]) -> Vec<HowToFact> {
    let mut facts = Vec::new();
    for (header, name, end) in sections(lines) {
        if facts.len() >= FACTS_PER_FILE {
            break;
        }
        if name == "tox" {
            if let Some((from, to, values)) = ini_value(lines, (header, end), "envlist")
                && let Some(cited) = cite(from, to)
            {
                let envs = values.join(", ").replace(",,", ",");
                facts.push(command_fact(
                    path,
                    (Topic::Test, cited),
                    Some("tox".to_owned()),
                    format!("tox runs the environments {}", envs.trim_matches(',')),
                    Vec::new(),
                ));
            }
            continue;
        }
        let env = match name.strip_prefix("testenv") {
            Some("") => None,
            Some(rest) => match rest.strip_prefix(':') {
                Some(env) => Some(env.trim().to_owned()),
                None => continue,
            },
            None => continue,
        };
        let Some((_, to, commands)) = ini_value(lines, (header, end), "commands") else {
            continue;
        };
        let Some(cited) = cite(header, to) else {
            continue;
        };
        let hint = env.clone().unwrap_or_else(|| "test".to_owned());
        let topic = topic_of(&hint, &commands.join("\n")).unwrap_or(Topic::Test);
        let (command, what) = match &env {
            Some(env) => (format!("tox -e {env}"), format!("tox environment {env}")),
            None => ("tox".to_owned(), "tox, in each environment".to_owned()),
        };
        facts.push(command_fact(
            path,
            (topic, cited),
            Some(command),
            what,
            commands,
        ));
    }
    facts
}

/// Python string literals at the start of `args` (`"a", 'b'`), up to the
/// first argument that is not one.
fn string_args(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = args.trim_start();
    while let Some(q) = rest.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let Some(end) = rest[1..].find(q) else { break };
        out.push(rest[1..1 + end].to_owned());
        rest = rest[end + 2..].trim_start();
        match rest.strip_prefix(',') {
            Some(r) => rest = r.trim_start(),
            None => break,
        }
    }
    out
}

/// `noxfile.py`: each `@nox.session` function as `nox -s <name>`, with what
/// its `session.run(…)` calls run.
pub(super) fn nox(path: &str, lines: &[&str]) -> Vec<HowToFact> {
    let mut facts = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        if facts.len() >= FACTS_PER_FILE {
            break;
        }
        let t = line.trim_end();
        let Some(args) = t
            .strip_prefix("@nox.session")
            .or_else(|| t.strip_prefix("@session"))
        else {
            continue;
        };
        let Some(def) = (n + 1..lines.len().min(n + 4)).find(|&m| lines[m].starts_with("def "))
        else {
            continue;
        };
        let mut name = lines[def][4..]
            .split('(')
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned();
        if let Some((_, rest)) = args.split_once("name=") {
            name = string_args(rest).into_iter().next().unwrap_or(name);
        }
        if !is_target_name(&name) {
            continue;
        }
        let (end, body) = indented_body(lines, def, false);
        let runs: Vec<String> = body
            .iter()
            .filter_map(|l| l.trim().strip_prefix("session.run("))
            .map(|args| string_args(args).join(" "))
            .filter(|r| !r.is_empty())
            .collect();
        let Some(cited) = cite(n, end) else { continue };
        let topic = topic_of(&name, &runs.join("\n")).unwrap_or(Topic::Test);
        facts.push(command_fact(
            path,
            (topic, cited),
            Some(format!("nox -s {name}")),
            "nox session".to_owned(),
            runs,
        ));
    }
    facts
}

/// A TOML `key = "value"` line: (key, value), both unquoted.
fn toml_pair(line: &str) -> Option<(String, String)> {
    let (k, v) = line.split_once('=')?;
    let key = k.trim().trim_matches('"').to_owned();
    let v = v.trim();
    let value = v
        .strip_prefix('"')
        .and_then(|r| r.rfind('"').map(|end| &r[..end]))
        .or_else(|| {
            v.strip_prefix('\'')
                .and_then(|r| r.rfind('\'').map(|end| &r[..end]))
        })?;
    (!key.is_empty() && !key.starts_with('#')).then(|| (key, value.to_owned()))
}

/// `pyproject.toml`: the tools configured in `[tool.*]` sections (pytest,
/// coverage, ruff, black, isort, mypy, pylint, pyright), the console scripts
/// (`[project.scripts]`, `[tool.poetry.scripts]`) and the task runners'
/// scripts (`[tool.hatch.envs.<env>.scripts]`, `[tool.pdm.scripts]`,
/// `[tool.poe.tasks]`).
pub(super) fn pyproject(path: &str, lines: &[&str]) -> Vec<HowToFact> {
    let mut facts = Vec::new();
    for (header, name, end) in sections(lines) {
        if facts.len() >= FACTS_PER_FILE {
            break;
        }
        let tool = name.strip_prefix("tool.").unwrap_or("");
        let tool_name = tool.split('.').next().unwrap_or("");
        let configured = match tool_name {
            "pytest" | "coverage" => Some(Topic::Test),
            "ruff" | "black" | "isort" | "mypy" | "pylint" | "pyright" => Some(Topic::Lint),
            _ => None,
        };
        // One fact per tool: its first section.
        if let Some(topic) = configured
            && !facts
                .iter()
                .any(|f: &HowToFact| f.what.contains(&format!("[tool.{tool_name}")))
            && let Some(cited) = cite(header, header)
        {
            facts.push(command_fact(
                path,
                (topic, cited),
                None,
                format!("{tool_name} is configured in pyproject.toml ([{name}])"),
                Vec::new(),
            ));
            continue;
        }
        let runner = match name.as_str() {
            "project.scripts" | "tool.poetry.scripts" => Some(""),
            "tool.pdm.scripts" => Some("pdm run "),
            "tool.poe.tasks" => Some("poe "),
            _ if name.starts_with("tool.hatch.envs.") && name.ends_with(".scripts") => {
                Some("hatch run ")
            }
            _ => None,
        };
        let Some(runner) = runner else { continue };
        for (n, line) in lines.iter().enumerate().take(end).skip(header + 1) {
            if facts.len() >= FACTS_PER_FILE {
                return facts;
            }
            let Some((key, value)) = toml_pair(line) else {
                continue;
            };
            let Some(cited) = cite(n, n) else { continue };
            let (topic, what) = if runner.is_empty() {
                (
                    Topic::Run,
                    format!("console script ([{name}]), calls {value}"),
                )
            } else {
                (
                    topic_of(&key, &value).unwrap_or(Topic::Other),
                    format!("pyproject.toml script ([{name}])"),
                )
            };
            let runs = if runner.is_empty() {
                Vec::new()
            } else {
                vec![value]
            };
            facts.push(command_fact(
                path,
                (topic, cited),
                Some(format!("{runner}{key}")),
                what,
                runs,
            ));
        }
    }
    facts
}

/// `Cargo.toml`: a workspace's members (and default members).
pub(super) fn cargo(path: &str, lines: &[&str]) -> Vec<HowToFact> {
    let mut facts = Vec::new();
    for (header, name, end) in sections(lines) {
        if name != "workspace" {
            continue;
        }
        for key in ["members", "default-members"] {
            let Some(from) = (header + 1..end).find(|&n| {
                lines[n]
                    .split_once('=')
                    .is_some_and(|(k, _)| k.trim() == key)
            }) else {
                continue;
            };
            let to = (from..end)
                .find(|&n| lines[n].contains(']'))
                .unwrap_or(from);
            let members: Vec<String> = lines[from..=to]
                .join(" ")
                .split_once('=')
                .map(|(_, v)| v)
                .unwrap_or_default()
                .split('"')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect();
            let Some(cited) = cite(from, to) else {
                continue;
            };
            let label = if key == "members" {
                "Cargo workspace members"
            } else {
                "Cargo workspace default members"
            };
            facts.push(command_fact(
                path,
                (Topic::Layout, cited),
                None,
                format!("{label}: {}", members.join(", ")),
                Vec::new(),
            ));
        }
    }
    facts
}

/// Fence info strings whose lines are shell commands.
const SHELL_FENCES: &[&str] = &[
    "",
    "sh",
    "bash",
    "shell",
    "console",
    "zsh",
    "shell-session",
    "terminal",
    "powershell",
    "ps1",
    "pwsh",
    "cmd",
    "bat",
    "fish",
];

/// `CONTRIBUTING.md`: its headings (the guide's outline) and the commands
/// of its shell code blocks, each under the topic its heading or its text
/// points at.
pub(super) fn contributing(path: &str, lines: &[&str]) -> Vec<HowToFact> {
    let mut facts = Vec::new();
    let mut heading = String::new();
    let mut n = 0;
    while n < lines.len() && facts.len() < FACTS_PER_FILE {
        let line = lines[n];
        let t = line.trim_start();
        let fence = ["```", "~~~"].into_iter().find(|f| t.starts_with(f));
        if let Some(fence) = fence {
            let info = t.trim_start_matches(fence.chars().next().unwrap_or('`'));
            let info = info.split_whitespace().next().unwrap_or("").to_lowercase();
            let close = (n + 1..lines.len())
                .find(|&m| lines[m].trim_start().starts_with(fence))
                .unwrap_or(lines.len());
            if SHELL_FENCES.contains(&info.as_str()) {
                let console = info == "console" || info == "shell-session";
                let mut m = n + 1;
                while m < close {
                    if facts.len() >= FACTS_PER_FILE {
                        return facts;
                    }
                    let first = m;
                    let l = lines[m].trim();
                    m += 1;
                    if console && !l.starts_with("$ ") {
                        continue;
                    }
                    // A command continued with `\` ends on the first line without one.
                    let mut text = vec![l];
                    while text.last().is_some_and(|t| t.ends_with('\\')) && m < close {
                        text.push(lines[m].trim());
                        m += 1;
                    }
                    let Some(command) = shell_lines(text).into_iter().next() else {
                        continue;
                    };
                    let topic = topic_of(&command, "")
                        .or_else(|| topic_of(&heading, ""))
                        .unwrap_or(Topic::Other);
                    let Some(cited) = cite(first, m - 1) else {
                        continue;
                    };
                    let what = if heading.is_empty() {
                        path.to_owned()
                    } else {
                        format!("{path}, under “{heading}”")
                    };
                    facts.push(command_fact(
                        path,
                        (topic, cited),
                        Some(command),
                        what,
                        Vec::new(),
                    ));
                }
            }
            n = close + 1;
            continue;
        }
        let level = t.len() - t.trim_start_matches('#').len();
        if (1..=3).contains(&level) && line.starts_with('#') && t[level..].starts_with(' ') {
            // Every command under the heading names it: cut it once, here.
            heading = clip(t[level..].trim().trim_end_matches('#').trim(), TEXT_BYTES);
            if level > 1
                && !heading.is_empty()
                && let Some(cited) = cite(n, n)
            {
                facts.push(command_fact(
                    path,
                    (Topic::Guide, cited),
                    None,
                    format!("{path}: {heading}"),
                    Vec::new(),
                ));
            }
        }
        n += 1;
    }
    facts
}
