//! How text becomes search terms, for the wiki's ranked search and
//! `get_context`: words (lowercased; `snake_case` and `camelCase`
//! identifiers also yield their parts), a light suffix stemmer (so
//! "depends", "dependency" and "dependencies" meet), stop and question words
//! that never drive a ranking, and whole paths (`api/routes.py`, and each
//! folder above it as `api/`) as terms of their own.
//!
//! Invariants: pure and deterministic; the same function analyses pages and
//! queries, so a word written either way meets itself; a query made only of
//! stop words still searches by them (it is what was asked), never for
//! nothing.

/// Lowercased tokens of `text`: runs of alphanumerics and `_`; an identifier
/// with `_` also yields its parts, so `source_cursors` finds `cursors`.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
    {
        let lower = word.to_lowercase();
        if lower.contains('_') {
            let parts: Vec<&str> = lower.split('_').filter(|p| !p.is_empty()).collect();
            out.extend(parts.iter().map(|p| (*p).to_owned()));
            if parts.len() > 1 {
                out.push(lower.trim_matches('_').to_owned());
            }
        } else {
            out.push(lower);
        }
    }
    out
}

/// What path terms start with, so a path never meets a word.
pub const PATH_PREFIX: &str = "@path:";

/// Words that say how a question is asked, not what it is about: English
/// function words, question words and the verbs questions are built with.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing",
    "done", "each", "else", "for", "from", "get", "gets", "had", "has", "have", "having", "he",
    "her", "here", "him", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me",
    "might", "more", "most", "must", "my", "no", "not", "now", "of", "on", "once", "only", "or",
    "other", "our", "out", "over", "please", "same", "shall", "she", "should", "so", "some",
    "such", "tell", "than", "that", "the", "their", "them", "then", "there", "these", "they",
    "this", "those", "through", "to", "too", "under", "up", "us", "very", "was", "we", "were",
    "what", "whats", "when", "where", "which", "while", "who", "whom", "whose", "why", "will",
    "with", "would", "you", "your",
];

/// True for a stop or question word (lowercase).
pub fn is_stop(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// A word's stem: plurals, then one common suffix, then a final `e`, off
/// words of at least four ASCII letters (others are kept whole, so numbers,
/// hashes and other scripts match only as written).
pub fn stem(word: &str) -> String {
    if word.len() < 4 || !word.bytes().all(|b| b.is_ascii_lowercase()) {
        return word.to_owned();
    }
    let mut w = word.to_owned();
    if let Some(base) = w.strip_suffix("ies").filter(|b| b.len() >= 2) {
        w = format!("{base}y");
    } else if w.ends_with("sses") {
        w.truncate(w.len() - 2);
    } else if w.ends_with('s') && !(w.ends_with("ss") || w.ends_with("us") || w.ends_with("is")) {
        w.truncate(w.len() - 1);
    }
    const SUFFIXES: &[(&str, &str)] = &[
        ("ational", "ate"),
        ("ation", "ate"),
        ("ness", ""),
        ("ment", ""),
        ("ency", ""),
        ("ence", ""),
        ("ancy", ""),
        ("ance", ""),
        ("able", ""),
        ("ible", ""),
        ("ing", ""),
        ("ed", ""),
        ("er", ""),
        ("ly", ""),
    ];
    for (suffix, with) in SUFFIXES {
        if let Some(base) = w.strip_suffix(suffix)
            && base.len() >= 3
            && !(*suffix == "ed" && base.ends_with('e'))
        {
            w = format!("{base}{with}");
            // "running" → "runn" → "run"; "called" keeps its "ll".
            let bytes = w.as_bytes();
            let n = bytes.len();
            if with.is_empty()
                && matches!(*suffix, "ing" | "ed" | "er")
                && n >= 4
                && bytes[n - 1] == bytes[n - 2]
                && !b"aeioulsz".contains(&bytes[n - 1])
            {
                w.truncate(n - 1);
            }
            break;
        }
    }
    if w.len() >= 4 && w.ends_with('e') {
        w.truncate(w.len() - 1);
    }
    w
}

/// The lowercased words of `text` ([`tokens`]) with the parts of each
/// `camelCase` word added after it.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
    {
        let lower = tokens(raw);
        out.extend(lower);
        let parts = camel_parts(raw);
        if parts.len() > 1 {
            out.extend(parts);
        }
    }
    out
}

