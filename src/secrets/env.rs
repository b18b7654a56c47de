//! The daemon's secrets from its environment (dispatch HMAC secrets, and any
//! other variable a `*_env` key names), moved into memory at start-up.
//!
//! Invariant: after [`capture_env`], a captured variable is gone from the
//! process environment (so no child inherits it and `getenv` cannot find it)
//! and its value is overwritten in the initial environment block the kernel
//! shows as `/proc/<pid>/environ`; the value lives on only in a [`Secret`].

use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::OnceLock;

use super::Secret;

static CAPTURED: OnceLock<HashMap<String, Secret>> = OnceLock::new();

unsafe extern "C" {
    /// The C library's environment array (`environ(7)`).
    static mut environ: *mut *mut libc::c_char;
}

/// Moves each named variable that is set into the process-wide store and out
/// of the environment; returns how many were captured. A second call changes
/// nothing (the first store stays).
///
/// # Safety
/// The process must have one thread: the environment is changed in place,
/// and no other thread may read or write it meanwhile (call it from `main`
/// before the async runtime is built).
pub unsafe fn capture_env(names: &[String]) -> usize {
    if CAPTURED.get().is_some() {
        return 0;
    }
    let mut store = HashMap::new();
    for name in names {
        if name.is_empty() || name.contains(['=', '\0']) {
            continue;
        }
        let Some(value) = std::env::var_os(name) else {
            continue;
        };
        store.insert(name.clone(), Secret::new(value.into_encoded_bytes()));
        // SAFETY: single-threaded per this function's contract.
        unsafe {
            overwrite_in_environ(name);
            std::env::remove_var(name);
        }
    }
    let captured = store.len();
    let _ = CAPTURED.set(store);
    captured
}

/// The value of secret variable `name`: from the store when it was
/// captured, else from the live environment (subcommands and tests that
/// capture nothing).
pub fn env_secret(name: &str) -> Option<Secret> {
    if let Some(secret) = CAPTURED.get().and_then(|store| store.get(name)) {
        return Some(secret.clone());
    }
    std::env::var_os(name).map(|v| Secret::new(v.into_encoded_bytes()))
}

/// Zeroes the value bytes of every `name=value` entry `environ` points at.
/// Entries of the initial environment point into the block on the initial
/// stack that `/proc/<pid>/environ` reads; unsetting alone would leave the
/// value there.
///
/// # Safety
/// Single-threaded; `environ` is the C library's valid, NULL-terminated array.
unsafe fn overwrite_in_environ(name: &str) {
    // SAFETY: per the contract, nothing else touches the environment now;
    // each entry is a NUL-terminated string the process owns and may write.
    unsafe {
        let mut entry = environ;
        if entry.is_null() {
            return;
        }
        while !(*entry).is_null() {
            let text = CStr::from_ptr(*entry).to_bytes();
            if text.len() > name.len()
                && text.starts_with(name.as_bytes())
                && text[name.len()] == b'='
            {
                let value = (*entry).add(name.len() + 1);
                std::ptr::write_bytes(value, 0, text.len() - name.len() - 1);
            }
            entry = entry.add(1);
        }
    }
}
