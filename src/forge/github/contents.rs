//! Single files and directory listings of a GitHub source at a commit, through
//! the contents API and the Git trees API: the policy file at the verified
//! sha, the writer's source reads brokered by the daemon
//! (`runner/broker.rs`), and the builtin agent's file heads.
//!
//! Invariants:
//! - the caller decides which commits may be read (a job's evidence); only
//!   the file or directory asked for is read, with the daemon's
//!   `contents: read` token;
//! - a file is refused past its byte limit (the contents API serves at most
//!   [`CONTENTS_API_LIMIT`]) or when it is not UTF-8; a path that is not a
//!   file there (absent, a directory, a symlink, a submodule) is `Ok(None)`;
//! - a source file's head is read through the contents API at most once per
//!   blob, head size and repository while the daemon remembers it
//!   (`blob_cache.rs`): the Git trees listing and the contents answer name
//!   each file's blob sha, so an unchanged file costs the next job no request.

use base64::Engine;
use serde::Deserialize;

use super::api::{encode_path, failure, unknown_commit};
use super::blob_cache::Head;
use super::{GitHubError, GitHubForge, Permissions};
use crate::config::Source;
use crate::forge::evidence::{self, SourceError};

/// `GET /repos/{o}/{r}/contents/{path}?ref=` for a file.
#[derive(Deserialize)]
pub(super) struct Contents {
    #[serde(rename = "type")]
    kind: String,
    size: u64,
    /// The blob's sha (what [`GitHubForge::read_head_at`] remembers).
    #[serde(default)]
    pub(super) sha: Option<String>,
    encoding: Option<String>,
    content: Option<String>,
}

