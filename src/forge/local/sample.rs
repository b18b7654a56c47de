//! The demo's sample source repository, built with gix (no git CLI): a bare
//! repository of a small to-do service whose default branch `main` has an
//! initial commit and then merged "pull requests" touching a few areas, in the
//! two shapes the local forge recognises (`Merge pull request #N from ...`
//! merge commits and `Title (#N)` squash commits, each with a description),
//! plus one direct commit that is not a pull request. The history is cut in
//! two dispatches: the second edits lines the first one's pages cite (a
//! docstring, a dependency) and moves others (a header inserted above a
//! docstring), so the demo shows facts going stale and being re-derived.
//!
//! Invariants: the history is deterministic (fixed authors and timestamps), so
//! every demo shows the same commit ids; `HEAD` names `main` explicitly; the
//! destination must not exist or be empty.

use std::path::Path;

use gix::ObjectId;
use gix::objs::tree::EntryKind;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};

/// The default branch of the sample.
pub const SAMPLE_BRANCH: &str = "main";

/// One merged pull request of the sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplePull {
    pub number: u64,
    pub title: String,
    /// The merge or squash commit on `main`.
    pub merge_sha: String,
    /// The top-level folders it touches (the builtin agent's areas).
    pub areas: Vec<String>,
    /// Which of the demo's dispatches covers it: 1 or 2.
    pub dispatch: u8,
}

/// What [`create_sample_source`] built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleSource {
    /// The initial commit: the `push_before` of the demo's first dispatch.
    pub base: String,
    /// The first dispatch's `push_after` and the second's `push_before`.
    pub first_head: String,
    /// The tip of `main`: the second dispatch's `push_after`.
    pub head: String,
    pub pulls: Vec<SamplePull>,
}

