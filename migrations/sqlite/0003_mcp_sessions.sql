-- Handshake-era MCP sessions (Mcp-Session-Id, protocol 2025-11-25), so that a
-- session survives a restart of the daemon: the stored initialize is replayed
-- (src/mcp/sessions.rs). Only what the client declared in its initialize
-- request is kept, never a token: every request is authenticated on its own.
-- Retention removes rows older than a week.
CREATE TABLE mcp_sessions (
    session_id        TEXT    PRIMARY KEY,
    initialize_params TEXT    NOT NULL,   -- JSON: the client's initialize params
    created_at        INTEGER NOT NULL    -- unix milliseconds
);
