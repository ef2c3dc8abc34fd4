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

from typing import Any

from .model import stamp
from .operation import Op
from . import oracle_wake
from .cover import glob_reaches
from .oracle_leases import on_expire, on_grant, on_release, on_renew
from .oracle_state import EPS, LEVEL, READ, UNREAD, Hold, Oracle, Sess
from .rules import GROUPS
from .window import Commits, window

__all__ = ["GROUPS", "UNREAD", "Commits", "Hold", "Oracle", "check_events", "recipients", "window"]


def check_events(events: list[Any], owner: dict[int, Op], ops: list[Op] = (), slack: float = 0.01) -> Oracle:  # type: ignore[assignment]
    """Replay ``events`` (seq order) with ``owner`` (event seq -> the op that caused it, from
    the cross-check) and ``ops`` (the history's operations) and collect every rule the store broke."""
    o = Oracle(slack=slack)
    starts: dict[str, list[float]] = {}
    for op in ops:
        if op.f == "msg_ack" and op.outcome != "fail":
            o.acks[(op.session, op.args.get("message_id"))].append(op)
        if op.session is not None and op.f != "wake":
            starts.setdefault(op.session, []).append(op.start)
        if op.session is not None and op.f in oracle_wake.TOUCHING and op.outcome == "ok" and op.end is not None:
            o.touches.setdefault(op.session, []).append((op.start, op.end, op.f))
    o.tool_starts = {sid: sorted(s) for sid, s in starts.items()}
    for spans in o.touches.values():
        spans.sort()
    _key_spans(o, ops)
    for ev in events:
        if ev.kind == "leave":
            o.leave_at[ev.session_id] = (ev.seq, ev.at)
        if "store_at" in ev.payload:
            o.retimed = True
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


def _key_spans(o: Oracle, ops: list[Op]) -> None:
    """Each harness key's agent process ran at least from its first op's invoke to its last
    op's completion (a key is one process's: a replacement gets a new one)."""
    for op in ops:
        key = op.args.get("harness_key") if op.f == "room_join" else None
        if isinstance(key, str) and op.outcome == "ok" and op.session:
            o.key_of[op.session] = key.lower()
    for op in ops:
        key = o.key_of.get(op.session) if op.session else None
        if key is None or op.end is None:
            continue
        first, last = o.key_span.get(key, (op.start, op.end))
        o.key_span[key] = (min(first, op.start), max(last, op.end))


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
    refused = stored is not None and asked_level is not None and LEVEL[asked_level] < LEVEL[stored]
    clamped = LEVEL[level] > LEVEL[cap]
    if clamped:
        level = cap
    if args is not None:
        o.checked["autonomy"] += 1
        if p.get("autonomy") != level:
            rule = "AU1" if stored is None else "AU2"
            o.fail(rule, f"join of session {sid} set autonomy {p.get('autonomy')}; the model says {level} "
                   f"(held {stored}, asked {asked_level}, lowest cap {cap})", seq, at, session=sid,
                   answered=p.get("autonomy"), expected=level)
        warned = (op.result or {}).get("warned") if op is not None and op.outcome == "ok" else None
        if warned is not None and warned != (refused or clamped):
            o.fail("AU6", f"join of session {sid} ({op.describe()}) {'warned' if warned else 'did not warn'}; held "  # type: ignore[union-attr]
                   f"{stored}, asked {asked_level}, lowest cap {cap}: a warning is due exactly when a lower level is "
                   "refused or a level clamped", seq, at, session=sid, answered=warned, expected=refused or clamped)
    if args is not None and "label" in args:
        o.label[sid] = args["label"]
    known = "wake_lever" in p
    lever = p.get("wake_lever") or (prev.lever if prev else None)  # a rejoin without one keeps the old
    o.sessions[sid] = Sess(set(want if args is not None else rooms), tagset, p.get("cwd", prev.cwd if prev else None),
                           str(p.get("autonomy") or level), key, lever=lever, lever_known=known)
    oracle_wake.levels(o, sid, seq)
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
        oracle_wake.levels(o, sid, seq)
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
        rest = ev.payload.get("rooms")
        if rest is not None and set(rest) != s.rooms:
            o.fail("SR3", f"session {ev.session_id} left room {room} and was left in rooms {sorted(rest)}; the model "
                   f"keeps {sorted(s.rooms)}", ev.seq, ev.at, session=ev.session_id, answered=sorted(rest),
                   expected=sorted(s.rooms))
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
    reason = str(ev.payload.get("reason", ""))
    if s is not None and reason.startswith("cap:"):
        room, to = reason[4:], str(ev.payload.get("to"))
        cap = o.caps.get(room)
        if not s.live or room not in s.rooms or cap is None or to != cap or LEVEL[s.autonomy] <= LEVEL[cap]:
            o.fail("AU3", f"the cap of room {room} moved session {ev.session_id} from {s.autonomy} to {to}; only a "
                   f"live member above the cap ({cap}) is lowered, to it (member: {room in s.rooms}, live: {s.live})",
                   ev.seq, ev.at, session=ev.session_id, room=room)
        s.autonomy = to  # a rejoin's own change is judged at its join
        oracle_wake.levels(o, ev.session_id, ev.seq)