/// How a pull request lands on `main`.
enum Landing {
    /// A merge commit with the branch commit as second parent.
    Merge { branch: &'static str },
    /// One commit on `main` whose subject ends in `(#N)`.
    Squash,
}

struct PullSpec {
    number: u64,
    title: &'static str,
    author: &'static str,
    /// The PR's description: the commit message after its title.
    description: &'static str,
    landing: Landing,
    files: &'static [(&'static str, &'static str)],
}

const INITIAL_FILES: &[(&str, &str)] = &[
    (
        "README.md",
        "# todo\n\nA small to-do list service: an HTTP API over a store.\n",
    ),
    (
        "api/server.py",
        "\"\"\"HTTP entry point.\"\"\"\n\ndef serve(port: int) -> None:\n    raise NotImplementedError\n",
    ),
    (
        "pyproject.toml",
        "[project]\nname = \"todo\"\nversion = \"0.1.0\"\ndependencies = [\n    \"flask==3.0.0\",\n]\n",
    ),
];

const PULLS: &[PullSpec] = &[
    PullSpec {
        number: 1,
        title: "Store to-dos in SQLite",
        author: "Alice",
        description: "To-dos survive a restart now: they live in one SQLite file in WAL mode, so the API can read while a write is in flight.\n\nFixes #11.",
        landing: Landing::Merge {
            branch: "alice/sqlite-store",
        },
        files: &[
            (
                "storage/schema.sql",
                "CREATE TABLE todos (id INTEGER PRIMARY KEY, title TEXT NOT NULL, done INTEGER NOT NULL DEFAULT 0);\n",
            ),
            (
                "storage/store.py",
                "\"\"\"The to-do store: one SQLite file, WAL mode.\"\"\"\n\nimport sqlite3\n\ndef open_store(path):\n    db = sqlite3.connect(path)\n    db.execute(\"PRAGMA journal_mode=WAL\")\n    return db\n",
            ),
        ],
    },
    PullSpec {
        number: 2,
        title: "Add the /todos JSON API",
        author: "Bob",
        description: "Clients can list, add and update to-dos over JSON. Requests are validated with pydantic, so a bad body is a 400 with the field that is wrong.\n\nCloses #12, closes #13.",
        landing: Landing::Squash,
        files: &[
            (
                "api/routes.py",
                "\"\"\"GET/POST /todos and PATCH /todos/<id>.\"\"\"\n\nROUTES = [\"GET /todos\", \"POST /todos\", \"PATCH /todos/<id>\"]\n",
            ),
            (
                "api/errors.py",
                "\"\"\"Every error is {\"error\": {\"code\", \"message\"}}.\"\"\"\n",
            ),
            (
                "pyproject.toml",
                "[project]\nname = \"todo\"\nversion = \"0.1.0\"\ndependencies = [\n    \"flask==3.0.0\",\n    \"pydantic==2.5.0\",\n]\n",
            ),
        ],
    },
    PullSpec {
        number: 3,
        title: "Document the architecture",
        author: "Carol",
        description: "<!-- Describe your change -->\nA one-page map of the service for new contributors: which folder does what and how a request flows from the API to the store.",
        landing: Landing::Merge {
            branch: "carol/architecture-doc",
        },
        files: &[
            (
                "docs/architecture.md",
                "# Architecture\n\nThe API (api/) reads and writes through the store (storage/).\n",
            ),
            (
                "README.md",
                "# todo\n\nA small to-do list service: an HTTP API over a store.\nSee docs/architecture.md.\n",
            ),
        ],
    },
    PullSpec {
        number: 4,
        title: "Mark to-dos done from the web page",
        author: "Alice",
        description: "A checkbox per to-do on the web page; ticking it sends `PATCH /todos/<id>` with `{\"done\": true}`.\n\nFixes #14.",
        landing: Landing::Squash,
        files: &[
            (
                "web/index.html",
                "<!doctype html>\n<title>todo</title>\n<ul id=\"todos\"></ul>\n<script src=\"todos.js\"></script>\n",
            ),
            (
                "web/todos.js",
                "// Toggles a to-do with PATCH /todos/<id>.\n",
            ),
            (
                "api/routes.py",
                "\"\"\"GET/POST /todos and PATCH /todos/<id> (done: true|false).\"\"\"\n\nROUTES = [\"GET /todos\", \"POST /todos\", \"PATCH /todos/<id>\"]\n",
            ),
        ],
    },
];

const DIRECT_COMMIT: (&str, &str, &str) = ("VERSION", "0.2.0\n", "Release 0.2.0");

/// The second dispatch's pull requests.
const LATER_PULLS: &[PullSpec] = &[
    PullSpec {
        number: 5,
        title: "One store per user",
        author: "Bob",
        description: "Each user gets their own SQLite file, so one user's long write never blocks another's. Flask 3.1 for its per-request teardown hooks.\n\nFixes #15.",
        landing: Landing::Merge {
            branch: "bob/per-user-store",
        },
        files: &[
            (
                "storage/store.py",
                "\"\"\"The to-do store: one SQLite file per user, WAL mode.\"\"\"\n\nimport sqlite3\n\ndef open_store(directory, user):\n    db = sqlite3.connect(f\"{directory}/{user}.db\")\n    db.execute(\"PRAGMA journal_mode=WAL\")\n    return db\n",
            ),
            (
                "pyproject.toml",
                "[project]\nname = \"todo\"\nversion = \"0.1.0\"\ndependencies = [\n    \"flask==3.1.0\",\n    \"pydantic==2.5.0\",\n]\n",
            ),
        ],
    },
    PullSpec {
        number: 6,
        title: "License headers on the API",
        author: "Carol",
        description: "Every API module starts with its SPDX license line.",
        landing: Landing::Squash,
        files: &[(
            "api/routes.py",
            "# SPDX-License-Identifier: MIT\n\"\"\"GET/POST /todos and PATCH /todos/<id> (done: true|false).\"\"\"\n\nROUTES = [\"GET /todos\", \"POST /todos\", \"PATCH /todos/<id>\"]\n",
        )],
    },
];

/// 2026-01-05T09:00:00Z: the sample's first commit; each later commit is an hour on.
const FIRST_COMMIT_TIME: i64 = 1_767_603_600;

/// Why the sample could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot create the sample source repository in {path}: {detail}")]
pub struct SampleError {
    path: String,
    detail: String,
}

struct Builder {
    repo: gix::Repository,
    clock: i64,
}

impl Builder {
    fn signature(&mut self, name: &str) -> gix::actor::Signature {
        self.clock += 3600;
        gix::actor::Signature {
            name: name.into(),
            email: format!("{}@todo.example", name.to_lowercase()).into(),
            time: gix::date::Time::new(self.clock, 0),
        }
    }

    fn tree_with(&self, base: ObjectId, files: &[(&str, &str)]) -> Result<ObjectId, gix::Error> {
        let mut editor = self.repo.edit_tree(base)?;
        for (path, content) in files {
            let blob = self.repo.write_blob(content.as_bytes())?.detach();
            editor.upsert(*path, EntryKind::Blob, blob)?;
        }
        Ok(editor.write()?.detach())
    }

    fn commit(
        &mut self,
        author: &str,
        committer: &str,
        message: &str,
        tree: ObjectId,
        parents: &[ObjectId],
    ) -> Result<ObjectId, gix::Error> {
        let author = self.signature(author);
        let committer = if committer == author.name {
            author.clone()
        } else {
            self.signature(committer)
        };
        let commit = gix::objs::Commit {
            tree,
            parents: parents.iter().copied().collect(),
            author,
            committer,
            encoding: None,
            message: message.into(),
            extra_headers: Vec::new(),
        };
        Ok(self.repo.write_object(&commit)?.detach())
    }

