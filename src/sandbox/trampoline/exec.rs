//! What the agent is exec'd with, prepared before any fork: `ARGV[0]`'s
//! candidate paths (the PATH search), argv and the environment as C strings.
//!
//! Invariant: the policy variable (`TEAMMEM_SANDBOX_POLICY`) is never in the
//! agent's environment; all of it is built before the fork, so the forked
//! child only reads it.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

use crate::sandbox::POLICY_ENV;

/// `ARGV[0]`'s candidate paths (a PATH search done before the fork),
/// argv and the environment without the policy, as C strings.
pub(super) struct Exec {
    pub(super) name: String,
    pub(super) candidates: Vec<CString>,
    _argv: Vec<CString>,
    pub(super) argv_ptrs: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    pub(super) envp_ptrs: Vec<*const libc::c_char>,
}

impl Exec {
    pub(super) fn prepare(argv: &[OsString]) -> Result<Exec, String> {
        let cstring = |bytes: &[u8]| {
            CString::new(bytes)
                .map_err(|_| "an argument or environment variable contains a NUL byte".to_owned())
        };
        let program = argv[0].as_bytes();
        let name = argv[0].to_string_lossy().into_owned();
        let mut candidates = Vec::new();
        if program.contains(&b'/') {
            candidates.push(cstring(program)?);
        } else {
            let path = std::env::var_os("PATH")
                .unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
            for dir in path.as_bytes().split(|b| *b == b':') {
                let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
                let mut full = dir.to_vec();
                full.push(b'/');
                full.extend_from_slice(program);
                candidates.push(cstring(&full)?);
            }
        }
        let argv_c = argv
            .iter()
            .map(|a| cstring(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        let envp_c = std::env::vars_os()
            .filter(|(k, _)| k != POLICY_ENV)
            .map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                cstring(&kv)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ptrs = |v: &[CString]| {
            v.iter()
                .map(|c| c.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        Ok(Exec {
            name,
            candidates,
            argv_ptrs: ptrs(&argv_c),
            _argv: argv_c,
            envp_ptrs: ptrs(&envp_c),
            _envp: envp_c,
        })
    }
}