# -- messages -----------------------------------------------------------------------------------------


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
            glob_reaches(to[5:], path, o.sessions[sid].cwd) for path in o.held_paths.get(sid, ())
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
    warned = (op.result or {}).get("warned") if op is not None and op.outcome == "ok" else None
    if warned is not None:
        o.checked["selectors"] += 1
        if warned != (not got):
            o.fail("SE6", f"message {mid} ({op.describe()}) reached {len(got)} recipients and "  # type: ignore[union-attr]
                   f"{'warned' if warned else 'did not warn'}: a send warns exactly when it matched nobody", seq, at,
                   message_id=mid, answered=warned, expected=not got)
    me = o.sessions.get(sid)
    if me is not None and set(p.get("rooms") or ()) != me.rooms:
        o.fail("SE5", f"message {mid} was stored in rooms {sorted(p.get('rooms') or ())}; its sender was in "
               f"{sorted(me.rooms)}", seq, at, message_id=mid)
    _first_states(o, ev)
    ttl = args.get("ttl_s") if args else p.get("ttl_s")  # the client's: none given, none to have
    expires = at + float(ttl) if ttl is not None else None
    if args and "ttl_s" in p and (p["ttl_s"] is None) != (ttl is None) or (
            args and p.get("ttl_s") is not None and ttl is not None and abs(float(p["ttl_s"]) - float(ttl)) > EPS):
        o.fail("EX1", f"message {mid}'s send event records ttl_s {p.get('ttl_s')}; {op.describe()} sent it with "  # type: ignore[union-attr]
               f"ttl_s {ttl}", seq, at, message_id=mid, answered=p.get("ttl_s"), expected=ttl)
    if op is not None or "ttl_s" in p:
        o.checked["expiry"] += 1
        stored = p.get("expires_at", expires)
        if "store_at" in p and stored is not None and expires is not None:  # retimed: compare on the store's clock
            stored_span = float(p.get("store_expires_at", stored)) - float(p["store_at"])
            bad = abs(stored_span - float(ttl)) > EPS  # type: ignore[arg-type]
            expires = stored if not bad else expires
        else:
            bad = (stored is None) != (expires is None) or (expires is not None and abs(stored - expires) > EPS)
        if bad:
            o.fail("EX1", f"message {mid} was stored to expire at {stored}; sent with ttl_s {ttl} at {at} it expires "
                   f"at {expires}", seq, at, message_id=mid, answered=stored, expected=expires)
    elif "expires_at" in p:
        expires = p["expires_at"]
    o.expires[mid] = expires
    o.sender[mid] = sid
    if args:
        o.subject[mid] = (args.get("subject"), args.get("to"))
    o.sent_by[sid].append((mid, seq))
    for room in p.get("rooms") or ():
        o.room_msgs[room].append((mid, seq))
    for rid, initial in (p.get("recipients") or {}).items():
        total, read, last = o.inbox[rid]  # last: the latest on the store's clock (which a jump may move back)
        made = float(p.get("store_at", at))
        o.inbox[rid] = (total + 1, read + (initial in READ), made if last is None else max(last, made))
        o.inbox_tl[rid].append((seq, o.inbox[rid]))
        o.state[(mid, rid)] = initial
        o.pair_tl[(mid, rid)].append((seq, initial))
        oracle_wake.sent(o, mid, rid, initial, seq, at)
        if initial in UNREAD:
            o.unread[rid].add(mid)
            o.unread_tl[rid].append((seq, frozenset(o.unread[rid])))


def _first_states(o: Oracle, ev: Any) -> None:
    """AU5: a delivery starts undeliverable to a recipient at wake with no wake lever, else stored."""
    for rid, initial in (ev.payload.get("recipients") or {}).items():
        r = o.sessions.get(rid)
        if r is None or not r.live or not r.lever_known:
            continue
        o.checked["autonomy"] += 1
        want = "undeliverable" if r.autonomy == "wake" and not r.lever else "stored"
        if initial != want:
            o.fail("AU5", f"message {ev.payload.get('message_id')} reached {rid} as {initial}; at {r.autonomy} with "
                   f"wake lever {r.lever!r} it starts {want}", ev.seq, ev.at, session=rid,
                   message_id=ev.payload.get("message_id"), answered=initial, expected=want)


def _delivery(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, p, seq, at = ev.session_id, ev.payload, ev.seq, ev.at
    to = p.get("to")
    items = [int(i[0]) for i in p.get("items") or ()]
    if to == "read":
        _read(o, ev, op, items)
    elif to == "offered":
        oracle_wake.offered(o, ev, op, items)
    elif to == "accepted":
        oracle_wake.accepted(o, ev, op, items)
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
    if to in READ:
        now_read = sum(1 for mid in items if o.state.get((mid, sid)) not in READ)
        if now_read:
            total, read, last = o.inbox[sid]
            o.inbox[sid] = (total, read + now_read, last)
            o.inbox_tl[sid].append((seq, o.inbox[sid]))
    for mid in items:
        o.state[(mid, sid)] = to
        o.pair_tl[(mid, sid)].append((seq, to))
        oracle_wake.moved(o, mid, sid, to, seq, at)
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


_HANDLERS = {
    "join": _join, "leave": _leave, "leave_room": _leave_room, "cap": _cap, "autonomy": _autonomy,
    "send": _send, "delivery": _delivery, "lease_grant": on_grant, "lease_renew": on_renew,
    "lease_release": on_release, "lease_expire": on_expire, "wake": oracle_wake.retried,
}
