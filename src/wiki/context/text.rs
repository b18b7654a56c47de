//! `get_context`'s answer as text, its default `format`: the answer's JSON
//! form rendered one line a thing, for the context window an agent reads
//! it in. JSON spends about a fifth of an answer's bytes (an eighth of its
//! o200k_base tokens) on keys and quoting (`"cited_commit":`,
//! `"kind":"change"`), paid on every item of every call
//! an agent makes before a change; text says each thing once, in words.
//! The packing counts what this file makes ([`item_bytes`], [`line_bytes`],
//! [`result_bytes`]), so `max_tokens` bounds the text an agent gets.
//!
//! Invariants:
//! - everything the JSON value says is in the text (every item's fields,
//!   the paths, what was left out and where to read it, each wiki of an org
//!   answer), except `query`, which the caller sent; an item of a kind this
//!   file does not know is written as its compact JSON, never dropped;
//! - an item's cost is its lines' bytes inside the JSON string that carries
//!   them, escapes and line break included: never less than it adds;
//! - deterministic: the same JSON value gives the same text.
//!
//! The lines (`PAGE:LINE` is where the wiki says it; `COMMIT LINES` what it
//! cites, at that commit):
//! ```text
//! path storage/routes.py: file, area storage (Area-storage.md)
//! purpose storage/routes.py: The storage routes module. [Area-storage.md:13, cites 6b943f9a9da9 L1, current]
//! fact storage/routes.py: BATCH_SIZE = 236 was chosen … [Design-notes.md:24, cites 5c00d4ff80da L3, stale: changed in 37f8482c6f9b]
//! #269 Tune the max rows (Carol, 2026-04-23) merge fe923897ecd5 [Area-storage.md]
//!   why: Under the load of week 269 …
//!   files: storage/retry.py, storage/routes.py
//! people of storage [Area-storage.md]: Carol (8), Esther (5) and 2 more
//! test (Makefile): make test — runs pytest [How-to-work-here.md:15, cites dcff5b098dfc L1-L2, current]
//! earlier changes [Area-storage.md]:
//! #163 Tune the page size of storage import (Carol, 2026-03-09)
//! left out: 3 items (change 3); read more: Area-storage.md
//! ```

use serde_json::{Map, Value, json};

use super::item::estimate_tokens;

/// The text result for a JSON `answer` (one wiki's, with `as_of`, or an org
/// answer): `as_of` (or `as_of_reason`) and `ref` as they were, `text`,
/// and `tokens` counting this result with the `added_bytes` the envelope
/// adds to it (the repositories it names).
pub fn render(answer: &Value, added_bytes: usize) -> Value {
    // `used` counts itself: its digits settle within two rounds.
    let mut used = 0;
    for _ in 0..3 {
        used = estimate_tokens(result(answer, used).to_string().len() + added_bytes);
    }
    result(answer, used)
}

/// JSON bytes of the text result for `answer`, with `used` as wide as the
/// budget (what [`render`] gives is at most this).
pub fn result_bytes(answer: &Value) -> usize {
    let widest = answer["tokens"]["max"].as_u64().unwrap_or(u64::MAX);
    result(answer, usize::try_from(widest).unwrap_or(usize::MAX))
        .to_string()
        .len()
}

/// Bytes an item adds to the text result: its lines inside the `text`
/// string, and the line break before them.
pub fn item_bytes(item: &Value) -> usize {
    line_bytes(&item_text(item))
}

/// Bytes a line adds to the text result, the line break before it included.
pub fn line_bytes(line: &str) -> usize {
    serde_json::to_string(line).map_or(0, |quoted| quoted.len() - 2) + 2
}

fn result(answer: &Value, used: usize) -> Value {
    let mut result = Map::new();
    for key in ["as_of", "as_of_reason", "ref"] {
        if let Some(value) = answer.get(key) {
            result.insert(key.into(), value.clone());
        }
    }
    result.insert("text".into(), Value::String(text(answer)));
    result.insert(
        "tokens".into(),
        json!({"max": answer["tokens"]["max"], "used": used}),
    );
    Value::Object(result)
}

