//! The difference between two versions of one manifest: dependencies
//! added, removed and changed, by (name, kind).
//!
//! Invariant: the changes come sorted by name then kind, one per (name,
//! kind), so the same two versions always give the same list.

use std::collections::BTreeMap;

use super::dependency::{Kind, Manifest};

/// How one dependency differs between two versions of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added {
        name: String,
        kind: Kind,
        requirement: String,
    },
    Removed {
        name: String,
        kind: Kind,
        requirement: String,
    },
    Changed {
        name: String,
        kind: Kind,
        old: String,
        new: String,
    },
}

impl Change {
    fn key(&self) -> (&str, Kind) {
        match self {
            Change::Added { name, kind, .. }
            | Change::Removed { name, kind, .. }
            | Change::Changed { name, kind, .. } => (name, *kind),
        }
    }
}

/// What changed from `old` to `new` (either may be absent: the manifest was
/// added or removed), by (name, kind), sorted by name then kind.
pub fn diff(old: Option<&Manifest>, new: Option<&Manifest>) -> Vec<Change> {
    let index = |m: Option<&Manifest>| -> BTreeMap<(String, Kind), String> {
        m.into_iter()
            .flat_map(|m| &m.dependencies)
            .map(|d| ((d.name.clone(), d.kind), d.requirement.clone()))
            .collect()
    };
    let (old, new) = (index(old), index(new));
    let mut out = Vec::new();
    for ((name, kind), requirement) in &new {
        match old.get(&(name.clone(), *kind)) {
            None => out.push(Change::Added {
                name: name.clone(),
                kind: *kind,
                requirement: requirement.clone(),
            }),
            Some(before) if before != requirement => out.push(Change::Changed {
                name: name.clone(),
                kind: *kind,
                old: before.clone(),
                new: requirement.clone(),
            }),
            Some(_) => {}
        }
    }
    for ((name, kind), requirement) in &old {
        if !new.contains_key(&(name.clone(), *kind)) {
            out.push(Change::Removed {
                name: name.clone(),
                kind: *kind,
                requirement: requirement.clone(),
            });
        }
    }
    out.sort_by(|a, b| a.key().cmp(&b.key()));
    out
}

#[cfg(test)]
mod tests {
    use crate::manifests::{Change, Kind, diff, parse};

    #[test]
    fn diff_added_removed_changed() {
        let old = parse(
            "Cargo.toml",
            "[dependencies]\nserde = \"1.0\"\nregex = \"1\"\ntokio = \"1.38\"\n[dev-dependencies]\nx = \"1\"\n",
        )
        .unwrap();
        let new = parse(
            "Cargo.toml",
            "[dependencies]\ntokio = \"1.40\"\nserde = \"1.0\"\nanyhow = \"1\"\nx = \"1\"\n",
        )
        .unwrap();
        let kinds = |c: &Change| c.key().1;
        let changes = diff(Some(&old), Some(&new));
        assert_eq!(
            changes,
            vec![
                Change::Added {
                    name: "anyhow".into(),
                    kind: Kind::Normal,
                    requirement: "1".into()
                },
                Change::Removed {
                    name: "regex".into(),
                    kind: Kind::Normal,
                    requirement: "1".into()
                },
                Change::Changed {
                    name: "tokio".into(),
                    kind: Kind::Normal,
                    old: "1.38".into(),
                    new: "1.40".into()
                },
                Change::Added {
                    name: "x".into(),
                    kind: Kind::Normal,
                    requirement: "1".into()
                },
                Change::Removed {
                    name: "x".into(),
                    kind: Kind::Dev,
                    requirement: "1".into()
                },
            ]
        );
        assert_eq!(kinds(&changes[4]), Kind::Dev);
        assert_eq!(diff(None, Some(&old)).len(), 4);
        assert!(diff(Some(&old), Some(&old)).is_empty());
        assert_eq!(diff(Some(&old), None).len(), 4);
    }
}
