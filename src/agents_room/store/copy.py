"""Copy a whole store into another (a team moving its SQLite history into PostgreSQL): rooms,
sessions, messages, deliveries, leases, reads, the token counter and every event, with their
ids, so the audit replays the same and message ids, seqs and tokens go on from where they
were. The target must be empty (a store with no sessions, messages or events).

One read snapshot of the source, one write transaction on the target: the copy lands whole
or not at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import StoreError

if TYPE_CHECKING:
    from . import Store

# Parents before children (the foreign keys), each table's columns as in schema.sql, and
# the order that keeps insertion order (sessions: the order room_who breaks ties by).
TABLES: tuple[tuple[str, str, str], ...] = (
    ("sessions", "id, harness, harness_key, cwd, pid, label, tags, autonomy, wake_lever, created_at, last_seen, "
     "left_at, host, gone_at", "{insertion}"),
    ("session_tags", "tag, session_id", "tag, session_id"),
    ("memberships", "session_id, room, joined_at", "session_id, room"),
    ("room_caps", "room, autonomy", "room"),
    ("messages", "id, sender, selector, subject, body, reply_to, created_at, expires_at", "id"),
    ("message_rooms", "room, message_id", "message_id, room"),
    ("deliveries", "recipient, message_id, state, created_at, updated_at, offered_at, announced",
     "message_id, recipient"),
    ("leases", "path, session_id, mode, token, ttl_s, acquired_at, expires_at", "token"),
    ("reads", "session_id, path, hash, read_at, read_seq, held_by_other", "read_seq"),
    ("events", "seq, at, session_id, kind, path, payload", "seq"),
    ("call_counts", "window_start, session_id, tool, outcome, n", "window_start, session_id, tool, outcome"),
    ("call_gaps", "window_start, session_id, bucket, n", "window_start, session_id, bucket"),
)
_PAGE = 5_000


def copy_store(source: Store, target: Store) -> dict[str, int]:
    """Copy ``source`` into the empty ``target``; returns the rows copied per table.
    Raises ``StoreError`` if the target holds anything."""
    if source.path == target.path:
        raise StoreError(f"the source and the target are the same store ({source.path})")
    copied: dict[str, int] = {}
    with source.db.read() as src, target.db.write() as dst:
        held = {t: dst.scalar(f"SELECT count(*) FROM {t}") for t in ("sessions", "messages", "events")}  # noqa: S608
        if any(held.values()):
            what = ", ".join(f"{n} {t}" for t, n in held.items() if n)
            raise StoreError(f"{target.path} is not empty ({what}); copy only into a new, empty store")
        for table, columns, order in TABLES:
            marks = ", ".join("?" * len(columns.split(",")))
            insert = f"INSERT INTO {table} ({columns}) VALUES ({marks})"  # noqa: S608 (fixed names)
            copied[table] = 0
            while True:
                rows = src.all(f"SELECT {columns} FROM {table} s "  # noqa: S608 (fixed names)
                               f"ORDER BY {order.format(insertion=src.INSERTION_ORDER)} LIMIT ? OFFSET ?",
                               (_PAGE, copied[table]))
                dst.many(insert, rows)
                copied[table] += len(rows)
                if len(rows) < _PAGE:
                    break
        token = src.scalar("SELECT value FROM counters WHERE name = 'lease_token'")
        dst.execute("UPDATE counters SET value = ? WHERE name = 'lease_token'", (token,))
        target.db.after_copy(dst)
    return copied
