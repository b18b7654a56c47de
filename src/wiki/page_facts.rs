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
//! - a memo with a file (`<mirrors>/<destination>.page-facts`) shares what
//!   it learns with every process of this node (the daemon and each job's
//!   writer child, a new process per job): records are appended whole, each
//!   with a checksum; a record that does not check is ignored, and a file
//!   that cannot be read or written only means pages are read again.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use gix::ObjectId;

use super::error::WikiError;
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
    file: Option<(PathBuf, OnceLock<()>)>,
}

/// One record: blob id, size, stale count, flags, checksum.
const RECORD_BYTES: usize = 20 + 8 + 4 + 1 + 4;

impl PageFactsMemo {
    /// A memo shared through `file` with this node's other processes.
    pub fn persisted(file: PathBuf) -> Self {
        PageFactsMemo {
            known: Mutex::default(),
            file: Some((file, OnceLock::new())),
        }
    }

    /// Reads the shared file once, the first time the memo is asked.
    fn load(&self) {
        let Some((path, loaded)) = &self.file else {
            return;
        };
        loaded.get_or_init(|| {
            let Ok(bytes) = std::fs::read(path) else {
                return;
            };
            if bytes.len() > MAX_REMEMBERED_BLOBS * RECORD_BYTES {
                // Grown past what one memo holds: start again.
                let _ = std::fs::remove_file(path);
                return;
            }
            let mut known = self.lock();
            for record in bytes.chunks_exact(RECORD_BYTES) {
                if let Some((blob, found)) = decode(record) {
                    known.insert(blob, found);
                }
            }
        });
    }

    fn append(&self, blob: ObjectId, found: PageFacts) {
        let Some((path, _)) = &self.file else {
            return;
        };
        let record = encode(blob, found);
        let write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            // One write of one whole record: appends of other processes
            // land before or after it, never inside.
            file.write_all(&record)
        };
        if let Err(err) = write() {
            tracing::debug!(file = %path.display(), %err, "page facts not shared");
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
        self.append(blob, found);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectId, PageFacts>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn checksum(bytes: &[u8]) -> u32 {
    // FNV-1a: enough to tell a torn or foreign record from a whole one.
    bytes.iter().fold(0x811c_9dc5u32, |hash, &byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

fn encode(blob: ObjectId, found: PageFacts) -> [u8; RECORD_BYTES] {
    let mut record = [0u8; RECORD_BYTES];
    record[..20].copy_from_slice(blob.as_bytes());
    record[20..28].copy_from_slice(&found.size.to_le_bytes());
    record[28..32].copy_from_slice(&found.stale.to_le_bytes());
    record[32] =
        u8::from(found.read) | u8::from(found.evidence) << 1 | u8::from(found.on_stale_page) << 2;
    let sum = checksum(&record[..33]);
    record[33..].copy_from_slice(&sum.to_le_bytes());
    record
}

fn decode(record: &[u8]) -> Option<(ObjectId, PageFacts)> {
    let sum = u32::from_le_bytes(record[33..37].try_into().ok()?);
    if checksum(&record[..33]) != sum || record[32] & !0b111 != 0 {
        return None;
    }
    let blob = ObjectId::try_from(&record[..20]).ok()?;
    Some((
        blob,
        PageFacts {
            size: u64::from_le_bytes(record[20..28].try_into().ok()?),
            stale: u32::from_le_bytes(record[28..32].try_into().ok()?),
            read: record[32] & 1 != 0,
            evidence: record[32] & 2 != 0,
            on_stale_page: record[32] & 4 != 0,
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
    fn records_round_trip_and_a_torn_or_flipped_one_is_ignored() {
        let blob = ObjectId::from_hex(SHA.as_bytes()).unwrap();
        let found = PageFacts {
            size: 70_000,
            read: true,
            evidence: true,
            stale: 3,
            on_stale_page: true,
        };
        let record = encode(blob, found);
        assert_eq!(decode(&record), Some((blob, found)));
        for at in [0, 20, 28, 32, 36] {
            let mut flipped = record;
            flipped[at] ^= 1;
            assert_eq!(decode(&flipped), None, "byte {at}");
        }

        // Shared through the file: a second memo (another process) knows the
        // blob without reading it; a torn record at the end is skipped.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("w.page-facts");
        PageFactsMemo::persisted(path.clone()).remember(blob, found);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&record[..10]);
        std::fs::write(&path, &bytes).unwrap();
        let other = PageFactsMemo::persisted(path);
        other.load();
        assert_eq!(other.lock().get(&blob), Some(&found));
        assert_eq!(other.lock().len(), 1);
    }
}
