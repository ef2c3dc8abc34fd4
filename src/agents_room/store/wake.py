"""The store side of hooks and wake levers: which session a harness event belongs to, what
mail it has not been told about yet, and which deliveries a wake lever should signal. The
hook's rules run on plain rows in :mod:`.news` (the hook's news path loads that module alone);
here they answer with the store's records.

Two separate things are tracked per delivery:

- ``announced`` (a flag, not a delivery state): a hook, a channel push or a wake signal has
  told the session about this message, so hooks do not repeat it. Setting it writes no event.
- the delivery state ``stored → offered → accepted``: a wake signal was emitted, then the
  harness showed it took it. Every move goes through :func:`delivery.advance`, which writes
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

from . import news
from .delivery import advance
from .news import COLUMNS, FRESH
# The hook's rules on rows are store/news.py's; these are used from here too (wakecalls, the levers).
from .news import describe, has_news, has_offers, mark_accepted, mark_announced  # noqa: F401
from .sessions import Session
from .engine import Tx

# An offered delivery is signalled again once its last signal is older than this.
RETRY_WINDOW_S = 60.0


@dataclass(frozen=True)
class Pending:
    """One unread delivery, as a hook or a lever tells it."""

    message_id: int
    sender: str
    sender_label: str | None
    subject: str
    state: str
    created_at: float
    sender_harness: str | None = None  # "human" for a person (store/people.py)


@dataclass(frozen=True)
class Offer:
    """Deliveries of one recipient that its wake lever should signal now."""

    session: Session
    pending: list[Pending]

    @property
    def retry(self) -> bool:
        return all(p.state == "offered" for p in self.pending)


# -- the hook's rules (store/news.py), as the store's records -------------------------------


def session_for_key(tx: Tx, harness_key: str) -> Session | None:
    """The live session whose harness key is ``harness_key`` (lowercase UUID), newest first."""
    return _session(news.session_for_key(tx, harness_key))


def session_for_pids(tx: Tx, pids: list[int], harness: str | None = None) -> Session | None:
    """The newest live session whose recorded harness pid is one of ``pids`` (nearest first)."""
    return _session(news.session_for_pids(tx, pids, harness))


def session_by_id(tx: Tx, session_id: str) -> Session | None:
    row = tx.one(f"SELECT {COLUMNS} FROM sessions WHERE id = ? AND left_at IS NULL", (session_id,))
    return Session.from_row(row) if row else None


def hook_session(db: Any, harness_keys: list[str], pids: list[int] | None = None) -> Session | None:
    """``Store.hook_session`` on the store's ``Database``."""
    return _session(news.hook_session(db, harness_keys, pids))


def hook_event(db: Any, session_id: str, *, tell: bool) -> list[Pending]:
    """``Store.hook_event`` on the store's ``Database``: offers become accepted; with ``tell``,
    the unannounced mail is returned and marked announced. A read-only probe first."""
    return _records(news.hook_event(db, session_id, tell=tell))


def unannounced(tx: Tx, session_id: str) -> list[Pending]:
    """Unread, unexpired deliveries the session has not been told about. Read-only."""
    return _records(news.unannounced(tx, session_id))


def announce(tx: Tx, session_id: str) -> list[Pending]:
    """Take the unannounced mail of a session and mark it announced (write transaction)."""
    return _records(news.announce(tx, session_id))


def _session(row: tuple | None) -> Session | None:
    return Session.from_row(row) if row else None


def _records(rows: list[tuple]) -> list[Pending]:
    return [Pending(*r) for r in rows]


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
        pending = _records(news.pending(
            tx,
            f"d.recipient = ? AND {FRESH} AND ((d.state = 'stored' AND d.announced = 0) "
            "OR (d.state = 'offered' AND d.offered_at <= ?))",
            (session.id, tx.now, tx.now - retry_s),
        ))
        if pending:
            out.append(Offer(session, pending))
    return out


def mark_offered(
    tx: Tx, session_id: str, message_ids: list[int], lever: str, retry_s: float = RETRY_WINDOW_S
) -> list[int]:
    """A wake signal was emitted for these deliveries: ``stored → offered`` (with its
    ``delivery`` event); an ``offered`` one last signalled at least ``retry_s`` ago gets its
    ``offered_at`` refreshed and a ``wake`` retry event. Both are marked announced: the
    signal carried the facts. Returns the ids signalled; the rest (read, expired, run out
    since the look that found them, or just signalled by another process) are left alone, so
    two levers racing signal once."""
    if message_ids:  # the look read them in an earlier transaction: a message may have run out since
        marks = ",".join("?" * len(message_ids))
        fresh = {r[0] for r in tx.all(
            f"SELECT m.id FROM messages m WHERE m.id IN ({marks}) AND {FRESH}", (*message_ids, tx.now))}
        message_ids = [mid for mid in message_ids if mid in fresh]
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
    if moved or again:  # an offer is news for the session's hook (store/delivery.py): its quiet marker goes
        tx.notify_mail([session_id])
    return sorted(moved + again)


def mark_undeliverable(tx: Tx, session_id: str, message_ids: list[int]) -> list[int]:
    """``stored → undeliverable``: the session's lever turned out not to exist."""
    return advance(tx, session_id, message_ids, "undeliverable")


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
