//! The context index of one wiki commit: every evidence marker that cites a
//! source file (with its page, line, statement and verdict), every
//! pull-request entry once (by merge sha, with every page it is on), each
//! area page's folder, files and authors, the Dependencies page's
//! manifests, and the How-to-work-here page's commands by topic. Built once
//! per root tree from the page texts the search index read (so a person's
//! edits count as much as teammem's), kept beside it and cached like it
//! (`search.rs`: one build however many callers ask at once, under the same
//! per-process bound on concurrent builds); so it sees no page over 256 KiB
//! either, the search scan skips those (`lookup.rs` reads area pages past
//! the scan within its own byte bound).
//!
//! Invariants: pure over `(path, text)` pages; every text field is bounded
//! ([`lines::MAX_FIELD_BYTES`]); a marker that does not parse is counted, not
//! guessed at; a hostile page (10,000 markers, a 64 KiB line) costs time in
//! proportion to its size and nothing else.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::lines::{self, Entry};
use crate::facts::{Citation, Found};

/// What a marker's line is, by where it sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FactKind {
    /// A "What is here" item: the file's purpose.
    Purpose,
    /// A line of the Dependencies page's section.
    Dependency,
    /// A line of the How-to-work-here page's section: a command or a fact
    /// about building, testing, linting or running the project.
    HowTo,
    /// Any other statement.
    Fact,
}

/// One evidence marker citing source lines.
#[derive(Debug, Clone)]
pub struct FactRecord {
    pub kind: FactKind,
    /// The cited file.
    pub path: String,
    pub page: String,
    /// 1-based page line.
    pub line: usize,
    /// The statement: the line without its markers, plain, bounded.
    pub text: String,
    pub cited_commit: String,
    pub lines: String,
    /// The commit that changed the cited lines (stale), if any.
    pub changed_in: Option<String>,
    pub deleted: bool,
    /// For a dependency: its manifest heading's text; for a how-to line: its
    /// topic ("Test", "Build", …).
    pub group: Option<String>,
}

/// One pull request's entry, merged from every page that carries it.
#[derive(Debug, Clone)]
pub struct EntryRecord {
    pub entry: Entry,
    /// `(page, 1-based line)` of every copy, pages sorted.
    pub pages: Vec<(String, usize)>,
}

/// An area page.
#[derive(Debug, Clone, Default)]
pub struct AreaRecord {
    pub page: String,
    /// The area's name as its heading says (`# Area: api` → `api`).
    pub name: String,
    /// Its folder with a trailing `/`, `""` for the repository root.
    pub folder: Option<String>,
    /// The files "What is here" lists.
    pub files: Vec<String>,
    /// "Who knows this area": name and pull-request count, as listed.
    pub authors: Vec<(String, u64)>,
    /// 1-based line of the "Who knows this area" heading's anchor.
    pub authors_line: usize,
}

/// The context index of one commit.
#[derive(Debug, Default)]
pub struct ContextIndex {
    pub facts: Vec<FactRecord>,
    /// Cited path → facts citing it.
    pub by_path: BTreeMap<String, Vec<usize>>,
    pub entries: Vec<EntryRecord>,
    /// Merge sha → entry.
    pub by_sha: HashMap<String, usize>,
    /// A path an entry names → entries.
    pub entry_paths: BTreeMap<String, Vec<usize>>,
    pub areas: Vec<AreaRecord>,
    /// Every page, for `get_context` to say which exist.
    pub pages: BTreeSet<String>,
    /// Markers that start like evidence but do not parse.
    pub unreadable: usize,
}

/// The How-to-work-here page's section anchors and topic headings (as the
/// builtin agent writes them, `runner/builtin/markers.rs`).
const HOW_TO_ANCHOR: &str = "<!-- teammem:how-to-work -->";
const HOW_TO_END: &str = "<!-- teammem:how-to-work-end -->";
const HOW_TO_TOPIC_MARKER: &str = "<!-- teammem:how-to-topic -->";

/// The preference among copies of one entry: the Changelog, then area
/// pages, then quarter pages, then anything else; then by path.
pub fn page_rank(path: &str) -> (u8, String) {
    let rank = if path == "Changelog.md" {
        0
    } else if lines::quarter_base(path).is_some() {
        2
    } else if path.starts_with("Area-") {
        1
    } else {
        3
    };
    (rank, path.to_owned())
}

