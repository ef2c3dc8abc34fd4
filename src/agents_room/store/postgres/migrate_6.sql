-- agents-room on PostgreSQL, schema version 6: sqlite/migrate_6.sql's name_ident and sessions.view
-- columns (read it for their meaning), and migrate_5.sql's claim function, the same signature, recording it (from p_idents,
-- as store/paths.py's recorded) and matching it wherever it matched ident: the leases in the way,
-- and the 'renamed' probe of the caller's own lease under another name.
ALTER TABLE leases ADD COLUMN name_ident TEXT COLLATE "C";
CREATE INDEX leases_name_ident ON leases (name_ident);
-- And sessions.view (sqlite/migrate_6.sql says what it is).
ALTER TABLE sessions ADD COLUMN view TEXT;

CREATE OR REPLACE FUNCTION agents_room_lease_claim(
    p_session TEXT, p_cwd TEXT, p_path TEXT, p_ttl DOUBLE PRECISION, p_mode TEXT, p_now DOUBLE PRECISION,
    p_ident TEXT DEFAULT NULL, p_idents TEXT[] DEFAULT NULL,
    OUT o_outcome TEXT, OUT o_now DOUBLE PRECISION, OUT o_cwd TEXT, OUT o_label TEXT,
    OUT o_h_path TEXT, OUT o_h_session TEXT, OUT o_h_label TEXT, OUT o_h_mode TEXT, OUT o_h_token BIGINT,
    OUT o_h_acquired DOUBLE PRECISION, OUT o_h_expires DOUBLE PRECISION, OUT o_in_the_way INTEGER,
    OUT o_mine_mode TEXT, OUT o_token BIGINT, OUT o_acquired DOUBLE PRECISION, OUT o_expires DOUBLE PRECISION
) LANGUAGE plpgsql AS $$
DECLARE
    covering TEXT[];
    mine RECORD;
    h RECORD;
    -- store/paths.py's recorded: the file's name in its folder, when it exists (p_ident is its inode then)
    v_name TEXT := CASE WHEN strpos(p_ident, '/') = 0 AND strpos(p_idents[2], '/') > 0 THEN p_idents[2] END;
    -- with p_ident, the file's own identities (never a folder's above): what the 'renamed' probe looks for
    v_own TEXT := CASE WHEN strpos(p_idents[2], '/') > 0 THEN p_idents[2] END;
