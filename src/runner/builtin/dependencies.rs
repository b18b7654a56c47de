//! `Dependencies.md` and what an entry says about dependencies: the page's
//! section (the dependencies the manifests at the job's tip declare, each
//! citing its declaring line), each pull request's dependency changes as a
//! bounded note, and the plan of the page.
//!
//! Invariants: the section is re-derived whole between its two anchors, and
//! only when the agent read the tip's manifests; every line of it carries a
//! teammem marker and each dependency line cites its declaring line at the
//! tip; a section a person edited is left alone; an entry names at most
//! [`CHANGES_PER_ENTRY`] dependency changes; names and requirements from a
//! manifest are escaped like any untrusted text.

use std::collections::BTreeMap;

use super::inputs::{CurrentPage, DependencyFacts, TipManifests};
use super::markdown::{code_or_text, escape_markdown, escape_purpose};
use super::markers::{DEPENDENCIES, DEPENDENCIES_ANCHOR, DEPENDENCIES_END, MANIFEST_MARKER};
use super::plan::{NewPage, Plan, PlannedPatch, Replacement};
use super::sections::{SECTION_FRAME, Section, span_between};
use crate::facts::{Lines, Marker};
use crate::forge::evidence::PullRequest;

/// The section holds at most this many bytes (the page stays within its budget).
pub const DEPENDENCIES_BYTES: usize = 48 * 1024;
/// How many dependency changes an entry names before "and N more".
pub const CHANGES_PER_ENTRY: usize = 10;

/// The most manifests one job reads for the Dependencies page.
pub const MAX_MANIFESTS: usize = 20;

fn requirement_text(requirement: &str) -> String {
    if requirement.is_empty() {
        "any version".to_owned()
    } else {
        escape_purpose(requirement)
    }
}

fn kind_prefix(kind: crate::manifests::Kind) -> String {
    kind.label().map(|k| format!("{k} ")).unwrap_or_default()
}

