"""The store side of hooks and wake levers: which session a harness event belongs to, what
mail it has not been told about yet, and which deliveries a wake lever should signal.

Two separate things are tracked per delivery:

- ``announced`` (a flag, not a delivery state): a hook, a channel push or a wake signal has
  told the session about this message, so hooks do not repeat it. Setting it writes no event.
- the delivery state ``stored → offered → accepted``: a wake signal was emitted, then the
  harness showed it took it. Every move goes through :func:`messages.advance`, which writes
  the ``delivery`` event. A repeated signal of an ``offered`` delivery (after the retry
  window) is not a state change: it refreshes ``offered_at`` and writes a ``wake`` event
  ``{lever, items: [message_id, ...], retry: true}``.

Acceptance is never claimed on the lever's word alone unless the lever can know it (a
command that exits 0). Otherwise a sign of a turn confirms it: any hook event of the session,
or a tool call of the session after the offer (``last_seen > offered_at``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .messages import advance
from .sessions import COLUMNS, Session
from .sqlite import Tx

# An offered delivery is signalled again once its last signal is older than this.
RETRY_WINDOW_S = 60.0

_UNREAD = "('stored', 'offered', 'accepted', 'undeliverable')"
_FRESH = "(m.expires_at IS NULL OR m.expires_at > ?)"


@dataclass(frozen=True)
class Pending:
    """One unread delivery, as a hook or a lever tells it."""

    message_id: int
    sender: str
    sender_label: str | None
    subject: str
    state: str
    created_at: float


@dataclass(frozen=True)
class Offer:
    """Deliveries of one recipient that its wake lever should signal now."""

    session: Session
    pending: list[Pending]

    @property
    def retry(self) -> bool:
        return all(p.state == "offered" for p in self.pending)


# -- finding the session --------------------------------------------------------------------


def session_for_key(tx: Tx, harness_key: str) -> Session | None:
    """The live session whose harness key is ``harness_key`` (lowercase UUID), newest first."""
    row = tx.one(
        f"SELECT {COLUMNS} FROM sessions WHERE harness_key = ? AND left_at IS NULL ORDER BY created_at DESC LIMIT 1",
        (harness_key.lower(),),
    )
    return Session.from_row(row) if row else None


def session_for_pids(tx: Tx, pids: list[int], harness: str | None = None) -> Session | None:
    """The newest live session whose recorded harness pid is one of ``pids`` (nearest first):
    how a hook finds its session when the harness changed its key (Claude Code's ``/clear``)."""
    for pid in pids:
        row = tx.one(
            f"SELECT {COLUMNS} FROM sessions WHERE pid = ? AND left_at IS NULL "
            "AND (CAST(? AS TEXT) IS NULL OR harness = ?) ORDER BY created_at DESC LIMIT 1",
            (pid, harness, harness),
        )
        if row:
            return Session.from_row(row)
    return None


def session_by_id(tx: Tx, session_id: str) -> Session | None:
    row = tx.one(f"SELECT {COLUMNS} FROM sessions WHERE id = ? AND left_at IS NULL", (session_id,))
    return Session.from_row(row) if row else None


def hook_session(db: Any, harness_keys: list[str], pids: list[int] | None = None) -> Session | None:
    """``Store.hook_session`` on the store's ``Database`` (the hook's news path opens only that)."""
    with db.read() as tx:
        for key in harness_keys:
            found = session_for_key(tx, key)
            if found:
                return found
        return session_for_pids(tx, pids or [])


def hook_event(db: Any, session_id: str, *, tell: bool) -> list[Pending]:
    """``Store.hook_event`` on the store's ``Database``: offers become accepted; with ``tell``,
    the unannounced mail is returned and marked announced. A read-only probe first."""
    with db.read() as tx:
        if not (has_news(tx, session_id) if tell else has_offers(tx, session_id)):
            return []
    with db.write() as tx:
        mark_accepted(tx, session_id)
        return announce(tx, session_id) if tell else []


# -- what the session has not been told -------------------------------------------------------------


def _pending(tx: Tx, where: str, params: tuple) -> list[Pending]:
    rows = tx.all(
        "SELECT d.message_id, m.sender, s.label, m.subject, d.state, m.created_at "
        "FROM deliveries d JOIN messages m ON m.id = d.message_id LEFT JOIN sessions s ON s.id = m.sender "
        f"WHERE {where} ORDER BY d.message_id",
        params,
    )
    return [Pending(*r) for r in rows]


def unannounced(tx: Tx, session_id: str) -> list[Pending]:
    """Unread, unexpired deliveries the session has not been told about. Read-only."""
    return _pending(
        tx, f"d.recipient = ? AND d.announced = 0 AND d.state IN {_UNREAD} AND {_FRESH}", (session_id, tx.now)
    )


def has_news(tx: Tx, session_id: str) -> bool:
    """Anything for a hook to do: mail not announced yet, or an offer a turn now confirms.
    One indexed probe, so the common answer (no) costs no write lock."""
    return tx.one(
        f"SELECT 1 FROM deliveries d JOIN messages m ON m.id = d.message_id WHERE d.recipient = ? "
        f"AND ((d.announced = 0 AND d.state IN {_UNREAD} AND {_FRESH}) OR d.state = 'offered') LIMIT 1",
        (session_id, tx.now),
    ) is not None


def announce(tx: Tx, session_id: str) -> list[Pending]:
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


# -- wake levers --------------------------------------------------------------------------------


def offers(
    tx: Tx, *, session_id: str | None = None, lever: str | None = None, retry_s: float = RETRY_WINDOW_S
) -> list[Offer]:
    """What wake levers should signal now, per recipient: deliveries of live sessions at
    ``wake`` that have a lever (``lever`` if given, ``session_id`` if given), either
    ``stored`` and not yet announced (the session was told nothing, so it may be idle), or
    ``offered`` and last signalled at least ``retry_s`` ago. Read-only."""
    rows = tx.all(
        f"SELECT {COLUMNS} FROM sessions WHERE left_at IS NULL AND autonomy = 'wake' AND wake_lever IS NOT NULL "
        "AND (CAST(? AS TEXT) IS NULL OR id = ?) AND (CAST(? AS TEXT) IS NULL OR wake_lever = ?) ORDER BY id",
        (session_id, session_id, lever, lever),
    )
    out = []
    for row in rows:
        session = Session.from_row(row)
        pending = _pending(
            tx,
            f"d.recipient = ? AND {_FRESH} AND ((d.state = 'stored' AND d.announced = 0) "
            "OR (d.state = 'offered' AND d.offered_at <= ?))",
            (session.id, tx.now, tx.now - retry_s),
        )
        if pending:
            out.append(Offer(session, pending))
    return out


def mark_offered(
    tx: Tx, session_id: str, message_ids: list[int], lever: str, retry_s: float = RETRY_WINDOW_S
) -> list[int]:
    """A wake signal was emitted for these deliveries: ``stored → offered`` (with its
    ``delivery`` event); an ``offered`` one last signalled at least ``retry_s`` ago gets its
    ``offered_at`` refreshed and a ``wake`` retry event. Both are marked announced: the
    signal carried the facts. Returns the ids signalled; the rest (read, expired, or just
    signalled by another process) are left alone, so two levers racing signal once."""
    moved = advance(tx, session_id, message_ids, "offered")
    again = [mid for mid in message_ids if mid not in set(moved)]
    if again:
        marks = ",".join("?" * len(again))
        again = sorted(r[0] for r in tx.all(
            f"UPDATE deliveries SET offered_at = ?, updated_at = ? WHERE recipient = ? AND state = 'offered' "
            f"AND offered_at <= ? AND message_id IN ({marks}) RETURNING message_id",
            (tx.now, tx.now, session_id, tx.now - retry_s, *again),
        ))
        if again:
            tx.event("wake", session_id, lever=lever, items=again, retry=True)
    mark_announced(tx, session_id, moved + again)
    return sorted(moved + again)


def mark_accepted(tx: Tx, session_id: str, message_ids: list[int] | None = None) -> list[int]:
    """``offered → accepted`` for the given deliveries, or every offered one of the session."""
    if message_ids is None:
        message_ids = [r[0] for r in tx.all(
            "SELECT message_id FROM deliveries WHERE recipient = ? AND state = 'offered'", (session_id,)
        )]
    return advance(tx, session_id, message_ids, "accepted")


def mark_undeliverable(tx: Tx, session_id: str, message_ids: list[int]) -> list[int]:
    """``stored → undeliverable``: the session's lever turned out not to exist."""
    return advance(tx, session_id, message_ids, "undeliverable")


def has_offers(tx: Tx, session_id: str) -> bool:
    return tx.one(
        "SELECT 1 FROM deliveries WHERE recipient = ? AND state = 'offered' LIMIT 1", (session_id,)
    ) is not None


def confirm_by_activity(tx: Tx, session_id: str) -> list[int]:
    """Offers the session has since acted on: a tool call after the signal (``last_seen``
    later than ``offered_at``) shows the turn came. ``offered → accepted``."""
    ids = [r[0] for r in tx.all(
        "SELECT d.message_id FROM deliveries d JOIN sessions s ON s.id = d.recipient "
        "WHERE d.recipient = ? AND d.state = 'offered' AND s.last_seen > d.offered_at",
        (session_id,),
    )]
    return advance(tx, session_id, ids, "accepted")


def last_seq(tx: Tx) -> int:
    """The newest event's seq. Every state change appends an event, so a poller that sees
    it unchanged knows nothing happened and skips the real query (one b-tree probe)."""
    return tx.scalar("SELECT coalesce(max(seq), 0) FROM events")


# -- words -------------------------------------------------------------------------------------------


def describe(pending: list[Pending], session_id: str) -> str:
    """Plain facts about unread mail, for the model: how many, from whom, the subjects, and
    which tool reads them. No instructions beyond naming the tool."""
    n = len(pending)
    senders: dict[str, str] = {}
    for p in pending:
        senders.setdefault(p.sender, f"{p.sender_label} ({p.sender})" if p.sender_label else p.sender)
    head = f"agents-room: {n} unread message{'s' if n != 1 else ''} for session {session_id} from {', '.join(senders.values())}."
    lines = [head]
    for p in pending[:10]:
        subject = p.subject.replace("\n", " ")[:120] or "(no subject)"
        lines.append(f"- #{p.message_id} from {p.sender_label or p.sender}: {subject}")
    if n > 10:
        lines.append(f"- ... and {n - 10} more")
    lines.append(f"msg_recv with session_id={session_id} reads them.")
    return "\n".join(lines)