impl GitHubForge {
    /// The source's policy file at `sha`: `Ok(None)` when there is none there,
    /// [`SourceError::Invalid`] when it is larger than `max` bytes or not UTF-8.
    pub async fn read_policy(
        &self,
        source: &Source,
        sha: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<String>, SourceError> {
        self.read_file_at(source, sha, path, max).await
    }

    /// One file of the source at commit `sha` (the contents API at that ref,
    /// with the daemon's `contents: read` token): `Ok(None)` when `path` is
    /// not a file there (absent, a directory, a symlink or a submodule),
    /// [`SourceError::Invalid`] when it is larger than `max` bytes or not UTF-8.
    /// The caller decides which commits may be read (a job's evidence).
    pub async fn read_file_at(
        &self,
        source: &Source,
        sha: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<String>, SourceError> {
        let Some(bytes) = self.contents_at(source, sha, path, max as u64).await? else {
            return Ok(None);
        };
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| SourceError::Invalid(format!("{path} at {sha} is not UTF-8 text")))
    }

    /// The first `max` bytes of one file at commit `sha`, like
    /// [`GitHubForge::read_file_at`] but for a file of any size the contents
    /// API serves (up to 1 MiB; larger ones are [`SourceError::Invalid`]).
    /// A path whose blob at `sha` is known (from [`GitHubForge::list_tree_at`]
    /// or an earlier read) and whose head of `max` bytes was read before, in
    /// this repository, is answered from memory without a request.
    pub async fn read_head_at(
        &self,
        source: &Source,
        sha: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<evidence::FileHead>, SourceError> {
        let r = source.repository.as_str();
        let key_path = path.trim_start_matches('/');
        let known = self.blobs.blob_at(r, sha, key_path);
        if let Some(head) = known.and_then(|blob| self.blobs.head(r, &blob, max)) {
            return head_answer(head, path, sha).map(Some);
        }
        let Some(contents) = self.contents_entry(source, sha, path).await? else {
            return Ok(None);
        };
        let head = if contents.size > CONTENTS_API_LIMIT {
            Head::TooLarge(contents.size)
        } else {
            let bytes = decode_contents(&contents, path, sha, CONTENTS_API_LIMIT)?;
            evidence::FileHead::of(&bytes, max).map_or(Head::NotText, Head::Text)
        };
        if let Some(blob) = contents.sha.as_deref().filter(|b| evidence::is_full_sha(b)) {
            self.blobs.remember_path(r, sha, key_path, blob);
            self.blobs.remember_head(r, blob, max, head.clone());
        }
        head_answer(head, path, sha).map(Some)
    }

    /// The bytes of one file at `sha` through the contents API, refused when
    /// larger than `max`.
    async fn contents_at(
        &self,
        source: &Source,
        sha: &str,
        path: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>, SourceError> {
        match self.contents_entry(source, sha, path).await? {
            Some(contents) => decode_contents(&contents, path, sha, max).map(Some),
            None => Ok(None),
        }
    }

    /// The contents API's answer for `path` at `sha` when it is a file
    /// (`None`: absent, a directory, a symlink or a submodule).
    pub(super) async fn contents_entry(
        &self,
        source: &Source,
        sha: &str,
        path: &str,
    ) -> Result<Option<Contents>, SourceError> {
        let r = &source.repository;
        let url = format!(
            "/repos/{r}/contents/{}?ref={sha}",
            encode_path(path.trim_start_matches('/'))
        );
        // A directory answers with a list of its entries, a file with an object.
        let answer: serde_json::Value = match self
            .get_patiently(r, &Permissions::contents_read(), &url)
            .await
        {
            Ok(answer) => answer,
            Err(GitHubError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(failure(e, || SourceError::Invalid(String::new()))),
        };
        if !answer.is_object() {
            return Ok(None);
        }
        let contents: Contents = serde_json::from_value(answer).map_err(|e| {
            SourceError::Invalid(format!(
                "GitHub's answer for {path} at {sha} has an unexpected shape: {e}"
            ))
        })?;
        Ok((contents.kind == "file").then_some(contents))
    }

    /// The files under `directory` (`""`: the root) at commit `sha`, as
    /// [`crate::forge::local::contents::list_tree_at`] lists them, through the
    /// Git trees API (one call per directory level, `recursive=1` on the
    /// last): `Ok(None)` when `directory` is not a directory there. The
    /// caller decides which commits may be read.
    pub async fn list_tree_at(
        &self,
        source: &Source,
        sha: &str,
        directory: &str,
        recursive: bool,
    ) -> Result<Option<evidence::TreeListing>, SourceError> {
        use evidence::{EntryKind, TreeEntry, TreeListing};
        let r = &source.repository;
        let directory =
            evidence::clean_source_path(directory, true).map_err(SourceError::Invalid)?;
        let perms = Permissions::contents_read();
        let unknown = || unknown_commit(r.as_str(), "commit", sha);
        let mut tree = sha.to_owned();
        let segments: Vec<&str> = if directory.is_empty() {
            Vec::new()
        } else {
            directory.split('/').collect()
        };
        for segment in &segments {
            let url = format!("/repos/{r}/git/trees/{tree}");
            let level: GitTree = self
                .get_patiently(r, &perms, &url)
                .await
                .map_err(|e| failure(e, unknown))?;
            match level
                .tree
                .into_iter()
                .find(|e| e.path == *segment && e.kind == "tree")
            {
                Some(entry) if evidence::is_full_sha(&entry.sha) => tree = entry.sha,
                _ => return Ok(None),
            }
        }
        let url = format!(
            "/repos/{r}/git/trees/{tree}{}",
            if recursive { "?recursive=1" } else { "" }
        );
        let answer: GitTree = match self.get_patiently(r, &perms, &url).await {
            Ok(answer) => answer,
            Err(GitHubError::NotFound(_)) if !segments.is_empty() => return Ok(None),
            Err(e) => return Err(failure(e, unknown)),
        };
        // Each regular file's blob sha rides along, for `read_head_at`.
        let mut entries: Vec<(TreeEntry, Option<String>)> = answer
            .tree
            .into_iter()
            .filter_map(|e| {
                let kind = match e.kind.as_str() {
                    "blob" => EntryKind::File,
                    "tree" if !recursive => EntryKind::Directory,
                    "commit" if evidence::is_full_sha(&e.sha) => EntryKind::Submodule,
                    _ => return None,
                };
                let commit = (kind == EntryKind::Submodule).then(|| e.sha.clone());
                let regular = matches!(e.mode.as_str(), "100644" | "100755");
                let blob = (kind == EntryKind::File && regular && evidence::is_full_sha(&e.sha))
                    .then_some(e.sha);
                let path = if directory.is_empty() {
                    e.path
                } else {
                    format!("{directory}/{}", e.path)
                };
                Some((TreeEntry { path, kind, commit }, blob))
            })
            .collect();
        entries.sort_by(|a, b| a.0.path.cmp(&b.0.path));
        let mut listing = TreeListing {
            entries: Vec::new(),
            truncated: answer.truncated,
        };
        let mut bytes = 0;
        for (entry, blob) in entries {
            // Only what the listing keeps is remembered (it is bounded).
            let path = blob.as_ref().map(|_| entry.path.clone());
            if !listing.push(entry, &mut bytes) {
                break;
            }
            if let (Some(path), Some(blob)) = (path, blob) {
                self.blobs.remember_path(r, sha, &path, &blob);
            }
        }
        Ok(Some(listing))
    }
}

/// The largest file the contents API serves with its content.
const CONTENTS_API_LIMIT: u64 = 1024 * 1024;

fn too_large(path: &str, sha: &str, size: u64, max: u64) -> SourceError {
    SourceError::Invalid(format!(
        "{path} at {sha} is {size} bytes, more than the {max}-byte limit"
    ))
}

/// The bytes of a contents-API file answer, refused when larger than `max`.
fn decode_contents(
    contents: &Contents,
    path: &str,
    sha: &str,
    max: u64,
) -> Result<Vec<u8>, SourceError> {
    if contents.size > max {
        return Err(too_large(path, sha, contents.size, max));
    }
    if contents.encoding.as_deref() != Some("base64") {
        return Err(SourceError::Invalid(format!(
            "GitHub gave {path} at {sha} in an encoding other than base64"
        )));
    }
    let encoded: String = contents
        .content
        .as_deref()
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| {
            SourceError::Invalid(format!("GitHub's copy of {path} is not valid base64"))
        })?;
    if bytes.len() as u64 > max {
        return Err(too_large(path, sha, bytes.len() as u64, max));
    }
    Ok(bytes)
}

/// What [`GitHubForge::read_head_at`] answers for a head, read or remembered.
fn head_answer(head: Head, path: &str, sha: &str) -> Result<evidence::FileHead, SourceError> {
    match head {
        Head::Text(head) => Ok(head),
        Head::NotText => Err(SourceError::Invalid(format!(
            "{path} at {sha} is not UTF-8 text"
        ))),
        Head::TooLarge(size) => Err(too_large(path, sha, size, CONTENTS_API_LIMIT)),
    }
}

/// One level of the Git trees API's answer.
#[derive(Deserialize)]
struct GitTree {
    tree: Vec<GitTreeEntry>,
    #[serde(default)]
    truncated: bool,
}

#[derive(Deserialize)]
struct GitTreeEntry {
    path: String,
    #[serde(default)]
    mode: String,
    #[serde(rename = "type")]
    kind: String,
    sha: String,
}
