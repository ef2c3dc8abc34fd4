-- agents-room on PostgreSQL, schema version 3: migrate_3.sql's traffic tables (read it for
-- their meaning).
CREATE TABLE call_counts (
    window_start BIGINT NOT NULL,
    session_id   TEXT COLLATE "C" NOT NULL,
    tool         TEXT COLLATE "C" NOT NULL,
    outcome      TEXT COLLATE "C" NOT NULL,
    n            BIGINT NOT NULL,
    PRIMARY KEY (window_start, session_id, tool, outcome)
);
CREATE TABLE call_gaps (
    window_start BIGINT NOT NULL,
    session_id   TEXT COLLATE "C" NOT NULL,
    bucket       INTEGER NOT NULL,
    n            BIGINT NOT NULL,
    PRIMARY KEY (window_start, session_id, bucket)
);
UPDATE agents_room_meta SET value = '3' WHERE key = 'schema_version';
