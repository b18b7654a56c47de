//! The parsed evidence ([`PageEvidence`]) of each page blob the last fact
//! check read, so the next check parses only the pages whose blob changed
//! instead of every marker of a wiki that grows with the repository's
//! history (archive pages included).
//!
//! Invariants:
//! - an entry belongs to one blob id, and a blob never changes, so an entry
//!   is never stale: it is exactly what parsing the blob's text gives;
//! - memory is bounded by one scan: each scan keeps only the entries of the
//!   pages it read (at most `MAX_SEARCH_SCAN_BYTES` of page text), so pages
//!   that changed or left the wiki are forgotten at the next scan.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gix::ObjectId;

use crate::staleness::PageEvidence;

/// One wiki's [`PageEvidence`] by blob, as of its last scan.
#[derive(Default)]
pub struct EvidenceMemo {
    last_scan: Mutex<HashMap<ObjectId, Arc<PageEvidence>>>,
}

impl EvidenceMemo {
    /// What the last scan parsed of `blob`, if it read it.
    pub fn get(&self, blob: ObjectId) -> Option<Arc<PageEvidence>> {
        self.lock().get(&blob).cloned()
    }

    /// Keeps `scanned` (a whole scan's entries) in place of the last scan's.
    pub fn replace(&self, scanned: HashMap<ObjectId, Arc<PageEvidence>>) {
        *self.lock() = scanned;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectId, Arc<PageEvidence>>> {
        self.last_scan.lock().unwrap_or_else(|p| p.into_inner())
    }
}
