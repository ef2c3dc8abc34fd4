-- agents-room schema version 2: liveness across hosts (store/hosts.py).
--   sessions.host     the host id of the session's server (AGENTS_ROOM_HOST_ID, else the machine id);
--                     sessions of an older store get the migrating host's id (opening.py): a
--                     SQLite file was one machine's before hosts were recorded.
--   sessions.gone_at  when a check on the session's own host proved its agent gone (its /proc
--                     is the only one that can); other hosts then say gone instead of unknown.
ALTER TABLE sessions ADD COLUMN host TEXT;
ALTER TABLE sessions ADD COLUMN gone_at REAL;