impl ContextIndex {
    /// Builds the index from `(path, text)` pages in path order.
    pub fn build<'a>(pages: impl IntoIterator<Item = (&'a str, &'a str)>) -> ContextIndex {
        let mut index = ContextIndex::default();
        for (path, text) in pages {
            index.pages.insert(path.to_owned());
            index.read_page(path, text);
        }
        for record in &mut index.entries {
            record.pages.sort_by_key(|(page, _)| page_rank(page));
        }
        for (number, fact) in index.facts.iter().enumerate() {
            index
                .by_path
                .entry(fact.path.clone())
                .or_default()
                .push(number);
        }
        for (number, record) in index.entries.iter().enumerate() {
            for path in &record.entry.paths {
                let list = index.entry_paths.entry(path.clone()).or_default();
                if !list.contains(&number) {
                    list.push(number);
                }
            }
        }
        index.follow_renames();
        index
    }

    /// A renamed file's history stays findable by its new path: the entries
    /// of its old path up to the rename (the entry naming `old → new`) are
    /// listed under the new path too, renames applied oldest first so a
    /// chain `a → b → c` reaches `c`.
    fn follow_renames(&mut self) {
        let mut renames: Vec<(&str, u64, usize)> = (0..self.entries.len())
            .map(|at| {
                (
                    self.entries[at].entry.date.as_str(),
                    self.entries[at].entry.number,
                    at,
                )
            })
            .filter(|&(_, _, at)| !self.entries[at].entry.renamed.is_empty())
            .collect();
        renames.sort_unstable();
        let renames: Vec<(String, u64, usize)> = renames
            .into_iter()
            .map(|(date, number, at)| (date.to_owned(), number, at))
            .collect();
        for (date, number, at) in renames {
            for (old, new) in self.entries[at].entry.renamed.clone() {
                let before: Vec<usize> = self
                    .entry_paths
                    .get(&old)
                    .into_iter()
                    .flatten()
                    .copied()
                    .filter(|&e| {
                        let entry = &self.entries[e].entry;
                        (entry.date.as_str(), entry.number) <= (date.as_str(), number)
                    })
                    .collect();
                let list = self.entry_paths.entry(new).or_default();
                for e in before {
                    if !list.contains(&e) {
                        list.push(e);
                    }
                }
            }
        }
    }

    fn read_page(&mut self, page: &str, text: &str) {
        let is_area = page.starts_with("Area-") && lines::quarter_base(page).is_none();
        let mut area = AreaRecord {
            page: page.to_owned(),
            folder: if is_area {
                lines::area_folder(text)
            } else {
                None
            },
            ..AreaRecord::default()
        };
        #[derive(PartialEq)]
        enum Section {
            None,
            WhatIsHere,
            WhoKnows,
            Dependencies,
            HowTo,
        }
        let mut section = Section::None;
        let mut group: Option<String> = None;
        let page_lines: Vec<&str> = text.lines().collect();
        // Markers by line, from the one grammar (facts.rs).
        let mut markers: BTreeMap<usize, Vec<crate::facts::Fact>> = BTreeMap::new();
        for found in crate::facts::facts(text) {
            match found {
                Found::Fact(fact) => markers.entry(fact.line).or_default().push(fact),
                Found::Unreadable { .. } => self.unreadable += 1,
            }
        }
        for (number, line) in page_lines.iter().enumerate() {
            if is_area
                && area.name.is_empty()
                && let Some(name) = line.strip_prefix("# Area: ")
            {
                area.name = lines::bounded(&lines::unescape(name.trim()), 200);
            }
            if line.ends_with(lines::WHAT_IS_HERE_ANCHOR) {
                section = Section::WhatIsHere;
                continue;
            }
            if line.ends_with(lines::WHO_KNOWS_ANCHOR) {
                section = Section::WhoKnows;
                area.authors_line = number + 1;
                continue;
            }
            if line.ends_with(lines::DEPENDENCIES_ANCHOR) {
                section = Section::Dependencies;
                continue;
            }
            if line.ends_with(HOW_TO_ANCHOR) {
                section = Section::HowTo;
                continue;
            }
            if [
                lines::WHAT_IS_HERE_END,
                lines::WHO_KNOWS_END,
                lines::DEPENDENCIES_END,
                HOW_TO_END,
            ]
            .contains(&line.trim())
            {
                section = Section::None;
                continue;
            }
            if let Some(entry) = lines::parse_entry(line) {
                let sha = entry.merge_commit.clone();
                match self.by_sha.get(&sha) {
                    Some(&at) => {
                        let record = &mut self.entries[at];
                        record.pages.push((page.to_owned(), number + 1));
                        // The area copy names paths; the Changelog's names
                        // the dependency changes.
                        for path in &entry.paths {
                            if !record.entry.paths.contains(path) {
                                record.entry.paths.push(path.clone());
                            }
                        }
                        record.entry.more_paths = record.entry.more_paths.max(entry.more_paths);
                        for rename in &entry.renamed {
                            if !record.entry.renamed.contains(rename) {
                                record.entry.renamed.push(rename.clone());
                            }
                        }
                        if record.entry.dependencies.is_none() {
                            record.entry.dependencies = entry.dependencies.clone();
                        }
                        if record.entry.arrived_through.is_none() {
                            record.entry.arrived_through = entry.arrived_through.clone();
                        }
                    }
                    None => {
                        self.by_sha.insert(sha, self.entries.len());
                        self.entries.push(EntryRecord {
                            entry,
                            pages: vec![(page.to_owned(), number + 1)],
                        });
                    }
                }
                continue;
            }
            match section {
                Section::WhoKnows if is_area => {
                    if let Some(author) = lines::parse_author(line) {
                        area.authors.push(author);
                    }
                }
                Section::WhatIsHere if is_area => {
                    if let Some(file) = lines::listed_file(line) {
                        area.files.push(file);
                    }
                }
                Section::Dependencies if line.ends_with(lines::MANIFEST_MARKER) => {
                    let heading = line[..line.len() - lines::MANIFEST_MARKER.len()]
                        .trim()
                        .trim_start_matches('#')
                        .trim();
                    group = Some(lines::bounded(&lines::unescape(heading), 200));
                }
                Section::HowTo if line.ends_with(HOW_TO_TOPIC_MARKER) => {
                    let heading = line[..line.len() - HOW_TO_TOPIC_MARKER.len()]
                        .trim()
                        .trim_start_matches('#')
                        .trim();
                    group = Some(lines::bounded(heading, 200));
                }
                _ => {}
            }
            let Some(found) = markers.remove(&number) else {
                continue;
            };
            for fact in found {
                let Citation::Source {
                    path,
                    commit,
                    lines: cited,
                } = &fact.marker.citation
                else {
                    continue;
                };
                let kind = match section {
                    Section::WhatIsHere => FactKind::Purpose,
                    Section::Dependencies => FactKind::Dependency,
                    Section::HowTo => FactKind::HowTo,
                    _ => FactKind::Fact,
                };
                if kind == FactKind::Purpose && is_area && !area.files.contains(path) {
                    area.files.push(path.clone());
                }
                let text = lines::bounded(&lines::unescape(&fact.text), lines::MAX_FIELD_BYTES);
                self.facts.push(FactRecord {
                    kind,
                    path: path.clone(),
                    page: page.to_owned(),
                    line: number + 1,
                    text,
                    cited_commit: commit.to_string(),
                    lines: cited.to_string(),
                    changed_in: fact.marker.stale.as_ref().map(|s| s.changed_in.to_string()),
                    deleted: fact.marker.stale.as_ref().is_some_and(|s| s.deleted),
                    group: matches!(kind, FactKind::Dependency | FactKind::HowTo)
                        .then(|| group.clone())
                        .flatten(),
                });
            }
        }
        if is_area {
            if area.name.is_empty() {
                area.name = page
                    .strip_prefix("Area-")
                    .and_then(|p| p.strip_suffix(".md"))
                    .unwrap_or(page)
                    .to_owned();
            }
            self.areas.push(area);
        }
    }

    /// The area page a repository path belongs to: the one listing it in
    /// "What is here", else the one whose folder holds it (the longest), else
    /// the repository root's for a top-level file.
    pub fn area_of(&self, path: &str) -> Option<&AreaRecord> {
        if let Some(area) = self
            .areas
            .iter()
            .find(|a| a.files.iter().any(|f| f == path || is_under(f, path)))
        {
            return Some(area);
        }
        let mut best: Option<&AreaRecord> = None;
        for area in &self.areas {
            let Some(folder) = &area.folder else {
                continue;
            };
            let fits = if folder.is_empty() {
                !path.contains('/')
            } else {
                path.to_lowercase().starts_with(&folder.to_lowercase())
                    || format!("{path}/").eq_ignore_ascii_case(folder)
            };
            if fits && best.is_none_or(|b| b.folder.as_ref().map_or(0, String::len) < folder.len())
            {
                best = Some(area);
            }
        }
        best
    }

    /// Whether any fact, entry or listed file is at or under `path`: a
    /// requested path the wiki knows.
    pub fn knows(&self, path: &str) -> bool {
        let under = |p: &String| p == path || is_under(p, path);
        self.by_path.keys().any(under)
            || self.entry_paths.keys().any(under)
            || self.areas.iter().any(|a| a.files.iter().any(under))
    }
}

