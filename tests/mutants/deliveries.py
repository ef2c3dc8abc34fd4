"""Broken delivery stores (factories as in ``mutants.leases``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents_room.store import Received, Store, bounds, messages
from agents_room.store.messages import UNREAD, Message
from agents_room.store.sqlite.database import Tx

from .mutation import rewrite

_UNREAD_SQL = "(" + ", ".join(f"'{s}'" for s in UNREAD) + ")"
_PAGE = (f"FROM deliveries d JOIN messages m ON m.id = d.message_id LEFT JOIN sessions s ON s.id = m.sender "
         f"WHERE d.recipient = ? AND d.state IN {_UNREAD_SQL} ORDER BY d.message_id LIMIT ?")

# The deliveries table as a store would have it that forgot its primary key (the trigger kept).
_NO_KEY = [
    "CREATE TABLE deliveries_nokey (recipient TEXT NOT NULL, message_id INTEGER NOT NULL, state TEXT NOT NULL, "
    "created_at REAL NOT NULL, updated_at REAL NOT NULL, offered_at REAL, announced INTEGER NOT NULL DEFAULT 0)",
    "INSERT INTO deliveries_nokey SELECT recipient, message_id, state, created_at, updated_at, offered_at, announced "
    "FROM deliveries",
    "DROP TABLE deliveries",
    "ALTER TABLE deliveries_nokey RENAME TO deliveries",
    "CREATE INDEX deliveries_recipient ON deliveries (recipient, message_id)",
    "CREATE INDEX deliveries_message ON deliveries (message_id)",
    "CREATE INDEX deliveries_pending ON deliveries (state, recipient)",
    "CREATE TRIGGER deliveries_forward_only BEFORE UPDATE OF state ON deliveries "
    "WHEN NEW.state <> OLD.state AND NOT EXISTS (SELECT 1 FROM delivery_transitions "
    "WHERE from_state = OLD.state AND to_state = NEW.state) "
    "BEGIN SELECT RAISE(ABORT, 'delivery_backward: a delivery state may only move forward'); END",
]


def _schema_change(store: Store, done_when: str, statements: list[str]) -> None:
    """Alter the shared file once: every agent opens it, the first one to get the write lock
    changes it, the rest see it changed."""
    with store.db.write() as tx:
        if tx.scalar(done_when):
            return
        for statement in statements:
            tx.execute(statement)


def _on_postgresql(store: Store) -> bool:
    return getattr(store.db, "engine", "sqlite") == "postgresql"


# -- a delivery inserted twice --------------------------------------------------------------------


def duplicate_delivery(db: Path, busy_timeout_s: float) -> Store:
    """Peers are looked up without DISTINCT, so a peer sharing two rooms with the sender is a
    recipient twice; with no primary key on deliveries, both rows go in."""
    rewrite(messages, "_peers", "SELECT DISTINCT m2.session_id", "SELECT m2.session_id")
    store = Store.open(db, busy_timeout_s=busy_timeout_s)
    if _on_postgresql(store):  # the same loss of the key, in PostgreSQL's words
        _schema_change(store, "SELECT count(*) = 0 FROM pg_constraint WHERE conname = 'deliveries_pkey' "
                       "AND conrelid = 'deliveries'::regclass", ["ALTER TABLE deliveries DROP CONSTRAINT deliveries_pkey"])
        return store
    _schema_change(store, "SELECT 1 FROM sqlite_master WHERE name = 'deliveries_recipient'",
                   _NO_KEY)
    return store


# -- read in one transaction, mark in another ----------------------------------------------------------


class RecvTwoTransactions(Store):
    """Returns a page read in one transaction, then marks "the first page of unread" read in a
    second: a message that arrived in between is marked read and never returned."""

    def msg_recv(self, session_id: Any, limit: Any = None) -> Received:
        n = bounds.limit(limit, 100)
        with self.db.read() as tx:
            me = self._session(tx, session_id, touch=False)
            found = [Message(*r) for r in tx.all(f"SELECT m.id, m.sender, s.label, m.selector, m.subject, m.body, "
                                                  f"m.reply_to, m.created_at, m.expires_at, s.harness {_PAGE}", (me.id, n))]
        with self.db.write() as tx:
            me = self._session(tx, session_id, touch=True)
            page = [r[0] for r in tx.all(f"SELECT d.message_id {_PAGE}", (me.id, n))]
            messages.advance(tx, me.id, page, "read")
            return Received(found, None if found else messages.inbox(tx, me))


def recv_two_transactions(db: Path, busy_timeout_s: float) -> Store:
    return RecvTwoTransactions.open(db, busy_timeout_s=busy_timeout_s)


# -- a delivery state moved backward ---------------------------------------------------------------------


def mark_read_through(tx: Tx, recipient: str, newest: int) -> list[int]:
    """Every delivery of ``recipient`` up to ``newest`` becomes read, whatever its state (an
    acked one moves back to read). The event records honestly what moved, from where."""
    rows = tx.all("SELECT message_id, state FROM deliveries WHERE recipient = ? AND message_id <= ? "
                  "AND state <> 'read' ORDER BY message_id", (recipient, newest))
    if not rows:
        return []
    tx.execute("UPDATE deliveries SET state = 'read', updated_at = ? WHERE recipient = ? AND message_id <= ? "
               "AND state <> 'read'", (tx.now, recipient, newest))
    tx.event("delivery", recipient, to="read", items=[[mid, state] for mid, state in rows])
    return [r[0] for r in rows]


def backward_delivery(db: Path, busy_timeout_s: float) -> Store:
    """msg_recv marks read by watermark, not by id; and the store has lost the trigger that
    would have refused the backward move."""
    messages.mark_read_through = mark_read_through  # type: ignore[attr-defined]
    rewrite(messages, "recv", 'advance(tx, session.id, [m.id for m in messages], "read")',
            "mark_read_through(tx, session.id, messages[-1].id)")
    store = Store.open(db, busy_timeout_s=busy_timeout_s)
    if _on_postgresql(store):
        _schema_change(store, "SELECT count(*) = 0 FROM pg_trigger WHERE tgname = 'deliveries_forward_only' "
                       "AND tgrelid = 'deliveries'::regclass", ["DROP TRIGGER deliveries_forward_only ON deliveries"])
        return store
    _schema_change(store, "SELECT count(*) = 0 FROM sqlite_master WHERE name = 'deliveries_forward_only'",
                   ["DROP TRIGGER deliveries_forward_only"])
    return store
