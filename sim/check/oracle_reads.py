"""The oracle's judgement of operations that write no event: reads, denied claims, refused
renewals, releases and acks. Each is judged against every state the model held between the
events that bracket its wall window [invoke - slack, completion + slack]: an answer is right
if it matches the model at *some* moment of that window (time included: a lease or a
message's ttl_s may run out inside it), and a violation when it matches none.

Rules: ``sim/check/rules.py`` (SR4's refusals, RV3, AK2, AK3, LR1-LR3, RD1-RD7, and WK3 of a
wake lever's look, which writes an event only when it signals).
"""

from __future__ import annotations

from typing import Any

from .cover import contend
from .model import Problem
from .operation import Op
from .oracle_leases import file_slash, files_of
from .oracle_state import UNREAD, Hold, Oracle
from .oracle_wake import judge_look
from .window import Commits, window
from .rules import problem

NOTHING: tuple[Hold, ...] = ()


def _moments(holds: tuple[Hold, ...], a: float, b: float) -> list[float]:
    """The moments in [a, b] at which the live set of ``holds`` can differ: a, and each expiry."""
    return [a, *(h.expires_at for h in holds if a < h.expires_at <= b)]


def _live(holds: tuple[Hold, ...], t: float) -> tuple[Hold, ...]:
    return tuple(h for h in holds if h.expires_at > t)


def _lease_states(o: Oracle, path: str, lo: float, hi: float) -> list[tuple[Hold, ...]]:
    return [_live(holds, t) for holds, a, b in _window(o, o.lease.lease_tl.get(path, []), lo, hi, NOTHING)
            for t in _moments(holds, a, b)]


def _contending_states(o: Oracle, path: str, lo: float, hi: float) -> list[tuple[Hold, ...]]:
    """As :func:`_lease_states`, over every lease that contends with one of ``path``: its own,
    those of directories over it and, for a directory, those beneath it (docs/decisions.md)."""
    tl = o.contending_tl.get(path)
    if tl is None:  # built once per path, after the replay (the window cache keys on the list)
        paths = [p for p in o.lease.lease_tl if contend(p, path)]
        tl = list(o.lease.lease_tl.get(path, [])) if paths in ([], [path]) else []
        if not tl:
            now: dict[str, tuple[Hold, ...]] = {}
            for seq, p, holds in sorted((seq, p, holds) for p in paths for seq, holds in o.lease.lease_tl[p]):
                now[p] = holds
                union = tuple(h for hs in now.values() for h in hs)
                if tl and tl[-1][0] == seq:  # (a leave releases several paths in one event)
                    tl[-1] = (seq, union)
                else:
                    tl.append((seq, union))
        o.contending_tl[path] = tl
    return [_live(holds, t) for holds, a, b in _window(o, tl, lo, hi, NOTHING) for t in _moments(holds, a, b)]


_EMPTY: list[Any] = []


def _window(o: Oracle, timeline: list[Any], lo: float, hi: float, empty: Any) -> list[tuple[Any, float, float]]:
    return window(timeline, lo, hi, empty, o.commits)  # type: ignore[arg-type]


def check_ops(o: Oracle, ops: list[Op], slack: float, commits: Commits) -> list[Problem]:
    o.commits = commits
    out: list[Problem] = []
    files = files_of(ops)
    for op in ops:
        judge = _JUDGES.get(op.f)
        if op.outcome == "fail" and op.error == "unknown_session" and op.session is not None:
            judge = _unknown
        if judge is None or op.end is None or op.outcome == "info":
            continue
        lo, hi = op.start - slack, op.end + slack
        found = file_slash(o, op, files) if op.f == "lease_claim" else None
        found = found or judge(o, op, lo, hi)
        if found is not None:
            rule, message, details = found
            out.append(problem(rule, f"{op.describe()}: {message}", op=op.describe(), process=op.process,
                               index=op.index, wall=op.end, **details))
    return out


Found = tuple[str, str, dict[str, Any]] | None


