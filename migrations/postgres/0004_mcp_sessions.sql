-- 0004_mcp_sessions: handshake-era MCP sessions (Mcp-Session-Id, protocol
-- 2025-11-25), so that a session opened on one node continues on any other:
-- that node replays the stored initialize (src/mcp/sessions.rs). Only what
-- the client declared in its initialize request is kept, never a token:
-- every request is authenticated on its own. The leader's retention removes
-- rows older than a week.

CREATE TABLE mcp_sessions (
    session_id        TEXT   PRIMARY KEY,
    initialize_params TEXT   NOT NULL,   -- JSON: the client's initialize params
    created_at        BIGINT NOT NULL    -- unix milliseconds
);
