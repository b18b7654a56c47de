//! Test helpers: a manifest's dependencies as tuples to compare against
//! (test builds only).
//!
//! Invariant: every helper reads through the public [`parse`].

use super::{Kind, parse};

pub(super) fn deps(path: &str, text: &str) -> Vec<(String, String, Kind, u32)> {
    parse(path, text)
        .unwrap()
        .dependencies
        .into_iter()
        .map(|d| (d.name, d.requirement, d.kind, d.line))
        .collect()
}

pub(super) fn d(name: &str, req: &str, kind: Kind, line: u32) -> (String, String, Kind, u32) {
    (name.into(), req.into(), kind, line)
}

/// Every field of every dependency: name, requirement, kind, line,
/// optional, target, group.
pub(super) type Full = (
    String,
    String,
    Kind,
    u32,
    bool,
    Option<String>,
    Option<String>,
);

pub(super) fn full(path: &str, text: &str) -> Vec<Full> {
    parse(path, text)
        .unwrap()
        .dependencies
        .into_iter()
        .map(|d| {
            (
                d.name,
                d.requirement,
                d.kind,
                d.line,
                d.optional,
                d.target,
                d.group,
            )
        })
        .collect()
}

pub(super) fn f(
    name: &str,
    req: &str,
    kind: Kind,
    line: u32,
    optional: bool,
    target: Option<&str>,
    group: Option<&str>,
) -> Full {
    (
        name.into(),
        req.into(),
        kind,
        line,
        optional,
        target.map(Into::into),
        group.map(Into::into),
    )
}
