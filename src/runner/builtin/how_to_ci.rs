//! A GitHub Actions workflow read line by line, without a YAML library (the
//! build stays lean): each job's steps, and of each step its name and its
//! `run:` command, inline or a `|` / `>` block scalar, as a how-to fact.
//!
//! Invariants: only keys of a step itself count (a `run:` nested under
//! `with:` or `defaults:` is not a step's command); a fact cites the `run:`
//! key's line through the last line of its value (a block, or a plain
//! scalar continued on more-indented lines, folded as YAML folds it), so any
//! change to the command makes it stale; a shape this reader does not follow
//! (a quoted value over several lines, a continuation with a comment or a
//! blank line) yields no fact; a file yields at most [`FACTS_PER_FILE`],
//! and a job's or step's name is cut to [`TEXT_BYTES`] before its facts
//! copy it.

use super::how_to_facts::{
    FACTS_PER_FILE, HowToFact, TEXT_BYTES, cite, clip, command_fact, shell_lines, topic_of,
};

/// Indentation in spaces.
fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// `key: value` at the start of a YAML line's text.
fn yaml_key<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let rest = text.strip_prefix(key)?.strip_prefix(':')?;
    (rest.is_empty() || rest.starts_with(' ')).then(|| rest.trim())
}

/// A YAML scalar written on one line, as YAML reads it: quotes taken off
/// (`''` in single quotes is one `'`; a double-quoted one read with JSON's
/// escapes, which YAML's include), a trailing comment dropped; `None` for a
/// quoted one that does not close on this line, has more after it than a
/// comment, or uses an escape JSON lacks.
fn yaml_scalar(value: &str) -> Option<String> {
    let v = value.trim();
    let quoted = |end: usize| {
        let after = v[end + 1..].trim_start();
        (after.is_empty() || after.starts_with('#')).then_some(&v[..=end])
    };
    if v.starts_with('"') {
        let bytes = v.as_bytes();
        let mut at = 1;
        while at < bytes.len() && bytes[at] != b'"' {
            at += if bytes[at] == b'\\' { 2 } else { 1 };
        }
        if at >= bytes.len() {
            return None;
        }
        return serde_json::from_str::<String>(quoted(at)?).ok();
    }
    if v.starts_with('\'') {
        // `''` is a quote inside; a lone `'` closes.
        let mut at = 1;
        while let Some(q) = v[at..].find('\'') {
            if v[at + q..].starts_with("''") {
                at += q + 2;
            } else {
                let text = quoted(at + q)?;
                return Some(text[1..text.len() - 1].replace("''", "'"));
            }
        }
        return None;
    }
    Some(match v.find(" #") {
        Some(at) => v[..at].trim_end().to_owned(),
        None => v.to_owned(),
    })
}

