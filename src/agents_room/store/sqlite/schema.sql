-- agents-room: the whole data model (schema version 1).
--
-- Portable SQL only: no pragmas here (they live in opening.py). Times are Unix seconds
-- (REAL) from the store's injectable clock. Lists are JSON text.

-- One agent process. A row is never deleted: leaving or pruning sets left_at and
-- keeps the row as a tombstone, so a stale id gets "session X left at T", not silence.
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,          -- 16 lowercase hex, random
    harness     TEXT NOT NULL,             -- claude-code, codex, cursor, sim, unknown
    harness_key TEXT,                      -- the harness's UUID, lowercase; NULL if none
    cwd         TEXT NOT NULL,             -- anchor for relative paths and file: selectors
    pid         INTEGER,                   -- the harness process; NULL = liveness unknown
    label       TEXT,
    tags        TEXT NOT NULL DEFAULT '[]',
    autonomy    TEXT NOT NULL CHECK (autonomy IN ('hold', 'notify', 'wake')),
    wake_lever  TEXT,                      -- how this session can be woken; NULL = none
    created_at  REAL NOT NULL,
    last_seen   REAL NOT NULL,
    left_at     REAL
);
CREATE INDEX sessions_harness_key ON sessions (harness_key) WHERE harness_key IS NOT NULL;
CREATE INDEX sessions_label ON sessions (label) WHERE label IS NOT NULL;

-- Columns in key order: SQLite 3.40's quick_check misreports NULLs in an all-key
-- WITHOUT ROWID table whose columns are declared in another order.
CREATE TABLE session_tags (
    tag        TEXT NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    PRIMARY KEY (tag, session_id)
) WITHOUT ROWID;

-- Room membership; a room exists while it has members or a cap.
CREATE TABLE memberships (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    room       TEXT NOT NULL,
    joined_at  REAL NOT NULL,
    PRIMARY KEY (session_id, room)
) WITHOUT ROWID;
CREATE INDEX memberships_room ON memberships (room, session_id);

-- The operator's autonomy cap per room (room_set_autonomy_cap). No row = no cap.
CREATE TABLE room_caps (
    room     TEXT PRIMARY KEY,
    autonomy TEXT NOT NULL CHECK (autonomy IN ('hold', 'notify', 'wake'))
) WITHOUT ROWID;

CREATE TABLE messages (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,  -- increasing, never reused
    sender     TEXT NOT NULL REFERENCES sessions (id),
    selector   TEXT NOT NULL,
    subject    TEXT NOT NULL DEFAULT '',
    body       TEXT NOT NULL DEFAULT '',
    reply_to   INTEGER REFERENCES messages (id),
    created_at REAL NOT NULL,
    expires_at REAL                                -- NULL = never expires
);
CREATE INDEX messages_sender ON messages (sender, id);

-- One row per room the sender was in at send time: what makes room_history complete.
CREATE TABLE message_rooms (
    room       TEXT NOT NULL,
    message_id INTEGER NOT NULL REFERENCES messages (id),
    PRIMARY KEY (room, message_id)
) WITHOUT ROWID;

-- One row per resolved recipient. state only moves forward (see delivery_transitions).
CREATE TABLE deliveries (
    recipient  TEXT NOT NULL REFERENCES sessions (id),
    message_id INTEGER NOT NULL REFERENCES messages (id),
    state      TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    offered_at REAL,                       -- last wake signal, for the retry window
    announced  INTEGER NOT NULL DEFAULT 0, -- told to the session by a hook already
    PRIMARY KEY (recipient, message_id)
) WITHOUT ROWID;
CREATE INDEX deliveries_message ON deliveries (message_id);
CREATE INDEX deliveries_pending ON deliveries (state, recipient);

