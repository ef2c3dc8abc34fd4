-- agents-room schema version 3: traffic (store/callcounts.py). Writes leave events; these
-- count every call a server, hook or simulated agent process served, reads included, added
-- inside that process's next write transaction (never a write of their own for a read).
--   call_counts  calls per minute of the store's clock (window_start, Unix seconds), per
--                session ('' when the call named none, or not a well-formed id), tool and
--                outcome: 'ok', 'denied' (a lease claim answered ok=false) or an error code.
--   call_gaps    the gaps between one session's calls as its server saw them (from the end
--                of one call to the start of the next: the agent's think time), in buckets
--                of a quarter octave of milliseconds (callcounts.bucket).
CREATE TABLE call_counts (
    window_start INTEGER NOT NULL,
    session_id   TEXT NOT NULL,
    tool         TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    n            INTEGER NOT NULL,
    PRIMARY KEY (window_start, session_id, tool, outcome)
);
CREATE TABLE call_gaps (
    window_start INTEGER NOT NULL,
    session_id   TEXT NOT NULL,
    bucket       INTEGER NOT NULL,
    n            INTEGER NOT NULL,
    PRIMARY KEY (window_start, session_id, bucket)
);
