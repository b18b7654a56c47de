-- MCP sessions bound to the principal that opened them (src/mcp/sessions.rs).
-- The old rows held the session id in clear and the client's whole initialize
-- (up to 256 KiB each), and no owner: they are dropped, and their clients open
-- a new session (rmcp answers 404 and they initialize again).
-- A row now holds the SHA-256 of the session id (never the id), the principal
-- ('token:NAME' or 'github:LOGIN'), and of initialize only the protocol version
-- and the client's name and version, each at most 256 bytes. A principal keeps
-- at most limits.mcp_sessions_per_principal rows: storing one more removes its
-- oldest. Retention removes rows older than a week.
DROP TABLE mcp_sessions;
CREATE TABLE mcp_sessions (
    session_sha256   TEXT    PRIMARY KEY,  -- hex SHA-256 of the Mcp-Session-Id
    principal        TEXT    NOT NULL,
    protocol_version TEXT    NOT NULL,
    client_name      TEXT    NOT NULL,
    client_version   TEXT    NOT NULL,
    created_at       INTEGER NOT NULL      -- unix milliseconds
);
CREATE INDEX mcp_sessions_by_principal ON mcp_sessions (principal, created_at);