/// The answer's lines.
fn text(answer: &Value) -> String {
    let mut lines: Vec<String> = Vec::new();
    for wiki in list(answer, "wikis") {
        let mut line = format!("wiki {}: ref {}", s(wiki, "repository"), s(wiki, "ref"));
        match wiki.get("as_of").and_then(Value::as_str) {
            Some(sha) => line.push_str(&format!(", as_of {sha}")),
            None => line.push_str(&format!(", as_of unknown ({})", s(wiki, "as_of_reason"))),
        }
        if s(wiki, "wiki_repository") != s(wiki, "repository") {
            line.push_str(&format!(", wiki {}", s(wiki, "wiki_repository")));
        }
        lines.push(line + &notes(wiki));
    }
    for failed in list(answer, "unavailable") {
        lines.push(format!(
            "unavailable {}: {} ({})",
            s(failed, "repository"),
            s(failed, "message"),
            s(failed, "type")
        ));
    }
    let wikis_left = joined(answer, "wikis_left_out");
    if !wikis_left.is_empty() {
        lines.push(format!(
            "wikis left out (over the limit a query reads): {wikis_left}"
        ));
    }
    let notes = notes(answer);
    if !notes.is_empty() {
        lines.push(format!("note:{}", &notes[1..]));
    }
    for path in list(answer, "paths") {
        lines.push(path_line(path));
    }
    for item in list(answer, "items") {
        lines.push(item_text(item));
    }
    lines.extend(left_out(&answer["left_out"]));
    lines.join("\n")
}

/// `; …` for each of a truncated index and unreadable markers a wiki's
/// answer reports (empty when neither).
fn notes(value: &Value) -> String {
    let mut notes = String::new();
    if value["truncated"].as_bool() == Some(true) {
        notes.push_str("; the wiki is larger than the index: pages past it were not read");
    }
    if let Some(n) = counted(value, "unreadable_markers") {
        notes.push_str(&format!("; {n} evidence markers do not parse"));
    }
    notes
}

/// What the answer says of an asked path.
pub fn path_line(path: &Value) -> String {
    let mut line = format!(
        "path {}{}: {}",
        repository(path),
        s(path, "path"),
        s(path, "kind")
    );
    if let Some(area) = path.get("area").and_then(Value::as_str) {
        line.push_str(&format!(", area {area}"));
    }
    if let Some(page) = path.get("area_page").and_then(Value::as_str) {
        line.push_str(&format!(" ({page})"));
    }
    line
}

/// One item: its first line, and for a whole change its why and files.
pub fn item_text(item: &Value) -> String {
    let at = repository(item);
    let about = match joined(item, "about") {
        about if about.is_empty() => about,
        about => format!(" (about {about})"),
    };
    match s(item, "kind") {
        "purpose" | "fact" => format!(
            "{} {at}{}: {}{about} {}",
            s(item, "kind"),
            s(item, "path"),
            s(item, "text").trim_start_matches("- "),
            cited(item, false)
        ),
        "how_to" => {
            let more = counted(item, "more_of_topic")
                .map_or(String::new(), |n| format!(" (+{n} more on the page)"));
            format!(
                "{} {at}({}): {}{more}{about} {}",
                s(item, "topic").to_lowercase(),
                s(item, "path"),
                s(item, "text").trim_start_matches("- "),
                cited(item, false)
            )
        }
        "dependency" => format!(
            "dependency {at}{} {} in {}{about} {}",
            s(item, "name"),
            s(item, "requirement"),
            s(item, "manifest"),
            cited(item, s(item, "path") != s(item, "manifest"))
        ),
        "change" => change_lines(item, &at, &about),
        "people" => {
            format!(
                "people of {at}{} [{}]: {}{}{about}",
                s(item, "area"),
                s(item, "page"),
                joined(item, "authors"),
                and_more(item, "more_authors")
            )
        }
        "earlier_changes" => {
            let mut lines = vec![format!(
                "earlier changes {at}[{}]{about}:",
                joined(item, "pages")
            )];
            lines.extend(
                list(item, "changes")
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned),
            );
            lines.join("\n")
        }
        "passage" => {
            let heading = match item.get("heading").and_then(Value::as_str) {
                Some(heading) => format!(" ({heading})"),
                None => String::new(),
            };
            format!(
                "passage {at}{}:{}{heading}: {}{about}",
                s(item, "page"),
                item["line"],
                s(item, "text")
            )
        }
        _ => item.to_string(),
    }
}

