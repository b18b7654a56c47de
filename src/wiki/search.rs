//! Ranked search over one wiki tree's pages (the cache that builds and
//! keeps an index per root tree is `search_cache.rs`). It ranks passages (a
//! page's body lines, each with its page's title and the heading it sits
//! under) by BM25 mixed with their page's own BM25, so a question finds the
//! line that answers it: stop and question words do not drive the ranking
//! (`query.rs`), the question's form adds light hints ("who" → who knows,
//! "why" → pull-request entries), a path named in the query is a term of
//! its own, a page gives at most [`MAX_HITS_PER_PAGE`] hits, and one pull
//! request's entry repeated on the Changelog, its quarter page and area
//! pages is one hit naming every page.
//!
//! Invariants:
//! - an index belongs to exactly one root tree id (a tree never changes, so
//!   a cached index is never stale), shared by every commit with that tree;
//!   a result names the commit its caller asked for, never the one that
//!   built the index;
//! - results are deterministic for a tree: scores are rounded and ties are
//!   broken by page path, then line;
//! - pages are read in path order; a page over `MAX_READ_PAGE_BYTES`
//!   (256 KiB, the largest page a read returns) is skipped, and at most
//!   `MAX_SEARCH_SCAN_BYTES` of pages are indexed (`truncated` says a page
//!   was skipped or the budget ended first); snippets are plain text,
//!   bounded, with markers and HTML comments removed, so page text cannot
//!   pose as a marker in a result;
//! - the tree's stale-fact count is computed with the index, from the same
//!   page texts (unreadable markers are not counted and break nothing); a
//!   count asked for alone (every snapshot's) covers the same pages within
//!   the same bounds, builds no index, and reads only the page blobs it has
//!   not seen before (`page_facts.rs`);
//! - `get_context`'s index (`context/`) of a tree is built from the same
//!   page texts on first use and kept with this one.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use gix::ObjectId;

use super::build_permits::BUILD_PERMITS;
use super::context::ContextIndex;
use super::context::lines::entry_sha;
use super::error::WikiError;
use super::query::{self, PATH_PREFIX};
use super::types::{SearchHit, SearchResult};

/// Trees whose index is kept.
pub const SEARCH_CACHE_SIZE: usize = 4;
/// Most hits one search returns.
pub const MAX_HITS: usize = 20;
/// Most hits from one page.
pub const MAX_HITS_PER_PAGE: usize = 3;
const MAX_SNIPPET_BYTES: usize = 240;
/// Term-frequency weight of a token in the page's path (its title) and
/// headings, in the page-level ranking.
const TITLE_WEIGHT: f32 = 3.0;
const HEADING_WEIGHT: f32 = 2.0;
/// The same for a passage: its page's title and the heading it sits under
/// count, less than its own words.
const PASSAGE_TITLE_WEIGHT: f32 = 1.5;
const PASSAGE_HEADING_WEIGHT: f32 = 1.5;
/// How much the page's own relevance adds to a passage's.
const PAGE_MIX: f32 = 0.5;
/// A path the query names counts this many times a word.
const PATH_BOOST: f32 = 2.0;
/// A hint from the question's form counts this much of a word.
const HINT_WEIGHT: f32 = 0.5;
/// A question about a change weighs pull-request entries this much more.
const CHANGE_BOOST: f32 = 1.4;
const K1: f32 = 1.2;
const B: f32 = 0.75;

struct Doc {
    path: String,
    sha: String,
    text: String,
    /// Weighted length (body tokens plus weighted title and heading tokens).
    len: f32,
}

/// One passage: a body line of a page, or one pull request's entry line
/// wherever it is repeated.
struct Unit {
    /// Every `(page, 0-based line, heading line)` holding it, the preferred
    /// copy first (see [`super::context::index::page_rank`]).
    copies: Vec<(u32, u32, Option<u32>)>,
    /// The entry's pull-request number and merge sha.
    entry: Option<(u64, String)>,
    len: f32,
}

/// BM25 postings: term → (document, weighted term frequency), documents
/// ascending.
type Postings = HashMap<String, Vec<(u32, f32)>>;

/// The index of one tree (of every commit with that root tree).
pub struct SearchIndex {
    docs: Vec<Doc>,
    postings: Postings,
    avg_len: f32,
    units: Vec<Unit>,
    unit_postings: Postings,
    unit_avg_len: f32,
    scanned_bytes: u64,
    truncated: bool,
    /// Stale evidence markers across the indexed pages.
    pub stale_facts: usize,
    /// `get_context`'s index of the same pages, built on first use.
    context: OnceLock<Arc<ContextIndex>>,
}

