//! `get_context`: what a coding agent must know before it changes some
//! files, answered from the wiki at one commit, without an LLM: each path's
//! purpose and area, the facts on any page that cite it (current or stale,
//! with the commit that changed it), the pull requests that touched it
//! (newest first), who knows its area, what a manifest declares, and, for a
//! question, the passages search ranks best; ranked, and cut to a token
//! budget that says what it left out.
//!
//! Invariants:
//! - read-only and deterministic: one commit, one answer; the index is built
//!   once per root tree beside the search index of the same pages (and cached
//!   with it, under the same build bounds), so people's edits count exactly
//!   as teammem's do;
//! - a path the scanned pages do not know, on a wiki larger than the scan
//!   budget, is looked up by its area pages' names ([`lookup`]);
//! - bad input (a path with `..`, absolute, with NUL, empty, more than
//!   [`MAX_PATHS`]; a budget out of range; a query over 512 bytes; neither
//!   paths nor query) is refused before anything is read, naming what was
//!   wrong.

mod answer;
pub mod brief;
pub mod index;
pub mod item;
pub mod lines;
pub mod lookup;
pub mod text;

pub use answer::{ContextAnswer, Passage};
pub use index::ContextIndex;
pub use item::{Detail, Format, Item, Ranked, estimate_tokens};

use std::time::Instant;

use super::validate::{self, MAX_QUERY_BYTES};
use super::{Wiki, WikiError, blocking};

/// Most paths one call may name.
pub const MAX_PATHS: usize = 50;
/// Longest path accepted.
pub const MAX_PATH_BYTES: usize = 1024;
/// The default token budget, and its bounds.
pub const DEFAULT_MAX_TOKENS: usize = 2_000;
pub const MIN_MAX_TOKENS: usize = 100;
pub const MAX_MAX_TOKENS: usize = 16_000;
/// Most search passages a question adds.
const QUERY_PASSAGES: usize = 12;

/// What `get_context` is asked.
#[derive(Debug, Clone, Default)]
pub struct ContextRequest {
    /// Repository-relative files or folders.
    pub paths: Vec<String>,
    pub query: Option<String>,
    pub max_tokens: usize,
    pub detail: Detail,
    /// The form the answer is sent in, which its budget counts.
    pub format: Format,
    /// JSON bytes the caller adds to the answer (`as_of`, the repositories
    /// it names), counted in the budget.
    pub caller_bytes: usize,
}

impl ContextRequest {
    /// Checks the request (see the module doc).
    pub fn check(&self) -> Result<(), WikiError> {
        if self.paths.is_empty() && self.query.is_none() {
            return Err(WikiError::invalid_input(
                "name the paths you are about to change (paths) or ask a question (query), or both",
            ));
        }
        if self.paths.len() > MAX_PATHS {
            return Err(WikiError::invalid_input(format!(
                "paths names {} entries and may name at most {MAX_PATHS}; ask for the folders instead, or split the call",
                self.paths.len()
            )));
        }
        for path in &self.paths {
            check_path(path)?;
        }
        if let Some(query) = &self.query {
            if query.trim().is_empty() {
                return Err(WikiError::invalid_input(
                    "query must not be empty; leave it out to ask about paths alone",
                ));
            }
            if query.len() > MAX_QUERY_BYTES {
                return Err(WikiError::limit_exceeded(format!(
                    "query is {} bytes and may be at most {MAX_QUERY_BYTES} bytes",
                    query.len()
                )));
            }
        }
        if !(MIN_MAX_TOKENS..=MAX_MAX_TOKENS).contains(&self.max_tokens) {
            return Err(WikiError::invalid_input(format!(
                "max_tokens must be between {MIN_MAX_TOKENS} and {MAX_MAX_TOKENS}, got {}",
                self.max_tokens
            )));
        }
        Ok(())
    }
}