/// ` (dev; optional; target `cfg(unix)`; group docs)`: what a page says after
/// a dependency's requirement — its kind, whether it is optional, the
/// platform a Cargo `[target.X.*]` table limits it to and the group (PEP 735
/// group, PEP 621 extra, Poetry group) it is declared in; empty for a plain
/// one. The target and group are manifest text, so escaped.
fn qualifiers(dep: &crate::manifests::Dependency) -> String {
    use crate::manifests::Kind;
    let mut parts: Vec<String> = dep.kind.label().map(str::to_owned).into_iter().collect();
    if dep.optional && dep.kind != Kind::Optional {
        parts.push("optional".into());
    }
    if let Some(target) = &dep.target {
        parts.push(format!("target {}", code_or_text(target)));
    }
    if let Some(group) = &dep.group {
        parts.push(format!("group {}", escape_purpose(group)));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

/// ` — dependencies: + a 1; − b; dev c 1 → 2 (Cargo.toml)`: a PR's
/// dependency changes in the manifests among `paths` (all when `None`),
/// at most [`CHANGES_PER_ENTRY`]; empty when there are none.
pub fn dependency_note(
    deps: &DependencyFacts,
    pull: &PullRequest,
    paths: Option<&[&str]>,
) -> String {
    use crate::manifests::Change;
    let Some(changed) = deps.changes.get(&pull.merge_sha.to_ascii_lowercase()) else {
        return String::new();
    };
    let mut groups = Vec::new();
    let mut shown = 0;
    let mut total = 0;
    for (path, changes) in changed {
        if paths.is_some_and(|p| !p.contains(&path.as_str())) || changes.is_empty() {
            continue;
        }
        total += changes.len();
        let mut items = Vec::new();
        for change in changes {
            if shown == CHANGES_PER_ENTRY {
                break;
            }
            shown += 1;
            items.push(match change {
                Change::Added {
                    name,
                    kind,
                    requirement,
                } => format!(
                    "+ {}{} {}",
                    kind_prefix(*kind),
                    escape_purpose(name),
                    requirement_text(requirement)
                ),
                Change::Removed { name, kind, .. } => {
                    format!("− {}{}", kind_prefix(*kind), escape_purpose(name))
                }
                Change::Changed {
                    name,
                    kind,
                    old,
                    new,
                } => format!(
                    "{}{} {} → {}",
                    kind_prefix(*kind),
                    escape_purpose(name),
                    requirement_text(old),
                    requirement_text(new)
                ),
            });
        }
        if !items.is_empty() {
            groups.push(format!("{} ({})", items.join("; "), escape_markdown(path)));
        }
    }
    if groups.is_empty() {
        return String::new();
    }
    let more = if total > shown {
        format!("; and {} more", total - shown)
    } else {
        String::new()
    };
    format!(" — dependencies: {}{more}", groups.join("; "))
}

/// The Dependencies page's section: a summary line ending with
/// [`DEPENDENCIES_ANCHOR`], per manifest a heading and one line per
/// dependency citing its declaring line at the tip, while they fit in `cap`
/// bytes, and [`DEPENDENCIES_END`]. Every line carries a teammem marker.
pub fn dependencies_section(tip: &TipManifests, cap: usize) -> String {
    let mut body = String::new();
    let mut left_out = 0;
    for (path, manifest) in &tip.manifests {
        let cut = if manifest.cut {
            format!(
                " — only its first {} KiB or {} entries are read",
                crate::manifests::MAX_MANIFEST_BYTES / 1024,
                crate::manifests::MAX_ENTRIES
            )
        } else {
            String::new()
        };
        let heading = format!(
            "### {} ({}){cut} {MANIFEST_MARKER}\n",
            escape_markdown(path),
            manifest.ecosystem.label()
        );
        if SECTION_FRAME + body.len() + heading.len() > cap {
            left_out += manifest.dependencies.len();
            continue;
        }
        body.push_str(&heading);
        if manifest.dependencies.is_empty() {
            body.push_str(&format!("- no dependencies declared {MANIFEST_MARKER}\n"));
        }
        for dep in &manifest.dependencies {
            let Ok(lines) = Lines::new(dep.line, dep.line) else {
                continue;
            };
            let line = format!(
                "- {} — {}{} {}\n",
                escape_purpose(&dep.name),
                requirement_text(&dep.requirement),
                qualifiers(dep),
                Marker::source(path, tip.commit.clone(), lines)
            );
            if SECTION_FRAME + body.len() + line.len() > cap {
                left_out += 1;
                continue;
            }
            body.push_str(&line);
        }
    }
    let mut summary = if tip.manifests.is_empty() {
        format!(
            "No manifests (Cargo.toml, package.json, pyproject.toml, go.mod, requirements*.txt) at the repository root or in its top-level folders at commit `{}` (kept by teammem).",
            tip.commit
        )
    } else {
        format!(
            "The dependencies the manifests declare at commit `{}`, each with the line that declares it (kept by teammem).",
            tip.commit
        )
    };
    if tip.omitted > 0 {
        summary.push_str(&format!(
            " {} more manifests are not read (at most {MAX_MANIFESTS} are).",
            tip.omitted
        ));
    }
    if left_out > 0 {
        summary.push_str(&format!(
            " {left_out} more dependencies are not listed (the list holds at most {} KiB).",
            cap / 1024
        ));
    }
    format!("{summary} {DEPENDENCIES_ANCHOR}\n{body}{DEPENDENCIES_END}\n")
}

/// Plans `Dependencies.md` from `deps.tip` (written whole when new, its
/// section swapped when intact and different, left alone when a person
/// edited it); true when the page exists or will.
pub fn plan_dependencies(
    out: &mut Plan,
    pages: &BTreeMap<String, CurrentPage>,
    deps: &DependencyFacts,
) -> bool {
    let current = pages.get(DEPENDENCIES);
    let Some(tip) = &deps.tip else {
        return current.is_some();
    };
    let section = dependencies_section(tip, DEPENDENCIES_BYTES);
    match current {
        None if tip.manifests.is_empty() => false,
        None => {
            out.writes.push(NewPage {
                path: DEPENDENCIES.into(),
                content: format!("# Dependencies\n\n{section}"),
            });
            true
        }
        Some(page) => {
            let replacement =
                match span_between(&page.content, DEPENDENCIES_ANCHOR, DEPENDENCIES_END) {
                    Section::At(old) if page.content[old.clone()] != section => Some(Replacement {
                        old: page.content[old].to_owned(),
                        new: section,
                    }),
                    Section::Edited => {
                        out.notes
                            .push(super::sections::edited_note("Dependencies", DEPENDENCIES));
                        None
                    }
                    Section::Absent => {
                        let sep = if page.content.is_empty() || page.content.ends_with('\n') {
                            ""
                        } else {
                            "\n"
                        };
                        Some(Replacement {
                            old: String::new(),
                            new: format!("{sep}\n{section}"),
                        })
                    }
                    _ => None,
                };
            if let Some(r) = replacement {
                out.patches.insert(
                    DEPENDENCIES.into(),
                    PlannedPatch {
                        expected_sha: page.sha.clone(),
                        replacements: vec![r],
                    },
                );
            }
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Sha;
    use crate::runner::builtin::inputs::Listings;
    use crate::runner::builtin::markers::*;
    use crate::runner::builtin::planner::{apply, plan_full};
    use crate::runner::builtin::samples::*;

    fn tip_manifests(text: &str) -> TipManifests {
        TipManifests {
            commit: tip(),
            manifests: vec![(
                "Cargo.toml".into(),
                crate::manifests::parse("Cargo.toml", text).unwrap(),
            )],
            omitted: 0,
        }
    }

    #[test]
    fn dependencies_page_cites_lines_notes_changes_and_replays_to_nothing() {
        let old = crate::manifests::parse(
            "Cargo.toml",
            "[dependencies]\ntokio = \"1.38\"\nregex = \"1\"\n",
        );
        let new_text = "[dependencies]\ntokio = \"1.40\"\nserde = \"1.0\"\n[dev-dependencies]\n\"<b>evil\" = \"-->\"\n";
        let new = crate::manifests::parse("Cargo.toml", new_text);
        let b = bundle(vec![pull(7, "Bump", 'a', &["Cargo.toml"])]);
        let deps = DependencyFacts {
            tip: Some(tip_manifests(new_text)),
            changes: [(
                "a".repeat(40),
                vec![(
                    "Cargo.toml".to_owned(),
                    crate::manifests::diff(old.as_ref(), new.as_ref()),
                )],
            )]
            .into(),
        };
        let p = plan_full(&b, &home(), &Listings::new(), &deps);
        let pages = apply(&home(), &p);
        let page = &pages[DEPENDENCIES];
        assert!(page.starts_with("# Dependencies\n\n"), "{page}");
        assert!(
            page.contains(&format!(
                "- tokio — 1.40 <!-- teammem:evidence Cargo.toml@{}#L2 -->",
                "f".repeat(40)
            )),
            "{page}"
        );
        assert!(
            page.contains("(dev) <!-- teammem:evidence Cargo.toml@"),
            "{page}"
        );
        assert!(!page.contains("<b>"), "{page}");
        let facts = source_facts(page);
        assert_eq!(facts.len(), 3, "{page}");
        let (_, html) = rendered_items(page);
        assert!(
            html.iter().all(|h| h.starts_with("<!-- teammem:")),
            "{html:?}"
        );
        assert!(pages[HOME].contains("[Dependencies](Dependencies)"));
        let entry = " — dependencies: + dev &lt;b>evil --&gt;; − regex; + serde 1.0; tokio 1.38 → 1.40 (Cargo.toml) — ";
        assert!(pages[CHANGELOG].contains(entry), "{}", pages[CHANGELOG]);
        assert!(pages["Area-root.md"].contains(entry));
        // Replaying plans nothing.
        assert!(plan_full(&b, &as_current(pages.clone()), &Listings::new(), &deps).is_empty());
        // A later tip swaps the section; a page a person edited is left alone.
        let mut later = deps.clone();
        later.tip.as_mut().unwrap().commit = Sha::parse(&"9".repeat(40)).unwrap();
        let current = as_current(pages);
        let p = plan_full(
            &bundle(vec![pull(8, "X", 'b', &["Cargo.toml"])]),
            &current,
            &Listings::new(),
            &later,
        );
        let after = apply(&current, &p);
        assert!(after[DEPENDENCIES].contains(&format!("Cargo.toml@{}#L2", "9".repeat(40))));
        assert!(!after[DEPENDENCIES].contains(&"f".repeat(40)));
        let mut edited = as_current(after);
        let page = edited.get_mut(DEPENDENCIES).unwrap();
        page.content = page.content.replace("- serde", "My note\n- serde");
        let p = plan_full(
            &bundle(vec![pull(9, "Y", 'c', &["Cargo.toml"])]),
            &edited,
            &Listings::new(),
            &deps,
        );
        assert!(!p.patches.contains_key(DEPENDENCIES));
        assert!(!p.writes.iter().any(|w| w.path == DEPENDENCIES));
    }

    #[test]
    fn the_page_says_which_dependencies_are_optional_platform_bound_or_grouped() {
        let cargo = "[dependencies]\nserde = \"1\"\nrayon = { version = \"1.10\", optional = true }\n\
[build-dependencies]\ncc = { version = \"1\", optional = true }\n\
[target.'cfg(unix)'.dependencies]\nlibc = \"0.2\"\n\
[target.\"cfg(windows)\".dev-dependencies]\nwinapi = { version = \"0.3\", optional = true }\n";
        let pyproject = "[project]\nname = \"api\"\ndependencies = [\"flask>=3\"]\n\
[project.optional-dependencies]\ndocs = [\"sphinx\"]\n\
[dependency-groups]\ntest = [\"pytest>=8\", {include-group = \"lint\"}]\nlint = [\"ruff\"]\n";
        let tip_manifests = TipManifests {
            commit: tip(),
            manifests: vec![
                (
                    "Cargo.toml".into(),
                    crate::manifests::parse("Cargo.toml", cargo).unwrap(),
                ),
                (
                    "pyproject.toml".into(),
                    crate::manifests::parse("pyproject.toml", pyproject).unwrap(),
                ),
            ],
            omitted: 0,
        };
        let section = dependencies_section(&tip_manifests, DEPENDENCIES_BYTES);
        // (name, what the line says between the name and the marker, line)
        let table = [
            ("serde", "1", "Cargo.toml", 2),
            ("rayon", "1.10 (optional)", "Cargo.toml", 3),
            ("cc", "1 (build; optional)", "Cargo.toml", 5),
            ("libc", "0.2 (target `cfg(unix)`)", "Cargo.toml", 7),
            (
                "winapi",
                "0.3 (dev; optional; target `cfg(windows)`)",
                "Cargo.toml",
                9,
            ),
            ("flask", ">=3", "pyproject.toml", 3),
            (
                "sphinx",
                "any version (optional; group docs)",
                "pyproject.toml",
                5,
            ),
            ("pytest", ">=8 (dev; group test)", "pyproject.toml", 7),
            ("ruff", "any version (dev; group lint)", "pyproject.toml", 8),
        ];
        for (name, says, path, line) in table {
            let want = format!(
                "- {name} — {says} <!-- teammem:evidence {path}@{}#L{line} -->\n",
                "f".repeat(40)
            );
            assert!(section.contains(&want), "{want}\nnot in\n{section}");
        }
        // An included group is not a dependency.
        assert!(!section.contains("- lint"), "{section}");
        assert_eq!(section.matches("\n- ").count(), table.len(), "{section}");

        // The page the builtin writes says the same.
        let deps = DependencyFacts {
            tip: Some(tip_manifests),
            changes: BTreeMap::new(),
        };
        let b = bundle(vec![pull(7, "Add groups", 'a', &["pyproject.toml"])]);
        let pages = apply(&home(), &plan_full(&b, &home(), &Listings::new(), &deps));
        let page = &pages[DEPENDENCIES];
        assert!(page.contains(&section), "{page}");
        assert_eq!(source_facts(page).len(), table.len(), "{page}");
    }

    #[test]
    fn a_dependency_note_is_bounded() {
        let many: String = (0..15).map(|i| format!("p{i:02}==1\n")).collect();
        let new = crate::manifests::parse("requirements.txt", &many);
        let deps = DependencyFacts {
            tip: None,
            changes: [(
                "a".repeat(40),
                vec![(
                    "requirements.txt".to_owned(),
                    crate::manifests::diff(None, new.as_ref()),
                )],
            )]
            .into(),
        };
        let p = pull(1, "Many", 'a', &["requirements.txt"]);
        let note = dependency_note(&deps, &p, None);
        assert_eq!(note.matches("+ p").count(), CHANGES_PER_ENTRY, "{note}");
        assert!(note.ends_with("(requirements.txt); and 5 more"), "{note}");
        assert!(dependency_note(&deps, &p, Some(&["other.txt"])).is_empty());
        // No tip manifests and no page: no Dependencies page.
        let b = bundle(vec![p]);
        let pages = apply(&home(), &plan_full(&b, &home(), &Listings::new(), &deps));
        assert!(!pages.contains_key(DEPENDENCIES));
        assert!(!pages[HOME].contains("Dependencies"));
    }
}