/// `#NUMBER TITLE (AUTHOR, DATE) merge SHA [PAGE]`, then its why, files,
/// dependencies and the branch it arrived through, one line each.
fn change_lines(item: &Value, at: &str, about: &str) -> String {
    let mut lines = vec![format!(
        "{at}#{} {} ({}, {}) merge {} [{}]{about}",
        item["number"],
        s(item, "title"),
        s(item, "author"),
        s(item, "date"),
        s(item, "merge_commit"),
        s(item, "page")
    )];
    if let Some(why) = item.get("why").and_then(Value::as_str) {
        lines.push(format!("  why: {why}"));
    }
    lines.push(format!(
        "  files: {}{}",
        joined(item, "files"),
        and_more(item, "more_files")
    ));
    for (key, label) in [
        ("dependencies", "dependencies"),
        ("arrived_through", "arrived through"),
    ] {
        if let Some(value) = item.get(key).and_then(Value::as_str) {
            lines.push(format!("  {label}: {value}"));
        }
    }
    lines.join("\n")
}

/// `[PAGE:LINE, cites [PATH@]COMMIT LINES, STATUS]`; the path only when it
/// is not the item's subject already.
fn cited(item: &Value, with_path: bool) -> String {
    let path = if with_path {
        format!("{}@", s(item, "path"))
    } else {
        String::new()
    };
    let mut status = s(item, "status").to_owned();
    if let Some(changed) = item.get("changed_in").and_then(Value::as_str) {
        status.push_str(&format!(": changed in {changed}"));
    }
    if item["deleted"].as_bool() == Some(true) {
        status.push_str(", file deleted");
    }
    format!(
        "[{}:{}, cites {path}{} {}, {status}]",
        s(item, "page"),
        item["line"],
        s(item, "cited_commit"),
        s(item, "lines")
    )
}

/// `left out: N items (KIND N, …); read more: PAGE, …` when anything was.
fn left_out(left: &Value) -> Option<String> {
    let items = counted(left, "items")?;
    let kinds: Vec<String> = left["by_kind"]
        .as_object()
        .map(|kinds| {
            kinds
                .iter()
                .map(|(kind, n)| format!("{kind} {n}"))
                .collect()
        })
        .unwrap_or_default();
    let plural = if items == 1 { "" } else { "s" };
    let mut line = format!("left out: {items} item{plural}");
    if !kinds.is_empty() {
        line.push_str(&format!(" ({})", kinds.join(", ")));
    }
    let pages: Vec<String> = list(left, "read_more")
        .iter()
        .map(|page| match page {
            Value::String(page) => page.clone(),
            entry => format!("{}{}", repository(entry), s(entry, "page")),
        })
        .collect();
    if !pages.is_empty() {
        line.push_str(&format!("; read more: {}", pages.join(", ")));
    }
    Some(line)
}

/// `[owner/name] ` for a part of an org answer, else nothing.
fn repository(value: &Value) -> String {
    match value.get("repository").and_then(Value::as_str) {
        Some(repository) => format!("[{repository}] "),
        None => String::new(),
    }
}

fn s<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The strings of the list at `key`, joined by `, `.
fn joined(value: &Value, key: &str) -> String {
    let strings: Vec<&str> = list(value, key).iter().filter_map(Value::as_str).collect();
    strings.join(", ")
}

/// The count at `key`, when there is one and it is not zero.
fn counted(value: &Value, key: &str) -> Option<u64> {
    value[key].as_u64().filter(|n| *n > 0)
}

/// ` and N more` for the count at `key` (nothing when none).
fn and_more(value: &Value, key: &str) -> String {
    counted(value, key).map_or(String::new(), |n| format!(" and {n} more"))
}

