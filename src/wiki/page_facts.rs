//! What the whole-wiki scans need to know about one page blob (its size,
//! whether it holds evidence markers, how many are stale, whether
//! `Stale.md` lists anything from it), remembered by blob id, so that a
//! job's scans read only the pages that changed since the last scan instead
//! of every page of a wiki that grows with the repository's history.
//!
//! Invariants:
//! - an entry belongs to one blob id, and a blob never changes, so an entry
//!   is never stale; what it says is exactly what reading the blob would;
//! - a blob larger than [`MAX_SEARCH_SCAN_BYTES`] (more than any scan reads
//!   in all) is never read: its size is remembered, nothing else; callers
//!   that skip smaller huge pages decide so from `size`;
//! - memory is bounded: at most [`MAX_REMEMBERED_BLOBS`] entries, forgotten
//!   all at once when full (the next scan reads the pages again);
//! - a memo with a file (`<mirrors>/<destination>.page-facts`, a
//!   `record_file.rs`) shares what it learns with every process of this
//!   node (the daemon and each job's writer child, a new process per job).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use gix::ObjectId;

use super::error::WikiError;
use super::record_file::{CHECKSUM_BYTES, RecordFile};
use super::tree::read_blob;
use super::validate::MAX_SEARCH_SCAN_BYTES;
use crate::facts::{Citation, Found, PREFIX, facts};

/// Blobs remembered at most (about 40 bytes each).
pub const MAX_REMEMBERED_BLOBS: usize = 1 << 16;

/// What a scan needs from one page blob.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageFacts {
    /// The blob's size in bytes.
    pub size: u64,
    /// Whether the blob was read (it is at most [`MAX_SEARCH_SCAN_BYTES`]).
    pub read: bool,
    /// Whether its text holds an evidence marker ([`PREFIX`]).
    pub evidence: bool,
    /// Its stale evidence markers (as `search::stale_markers` counts them).
    pub stale: u32,
    /// Whether `Stale.md` lists anything from it: a stale fact citing a
    /// source file, or a marker that does not parse.
    pub on_stale_page: bool,
}

impl PageFacts {
    /// The facts of a page's text of `size` bytes.
    pub fn of_text(size: u64, text: &str) -> Self {
        let mut facts_of = PageFacts {
            size,
            read: true,
            evidence: text.contains(PREFIX),
            ..PageFacts::default()
        };
        if !facts_of.evidence {
            return facts_of;
        }
        for found in facts(text) {
            match found {
                Found::Fact(fact) => {
                    if fact.marker.is_stale() {
                        facts_of.stale += 1;
                        if matches!(fact.marker.citation, Citation::Source { .. }) {
                            facts_of.on_stale_page = true;
                        }
                    }
                }
                Found::Unreadable { .. } => facts_of.on_stale_page = true,
            }
        }
        facts_of
    }
}

/// The remembered [`PageFacts`] of one wiki's blobs.
#[derive(Default)]
pub struct PageFactsMemo {
    known: Mutex<HashMap<ObjectId, PageFacts>>,
    /// Where the facts are shared with this node's other processes, and
    /// whether it was read yet.
    file: Option<RecordFile>,
}

/// One record's body: blob id, size, stale count, flags.
const BODY_BYTES: usize = 20 + 8 + 4 + 1;

impl PageFactsMemo {
    /// A memo shared through `file` with this node's other processes.
    pub fn persisted(file: PathBuf) -> Self {
        PageFactsMemo {
            known: Mutex::default(),
            file: Some(RecordFile::new(
                file,
                BODY_BYTES + CHECKSUM_BYTES,
                MAX_REMEMBERED_BLOBS,
            )),
        }
    }

    /// Reads the shared file once, the first time the memo is asked.
    fn load(&self) {
        let Some(bodies) = self.file.as_ref().and_then(RecordFile::read_once) else {
            return;
        };
        let mut known = self.lock();
        for body in bodies {
            if let Some((blob, found)) = decode(&body) {
                known.insert(blob, found);
            }
        }
    }

