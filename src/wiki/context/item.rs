//! What `get_context`'s answer is made of, below both the answer that
//! ranks it ([`super::answer`]) and the packing that cuts it to the budget
//! ([`super::brief`]): the items, their ranking wrapper, what was left out,
//! and the token estimate both count with.
//!
//! Invariant: one estimate for every cost ([`estimate_tokens`]); an item's
//! identity ([`Item::key`]) is one per thing it says, so one item found for
//! two paths is listed once.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

/// Tokens an item costs: its bytes divided by 4, rounded up. An estimate,
/// not a tokenizer (the host's model is unknown, and its tokenizer may not
/// be public): English prose and source run at about 4 bytes a token in
/// tiktoken's o200k_base and cl100k_base; hex shas, dates and numbers run
/// denser, so on answers the estimate is about a quarter below their count
/// (measured by `bench/context.sh`, which counts both ways).
pub fn estimate_tokens(json_bytes: usize) -> usize {
    json_bytes.div_ceil(4)
}

/// Most authors a `people` item names: who knows an area is its most
/// active few; on a real history an area has dozens (pallets/flask's `src`:
/// about 20, 250 tokens), each of whom would cost as much as a pull
/// request's line.
pub const MAX_PEOPLE: usize = 5;

/// Most pages named in `read_more`.
pub const MAX_READ_MORE: usize = 10;

/// How much an answer says about the older changes once every change is
/// named. An answer is read by an agent before every change it makes, so
/// by default it says each thing once and stops: the budget is a ceiling,
/// not a target (`bench/context.sh`: filling 2,000 tokens on a file 27 pull
/// requests touched cost 1/13 of reading the file and its history).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Detail {
    /// The newest few changes whole, the older ones `#NUMBER TITLE (AUTHOR,
    /// DATE)` as the budget allows.
    #[default]
    Brief,
    /// Then, as the budget allows, the older ones' why and whole entries.
    Full,
}

/// How an answer is sent, and so what its budget counts: as text, one
/// line a thing (the default, [`super::text`]), or as JSON objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Text,
    Json,
}

/// Hex digits an answer shows of a commit it names in an item, as `git log
/// --abbrev=12` does: unambiguous in any repository teammem serves, and a
/// third of a whole sha's cost (an answer names ten and more). `ref` and
/// `as_of`, what the answer was read at, stay whole.
pub const SHOWN_SHA_DIGITS: usize = 12;

/// A commit as an item shows it (see [`SHOWN_SHA_DIGITS`]).
fn abbreviated<S: Serializer>(sha: &str, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(sha.get(..SHOWN_SHA_DIGITS).unwrap_or(sha))
}

/// [`abbreviated`] for a commit that may be absent (skipped when it is).
fn abbreviated_some<S: Serializer>(sha: &Option<String>, serializer: S) -> Result<S::Ok, S::Error> {
    abbreviated(sha.as_deref().unwrap_or_default(), serializer)
}

/// A fact's standing.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Citation {
    pub path: String,
    #[serde(serialize_with = "abbreviated")]
    pub cited_commit: String,
    pub lines: String,
    /// `current` (no change to the cited lines recorded) or `stale`.
    pub status: &'static str,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "abbreviated_some"
    )]
    pub changed_in: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

/// One author of an area, shown as `NAME (PULL REQUESTS)`: the count of
/// their pull requests in the area, in a fifth of an object's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    pub name: String,
    pub pull_requests: u64,
}

impl Serialize for Person {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!("{} ({})", self.name, self.pull_requests))
    }
}

