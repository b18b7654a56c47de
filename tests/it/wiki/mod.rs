//! The wiki engine against real git repositories served by `git http-backend`
//! (and as local bare repositories), with the git CLI as the oracle.

mod local;
mod reads;
mod writes;

use std::path::{Path, PathBuf};

use teammem::wiki::{CommitSpec, Committer, Destination, Remote, Secret, Trailer, Wiki, WikiStore};

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;

use crate::harness::git::{git, git_output};
use crate::harness::git_http::{GitHttpServer, bare_with_commits, init_bare};

pub const TOKEN: &str = "ghs_TeStToKeN_5ecret_9f8e7d";
pub const DESTINATION: &str = "octo/wiki";

/// A temp dir with a served bare wiki and a store with its own mirrors.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub server: GitHttpServer,
    pub bare: PathBuf,
    pub store: WikiStore,
}

/// The files of a small wiki made by the git CLI: nested and Unicode paths.
pub fn sample_history() -> Vec<(&'static str, &'static [(&'static str, &'static str)])> {
    vec![
        (
            "Create home",
            &[
                ("Home.md", "# Home\n\nWelcome to the wiki.\n"),
                ("guides/Setup.md", "Install with cargo.\n"),
            ],
        ),
        (
            "Add unicode page",
            &[("Ünïcode/日本語.md", "Grüße aus Köln\nzweite Zeile\n")],
        ),
        (
            "Update home",
            &[(
                "Home.md",
                "# Home v2\n\nWelcome to the wiki.\nSee the Setup guide.\n",
            )],
        ),
    ]
}

impl Fixture {
    /// A served wiki with `commits` made by the git CLI.
    pub async fn with_commits(commits: &[(&str, &[(&str, &str)])]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("srv");
        std::fs::create_dir_all(&root).unwrap();
        let bare = if commits.is_empty() {
            init_bare(&root, "wiki.git")
        } else {
            bare_with_commits(&root, "wiki.git", commits)
        };
        let server = GitHttpServer::start(&root, Some(TOKEN)).await;
        let store = WikiStore::new(dir.path().join("mirrors"));
        Self {
            dir,
            server,
            bare,
            store,
        }
    }

    pub async fn sample() -> Self {
        Self::with_commits(&sample_history()).await
    }

    pub fn destination(&self) -> Destination {
        self.destination_with_token(Some(TOKEN))
    }

    pub fn destination_with_token(&self, token: Option<&str>) -> Destination {
        Destination {
            id: DESTINATION.into(),
            remote: Remote::Http {
                url: self.server.url("wiki.git"),
                token: token.map(Secret::new),
            },
        }
    }

    pub fn wiki(&self) -> Wiki {
        self.store.wiki(&self.destination()).unwrap()
    }

    /// A second, independent store (its own mirror) on the same remote.
    pub fn other_store(&self, name: &str) -> WikiStore {
        WikiStore::new(self.dir.path().join(name))
    }

    pub fn mirrors_dir(&self) -> PathBuf {
        self.dir.path().join("mirrors")
    }
}

pub fn spec(base: &str) -> CommitSpec {
    CommitSpec {
        expected_destination: Some(DESTINATION.into()),
        expected_base: base.into(),
        message: "Record the deploy steps".into(),
        identity: Committer {
            name: "teammem[bot]".into(),
            email: "12345+teammem[bot]@users.noreply.github.com".into(),
        },
        trailers: vec![
            Trailer {
                key: "Teammem-Job".into(),
                value: "job-42".into(),
            },
            Trailer {
                key: "Teammem-Source".into(),
                value: "octo/app".into(),
            },
            Trailer {
                key: "Teammem-Range".into(),
                value: format!("{}..{}", "1".repeat(40), "2".repeat(40)),
            },
        ],
    }
}

/// Every file under `dir` whose bytes contain `needle`.
pub fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                if bytes.windows(needle.len()).any(|w| w == needle) {
                    found.push(path);
                }
            }
        }
    }
    found
}

/// Adds files that are not pages to the served wiki with the git CLI: a binary
/// image, an executable script and a file without extension (all with a
/// needle a search must not find), a symbolic link, and a non-UTF-8 name.
/// Returns the `git ls-tree -r` lines of those files.
pub fn add_files_that_are_not_pages(fixture: &Fixture) -> Vec<String> {
    let work = fixture.dir.path().join("attachments");
    git(
        fixture.dir.path(),
        &[
            "clone",
            "--quiet",
            fixture.bare.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    std::fs::create_dir_all(work.join("images")).unwrap();
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    png.extend_from_slice(b"needle-in-image \xff\xfe");
    std::fs::write(work.join("images/logo.png"), &png).unwrap();
    std::fs::write(work.join("LICENSE"), "needle-in-license\n").unwrap();
    let script = work.join("guides/setup.sh");
    std::fs::write(&script, "#!/bin/sh\necho needle\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("images/logo.png", work.join("logo-link")).unwrap();
    let odd_name = std::ffi::OsStr::from_bytes(b"raw-\xff.bin");
    std::fs::write(work.join(odd_name), "latin-1 name\n").unwrap();
    git(&work, &["add", "--all"]);
    git(&work, &["commit", "--quiet", "-m", "Attach files"]);
    git(&work, &["push", "--quiet", "origin", "master"]);
    other_files(&fixture.bare)
}

/// `git ls-tree -r` lines (mode, id, path) of every entry not ending in `.md`.
pub fn other_files(bare: &std::path::Path) -> Vec<String> {
    let listing = git_output(bare, &["ls-tree", "-r", "-z", "master"]);
    assert!(listing.status.success(), "git ls-tree failed");
    String::from_utf8_lossy(&listing.stdout)
        .split('\0')
        .filter(|line| !line.is_empty() && !line.ends_with(".md"))
        .map(str::to_owned)
        .collect()
}