def _claim(o: Oracle, op: Op, lo: float, hi: float) -> Found:
    if op.outcome != "ok" or (op.result or {}).get("ok") or op.path is None:
        return None
    o.checked["lease-rules"] += 1
    mode = op.args.get("mode") or "exclusive"
    named = (op.result or {}).get("holder")
    conflict = False
    for holds in _contending_states(o, op.path, lo, hi):
        in_the_way = {h.session for h in holds if h.session != op.session and (mode == "exclusive" or h.mode == "exclusive")}
        if named is None or named in in_the_way:
            return None
        conflict = conflict or bool(in_the_way)
    if conflict:
        return ("LR5", f"was denied {mode} on {op.path} naming holder {named}, who was not in its way at any moment "
                "of its window", {"path": op.path, "answered": named})
    return ("LR1", f"was denied {mode} on {op.path} (holder {(op.result or {}).get('holder')}), but no other session "
            "held it in a conflicting mode at any moment of its window", {"path": op.path})


def _not_held(rule: str, verb: str) -> Any:
    def judge(o: Oracle, op: Op, lo: float, hi: float) -> Found:
        if op.outcome != "fail" or op.error != "lease_not_held" or op.path is None:
            return None
        o.checked["lease-rules"] += 1
        for holds in _lease_states(o, op.path, lo, hi):
            if not any(h.session == op.session for h in holds):
                return None
        return (rule, f"was refused lease_not_held, yet the session held a live lease on {op.path} throughout its "
                f"window: its {verb} was due", {"path": op.path})
    return judge


def _recv(o: Oracle, op: Op, lo: float, hi: float) -> Found:
    if op.outcome == "ok" and (op.result or {}).get("message_ids"):
        return _as_sent(o, op)
    if op.outcome != "ok":
        return None
    o.checked["recv-order"] += 1
    for unread, a, b in _window(o, o.mail.unread_tl.get(op.session, _EMPTY), lo, hi, frozenset()):  # type: ignore[arg-type]
        if all(o.mail.expires.get(m) is not None and o.mail.expires[m] <= b for m in unread):  # type: ignore[operator]
            return _inbox(o, op, lo, hi)
    waiting = sorted(o.mail.unread.get(op.session, ()))  # type: ignore[arg-type]
    return ("RV3", "answered no messages, but unread, unexpired deliveries waited throughout its window "
            f"(now unread: {waiting[:10]})", {"session": op.session})


def _as_sent(o: Oracle, op: Op) -> Found:
    """RV5: each message a recv returns carries its sender, the sender's label, its subject and
    its selector as sent (the send op's arguments, the sender's join)."""
    result = op.result or {}
    ids = result.get("message_ids") or []
    fields = {k: result.get(k) for k in ("senders", "labels", "subjects", "to")}
    if any(v is None or len(v) != len(ids) for v in fields.values()):
        return None  # a history from before the digest carried them
    for i, mid in enumerate(ids):
        sender = o.mail.sender.get(mid)
        sent = o.mail.subject.get(mid)
        if sender is None or sent is None:
            continue
        o.checked["recv-order"] += 1
        want = {"senders": sender, "labels": o.rooms.label.get(sender), "subjects": sent[0], "to": sent[1]}
        for key, value in want.items():
            if fields[key][i] != value:
                return ("RV5", f"returned message {mid} with {key[:-1] if key != 'to' else 'to'} {fields[key][i]!r}; "
                        f"it was sent with {value!r}", {"message_id": mid, "answered": fields[key][i], "expected": value})
    return None


def _inbox(o: Oracle, op: Op, lo: float, hi: float) -> Found:
    """The inbox block of an empty answer: the caller's rooms, its deliveries ever, how many it
    read (or acked), and when the last one arrived, each as the model had them in the window."""
    box = (op.result or {}).get("inbox")
    if box is None:
        return None
    o.checked["read-answers"] += 1
    rooms = set(box.get("rooms") or ())
    had = [sorted(m.get(op.session, ())) for m, _a, _b in _window(o, o.rooms.member_tl, lo, hi, {})]
    if sorted(rooms) not in had:
        return ("RD7", f"answered an empty inbox in rooms {sorted(rooms)}; the model's rooms of the caller in its "
                f"window were {had[:4]}", {"answered": sorted(rooms), "expected": had[:4]})
    got = (box.get("total"), box.get("read"), box.get("last"))
    counts = [c for c, _a, _b in _window(o, o.mail.inbox_tl.get(op.session, _EMPTY), lo, hi, (0, 0, None))]
    for total, read, last in counts:
        if got[:2] == (total, read) and (last is None) == (got[2] is None) and (
                last is None or abs(float(got[2]) - last) <= 1e-3):  # (a float through JSON and back)
            return None
    return ("RD7", f"answered an inbox of {got[0]} deliveries, {got[1]} read, the last at {got[2]}; the model's "
            f"(deliveries, read, last) in its window were {counts[:4]}", {"answered": list(got),
                                                                           "expected": counts[:4]})


