"""The PostgreSQL engine's write transactions while they hold the one write lock: every round
trip to the server is a wait of every other writer, so statements whose results the rules do
not need (``Tx.later``, ``Tx.log``) go out with the next statement that needs one, or with the
COMMIT and the WAL flush, in one round trip; in order, and all or nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agents_room.store import Store, StoreError

pytestmark = pytest.mark.postgres_only


class _Counted:
    """The store's connection, counting what it sends: one ``execute`` is one round trip."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self._conn, self.sent = conn, []

    def execute(self, sql: Any, params: Any = None) -> Any:
        self.sent.append(str(sql))
        return self._conn.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@pytest.fixture
def store(pg_url: str, tmp_path: Path) -> Iterator[Store]:
    with Store.open(pg_url) as opened:
        yield opened


def _count(store: Store, call: Any) -> list[str]:
    db: Any = store.db
    counted = _Counted(db._connection())
    db.conn = counted
    try:
        call()
    finally:
        db.conn = counted._conn
    return counted.sent


def test_a_claim_its_renewal_and_its_release_take_one_round_trip_each(store: Store, tmp_path: Path) -> None:
    sid = store.room_join(cwd=str(tmp_path), pid=None).session_id
    claim = _count(store, lambda: store.lease_claim(sid, "a.py", 60))
    renew = _count(store, lambda: store.lease_renew(sid, "a.py", 90))
    release = _count(store, lambda: store.lease_release(sid, "a.py"))
    # BEGIN, the function (the write lock, the time, the touch, the sweep, the holders, the
    # token, the lease, its event), COMMIT and the flush: one query string (8 before issue 32,
    # the flush apart; 6 after its first pass). The lock is taken inside the function.
    assert len(claim) == 1, claim
    assert claim[0].startswith("BEGIN") and "agents_room_lease_claim(" in claim[0]
    assert "COMMIT;" in claim[0] and "pg_logical_emit_message" in claim[0]
    assert "pg_advisory_xact_lock" not in claim[0]  # the function's own first statement
    assert len(release) == 1 and "agents_room_lease_release(" in release[0], release
    assert len(renew) == 1 and "agents_room_lease_renew(" in renew[0], renew
    assert [e.kind for e in store.events()[-3:]] == ["lease_grant", "lease_renew", "lease_release"]


def test_another_process_learns_the_sessions_cwd_once(store: Store, pg_url: str, tmp_path: Path) -> None:
    sid = store.room_join(cwd=str(tmp_path), pid=None).session_id
    with Store.open(pg_url) as other:  # never saw the join: a relative path needs the session's cwd
        first = _count(other, lambda: other.lease_claim(sid, "b.py", 60))
        again = _count(other, lambda: other.lease_claim(sid, "c.py", 60))
        absolute = _count(other, lambda: other.lease_claim(sid, str(tmp_path / "d.py"), 60))
    assert len(first) == 2 and len(again) == 1 and len(absolute) == 1, (first, again, absolute)
    held = {lease.path for lease in store.lease_list(sid)}
    assert {str(tmp_path / n) for n in ("b.py", "c.py", "d.py")} <= held, held


def test_held_statements_keep_their_order_with_the_others(store: Store) -> None:
    with store.db.write() as tx:
        tx.log("first", None, "/p")
        tx.later("INSERT INTO counters (name, value) VALUES ('held', 7)")
        assert tx.scalar("SELECT value FROM counters WHERE name = 'held'") == 7  # sent before this one
        second = tx.event("second", None, "/p")
        tx.log("third", None, "/p", text="it's 100% ; quoted")
    kinds = [(e.seq, e.kind, e.payload) for e in store.events() if e.path == "/p"]
    assert [k for _, k, _ in kinds] == ["first", "second", "third"]
    assert kinds[1][0] == second and kinds[2][2] == {"text": "it's 100% ; quoted"}


def test_a_held_statement_that_fails_rolls_the_whole_transaction_back(store: Store) -> None:
    before = len(store.events())
    with pytest.raises(StoreError), store.db.write() as tx:
        tx.log("lost", None, "/q")
        tx.later("INSERT INTO counters (name, value) VALUES ('lease_token', 1)")  # the key exists
    assert len(store.events()) == before
    with store.db.write() as tx:  # the connection and the write lock are free again
        assert tx.scalar("SELECT count(*) FROM counters WHERE name = 'lease_token'") == 1
