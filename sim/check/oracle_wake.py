"""The oracle's wake rules (group ``wake``): a wake lever's signals, retries and acceptances,
recomputed from the model's sessions and deliveries and the looks' own arguments.

In a run each agent with a wake lever is its own lever: a ``wake`` op is one look of
``agents_room.harnesses.wake.deliver`` for its session, with the retry window it passes (``retry_s``) and
what the lever answered (``answer``; the signals and whether each was accepted in its result).
The cross-check gives each ``offered`` / ``accepted`` move and ``wake`` retry event the look
around it (``sim/check/crosscheck.py``).

- WK1: an offer (``stored → offered``) is the recipient's own lever's, to a live recipient at
  ``wake`` with a lever, of a message whose ttl_s has not passed.
- WK2: a retry (a ``wake`` event) is of an ``offered`` delivery last signalled at least the
  look's retry window before, under the same conditions.
- WK3: a look signals every delivery due throughout its window: ``stored`` ones, and
  ``offered`` ones last signalled a retry window before it began (or accepts them).
- WK4: an acceptance (``offered → accepted``) follows the lever's confirmation of that signal
  or a tool call of the recipient after it.
- WK5: a look accepts the offers its session has since acted on: a tool call that wrote
  (and so moved the session's ``last_seen``) after the signal and before the look.
"""

from __future__ import annotations

import bisect
from typing import Any

from .operation import Op
from .oracle_state import EPS, Oracle
from .window import window

DUE = frozenset({"stored", "offered"})
# The tools whose ok call moves the session's last_seen (a write transaction that touches it).
TOUCHING = frozenset({"room_join", "room_leave_room", "room_set_autonomy_cap", "msg_send", "msg_recv", "msg_ack",
                      "lease_claim", "lease_renew", "lease_release", "note_read"})


def look_id(op: Op) -> tuple[int, int]:
    return (op.process, op.index)


def prepare(o: Oracle, ops: list[Op]) -> None:
    """Before the replay: the starts of each session's tool calls (the wake lever's looks are
    not tool calls), and its calls that touch the store and succeeded, each sorted."""
    starts: dict[str, list[float]] = {}
    for op in ops:
        if op.session is not None and op.f != "wake":
            starts.setdefault(op.session, []).append(op.start)
        if op.session is not None and op.f in TOUCHING and op.outcome == "ok" and op.end is not None:
            o.wake.touches.setdefault(op.session, []).append((op.start, op.end, op.f))
    o.wake.tool_starts = {sid: sorted(s) for sid, s in starts.items()}
    for spans in o.wake.touches.values():
        spans.sort()


def levels(o: Oracle, sid: str, seq: int) -> None:
    """The session's level, lever and liveness from this event on (WK3's window reads it)."""
    s = o.rooms.sessions.get(sid)
    o.wake.level_tl[sid].append((seq, (s.autonomy, s.lever, s.live) if s is not None else None))


def sent(o: Oracle, mid: int, rid: str, initial: str, seq: int, at: float) -> None:
    """A delivery to a recipient with a lever: its signal timeline starts."""
    s = o.rooms.sessions.get(rid)
    if s is None or not s.lever:
        return
    o.wake.wake_tl[(mid, rid)].append((seq, (initial, None)))
    o.wake.wake_pairs[rid].append(mid)
    o.wake.due_from[(mid, rid)] = at


def moved(o: Oracle, mid: int, sid: str, to: str, seq: int, at: float) -> None:
    """Any move of a delivery the signal timeline follows."""
    pair = (mid, sid)
    if pair not in o.wake.wake_tl:
        return
    o.wake.wake_tl[pair].append((seq, (to, o.wake.signal_at.get(pair))))
    if to not in DUE:
        o.wake.due_until.setdefault(pair, at)


def _unfit(o: Oracle, sid: str, mid: int, at: float) -> str | None:
    """Why a delivery of ``mid`` to ``sid`` could not be signalled at ``at``, or None."""
    s = o.rooms.sessions.get(sid)
    if s is None:
        return None  # a session the events never saw join: not judged
    if not s.live:
        return f"{sid} had left"
    if s.autonomy != "wake":
        return f"{sid} was at {s.autonomy}, not wake"
    if not s.lever:
        return f"{sid} has no wake lever"
    exp = o.mail.expires.get(mid)
    if exp is not None and exp <= at + EPS:
        return f"the message's ttl_s ran out at {exp:.6f}"
    return None


def _by_own_look(op: Op | None, sid: str) -> bool:
    return op is not None and op.f == "wake" and op.session == sid


def offered(o: Oracle, ev: Any, op: Op | None, items: list[int]) -> None:
    """WK1, at a ``stored → offered`` move."""
    sid, seq, at = ev.session_id, ev.seq, ev.at
    for mid in items:
        o.checked["wake"] += 1
        why = _unfit(o, sid, mid, at)
        if why is None and not _by_own_look(op, sid):
            why = f"no look of {sid}'s own lever made it ({op.describe() if op else 'no operation'})"
        if why is not None:
            o.fail("WK1", f"message {mid} was offered to {sid}, but {why}", seq, at, message_id=mid, session=sid,
                   op=op.describe() if op else None)
        o.wake.signal_at[(mid, sid)] = at
        if op is not None:
            o.wake.looked[look_id(op)].add((mid, sid))


