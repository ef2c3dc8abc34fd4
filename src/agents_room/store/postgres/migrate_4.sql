-- agents-room on PostgreSQL, schema version 4: lease_claim, lease_release and lease_renew as
-- one server function each, so a write holds the store's one write lock for ONE client round trip
-- (docs/decisions.md, "One round trip in the lock"). They do exactly what store/leases.py's
-- claim, release and renew do (and sessions.resolve's touch), statement for statement, in the same
-- order, with the same events; tests/store/test_pg_lease_functions.py runs both on the same
-- calls and compares answers and events. What is not a rule stays in Python: the path's
-- normal form (against the session's cwd, passed in and checked here), the words of a
-- denial (from the holder these return), every error's explanation (the Python rules are
-- run again for those: an outcome other than granted, denied, released or renewed has changed
-- nothing).
--
-- The lock is the one of database.py's WRITE_LOCK (0x6167726F6F6D0001), taken first, with
-- synchronous_commit off for this transaction (the caller flushes after the COMMIT, outside
-- the lock), then the time (p_now: a fixed clock's, else the server's, read under the lock).

-- PL/pgSQL, not SQL: a PL/pgSQL function's statements keep their plans for the session, a
-- SQL function's are planned at every call. The sweep (store/leases.py's sweep: every expired
-- lease deleted, each with its lease_expire event) is written out in each rather than called:
-- a nested call costs more than the sweep itself when nothing has expired.

-- One claim: 'granted' (o_token etc. the caller's lease; o_mine_mode its earlier mode, NULL
-- for a new lease), 'denied' (o_h_* the holder in the way first by (mode, token), o_in_the_way
-- how many), 'unknown' or 'cwd'.
CREATE FUNCTION agents_room_lease_claim(
    p_session TEXT, p_cwd TEXT, p_path TEXT, p_ttl DOUBLE PRECISION, p_mode TEXT, p_now DOUBLE PRECISION,
    OUT o_outcome TEXT, OUT o_now DOUBLE PRECISION, OUT o_cwd TEXT, OUT o_label TEXT,
    OUT o_h_path TEXT, OUT o_h_session TEXT, OUT o_h_label TEXT, OUT o_h_mode TEXT, OUT o_h_token BIGINT,
    OUT o_h_acquired DOUBLE PRECISION, OUT o_h_expires DOUBLE PRECISION, OUT o_in_the_way INTEGER,
    OUT o_mine_mode TEXT, OUT o_token BIGINT, OUT o_acquired DOUBLE PRECISION, OUT o_expires DOUBLE PRECISION
) LANGUAGE plpgsql AS $$
DECLARE
    covering TEXT[];
    mine RECORD;
    h RECORD;
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
    WHERE l.path = ANY (covering) AND l.expires_at > o_now AND l.session_id <> p_session
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
        INSERT INTO leases (path, session_id, mode, token, ttl_s, acquired_at, expires_at)
        VALUES (p_path, p_session, p_mode, o_token, p_ttl, o_now, o_expires);
        o_acquired := o_now;
    ELSE
        UPDATE leases SET mode = p_mode, token = o_token, ttl_s = p_ttl, expires_at = o_expires
        WHERE path = p_path AND session_id = p_session;
        o_acquired := mine.acquired_at;
    END IF;
    INSERT INTO events (at, session_id, kind, path, payload)
    VALUES (o_now, p_session, 'lease_grant', p_path,
            format('{"mode":%s,"token":%s,"expires_at":%s,"previous_mode":%s}',
                   to_json(p_mode), o_token, to_json(o_expires), coalesce(to_json(mine.mode)::text, 'null')));
    o_outcome := 'granted';
END $$;

