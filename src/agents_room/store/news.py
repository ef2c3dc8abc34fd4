"""The hook's rules, on plain rows: which session a harness event belongs to, the mail it
has not been told about yet, and telling it (marking that mail announced, accepting the
offers a turn confirms), in the words a hook says.

:mod:`.wake` makes the store's records (``sessions.Session``, ``wake.Pending``) of these
rows for the store's API; this module defines none, so the hook's news path
(agents_room/harnesses/hook_news.py) runs the same rules without importing ``dataclasses`` (with
``inspect``) and building the store's records, which cost that path more than its queries.
"""

from __future__ import annotations

from collections import namedtuple

from . import callcounts
from .delivery import UNREAD_SQL, advance, news_sql

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .engine import Tx

# A session's columns, in the order sessions.Session takes them (sessions imports them).
COLUMNS = "id, harness, harness_key, cwd, pid, label, tags, autonomy, wake_lever, created_at, last_seen, left_at, host, gone_at"
# One session as stored (``tags`` still JSON text), and one unread delivery as a hook tells it.
SessionRow = namedtuple("SessionRow", COLUMNS.replace(",", " "))
# ``sender_harness``: "human" for a person (store/people.py), so the words can say so.
Unread = namedtuple("Unread", "message_id sender sender_label subject state created_at sender_harness")

# The message (``m``) has not expired at the transaction's time.
FRESH = "(m.expires_at IS NULL OR m.expires_at > ?)"


# -- finding the session --------------------------------------------------------------------


def session_for_key(tx: Tx, harness_key: str) -> SessionRow | None:
    """The live session whose harness key is ``harness_key`` (lowercase UUID), newest first."""
    row = tx.one(
        f"SELECT {COLUMNS} FROM sessions WHERE harness_key = ? AND left_at IS NULL ORDER BY created_at DESC LIMIT 1",
        (harness_key.lower(),),
    )
    return SessionRow(*row) if row else None


def session_for_pids(tx: Tx, pids: list[int], harness: str | None = None) -> SessionRow | None:
    """The newest live session whose recorded harness pid is one of ``pids`` (nearest first):
    how a hook finds its session when the harness changed its key (Claude Code's ``/clear``)."""
    for pid in pids:
        row = tx.one(
            f"SELECT {COLUMNS} FROM sessions WHERE pid = ? AND left_at IS NULL "
            "AND (CAST(? AS TEXT) IS NULL OR harness = ?) ORDER BY created_at DESC LIMIT 1",
            (pid, harness, harness),
        )
        if row:
            return SessionRow(*row)
    return None


def hook_session(db: Any, harness_keys: list[str], pids: list[int] | None = None) -> SessionRow | None:
    """The session a hook event belongs to, on the store's ``Database``: the first harness
    key that names a live session, else the nearest recorded harness pid."""
    with db.read() as tx:
        for key in harness_keys:
            found = session_for_key(tx, key)
            if found:
                return found
        return session_for_pids(tx, pids or [])


def hook_event(db: Any, session_id: str, *, tell: bool) -> list[Unread]:
    """A hook event of the session, on the store's ``Database``: offers become accepted; with
    ``tell``, the unannounced mail is returned and marked announced. A read-only probe first."""
    with db.read() as tx:
        if not (has_news(tx, session_id) if tell else has_offers(tx, session_id)):
            return []
    with db.write() as tx:
        mark_accepted(tx, session_id)
        return announce(tx, session_id) if tell else []


# -- what the session has not been told -------------------------------------------------------------


def pending(tx: Tx, where: str, params: tuple) -> list[Unread]:
    """Deliveries matching ``where`` (over ``d`` deliveries, ``m`` messages), oldest first."""
    rows = tx.all(
        "SELECT d.message_id, m.sender, s.label, m.subject, d.state, m.created_at, s.harness "
        "FROM deliveries d JOIN messages m ON m.id = d.message_id LEFT JOIN sessions s ON s.id = m.sender "
        f"WHERE {where} ORDER BY d.message_id",
        params,
    )
    return [Unread(*r) for r in rows]


def unannounced(tx: Tx, session_id: str) -> list[Unread]:
    """Unread, unexpired deliveries the session has not been told about. Read-only."""
    return pending(
        tx, f"d.recipient = ? AND d.announced = 0 AND d.state IN {UNREAD_SQL} AND {FRESH}", (session_id, tx.now)
    )


def has_news(tx: Tx, session_id: str) -> bool:
    """Anything for a hook to do: mail not announced yet, or an offer a turn now confirms.
    One indexed probe, so the common answer (no) costs no write lock."""
    return tx.one(
        f"SELECT 1 FROM deliveries d JOIN messages m ON m.id = d.message_id WHERE d.recipient = ? "
        f"AND {news_sql(f' AND {FRESH}')} LIMIT 1",
        (session_id, tx.now),
    ) is not None


def has_offers(tx: Tx, session_id: str) -> bool:
    return tx.one(
        "SELECT 1 FROM deliveries WHERE recipient = ? AND state = 'offered' LIMIT 1", (session_id,)
    ) is not None


def announce(tx: Tx, session_id: str) -> list[Unread]:
    """Take the unannounced mail of a session and mark it announced (write transaction)."""
    found = unannounced(tx, session_id)
    mark_announced(tx, session_id, [p.message_id for p in found])
    return found


def mark_announced(tx: Tx, session_id: str, message_ids: list[int]) -> None:
    if message_ids:
        marks = ",".join("?" * len(message_ids))
        tx.execute(
            f"UPDATE deliveries SET announced = 1 WHERE recipient = ? AND message_id IN ({marks})",
            (session_id, *message_ids),
        )


def mark_accepted(tx: Tx, session_id: str, message_ids: list[int] | None = None) -> list[int]:
    """``offered → accepted`` for the given deliveries, or every offered one of the session."""
    if message_ids is None:
        message_ids = [r[0] for r in tx.all(
            "SELECT message_id FROM deliveries WHERE recipient = ? AND state = 'offered'", (session_id,)
        )]
    return advance(tx, session_id, message_ids, "accepted")


# -- words -------------------------------------------------------------------------------------------


def describe(pending: list[Any], session_id: str) -> str:
    """Plain facts about unread mail (``Unread`` rows or ``wake.Pending`` records), for the
    model: how many, from whom, the subjects, and which tool reads them. No instructions
    beyond naming the tool."""
    n = len(pending)
    senders: dict[str, str] = {}
    for p in pending:
        who = f"{p.sender_label} ({p.sender})" if p.sender_label else p.sender
        senders.setdefault(p.sender, f"{who}, a person" if _person(p) else who)
    head = f"agents-room: {n} unread message{'s' if n != 1 else ''} for session {session_id} from {'; '.join(senders.values())}."
    lines = [head]
    for p in pending[:10]:
        subject = p.subject.replace("\n", " ")[:120] or "(no subject)"
        person = " (a person)" if _person(p) else ""
        lines.append(f"- #{p.message_id} from {p.sender_label or p.sender}{person}: {subject}")
    if n > 10:
        lines.append(f"- ... and {n - 10} more")
    lines.append(f"msg_recv with session_id={session_id} reads them.")
    return "\n".join(lines)


def _person(p: Any) -> bool:
    """The sender is a person (``agents-room send``: harness "human", store/people.py)."""
    return getattr(p, "sender_harness", None) == "human"