fn add_terms(counts: &mut HashMap<String, f32>, len: &mut f32, terms: Vec<String>, weight: f32) {
    for term in terms {
        *counts.entry(term).or_default() += weight;
        *len += weight;
    }
}

/// The path terms of the evidence markers on a line: a fact is about the
/// file it cites, whether or not its text names it.
fn marker_paths(line: &str) -> Vec<String> {
    if !line.contains(crate::facts::PREFIX) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for found in crate::facts::facts(line) {
        if let crate::facts::Found::Fact(fact) = found
            && let crate::facts::Citation::Source { path, .. } = &fact.marker.citation
        {
            out.extend(
                query::path_words(path)
                    .into_iter()
                    .map(|p| format!("{PATH_PREFIX}{p}")),
            );
        }
    }
    out
}

fn postings_of(maps: Vec<HashMap<String, f32>>) -> Postings {
    let mut postings: Postings = HashMap::new();
    for (number, counts) in maps.into_iter().enumerate() {
        for (term, tf) in counts {
            postings.entry(term).or_default().push((number as u32, tf));
        }
    }
    for list in postings.values_mut() {
        list.sort_by_key(|(doc, _)| *doc);
    }
    postings
}

fn average(lens: impl Iterator<Item = f32>) -> f32 {
    let (sum, count) = lens.fold((0.0, 0usize), |(s, c), l| (s + l, c + 1));
    if count == 0 {
        1.0
    } else {
        (sum / count as f32).max(1.0)
    }
}

impl SearchIndex {
    /// Builds the index from `(path, blob sha, text)` in path order.
    pub fn build(
        pages: Vec<(String, String, String)>,
        scanned_bytes: u64,
        truncated: bool,
    ) -> Self {
        let mut docs = Vec::with_capacity(pages.len());
        let mut page_counts = Vec::with_capacity(pages.len());
        let mut units: Vec<Unit> = Vec::new();
        let mut unit_counts: Vec<HashMap<String, f32>> = Vec::new();
        let mut entry_units: HashMap<String, usize> = HashMap::new();
        let mut stale_facts = 0;
        for (number, (path, sha, text)) in pages.into_iter().enumerate() {
            let number = number as u32;
            let mut counts: HashMap<String, f32> = HashMap::new();
            let mut len = 0f32;
            let title = path.strip_suffix(".md").unwrap_or(&path);
            let title_terms = query::text_terms(title);
            add_terms(&mut counts, &mut len, title_terms.clone(), TITLE_WEIGHT);
            // A passage's title: the page's name and its `# ` heading, each
            // term once (the heading usually restates the name).
            let mut passage_title: Vec<String> = Vec::new();
            let extend_title = |terms: &[String], into: &mut Vec<String>| {
                for term in terms {
                    if !into.contains(term) {
                        into.push(term.clone());
                    }
                }
            };
            extend_title(&title_terms, &mut passage_title);
            let mut heading: Option<(u32, Vec<String>)> = None;
            let mut had_unit = false;
            for (at, line) in text.lines().enumerate() {
                let plain_line = plain(line);
                let is_heading = line.trim_start().starts_with('#');
                let terms = query::text_terms(&plain_line);
                add_terms(
                    &mut counts,
                    &mut len,
                    terms.clone(),
                    if is_heading { HEADING_WEIGHT } else { 1.0 },
                );
                if is_heading {
                    let trimmed = line.trim_start();
                    if trimmed.starts_with("# ") || trimmed == "#" {
                        extend_title(&terms, &mut passage_title);
                        heading = Some((at as u32, Vec::new()));
                    } else {
                        heading = Some((at as u32, terms));
                    }
                    continue;
                }
                if plain_line.is_empty() {
                    continue;
                }
                had_unit = true;
                let copy = (number, at as u32, heading.as_ref().map(|(h, _)| *h));
                let sha_of_entry = entry_sha(line).map(str::to_owned);
                if let Some(sha) = &sha_of_entry
                    && let Some(&unit) = entry_units.get(sha)
                {
                    // The same entry on another page: one passage naming
                    // both, which this page's title also describes.
                    units[unit].copies.push(copy);
                    let unit_terms = &mut unit_counts[unit];
                    for term in passage_title.iter().cloned().collect::<HashSet<_>>() {
                        if let std::collections::hash_map::Entry::Vacant(slot) =
                            unit_terms.entry(term)
                        {
                            slot.insert(1.0);
                            units[unit].len += 1.0;
                        }
                    }
                    continue;
                }
                let mut unit_terms: HashMap<String, f32> = HashMap::new();
                let mut unit_len = 0f32;
                add_terms(&mut unit_terms, &mut unit_len, terms, 1.0);
                add_terms(&mut unit_terms, &mut unit_len, marker_paths(line), 1.0);
                add_terms(
                    &mut unit_terms,
                    &mut unit_len,
                    passage_title.clone(),
                    PASSAGE_TITLE_WEIGHT,
                );
                if let Some((_, heading_terms)) = &heading {
                    add_terms(
                        &mut unit_terms,
                        &mut unit_len,
                        heading_terms.clone(),
                        PASSAGE_HEADING_WEIGHT,
                    );
                }
                let entry = sha_of_entry.map(|sha| {
                    entry_units.insert(sha.clone(), units.len());
                    (entry_number(line).unwrap_or(0), sha)
                });
                units.push(Unit {
                    copies: vec![copy],
                    entry,
                    len: unit_len,
                });
                unit_counts.push(unit_terms);
            }
            if !had_unit {
                // A page of headings alone is still found by them.
                let mut unit_terms: HashMap<String, f32> = HashMap::new();
                let mut unit_len = 0f32;
                add_terms(&mut unit_terms, &mut unit_len, passage_title, 1.0);
                if let Some((_, terms)) = heading.take() {
                    add_terms(&mut unit_terms, &mut unit_len, terms, 1.0);
                }
                units.push(Unit {
                    copies: vec![(number, 0, None)],
                    entry: None,
                    len: unit_len,
                });
                unit_counts.push(unit_terms);
            }
            page_counts.push(counts);
            stale_facts += stale_markers(&text);
            docs.push(Doc {
                path,
                sha,
                text,
                len,
            });
        }
        for unit in &mut units {
            unit.copies.sort_by_key(|(doc, _, _)| {
                super::context::index::page_rank(&docs[*doc as usize].path)
            });
        }
        SearchIndex {
            avg_len: average(docs.iter().map(|d| d.len)),
            unit_avg_len: average(units.iter().map(|u| u.len)),
            postings: postings_of(page_counts),
            unit_postings: postings_of(unit_counts),
            docs,
            units,
            scanned_bytes,
            truncated,
            stale_facts,
            context: OnceLock::new(),
        }
    }