    /// The facts of `blob`, read from the repository the first time; with
    /// the text when this call read it (so a caller that needs the text does
    /// not read the blob twice).
    pub fn facts(
        &self,
        repo: &gix::Repository,
        blob: ObjectId,
    ) -> Result<(PageFacts, Option<String>), WikiError> {
        self.load();
        if let Some(known) = self.lock().get(&blob) {
            return Ok((*known, None));
        }
        let size = repo
            .find_header(blob)
            .map_err(|err| WikiError::internal("reading a page header", err))?
            .size();
        let (found, text) = if size > MAX_SEARCH_SCAN_BYTES {
            (
                PageFacts {
                    size,
                    ..PageFacts::default()
                },
                None,
            )
        } else {
            let text = String::from_utf8_lossy(&read_blob(repo, blob)?).into_owned();
            (PageFacts::of_text(size, &text), Some(text))
        };
        self.remember(blob, found);
        Ok((found, text))
    }

    /// Remembers what a caller that read `blob` itself found.
    pub fn remember(&self, blob: ObjectId, found: PageFacts) {
        {
            let mut known = self.lock();
            if known.len() >= MAX_REMEMBERED_BLOBS {
                known.clear();
            }
            known.insert(blob, found);
        }
        if let Some(file) = &self.file {
            file.append(&encode(blob, found));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectId, PageFacts>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn encode(blob: ObjectId, found: PageFacts) -> [u8; BODY_BYTES] {
    let mut body = [0u8; BODY_BYTES];
    body[..20].copy_from_slice(blob.as_bytes());
    body[20..28].copy_from_slice(&found.size.to_le_bytes());
    body[28..32].copy_from_slice(&found.stale.to_le_bytes());
    body[32] =
        u8::from(found.read) | u8::from(found.evidence) << 1 | u8::from(found.on_stale_page) << 2;
    body
}

fn decode(body: &[u8]) -> Option<(ObjectId, PageFacts)> {
    if body.len() != BODY_BYTES || body[32] & !0b111 != 0 {
        return None;
    }
    let blob = ObjectId::try_from(&body[..20]).ok()?;
    Some((
        blob,
        PageFacts {
            size: u64::from_le_bytes(body[20..28].try_into().ok()?),
            stale: u32::from_le_bytes(body[28..32].try_into().ok()?),
            read: body[32] & 1 != 0,
            evidence: body[32] & 2 != 0,
            on_stale_page: body[32] & 4 != 0,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn a_page_without_markers_has_no_evidence_and_nothing_stale() {
        let found = PageFacts::of_text(12, "# Home\n\ntext\n");
        assert_eq!(
            found,
            PageFacts {
                size: 12,
                read: true,
                ..PageFacts::default()
            }
        );
    }

    #[test]
    fn stale_and_unreadable_markers_are_counted_as_the_scans_count_them() {
        let current = format!("- a fact <!-- teammem:evidence src/a.rs@{SHA}#L1-L2 -->\n");
        let found = PageFacts::of_text(1, &current);
        assert!(found.evidence && found.stale == 0 && !found.on_stale_page);

        let stale = format!(
            "- a fact <!-- teammem:evidence src/a.rs@{SHA}#L1-L2 stale={SHA} -->\n- b <!-- teammem:evidence nonsense -->\n"
        );
        let found = PageFacts::of_text(1, &stale);
        assert_eq!(
            found.stale as usize,
            crate::wiki::search::stale_markers(&stale)
        );
        assert!(found.on_stale_page);
        assert_eq!(
            found.on_stale_page,
            crate::staleness::stale_page([("A.md", stale.as_str())]).is_some()
        );

        let unreadable_only = "- b <!-- teammem:evidence nonsense -->\n";
        let found = PageFacts::of_text(1, unreadable_only);
        assert_eq!(found.stale, 0);
        assert!(found.on_stale_page);
    }

    #[test]
    fn records_round_trip_and_another_process_reads_them() {
        let blob = ObjectId::from_hex(SHA.as_bytes()).unwrap();
        let found = PageFacts {
            size: 70_000,
            read: true,
            evidence: true,
            stale: 3,
            on_stale_page: true,
        };
        assert_eq!(decode(&encode(blob, found)), Some((blob, found)));
        let mut unknown_flag = encode(blob, found);
        unknown_flag[32] |= 8;
        assert_eq!(decode(&unknown_flag), None);

        // Shared through the file: a second memo (another process) knows the
        // blob without reading it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("w.page-facts");
        PageFactsMemo::persisted(path.clone()).remember(blob, found);
        let other = PageFactsMemo::persisted(path);
        other.load();
        assert_eq!(other.lock().get(&blob), Some(&found));
        assert_eq!(other.lock().len(), 1);
    }
}
