-- Maintainer API tokens (see src/tokens.rs).
-- The token itself is never stored: only its SHA-256 (hex). A token is limited
-- to the source repositories in `repositories` (a JSON array; [] = all sources).
-- Revoking keeps the row (revoked_at set) so names are not silently reused.
CREATE TABLE api_tokens (
    name          TEXT PRIMARY KEY,
    token_sha256  TEXT NOT NULL UNIQUE,
    repositories  TEXT NOT NULL DEFAULT '[]',
    created_at    TEXT NOT NULL,
    revoked_at    TEXT
);