BEGIN
    -- The write lock first (with synchronous_commit off for this transaction), then the time.
    PERFORM pg_advisory_xact_lock(7018704367216558081), set_config('synchronous_commit', 'off', true);
    o_now := coalesce(p_now, extract(epoch FROM clock_timestamp())::float8);
    -- The caller: 'unknown' (no live session of that id) or 'cwd' (the path was made absolute
    -- against another cwd than the session's: o_cwd is the right one), nothing changed.
    SELECT s.cwd, s.label INTO o_cwd, o_label FROM sessions s WHERE s.id = p_session AND s.left_at IS NULL;
    IF NOT FOUND THEN
        o_outcome := 'unknown';
        RETURN;
    ELSIF p_cwd IS NOT NULL AND o_cwd <> p_cwd THEN
        o_outcome := 'cwd';
        RETURN;
    END IF;
    -- 'renamed' (nothing changed): the caller holds this path's file under another name (a folder
    -- above it renamed under the lease), which store/leases.py's rules re-key once the name is
    -- found to lead there still (they can look at the file system; this function cannot).
    IF p_ident IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.path = p_path AND l.session_id = p_session AND l.expires_at > o_now)
       -- (its file's own identities only, never a folder's above: on the identity index alone, OFFSET 0
       -- keeping the planner off the session's leases, which may be thousands)
       -- (each column and value its own equality, UNION ALL: an OR of the columns, or a list of the
       -- values, was planned as a scan of every lease while the table had no statistics yet)
       AND EXISTS (SELECT 1 FROM (SELECT l.session_id, l.path, l.expires_at FROM leases l WHERE l.ident = p_ident
                                  UNION ALL
                                  SELECT l.session_id, l.path, l.expires_at FROM leases l WHERE l.ident = v_own
                                  UNION ALL
                                  SELECT l.session_id, l.path, l.expires_at FROM leases l WHERE l.name_ident = p_ident
                                  UNION ALL
                                  SELECT l.session_id, l.path, l.expires_at FROM leases l WHERE l.name_ident = v_own
                                  OFFSET 0) o
                   WHERE o.session_id = p_session AND o.path <> p_path AND o.expires_at > o_now) THEN
        o_outcome := 'renamed';
        RETURN;
    END IF;
    UPDATE sessions SET last_seen = o_now WHERE id = p_session;
    WITH gone AS (
        DELETE FROM leases WHERE expires_at <= o_now RETURNING path, session_id, mode, token, expires_at
    )
    INSERT INTO events (at, session_id, kind, path, payload)
    SELECT o_now, session_id, 'lease_expire', path,
           format('{"mode":%s,"token":%s,"expires_at":%s}', to_json(mode), token, to_json(expires_at))
    FROM gone;
    -- store/coverage.py's covering_paths: the path and every directory above it.
    covering := ARRAY(SELECT left(p_path, i) FROM generate_series(1, length(p_path) - 1) i
                      WHERE substr(p_path, i, 1) = '/') || p_path;
    SELECT l.mode, l.acquired_at INTO mine FROM leases l
    WHERE l.path = p_path AND l.session_id = p_session AND l.expires_at > o_now;
    o_mine_mode := mine.mode;
    -- Only a lease of this very path is re-claimed; the caller's own leases above or beneath
    -- it never stand in its way. A shared claim contends with exclusive holders only.
    SELECT count(*) OVER () AS n, l.path, l.session_id, s.label, l.mode, l.token, l.acquired_at, l.expires_at INTO h
    FROM leases l JOIN sessions s ON s.id = l.session_id
    -- Or of the same file, or a directory above it, under another name: a lease whose recorded
    -- identity, or name in its folder, is one of p_idents (store/leases.py's _by_identity), in the same statement.
    WHERE (l.path = ANY (covering) OR l.ident = ANY (p_idents) OR l.name_ident = ANY (p_idents)) AND l.expires_at > o_now AND l.session_id <> p_session
      AND (p_mode = 'exclusive' OR l.mode = 'exclusive')
    ORDER BY l.mode, l.token LIMIT 1;  -- the first in the way, and (counted before the LIMIT) how many
    o_in_the_way := coalesce(h.n, 0);
    IF right(p_path, 1) = '/' THEN
        -- A directory: the first lease beneath it in the way (a byte-wise range of the path index).
        DECLARE
            b RECORD;
        BEGIN
            SELECT l.path, l.session_id, s.label, l.mode, l.token, l.acquired_at, l.expires_at INTO b
            FROM leases l JOIN sessions s ON s.id = l.session_id
            WHERE l.path COLLATE "C" > p_path AND l.path COLLATE "C" < left(p_path, -1) || '0'
              AND l.expires_at > o_now AND l.session_id <> p_session
              AND (p_mode = 'exclusive' OR l.mode = 'exclusive')
            ORDER BY l.path LIMIT 1;
            IF FOUND THEN
                o_in_the_way := o_in_the_way + 1;
                IF h.path IS NULL OR (b.mode, b.token) < (h.mode, h.token) THEN
                    h := b;
                END IF;
            END IF;
        END;
    END IF;
    IF o_in_the_way > 0 THEN
        o_outcome := 'denied';
        SELECT h.path, h.session_id, h.label, h.mode, h.token, h.acquired_at, h.expires_at
        INTO o_h_path, o_h_session, o_h_label, o_h_mode, o_h_token, o_h_acquired, o_h_expires;
        RETURN;
    END IF;
    UPDATE counters SET value = value + 1 WHERE name = 'lease_token' RETURNING value INTO o_token;
    o_expires := o_now + p_ttl;
    IF mine.mode IS NULL THEN
        INSERT INTO leases (path, session_id, mode, token, ttl_s, acquired_at, expires_at, ident, name_ident)
        VALUES (p_path, p_session, p_mode, o_token, p_ttl, o_now, o_expires, p_ident, v_name);
        o_acquired := o_now;
    ELSE
        -- A lease_claim is the model's own: a lease the edit guard took at an edit is the
        -- model's from here on (at_edit 0), as store/leases.py's claim does. The edit guard's
        -- claims (at_edit 1) run store/leases.py's rules, never this function.
        UPDATE leases SET mode = p_mode, token = o_token, ttl_s = p_ttl, expires_at = o_expires,
                          ident = coalesce(p_ident, ident), name_ident = coalesce(v_name, name_ident), at_edit = 0
        WHERE path = p_path AND session_id = p_session;
        o_acquired := mine.acquired_at;
    END IF;
    INSERT INTO events (at, session_id, kind, path, payload)
    VALUES (o_now, p_session, 'lease_grant', p_path,
            format('{"mode":%s,"token":%s,"expires_at":%s,"previous_mode":%s}',
                   to_json(p_mode), o_token, to_json(o_expires), coalesce(to_json(mine.mode)::text, 'null')));
    o_outcome := 'granted';
END $$;

UPDATE agents_room_meta SET value = '6' WHERE key = 'schema_version';
