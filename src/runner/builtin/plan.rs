//! What a plan of the builtin agent is: the pages one run writes whole
//! ([`NewPage`]), the exact-anchor replacements it makes in existing pages
//! ([`PlannedPatch`], [`Replacement`]), and what it does for each pull
//! request ([`PullPlan`]). The planner that makes one is `planner.rs`; the
//! page families it hands the run to build on these types, which sit below
//! all of them, so no page family imports the planner.
//!
//! Invariant: a plan is data, no I/O: the driver sends its writes and patches
//! through the writer as they are, and `planner::apply` applies them in
//! memory as the writer would (replacements handed to the writer's own
//! patch engine through the one conversion here, [`engine_replacements`]).

use std::collections::BTreeMap;

/// Full content for a new page (`write_wiki_pages`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPage {
    pub path: String,
    pub content: String,
}

/// One exact-anchor replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    pub old: String,
    pub new: String,
}

/// `replacements` as the writer's patch engine takes them
/// (`wiki::patch::Replacement`), to check a plan as the writer would.
pub fn engine_replacements(replacements: &[Replacement]) -> Vec<crate::wiki::patch::Replacement> {
    replacements
        .iter()
        .map(|r| crate::wiki::patch::Replacement {
            old: r.old.clone(),
            new: r.new.clone(),
        })
        .collect()
}

/// Replacements the plan makes in one existing page (sent as `patch_wiki_pages`;
/// the writer's own is `wiki::PagePatch`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedPatch {
    pub expected_sha: String,
    pub replacements: Vec<Replacement>,
}

/// What the plan does for one pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullPlan {
    pub number: crate::ids::PullNumber,
    pub merge_sha: crate::ids::Sha,
    /// The current pages that carry (or will carry) the PR's entry.
    pub pages: Vec<String>,
    /// True when every page already carried the entry.
    pub already_recorded: bool,
}

/// The edits of one run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub writes: Vec<NewPage>,
    pub patches: BTreeMap<String, PlannedPatch>,
    pub pulls: Vec<PullPlan>,
    /// What the plan leaves alone because a person changed it (a kept
    /// section whose anchors or lines were edited), for the receipt.
    pub notes: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.patches.is_empty()
    }
}
