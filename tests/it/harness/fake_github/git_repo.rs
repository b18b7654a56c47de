//! [`GitRepo`]: a real git repository built with the `git` CLI (non-bare,
//! branch `main`), the commit graph behind the fake's answers. Every commit
//! is by `Test <test@example.org>` at a fixed date unless a test names one,
//! so the same steps always give the same SHAs.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::harness::git::{git_command, git_output, git_with_env};

/// The date every commit of a [`GitRepo`] gets unless a test names another.
pub(super) const FIXED_DATE: &str = "2026-01-01T00:00:00Z";

/// A real git repository built with the `git` CLI (non-bare, branch `main`).
#[derive(Debug, Clone)]
pub struct GitRepo {
    pub dir: PathBuf,
}

impl GitRepo {
    pub fn init(dir: &Path) -> GitRepo {
        std::fs::create_dir_all(dir).unwrap();
        let r = GitRepo {
            dir: dir.to_path_buf(),
        };
        r.git(&["init", "-q", "-b", "main"]);
        r.git(&["config", "user.name", "Test"]);
        r.git(&["config", "user.email", "test@example.org"]);
        r.git(&["config", "commit.gpgsign", "false"]);
        r
    }

    /// git in this repository as `Test`, at a fixed date; trimmed stdout.
    pub fn git(&self, args: &[&str]) -> String {
        self.git_at(FIXED_DATE, args)
    }

    /// git in this repository as `Test`, authored and committed at `date`.
    pub(super) fn git_at(&self, date: &str, args: &[&str]) -> String {
        let env = [
            ("GIT_AUTHOR_NAME", "Test"),
            ("GIT_AUTHOR_EMAIL", "test@example.org"),
            ("GIT_COMMITTER_NAME", "Test"),
            ("GIT_COMMITTER_EMAIL", "test@example.org"),
            ("GIT_AUTHOR_DATE", date),
            ("GIT_COMMITTER_DATE", date),
        ];
        git_with_env(&self.dir, &env, args).trim().to_string()
    }

    pub(super) fn git_ok(&self, args: &[&str]) -> bool {
        git_output(&self.dir, args).status.success()
    }

    /// Like [`GitRepo::commit`], authored and committed at `date` (RFC 3339)
    /// on whatever branch is checked out.
    pub fn commit_dated(&self, file: &str, subject: &str, date: &str) -> String {
        let path = self.dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push_str(subject);
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        self.git(&["add", "-A"]);
        self.git_at(date, &["commit", "-q", "-m", subject]);
        self.head()
    }

    /// The committer date of `sha` as GitHub writes times (`...Z`), if `sha`
    /// is a commit here.
    pub(super) fn committed_at(&self, sha: &str) -> Option<String> {
        let sha = self.resolve(sha)?;
        let seconds: i64 = self
            .git(&["show", "-s", "--format=%ct", &sha])
            .parse()
            .ok()?;
        chrono::DateTime::from_timestamp(seconds, 0)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    }

    /// Commits a change to `file` with `subject`; returns the new SHA.
    pub fn commit(&self, file: &str, subject: &str) -> String {
        let path = self.dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push_str(subject);
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", subject]);
        self.head()
    }

    /// `n` commits in a row; returns their SHAs (oldest first).
    pub fn commits(&self, n: usize, prefix: &str) -> Vec<String> {
        (0..n)
            .map(|i| self.commit("log.txt", &format!("{prefix} {i}")))
            .collect()
    }