/// `SearchIndex` → `search`, `index`; a word with no inner capital → itself.
fn camel_parts(word: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = word.chars().collect();
    for (i, &ch) in chars.iter().enumerate() {
        let starts = ch.is_uppercase()
            && i > 0
            && (chars[i - 1].is_lowercase()
                || chars.get(i + 1).is_some_and(|next| next.is_lowercase()));
        if (starts || ch == '_') && !current.is_empty() {
            parts.push(std::mem::take(&mut current));
        }
        if ch != '_' {
            current.extend(ch.to_lowercase());
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// Whether a word (punctuation around it trimmed) reads as a repository
/// path: it holds a `/` between names, or is `name.ext`; never a URL.
fn as_path(word: &str) -> Option<String> {
    let trimmed = word
        .trim_matches(|c: char| "`'\"()[]{}<>,;:!?*".contains(c))
        .trim_end_matches('.');
    let cleaned = trimmed.replace('\\', "");
    if cleaned.is_empty() || cleaned.contains("://") || cleaned.len() > 300 {
        return None;
    }
    let path = cleaned.trim_start_matches("./").trim_start_matches('/');
    let ok_chars = path
        .chars()
        .all(|c| c.is_alphanumeric() || "._-/+~@".contains(c));
    if !ok_chars || path.is_empty() {
        return None;
    }
    let has_folder = path.split('/').filter(|part| !part.is_empty()).count() > 1
        || (path.ends_with('/') && path.len() > 1);
    let has_extension = path.rsplit_once('.').is_some_and(|(name, ext)| {
        !name.is_empty()
            && !name.ends_with('.')
            && (1..=8).contains(&ext.len())
            && ext.chars().all(|c| c.is_ascii_alphanumeric())
            && ext.chars().any(|c| c.is_ascii_alphabetic())
    });
    (has_folder || has_extension).then(|| path.to_lowercase())
}

/// The paths `text` names, each with the folders above it (`api/`),
/// lowercased, in order, once each.
pub fn path_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        let Some(path) = as_path(word) else {
            continue;
        };
        let mut push = |p: String| {
            if !out.contains(&p) {
                out.push(p);
            }
        };
        let mut at = 0;
        while let Some(slash) = path[at..].find('/') {
            let end = at + slash + 1;
            if end > 1 {
                push(path[..end].to_owned());
            }
            at = end;
        }
        push(path.trim_end_matches('/').to_owned());
        if path.ends_with('/') {
            push(path.clone());
        }
    }
    out
}

/// The terms of page text: stemmed words (stop words kept: a page is indexed
/// whole) and its paths as [`PATH_PREFIX`] terms.
pub fn text_terms(text: &str) -> Vec<String> {
    let mut out: Vec<String> = words(text).iter().map(|w| stem(w)).collect();
    out.extend(
        path_words(text)
            .into_iter()
            .map(|p| format!("{PATH_PREFIX}{p}")),
    );
    out
}

/// A query as ranking sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// Distinct stemmed terms that drive the ranking (stop and question words
    /// dropped unless nothing else was asked), paths as [`PATH_PREFIX`]
    /// terms, sorted.
    pub terms: Vec<String>,
    /// The paths the query names (lowercased).
    pub paths: Vec<String>,
    /// Terms of the sections the question's form points at, weighing less
    /// than its subject: "who knows" for a "who" question, "What is here"
    /// for a "where" question, the Dependencies page for a version or a
    /// library.
    pub hints: Vec<String>,
    /// The question asks about a change: why or when something happened,
    /// which pull request, who added or changed something.
    pub wants_change: bool,
}

/// Words that ask about a change (besides "why" and "when").
const CHANGE_WORDS: &[&str] = &["introduced", "merged", "pr", "pull", "why", "when"];
/// Words that ask for a dependency.
const DEPENDENCY_WORDS: &[&str] = &[
    "libraries",
    "library",
    "package",
    "packages",
    "version",
    "versions",
];

