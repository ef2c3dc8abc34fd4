"""The oracle's rules of sessions, rooms and autonomy (SR*, AU1-AU4, AU6, LV*): the join,
leave, leave_room, cap and autonomy events, judged against the model's :class:`Rooms`, which
this module alone writes (``sim/check/oracle_state.py``)."""

from __future__ import annotations

from typing import Any

from . import oracle_leases, oracle_wake
from .operation import Op
from .oracle_state import LEVEL, Oracle, Sess


def prepare(o: Oracle, ops: list[Op], events: list[Any]) -> None:
    """Before the replay: each session's leave (its seq and time), and each harness key's span."""
    for ev in events:
        if ev.kind == "leave":
            o.rooms.leave_at[ev.session_id] = (ev.seq, ev.at)
    _key_spans(o, ops)


def _key_spans(o: Oracle, ops: list[Op]) -> None:
    """Each harness key's agent process ran at least from its first op's invoke to its last
    op's completion (a key is one process's: a replacement gets a new one)."""
    for op in ops:
        key = op.args.get("harness_key") if op.f == "room_join" else None
        if isinstance(key, str) and op.outcome == "ok" and op.session:
            o.rooms.key_of[op.session] = key.lower()
    for op in ops:
        key = o.rooms.key_of.get(op.session) if op.session else None
        if key is None or op.end is None:
            continue
        first, last = o.rooms.key_span.get(key, (op.start, op.end))
        o.rooms.key_span[key] = (min(first, op.start), max(last, op.end))


def _members(o: Oracle, seq: int) -> None:
    o.rooms.member_tl.append((seq, {sid: frozenset(s.rooms) for sid, s in o.rooms.sessions.items() if s.live}))


def on_join(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, p, seq, at = ev.session_id, ev.payload, ev.seq, ev.at
    args = op.args if op is not None and op.f == "room_join" else None
    key = ((args or {}).get("harness_key") or p.get("harness_key") or None)
    key = key.lower() if isinstance(key, str) else None
    live_with_key = next((i for i, s in o.rooms.sessions.items() if s.live and key and s.harness_key == key), None)
    prev = o.rooms.sessions.get(sid) if sid in o.rooms.sessions and o.rooms.sessions[sid].live else None
    o.checked["sessions"] += 1
    if live_with_key is not None and live_with_key != sid:
        o.fail("SR2", f"join with the harness key of live session {live_with_key} made session {sid}", seq, at,
               session=sid, expected=live_with_key)
    elif live_with_key is None and sid in o.rooms.sessions:
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
    caps = [o.rooms.caps[r] for r in want if r in o.rooms.caps]
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
        o.rooms.label[sid] = args["label"]
    known = "wake_lever" in p
    lever = p.get("wake_lever") or (prev.lever if prev else None)  # a rejoin without one keeps the old
    o.rooms.sessions[sid] = Sess(set(want if args is not None else rooms), tagset, p.get("cwd", prev.cwd if prev else None),
                           str(p.get("autonomy") or level), key, lever=lever, lever_known=known)
    oracle_wake.levels(o, sid, seq)
    _members(o, seq)


def on_leave(o: Oracle, ev: Any, op: Op | None) -> None:
    sid, seq, at = ev.session_id, ev.seq, ev.at
    s = o.rooms.sessions.get(sid)
    o.checked["leave-effects"] += 1
    left = sorted(o.lease.held_paths.get(sid, ()))
    if left:
        o.fail("LV1", f"session {sid} left ({ev.payload.get('reason')}) still holding leases on {left}", seq, at,
               session=sid, paths=left)
    waiting = sorted(o.mail.unread.get(sid, ()))
    if waiting:
        o.fail("LV2", f"session {sid} left with deliveries of messages {waiting[:10]} still unread", seq, at,
               session=sid, message_ids=waiting[:50])
    if s is not None and set(ev.payload.get("rooms") or ()) != s.rooms:
        o.fail("LV3", f"session {sid} left rooms {sorted(ev.payload.get('rooms') or ())}, but was in {sorted(s.rooms)}",
               seq, at, session=sid)
    oracle_leases.left(o, sid, seq)  # count them gone, so the rest of the run is judged on its own
    if s is not None:
        s.live = False
        s.rooms = set()
        oracle_wake.levels(o, sid, seq)
    _members(o, seq)


def on_leave_room(o: Oracle, ev: Any, op: Op | None) -> None:
    s = o.rooms.sessions.get(ev.session_id)
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


def on_cap(o: Oracle, ev: Any, op: Op | None) -> None:
    room, level = ev.payload.get("room"), ev.payload.get("autonomy")
    o.rooms.caps[room] = level
    o.rooms.pending_cap = (room, level, ev.at, ev.seq)


def before(o: Oracle, ev: Any) -> None:
    """A cap is judged once the autonomy events of its own commit (same time) have passed."""
    if o.rooms.pending_cap and not (ev.kind == "autonomy" and ev.at == o.rooms.pending_cap[2]):
        _close_cap(o)


def finish(o: Oracle) -> None:
    if o.rooms.pending_cap:
        _close_cap(o)


def _close_cap(o: Oracle) -> None:
    room, level, at, seq = o.rooms.pending_cap  # type: ignore[misc]
    o.rooms.pending_cap = None
    o.checked["autonomy"] += 1
    above = sorted(sid for sid, s in o.rooms.sessions.items() if s.live and room in s.rooms and LEVEL[s.autonomy] > LEVEL[level])
    if above:
        o.fail("AU3", f"room {room} was capped at {level}, yet sessions {above} stayed above it", seq, at, room=room,
               sessions=above)


def on_autonomy(o: Oracle, ev: Any, op: Op | None) -> None:
    s = o.rooms.sessions.get(ev.session_id)
    o.checked["autonomy"] += 1
    if s is not None and ev.payload.get("from") != s.autonomy:
        o.fail("AU4", f"session {ev.session_id}'s autonomy moved from {ev.payload.get('from')}, but it held "
               f"{s.autonomy}", ev.seq, ev.at, session=ev.session_id)
    reason = str(ev.payload.get("reason", ""))
    if s is not None and reason.startswith("cap:"):
        room, to = reason[4:], str(ev.payload.get("to"))
        cap = o.rooms.caps.get(room)
        if not s.live or room not in s.rooms or cap is None or to != cap or LEVEL[s.autonomy] <= LEVEL[cap]:
            o.fail("AU3", f"the cap of room {room} moved session {ev.session_id} from {s.autonomy} to {to}; only a "
                   f"live member above the cap ({cap}) is lowered, to it (member: {room in s.rooms}, live: {s.live})",
                   ev.seq, ev.at, session=ev.session_id, room=room)
        s.autonomy = to  # a rejoin's own change is judged at its join
        oracle_wake.levels(o, ev.session_id, ev.seq)