    /// `n` commits on top of `HEAD` in one `git fast-import` run (fast for
    /// thousands); returns the new tip.
    pub fn fast_commits(&self, n: usize) -> String {
        use std::io::Write;
        let parent = self.head();
        let mut stream = String::new();
        for i in 0..n {
            let msg = format!("bulk {i}");
            stream.push_str(&format!(
                "commit refs/heads/main\ncommitter Test <test@example.org> 1767225600 +0000\ndata {}\n{msg}\n",
                msg.len()
            ));
            if i == 0 {
                stream.push_str(&format!("from {parent}\n"));
            }
            let content = format!("{i}\n");
            stream.push_str(&format!(
                "M 100644 inline bulk.txt\ndata {}\n{content}\n",
                content.len()
            ));
        }
        let mut child = git_command(&self.dir)
            .args(["fast-import", "--quiet", "--force"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stream.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success());
        self.git(&["reset", "-q", "--hard", "main"]);
        self.head()
    }

    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    /// Moves `main` to `sha` (a force-push).
    pub fn reset_main(&self, sha: &str) {
        self.git(&["reset", "-q", "--hard", sha]);
    }

    pub(super) fn resolve(&self, rev: &str) -> Option<String> {
        let out = git_output(
            &self.dir,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{rev}^{{commit}}"),
            ],
        );
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    pub(super) fn is_ancestor(&self, a: &str, b: &str) -> bool {
        self.git_ok(&["merge-base", "--is-ancestor", a, b])
    }

    /// Commits as GitHub's commit objects, oldest first (`args` select them,
    /// e.g. `["b..h"]` or `["-1", sha]`).
    pub(super) fn commit_objects(&self, args: &[&str], full: &str, base_url: &str) -> Vec<Value> {
        let mut cmd = vec![
            "log",
            "--reverse",
            "--format=%H%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%T%x00%B%x1e",
        ];
        cmd.extend_from_slice(args);
        let out = self.git(&cmd);
        out.split('\x1e')
            .map(|record| record.trim_start_matches('\n'))
            .filter(|record| !record.is_empty())
            .map(|record| {
                let f: Vec<&str> = record.splitn(10, '\0').collect();
                let parents: Vec<Value> = f[1]
                    .split_whitespace()
                    .map(|p| json!({
                        "sha": p,
                        "url": format!("{base_url}/repos/{full}/commits/{p}"),
                        "html_url": format!("https://github.example/{full}/commit/{p}"),
                    }))
                    .collect();
                json!({
                    "sha": f[0],
                    "node_id": format!("C_{}", f[0]),
                    "url": format!("{base_url}/repos/{full}/commits/{}", f[0]),
                    "html_url": format!("https://github.example/{full}/commit/{}", f[0]),
                    "comments_url": format!("{base_url}/repos/{full}/commits/{}/comments", f[0]),
                    "commit": {
                        "url": format!("{base_url}/repos/{full}/git/commits/{}", f[0]),
                        "author": {"name": f[2], "email": f[3], "date": f[4]},
                        "committer": {"name": f[5], "email": f[6], "date": f[7]},
                        "message": f[9].trim_end(),
                        "tree": {"sha": f[8], "url": format!("{base_url}/repos/{full}/git/trees/{}", f[8])},
                        "comment_count": 0,
                        "verification": {"verified": false, "reason": "unsigned", "signature": null, "payload": null, "verified_at": null},
                    },
                    "author": null,
                    "committer": null,
                    "parents": parents,
                })
            })
            .collect()
    }

    /// The files a merge (or squash) commit changed against its first parent,
    /// as `GET /pulls/{n}/files` lists them (sorted by path, with patches).
    pub(super) fn changed_files(&self, merge: &str) -> Vec<Value> {
        let parent = format!("{merge}^1");
        let numstat = self.git(&["diff", "--no-renames", "--numstat", &parent, merge]);
        let status = self.git(&["diff", "--no-renames", "--name-status", &parent, merge]);
        let mut files = Vec::new();
        for (counts, kind) in numstat.lines().zip(status.lines()) {
            let mut c = counts.split('\t');
            let (add, del, path) = (c.next().unwrap(), c.next().unwrap(), c.next().unwrap());
            let (additions, deletions) = (
                add.parse::<u64>().unwrap_or(0),
                del.parse::<u64>().unwrap_or(0),
            );
            let status = match kind.chars().next() {
                Some('A') => "added",
                Some('D') => "removed",
                _ => "modified",
            };
            let diff = self.git(&["diff", "--no-renames", &parent, merge, "--", path]);
            let patch = diff.find("@@").map(|at| diff[at..].to_string());
            files.push(json!({
                "sha": "0000000000000000000000000000000000000000",
                "filename": path,
                "status": status,
                "additions": additions,
                "deletions": deletions,
                "changes": additions + deletions,
                "blob_url": format!("https://github.example/blob/{merge}/{path}"),
                "raw_url": format!("https://github.example/raw/{merge}/{path}"),
                "contents_url": format!("https://api.github.example/contents/{path}?ref={merge}"),
                "patch": patch,
            }));
        }
        files.sort_by(|a, b| a["filename"].as_str().cmp(&b["filename"].as_str()));
        files
    }

    /// The files changed from `old` to `new` as compare and a single commit
    /// list them: renames detected (`previous_filename`), each with its
    /// patch (hunks only) and counts, sorted by path. Once the patches given
    /// reach `patch_lines` lines, later files get no patch and zero counts,
    /// as GitHub does past its diff limit.
    pub(super) fn diff_files(&self, old: &str, new: &str, patch_lines: usize) -> Vec<Value> {
        let status = self.git(&["diff", "-M", "--name-status", old, new]);
        let mut given = 0;
        let mut files = Vec::new();
        for row in status.lines() {
            let fields: Vec<&str> = row.split('\t').collect();
            let (kind, before, path) = match fields[..] {
                [kind, from, to] if kind.starts_with('R') => ("renamed", Some(from), to),
                [kind, path] => (
                    match kind {
                        "A" => "added",
                        "D" => "removed",
                        _ => "modified",
                    },
                    None,
                    path,
                ),
                _ => panic!("unexpected git diff --name-status row {row:?}"),
            };
            let mut paths = vec![path];
            paths.extend(before);
            let mut args = vec!["diff", "-M", old, new, "--"];
            args.extend(&paths);
            // Untrimmed: a last context line may be a lone space.
            let diff = String::from_utf8(git_output(&self.dir, &args).stdout).unwrap();
            let mut patch = diff
                .find("\n@@")
                .map(|at| diff[at + 1..].to_string())
                .filter(|p| !p.is_empty());
            let (mut additions, mut deletions) = (0u64, 0u64);
            for line in patch.as_deref().unwrap_or("").lines() {
                if line.starts_with('+') {
                    additions += 1;
                } else if line.starts_with('-') {
                    deletions += 1;
                }
            }
            if given >= patch_lines {
                (patch, additions, deletions) = (None, 0, 0);
            }
            given += patch.as_deref().map_or(0, |p| p.lines().count());
            let blob_at = if kind == "removed" { old } else { new };
            let sha = self.git(&["rev-parse", &format!("{blob_at}:{path}")]);
            let mut file = json!({
                "sha": sha,
                "filename": path,
                "status": kind,
                "additions": additions,
                "deletions": deletions,
                "changes": additions + deletions,
                "blob_url": format!("https://github.example/blob/{new}/{path}"),
                "raw_url": format!("https://github.example/raw/{new}/{path}"),
                "contents_url": format!("https://api.github.example/contents/{path}?ref={new}"),
            });
            if let Some(patch) = patch {
                file["patch"] = json!(patch);
            }
            if let Some(before) = before {
                file["previous_filename"] = json!(before);
            }
            files.push(file);
        }
        files.sort_by(|a, b| a["filename"].as_str().cmp(&b["filename"].as_str()));
        files
    }

    /// Whether `merge` (a pull request's merge or squash commit) brought
    /// `sha` in: `sha` is `merge`, or `merge` is a merge commit and `sha` is
    /// on its merged-in side (`merge^1..merge`).
    pub(super) fn introduced_by(&self, merge: &str, sha: &str) -> bool {
        let Some(merge) = self.resolve(merge) else {
            return false;
        };
        if merge.eq_ignore_ascii_case(sha) {
            return true;
        }
        if self.resolve(&format!("{merge}^2")).is_none() {
            return false;
        }
        self.git(&["rev-list", &format!("{merge}^1..{merge}")])
            .lines()
            .any(|line| line.eq_ignore_ascii_case(sha))
    }

    pub(super) fn count(&self, range: &str) -> u64 {
        self.git(&["rev-list", "--count", range]).parse().unwrap()
    }
}