/// Analyses a query: see [`Query`].
pub fn analyze(query: &str) -> Query {
    // A path is asked as written (its folders are not what was asked); of
    // its words only the file's own name counts, so `src/wiki/search.rs`
    // does not find every line that names `src` or `rs`.
    let mut paths: Vec<String> = Vec::new();
    let mut prose = String::new();
    for word in query.split_whitespace() {
        match as_path(word) {
            Some(path) => {
                let name = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
                prose.push_str(name.rsplit_once('.').map_or(name, |(stem, _)| stem));
                if !paths.contains(&path) {
                    paths.push(path);
                }
            }
            None => prose.push_str(word),
        }
        prose.push(' ');
    }
    let all = words(&prose);
    let kept: Vec<&String> = all.iter().filter(|w| !is_stop(w)).collect();
    let chosen: Vec<&String> = if kept.is_empty() {
        all.iter().collect()
    } else {
        kept
    };
    let mut terms: Vec<String> = chosen.into_iter().map(|w| stem(w)).collect();
    terms.extend(paths.iter().map(|p| format!("{PATH_PREFIX}{p}")));
    terms.sort();
    terms.dedup();
    let has = |word: &str| all.iter().any(|w| w == word);
    // "who added", "who wrote": a change; "who knows", "who owns": people.
    let who_did = all.windows(2).any(|pair| {
        pair[0] == "who"
            && (pair[1].ends_with("ed") || ["wrote", "made", "built"].contains(&pair[1].as_str()))
    });
    let wants_change = who_did || CHANGE_WORDS.iter().any(|w| has(w));
    let mut hints = Vec::new();
    if has("who") && !who_did {
        hints.push(stem("knows"));
    }
    if has("where") {
        hints.push("here".to_owned());
    }
    if DEPENDENCY_WORDS.iter().any(|w| has(w)) {
        hints.push(stem("dependencies"));
    }
    hints.retain(|hint| !terms.contains(hint));
    Query {
        terms,
        paths,
        hints,
        wants_change,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_split_paths_and_identifiers() {
        assert_eq!(
            tokens("src/queue/Source_Cursors.rs L10"),
            [
                "src",
                "queue",
                "source",
                "cursors",
                "source_cursors",
                "rs",
                "l10"
            ]
        );
    }

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        let mut sorted = STOP_WORDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, STOP_WORDS);
    }

    #[test]
    fn inflections_meet_and_short_words_stay() {
        for group in [
            &["depends", "dependency", "dependencies", "depend"][..],
            &["routes", "routing", "route", "router"],
            &["tests", "testing", "tested", "test"],
            &["validation", "validated", "validate"],
            &["running", "run", "runs"],
        ] {
            let stems: Vec<String> = group.iter().map(|w| stem(w)).collect();
            assert!(
                stems.iter().all(|s| *s == stems[0]),
                "{group:?} → {stems:?}"
            );
        }
        assert_eq!(stem("sql"), "sql");
        assert_eq!(stem("speed"), "speed");
        assert_eq!(stem("2026"), "2026");
    }

    #[test]
    fn questions_keep_their_subject_and_paths() {
        let query = analyze("What depends on flask?");
        assert_eq!(query.terms, ["depend", "flask"]);
        let query = analyze("who changed api/routes.py?");
        assert_eq!(query.terms, ["@path:api/routes.py", "chang", "rout"]);
        assert_eq!(query.paths, ["api/routes.py"]);
        assert_eq!(analyze("what is in api/").paths, ["api/"]);
        assert!(query.wants_change && query.hints.is_empty());
        let query = analyze("Who owns the storage area?");
        assert_eq!(
            (query.hints.as_slice(), query.wants_change),
            (&["know".to_owned()][..], false)
        );
        assert_eq!(analyze("where is the store").hints, ["here"]);
        assert_eq!(analyze("which version of flask").hints, ["depend"]);
        assert!(analyze("Why was flask upgraded?").wants_change);
        // Only stop words: searched by them rather than by nothing.
        assert_eq!(analyze("what is this").terms, ["is", "this", "what"]);
        assert_eq!(
            analyze("SearchIndex").terms,
            ["index", "search", "searchindex"]
        );
    }

    #[test]
    fn paths_are_recognised_in_prose_not_urls() {
        assert_eq!(
            path_words("See `src/wiki/search.rs`, README.md and https://x.y/z, v1.2."),
            ["src/", "src/wiki/", "src/wiki/search.rs", "readme.md"]
        );
        assert!(path_words("Hello world. Done.").is_empty());
    }
}
