"""The client history against the store's events (invariant ``history-events``).

Every ``ok`` op that changes state has its event inside its wall window [invoke, completion];
no ``fail`` op (nor a denied claim) has one; every ``info`` op is settled: its event was found
or not. Grants, renewals and sends are matched by their identity (token, message id); the
other kinds by key (kind, session, path) and time. A lease, send or ack event that no op
explains is a problem too: the store did something nobody asked for (or an ``info`` op took
effect twice).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .model import Problem, stamp
from .operation import Op

# The event kind each state-changing operation leaves behind.
KIND_OF = {
    "lease_claim": "lease_grant", "lease_renew": "lease_renew", "lease_release": "lease_release",
    "msg_send": "send", "note_read": "note_read", "room_join": "join", "room_leave": "leave",
    "msg_recv": "read", "msg_ack": "acked", "room_set_autonomy_cap": "cap",
    # an edit through the edit guard: its grant at the edit, when the guard wrote one (an edit of
    # a file the session renewed within the last minute is allowed on a read-only look)
    "guarded_edit": "lease_grant",
}
IDENTIFIED = {"lease_grant": "token", "lease_renew": "token", "send": "message_id"}
# Kinds where an ok op must have its event (an ok ack of an acked message writes nothing).
MUST = frozenset({"lease_grant", "lease_renew", "lease_release", "send", "note_read", "join", "leave", "read", "cap"})
# Events that only an operation of the history can cause: an ack is the session's own msg_ack,
# never a side effect of another session's (AK1).
CAUSED = frozenset({"lease_grant", "lease_renew", "lease_release", "send", "acked", "cap"})
Key = tuple[str, Any, Any]


@dataclass
class CrossCheck:
    owner: dict[int, Op] = field(default_factory=dict)  # event seq -> the op that caused it
    problems: list[Problem] = field(default_factory=list)
    settled: dict[str, dict[str, int]] = field(default_factory=dict)  # f -> found/not_found/unsettled
    checked: int = 0


def event_key(ev: Any) -> Key | None:
    kind, sid, payload = ev.kind, ev.session_id, ev.payload
    if kind in ("lease_grant", "lease_renew", "note_read"):
        return (kind, sid, ev.path)
    if kind == "lease_release":
        return (kind, sid, ev.path) if payload.get("reason") == "release" else None
    if kind == "send":
        return (kind, sid, payload.get("selector"))
    if kind in ("join", "leave"):
        return (kind, sid, None) if payload.get("reason", "leave") == "leave" else None
    if kind == "delivery" and payload.get("to") in ("read", "acked"):
        return (payload["to"], sid, None)
    if kind == "cap":
        return (kind, sid, None)
    return None


def op_key(op: Op) -> Key | None:
    kind = KIND_OF.get(op.f)
    if kind is None:
        return None
    if kind in ("lease_grant", "lease_renew", "lease_release", "note_read"):
        return (kind, op.session, op.path)
    if kind == "send":
        return (kind, op.session, op.args.get("to"))
    if kind == "join" and op.session is None:
        key = op.args.get("harness_key")
        return ("join-key", str(key).lower(), None) if key else None
    return (kind, op.session, None)


def crosscheck(ops: list[Op], events: list[Any], slack: float) -> CrossCheck:
    out = CrossCheck()
    by_key: dict[Key, list[Any]] = defaultdict(list)
    by_id: dict[tuple[str, Any], Any] = {}
    for ev in events:
        key = event_key(ev)
        if key is None:
            continue
        by_key[key].append(ev)
        if key[0] == "join" and ev.payload.get("harness_key"):
            by_key[("join-key", str(ev.payload["harness_key"]).lower(), None)].append(ev)
        if key[0] in IDENTIFIED:
            by_id[(key[0], ev.payload.get(IDENTIFIED[key[0]]), ev.session_id)] = ev
    for evs in by_key.values():
        evs.sort(key=lambda e: e.at)

    window_ok: dict[Key, list[Op]] = defaultdict(list)
    maybe: dict[Key, list[Op]] = defaultdict(list)  # allowed guarded edits: an event in the window, or none
    definite_none: list[tuple[Key, Op]] = []
    info: dict[Key, list[Op]] = defaultdict(list)
    for op in ops:
        kind = KIND_OF.get(op.f)
        if kind is None:
            continue
        out.checked += 1
        key = op_key(op)
        if op.outcome == "info":
            counts = out.settled.setdefault(op.f, {"found": 0, "not_found": 0, "unsettled": 0})
            if key is None:
                counts["unsettled"] += 1
            else:
                info[key].append(op)
            continue
        granted = op.outcome == "ok" and (kind != "lease_grant" or bool((op.result or {}).get("ok")))
        if op.f == "guarded_edit" and op.outcome == "fail":  # the write failed after the guard's grant, or before
            if key is not None:
                maybe[key].append(op)
        elif not granted:
            if key is not None:
                definite_none.append((key, op))
        elif op.f == "guarded_edit":
            if key is not None:
                maybe[key].append(op)
        elif kind in IDENTIFIED:
            _match_identity(out, op, kind, key, by_id, slack)
        elif key is not None and (kind != "read" or (op.result or {}).get("message_ids")):
            window_ok[key].append(op)

    for key, key_ops in window_ok.items():
        _match_window(out, key, key_ops, by_key.get(key, []), slack)
    for key, key_ops in maybe.items():
        _match_window(out, key, key_ops, [e for e in by_key.get(key, []) if e.payload.get("at_edit")], slack,
                      must=False)
    ats = {key: [e.at for e in evs] for key, evs in by_key.items()}
    for key, op in definite_none:
        _check_none(out, key, op, by_key.get(key, []), ats.get(key, []), info.get(key, []))
    for key, key_ops in info.items():
        _settle(out, key_ops, by_key.get(key, []), slack)
    _orphans(out, by_key, info)
    _wake_events(out, ops, events, slack)
    return out


# A wake lever's look (``wake`` op) causes the moves to offered and accepted and the retry events.
WAKE_MOVES = frozenset({"offered", "accepted"})


def _wake_events(out: CrossCheck, ops: list[Op], events: list[Any], slack: float) -> None:
    """Each offer, acceptance and retry event belongs to a look of its recipient's lever around
    it (in a run, each agent's lever looks for its own session only); one outside every look is
    something nobody asked for."""
    looks: dict[Any, list[Op]] = defaultdict(list)
    for op in ops:
        if op.f == "wake" and op.session is not None:
            looks[op.session].append(op)
    for ev in events:
        if ev.kind != "wake" and not (ev.kind == "delivery" and ev.payload.get("to") in WAKE_MOVES):
            continue
        out.checked += 1
        mine = looks.get(ev.session_id, ())
        op = next((o for o in mine if o.start <= ev.at and (o.end is None or ev.at <= o.end)), None) or next(
            (o for o in mine if o.start - slack <= ev.at and (o.end is None or ev.at <= o.end + slack)), None)
        if op is None:
            what = ev.payload.get("to") or "retry"
            out.problems.append(Problem("history-events", (
                f"{ev.kind} event seq {ev.seq} ({what} of messages {_items(ev)} to session {ev.session_id}, at "
                f"{stamp(ev.at)}) has no wake look of that session around it: no operation asked for it"),
                {"seq": ev.seq, "at": ev.at, "session": ev.session_id}))
        else:
            out.owner[ev.seq] = op


def _items(ev: Any) -> list[Any]:
    items = ev.payload.get("items") or ()
    return [i[0] if isinstance(i, list | tuple) else i for i in items][:10]


def _match_identity(out: CrossCheck, op: Op, kind: str, key: Key | None, by_id: dict, slack: float) -> None:
    ident = (op.result or {}).get(IDENTIFIED[kind])
    ev = by_id.get((kind, ident, op.session))
    if ev is None:
        out.problems.append(Problem("history-events", f"{op.describe()} answered {IDENTIFIED[kind]} {ident}, "
                                    f"but no {kind} event of that session carries it", {"op": op.describe(), "wall": op.end}))
        return
    out.owner[ev.seq] = op
    if key is not None and event_key(ev) != key:
        out.problems.append(Problem("history-events", (
            f"{op.describe()}: its {kind} event (seq {ev.seq}) is for session {ev.session_id}, "
            f"{ev.path or ev.payload.get('selector')}, not what the op asked"), {"seq": ev.seq, "wall": op.end}))
    if not (op.start - slack <= ev.at <= (op.end or op.start) + slack):
        out.problems.append(Problem("history-events", (
            f"{op.describe()}: its {kind} event (seq {ev.seq}) happened at {stamp(ev.at)}, outside the op's window"),
            {"seq": ev.seq, "at": ev.at, "wall": op.end}))


def _match_window(out: CrossCheck, key: Key, ops: list[Op], evs: list[Any], slack: float, *, must: bool = True) -> None:
    """Each op takes an unclaimed event of its key inside its window (``must``: of the kinds
    that have one, a problem when there is none). A recv prefers the event that moved exactly
    the messages it returned: an info recv landing late inside this op's window must not take
    its place."""
    i = 0
    for op in sorted(ops, key=lambda o: o.start):
        lo, hi = op.start - slack, (op.end or op.start) + slack
        while i < len(evs) and (evs[i].at < lo or evs[i].seq in out.owner):
            i += 1
        wanted = set((op.result or {}).get("message_ids") or ()) if key[0] == "read" else None
        pick, j = None, i
        while j < len(evs) and evs[j].at <= hi:
            if evs[j].seq not in out.owner:
                pick = j if pick is None else pick
                if wanted is None or {item[0] for item in evs[j].payload.get("items") or ()} == wanted:
                    pick = j
                    break
            j += 1
        if pick is not None:
            out.owner[evs[pick].seq] = op
        elif must and key[0] in MUST:
            out.problems.append(Problem("history-events", f"{op.describe()} has no {key[0]} event in its window",
                                        {"wall": op.end, "session": op.session, "path": op.path}))


def _check_none(out: CrossCheck, key: Key, op: Op, evs: list[Any], ats: list[float], infos: list[Op]) -> None:
    """A fail op (or a denied claim) must have changed nothing. An event inside its window is
    left to an earlier info op of the same key, if there is one: that op may have landed late."""
    end = op.end if op.end is not None else op.start
    if any(i.start < op.start for i in infos):
        return
    for ev in evs[bisect.bisect_left(ats, op.start):bisect.bisect_right(ats, end)]:
        if ev.seq in out.owner:
            continue
        out.owner[ev.seq] = op
        what = "was denied" if op.outcome == "ok" else f"failed ({op.error})"
        out.problems.append(Problem("history-events", (
            f"{op.describe()} {what}, yet its {ev.kind} event exists (seq {ev.seq}, at {stamp(ev.at)})"),
            {"seq": ev.seq, "at": ev.at, "wall": op.end, "session": op.session, "path": op.path}))


def _settle(out: CrossCheck, ops: list[Op], evs: list[Any], slack: float) -> None:
    j = 0
    for op in sorted(ops, key=lambda o: o.start):
        counts = out.settled[op.f]
        while j < len(evs) and (evs[j].at < op.start - slack or evs[j].seq in out.owner):
            j += 1
        if j < len(evs):
            out.owner[evs[j].seq] = op
            counts["found"] += 1
            j += 1
        else:
            counts["not_found"] += 1


def _orphans(out: CrossCheck, by_key: dict[Key, list[Any]], info: dict[Key, list[Op]]) -> None:
    for key, evs in by_key.items():
        if key[0] not in CAUSED:
            continue
        for ev in evs:
            if ev.seq in out.owner:
                continue
            earlier = [op for op in info.get(key, []) if op.start <= ev.at]
            what = (f"the info op {earlier[-1].describe()} was already settled by another event: it took effect twice"
                    if earlier else "no operation in the history asked for it")
            out.problems.append(Problem("history-events", (
                f"{ev.kind} event seq {ev.seq} (session {ev.session_id}, {ev.path or ev.payload.get('selector')}, "
                f"at {stamp(ev.at)}) has no operation: {what}"), {"seq": ev.seq, "at": ev.at, "session": ev.session_id}))
