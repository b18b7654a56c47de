//! The daemon-lifetime memory of GitHub source files already read, so a file
//! whose blob did not change since an earlier job costs no second request:
//! which blob a path names at a commit (from Git trees listings and contents
//! answers), and the head of each blob already read (by `max_bytes`).
//!
//! Invariants:
//! - nothing crosses repositories: every key holds the repository, so a blob
//!   known in one repository is never evidence that another may be read;
//! - only answers GitHub gave are kept: a file's head, or the verdict that it
//!   is not UTF-8 or larger than the contents API serves; errors (5xx, rate
//!   limits, refusals) never are, so the next call asks again;
//! - a path is remembered only at a full commit sha (a branch moves), and
//!   from a listing only for a regular file (mode `100644`/`100755`), so a
//!   symlink whose target text equals some file's bytes never reads as that
//!   file;
//! - both maps are bounded, the oldest insertion evicted first: at most
//!   [`MAX_PATHS`] paths in [`MAX_PATH_BYTES`] and [`MAX_HEADS`] heads in
//!   [`MAX_HEAD_BYTES`] (8 MiB in all, keys counted); an entry larger than its
//!   map's budget is not kept.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;

use crate::forge::evidence::{FileHead, is_full_sha};

/// Paths remembered (repository, commit, path → blob sha).
pub const MAX_PATHS: usize = 16 * 1024;
/// Bytes of keys and blob shas the path map holds.
pub const MAX_PATH_BYTES: usize = 2 * 1024 * 1024;
/// Heads remembered (repository, blob sha, max_bytes → head).
pub const MAX_HEADS: usize = 4096;
/// Bytes of keys and contents the head map holds.
pub const MAX_HEAD_BYTES: usize = 6 * 1024 * 1024;
/// What an entry costs beyond its strings (map and queue slots).
const ENTRY_OVERHEAD: usize = 64;

/// What GitHub said about one blob, read for a head of `max_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    Text(FileHead),
    /// Not UTF-8 in its first `max_bytes`.
    NotText,
    /// Larger than the contents API serves; its size.
    TooLarge(u64),
}

impl Head {
    fn cost(&self) -> usize {
        match self {
            Head::Text(head) => head.content.len(),
            Head::NotText | Head::TooLarge(_) => 0,
        }
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct PathKey {
    repository: String,
    commit: String,
    path: String,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct HeadKey {
    repository: String,
    blob: String,
    max: usize,
}

/// The two bounded maps, each behind its own short-held lock (never across
/// an await).
#[derive(Default)]
pub struct BlobCache {
    paths: Mutex<Bounded<PathKey, String>>,
    heads: Mutex<Bounded<HeadKey, Head>>,
}

impl std::fmt::Debug for BlobCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BlobCache")
    }
}

impl BlobCache {
    /// Remembers that `path` is the regular file `blob` at `commit` of
    /// `repository` (case is folded). Only a full commit sha is remembered:
    /// a branch name moves, so what it named is no lasting answer.
    pub fn remember_path(&self, repository: &str, commit: &str, path: &str, blob: &str) {
        if !is_full_sha(commit) || !is_full_sha(blob) {
            return;
        }
        let key = PathKey {
            repository: repository.to_owned(),
            commit: commit.to_ascii_lowercase(),
            path: path.to_owned(),
        };
        let cost = repository.len() + commit.len() + path.len() + blob.len();
        lock(&self.paths).insert(
            key,
            blob.to_ascii_lowercase(),
            cost,
            MAX_PATHS,
            MAX_PATH_BYTES,
        );
    }

    /// The blob `path` names at `commit`, if a listing or read said so.
    pub fn blob_at(&self, repository: &str, commit: &str, path: &str) -> Option<String> {
        let key = PathKey {
            repository: repository.to_owned(),
            commit: commit.to_ascii_lowercase(),
            path: path.to_owned(),
        };
        lock(&self.paths).get(&key).cloned()
    }

    /// Remembers what reading `blob` of `repository` for `max` bytes gave.
    pub fn remember_head(&self, repository: &str, blob: &str, max: usize, head: Head) {
        let cost = repository.len() + blob.len() + head.cost();
        let key = HeadKey {
            repository: repository.to_owned(),
            blob: blob.to_ascii_lowercase(),
            max,
        };
        lock(&self.heads).insert(key, head, cost, MAX_HEADS, MAX_HEAD_BYTES);
    }