-- The delivery state machine as data. A trigger refuses every other transition,
-- so no code path (or hand-written UPDATE) can move a delivery backward.
CREATE TABLE delivery_transitions (
    from_state TEXT NOT NULL,
    to_state   TEXT NOT NULL,
    PRIMARY KEY (from_state, to_state)
) WITHOUT ROWID;
INSERT INTO delivery_transitions (from_state, to_state) VALUES
    ('stored', 'offered'), ('stored', 'undeliverable'), ('stored', 'read'), ('stored', 'expired'),
    ('offered', 'accepted'), ('offered', 'read'), ('offered', 'expired'),
    ('accepted', 'read'), ('accepted', 'expired'),
    ('undeliverable', 'read'), ('undeliverable', 'expired'),
    ('read', 'acked');

CREATE TRIGGER deliveries_forward_only
BEFORE UPDATE OF state ON deliveries
WHEN NEW.state <> OLD.state AND NOT EXISTS (
    SELECT 1 FROM delivery_transitions WHERE from_state = OLD.state AND to_state = NEW.state)
BEGIN
    SELECT RAISE(ABORT, 'delivery_backward: a delivery state may only move forward');
END;

-- Live leases. Expired rows are swept (with an event each) by every lease write.
CREATE TABLE leases (
    path        TEXT NOT NULL,             -- absolute, normalised
    session_id  TEXT NOT NULL REFERENCES sessions (id),
    mode        TEXT NOT NULL CHECK (mode IN ('exclusive', 'shared')),
    token       INTEGER NOT NULL,          -- fencing token of the latest grant or renewal
    ttl_s       REAL NOT NULL,
    acquired_at REAL NOT NULL,
    expires_at  REAL NOT NULL,
    PRIMARY KEY (path, session_id)
) WITHOUT ROWID;
CREATE INDEX leases_session ON leases (session_id);
CREATE INDEX leases_expiry ON leases (expires_at);

-- Store-wide counters (the fencing token).
CREATE TABLE counters (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO counters (name, value) VALUES ('lease_token', 0);

-- The content hash a session last saw for a path (note_read), and the event seq at
-- that moment: drift_check asks the events table what happened to the path since.
CREATE TABLE reads (
    session_id     TEXT NOT NULL REFERENCES sessions (id),
    path           TEXT NOT NULL,
    hash           TEXT NOT NULL,
    read_at        REAL NOT NULL,
    read_seq       INTEGER NOT NULL,
    held_by_other  TEXT,                   -- another session's lease live at read time
    PRIMARY KEY (session_id, path)
) WITHOUT ROWID;

-- Append-only audit, written in the same transaction as every change. SQLite commits
-- one writer at a time, so seq is the true order of everything that happened.
-- kind and payload (JSON):
--   join          {rooms, autonomy, harness_key, rejoin, label, tags, cwd, wake_lever}  (lever: null keeps the old)
--   leave         {rooms, reason}                     ('leave' or 'prune')
--   leave_room    {room, rooms}                      (rooms: those that remain)
--   autonomy      {from, to, reason}                  (rejoin raise, or lowered by a cap)
--   cap           {room, autonomy}
--   send          {message_id, selector, subject, rooms, recipients: {session: state}, ttl_s, expires_at}
--   delivery      {to, items: [[message_id, from_state], ...]}   (session = recipient)
--   wake          {lever, items: [message_id, ...], retry: true}  (an offered delivery signalled again)
--   (the lease and read kinds carry their path in the path column, not in the payload)
--   lease_grant   {mode, token, expires_at, previous_mode}  (previous_mode: re-claim)
--   lease_renew   {mode, token, expires_at}
--   lease_release {mode, token, reason}              ('release', 'leave', 'prune')
--   lease_expire  {mode, token, expires_at}
--   note_read     {hash}
CREATE TABLE events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    at         REAL NOT NULL,
    session_id TEXT,
    kind       TEXT NOT NULL,
    path       TEXT,
    payload    TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_path ON events (path, seq) WHERE path IS NOT NULL;

-- Append-only means append-only: the audit is what the checker trusts.
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events_append_only: the audit table is append-only');
END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events_append_only: the audit table is append-only');
END;