-- One release: 'released' (o_mode, o_token what was released), 'not_held' (nothing changed:
-- the caller explains it with the Python rules), 'unknown' or 'cwd'.
CREATE FUNCTION agents_room_lease_release(
    p_session TEXT, p_cwd TEXT, p_path TEXT, p_now DOUBLE PRECISION,
    OUT o_outcome TEXT, OUT o_now DOUBLE PRECISION, OUT o_cwd TEXT, OUT o_label TEXT,
    OUT o_mode TEXT, OUT o_token BIGINT
) LANGUAGE plpgsql AS $$
BEGIN
    -- As a claim's: the lock, the time, the caller.
    PERFORM pg_advisory_xact_lock(7018704367216558081), set_config('synchronous_commit', 'off', true);
    o_now := coalesce(p_now, extract(epoch FROM clock_timestamp())::float8);
    SELECT s.cwd, s.label INTO o_cwd, o_label FROM sessions s WHERE s.id = p_session AND s.left_at IS NULL;
    IF NOT FOUND THEN
        o_outcome := 'unknown';
        RETURN;
    ELSIF p_cwd IS NOT NULL AND o_cwd <> p_cwd THEN
        o_outcome := 'cwd';
        RETURN;
    END IF;
    -- A lease that is not live would be swept first and then not be found: store/leases.py's
    -- release raises then, and its transaction (the touch, the sweep) rolls back.
    IF NOT EXISTS (SELECT 1 FROM leases WHERE path = p_path AND session_id = p_session AND expires_at > o_now) THEN
        o_outcome := 'not_held';
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
    DELETE FROM leases WHERE path = p_path AND session_id = p_session RETURNING mode, token INTO o_mode, o_token;
    IF NOT FOUND THEN  -- never, while the check above and the sweep agree: fail whole, write no event
        RAISE EXCEPTION 'agents_room_lease_release: the lease of % went in the sweep', p_path;
    END IF;
    INSERT INTO events (at, session_id, kind, path, payload)
    VALUES (o_now, p_session, 'lease_release', p_path,
            format('{"mode":%s,"token":%s,"reason":"release"}', to_json(o_mode), o_token));
    o_outcome := 'released';
END $$;

-- One renewal: 'renewed' (o_mode, o_token, o_acquired, o_expires the caller's lease after it;
-- p_ttl NULL keeps the lease's own ttl_s), 'not_held' (nothing changed: the caller explains
-- it with the Python rules), 'unknown' or 'cwd'.
CREATE FUNCTION agents_room_lease_renew(
    p_session TEXT, p_cwd TEXT, p_path TEXT, p_ttl DOUBLE PRECISION, p_now DOUBLE PRECISION,
    OUT o_outcome TEXT, OUT o_now DOUBLE PRECISION, OUT o_cwd TEXT, OUT o_label TEXT,
    OUT o_mode TEXT, OUT o_token BIGINT, OUT o_acquired DOUBLE PRECISION, OUT o_expires DOUBLE PRECISION
) LANGUAGE plpgsql AS $$
DECLARE
    ttl DOUBLE PRECISION;
BEGIN
    -- As a claim's: the lock, the time, the caller.
    PERFORM pg_advisory_xact_lock(7018704367216558081), set_config('synchronous_commit', 'off', true);
    o_now := coalesce(p_now, extract(epoch FROM clock_timestamp())::float8);
    SELECT s.cwd, s.label INTO o_cwd, o_label FROM sessions s WHERE s.id = p_session AND s.left_at IS NULL;
    IF NOT FOUND THEN
        o_outcome := 'unknown';
        RETURN;
    ELSIF p_cwd IS NOT NULL AND o_cwd <> p_cwd THEN
        o_outcome := 'cwd';
        RETURN;
    END IF;
    -- As for a release: a lease that is not live would be swept, then not found.
    IF NOT EXISTS (SELECT 1 FROM leases WHERE path = p_path AND session_id = p_session AND expires_at > o_now) THEN
        o_outcome := 'not_held';
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
    SELECT l.mode, l.ttl_s, l.acquired_at INTO o_mode, ttl, o_acquired FROM leases l
    WHERE l.path = p_path AND l.session_id = p_session;
    IF NOT FOUND THEN  -- never, while the check above and the sweep agree: fail whole, write no event
        RAISE EXCEPTION 'agents_room_lease_renew: the lease of % went in the sweep', p_path;
    END IF;
    ttl := coalesce(p_ttl, ttl);
    UPDATE counters SET value = value + 1 WHERE name = 'lease_token' RETURNING value INTO o_token;
    o_expires := o_now + ttl;
    UPDATE leases SET token = o_token, ttl_s = ttl, expires_at = o_expires
    WHERE path = p_path AND session_id = p_session;
    INSERT INTO events (at, session_id, kind, path, payload)
    VALUES (o_now, p_session, 'lease_renew', p_path,
            format('{"mode":%s,"token":%s,"expires_at":%s}', to_json(o_mode), o_token, to_json(o_expires)));
    o_outcome := 'renewed';
END $$;

UPDATE agents_room_meta SET value = '4' WHERE key = 'schema_version';