    /// What reading `blob` of `repository` for `max` bytes gave before.
    pub fn head(&self, repository: &str, blob: &str, max: usize) -> Option<Head> {
        let key = HeadKey {
            repository: repository.to_owned(),
            blob: blob.to_ascii_lowercase(),
            max,
        };
        lock(&self.heads).get(&key).cloned()
    }
}

/// A poisoned lock only means another task panicked mid-insert; the maps
/// stay consistent enough to serve (at worst a miss).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A map that forgets its oldest insertions beyond an entry count and a
/// byte budget.
struct Bounded<K, V> {
    map: HashMap<K, (V, usize)>,
    order: VecDeque<K>,
    bytes: usize,
}

impl<K, V> Default for Bounded<K, V> {
    fn default() -> Self {
        Bounded {
            map: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl<K: Clone + Eq + Hash, V> Bounded<K, V> {
    fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key).map(|(v, _)| v)
    }

    fn insert(&mut self, key: K, value: V, cost: usize, max_entries: usize, max_bytes: usize) {
        let cost = cost + ENTRY_OVERHEAD;
        if cost > max_bytes {
            return;
        }
        if let Some((old, old_cost)) = self.map.get_mut(&key) {
            // Same key, newer answer: replaced in place, age unchanged.
            self.bytes = self.bytes - *old_cost + cost;
            *old = value;
            *old_cost = cost;
        } else {
            self.map.insert(key.clone(), (value, cost));
            self.order.push_back(key);
            self.bytes += cost;
        }
        while self.map.len() > max_entries || self.bytes > max_bytes {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some((_, c)) = self.map.remove(&oldest) {
                self.bytes -= c;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const C1: &str = "1111111111111111111111111111111111111111";
    const B1: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    fn text(s: &str) -> Head {
        Head::Text(FileHead {
            content: s.into(),
            truncated: false,
        })
    }

    #[test]
    fn keys_hold_the_repository_the_commit_and_the_head_size() {
        let c = BlobCache::default();
        c.remember_path("octo/app", &C1.to_uppercase(), "src/a.rs", B1);
        assert_eq!(c.blob_at("octo/app", C1, "src/a.rs").as_deref(), Some(B1));
        assert_eq!(c.blob_at("octo/other", C1, "src/a.rs"), None);
        assert_eq!(c.blob_at("octo/app", C1, "src/b.rs"), None);
        // A branch name is not a lasting key.
        c.remember_path("octo/app", "main", "src/a.rs", B1);
        assert_eq!(c.blob_at("octo/app", "main", "src/a.rs"), None);
        c.remember_head("octo/app", B1, 4096, text("x"));
        assert_eq!(c.head("octo/app", B1, 4096), Some(text("x")));
        assert_eq!(c.head("octo/app", B1, 10), None);
        assert_eq!(c.head("octo/other", B1, 4096), None);
    }

    #[test]
    fn the_oldest_entries_go_first_by_count_and_by_bytes() {
        let mut m: Bounded<u32, String> = Bounded::default();
        for i in 0..5 {
            m.insert(i, i.to_string(), 0, 3, 10_000);
        }
        assert_eq!(m.get(&0), None);
        assert_eq!(m.get(&1), None);
        assert_eq!(m.get(&4).map(String::as_str), Some("4"));
        assert_eq!(m.map.len(), 3);

        let mut m: Bounded<u32, ()> = Bounded::default();
        let each = 100 - ENTRY_OVERHEAD;
        for i in 0..5 {
            m.insert(i, (), each, 100, 250);
        }
        // Two entries of 100 bytes fit in 250.
        assert_eq!(m.map.len(), 2);
        assert!(m.get(&3).is_some() && m.get(&4).is_some());
        assert_eq!(m.bytes, 200);
        // Too large for the budget: not kept, nothing evicted.
        m.insert(9, (), 1000, 100, 250);
        assert_eq!(m.get(&9), None);
        assert_eq!(m.map.len(), 2);
        // Replacing a key keeps one entry and its byte count right.
        m.insert(4, (), each, 100, 250);
        assert_eq!((m.map.len(), m.bytes), (2, 200));
    }
}