fn list<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(items: Value, left_out: Value) -> Value {
        json!({
            "as_of": "a".repeat(40),
            "ref": "b".repeat(40),
            "paths": [{"path": "src/kv.rs", "kind": "file", "area": "src", "area_page": "Area-src.md"}],
            "items": items,
            "tokens": {"max": 2000, "used": 10},
            "left_out": left_out,
        })
    }

    #[test]
    fn each_kind_is_one_line_and_an_unknown_kind_is_kept_as_json() {
        let items = json!([
            {"kind": "dependency", "manifest": "Cargo.toml", "name": "serde", "requirement": "1",
             "page": "Dependencies.md", "line": 4, "path": "Cargo.toml", "cited_commit": "c".repeat(12),
             "lines": "L9", "status": "current"},
            {"kind": "passage", "page": "Design.md", "line": 7, "heading": "Leases", "text": "Leases renew every 10 s."},
            {"kind": "fact", "about": ["src/kv.rs", "src/db.rs"], "page": "Notes.md", "line": 3,
             "path": "src/kv.rs", "cited_commit": "d".repeat(12), "lines": "L2", "status": "stale",
             "changed_in": "e".repeat(12), "deleted": true, "text": "- kv keeps one lock"},
            {"kind": "verdict", "text": "new"},
        ]);
        let result = render(&answer(items, json!({"items": 0})), 0);
        let text = result["text"].as_str().unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "path src/kv.rs: file, area src (Area-src.md)",
                "dependency serde 1 in Cargo.toml [Dependencies.md:4, cites cccccccccccc L9, current]",
                "passage Design.md:7 (Leases): Leases renew every 10 s.",
                "fact src/kv.rs: kv keeps one lock (about src/kv.rs, src/db.rs) [Notes.md:3, cites dddddddddddd L2, stale: changed in eeeeeeeeeeee, file deleted]",
                r#"{"kind":"verdict","text":"new"}"#,
            ]
        );
        assert_eq!(result["as_of"], "a".repeat(40));
        assert_eq!(result["ref"], "b".repeat(40));
    }

    #[test]
    fn used_counts_the_whole_result_with_what_the_envelope_adds() {
        for added in [0, 57, 4_000] {
            let result = render(&answer(json!([]), json!({"items": 0})), added);
            let bytes = result.to_string().len() + added;
            assert_eq!(
                result["tokens"]["used"],
                json!(estimate_tokens(bytes)),
                "{result}"
            );
            assert_eq!(result["tokens"]["max"], 2000);
        }
    }

    #[test]
    fn what_was_left_out_is_said_with_where_to_read_it() {
        let left = json!({"items": 3, "by_kind": {"change": 2, "fact": 1}, "read_more": ["Area-src.md", "Notes.md"]});
        let text = render(&answer(json!([]), left), 0)["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            text.ends_with(
                "left out: 3 items (change 2, fact 1); read more: Area-src.md, Notes.md"
            ),
            "{text}"
        );
        let org = json!({"items": 1, "read_more": [{"repository": "o/a", "page": "Home.md"}]});
        let text = render(&answer(json!([]), org), 0)["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            text.ends_with("left out: 1 item; read more: [o/a] Home.md"),
            "{text}"
        );
    }

    #[test]
    fn an_org_answer_names_each_wiki_and_tags_each_line_with_its_repository() {
        let org = json!({
            "paths": [{"path": "a.py", "kind": "file", "repository": "o/a"}],
            "items": [{"kind": "people", "repository": "o/a", "area": "src", "page": "Area-src.md",
                       "authors": ["Ana (3)"]}],
            "tokens": {"max": 2000, "used": 10},
            "left_out": {"items": 0},
            "wikis": [
                {"repository": "o/a", "wiki_repository": "o/a", "ref": "1".repeat(40), "as_of": "2".repeat(40),
                 "truncated": true, "unreadable_markers": 2},
                {"repository": "o/b", "wiki_repository": "o/notes", "ref": "3".repeat(40), "as_of": null,
                 "as_of_reason": "no job has reconciled this source yet"},
            ],
            "unavailable": [{"repository": "o/c", "type": "not_found", "message": "the wiki has no pages yet"}],
            "wikis_left_out": ["o/d", "o/e"],
        });
        let result = render(&org, 0);
        assert!(
            result.get("as_of").is_none() && result.get("ref").is_none(),
            "{result}"
        );
        let text = result["text"].as_str().unwrap().to_owned();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                format!(
                    "wiki o/a: ref {}, as_of {}; the wiki is larger than the index: pages past it were not read; 2 evidence markers do not parse",
                    "1".repeat(40),
                    "2".repeat(40)
                ),
                format!(
                    "wiki o/b: ref {}, as_of unknown (no job has reconciled this source yet), wiki o/notes",
                    "3".repeat(40)
                ),
                "unavailable o/c: the wiki has no pages yet (not_found)".to_owned(),
                "wikis left out (over the limit a query reads): o/d, o/e".to_owned(),
                "path [o/a] a.py: file".to_owned(),
                "people of [o/a] src [Area-src.md]: Ana (3)".to_owned(),
            ]
        );
    }
}
