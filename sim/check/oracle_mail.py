"""The oracle's rules of messages and deliveries (SE*, AU5, EX*, RV1, RV2, RV4, AK1): the send
and delivery events, judged against the model's :class:`Mail`, which this module alone writes
(``sim/check/oracle_state.py``); a selector's recipients from the model's rooms and leases."""

from __future__ import annotations

from typing import Any

from . import oracle_wake
from .cover import glob_reaches
from .model import stamp
from .operation import Op
from .oracle_state import EPS, READ, UNREAD, Oracle


def prepare(o: Oracle, ops: list[Op]) -> None:
    """Before the replay: every msg_ack that did not fail, by (session, message id)."""
    for op in ops:
        if op.f == "msg_ack" and op.outcome != "fail":
            o.mail.acks[(op.session, op.args.get("message_id"))].append(op)


def recipients(o: Oracle, sender: str, to: str, at: float) -> tuple[str, set[str]]:
    """The rule and the recipients a selector must resolve to, from the model's state now."""
    me = o.rooms.sessions.get(sender)
    mine = me.rooms if me else set()
    peers = {sid for sid, s in o.rooms.sessions.items() if s.live and sid != sender and s.rooms & mine}
    if to == "*":
        return "SE1", peers
    if to.startswith("tag:"):
        return "SE2", {sid for sid in peers if to[4:] in o.rooms.sessions[sid].tags}
    if to.startswith("file:"):
        return "SE3", {sid for sid in peers if any(
            glob_reaches(to[5:], path, o.rooms.sessions[sid].cwd) for path in o.lease.held_paths.get(sid, ())
            if o.lease.leases[path][sid].expires_at > at)}
    target = o.rooms.sessions.get(to)
    return "SE4", {to} if target is not None and target.live else set()


def on_send(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, p, seq, at = ev.session_id, ev.payload, ev.seq, ev.at
    mid = p.get("message_id")
    args = op.args if op is not None and op.f == "msg_send" else {}
    to = args.get("to", p.get("selector"))
    got = set(p.get("recipients") or {})
    if isinstance(to, str) and sid in o.rooms.sessions:
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
    me = o.rooms.sessions.get(sid)
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
    o.mail.expires[mid] = expires
    o.mail.sender[mid] = sid
    if args:
        o.mail.subject[mid] = (args.get("subject"), args.get("to"))
    o.mail.sent_by[sid].append((mid, seq))
    for room in p.get("rooms") or ():
        o.mail.room_msgs[room].append((mid, seq))
    for rid, initial in (p.get("recipients") or {}).items():
        total, read, last = o.mail.inbox[rid]  # last: the latest on the store's clock (which a jump may move back)
        made = float(p.get("store_at", at))
        o.mail.inbox[rid] = (total + 1, read + (initial in READ), made if last is None else max(last, made))
        o.mail.inbox_tl[rid].append((seq, o.mail.inbox[rid]))
        o.mail.state[(mid, rid)] = initial
        o.mail.pair_tl[(mid, rid)].append((seq, initial))
        oracle_wake.sent(o, mid, rid, initial, seq, at)
        if initial in UNREAD:
            o.mail.unread[rid].add(mid)
            o.mail.unread_tl[rid].append((seq, frozenset(o.mail.unread[rid])))


def _first_states(o: Oracle, ev: Any) -> None:
    """AU5: a delivery starts undeliverable to a recipient at wake with no wake lever, else stored."""
    for rid, initial in (ev.payload.get("recipients") or {}).items():
        r = o.rooms.sessions.get(rid)
        if r is None or not r.live or not r.lever_known:
            continue
        o.checked["autonomy"] += 1
        want = "undeliverable" if r.autonomy == "wake" and not r.lever else "stored"
        if initial != want:
            o.fail("AU5", f"message {ev.payload.get('message_id')} reached {rid} as {initial}; at {r.autonomy} with "
                   f"wake lever {r.lever!r} it starts {want}", ev.seq, ev.at, session=rid,
                   message_id=ev.payload.get("message_id"), answered=initial, expected=want)


def on_delivery(o: Oracle, ev: Any, op: Op | None) -> None:
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
        leave = o.rooms.leave_at.get(sid)
        in_leave = leave is not None and leave[0] > seq and leave[1] == at
        for mid in items:
            o.checked["expiry"] += 1
            exp = o.mail.expires.get(mid)
            if not in_leave and (exp is None or exp > at + EPS):
                when = "it has no ttl_s" if exp is None else f"its ttl_s runs to {stamp(exp)}"
                o.fail("EX2", f"message {mid} to {sid} expired unread at {stamp(at)}, but {when} and its recipient "
                       "did not leave: a lost message", seq, at, message_id=mid, session=sid, expected=exp)
    elif to == "acked":
        for mid in items:  # by the recipient's own ack of that message, inside its window
            o.checked["ack"] += 1
            mine = o.mail.acks.get((sid, mid), ())
            if not any(a.start - o.slack <= at and (a.end is None or a.outcome == "info" or at <= a.end + o.slack)
                       for a in mine):
                by = op.describe() if op else "no operation"
                o.fail("AK1", f"message {mid} to {sid} was acked, with no msg_ack of it by {sid} around; the event "
                       f"went to {by}", seq, at, message_id=mid, session=sid)
    if to in READ:
        now_read = sum(1 for mid in items if o.mail.state.get((mid, sid)) not in READ)
        if now_read:
            total, read, last = o.mail.inbox[sid]
            o.mail.inbox[sid] = (total, read + now_read, last)
            o.mail.inbox_tl[sid].append((seq, o.mail.inbox[sid]))
    for mid in items:
        o.mail.state[(mid, sid)] = to
        o.mail.pair_tl[(mid, sid)].append((seq, to))
        oracle_wake.moved(o, mid, sid, to, seq, at)
        if to not in UNREAD:
            o.mail.unread[sid].discard(mid)
    o.mail.unread_tl[sid].append((seq, frozenset(o.mail.unread[sid])))


def _read(o: Oracle, ev: Any, op: Op | None, items: list[int]) -> None:
    sid, seq, at = ev.session_id, ev.seq, ev.at
    o.checked["recv-order"] += 1
    if op is None or op.f != "msg_recv" or op.session != sid:
        by = op.describe() if op else "no operation"
        o.fail("RV4", f"deliveries of messages {items[:10]} to {sid} were marked read by {by}", seq, at,
               session=sid, message_ids=items)
        return
    overdue = [m for m in items if (o.mail.expires.get(m) is not None and o.mail.expires[m] <= at + EPS)]
    if overdue:
        o.fail("EX3", f"{op.describe()} read messages {overdue[:10]} whose ttl_s had passed", seq, at, session=sid,
               message_ids=overdue)
    limit = int(op.args.get("limit") or 100)
    waiting = sorted(m for m in o.mail.unread.get(sid, ()) if o.mail.expires.get(m) is None or o.mail.expires[m] > at + EPS)
    want = waiting[:limit]
    if sorted(items) != want:
        o.fail("RV1", f"{op.describe()} (limit {limit}) marked read {sorted(items)[:20]}; the oldest unread were "
               f"{want[:20]} of {len(waiting)}", seq, at, session=sid, answered=sorted(items)[:50], expected=want[:50])
    elif op.outcome == "ok":
        answer = list((op.result or {}).get("message_ids") or [])
        if answer != want:
            o.fail("RV2", f"{op.describe()} answered {answer[:20]}; the model reads {want[:20]}, oldest first",
                   seq, at, session=sid, answered=answer[:50], expected=want[:50])
