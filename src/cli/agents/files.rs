//! The checkout `agents setup --write DIR` writes into: where each file is,
//! what it holds now, and replacing it.
//!
//! Invariants: every path read or written is inside DIR once symlinks are
//! resolved (a link to elsewhere in the checkout is followed, so an
//! `AGENTS.md` linked to `CLAUDE.md` updates `CLAUDE.md`; a link out of it,
//! or into git's own files under a `.git` folder, is an error); a file is
//! replaced whole by a rename from a new file beside it, keeping its
//! permissions, so a reader never sees half of it; a target knows its real
//! path and inode, so the caller can tell two names for one file apart.
//! These hold as resolved: writing reuses the resolved paths, so a process
//! swapping a folder for a link between the check and the write is not
//! guarded against (that needs directory-relative `openat`/`renameat`).

use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::super::Failure;

/// The largest existing file read (host configurations and `AGENTS.md` are
/// a few KiB).
const MAX_FILE_BYTES: u64 = 1 << 20;

pub(super) struct Checkout {
    /// DIR, canonical.
    root: PathBuf,
    /// DIR as given, for messages.
    shown: PathBuf,
}

/// One file of the checkout.
pub(super) struct Target {
    /// Where it is (or will be), symlinks resolved.
    path: PathBuf,
    /// Folders to create first, outermost first.
    missing_dirs: Vec<PathBuf>,
    /// What it holds now; `None` when it does not exist.
    pub(super) existing: Option<Vec<u8>>,
    /// Its device and inode, when it exists (a hard link has another path).
    id: Option<(u64, u64)>,
}

impl Target {
    /// Whether `self` and `other` are one file, so that writing one would
    /// undo writing the other.
    pub(super) fn is_same_file(&self, other: &Target) -> bool {
        self.path == other.path || (self.id.is_some() && self.id == other.id)
    }
}

impl Checkout {
    pub(super) fn open(dir: &Path) -> Result<Checkout, Failure> {
        let shown = dir.to_path_buf();
        let root = std::fs::canonicalize(dir).map_err(|e| {
            Failure::usage(format!(
                "--write {}: {e}: give the top folder of the checkout the agents work in",
                dir.display()
            ))
        })?;
        if !root.is_dir() {
            return Err(Failure::usage(format!(
                "--write {}: not a directory: give the top folder of the checkout the agents work in",
                dir.display()
            )));
        }
        Ok(Checkout { root, shown })
    }

    /// `relative` as shown in messages (`DIR/.vscode/mcp.json`).
    pub(super) fn show(&self, relative: &str) -> String {
        self.shown.join(relative).display().to_string()
    }

    /// Finds `relative` (fixed, `/`-separated, no `..`) inside the checkout
    /// and reads what it holds.
    pub(super) fn resolve(&self, relative: &str) -> Result<Target, Failure> {
        let parts: Vec<&str> = relative.split('/').collect();
        let mut dir = self.root.clone();
        let mut missing_dirs = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            let here = dir.join(part);
            if !missing_dirs.is_empty() {
                if last {
                    return Ok(Target {
                        path: here,
                        missing_dirs,
                        existing: None,
                        id: None,
                    });
                }
                missing_dirs.push(here.clone());
                dir = here;
                continue;
            }
            let shown = self.show(&parts[..=i].join("/"));
            let meta = match std::fs::symlink_metadata(&here) {
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    if last {
                        return Ok(Target {
                            path: here,
                            missing_dirs,
                            existing: None,
                            id: None,
                        });
                    }
                    missing_dirs.push(here.clone());
                    dir = here;
                    continue;
                }
                Err(e) => return Err(Failure::runtime(format!("{shown}: {e}"))),
                Ok(meta) => meta,
            };
            let real = if meta.file_type().is_symlink() {
                let real = std::fs::canonicalize(&here).map_err(|e| {
                    Failure::usage(format!(
                        "{shown} is a symbolic link teammem cannot follow ({e}): remove it or point it at a file in the checkout"
                    ))
                })?;
                let Ok(inside) = real.strip_prefix(&self.root) else {
                    return Err(Failure::usage(format!(
                        "{shown} is a symbolic link to {}, outside the checkout; teammem writes only inside it: remove the link, or merge what `agents setup` prints by hand",
                        real.display()
                    )));
                };
                // Git's own files are not the checkout's: a block appended
                // to `.git/config` breaks the repository.
                if inside
                    .components()
                    .any(|c| c.as_os_str().eq_ignore_ascii_case(".git"))
                {
                    return Err(Failure::usage(format!(
                        "{shown} is a symbolic link to {}, inside git's own files; teammem does not write there: remove the link, or merge what `agents setup` prints by hand",
                        real.display()
                    )));
                }
                real
            } else {
                here
            };
            let meta =
                std::fs::metadata(&real).map_err(|e| Failure::runtime(format!("{shown}: {e}")))?;
            if last && !meta.is_file() {
                return Err(Failure::usage(format!(
                    "{shown} exists and is not a regular file: move it away and run again"
                )));
            }
            if !last && !meta.is_dir() {
                return Err(Failure::usage(format!(
                    "{shown} exists and is not a directory: move it away and run again"
                )));
            }
            if last {
                let existing = read_bounded(&real, &shown)?;
                return Ok(Target {
                    path: real,
                    missing_dirs,
                    existing: Some(existing),
                    id: Some((meta.dev(), meta.ino())),
                });
            }
            dir = real;
        }
        unreachable!("a relative path has a last part")
    }

    /// Replaces (or creates) the file with `bytes`.
    pub(super) fn write(&self, target: &Target, bytes: &[u8], shown: &str) -> Result<(), Failure> {
        let failed = |e: std::io::Error| Failure::runtime(format!("{shown}: cannot write: {e}"));
        for dir in &target.missing_dirs {
            std::fs::create_dir(dir).map_err(failed)?;
        }
        let parent = target
            .path
            .parent()
            .expect("a file in the checkout has a folder");
        let name = target
            .path
            .file_name()
            .expect("a file has a name")
            .to_string_lossy();
        let temporary = parent.join(format!(".{name}.teammem-{}.tmp", std::process::id()));
        // create_new: never opens through a link someone put at that name.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
            .map_err(failed)?;
        let done = (|| {
            file.write_all(bytes)?;
            if target.existing.is_some() {
                let permissions = std::fs::metadata(&target.path)?.permissions();
                file.set_permissions(permissions)?;
            }
            file.sync_all()?;
            std::fs::rename(&temporary, &target.path)
        })();
        if let Err(e) = done {
            let _ = std::fs::remove_file(&temporary);
            return Err(failed(e));
        }
        Ok(())
    }
}

fn read_bounded(path: &Path, shown: &str) -> Result<Vec<u8>, Failure> {
    let file = std::fs::File::open(path).map_err(|e| Failure::runtime(format!("{shown}: {e}")))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::runtime(format!("{shown}: {e}")))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(Failure::usage(format!(
            "{shown} is larger than {} KiB, more than a host configuration or AGENTS.md holds: check the file, or merge what `agents setup` prints by hand",
            MAX_FILE_BYTES / 1024
        )));
    }
    Ok(bytes)
}
