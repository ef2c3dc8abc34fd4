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

Rule ids and groups: ``sim/check/rules.py``; the audit: docs/history.md.
"""

from __future__ import annotations

import bisect
import fnmatch
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .model import Problem, stamp
from .operation import Op
from .rules import GROUPS, problem

__all__ = ["GROUPS", "Commits", "Oracle", "check_events", "recipients", "window"]

LEVEL = {"hold": 0, "notify": 1, "wake": 2}
UNREAD = frozenset({"stored", "offered", "accepted", "undeliverable"})
CLAIM_TTL_S = 600.0
EPS = 1e-6  # the store adds ttl_s to the same float the event records as ``at``


@dataclass
class Sess:
    rooms: set[str]
    tags: frozenset[str]
    cwd: str | None
    autonomy: str
    harness_key: str | None
    live: bool = True


@dataclass(frozen=True, slots=True)
class Hold:
    session: str
    mode: str
    token: int
    expires_at: float  # the model's: grant time + the client's ttl_s
    ttl: float
    store_expires: float  # what the store's event said (the existing lease model judges by it)


@dataclass
class Oracle:
    problems: list[Problem] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    sessions: dict[str, Sess] = field(default_factory=dict)
    caps: dict[str, str] = field(default_factory=dict)
    leases: dict[str, dict[str, Hold]] = field(default_factory=lambda: defaultdict(dict))
    held_paths: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    expires: dict[int, float | None] = field(default_factory=dict)  # message id -> model expiry
    sender: dict[int, str] = field(default_factory=dict)
    state: dict[tuple[int, str], str] = field(default_factory=dict)
    unread: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    # timelines for the reads: (at, snapshot) in seq order
    lease_tl: dict[str, list[tuple[int, tuple[Hold, ...]]]] = field(default_factory=lambda: defaultdict(list))
    unread_tl: dict[str, list[tuple[int, frozenset[int]]]] = field(default_factory=lambda: defaultdict(list))
    member_tl: list[tuple[int, dict[str, frozenset[str]]]] = field(default_factory=list)
    pair_tl: dict[tuple[int, str], list[tuple[int, str]]] = field(default_factory=lambda: defaultdict(list))
    room_msgs: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))  # (mid, seq)
    sent_by: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))  # (mid, seq)
    leave_at: dict[str, tuple[int, float]] = field(default_factory=dict)
    commits: Any = None  # the reads' Commits, set by oracle_reads.check_ops
    acks: dict[tuple[Any, Any], list[Op]] = field(default_factory=lambda: defaultdict(list))
    slack: float = 0.01
    pending_cap: tuple[str, str, float, int] | None = None

    def fail(self, rule: str, message: str, seq: int, at: float, **details: Any) -> None:
        self.problems.append(problem(rule, f"seq {seq} at {stamp(at)}: {message}", seq=seq, at=at, **details))


def check_events(events: list[Any], owner: dict[int, Op], ops: list[Op] = (), slack: float = 0.01) -> Oracle:  # type: ignore[assignment]
    """Replay ``events`` (seq order) with ``owner`` (event seq -> the op that caused it, from
    the cross-check) and ``ops`` (the history's operations) and collect every rule the store broke."""
    o = Oracle(slack=slack)
    for op in ops:
        if op.f == "msg_ack" and op.outcome != "fail":
            o.acks[(op.session, op.args.get("message_id"))].append(op)
    for ev in events:
        if ev.kind == "leave":
            o.leave_at[ev.session_id] = (ev.seq, ev.at)
    for ev in events:
        if o.pending_cap and not (ev.kind == "autonomy" and ev.at == o.pending_cap[2]):
            _close_cap(o)
        handler = _HANDLERS.get(ev.kind)
        if handler is not None:
            _departed(o, ev)
            handler(o, ev, _cause(owner.get(ev.seq)))
    if o.pending_cap:
        _close_cap(o)
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
    s = o.sessions.get(ev.session_id)
    if s is None:  # a session the events never saw join (a store reused across runs): not judged
        return
    o.checked["sessions"] += 1
    if not s.live:
        o.fail("SR4", f"{ev.kind} event for session {ev.session_id}, which had left", ev.seq, ev.at,
               session=ev.session_id)


# -- sessions, rooms, autonomy -------------------------------------------------------------------------


def _members(o: Oracle, seq: int) -> None:
    o.member_tl.append((seq, {sid: frozenset(s.rooms) for sid, s in o.sessions.items() if s.live}))


def _join(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, p, seq, at = ev.session_id, ev.payload, ev.seq, ev.at
    args = op.args if op is not None and op.f == "room_join" else None
    key = ((args or {}).get("harness_key") or p.get("harness_key") or None)
    key = key.lower() if isinstance(key, str) else None
    live_with_key = next((i for i, s in o.sessions.items() if s.live and key and s.harness_key == key), None)
    prev = o.sessions.get(sid) if sid in o.sessions and o.sessions[sid].live else None
    o.checked["sessions"] += 1
    if live_with_key is not None and live_with_key != sid:
        o.fail("SR2", f"join with the harness key of live session {live_with_key} made session {sid}", seq, at,
               session=sid, expected=live_with_key)
    elif live_with_key is None and sid in o.sessions:
        o.fail("SR2", f"a join with no live session of its harness key reused session id {sid}", seq, at, session=sid)
    rooms = set(p.get("rooms") or ())
    asked = set((args or {}).get("extra_rooms") or ()) | ({args["room"]} if args and args.get("room") else set())
    repo = {r for r in rooms if r.startswith("repo:")}
    want = (prev.rooms if prev else set()) | asked | repo
    if args is not None and (rooms != want or not repo):
        o.fail("SR1", f"join of session {sid} left it in rooms {sorted(rooms)}; it was in "
               f"{sorted(prev.rooms) if prev else []} and asked for {sorted(asked)} (and its repo room)", seq, at,
               session=sid, answered=sorted(rooms), expected=sorted(want))
    tags = (args or {}).get("tags") if args is not None else p.get("tags")
    tagset = frozenset(tags) if tags is not None else (prev.tags if prev else frozenset())
    # autonomy: the model's level, the client's ask, the caps of the rooms it is now in
    asked_level = (args or {}).get("autonomy")
    stored = prev.autonomy if prev else None
    if stored is None:
        level = asked_level or "notify"
    else:
        level = asked_level if asked_level and LEVEL[asked_level] > LEVEL[stored] else stored
    caps = [o.caps[r] for r in want if r in o.caps]
    cap = min(caps, key=LEVEL.__getitem__) if caps else "wake"
    if LEVEL[level] > LEVEL[cap]:
        level = cap
    if args is not None:
        o.checked["autonomy"] += 1
        if p.get("autonomy") != level:
            rule = "AU1" if stored is None else "AU2"
            o.fail(rule, f"join of session {sid} set autonomy {p.get('autonomy')}; the model says {level} "
                   f"(held {stored}, asked {asked_level}, lowest cap {cap})", seq, at, session=sid,
                   answered=p.get("autonomy"), expected=level)
    o.sessions[sid] = Sess(set(want if args is not None else rooms), tagset, p.get("cwd", prev.cwd if prev else None),
                           str(p.get("autonomy") or level), key)
    _members(o, seq)


def _leave(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, seq, at = ev.session_id, ev.seq, ev.at
    s = o.sessions.get(sid)
    o.checked["leave-effects"] += 1
    left = sorted(o.held_paths.get(sid, ()))
    if left:
        o.fail("LV1", f"session {sid} left ({ev.payload.get('reason')}) still holding leases on {left}", seq, at,
               session=sid, paths=left)
    waiting = sorted(o.unread.get(sid, ()))
    if waiting:
        o.fail("LV2", f"session {sid} left with deliveries of messages {waiting[:10]} still unread", seq, at,
               session=sid, message_ids=waiting[:50])
    if s is not None and set(ev.payload.get("rooms") or ()) != s.rooms:
        o.fail("LV3", f"session {sid} left rooms {sorted(ev.payload.get('rooms') or ())}, but was in {sorted(s.rooms)}",
               seq, at, session=sid)
    for path in left:  # count them gone, so the rest of the run is judged on its own
        o.leases[path].pop(sid, None)
        o.lease_tl[path].append((seq, tuple(o.leases[path].values())))
    o.held_paths.pop(sid, None)
    if s is not None:
        s.live = False
        s.rooms = set()
    _members(o, seq)


def _leave_room(o: Oracle, ev: Any, op: Op | None) -> None:
    s = o.sessions.get(ev.session_id)
    room = ev.payload.get("room")
    o.checked["sessions"] += 1
    if s is None or room not in s.rooms:
        o.fail("SR3", f"session {ev.session_id} left room {room}, which it was not in", ev.seq, ev.at,
               session=ev.session_id)
    if s is not None:
        s.rooms.discard(room)
    _members(o, ev.seq)


def _cap(o: Oracle, ev: Any, op: Op | None) -> None:
    room, level = ev.payload.get("room"), ev.payload.get("autonomy")
    o.caps[room] = level
    o.pending_cap = (room, level, ev.at, ev.seq)


def _close_cap(o: Oracle) -> None:
    room, level, at, seq = o.pending_cap  # type: ignore[misc]
    o.pending_cap = None
    o.checked["autonomy"] += 1
    above = sorted(sid for sid, s in o.sessions.items() if s.live and room in s.rooms and LEVEL[s.autonomy] > LEVEL[level])
    if above:
        o.fail("AU3", f"room {room} was capped at {level}, yet sessions {above} stayed above it", seq, at, room=room,
               sessions=above)


def _autonomy(o: Oracle, ev: Any, op: Op | None) -> None:
    s = o.sessions.get(ev.session_id)
    o.checked["autonomy"] += 1
    if s is not None and ev.payload.get("from") != s.autonomy:
        o.fail("AU4", f"session {ev.session_id}'s autonomy moved from {ev.payload.get('from')}, but it held "
               f"{s.autonomy}", ev.seq, ev.at, session=ev.session_id)
    if s is not None and str(ev.payload.get("reason", "")).startswith("cap:"):
        s.autonomy = str(ev.payload.get("to"))  # a rejoin's own change is judged at its join


# -- messages -----------------------------------------------------------------------------------------


def _matches(pattern: str, path: str, cwd: str | None) -> bool:
    forms = [path, os.path.basename(path)] + ([os.path.relpath(path, cwd)] if cwd else [])
    return any(fnmatch.fnmatchcase(form, pattern) for form in forms)


def recipients(o: Oracle, sender: str, to: str, at: float) -> tuple[str, set[str]]:
    """The rule and the recipients a selector must resolve to, from the model's state now."""
    me = o.sessions.get(sender)
    mine = me.rooms if me else set()
    peers = {sid for sid, s in o.sessions.items() if s.live and sid != sender and s.rooms & mine}
    if to == "*":
        return "SE1", peers
    if to.startswith("tag:"):
        return "SE2", {sid for sid in peers if to[4:] in o.sessions[sid].tags}
    if to.startswith("file:"):
        return "SE3", {sid for sid in peers if any(
            _matches(to[5:], path, o.sessions[sid].cwd) for path in o.held_paths.get(sid, ())
            if o.leases[path][sid].expires_at > at)}
    target = o.sessions.get(to)
    return "SE4", {to} if target is not None and target.live else set()


def _send(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, p, seq, at = ev.session_id, ev.payload, ev.seq, ev.at
    mid = p.get("message_id")
    args = op.args if op is not None and op.f == "msg_send" else {}
    to = args.get("to", p.get("selector"))
    got = set(p.get("recipients") or {})
    if isinstance(to, str) and sid in o.sessions:
        rule, want = recipients(o, sid, to, at)
        o.checked["selectors"] += 1
        if got != want:
            extra, missing = sorted(got - want), sorted(want - got)
            by = f" ({op.describe()})" if op else ""
            o.fail(rule, f"message {mid} from {sid} to {to!r}{by} was delivered to {sorted(got)}; the model resolves "
                   f"{sorted(want)} (extra {extra}, missing {missing})", seq, at, message_id=mid, session=sid,
                   answered=sorted(got), expected=sorted(want), op=op.describe() if op else None)
    me = o.sessions.get(sid)
    if me is not None and set(p.get("rooms") or ()) != me.rooms:
        o.fail("SE5", f"message {mid} was stored in rooms {sorted(p.get('rooms') or ())}; its sender was in "
               f"{sorted(me.rooms)}", seq, at, message_id=mid)
    ttl = args.get("ttl_s", p.get("ttl_s")) if op is not None else p.get("ttl_s")
    expires = at + float(ttl) if ttl is not None else None
    if op is not None or "ttl_s" in p:
        o.checked["expiry"] += 1
        stored = p.get("expires_at", expires)
        if (stored is None) != (expires is None) or (expires is not None and abs(stored - expires) > EPS):
            o.fail("EX1", f"message {mid} was stored to expire at {stored}; sent with ttl_s {ttl} at {at} it expires "
                   f"at {expires}", seq, at, message_id=mid, answered=stored, expected=expires)
    elif "expires_at" in p:
        expires = p["expires_at"]
    o.expires[mid] = expires
    o.sender[mid] = sid
    o.sent_by[sid].append((mid, seq))
    for room in p.get("rooms") or ():
        o.room_msgs[room].append((mid, seq))
    for rid, initial in (p.get("recipients") or {}).items():
        o.state[(mid, rid)] = initial
        o.pair_tl[(mid, rid)].append((seq, initial))
        if initial in UNREAD:
            o.unread[rid].add(mid)
            o.unread_tl[rid].append((seq, frozenset(o.unread[rid])))


def _delivery(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, p, seq, at = ev.session_id, ev.payload, ev.seq, ev.at
    to = p.get("to")
    items = [int(i[0]) for i in p.get("items") or ()]
    if to == "read":
        _read(o, ev, op, items)
    elif to == "expired":
        leave = o.leave_at.get(sid)
        in_leave = leave is not None and leave[0] > seq and leave[1] == at
        for mid in items:
            o.checked["expiry"] += 1
            exp = o.expires.get(mid)
            if not in_leave and (exp is None or exp > at + EPS):
                when = "it has no ttl_s" if exp is None else f"its ttl_s runs to {stamp(exp)}"
                o.fail("EX2", f"message {mid} to {sid} expired unread at {stamp(at)}, but {when} and its recipient "
                       "did not leave: a lost message", seq, at, message_id=mid, session=sid, expected=exp)
    elif to == "acked":
        for mid in items:  # by the recipient's own ack of that message, inside its window
            o.checked["ack"] += 1
            mine = o.acks.get((sid, mid), ())
            if not any(a.start - o.slack <= at and (a.end is None or a.outcome == "info" or at <= a.end + o.slack)
                       for a in mine):
                by = op.describe() if op else "no operation"
                o.fail("AK1", f"message {mid} to {sid} was acked, with no msg_ack of it by {sid} around; the event "
                       f"went to {by}", seq, at, message_id=mid, session=sid)
    for mid in items:
        o.state[(mid, sid)] = to
        o.pair_tl[(mid, sid)].append((seq, to))
        if to not in UNREAD:
            o.unread[sid].discard(mid)
    o.unread_tl[sid].append((seq, frozenset(o.unread[sid])))


def _read(o: Oracle, ev: Any, op: Op | None, items: list[int]) -> None:
    sid, seq, at = ev.session_id, ev.seq, ev.at
    o.checked["recv-order"] += 1
    if op is None or op.f != "msg_recv" or op.session != sid:
        by = op.describe() if op else "no operation"
        o.fail("RV4", f"deliveries of messages {items[:10]} to {sid} were marked read by {by}", seq, at,
               session=sid, message_ids=items)
        return
    overdue = [m for m in items if (o.expires.get(m) is not None and o.expires[m] <= at + EPS)]
    if overdue:
        o.fail("EX3", f"{op.describe()} read messages {overdue[:10]} whose ttl_s had passed", seq, at, session=sid,
               message_ids=overdue)
    limit = int(op.args.get("limit") or 100)
    waiting = sorted(m for m in o.unread.get(sid, ()) if o.expires.get(m) is None or o.expires[m] > at + EPS)
    want = waiting[:limit]
    if sorted(items) != want:
        o.fail("RV1", f"{op.describe()} (limit {limit}) marked read {sorted(items)[:20]}; the oldest unread were "
               f"{want[:20]} of {len(waiting)}", seq, at, session=sid, answered=sorted(items)[:50], expected=want[:50])
    elif op.outcome == "ok":
        answer = list((op.result or {}).get("message_ids") or [])
        if answer != want:
            o.fail("RV2", f"{op.describe()} answered {answer[:20]}; the model reads {want[:20]}, oldest first",
                   seq, at, session=sid, answered=answer[:50], expected=want[:50])


# -- leases -------------------------------------------------------------------------------------------


def _put(o: Oracle, path: str, hold: Hold) -> None:
    o.leases[path][hold.session] = hold
    o.held_paths[hold.session].add(path)


def _drop(o: Oracle, path: str, sid: str) -> Hold | None:
    o.held_paths[sid].discard(path)
    return o.leases[path].pop(sid, None)


def _grant(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, p, seq, at, path = ev.session_id, ev.payload, ev.seq, ev.at, ev.path
    args = op.args if op is not None and op.f == "lease_claim" else None
    mode = str(p.get("mode"))
    expires = float(p.get("expires_at", at))
    ttl = expires - at
    if args is not None:
        o.checked["lease-ttl"] += 1
        ttl = float(args.get("ttl_s") or CLAIM_TTL_S)
        asked = args.get("mode") or "exclusive"
        if abs(expires - (at + ttl)) > EPS:
            o.fail("LT1", f"{path}: {op.describe()} asked ttl_s {ttl}; granted at {stamp(at)} until {stamp(expires)}, "
                   f"not {stamp(at + ttl)}", seq, at, path=path, session=sid, answered=expires, expected=at + ttl)
        if mode != asked:
            o.fail("LT4", f"{path}: {op.describe()} asked {asked}, was granted {mode}", seq, at, path=path, session=sid)
        expires, mode = at + ttl, asked
    for h in o.leases[path].values():  # (a conflict by the store's own expiry is lease-exclusive's)
        if (h.session != sid and h.store_expires <= at < h.expires_at - EPS
                and (mode == "exclusive" or h.mode == "exclusive")):
            o.fail("LT3", f"{path}: session {sid} was granted {mode} while session {h.session} held it {h.mode} "
                   f"until {stamp(h.expires_at)} by the ttl_s it asked", seq, at, path=path, session=sid,
                   other=h.session)
    _put(o, path, Hold(sid, mode, int(p.get("token") or 0), expires, ttl, float(p.get("expires_at", expires))))
    o.lease_tl[path].append((seq, tuple(o.leases[path].values())))


def _renew(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, p, seq, at, path = ev.session_id, ev.payload, ev.seq, ev.at, ev.path
    mine = o.leases[path].get(sid)
    o.checked["lease-rules"] += 1
    if mine is not None and mine.expires_at <= at + EPS < mine.store_expires:  # (else lease-release-held's)
        o.fail("LR4", f"{path}: session {sid} renewed at {stamp(at)}, but its lease ran out at "
               f"{stamp(mine.expires_at)} by the ttl_s its client asked", seq, at, path=path, session=sid)
    expires = float(p.get("expires_at", at))
    ttl = expires - at
    if op is not None and op.f == "lease_renew" and mine is not None:
        o.checked["lease-ttl"] += 1
        ttl = float(op.args["ttl_s"]) if op.args.get("ttl_s") is not None else mine.ttl
        if abs(expires - (at + ttl)) > EPS:
            o.fail("LT2", f"{path}: {op.describe()} renewed until {stamp(expires)}, not {stamp(at + ttl)} "
                   f"(ttl_s {ttl})", seq, at, path=path, session=sid, answered=expires, expected=at + ttl)
        expires = at + ttl
    _put(o, path, Hold(sid, mine.mode if mine else str(p.get("mode")), int(p.get("token") or 0), expires, ttl,
                       float(p.get("expires_at", expires))))
    o.lease_tl[path].append((seq, tuple(o.leases[path].values())))


def _release(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, seq, at, path = ev.session_id, ev.seq, ev.at, ev.path
    mine = _drop(o, path, sid)
    if ev.payload.get("reason") == "release":
        o.checked["lease-rules"] += 1
        if mine is not None and mine.expires_at <= at + EPS < mine.store_expires:  # (else lease-release-held's)
            o.fail("LR4", f"{path}: session {sid} released at {stamp(at)}, but its lease ran out at "
                   f"{stamp(mine.expires_at)} by the ttl_s its client asked", seq, at, path=path, session=sid)
    o.lease_tl[path].append((seq, tuple(o.leases[path].values())))


def _expire(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, seq, at, path = ev.session_id, ev.seq, ev.at, ev.path
    mine = _drop(o, path, sid)
    o.checked["lease-ttl"] += 1
    if mine is not None and mine.expires_at > at + EPS and mine.store_expires <= at:  # (else lease-release-held's)
        o.fail("LT3", f"{path}: the lease of session {sid} was swept at {stamp(at)}, before {stamp(mine.expires_at)} "
               "(the ttl_s its client asked)", seq, at, path=path, session=sid, expected=mine.expires_at)
    o.lease_tl[path].append((seq, tuple(o.leases[path].values())))


_HANDLERS = {
    "join": _join, "leave": _leave, "leave_room": _leave_room, "cap": _cap, "autonomy": _autonomy,
    "send": _send, "delivery": _delivery, "lease_grant": _grant, "lease_renew": _renew,
    "lease_release": _release, "lease_expire": _expire,
}


@dataclass
class Commits:
    """When each event may have committed: no earlier than its ``at`` (the transaction's start)
    and no later than the completion of the op that caused it, or of any later event's op
    (commits come in seq order). A read's snapshot may fall anywhere in its window, so a state
    is possible for a read if it may have been committed and not yet replaced inside it."""

    seqs: list[int]
    earliest: list[float]  # prefix max of at
    latest: list[float]  # suffix min of the owning ops' completions
    cache: dict[int, tuple[list[float], list[float]]] = field(default_factory=dict)

    @classmethod
    def of(cls, events: list[Any], owner: dict[int, Op], slack: float) -> Commits:
        seqs = [e.seq for e in events]
        earliest, latest, top = [], [0.0] * len(events), float("-inf")
        for e in events:
            top = max(top, e.at)
            earliest.append(top)
        low = float("inf")
        for i in range(len(events) - 1, -1, -1):
            op = owner.get(events[i].seq)
            if op is not None and op.end is not None:
                low = min(low, op.end + slack)
            latest[i] = max(low, earliest[i])
        return cls(seqs, earliest, latest)

    def span(self, seq: int) -> tuple[float, float]:
        i = bisect.bisect_left(self.seqs, seq)
        return self.earliest[i], self.latest[i]


def window(timeline: list[tuple[int, Any]], lo: float, hi: float, empty: Any,
           commits: Commits) -> list[tuple[Any, float, float]]:
    """The states a timeline (``(seq, state)`` in seq order) may have shown a read whose
    snapshot fell in [lo, hi], each with the stretch of the window it may have held:
    ``(state, from, to)``. Before the first entry the state is ``empty``."""
    cached = commits.cache.get(id(timeline))
    if cached is None or len(cached[0]) != len(timeline):
        spans = [commits.span(seq) for seq, _ in timeline]
        cached = commits.cache[id(timeline)] = ([a for a, _ in spans], [b for _, b in spans])
    earliest, latest = cached
    i = bisect.bisect_left(latest, lo)  # entries before i surely committed before lo
    out = []
    state, start = (timeline[i - 1][1] if i else empty), lo
    while True:
        nxt_at = earliest[i] if i < len(timeline) else float("inf")
        nxt_latest = latest[i] if i < len(timeline) else float("inf")
        out.append((state, start, max(start, min(hi, nxt_latest))))
        if i >= len(timeline) or nxt_at > hi:
            return out
        state, start = timeline[i][1], max(lo, nxt_at)
        i += 1