/// A repository-relative path: not empty, not absolute, no `..` segment, no
/// NUL or other control character, no backslash, at most
/// [`MAX_PATH_BYTES`].
fn check_path(path: &str) -> Result<(), WikiError> {
    let shown = validate::shorten(path, 120);
    let problem = if path.trim().is_empty() {
        Some("is empty")
    } else if path.len() > MAX_PATH_BYTES {
        Some("is longer than 1,024 bytes")
    } else if path.starts_with('/') || path.as_bytes().get(1) == Some(&b':') {
        Some("is absolute; name it from the repository's root, e.g. src/main.rs")
    } else if path.split('/').any(|segment| segment == "..") {
        Some("contains `..`; name it from the repository's root")
    } else if path.chars().any(char::is_control) {
        Some("contains a control character (NUL, newline, …)")
    } else if path.contains('\\') {
        Some("contains `\\`; separate folders with `/`")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(WikiError::invalid_input(format!(
            "the path {shown:?} {problem}"
        ))),
        None => Ok(()),
    }
}

impl Wiki {
    /// `get_context` at `HEAD` or a full sha.
    pub async fn context(
        &self,
        git_ref: &str,
        request: ContextRequest,
    ) -> Result<ContextAnswer, WikiError> {
        let spec = validate::parse_ref(git_ref, "ref")?;
        request.check()?;
        let deadline = Instant::now() + self.deadline;
        self.with_deadline(async {
            let commit = self.resolve_initialized(spec, deadline).await?;
            let state = self.state.clone();
            blocking(move || {
                let search =
                    state
                        .search
                        .get_or_build(&state.repo(), &state.cache, commit, deadline)?;
                let index = search.context(deadline)?;
                // Paths the scanned pages do not know: their area pages by
                // name, past the scan budget.
                let beyond = if search.truncated() {
                    let missing: Vec<String> = request
                        .paths
                        .iter()
                        .map(|p| answer::normalize(p))
                        .filter(|p| !index.knows(p))
                        .collect();
                    lookup::beyond_scan(
                        &state.repo(),
                        &state.cache,
                        commit,
                        &index.pages,
                        &missing,
                    )?
                } else {
                    None
                };
                let passages = match &request.query {
                    Some(query) => search.passages(query, QUERY_PASSAGES),
                    None => Vec::new(),
                };
                Ok(answer::answer_with(
                    &index,
                    beyond.as_deref(),
                    commit.to_string(),
                    &answer::Request {
                        paths: &request.paths,
                        query: request.query.as_deref(),
                        max_tokens: request.max_tokens,
                        detail: request.detail,
                        format: request.format,
                        caller_bytes: request.caller_bytes,
                    },
                    passages,
                    search.truncated(),
                ))
            })
            .await
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(paths: &[&str], query: Option<&str>, max_tokens: usize) -> ContextRequest {
        ContextRequest {
            paths: paths.iter().map(|p| (*p).to_owned()).collect(),
            query: query.map(str::to_owned),
            max_tokens,
            ..ContextRequest::default()
        }
    }

    #[test]
    fn bad_requests_are_refused_naming_the_problem() {
        let many: Vec<String> = (0..51).map(|i| format!("f{i}.rs")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        for (bad, says) in [
            (request(&[], None, 2000), "name the paths"),
            (request(&["../etc/passwd"], None, 2000), "contains `..`"),
            (request(&["src/../../x"], None, 2000), "contains `..`"),
            (request(&["/etc/passwd"], None, 2000), "is absolute"),
            (request(&["C:/x"], None, 2000), "is absolute"),
            (request(&["a\0b"], None, 2000), "control character"),
            (request(&[""], None, 2000), "is empty"),
            (request(&["a\\b"], None, 2000), "separate folders"),
            (request(&many, None, 2000), "at most 50"),
            (request(&["a.rs"], None, 99), "between 100 and 16000"),
            (request(&["a.rs"], None, 16_001), "between 100 and 16000"),
            (
                request(&[], Some(&"q".repeat(513)), 2000),
                "at most 512 bytes",
            ),
            (request(&[], Some("  "), 2000), "must not be empty"),
        ] {
            let error = bad.check().expect_err(says);
            assert!(error.to_string().contains(says), "{error} ({says})");
        }
        assert!(
            request(&["src/", "./a.rs"], Some("why?"), 100)
                .check()
                .is_ok()
        );
    }
}