def _unknown(o: Oracle, op: Op, lo: float, hi: float) -> Found:
    """An op refused unknown_session: its session (or a send's target session) must have been
    gone (or not yet joined) at some moment of its window."""
    o.checked["sessions"] += 1
    to = op.args.get("to") if op.f == "msg_send" else None
    target = to if isinstance(to, str) and to != "*" and not to.startswith(("tag:", "file:")) else None
    for members, _a, _b in _window(o, o.rooms.member_tl, lo, hi, {}):
        if op.session not in members or (target is not None and target not in members):
            return None
    return ("SR4", f"was refused unknown_session, yet session {op.session} was live throughout its window",
            {"session": op.session})


def _unread(o: Oracle, op: Op, lo: float, hi: float) -> Found:
    if op.outcome != "ok":
        return None
    count = (op.result or {}).get("count")
    o.checked["read-answers"] += 1
    seen = []
    for unread, a, b in _window(o, o.mail.unread_tl.get(op.session, _EMPTY), lo, hi, frozenset()):  # type: ignore[arg-type]
        most = sum(1 for m in unread if o.mail.expires.get(m) is None or o.mail.expires[m] > a)  # type: ignore[operator]
        least = sum(1 for m in unread if o.mail.expires.get(m) is None or o.mail.expires[m] > b)  # type: ignore[operator]
        if least <= (count if isinstance(count, int) else -1) <= most:
            return None
        seen.append((least, most))
    return ("RD2", f"answered count {count}; the model's unread, unexpired count in its window was {seen[:5]}",
            {"answered": count, "expected": seen[:5]})


def _who(o: Oracle, op: Op, lo: float, hi: float) -> Found:
    if op.outcome != "ok" or op.session is None:
        return None
    o.checked["read-answers"] += 1
    got = set((op.result or {}).get("sessions") or ())
    room = op.args.get("room")
    wants = []
    for members, _a, _b in _window(o, o.rooms.member_tl, lo, hi, {}):
        mine = members.get(op.session, frozenset()) if room is None else frozenset({room})
        want = {sid for sid, rooms in members.items() if rooms & mine}
        if got == want:
            return _liveness(o, op, lo, hi)
        wants.append(sorted(want))
    whose = "sharing a room with it" if room is None else f"in room {room}"
    return ("RD1", f"listed {sorted(got)}; the live sessions {whose} were {wants[-1] if wants else []}",
            {"answered": sorted(got), "expected": wants[-1] if wants else []})


def _liveness(o: Oracle, op: Op, lo: float, hi: float) -> Found:
    """RD8: a member of the caller's host, with a pid recorded, whose agent process ran
    throughout the read (its harness key's ops began before it and ended after it) is ``alive``."""
    result = op.result or {}
    sessions, shown, hosts, pids = (result.get(k) for k in ("sessions", "liveness", "hosts", "pids"))
    if shown is None or hosts is None or pids is None or op.session not in sessions:
        return None  # a history from before the digest carried liveness
    here = hosts[sessions.index(op.session)]
    for sid, said, host, pid in zip(sessions, shown, hosts, pids, strict=False):
        span = o.rooms.key_span.get(o.rooms.key_of.get(sid, ""))
        if pid is None or host != here or span is None or not (span[0] < lo and span[1] > hi):
            continue  # no pid recorded: unknown is right
        o.checked["read-answers"] += 1
        if said != "alive":
            return ("RD8", f"called session {sid} {said}, but its agent process ran throughout the read (its ops "
                    f"from {span[0]:.6f} to {span[1]:.6f})", {"session": sid, "answered": said, "expected": "alive"})
    return None


