//! What a command prints on stdout, a line at a time, as a Unix tool would:
//! when the reader has gone (`teammem demo | head`), the process ends
//! quietly with status 141 (128 + SIGPIPE, what a shell shows for a tool
//! killed by SIGPIPE) instead of panicking. The Rust runtime ignores SIGPIPE,
//! which the daemon needs for its sockets and child pipes, so the write's
//! `BrokenPipe` error is where the end is decided.
//!
//! Invariant: no command panics on a closed stdout; other write errors are
//! reported on stderr and end the process with status 1.

use std::io::Write;

/// The exit status of a command whose stdout reader has gone.
pub const BROKEN_PIPE_EXIT: i32 = 128 + 13;

/// Writes one line to stdout (flushed, so a reader sees it at once).
pub fn line(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        let _ = writeln!(std::io::stderr(), "teammem: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// `println!` for commands: see [`line()`].
#[macro_export]
macro_rules! outln {
    () => {
        $crate::stdout::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::stdout::line(format_args!($($arg)*))
    };
}