    /// `get_context`'s index of these pages, built on first use (once: other
    /// callers wait for it) under a build permit, whose wait ends at
    /// `deadline` with a timeout.
    pub fn context(&self, deadline: Instant) -> Result<Arc<ContextIndex>, WikiError> {
        if let Some(index) = self.context.get() {
            return Ok(index.clone());
        }
        let _permit = BUILD_PERMITS.acquire(deadline)?;
        Ok(self
            .context
            .get_or_init(|| {
                Arc::new(ContextIndex::build(
                    self.docs.iter().map(|d| (d.path.as_str(), d.text.as_str())),
                ))
            })
            .clone())
    }

    /// Whether the scan left pages out: a page over the per-page bound, or
    /// the budget ending before every page was indexed.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// BM25 of every document matching `terms`: dense scores, and the
    /// documents that have one, each once.
    fn bm25(
        postings: &Postings,
        count: usize,
        avg_len: f32,
        len_of: impl Fn(u32) -> f32,
        terms: &[(String, f32)],
    ) -> (Vec<f32>, Vec<u32>) {
        let n = count as f32;
        let mut scores = vec![0f32; count];
        let mut matched = Vec::new();
        for (term, boost) in terms {
            let Some(list) = postings.get(term) else {
                continue;
            };
            let df = list.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(doc, tf) in list {
                let norm = tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len_of(doc) / avg_len));
                // Every addition is positive, so zero means not seen yet.
                if scores[doc as usize] == 0.0 {
                    matched.push(doc);
                }
                scores[doc as usize] += boost * idf * norm;
            }
        }
        (scores, matched)
    }

    /// The passages ranked for `query`, best first, at most
    /// [`MAX_HITS_PER_PAGE`] from one page, and the pages matching any term.
    fn rank(&self, query: &str, limit: usize) -> (Vec<(u32, f64)>, usize) {
        let query = query::analyze(query);
        let mut terms: Vec<(String, f32)> = query
            .terms
            .iter()
            .map(|t| {
                let boost = if t.starts_with(PATH_PREFIX) {
                    PATH_BOOST
                } else {
                    1.0
                };
                (t.clone(), boost)
            })
            .collect();
        terms.extend(query.hints.iter().map(|h| (h.clone(), HINT_WEIGHT)));
        let (pages, matched_pages) = Self::bm25(
            &self.postings,
            self.docs.len(),
            self.avg_len,
            |d| self.docs[d as usize].len,
            &terms,
        );
        let (units, matched_units) = Self::bm25(
            &self.unit_postings,
            self.units.len(),
            self.unit_avg_len,
            |u| self.units[u as usize].len,
            &terms,
        );
        // Rounded so float noise can never reorder equal scores.
        let mut ranked: Vec<(u32, f64)> = matched_units
            .into_iter()
            .map(|unit| {
                let mut score = units[unit as usize];
                if query.wants_change && self.units[unit as usize].entry.is_some() {
                    score *= CHANGE_BOOST;
                }
                let page = self.units[unit as usize]
                    .copies
                    .iter()
                    .map(|(doc, _, _)| pages[*doc as usize])
                    .fold(0.0f32, f32::max);
                let total = f64::from(score + PAGE_MIX * page);
                (unit, (total * 10_000.0).round() / 10_000.0)
            })
            .collect();
        let order = |a: &(u32, f64), b: &(u32, f64)| {
            let key = |unit: u32| {
                let (doc, line, _) = self.units[unit as usize].copies[0];
                (&self.docs[doc as usize].path, line)
            };
            b.1.total_cmp(&a.1).then_with(|| key(a.0).cmp(&key(b.0)))
        };
        // Enough of the best to fill `limit` under the per-page cap, sorted;
        // all of them only when the cap left too few.
        let head = limit * MAX_HITS_PER_PAGE * 4;
        let mut sorted = head;
        if ranked.len() > head {
            ranked.select_nth_unstable_by(head, order);
            ranked[..head].sort_by(order);
        } else {
            ranked.sort_by(order);
            sorted = ranked.len();
        }
        let mut kept = Vec::new();
        loop {
            kept.clear();
            let mut per_page: HashMap<u32, usize> = HashMap::new();
            for &(unit, score) in &ranked[..sorted] {
                let page = self.units[unit as usize].copies[0].0;
                let seen = per_page.entry(page).or_default();
                if *seen >= MAX_HITS_PER_PAGE {
                    continue;
                }
                *seen += 1;
                kept.push((unit, score));
                if kept.len() == limit {
                    break;
                }
            }
            if kept.len() == limit || sorted == ranked.len() {
                break;
            }
            ranked.sort_by(order);
            sorted = ranked.len();
        }
        (kept, matched_pages.len())
    }

    /// The best [`MAX_HITS`] passages for `query` (question and stop words
    /// do not drive it), best first, ties by page path and line; a
    /// pull request's entry repeated across pages is one hit naming them.
    pub fn search(&self, commit: ObjectId, query: &str) -> SearchResult {
        let (ranked, total) = self.rank(query, MAX_HITS);
        let hits = ranked
            .into_iter()
            .map(|(unit, score)| {
                let unit = &self.units[unit as usize];
                let (line, snippet, heading) = self.passage(unit);
                let doc = &self.docs[unit.copies[0].0 as usize];
                SearchHit {
                    path: doc.path.clone(),
                    sha: doc.sha.clone(),
                    score,
                    line,
                    snippet: super::validate::shorten(&snippet, MAX_SNIPPET_BYTES).to_owned(),
                    heading: heading
                        .map(|h| super::validate::shorten(&h, MAX_SNIPPET_BYTES).to_owned()),
                    pages: unit
                        .copies
                        .iter()
                        .map(|(doc, _, _)| self.docs[*doc as usize].path.clone())
                        .collect(),
                    pull_request: unit.entry.as_ref().map(|(number, _)| *number),
                    merge_commit: unit.entry.as_ref().map(|(_, sha)| sha.clone()),
                }
            })
            .collect();
        SearchResult {
            commit: commit.to_string(),
            query: query.to_owned(),
            hits,
            total,
            scanned_bytes: self.scanned_bytes,
            truncated: self.truncated,
        }
    }

    /// The best `limit` passages for `query` as `get_context` uses them.
    pub fn passages(&self, query: &str, limit: usize) -> Vec<super::context::Passage> {
        self.rank(query, limit)
            .0
            .into_iter()
            .map(|(unit, _)| {
                let unit = &self.units[unit as usize];
                let (line, text, heading) = self.passage(unit);
                super::context::Passage {
                    page: self.docs[unit.copies[0].0 as usize].path.clone(),
                    line,
                    heading,
                    text,
                    entry: unit.entry.as_ref().map(|(_, sha)| sha.clone()),
                }
            })
            .collect()
    }

    /// A unit's preferred copy: `(1-based line, plain text, heading)`.
    fn passage(&self, unit: &Unit) -> (usize, String, Option<String>) {
        let (doc, line, heading) = unit.copies[0];
        let text = &self.docs[doc as usize].text;
        let line_text = |at: u32| text.lines().nth(at as usize).map(plain).unwrap_or_default();
        (line as usize + 1, line_text(line), heading.map(line_text))
    }
}