def _holders(holds: tuple[Hold, ...]) -> set[tuple[str, str]]:
    return {(h.session, h.mode) for h in holds}


def _lease_check(o: Oracle, op: Op, lo: float, hi: float) -> Found:
    if op.outcome != "ok" or op.path is None:
        return None
    o.checked["read-answers"] += 1
    got = {(s, m) for s, m in (op.result or {}).get("holders") or ()}
    free = (op.result or {}).get("free")
    states = [_holders(h) for h in _contending_states(o, op.path, lo, hi)]
    if any(got == want and free == (not want) for want in states):
        return None
    return ("RD3", f"answered free={free}, holders {sorted(got)}; the model's live holders of {op.path} in its window "
            f"were {[sorted(s) for s in states[:4]]}", {"path": op.path})


def _lease_list(o: Oracle, op: Op, lo: float, hi: float) -> Found:
    if op.outcome != "ok":
        return None
    o.checked["read-answers"] += 1
    got: dict[str, set[tuple[str, str, bool]]] = {}
    for path, sid, mode, mine in (op.result or {}).get("leases") or ():
        got.setdefault(path, set()).add((sid, mode, bool(mine)))
    paths = set(got) | {p for p, tl in o.lease.lease_tl.items() if any(h for h, _a, _b in _window(o, tl, lo, hi, NOTHING))}
    for path in sorted(paths):  # per path: a relaxation of "one moment for the whole list"
        states = [{(h.session, h.mode, h.session == op.session) for h in holds}
                  for holds in _lease_states(o, path, lo, hi)]
        if got.get(path, set()) not in states:
            return ("RD4", f"listed {sorted(got.get(path, set()))} on {path}; the model's live leases there in its "
                    f"window were {[sorted(s) for s in states[:4]]}", {"path": path})
    return None


def _history(o: Oracle, op: Op, lo: float, hi: float) -> Found:
    if op.outcome != "ok":
        return None
    o.checked["read-answers"] += 1
    room = (op.result or {}).get("room")
    got = list((op.result or {}).get("message_ids") or ())
    limit = int(op.args.get("limit") or 50)
    asked = op.args.get("room")
    if asked is not None and room != asked:
        return ("RD5", f"answered room {room}, asked for {asked}", {"room": room, "expected": asked})
    if asked is None and op.session is not None:  # the caller's repo room (the first it joined)
        homes = {r for members, _a, _b in _window(o, o.rooms.member_tl, lo, hi, {})
                 for r in members.get(op.session, ()) if r.startswith("repo:")}
        if homes and room not in homes:
            return ("RD5", f"answered room {room} with no room asked; the caller's repo room is {sorted(homes)}",
                    {"room": room, "expected": sorted(homes)})
    msgs = o.mail.room_msgs.get(room, [])
    span = o.commits.span
    for n in range(len(msgs) + 1):  # the room's first n messages: a state if n-1 may have committed by hi
        if (n and span(msgs[n - 1][1])[0] > hi) or (n < len(msgs) and span(msgs[n][1])[1] < lo):
            continue  # ... and message n may not have committed before lo
        if got == [m for m, _ in msgs[max(0, n - limit):n]]:
            return None
    return ("RD5", f"answered {got[:10]} for room {room} (limit {limit}); the model's last messages there were "
            f"{[m for m, _ in msgs[-limit:]][:10]}", {"room": room, "answered": got[:50]})


