//! The section reader: one TOML table read key by key, so that every
//! message names its key path and no key goes unread.
//!
//! Invariant: a key no reader asked for is never ignored; `finish` reports it
//! as unknown (with a hint when it looks like an inlined secret).

use std::collections::HashSet;

/// One TOML table being read: remembers the key path for messages and which
/// keys were consumed, so leftovers can be reported as unknown.
pub(super) struct Section<'a> {
    path: String,
    table: &'a toml::Table,
    seen: HashSet<&'static str>,
}

impl<'a> Section<'a> {
    pub(super) fn new(path: impl Into<String>, table: &'a toml::Table) -> Self {
        Section {
            path: path.into(),
            table,
            seen: HashSet::new(),
        }
    }

    pub(super) fn key(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// Marks a key as known without reading it (a reader that checks the
    /// key's presence itself).
    pub(super) fn mark_known(&mut self, key: &'static str) {
        self.seen.insert(key);
    }

    pub(super) fn get(&mut self, key: &'static str) -> Option<&'a toml::Value> {
        self.seen.insert(key);
        self.table.get(key)
    }

    pub(super) fn string(&mut self, key: &'static str, errors: &mut Vec<String>) -> Option<String> {
        match self.get(key)? {
            toml::Value::String(s) if looks_like_inline_secret(s) => {
                errors.push(format!(
                    "{}: looks like a secret; secrets are never written in the config, reference them (an environment variable name, a file, or Key Vault)",
                    self.key(key)
                ));
                None
            }
            toml::Value::String(s) => Some(s.clone()),
            other => {
                errors.push(format!(
                    "{}: expected a string, got {}",
                    self.key(key),
                    other.type_str()
                ));
                None
            }
        }
    }

    pub(super) fn required_string(
        &mut self,
        key: &'static str,
        errors: &mut Vec<String>,
    ) -> Option<String> {
        if !self.table.contains_key(key) {
            self.seen.insert(key);
            errors.push(format!("{}: required key is missing", self.key(key)));
            return None;
        }
        self.string(key, errors)
    }

    pub(super) fn bool(
        &mut self,
        key: &'static str,
        default: bool,
        errors: &mut Vec<String>,
    ) -> bool {
        match self.get(key) {
            None => default,
            Some(toml::Value::Boolean(b)) => *b,
            Some(other) => {
                errors.push(format!(
                    "{}: expected true or false, got {}",
                    self.key(key),
                    other.type_str()
                ));
                default
            }
        }
    }

    /// An integer within `range` (inclusive), or `default` when absent.
    pub(super) fn int(
        &mut self,
        key: &'static str,
        default: i64,
        range: (i64, i64),
        errors: &mut Vec<String>,
    ) -> i64 {
        match self.get(key) {
            None => default,
            Some(toml::Value::Integer(n)) if (range.0..=range.1).contains(n) => *n,
            Some(toml::Value::Integer(n)) => {
                errors.push(format!(
                    "{}: expected a number from {} to {}, got {n}",
                    self.key(key),
                    range.0,
                    range.1
                ));
                default
            }
            Some(other) => {
                errors.push(format!(
                    "{}: expected an integer, got {}",
                    self.key(key),
                    other.type_str()
                ));
                default
            }
        }
    }

    /// An array of TCP port numbers (1-65535).
    pub(super) fn ports(&mut self, key: &'static str, errors: &mut Vec<String>) -> Vec<u16> {
        match self.get(key) {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| match item {
                    toml::Value::Integer(n) if (1..=65_535).contains(n) => Some(*n as u16),
                    other => {
                        errors.push(format!(
                            "{}[{i}]: expected a TCP port from 1 to 65535, got {other:?}",
                            self.key(key)
                        ));
                        None
                    }
                })
                .collect(),
            Some(other) => {
                errors.push(format!(
                    "{}: expected an array of port numbers, got {}",
                    self.key(key),
                    other.type_str()
                ));
                Vec::new()
            }
        }
    }

    pub(super) fn strings(&mut self, key: &'static str, errors: &mut Vec<String>) -> Vec<String> {
        match self.get(key) {
            None => Vec::new(),
            Some(toml::Value::Array(items)) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match item {
                        toml::Value::String(s) => out.push(s.clone()),
                        other => errors.push(format!(
                            "{}[{i}]: expected a string, got {}",
                            self.key(key),
                            other.type_str()
                        )),
                    }
                }
                out
            }
            Some(other) => {
                errors.push(format!(
                    "{}: expected an array of strings, got {}",
                    self.key(key),
                    other.type_str()
                ));
                Vec::new()
            }
        }
    }

    pub(super) fn table(
        &mut self,
        key: &'static str,
        errors: &mut Vec<String>,
    ) -> Option<&'a toml::Table> {
        match self.get(key)? {
            toml::Value::Table(t) => Some(t),
            other => {
                errors.push(format!(
                    "{}: expected a table, got {}",
                    self.key(key),
                    other.type_str()
                ));
                None
            }
        }
    }

    /// Reports every key that no reader asked for.
    pub(super) fn finish(self, errors: &mut Vec<String>) {
        for key in self.table.keys() {
            if !self.seen.contains(key.as_str()) {
                let hint = if is_secret_key(key) {
                    "; secrets are never written in the config (use an `*_env` key naming an environment variable)"
                } else {
                    ""
                };
                errors.push(format!("{}: unknown key{hint}", self.key(key)));
            }
        }
    }
}

fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["secret", "token", "password", "api_key", "apikey"]
        .iter()
        .any(|s| k.contains(s))
        && !k.ends_with("_env")
        && !k.ends_with("_uri")
}

fn looks_like_inline_secret(value: &str) -> bool {
    value.contains("-----BEGIN")
        || value.starts_with("ghp_")
        || value.starts_with("ghs_")
        || value.starts_with("github_pat_")
        || value.starts_with("tmm_")
}
