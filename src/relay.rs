//! `teammem mcp --capability FILE --connect SOCKET`: the stdio end of a
//! `command` agent's MCP connection to the writer the runner started for its
//! job.
//!
//! Invariant: the relay holds nothing but its own job's capability and reads
//! no configuration; it sends that capability first (the writer answers no
//! connection without it), then copies bytes between stdin/stdout and the
//! socket, so the socket and the capability file (one job, one wiki) are the
//! agent's whole grant. Stdout carries the writer's MCP framing only; the
//! capability is never printed.

use std::path::Path;

use crate::secrets::Secret;
use crate::writer_contract::{CAPABILITY_HEX_LEN, capability_preamble, parse_capability};

/// `teammem mcp --capability FILE --connect SOCKET`: sends the capability in
/// `capability_file`, then relays bytes between stdin/stdout and the job's
/// writer listening at `socket`, until either side closes.
pub async fn relay(socket: &Path, capability_file: &Path) -> Result<(), String> {
    let preamble = capability_preamble(&read_capability(capability_file)?);
    let stream = tokio::net::UnixStream::connect(socket).await.map_err(|e| {
        format!(
            "cannot reach the job's wiki writer at {}: {e}; the job has ended or the path is not the one the job's MCP configuration names",
            socket.display()
        )
    })?;
    let (mut from_writer, mut to_writer) = stream.into_split();
    tokio::io::AsyncWriteExt::write_all(&mut to_writer, preamble.expose())
        .await
        .map_err(|e| format!("relaying to the job's wiki writer failed: {e}"))?;
    drop(preamble);
    // Stdin's end reaches the writer as end of input; the session is over
    // when the writer closes its side (it answered everything, or the job
    // ended), whatever stdin is still doing.
    let upstream = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut to_writer).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut to_writer).await;
    });
    let mut stdout = tokio::io::stdout();
    let relayed = async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // A writer that refuses the connection closes it unanswered (a reset
        // when our first bytes are still unread): say why, not "reset".
        let mut first = vec![0u8; 64 * 1024];
        let n = match from_writer.read(&mut first).await {
            Ok(0) => return Err(unanswered(socket, capability_file)),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Err(unanswered(socket, capability_file));
            }
            Err(e) => return Err(format!("relaying to the job's wiki writer failed: {e}")),
            Ok(n) => n,
        };
        stdout
            .write_all(&first[..n])
            .await
            .and(
                tokio::io::copy(&mut from_writer, &mut stdout)
                    .await
                    .map(|_| ()),
            )
            .map_err(|e| format!("relaying to the job's wiki writer failed: {e}"))
    }
    .await;
    let _ = tokio::io::AsyncWriteExt::flush(&mut stdout).await;
    upstream.abort();
    relayed
}

fn unanswered(socket: &Path, capability_file: &Path) -> String {
    format!(
        "the job's wiki writer at {} closed the connection without answering: it answers no connection without its job's capability ({} holds another's, or was changed), and it is gone once its job ended",
        socket.display(),
        capability_file.display()
    )
}

/// The capability file: opened without following a link (or waiting on a
/// FIFO), a regular file, read bounded, one capability.
fn read_capability(path: &Path) -> Result<Secret, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let cannot = |why: String| {
        format!(
            "cannot use the job's capability file {}: {why}; pass the path the job's MCP configuration names",
            path.display()
        )
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| cannot(e.to_string()))?;
    let is_file = file
        .metadata()
        .map_err(|e| cannot(e.to_string()))?
        .is_file();
    if !is_file {
        return Err(cannot("it is not a regular file".into()));
    }
    let mut text = Vec::new();
    let read = file
        .take(CAPABILITY_HEX_LEN as u64 + 2)
        .read_to_end(&mut text)
        .map_err(|e| cannot(e.to_string()))
        .and_then(|_| parse_capability(&text).map_err(cannot));
    zeroize::Zeroize::zeroize(&mut text);
    read
}
