"""The store's hot statements stay indexed.

The statements are not copied here: the test records what the store really executes (the
connection's trace callback) while it runs each hot operation on a store with some history,
then asks SQLite for the plan of each (``EXPLAIN QUERY PLAN``). A ``SCAN`` of a table means
the statement's cost grows with the table; a hot statement must ``SEARCH`` an index.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# The SQLite file, its pragmas, its WAL and its query planner.
pytestmark = pytest.mark.sqlite_only

from agents_room.store import Clock, Store

# Each hot statement: a fragment of its SQL that identifies it, and what its plan must show.
HOT: dict[str, tuple[str, tuple[str, ...]]] = {
    "session lookup on every write (touch)": (
        "UPDATE sessions SET last_seen = ", ("SEARCH sessions USING INDEX sqlite_autoindex_sessions_1 (id=?)",)),
    "lease_claim: expired-lease sweep": (
        "DELETE FROM leases WHERE expires_at <= ", ("SEARCH leases USING COVERING INDEX leases_expiry",)),
    "lease_claim: holders of the path and of every directory above it": (
        "FROM leases l JOIN sessions s ON s.id = l.session_id WHERE l.path IN (", ("SEARCH l USING PRIMARY KEY (path=?)",)),
    # (the caller's own lease under another name too: by the identity alone, never the session's
    # leases, which may be thousands)
    "lease_claim: leases of the path's file under another name (device and inode, or name in its folder)": (
        "WHERE (l.ident IN (", ("SEARCH l USING INDEX leases_ident (ident=?)",
                                "SEARCH l USING INDEX leases_name_ident (name_ident=?)")),
    "lease_claim of a directory: the leases beneath it": (
        "FROM leases l JOIN sessions s ON s.id = l.session_id WHERE l.path COLLATE BINARY > ", ("SEARCH l USING PRIMARY KEY (path>? AND path<?)",)),
    "lease_release: own lease": (
        "DELETE FROM leases WHERE path = ", ("SEARCH leases USING PRIMARY KEY (path=? AND session_id=?)",)),
    "msg_send: peer lookup": (
        "SELECT DISTINCT m2.session_id FROM memberships m1 JOIN memberships m2",
        ("SEARCH m1 USING PRIMARY KEY (session_id=?)", "SEARCH m2 USING COVERING INDEX memberships_room (room=?)")),
    # Only the unread deliveries: searched by the primary key (recipient), this would walk
    # every delivery the session ever had (12 ms per recv after 40,000 of them).
    "msg_recv: unread messages": (
        "SELECT m.id, m.sender, s.label, m.selector", ("SEARCH d USING COVERING INDEX deliveries_pending (state=? AND recipient=?)",)),
    "msg_recv: overdue unread": (
        "SELECT d.message_id FROM deliveries d JOIN messages m", ("deliveries_pending (state=? AND recipient=?)",)),
    "msg_unread: unread count": (
        "SELECT count(*) FROM deliveries d JOIN messages m", ("deliveries_pending (state=? AND recipient=?)",)),
    "drift_check: baseline": (
        "SELECT hash, read_at, read_seq, held_by_other FROM reads", ("SEARCH reads USING PRIMARY KEY (session_id=? AND path=?)",)),
    "drift_check: lease events since the read": (
        "SELECT session_id FROM events WHERE path IN (", ("SEARCH events USING INDEX events_path (path=? AND seq>?)",)),
}


def _plan(store: Store, sql: str) -> list[str]:
    return [row[3] for row in store.db.conn.execute(f"EXPLAIN QUERY PLAN {sql}")]


@pytest.fixture
def traced(store: Store, repo: Path, clock: Clock) -> tuple[list[str], Store]:
    """A store with some history, and every statement its hot operations execute."""
    a = store.room_join(cwd=str(repo), pid=None, label="a", tags=["x"], room="team").session_id
    b = store.room_join(cwd=str(repo), pid=None, label="b", room="team").session_id
    others = [store.room_join(cwd=str(repo), pid=None, label=f"o{i}").session_id for i in range(20)]
    for i in range(300):  # history: read and acked deliveries, expired leases, events
        store.msg_send(others[i % 20], b, subject=f"old {i}")
        store.lease_claim(others[i % 20], f"src/old_{i}.py", ttl_s=1)
    clock.shift(2)
    while store.msg_recv(b, limit=100).messages:
        pass
    target = repo / "f.py"
    target.write_text("one\n")
    store.note_read(a, "f.py")
    store.lease_claim(b, "f.py")
    target.write_text("two\n")

    seen: list[str] = []
    store.db.conn.set_trace_callback(seen.append)
    try:
        store.lease_claim(a, "g.py", ttl_s=1)
        store.lease_claim(b, "g.py")  # denied: the holder lookup finds a
        store.lease_claim(b, "src/")  # a directory: the range beneath it
        clock.shift(2)
        store.lease_claim(a, "h.py")  # sweeps g.py
        store.lease_renew(a, "h.py")
        store.lease_release(a, "h.py")
        store.msg_send(a, b, "direct")
        store.msg_send(a, "*", "broadcast")
        store.msg_send(a, "tag:x", "tagged")
        store.msg_send(a, "file:f.py", "to the holder")
        store.msg_unread(b)
        got = store.msg_recv(b)
        store.msg_ack(b, got.messages[0].id)
        store.msg_recv(b)  # empty: the inbox block
        assert store.drift_check(a, "f.py").severity == "CRITICAL"
        store.note_read(a, "f.py")
        store.lease_check(a, "f.py")
    finally:
        store.db.conn.set_trace_callback(None)
    return list(dict.fromkeys(seen)), store


def test_every_hot_statement_searches_an_index(traced: tuple[list[str], Store]) -> None:
    statements, store = traced
    for name, (fragment, expected) in HOT.items():
        matching = [s for s in statements if fragment in s]
        assert matching, f"{name}: no executed statement contains {fragment!r} (the SQL changed: update HOT)"
        for sql in matching:
            plan = _plan(store, sql)
            for step in expected:
                assert any(step in row for row in plan), f"{name}: expected {step!r} in the plan {plan} of {sql[:200]}"


def test_no_hot_operation_scans_a_table(traced: tuple[list[str], Store]) -> None:
    statements, store = traced
    queried = [s for s in statements if not s.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK"))]
    assert len(queried) > 30
    for sql in queried:
        plan = _plan(store, sql)
        scans = [row for row in plan if row.startswith("SCAN ")]
        assert not scans, f"full scan {scans} in {sql[:200]}"


def test_the_plan_check_sees_a_scan(store: Store) -> None:
    """The check above can fail: an unindexed lookup does show up as SCAN."""
    assert any(row.startswith("SCAN ") for row in _plan(store, "SELECT id FROM sessions WHERE cwd = 'x'"))

