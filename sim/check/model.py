"""The small model the checker replays the store's events against.

Porcupine's shape: an ``init`` and a pure ``step`` per partition of the state, so each key is
checked alone. Two partitions:

- a lease model per path: who holds it, in which mode, with which fencing token, until when;
- a delivery model per (message, recipient): the contract's forward-only state machine.

A step never raises: it returns the next state and the problems the event shows, so one
replay collects every problem. Time is the store's own clock as written in each event's
``at``: a lease is live while ``expires_at > at``, exactly the store's rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

Invariant = Literal[
    "lease-exclusive", "lease-token-monotonic", "lease-release-held", "delivery-forward",
    "delivery-exactly-once", "history-events", "drift-truth", "integrity", "lease-windows",
    # the oracle's rule groups (sim/check/rules.py)
    "sessions", "autonomy", "selectors", "expiry", "recv-order", "ack", "lease-ttl", "lease-rules",
    "leave-effects", "read-answers",
]

# The contract's delivery state machine (section 4), written out here rather than read from
# the store, so that a store with a wrong table is still checked against the contract.
TRANSITIONS = frozenset({
    ("stored", "offered"), ("stored", "undeliverable"), ("stored", "read"), ("stored", "expired"),
    ("offered", "accepted"), ("offered", "read"), ("offered", "expired"),
    ("accepted", "read"), ("accepted", "expired"),
    ("undeliverable", "read"), ("undeliverable", "expired"),
    ("read", "acked"),
})
INITIAL = frozenset({"stored", "undeliverable"})
UNREAD = frozenset({"stored", "offered", "accepted", "undeliverable"})


def stamp(t: float) -> str:
    """A Unix time as UTC time of day to the microsecond, for counterexamples in words."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Problem:
    """What one step found wrong, in words, with the facts a report needs."""

    invariant: Invariant
    message: str
    details: dict[str, Any] = field(default_factory=dict)


# -- leases (one model per path) --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Holder:
    session: str
    mode: str
    token: int
    expires_at: float
    seq: int  # the grant or renewal that set this token
    at: float


@dataclass(frozen=True, slots=True)
class LeaseState:
    holders: tuple[Holder, ...] = ()
    # Leases the store removed before their time (a premature expiry): they still count as
    # held until ``expires_at``, because their holder still believes it holds them.
    ghosts: tuple[Holder, ...] = ()
    last_token: int = 0
    last_seq: int = 0


def lease_init() -> LeaseState:
    return LeaseState()


def live_holders(state: LeaseState, at: float, *, but: str | None = None) -> list[Holder]:
    """Holders live at ``at`` (ghosts included), except session ``but``."""
    return [h for h in (*state.holders, *state.ghosts) if h.expires_at > at and h.session != but]


