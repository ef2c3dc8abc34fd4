"""The forward-only delivery states and the one function that moves deliveries along them
(:func:`advance`, which writes the ``delivery`` event). :mod:`.messages` (receive, ack,
expiry) and :mod:`.news` (wake offers accepted) both move them through it. A module of its
own, without records, so the hook's news path can load it without ``dataclasses``."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .engine import Tx

UNREAD = ("stored", "offered", "accepted", "undeliverable")
UNREAD_SQL = "('stored', 'offered', 'accepted', 'undeliverable')"


def news_sql(fresh: str = "") -> str:
    """A condition on a delivery ``d``: a hook has something to do for its recipient, mail not
    announced yet (``fresh``: a further condition on that mail, such as its message's expiry)
    or an offer a turn now confirms. :mod:`.news` asks it of one session; the hook's lean
    probe (agents_room/harnesses/hook.py) of its candidates, without ``fresh``: a superset, so its "no"
    is sure."""
    return f"((d.announced = 0 AND d.state IN {UNREAD_SQL}{fresh}) OR d.state = 'offered')"

# Allowed predecessors of each state (the schema's delivery_transitions, for WHERE clauses).
PREDECESSORS: dict[str, tuple[str, ...]] = {
    "offered": ("stored",),
    "accepted": ("offered",),
    "undeliverable": ("stored",),
    "read": UNREAD,
    "acked": ("read",),
    "expired": UNREAD,
}


def advance(tx: Tx, recipient: str, message_ids: list[int], to: str) -> list[int]:
    """Move deliveries forward to ``to`` where their state allows it; one event for all.
    Returns the ids that moved. (The schema's trigger refuses any backward move.)"""
    if not message_ids:
        return []
    preds = PREDECESSORS[to]
    marks = ",".join("?" * len(message_ids))
    rows = tx.all(
        f"SELECT message_id, state FROM deliveries WHERE recipient = ? AND message_id IN ({marks}) "
        f"AND state IN ({','.join('?' * len(preds))}) ORDER BY message_id",
        (recipient, *message_ids, *preds),
    )
    if not rows:
        return []
    moved = [r[0] for r in rows]
    marks = ",".join("?" * len(moved))
    offered = ", offered_at = ?" if to == "offered" else ""
    params = (to, tx.now, *((tx.now,) if offered else ()), recipient, *moved)
    tx.execute(
        f"UPDATE deliveries SET state = ?, updated_at = ?{offered} WHERE recipient = ? AND message_id IN ({marks})",
        params,
    )
    tx.event("delivery", recipient, to=to, items=[[mid, state] for mid, state in rows])
    return moved
