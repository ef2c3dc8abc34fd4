"""The oracle: the protocol recomputed from the events' commit order and the clients' own
arguments, never from the answer it judges.

One pass over the events in ``seq`` order keeps the model's own state: live sessions, their
rooms, tags, cwd and autonomy, room caps, live leases with the expiry the *client* asked for
(``at`` + its ``ttl_s``), every message's expiry from the client's ``ttl_s``, and each
delivery's state. At each event it recomputes what the operation must have done (the
recipients of a selector at the send's commit, which deliveries a recv must read and in
which order, when a delivery may expire, what a leave must release) and compares. The
event says *that* something happened and in which order; who, when and how many come from
the model. Read operations (no event) are judged against the states the model held in their
window, by ``sim/check/oracle_reads.py`` from the timelines this pass records.

The state (``sim/check/oracle_state.py``) is one record per concern, each written by the
module that judges its events: sessions, rooms and autonomy (``oracle_rooms``), messages and
deliveries (``oracle_mail``), leases (``oracle_leases``), wake signals (``oracle_wake``).

Rule ids and groups: ``sim/check/rules.py``; the audit: docs/history.md.
"""

from __future__ import annotations

from typing import Any

from . import oracle_mail, oracle_rooms, oracle_wake
from .operation import Op
from .oracle_leases import on_expire, on_grant, on_release, on_renew
from .oracle_mail import recipients
from .oracle_state import UNREAD, Hold, Oracle
from .rules import GROUPS
from .window import Commits, window

__all__ = ["GROUPS", "UNREAD", "Commits", "Hold", "Oracle", "check_events", "recipients", "window"]


def check_events(events: list[Any], owner: dict[int, Op], ops: list[Op] = (), slack: float = 0.01) -> Oracle:  # type: ignore[assignment]
    """Replay ``events`` (seq order) with ``owner`` (event seq -> the op that caused it, from
    the cross-check) and ``ops`` (the history's operations) and collect every rule the store broke."""
    o = Oracle(slack=slack)
    oracle_mail.prepare(o, ops)
    oracle_wake.prepare(o, ops)
    oracle_rooms.prepare(o, ops, events)
    for ev in events:
        if "store_at" in ev.payload:
            o.retimed = True
    for ev in events:
        oracle_rooms.before(o, ev)
        handler = _HANDLERS.get(ev.kind)
        if handler is not None:
            _departed(o, ev)
            handler(o, ev, _cause(owner.get(ev.seq)))
    oracle_rooms.finish(o)
    for group in GROUPS:
        o.checked.setdefault(group, 0)
    return o


def _cause(op: Op | None) -> Op | None:
    """The op whose arguments the event is judged by: not one that failed or was denied (an
    event owned by such an op is history-events' violation, not the oracle's)."""
    if op is None or op.outcome == "fail" or (op.f == "lease_claim" and op.outcome == "ok"
                                              and not (op.result or {}).get("ok")):
        return None
    return op


def _departed(o: Oracle, ev: Any) -> None:
    if ev.kind in ("leave", "lease_release", "lease_expire", "cap", "autonomy") or ev.session_id is None:
        return
    if ev.kind == "delivery" and ev.payload.get("to") == "expired":
        return
    s = o.rooms.sessions.get(ev.session_id)
    if s is None:  # a session the events never saw join (a store reused across runs): not judged
        return
    o.checked["sessions"] += 1
    if not s.live:
        o.fail("SR4", f"{ev.kind} event for session {ev.session_id}, which had left", ev.seq, ev.at,
               session=ev.session_id)


_HANDLERS = {
    "join": oracle_rooms.on_join, "leave": oracle_rooms.on_leave, "leave_room": oracle_rooms.on_leave_room,
    "cap": oracle_rooms.on_cap, "autonomy": oracle_rooms.on_autonomy,
    "send": oracle_mail.on_send, "delivery": oracle_mail.on_delivery, "lease_grant": on_grant, "lease_renew": on_renew,
    "lease_release": on_release, "lease_expire": on_expire, "wake": oracle_wake.retried,
}