def retried(o: Oracle, ev: Any, op: Op | None) -> None:
    """WK2, at a ``wake`` retry event ``{lever, items, retry}``."""
    sid, seq, at = ev.session_id, ev.seq, ev.at
    window_s = float(op.args.get("retry_s", 0)) if _by_own_look(op, sid) else None
    for mid in [int(m) for m in ev.payload.get("items") or ()]:
        o.checked["wake"] += 1
        pair = (mid, sid)
        state, last = o.mail.state.get(pair), o.wake.signal_at.get(pair)
        why = _unfit(o, sid, mid, at)
        if why is None and window_s is None:
            why = f"no look of {sid}'s own lever made it ({op.describe() if op else 'no operation'})"
        if why is None and state != "offered":
            why = f"its delivery was {state}: only offered deliveries are signalled again"
        if why is None and (last is None or at - last < window_s - EPS):  # type: ignore[operator]
            why = (f"it was last signalled at {last:.6f}, {at - last:.3f} s before, inside the look's retry window "
                   f"of {window_s:g} s" if last is not None else "it was never signalled")
        if why is not None:
            o.fail("WK2", f"message {mid} to {sid} was signalled again, but {why}", seq, at, message_id=mid,
                   session=sid, op=op.describe() if op else None)
        o.wake.signal_at[pair] = at
        if pair in o.wake.wake_tl:
            o.wake.wake_tl[pair].append((seq, (state, at)))
        if op is not None:
            o.wake.looked[look_id(op)].add(pair)


def accepted(o: Oracle, ev: Any, op: Op | None, items: list[int]) -> None:
    """WK4, at an ``offered → accepted`` move."""
    sid, seq, at = ev.session_id, ev.seq, ev.at
    confirmed: set[int] = set()
    if _by_own_look(op, sid):
        for ids, answer in (op.result or {}).get("signals") or ():  # type: ignore[union-attr]
            if answer is True:
                confirmed.update(int(i) for i in ids)
        if op.outcome != "ok" and op.args.get("answer") == "accept":  # type: ignore[union-attr]
            confirmed.update(items)  # its answer never came back: the lever may have confirmed
    starts = o.wake.tool_starts.get(sid, ())
    for mid in items:
        o.checked["wake"] += 1
        pair = (mid, sid)
        state, last = o.mail.state.get(pair), o.wake.signal_at.get(pair)
        why = None
        if state != "offered":
            why = f"its delivery was {state}, not offered"
        elif not _by_own_look(op, sid):
            why = f"no look of {sid}'s own lever accepted it ({op.describe() if op else 'no operation'})"
        elif mid not in confirmed and (last is None or bisect.bisect_left(starts, last - o.slack) ==
                                       bisect.bisect_right(starts, at + o.slack)):
            why = (f"the lever did not confirm it ({op.describe()} answered {op.args.get('answer')}) and "  # type: ignore[union-attr]
                   f"{sid} made no tool call after its signal at {last if last is None else round(last, 6)}")
        if why is not None:
            o.fail("WK4", f"message {mid} to {sid} was accepted, but {why}", seq, at, message_id=mid, session=sid,
                   op=op.describe() if op else None)
        if op is not None:
            o.wake.looked[look_id(op)].add(pair)


def judge_look(o: Oracle, op: Op, lo: float, hi: float) -> tuple[str, str, dict[str, Any]] | None:
    """WK3: an ``ok`` look signalled (or accepted) every delivery of its session that was due
    at every moment of its window, with the session at ``wake`` with a lever throughout; WK5:
    and accepted every offer the session acted on since its signal."""
    sid = op.session
    if sid is None:
        return None
    fit = window(o.wake.level_tl.get(sid, []), lo, hi, None, o.commits)
    if not all(st is not None and st[0] == "wake" and st[1] and st[2] for st, _, _ in fit):
        return None
    o.checked["wake"] += 1
    window_s = float(op.args.get("retry_s", 0))
    touched = o.wake.looked.get(look_id(op), set())
    for mid in o.wake.wake_pairs.get(sid, ()):
        pair = (mid, sid)
        if pair in touched or o.wake.due_from.get(pair, hi) >= lo or o.wake.due_until.get(pair, hi + 1) <= hi:
            continue
        exp = o.mail.expires.get(mid)
        if exp is not None and exp <= hi + EPS:
            continue
        states = window(o.wake.wake_tl[pair], lo, hi, None, o.commits)
        acted = _acted_since(o, sid, states, lo)
        if acted is not None:
            return ("WK5", f"message {mid} was offered (signalled at {acted[0]:.6f}) throughout the look, and its "
                    f"session wrote after the signal (its {acted[1]} invoked at {acted[2]:.6f}); the look did not "
                    "accept it",
                    {"message_id": mid, "session": sid, "answered": op.result, "expected": mid})
        if all(st is not None and (st[0] == "stored" or (st[0] == "offered" and st[1] is not None
                                                           and st[1] + window_s <= lo)) for st, _, _ in states):
            st = states[-1][0]
            why = "stored" if st[0] == "stored" else f"offered, last signalled at {st[1]:.6f}"
            return ("WK3", f"message {mid} was due ({why}; retry window {window_s:g} s) throughout the look, "
                    f"which neither signalled nor accepted it; it answered {op.result}",
                    {"message_id": mid, "session": sid, "answered": op.result, "expected": mid})
    return None


def _acted_since(o: Oracle, sid: str, states: list[Any], lo: float) -> tuple[float, str, float] | None:
    """(signal, tool, its invoke) when the delivery was offered at every moment of the window,
    last signalled at one time, and an ok write of the session began after that signal and
    ended before ``lo``: the look's confirmation step must see it."""
    signals = {st[1] for st, _, _ in states if st is not None and st[0] == "offered"}
    if len(signals) != 1 or any(st is None or st[0] != "offered" for st, _, _ in states):
        return None
    signal = signals.pop()
    spans = o.wake.touches.get(sid, ())
    i = bisect.bisect_right(spans, (signal + o.slack, float("inf")))
    if i < len(spans) and spans[i][1] < lo:
        return (signal, spans[i][2], spans[i][0])
    return None