def lease_step(state: LeaseState, event: Any) -> tuple[LeaseState, list[Problem]]:
    """Apply one lease event (``lease_grant``, ``lease_renew``, ``lease_release``,
    ``lease_expire``; an ``agents_room.store.Event``) to the model of its path."""
    seq, at, kind, session, path, payload = (event.seq, event.at, event.kind, event.session_id, event.path,
                                             event.payload)
    problems: list[Problem] = []
    ghosts = tuple(g for g in state.ghosts if g.expires_at > at)
    mine = next((h for h in state.holders if h.session == session), None)
    others = tuple(h for h in state.holders if h.session != session)
    token = payload.get("token")
    where = {"path": path, "session": session, "seq": seq, "at": at, "token": token}

    if kind in ("lease_grant", "lease_renew"):
        mode = payload.get("mode")
        if not isinstance(token, int) or token <= state.last_token:
            problems.append(Problem("lease-token-monotonic", (
                f"{kind} of {path} to session {session} at seq {seq} carries token {token}, not above "
                f"token {state.last_token} granted earlier (seq {state.last_seq})"),
                {**where, "previous_token": state.last_token, "previous_seq": state.last_seq}))
        live_mine = mine if mine is not None and mine.expires_at > at else None
        if kind == "lease_grant":
            in_the_way = [h for h in live_holders(LeaseState(others, ghosts), at)
                          if mode == "exclusive" or h.mode == "exclusive"]
            for h in in_the_way:
                problems.append(Problem("lease-exclusive", (
                    f"{path}: session {session} was granted {mode} (token {token}, seq {seq}, at {stamp(at)}) "
                    f"while session {h.session} held it {h.mode} (token {h.token}, seq {h.seq}, "
                    f"until {stamp(h.expires_at)})"),
                    {**where, "mode": mode, "other_session": h.session, "other_mode": h.mode,
                     "other_token": h.token, "other_seq": h.seq, "other_expires_at": h.expires_at}))
            previous = payload.get("previous_mode")
            if (previous is None) != (live_mine is None) or (live_mine and previous != live_mine.mode):
                held = f"holds it {live_mine.mode}" if live_mine else "does not hold it"
                problems.append(Problem("lease-release-held", (
                    f"{path}: grant at seq {seq} says session {session} held it before as {previous}, "
                    f"but the model says it {held}"), {**where, "previous_mode": previous}))
        elif live_mine is None:
            problems.append(Problem("lease-release-held", (
                f"{path}: session {session} renewed at seq {seq} (token {token}) a lease it does not hold"),
                where))
        else:
            mode = live_mine.mode
        new = Holder(session, str(mode), int(token) if isinstance(token, int) else state.last_token,
                     float(payload.get("expires_at", at)), seq, at)
        ghosts = tuple(g for g in ghosts if g.session != session)
        last = (new.token, seq) if new.token > state.last_token else (state.last_token, state.last_seq)
        return LeaseState((*others, new), ghosts, *last), problems

    if kind in ("lease_release", "lease_expire"):
        verb = "released" if kind == "lease_release" else "expired"
        if mine is None or mine.token != token:
            held = f"holds token {mine.token}" if mine else "holds nothing there"
            problems.append(Problem("lease-release-held", (
                f"{path}: {verb} at seq {seq} for session {session} with token {token}, "
                f"but the model says the session {held}"), where))
            return LeaseState(others if mine else state.holders, ghosts, state.last_token, state.last_seq), problems
        if kind == "lease_expire" and at < mine.expires_at:
            problems.append(Problem("lease-release-held", (
                f"{path}: the lease of session {session} (token {token}) was expired at seq {seq}, "
                f"at {stamp(at)}, before its time {stamp(mine.expires_at)}"), {**where, "expires_at": mine.expires_at}))
            ghosts = (*ghosts, mine)
        elif kind == "lease_release" and payload.get("reason") == "release" and mine.expires_at <= at:
            # An explicit release sweeps first: an expired lease cannot reach it.
            problems.append(Problem("lease-release-held", (
                f"{path}: session {session} released token {token} at seq {seq}, at {stamp(at)}, "
                f"after it expired at {stamp(mine.expires_at)}"), {**where, "expires_at": mine.expires_at}))
        return LeaseState(others, ghosts, state.last_token, state.last_seq), problems

    raise ValueError(f"event kind: {kind!r} is not a lease event")


# -- deliveries (one model per message and recipient) -----------------------------------------------


def delivery_init() -> str | None:
    """No delivery exists until a send creates it."""
    return None


def delivery_step(state: str | None, to: str, from_state: str | None) -> tuple[str | None, Problem | None]:
    """``from_state is None``: a send creates the delivery in state ``to``; otherwise a
    ``delivery`` event moves it from ``from_state`` to ``to``. Returns the state the store
    now holds (the event is the truth) and the problem, if any."""
    if from_state is None:
        if state is not None:
            return state, Problem("delivery-exactly-once", f"the delivery was created again (it is already {state})")
        if to not in INITIAL:
            return to, Problem("delivery-forward", f"a delivery was created as {to}, not stored or undeliverable")
        return to, None
    if state is None:
        return to, Problem("delivery-forward", f"a delivery that was never created moved {from_state} → {to}")
    if from_state != state:
        return to, Problem("delivery-forward", f"the event moves it from {from_state}, but the model holds {state}")
    if (from_state, to) not in TRANSITIONS:
        return to, Problem("delivery-forward", f"{from_state} → {to} is not a forward move")
    return to, None
