"""One pass over the store's events in ``seq`` order through the model (``sim/check/model.py``).

Besides the model's problems, the pass keeps what the later checks need: the final state of
every delivery and the event that read it, each send's recipients, every grant and renewal
per path (drift truth, stale writes), each note_read and whether another session held the
path then, and when each session left.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .cover import above, covers, is_dir
from .model import LeaseState, Problem, delivery_step, lease_init, lease_step, live_holders, stamp

LEASE_KINDS = frozenset({"lease_grant", "lease_renew", "lease_release", "lease_expire"})
# A (message, recipient) pair packed into one int: message id above, session number below.
SESSION_BITS = 24


@dataclass(frozen=True, slots=True)
class Send:
    seq: int
    at: float
    sender: str
    selector: str | None
    recipients: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Grant:
    seq: int
    at: float
    session: str
    token: int
    kind: str


@dataclass
class Replay:
    problems: list[Problem] = field(default_factory=list)
    leases: dict[str, LeaseState] = field(default_factory=dict)
    grants: dict[str, list[Grant]] = field(default_factory=lambda: defaultdict(list))
    deliveries: dict[int, str] = field(default_factory=dict)  # pair -> state the store holds
    read_seq: dict[int, int] = field(default_factory=dict)  # pair -> seq of the move to read
    sessions: dict[str, int] = field(default_factory=dict)  # session id -> number in pairs
    names: list[str] = field(default_factory=list)
    sends: dict[int, Send] = field(default_factory=dict)
    reads: dict[tuple[str, str], list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))
    held_at_read: dict[int, str | None] = field(default_factory=dict)  # note_read seq -> other holder
    left: dict[str, tuple[int, float]] = field(default_factory=dict)
    checked: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    events: int = 0

    def pair(self, message_id: int, session: str) -> int:
        try:
            return (message_id << SESSION_BITS) | self.sessions[session]
        except KeyError:
            self.sessions[session] = len(self.names)
            self.names.append(session)
            return (message_id << SESSION_BITS) | self.sessions[session]

    def unpair(self, pair: int) -> tuple[int, str]:
        return pair >> SESSION_BITS, self.names[pair & ((1 << SESSION_BITS) - 1)]


def replay(events: list[Any]) -> Replay:
    out = Replay()
    tokens: dict[int, int] = {}
    last_seq = 0
    for ev in events:
        seq, at, kind, sid, path, payload = ev.seq, ev.at, ev.kind, ev.session_id, ev.path, ev.payload
        if seq <= last_seq:
            raise ValueError(f"events: seq {seq} follows seq {last_seq}; events must come in increasing seq order")
        last_seq = seq
        out.events += 1
        if kind in LEASE_KINDS:
            _lease(out, tokens, ev)
        elif kind == "send":
            _send(out, seq, at, sid, payload)
        elif kind == "delivery":
            _delivery(out, seq, at, sid, payload)
        elif kind == "note_read":  # a lease of the file, or of a directory over it
            others = [h for p in (path, *above(path)) if p in out.leases for h in live_holders(out.leases[p], at, but=sid)]
            out.held_at_read[seq] = others[0].session if others else None
            out.reads[(sid, path)].append((at, seq))
        elif kind == "leave":
            out.left[sid] = (seq, at)
    return out


def _lease(out: Replay, tokens: dict[int, int], ev: Any) -> None:
    seq, at, kind, sid, path, payload = ev.seq, ev.at, ev.kind, ev.session_id, ev.path, ev.payload
    state = out.leases.get(path) or lease_init()
    if kind == "lease_grant":
        out.problems.extend(_covered(out, ev))
    out.leases[path], problems = lease_step(state, ev)
    out.problems.extend(problems)
    if kind in ("lease_grant", "lease_renew"):
        out.checked["lease-token-monotonic"] += 1
        out.checked["lease-exclusive"] += kind == "lease_grant"
        token = payload.get("token")
        if isinstance(token, int):
            first = tokens.setdefault(token, seq)
            if first != seq:
                out.problems.append(Problem("lease-token-monotonic", (
                    f"token {token} was issued twice: seq {first} and seq {seq} ({kind} of {path} to {sid})"),
                    {"seq": seq, "at": at, "path": path, "session": sid, "token": token, "first_seq": first}))
            out.grants[path].append(Grant(seq, at, sid, token, kind))
    else:
        out.checked["lease-release-held"] += 1


def _covered(out: Replay, ev: Any) -> list[Problem]:
    """lease-exclusive across paths: a grant contends with the live leases of the directories
    above its path and, for a directory, of every path beneath it (each path's own holders
    are :func:`lease_step`'s)."""
    path, mode, sid, at = ev.path, ev.payload.get("mode"), ev.session_id, ev.at
    related = [p for p in above(path) if p in out.leases]
    if is_dir(path):
        related += [p for p in out.leases if p != path and covers(path, p)]
    problems = []
    for other in related:
        for h in live_holders(out.leases[other], at, but=sid):
            if mode == "exclusive" or h.mode == "exclusive":
                how = "beneath" if covers(other, path) else "over"
                problems.append(Problem("lease-exclusive", (
                    f"{path}: session {sid} was granted {mode} (token {ev.payload.get('token')}, seq {ev.seq}, at "
                    f"{stamp(at)}) {how} {other}, held {h.mode} by session {h.session} (token {h.token}, seq {h.seq}, "
                    f"until {stamp(h.expires_at)})"),
                    {"path": path, "session": sid, "seq": ev.seq, "at": at, "mode": mode, "other_path": other,
                     "other_session": h.session, "other_mode": h.mode, "other_token": h.token, "other_seq": h.seq}))
    return problems


def _send(out: Replay, seq: int, at: float, sid: str, payload: dict[str, Any]) -> None:
    mid = payload.get("message_id")
    recipients = payload.get("recipients") or {}
    if not isinstance(mid, int):
        raise ValueError(f"event seq {seq}: send payload field 'message_id' must be an integer, got {mid!r}")
    out.sends[mid] = Send(seq, at, sid, payload.get("selector"), tuple(recipients))
    deliveries, pair = out.deliveries, out.pair
    for recipient, initial in recipients.items():
        key = pair(mid, recipient)
        state, problem = delivery_step(deliveries.get(key), initial, None)
        deliveries[key] = state  # type: ignore[assignment]
        if problem:
            out.problems.append(_where(problem, seq, at, mid, recipient))
    out.checked["delivery-forward"] += len(recipients)


def _delivery(out: Replay, seq: int, at: float, sid: str, payload: dict[str, Any]) -> None:
    to = payload.get("to")
    items = payload.get("items") or ()
    deliveries, pair, read_seq = out.deliveries, out.pair, out.read_seq
    for mid, from_state in items:
        key = pair(mid, sid)
        state, problem = delivery_step(deliveries.get(key), to, from_state)
        deliveries[key] = state  # type: ignore[assignment]
        if to == "read":
            read_seq[key] = seq
        if problem:
            out.problems.append(_where(problem, seq, at, mid, sid))
    out.checked["delivery-forward"] += len(items)


def _where(problem: Problem, seq: int, at: float, mid: int, recipient: str) -> Problem:
    return Problem(problem.invariant, f"message {mid} to session {recipient}, seq {seq} at {stamp(at)}: "
                   f"{problem.message}", {"seq": seq, "at": at, "message_id": mid, "recipient": recipient})
