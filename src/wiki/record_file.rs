//! A file of fixed-size records that this node's processes share (the daemon
//! and each job's writer child, a new process per job): what one learned
//! about immutable objects, so the next need not learn it again.
//!
//! Invariants: a record is appended whole, in one write, with a checksum, so
//! appends of other processes land before or after it, never inside; a
//! record that does not check (torn, flipped) is ignored; a file past its
//! bound is removed and started again; a file that cannot be read or written
//! only means the records are learned again.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes the checksum takes at the end of each record.
pub const CHECKSUM_BYTES: usize = 4;

/// A record file: records of `size` bytes (checksum included), at most
/// `max_records` of them.
pub struct RecordFile {
    path: PathBuf,
    size: usize,
    max_records: usize,
    /// Whether [`RecordFile::read_once`] has answered.
    read: AtomicBool,
}

impl RecordFile {
    pub fn new(path: PathBuf, size: usize, max_records: usize) -> RecordFile {
        assert!(
            size > CHECKSUM_BYTES,
            "a record holds more than its checksum"
        );
        RecordFile {
            path,
            size,
            max_records,
            read: AtomicBool::new(false),
        }
    }

    /// [`RecordFile::read`] the first time it is asked, `None` after: a
    /// memo loads what the node's other processes learned once.
    pub fn read_once(&self) -> Option<Vec<Vec<u8>>> {
        (!self.read.swap(true, Ordering::SeqCst)).then(|| self.read())
    }

    /// The bodies (checksum stripped) of every record that checks.
    pub fn read(&self) -> Vec<Vec<u8>> {
        let Ok(bytes) = std::fs::read(&self.path) else {
            return Vec::new();
        };
        if bytes.len() > self.max_records * self.size {
            // Grown past what one memo holds: start again.
            let _ = std::fs::remove_file(&self.path);
            return Vec::new();
        }
        bytes
            .chunks_exact(self.size)
            .filter_map(|record| {
                let (body, sum) = record.split_at(self.size - CHECKSUM_BYTES);
                (checksum(body).to_le_bytes() == sum).then(|| body.to_vec())
            })
            .collect()
    }

    /// Appends one record of `body` (`size` minus the checksum bytes).
    pub fn append(&self, body: &[u8]) {
        debug_assert_eq!(body.len(), self.size - CHECKSUM_BYTES);
        let mut record = body.to_vec();
        record.extend_from_slice(&checksum(body).to_le_bytes());
        let write = || -> std::io::Result<()> {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
            file.write_all(&record)
        };
        if let Err(err) = write() {
            tracing::debug!(file = %self.path.display(), %err, "records not shared");
        }
    }
}

/// FNV-1a: enough to tell a torn or foreign record from a whole one (the
/// file is the daemon's own, under its data directory, which no agent
/// reaches).
pub fn checksum(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |hash, &byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_records_round_trip_and_torn_or_flipped_ones_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let file = RecordFile::new(dir.path().join("sub").join("r"), 8, 4);
        file.append(b"abcd");
        file.append(b"efgh");
        let mut bytes = std::fs::read(file.path.as_path()).unwrap();
        bytes[9] ^= 1; // flips the second record's body
        bytes.extend_from_slice(b"ijk"); // a torn third
        std::fs::write(file.path.as_path(), &bytes).unwrap();
        assert_eq!(file.read_once(), Some(vec![b"abcd".to_vec()]));
        assert_eq!(file.read_once(), None, "read once only");
        // Past its bound the file starts again.
        for _ in 0..4 {
            file.append(b"mnop");
        }
        assert!(file.read().is_empty());
        assert!(!file.path.exists());
    }
}
