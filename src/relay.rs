//! `teammem mcp --connect SOCKET`: the stdio end of a `command` agent's MCP
//! connection to the writer the runner started for its job.
//!
//! Invariant: the relay holds nothing and reads no configuration; it copies
//! bytes between stdin/stdout and the socket, so the socket (one job, one
//! wiki) is the agent's whole grant. Stdout carries the writer's MCP framing
//! only.

/// `teammem mcp --connect SOCKET`: relays bytes between stdin/stdout and the
/// job's writer listening at `socket`, until either side closes. It holds
/// nothing: the socket is the agent's whole grant (one job, one wiki).
pub async fn relay(socket: &std::path::Path) -> Result<(), String> {
    let stream = tokio::net::UnixStream::connect(socket).await.map_err(|e| {
        format!(
            "cannot reach the job's wiki writer at {}: {e}; the job has ended or the path is not the one the job's MCP configuration names",
            socket.display()
        )
    })?;
    let (mut from_writer, mut to_writer) = stream.into_split();
    // Stdin's end reaches the writer as end of input; the session is over
    // when the writer closes its side (it answered everything, or the job
    // ended), whatever stdin is still doing.
    let upstream = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut to_writer).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut to_writer).await;
    });
    let mut stdout = tokio::io::stdout();
    let copied = tokio::io::copy(&mut from_writer, &mut stdout).await;
    let _ = tokio::io::AsyncWriteExt::flush(&mut stdout).await;
    upstream.abort();
    copied
        .map(|_| ())
        .map_err(|e| format!("relaying to the job's wiki writer failed: {e}"))
}