/// The plain scalar `value` (of a key at `key_at`, on line `at`) with the
/// lines that continue it: the more-indented lines below, folded into one
/// line as YAML folds them; (its last line, the text). `None` when it is
/// not a plain scalar this reader follows: quoted and continued, or
/// continued across a comment, a blank line or what looks like a key.
fn continued(lines: &[&str], at: usize, key_at: usize, value: &str) -> Option<(usize, String)> {
    let more = lines[at + 1..]
        .iter()
        .take_while(|l| l.trim().is_empty() || indent(l) > key_at)
        .count();
    // Blank and comment lines after the last continued one belong to no value.
    let more = lines[at + 1..at + 1 + more]
        .iter()
        .rposition(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map_or(0, |last| last + 1);
    if more == 0 {
        return Some((at, yaml_scalar(value)?));
    }
    let first = value.trim();
    let rest = &lines[at + 1..=at + more];
    let plain = !first.starts_with(['"', '\'', '|', '>', '[', '{', '&', '*', '!', '#']);
    let simple =
        |t: &str| !t.is_empty() && !t.starts_with('#') && !t.contains(" #") && !t.contains(": ");
    if !plain
        || (!first.is_empty() && !simple(first))
        || !rest.iter().all(|l| simple(l.trim()))
        || (first.is_empty() && rest[0].trim_start().starts_with(['"', '\'', '-', '|', '>']))
    {
        return None;
    }
    let folded: Vec<&str> = std::iter::once(first)
        .chain(rest.iter().map(|l| l.trim()))
        .filter(|t| !t.is_empty())
        .collect();
    Some((at + more, folded.join(" ")))
}

/// One workflow step being read.
#[derive(Default)]
struct Step {
    name: Option<String>,
    run: Option<(usize, usize, Vec<String>)>,
}

/// A GitHub Actions workflow: each step's `run:` (inline or a `|`/`>`
/// block), with its job and step name; steps that set up, build, test, lint
/// or run, others left out.
pub(super) fn workflow(path: &str, lines: &[&str]) -> Vec<HowToFact> {
    let file = path.rsplit('/').next().unwrap_or(path);
    let mut facts = Vec::new();
    let mut in_jobs = false;
    let mut job_indent: Option<usize> = None;
    let mut job = String::new();
    let mut step_indent: Option<usize> = None;
    let mut step: Option<Step> = None;
    let flush = |step: Option<Step>, job: &str, facts: &mut Vec<HowToFact>| {
        let Some(Step {
            name,
            run: Some((from, to, runs)),
        }) = step
        else {
            return;
        };
        let name = name.unwrap_or_default();
        let Some(topic) = topic_of(&name, &runs.join("\n")) else {
            return;
        };
        let Some(cited) = cite(from, to) else { return };
        let mut what = format!("CI: workflow {file}, job {job}");
        if !name.is_empty() {
            what.push_str(&format!(", step “{name}”"));
        }
        let (command, runs) = if runs.len() == 1 {
            (runs.into_iter().next(), Vec::new())
        } else {
            (None, runs)
        };
        facts.push(command_fact(path, (topic, cited), command, what, runs));
    };
    // The indentation of the job's `steps:` key, while inside it.
    let mut steps_key: Option<usize> = None;
    let mut i = 0;
    while i < lines.len() && facts.len() < FACTS_PER_FILE {
        let line = lines[i];
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            i += 1;
            continue;
        }
        let at = indent(line);
        if at == 0 {
            flush(step.take(), &job, &mut facts);
            in_jobs = yaml_key(text, "jobs") == Some("");
            (job_indent, steps_key, step_indent) = (None, None, None);
            i += 1;
            continue;
        }
        if !in_jobs {
            i += 1;
            continue;
        }
        if job_indent.is_none_or(|j| at <= j) {
            // A job's key.
            flush(step.take(), &job, &mut facts);
            (steps_key, step_indent) = (None, None);
            if let Some((key, rest)) = text.split_once(':')
                && rest.trim().is_empty()
            {
                job_indent = Some(at);
                job = clip(key.trim_matches(['"', '\'']), TEXT_BYTES);
            }
            i += 1;
            continue;
        }
        if steps_key.is_some_and(|s| at <= s) {
            flush(step.take(), &job, &mut facts);
            (steps_key, step_indent) = (None, None);
        }
        let Some(steps_at) = steps_key else {
            if yaml_key(text, "steps") == Some("") {
                steps_key = Some(at);
            }
            i += 1;
            continue;
        };
        let item = text.strip_prefix("- ").or((text == "-").then_some(""));
        let (key_text, key_at) = match item {
            Some(rest) if at > steps_at && step_indent.is_none_or(|s| s == at) => {
                flush(step.take(), &job, &mut facts);
                step_indent = Some(at);
                step = Some(Step::default());
                (rest, at + 2)
            }
            _ => (text, at),
        };
        // Only a step's own keys (not those nested deeper, under `with:`).
        let Some(current) = step
            .as_mut()
            .filter(|_| step_indent.map(|s| s + 2) == Some(key_at))
        else {
            i += 1;
            continue;
        };
        if let Some(value) = yaml_key(key_text, "name") {
            current.name = yaml_scalar(value).map(|name| clip(&name, TEXT_BYTES));
        } else if let Some(value) = yaml_key(key_text, "run") {
            if let Some(style) = value.chars().next().filter(|c| *c == '|' || *c == '>') {
                let mut end = i;
                let mut body = Vec::new();
                let mut j = i + 1;
                while j < lines.len() {
                    let l = lines[j];
                    if !l.trim().is_empty() && indent(l) <= key_at {
                        break;
                    }
                    if !l.trim().is_empty() {
                        end = j;
                    }
                    body.push(l);
                    j += 1;
                }
                let runs = if style == '>' {
                    let joined = body
                        .iter()
                        .map(|l| l.trim())
                        .filter(|l| !l.is_empty())
                        .collect::<Vec<_>>()
                        .join(" ");
                    shell_lines([joined.as_str()])
                } else {
                    shell_lines(body)
                };
                if !runs.is_empty() {
                    current.run = Some((i, end, runs));
                }
                i = j;
                continue;
            }
            let Some((end, command)) = continued(lines, i, key_at, value) else {
                // A value this reader cannot fold is no step's command.
                current.run = None;
                i += 1;
                continue;
            };
            let runs = shell_lines([command.as_str()]);
            current.run = (!runs.is_empty()).then_some((i, end, runs));
            i = end + 1;
            continue;
        }
        i += 1;
    }
    flush(step, &job, &mut facts);
    facts
}
