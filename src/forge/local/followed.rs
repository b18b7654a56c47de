//! What this process's earlier citation follows found, per local source: for
//! each citation still current or moved, the tip it was last followed to,
//! where its lines were there and the blob of their file. The next job's
//! follow starts from that tip instead of from the cited commit, so a
//! citation kept for months costs one tree lookup a job, not a walk or two
//! blob reads over history that only grows.
//!
//! Invariants:
//! - an entry says what following the citation to `tip` found; commit ids
//!   name immutable history, so it stays true whatever the refs do, and it is
//!   used only for a tip whose first-parent chain passes through `tip`;
//! - stale verdicts are not kept (a stale marker is rewritten, and a cited
//!   text restored byte for byte reads as current again);
//! - memory is bounded: at most [`MAX_KNOWN`] entries in all, forgotten all
//!   at once when full (the next follows walk again).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex, PoisonError};

use gix::ObjectId;

use crate::facts::Lines;
use crate::staleness::Cited;

/// Entries kept at most, over every source (about 150 bytes each).
pub const MAX_KNOWN: usize = 1 << 16;

/// Where a citation's lines were at a tip it was followed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    /// The tip the citation was followed to.
    pub tip: ObjectId,
    /// The file holding the lines there (the cited path, or where a rename
    /// took it).
    pub path: String,
    /// The lines there.
    pub lines: Lines,
    /// The file's blob at `tip`.
    pub blob: ObjectId,
}

#[derive(Default)]
struct Store {
    by_source: HashMap<PathBuf, HashMap<Cited, Known>>,
    len: usize,
}

static STORE: LazyLock<Mutex<Store>> = LazyLock::new(Mutex::default);

fn store() -> std::sync::MutexGuard<'static, Store> {
    STORE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What is known of each of `cited` in the source at `source`.
pub fn recall(source: &Path, cited: &[Cited]) -> HashMap<Cited, Known> {
    let store = store();
    let Some(known) = store.by_source.get(source) else {
        return HashMap::new();
    };
    cited
        .iter()
        .filter_map(|c| known.get(c).map(|k| (c.clone(), k.clone())))
        .collect()
}

/// Remembers what one follow found in the source at `source`.
pub fn remember(source: &Path, found: impl IntoIterator<Item = (Cited, Known)>) {
    let mut store = store();
    for (cited, known) in found {
        if store.len >= MAX_KNOWN {
            store.by_source.clear();
            store.len = 0;
        }
        let added = store
            .by_source
            .entry(source.to_owned())
            .or_default()
            .insert(cited, known)
            .is_none();
        store.len += usize::from(added);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Sha;

    fn cited(n: u32) -> Cited {
        Cited {
            path: format!("f{n}.rs"),
            commit: Sha::parse("0123456789abcdef0123456789abcdef01234567").unwrap(),
            lines: Lines::new(1, 2).unwrap(),
        }
    }

    fn known(n: u32) -> Known {
        Known {
            tip: ObjectId::null(gix::hash::Kind::Sha1),
            path: format!("f{n}.rs"),
            lines: Lines::new(1, 2).unwrap(),
            blob: ObjectId::null(gix::hash::Kind::Sha1),
        }
    }

    #[test]
    fn entries_are_per_source_and_bounded_in_all() {
        let (a, b) = (Path::new("/followed-test/a"), Path::new("/followed-test/b"));
        remember(a, [(cited(1), known(1))]);
        assert_eq!(recall(a, &[cited(1), cited(2)]).len(), 1);
        assert!(recall(b, &[cited(1)]).is_empty());
        // Filling the store forgets everything at once, never grows past it.
        remember(b, (0..MAX_KNOWN as u32 + 1).map(|n| (cited(n), known(n))));
        assert!(store().len <= MAX_KNOWN);
        assert!(recall(a, &[cited(1)]).is_empty());
    }
}