/// `path` lies inside the folder `folder` (given with or without `/`).
pub fn is_under(path: &str, folder: &str) -> bool {
    let folder = folder.trim_end_matches('/');
    !folder.is_empty()
        && path.len() > folder.len() + 1
        && path.starts_with(folder)
        && path.as_bytes()[folder.len()] == b'/'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_merge_across_pages_and_facts_know_their_section() {
        let sha = "a".repeat(40);
        let cited = "b".repeat(40);
        let changelog = format!(
            "# Changelog\n\n- 2026-01-05 — #2 Add the API (by Bob) — Why. — dependencies: + pydantic ==2.5.0 (pyproject.toml) — merge commit `{sha}` <!-- teammem:{sha} -->\n"
        );
        let area = format!(
            "# Area: api\n\nPull requests that changed files under `api/` (kept by teammem).\n\n## What is here\n\nThe files. <!-- teammem:what-is-here -->\n- api/routes.py — Routes. <!-- teammem:evidence api/routes.py@{cited}#L2 -->\n- api/empty.py <!-- teammem:file -->\n<!-- teammem:what-is-here-end -->\n\n## Who knows this area\n\nAuthors. <!-- teammem:who-knows -->\n- Bob — 1 pull request <!-- teammem:author 1 426f62 -->\n<!-- teammem:who-knows-end -->\n\n## Recent changes\n\n- #2 Add the API (by Bob, 2026-01-05) — Why. — merge commit `{sha}` — api/routes.py <!-- teammem:{sha} -->\nA person's note. <!-- teammem:evidence api/routes.py@{cited}#L5-L9 stale={sha} -->\nBroken <!-- teammem:evidence nope -->\n"
        );
        let deps = format!(
            "# Dependencies\n\nAt commit. <!-- teammem:dependencies -->\n### pyproject.toml (Python) <!-- teammem:manifest -->\n- pydantic — ==2.5.0 <!-- teammem:evidence pyproject.toml@{cited}#L6 -->\n<!-- teammem:dependencies-end -->\n"
        );
        let index = ContextIndex::build([
            ("Area-api.md", area.as_str()),
            ("Changelog.md", changelog.as_str()),
            ("Dependencies.md", deps.as_str()),
        ]);
        assert_eq!(index.entries.len(), 1);
        let record = &index.entries[0];
        assert_eq!(
            record.pages,
            [
                ("Changelog.md".to_owned(), 3),
                ("Area-api.md".to_owned(), 20)
            ]
        );
        assert_eq!(record.entry.paths, ["api/routes.py"]);
        assert_eq!(
            record.entry.dependencies.as_deref(),
            Some("+ pydantic ==2.5.0 (pyproject.toml)")
        );
        let kinds: Vec<(FactKind, &str, usize)> = index
            .facts
            .iter()
            .map(|f| (f.kind, f.path.as_str(), f.line))
            .collect();
        assert_eq!(
            kinds,
            [
                (FactKind::Purpose, "api/routes.py", 8),
                (FactKind::Fact, "api/routes.py", 21),
                (FactKind::Dependency, "pyproject.toml", 5),
            ]
        );
        assert_eq!(index.facts[1].changed_in.as_deref(), Some(sha.as_str()));
        assert_eq!(
            index.facts[2].group.as_deref(),
            Some("pyproject.toml (Python)")
        );
        assert_eq!(index.unreadable, 1);
        let api = index.area_of("api/routes.py").unwrap();
        assert_eq!(api.name, "api");
        assert_eq!(api.files, ["api/routes.py", "api/empty.py"]);
        assert_eq!(api.authors, [("Bob".to_owned(), 1)]);
        assert_eq!(index.area_of("api/new.py").unwrap().page, "Area-api.md");
        assert!(index.area_of("web/x.js").is_none());
        assert!(index.knows("api") && index.knows("api/empty.py") && !index.knows("ap"));
    }
}
