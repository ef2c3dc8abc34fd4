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


def test_a_claim_and_its_release_take_few_round_trips(store: Store, tmp_path: Path) -> None:
    sid = store.room_join(cwd=str(tmp_path), pid=None).session_id
    claim = _count(store, lambda: store.lease_claim(sid, "a.py", 60))
    release = _count(store, lambda: store.lease_release(sid, "a.py"))
    # begin+lock+time, the session's touch, the sweep, the holders, the token, then the
    # lease and its event with the COMMIT and the flush (8 before, the flush apart)
    assert len(claim) == 6, claim
    last = claim[-1]
    assert last.count("INSERT INTO leases") == 1 and "COMMIT;" in last and "pg_logical_emit_message" in last
    assert len(release) == 5, release  # begin, touch, sweep, the delete, its event + COMMIT + flush
    assert [e.kind for e in store.events()[-2:]] == ["lease_grant", "lease_release"]


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
