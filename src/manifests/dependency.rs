//! What a manifest declares: its [`Ecosystem`], and each [`Dependency`] with
//! its requirement as written, its [`Kind`] and the line it is declared on.
//!
//! Invariant: a dependency's line is the 1-based line its name is declared
//! on in the text read, so an evidence marker can cite it.

/// The package ecosystem a manifest belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ecosystem {
    Cargo,
    Npm,
    Python,
    Go,
}

impl Ecosystem {
    pub fn label(self) -> &'static str {
        match self {
            Ecosystem::Cargo => "Rust, Cargo",
            Ecosystem::Npm => "JavaScript, npm",
            Ecosystem::Python => "Python",
            Ecosystem::Go => "Go modules",
        }
    }
}

/// What a dependency is needed for, where the format says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Normal,
    Dev,
    Build,
    Peer,
    Optional,
    /// A Go requirement marked `// indirect`.
    Indirect,
}

impl Kind {
    /// The word a page shows after the requirement (none for normal ones).
    pub fn label(self) -> Option<&'static str> {
        match self {
            Kind::Normal => None,
            Kind::Dev => Some("dev"),
            Kind::Build => Some("build"),
            Kind::Peer => Some("peer"),
            Kind::Optional => Some("optional"),
            Kind::Indirect => Some("indirect"),
        }
    }
}

/// One declared dependency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    pub name: String,
    /// As written (`^1.2`, `>=2,<3`, `v1.9.0`, `path ../core`); empty = any.
    pub requirement: String,
    pub kind: Kind,
    /// 1-based line of the declaration.
    pub line: u32,
    /// Installed only when a feature, extra or platform asks for it: Cargo's
    /// and Poetry's `optional = true` (a normal dependency's kind is then
    /// [`Kind::Optional`]; a build dependency keeps [`Kind::Build`]), npm's
    /// `optionalDependencies`, PEP 621's `optional-dependencies`.
    pub optional: bool,
    /// The platform a Cargo `[target.X.*]` table limits it to, as written
    /// (`cfg(unix)`, `x86_64-pc-windows-msvc`).
    pub target: Option<String>,
    /// The named group it is declared in: a PEP 735 `[dependency-groups]`
    /// group, a PEP 621 extra, a Poetry group.
    pub group: Option<String>,
}

impl Dependency {
    /// A dependency neither optional, platform-bound nor in a group.
    pub(super) fn plain(name: String, requirement: String, kind: Kind, line: u32) -> Self {
        Dependency {
            name,
            requirement,
            kind,
            line,
            optional: false,
            target: None,
            group: None,
        }
    }
}

/// A manifest's dependencies, in declaration order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub ecosystem: Ecosystem,
    pub dependencies: Vec<Dependency>,
    /// The text was over [`MAX_MANIFEST_BYTES`](super::MAX_MANIFEST_BYTES) or
    /// declared more than [`MAX_ENTRIES`](super::MAX_ENTRIES) dependencies:
    /// the list is a prefix.
    pub cut: bool,
}

pub(super) fn line_no(index: usize) -> u32 {
    u32::try_from(index + 1).unwrap_or(u32::MAX)
}