/// One thing worth knowing, ranked.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Item {
    /// What a file is for, as its first lines state (the file is the
    /// citation's `path`).
    Purpose {
        text: String,
        page: String,
        line: usize,
        #[serde(flatten)]
        citation: Citation,
    },
    /// A statement on a page that cites the path's lines.
    Fact {
        text: String,
        page: String,
        line: usize,
        #[serde(flatten)]
        citation: Citation,
    },
    /// A merged pull request that touched the path.
    Change {
        number: u64,
        title: String,
        #[serde(skip_serializing_if = "String::is_empty")]
        why: String,
        author: String,
        date: String,
        #[serde(serialize_with = "abbreviated")]
        merge_commit: String,
        /// The files its entry names (and how many more it changed).
        files: Vec<String>,
        #[serde(skip_serializing_if = "is_zero")]
        more_files: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        dependencies: Option<String>,
        /// The merge it reached the default branch through, if another
        /// branch's.
        #[serde(skip_serializing_if = "Option::is_none")]
        arrived_through: Option<String>,
        /// The page to read its entry on: its area's page (or that page's
        /// quarter archive) when one holds it, else the Changelog's.
        page: String,
    },
    /// Who knows the path's area.
    People {
        area: String,
        page: String,
        /// The most active first, at most [`MAX_PEOPLE`].
        authors: Vec<Person>,
        /// Authors of the area past those, named on `page`.
        #[serde(skip_serializing_if = "is_zero")]
        more_authors: usize,
    },
    /// A dependency a manifest declares.
    Dependency {
        manifest: String,
        name: String,
        requirement: String,
        page: String,
        line: usize,
        #[serde(flatten)]
        citation: Citation,
    },
    /// How to build, test, lint or run the project, as its files say
    /// (How-to-work-here.md): the test and build commands apply to every
    /// path, the others to the paths they cite.
    HowTo {
        topic: String,
        text: String,
        page: String,
        line: usize,
        #[serde(flatten)]
        citation: Citation,
        /// How many other facts of the topic `page` holds: a brief answer
        /// gives one test and one build command, `detail: "full"` all.
        #[serde(skip_serializing_if = "is_zero")]
        more_of_topic: usize,
    },
    /// The older pull requests that touched the asked paths, newest first,
    /// one line each: `#NUMBER TITLE`, with ` (AUTHOR, DATE)` and then
    /// ` — WHY` as the budget allows (see [`super::brief`]); their files are
    /// on `pages`, or in the answer to a larger `max_tokens`.
    EarlierChanges {
        changes: Vec<String>,
        pages: Vec<String>,
    },
    /// A line search ranks high for the question that none of the above is.
    Passage {
        page: String,
        line: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        heading: Option<String>,
        text: String,
    },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Item {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Item::Purpose { .. } => "purpose",
            Item::Fact { .. } => "fact",
            Item::Change { .. } => "change",
            Item::People { .. } => "people",
            Item::Dependency { .. } => "dependency",
            Item::HowTo { .. } => "how_to",
            Item::EarlierChanges { .. } => "earlier_changes",
            Item::Passage { .. } => "passage",
        }
    }

    /// The page to read for more of this.
    pub(super) fn page(&self) -> &str {
        match self {
            Item::Purpose { page, .. }
            | Item::Fact { page, .. }
            | Item::People { page, .. }
            | Item::Dependency { page, .. }
            | Item::HowTo { page, .. }
            | Item::Passage { page, .. }
            | Item::Change { page, .. } => page,
            Item::EarlierChanges { pages, .. } => {
                pages.first().map_or("Changelog.md", String::as_str)
            }
        }
    }

    /// Identity, so one item found for two paths is listed once.
    pub(super) fn key(&self) -> String {
        match self {
            Item::Change { merge_commit, .. } => format!("change {merge_commit}"),
            Item::EarlierChanges { .. } => "earlier changes".to_owned(),
            Item::People { page, .. } => format!("people {page}"),
            Item::Purpose { page, line, .. }
            | Item::Fact { page, line, .. }
            | Item::Dependency { page, line, .. }
            | Item::HowTo { page, line, .. }
            | Item::Passage { page, line, .. } => format!("line {page}:{line}"),
        }
    }
}

/// A ranked item with the asked paths it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranked {
    /// Higher is more relevant. Not sent: the answer's order says it.
    pub relevance: u32,
    /// The asked paths this item is about (empty: found by the question).
    /// Sent only when it narrows what the answer says already (see
    /// [`Ranked::about_is_said`]).
    pub about: Vec<String>,
    /// `about` is every path asked: the answer's `paths` say it (see
    /// [`about_every_path`]).
    pub about_every_path: bool,
    pub item: Item,
}

/// Whether `about` (asked paths, each once) is every one of the `paths`
/// asked.
pub fn about_every_path(about: &[String], paths: usize) -> bool {
    paths > 0 && about.len() == paths
}

impl Ranked {
    /// The item's own path, when it cites one.
    fn own_path(&self) -> Option<&str> {
        match &self.item {
            Item::Purpose { citation, .. }
            | Item::Fact { citation, .. }
            | Item::Dependency { citation, .. }
            | Item::HowTo { citation, .. } => Some(&citation.path),
            _ => None,
        }
    }

    /// Whether the answer says `about` without it: it is every path asked
    /// (the answer's `paths`), or only the item's own cited path, or asked
    /// files a change names among its `files`, or paths in the area an
    /// area's people are for (each path's `area` in `paths`).
    pub(super) fn about_is_said(&self) -> bool {
        self.about_every_path
            || match (&self.item, self.about.as_slice()) {
                (_, []) => true,
                (Item::People { .. }, _) => true,
                (Item::Change { files, .. }, about) => about.iter().all(|a| files.contains(a)),
                (_, [one]) => self.own_path() == Some(one.as_str()),
                _ => false,
            }
    }
}

impl Serialize for Ranked {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Shown<'a> {
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            about: &'a [String],
            #[serde(flatten)]
            item: &'a Item,
        }
        Shown {
            about: if self.about_is_said() {
                &[]
            } else {
                &self.about
            },
            item: &self.item,
        }
        .serialize(serializer)
    }
}