def _sent(o: Oracle, op: Op, lo: float, hi: float) -> Found:
    if op.outcome != "ok" or op.session is None:
        return None
    o.checked["read-answers"] += 1
    got = (op.result or {}).get("messages") or []
    ids = [m[0] for m in got]
    span = o.commits.span
    mine = [m for m, seq in o.mail.sent_by.get(op.session, []) if span(seq)[0] <= hi]
    surely = [m for m, seq in o.mail.sent_by.get(op.session, []) if span(seq)[1] < lo]
    limit = int(op.args.get("limit") or 50)
    if not any(ids == mine[:n][::-1][:limit] for n in range(len(surely), len(mine) + 1)):
        return ("RD6", f"listed messages {ids[:10]}; the model's, newest first, were {mine[::-1][:10]}", {})
    for mid, states, pending, *rest in got:
        exp = o.mail.expires.get(mid)
        for rid, state in states.items():
            seen = {s for s, _a, _b in _window(o, o.mail.pair_tl.get((mid, rid), _EMPTY), lo, hi, None)}
            if state == "expired" and exp is not None and exp <= hi and seen & UNREAD:
                continue
            if state in UNREAD and exp is not None and exp <= lo and not o.retimed:
                return ("RD6", f"showed message {mid} to {rid} as {state}, but its ttl_s ran out at {exp:.6f}, before "
                        "the read: an overdue unread delivery shows as expired", {"message_id": mid, "recipient": rid})
            if state not in seen:
                return ("RD6", f"showed message {mid} to {rid} as {state}; the model's states in its window were "
                        f"{sorted(s for s in seen if s)}", {"message_id": mid, "recipient": rid})
        unread = sum(1 for s in states.values() if s in UNREAD)
        if pending != unread:
            return ("RD6", f"showed message {mid} with {pending} pending, but {unread} of its states are unread",
                    {"message_id": mid})
        if rest:  # left: the recipients that had left the rooms, at some moment of the window
            left = set(rest[0])
            for rid in states:
                lives = {st[2] if st else None for st, _a, _b in _window(o, o.wake.level_tl.get(rid, _EMPTY), lo, hi, None)}
                if (rid in left and False not in lives) or (rid not in left and True not in lives and None not in lives):
                    return ("RD6", f"showed message {mid} with {rid} {'among' if rid in left else 'not among'} the "
                            f"recipients that left; the model had it {'live' if rid in left else 'gone'} throughout",
                            {"message_id": mid, "recipient": rid})
    return None


def _ack(o: Oracle, op: Op, lo: float, hi: float) -> Found:
    mid = op.args.get("message_id")
    pair = (mid, op.session)
    states = {s for s, _a, _b in _window(o, o.mail.pair_tl.get(pair, _EMPTY), lo, hi, None)}  # type: ignore[arg-type]
    if op.outcome == "ok":
        o.checked["ack"] += 1
        if not states & {"read", "acked"}:
            return ("AK2", f"acked message {mid}, but its delivery to the caller was {sorted(str(s) for s in states)} "
                    "throughout the window (never read)", {"message_id": mid})
    elif op.error == "not_recipient":
        o.checked["ack"] += 1
        if None not in states:
            return ("AK3", f"was refused not_recipient for message {mid}, which was delivered to the caller",
                    {"message_id": mid})
    elif op.error == "invalid_argument" and isinstance(mid, int) and not isinstance(mid, bool):
        o.checked["ack"] += 1
        if not states & (UNREAD | {"expired"}):
            return ("AK4", f"was refused invalid_argument for message {mid}, whose delivery to the caller was "
                    f"{sorted(str(s) for s in states)} throughout the window: an ack of a read delivery is ok, of an "
                    "acked one a no-op, and of none not_recipient", {"message_id": mid})
    return None


def _leave_room(o: Oracle, op: Op, lo: float, hi: float) -> Found:
    """SR3's refusal: room_leave_room is refused only for a room the caller was not in."""
    room = op.args.get("room")
    if op.outcome != "fail" or op.error != "invalid_argument" or op.session is None or not isinstance(room, str):
        return None
    o.checked["sessions"] += 1
    if all(room in members.get(op.session, ()) for members, _a, _b in _window(o, o.rooms.member_tl, lo, hi, {})):
        return ("SR3", f"was refused invalid_argument for room {room}, which the caller was in throughout the window",
                {"room": room})
    return None


_JUDGES = {
    "lease_claim": _claim, "lease_renew": _not_held("LR2", "renewal"), "lease_release": _not_held("LR3", "release"),
    "msg_recv": _recv, "msg_unread": _unread, "room_who": _who, "lease_check": _lease_check,
    "lease_list": _lease_list, "room_history": _history, "msg_sent": _sent, "msg_ack": _ack,
    "room_leave_room": _leave_room,
    "wake": judge_look,  # a lever's look: what it had to signal (sim/check/oracle_wake.py)
}
