-- Maintainer API tokens (see src/tokens.rs), the same as
-- migrations/sqlite/0002_api_tokens.sql: a token made on one node
-- authenticates on every node. Only the token's SHA-256 (hex) is stored;
-- `repositories` is a JSON array ([] = all sources); revoking keeps the row.
CREATE TABLE api_tokens (
    name          TEXT PRIMARY KEY,
    token_sha256  TEXT NOT NULL UNIQUE,
    repositories  TEXT NOT NULL DEFAULT '[]',
    created_at    TEXT NOT NULL,
    revoked_at    TEXT
);