/// What did not fit (`{"items": 0}` when nothing).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct LeftOut {
    pub items: usize,
    /// Kind → how many of it were left out.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub by_kind: BTreeMap<&'static str, usize>,
    /// The pages holding what was left out, most relevant first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub read_more: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each key once in an item's JSON: a flattened citation carries the
    /// path, so an item never names it beside it (a duplicate key parses as
    /// the last one in most readers and costs its bytes twice).
    #[test]
    fn an_item_names_each_key_once() {
        let citation = Citation {
            path: "src/app.py".into(),
            cited_commit: "c".repeat(40),
            lines: "L1".into(),
            status: "current",
            changed_in: None,
            deleted: false,
        };
        let purpose = Ranked {
            relevance: 1,
            about: vec!["src/app.py".into()],
            about_every_path: false,
            item: Item::Purpose {
                text: "The app.".into(),
                page: "Area-src.md".into(),
                line: 3,
                citation,
            },
        };
        let json = serde_json::to_string(&purpose).unwrap();
        assert_eq!(json.matches("\"path\":").count(), 1, "{json}");
    }

    /// Each thing once, in few bytes: a commit at 12 digits, `about` only
    /// when it says more than the item's own path, an author with a count.
    #[test]
    fn an_item_says_each_thing_once() {
        let citation = |path: &str, changed_in: Option<String>| Citation {
            path: path.into(),
            cited_commit: "c".repeat(40),
            lines: "L1".into(),
            status: if changed_in.is_some() {
                "stale"
            } else {
                "current"
            },
            changed_in,
            deleted: false,
        };
        let fact = |about: &[&str], path: &str| Ranked {
            relevance: 1,
            about: about.iter().map(|p| (*p).to_owned()).collect(),
            about_every_path: false,
            item: Item::Fact {
                text: "Taxes round once.".into(),
                page: "Notes.md".into(),
                line: 2,
                citation: citation(path, Some("d".repeat(40))),
            },
        };
        let own = serde_json::to_value(fact(&["billing/tax.py"], "billing/tax.py")).unwrap();
        assert!(own.get("about").is_none(), "{own}");
        assert_eq!(own["cited_commit"], "c".repeat(12));
        assert_eq!(own["changed_in"], "d".repeat(12));
        let folder = serde_json::to_value(fact(&["billing/"], "billing/tax.py")).unwrap();
        assert_eq!(folder["about"], serde_json::json!(["billing/"]));
        let people = serde_json::to_value(Item::People {
            area: "billing".into(),
            page: "Area-billing.md".into(),
            authors: vec![Person {
                name: "Erin".into(),
                pull_requests: 3,
            }],
            more_authors: 0,
        })
        .unwrap();
        assert_eq!(people["authors"], serde_json::json!(["Erin (3)"]));
        let nothing = serde_json::to_value(LeftOut::default()).unwrap();
        assert_eq!(nothing, serde_json::json!({"items": 0}));
    }

    /// `about` is sent only when it narrows what the answer says already:
    /// not when it is every path asked, nor files a change names, nor the
    /// paths of an area's people; a folder a change is under, and some of
    /// several paths on an item that cites none of them, are sent.
    #[test]
    fn about_is_sent_only_when_it_narrows_the_answer() {
        let about = |about: &[&str], every: bool, item: Item| {
            let ranked = Ranked {
                relevance: 1,
                about: about.iter().map(|p| (*p).to_owned()).collect(),
                about_every_path: every,
                item,
            };
            serde_json::to_value(ranked).unwrap().get("about").cloned()
        };
        let change = || Item::Change {
            number: 7,
            title: "Round taxes per line".into(),
            why: String::new(),
            author: "Erin".into(),
            date: "2026-05-05".into(),
            merge_commit: "e".repeat(40),
            files: vec!["billing/tax.py".into(), "billing/invoice.py".into()],
            more_files: 0,
            dependencies: None,
            arrived_through: None,
            page: "Area-billing.md".into(),
        };
        let earlier = || Item::EarlierChanges {
            changes: vec!["#7 Round taxes per line".into()],
            pages: vec!["Area-billing.md".into()],
        };
        let people = || Item::People {
            area: "billing".into(),
            page: "Area-billing.md".into(),
            authors: Vec::new(),
            more_authors: 0,
        };
        assert_eq!(about(&["billing/tax.py"], false, change()), None);
        assert_eq!(
            about(&["billing/"], false, change()),
            Some(serde_json::json!(["billing/"]))
        );
        assert_eq!(about(&["billing/tax.py", "api/"], false, people()), None);
        assert_eq!(about(&["billing/tax.py", "api/"], true, earlier()), None);
        assert_eq!(
            about(&["billing/tax.py"], false, earlier()),
            Some(serde_json::json!(["billing/tax.py"]))
        );
    }
}