    fn tree_of(&self, commit: ObjectId) -> Result<ObjectId, gix::Error> {
        Ok(self.repo.find_commit(commit)?.tree_id()?.detach())
    }
}

/// Builds the sample at `path` (a new bare repository).
pub fn create_sample_source(path: &Path) -> Result<SampleSource, SampleError> {
    let fail = |detail: String| SampleError {
        path: path.display().to_string(),
        detail,
    };
    if path.exists()
        && std::fs::read_dir(path)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(fail("the directory exists and is not empty".into()));
    }
    build(path).map_err(|e| fail(e.to_string()))
}

/// Lands `specs` on `tip` in order, recording each in `pulls`; returns the new tip.
fn land(
    b: &mut Builder,
    mut tip: ObjectId,
    specs: &[PullSpec],
    dispatch: u8,
    pulls: &mut Vec<SamplePull>,
) -> Result<ObjectId, gix::Error> {
    for pull in specs {
        let main_tree = b.tree_of(tip)?;
        let merged_tree = b.tree_with(main_tree, pull.files)?;
        let merge_sha = match pull.landing {
            Landing::Merge { branch } => {
                // The branch forked from main's tip; main did not move meanwhile
                // in this sample, so the merge's tree is the branch's.
                let branch_commit =
                    b.commit(pull.author, pull.author, pull.title, merged_tree, &[tip])?;
                let message = format!(
                    "Merge pull request #{} from demo/{branch}\n\n{}\n\n{}\n",
                    pull.number, pull.title, pull.description
                );
                b.commit(
                    "Maintainer",
                    "Maintainer",
                    &message,
                    merged_tree,
                    &[tip, branch_commit],
                )?
            }
            Landing::Squash => {
                let message = format!(
                    "{} (#{})\n\n{}\n",
                    pull.title, pull.number, pull.description
                );
                b.commit(pull.author, "Maintainer", &message, merged_tree, &[tip])?
            }
        };
        let mut areas: Vec<String> = pull
            .files
            .iter()
            .map(|(p, _)| p.split_once('/').map_or("root", |(a, _)| a).to_owned())
            .collect();
        areas.sort();
        areas.dedup();
        pulls.push(SamplePull {
            number: pull.number,
            title: pull.title.to_owned(),
            merge_sha: merge_sha.to_string(),
            areas,
            dispatch,
        });
        tip = merge_sha;
    }
    Ok(tip)
}

fn build(path: &Path) -> Result<SampleSource, gix::Error> {
    let repo = gix::ThreadSafeRepository::init_opts(
        path,
        gix::create::Kind::Bare,
        gix::create::Options::default(),
        gix::open::Options::isolated(),
    )?
    .to_thread_local();
    let mut b = Builder {
        repo,
        clock: FIRST_COMMIT_TIME - 3600,
    };

    let empty = b.repo.empty_tree().id;
    let tree = b.tree_with(empty, INITIAL_FILES)?;
    let base = b.commit("Maintainer", "Maintainer", "Initial commit", tree, &[])?;
    let mut pulls = Vec::new();
    let tip = land(&mut b, base, PULLS, 1, &mut pulls)?;
    let (file, content, message) = DIRECT_COMMIT;
    let tree = b.tree_with(b.tree_of(tip)?, &[(file, content)])?;
    let first_head = b.commit("Maintainer", "Maintainer", message, tree, &[tip])?;
    let head = land(&mut b, first_head, LATER_PULLS, 2, &mut pulls)?;

    let branch: gix::refs::FullName = format!("refs/heads/{SAMPLE_BRANCH}")
        .as_str()
        .try_into()
        .expect("refs/heads/main is a valid name");
    let log = |message: &str| LogChange {
        mode: RefLog::AndReference,
        force_create_reflog: false,
        message: message.into(),
    };
    let committer = b.signature("Maintainer");
    b.repo.edit_references_as(
        [
            RefEdit {
                change: Change::Update {
                    log: log("teammem demo: sample history"),
                    expected: PreviousValue::MustNotExist,
                    new: gix::refs::Target::Object(head),
                },
                name: branch.clone(),
                deref: false,
            },
            RefEdit {
                change: Change::Update {
                    log: log("teammem demo: default branch"),
                    expected: PreviousValue::Any,
                    new: gix::refs::Target::Symbolic(branch),
                },
                name: "HEAD".try_into().expect("HEAD is a valid ref name"),
                deref: false,
            },
        ],
        Some(committer.to_ref(&mut gix::date::parse::TimeBuf::default())),
    )?;
    Ok(SampleSource {
        base: base.to_string(),
        first_head: first_head.to_string(),
        head: head.to_string(),
        pulls,
    })
}