/// The pull-request number an entry line names first (`#12`).
fn entry_number(line: &str) -> Option<u64> {
    let at = line.find(" #")? + 2;
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Stale evidence markers in one page's text (unreadable markers are not
/// counted).
pub fn stale_markers(text: &str) -> usize {
    crate::facts::facts(text)
        .iter()
        .filter(|found| matches!(found, crate::facts::Found::Fact(fact) if fact.marker.is_stale()))
        .count()
}

/// A line without HTML comments (evidence markers) and Markdown heading
/// marks, whitespace collapsed.
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        match rest[start..].find("-->") {
            Some(end) => rest = &rest[start + end + 3..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    let trimmed = out.trim_start().trim_start_matches('#');
    trimmed.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(pages: &[(&str, &str)]) -> SearchIndex {
        SearchIndex::build(
            pages
                .iter()
                .map(|(p, t)| (p.to_string(), "0".repeat(40), t.to_string()))
                .collect(),
            0,
            false,
        )
    }

    #[test]
    fn topic_page_ranks_first_with_snippet_and_heading() {
        let idx = index(&[
            ("Areas/api.md", "# API\n\nRoutes live here.\n"),
            (
                "Billing.md",
                "# Billing\n\n## Invoices\n\nInvoice retry uses exponential backoff. <!-- x -->\n",
            ),
            ("Other.md", "Nothing about retry.\n"),
        ]);
        let result = idx.search(ObjectId::null(gix::hash::Kind::Sha1), "invoice retry");
        assert_eq!(result.hits[0].path, "Billing.md");
        assert_eq!(result.hits[0].line, 5);
        assert_eq!(
            result.hits[0].snippet,
            "Invoice retry uses exponential backoff."
        );
        assert_eq!(result.hits[0].heading.as_deref(), Some("Invoices"));
        assert_eq!(result.total, 2);
    }

    fn entry(number: u64, sha: char, text: &str) -> String {
        let sha = sha.to_string().repeat(40);
        format!(
            "- #{number} {text} (by Ann, 2026-01-05) — merge commit `{sha}` <!-- teammem:{sha} -->\n"
        )
    }

    #[test]
    fn questions_rank_by_their_subject_not_their_form() {
        // The example: "what depends on flask?" once ranked a page
        // that never mentions flask second, the Dependencies line fifth.
        let idx = index(&[
            (
                "Dependencies.md",
                "# Dependencies\n\n### pyproject.toml\n- flask — ==3.1.0\n- pydantic — ==2.5.0\n",
            ),
            (
                "Guide.md",
                "# Guide\n\nWhat is on the page depends on what you do with it, and on what it is for.\n",
            ),
            ("Changelog.md", &entry(5, 'a', "Upgrade the web framework")),
        ]);
        let result = idx.search(
            ObjectId::null(gix::hash::Kind::Sha1),
            "what depends on flask?",
        );
        assert_eq!(result.hits[0].path, "Dependencies.md");
        assert_eq!(result.hits[0].snippet, "- flask — ==3.1.0");
        assert_eq!(result.hits[0].heading.as_deref(), Some("pyproject.toml"));
        assert!(result.hits.iter().all(|h| h.path != "Changelog.md"));
    }

    #[test]
    fn several_hits_per_page_and_one_hit_per_entry_naming_its_pages() {
        let repeated = entry(7, 'b', "Cache invoices");
        let idx = index(&[
            (
                "Area-billing-2026-Q1.md",
                &format!("# Area: billing, 2026 Q1\n\n{repeated}"),
            ),
            (
                "Area-billing.md",
                &format!(
                    "# Area: billing\n\n## Recent changes\n\n{repeated}\n## Notes\n\nInvoices are cached per order.\nCached invoices expire daily.\nThe invoice cache is small.\nInvoice caches again.\n"
                ),
            ),
            (
                "Changelog.md",
                &format!(
                    "# Changelog\n\n{}",
                    entry(7, 'b', "Cache invoices")
                        .replace("- #7", "- 2026-01-05 — #7")
                        .replace(" (by Ann, 2026-01-05)", " (by Ann)")
                ),
            ),
        ]);
        let result = idx.search(ObjectId::null(gix::hash::Kind::Sha1), "cache invoices");
        let entries: Vec<&SearchHit> = result
            .hits
            .iter()
            .filter(|h| h.pull_request.is_some())
            .collect();
        assert_eq!(entries.len(), 1, "{:#?}", result.hits);
        assert_eq!(entries[0].pull_request, Some(7));
        assert_eq!(
            entries[0].merge_commit.as_deref(),
            Some("b".repeat(40).as_str())
        );
        assert_eq!(entries[0].path, "Changelog.md");
        assert_eq!(
            entries[0].pages,
            ["Changelog.md", "Area-billing.md", "Area-billing-2026-Q1.md"]
        );
        let notes: Vec<&SearchHit> = result
            .hits
            .iter()
            .filter(|h| h.heading.as_deref() == Some("Notes"))
            .collect();
        assert_eq!(
            notes.len(),
            MAX_HITS_PER_PAGE,
            "at most three from one page"
        );
        assert!(
            notes
                .iter()
                .all(|h| h.path == "Area-billing.md" && h.pages == ["Area-billing.md"])
        );
    }

    #[test]
    fn one_page_of_many_matching_lines_leaves_room_for_the_others() {
        let crowded: String = (0..400).map(|i| format!("cache line {i}\n")).collect();
        let mut pages = vec![("Crowded.md".to_owned(), crowded)];
        for i in 0..30 {
            pages.push((
                format!("Other{i:02}.md"),
                format!("A cache, once, and much else besides on page {i}.\n"),
            ));
        }
        let idx = index(
            &pages
                .iter()
                .map(|(p, t)| (p.as_str(), t.as_str()))
                .collect::<Vec<_>>(),
        );
        let result = idx.search(ObjectId::null(gix::hash::Kind::Sha1), "cache");
        assert_eq!(result.hits.len(), MAX_HITS);
        let crowded = result
            .hits
            .iter()
            .filter(|h| h.path == "Crowded.md")
            .count();
        assert_eq!(crowded, MAX_HITS_PER_PAGE, "{:?}", result.hits);
        assert_eq!(result.total, 31);
    }

    #[test]
    fn a_query_may_name_paths_and_identifiers() {
        let idx = index(&[
            (
                "A.md",
                "# A\n\n- src/wiki/search.rs — Ranked search.\n- src/wiki/read.rs — Reads.\n",
            ),
            (
                "B.md",
                &format!(
                    "# B\n\nThe index is kept per commit. <!-- teammem:evidence src/wiki/search.rs@{}#L3 -->\n",
                    "c".repeat(40)
                ),
            ),
            (
                "C.md",
                "# C\n\n`SearchIndex::build` reads every page once.\n",
            ),
        ]);
        let null = ObjectId::null(gix::hash::Kind::Sha1);
        let result = idx.search(null, "what cites src/wiki/search.rs?");
        let top: Vec<(&str, usize)> = result
            .hits
            .iter()
            .take(2)
            .map(|h| (h.path.as_str(), h.line))
            .collect();
        assert!(
            top.contains(&("A.md", 3)) && top.contains(&("B.md", 3)),
            "{top:?}"
        );
        assert_eq!(
            idx.search(null, "where is SearchIndex built").hits[0].path,
            "C.md"
        );
    }

    #[test]
    fn ties_break_by_path_and_counts_stale() {
        let stale = format!(
            "A fact <!-- teammem:evidence a.rs@{}#L1-L2 stale={} -->\nbad <!-- teammem:evidence nope -->\n",
            "a".repeat(40),
            "b".repeat(40)
        );
        let idx = index(&[
            ("B.md", "same words"),
            ("A.md", "same words"),
            ("S.md", &stale),
        ]);
        let result = idx.search(ObjectId::null(gix::hash::Kind::Sha1), "same");
        let paths: Vec<_> = result.hits.iter().map(|h| h.path.as_str()).collect();
        assert_eq!(paths, ["A.md", "B.md"]);
        assert_eq!(idx.stale_facts, 1);
    }
}
