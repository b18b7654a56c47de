-- 0003_cluster_keys (PostgreSQL only): keys every node of a deployment must
-- share. Today one: 'session', the 32 bytes that sign dashboard session
-- cookies, so that a login on one node is valid on all. The first node to
-- start stores its key (INSERT ... ON CONFLICT DO NOTHING); every node then
-- reads the stored one. A single SQLite node keeps its key in
-- data_dir/session.key instead.
--
-- The value is a secret: whoever reads this table can forge dashboard
-- sessions. Grant it only to the role the nodes connect as.

CREATE TABLE cluster_keys (
    name       TEXT   PRIMARY KEY,
    value      BYTEA  NOT NULL,
    created_at BIGINT NOT NULL   -- unix milliseconds
);
