"""The small model: lease steps per path, delivery steps per (message, recipient), and the
model agreeing with the real store on random operation sequences."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agents_room.store import Clock, Event, LeaseNotHeld, Store
from sim.check.model import (
    INITIAL, TRANSITIONS, UNREAD, LeaseState, delivery_init, delivery_step, lease_init, lease_step, live_holders,
)
from sim.check.replay import replay

X = "/repo/x.py"


def step(state: LeaseState, seq: int, at: float, kind: str, s: str, payload: dict[str, Any]) -> tuple[LeaseState, list[Any]]:
    return lease_step(state, Event(seq, at, s, kind, X, payload))


def grant(state: LeaseState, seq: int, at: float, s: str, token: int, mode: str = "exclusive", ttl: float = 10,
          previous: str | None = None) -> tuple[LeaseState, list[Any]]:
    return step(state, seq, at, "lease_grant", s,
                {"mode": mode, "token": token, "expires_at": at + ttl, "previous_mode": previous})


def invariants(problems: list[Any]) -> list[str]:
    return [p.invariant for p in problems]


# -- leases -------------------------------------------------------------------------------------


def test_grant_release_and_grant_again_is_clean() -> None:
    s, p1 = grant(lease_init(), 1, 0.0, "A", 1)
    s, p2 = step(s, 2, 1.0, "lease_release", "A", {"mode": "exclusive", "token": 1, "reason": "release"})
    s, p3 = grant(s, 3, 2.0, "B", 2)
    assert p1 == p2 == p3 == []
    assert [(h.session, h.token) for h in s.holders] == [("B", 2)] and s.last_token == 2


def test_a_second_exclusive_holder_is_a_violation_naming_both() -> None:
    s, _ = grant(lease_init(), 1, 0.0, "A", 1)
    s, problems = grant(s, 2, 1.0, "B", 2)
    assert invariants(problems) == ["lease-exclusive"]
    assert problems[0].details["other_session"] == "A" and problems[0].details["session"] == "B"
    assert {h.session for h in s.holders} == {"A", "B"}  # the model follows the store and keeps checking


def test_shared_beside_exclusive_either_way_round() -> None:
    s, _ = grant(lease_init(), 1, 0.0, "A", 1, mode="shared")
    assert invariants(grant(s, 2, 1.0, "B", 2)[1]) == ["lease-exclusive"]
    assert grant(s, 2, 1.0, "B", 2, mode="shared")[1] == []
    s, _ = grant(lease_init(), 1, 0.0, "A", 1)
    assert invariants(grant(s, 2, 1.0, "B", 2, mode="shared")[1]) == ["lease-exclusive"]


def test_an_expired_holder_is_not_in_the_way() -> None:
    s, _ = grant(lease_init(), 1, 0.0, "A", 1, ttl=1)
    assert live_holders(s, 1.0) == [] and len(live_holders(s, 0.999)) == 1
    assert grant(s, 2, 1.0, "B", 2)[1] == []  # the store's rule: live while expires_at > now


def test_the_holders_own_reclaim_and_upgrade_are_not_conflicts() -> None:
    s, _ = grant(lease_init(), 1, 0.0, "A", 1, mode="shared")
    s, problems = grant(s, 2, 1.0, "A", 2, mode="exclusive", previous="shared")
    assert problems == [] and [(h.mode, h.token) for h in s.holders] == [("exclusive", 2)]


def test_a_reclaim_must_agree_with_what_the_model_holds() -> None:
    s, _ = grant(lease_init(), 1, 0.0, "A", 1)
    assert invariants(grant(s, 2, 1.0, "A", 2, previous=None)[1]) == ["lease-release-held"]
    assert invariants(grant(lease_init(), 1, 0.0, "A", 1, previous="shared")[1]) == ["lease-release-held"]


def test_tokens_only_go_up_per_path() -> None:
    s, _ = grant(lease_init(), 1, 0.0, "A", 5)
    s, _ = step(s, 2, 1.0, "lease_release", "A", {"mode": "exclusive", "token": 5, "reason": "release"})
    assert invariants(grant(s, 3, 2.0, "B", 5)[1]) == ["lease-token-monotonic"]
    renew = step(s, 3, 2.0, "lease_renew", "A", {"mode": "exclusive", "token": 4, "expires_at": 12.0})[1]
    assert sorted(invariants(renew)) == ["lease-release-held", "lease-token-monotonic"]


def test_renew_extends_and_renewing_an_unheld_lease_is_a_violation() -> None:
    s, _ = grant(lease_init(), 1, 0.0, "A", 1, ttl=5)
    s, problems = step(s, 2, 4.0, "lease_renew", "A", {"mode": "exclusive", "token": 2, "expires_at": 14.0})
    assert problems == [] and s.holders[0].expires_at == 14.0 and s.holders[0].token == 2
    late = step(s, 3, 14.0, "lease_renew", "A", {"mode": "exclusive", "token": 3, "expires_at": 24.0})[1]
    assert invariants(late) == ["lease-release-held"]


def test_release_and_expiry_must_name_the_held_token() -> None:
    s, _ = grant(lease_init(), 1, 0.0, "A", 1)
    wrong = step(s, 2, 1.0, "lease_release", "A", {"mode": "exclusive", "token": 9, "reason": "release"})[1]
    assert invariants(wrong) == ["lease-release-held"]
    nobody = step(s, 2, 1.0, "lease_release", "B", {"mode": "exclusive", "token": 1, "reason": "release"})[1]
    assert invariants(nobody) == ["lease-release-held"]
    late = step(s, 2, 11.0, "lease_release", "A", {"mode": "exclusive", "token": 1, "reason": "release"})[1]
    assert invariants(late) == ["lease-release-held"]  # a release sweeps first: it cannot see an expired lease
    leave = step(s, 2, 11.0, "lease_release", "A", {"mode": "exclusive", "token": 1, "reason": "leave"})[1]
    assert leave == []  # leaving releases everything, swept or not


def test_a_premature_expiry_leaves_a_ghost_that_still_blocks() -> None:
    s, _ = grant(lease_init(), 1, 0.0, "A", 1, ttl=10)
    s, problems = step(s, 2, 3.0, "lease_expire", "A", {"mode": "exclusive", "token": 1, "expires_at": 10.0})
    assert invariants(problems) == ["lease-release-held"] and s.holders == () and len(s.ghosts) == 1
    assert invariants(grant(s, 3, 4.0, "B", 2)[1]) == ["lease-exclusive"]
    assert grant(s, 3, 10.0, "B", 2)[1] == []  # the ghost is gone once its time is up
    on_time = step(grant(lease_init(), 1, 0.0, "A", 1, ttl=10)[0], 2, 10.0, "lease_expire", "A",
                         {"mode": "exclusive", "token": 1, "expires_at": 10.0})
    assert on_time[1] == [] and on_time[0].ghosts == ()


# -- deliveries ---------------------------------------------------------------------------------


def test_the_transitions_are_the_stores_own_table(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s" / "room.db") as store:
        rows = store.db.conn.execute("SELECT from_state, to_state FROM delivery_transitions").fetchall()
    assert set(rows) == TRANSITIONS


def test_every_allowed_move_passes_and_every_other_move_is_backward() -> None:
    states = sorted({s for pair in TRANSITIONS for s in pair})
    for a in states:
        for b in states:
            if a == b:
                continue
            nxt, problem = delivery_step(a, b, a)
            assert nxt == b
            assert (problem is None) == ((a, b) in TRANSITIONS), (a, b)
            if problem:
                assert problem.invariant == "delivery-forward"


def test_creation_moves_from_the_wrong_state_and_unknown_deliveries() -> None:
    assert delivery_init() is None
    assert all(delivery_step(None, s, None) == (s, None) for s in INITIAL)
    assert delivery_step(None, "read", None)[1].invariant == "delivery-forward"  # type: ignore[union-attr]
    assert delivery_step("stored", "stored", None)[1].invariant == "delivery-exactly-once"  # type: ignore[union-attr]
    assert "never created" in delivery_step(None, "read", "stored")[1].message  # type: ignore[union-attr]
    assert "model holds read" in delivery_step("read", "acked", "stored")[1].message  # type: ignore[union-attr]
    assert UNREAD < {s for pair in TRANSITIONS for s in pair}


# -- the model agrees with the real store ---------------------------------------------------------

action = st.one_of(
    st.tuples(st.just("claim"), st.integers(0, 2), st.integers(0, 1), st.sampled_from(["exclusive", "shared"]),
              st.integers(1, 5)),
    st.tuples(st.just("renew"), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("release"), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("wait"), st.sampled_from([0.5, 1.0, 2.5])),
    st.tuples(st.just("send"), st.integers(0, 2)),
    st.tuples(st.just("recv"), st.integers(0, 2)),
    st.tuples(st.just("ack"), st.integers(0, 2)),
    st.tuples(st.just("leave"), st.integers(0, 2)),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(action, max_size=30))
def test_replaying_a_real_stores_events_finds_nothing(actions: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        clock = Clock(fixed=1_800_000_000.0)
        with Store.open(Path(tmp) / "s" / "room.db", clock=clock) as store:
            sids = [store.room_join(cwd=tmp, pid=None).session_id for _ in range(3)]
            read: dict[int, list[int]] = {0: [], 1: [], 2: []}
            paths = [f"{tmp}/a.txt", f"{tmp}/b.txt"]
            for act in actions:
                _apply(store, clock, sids, paths, read, act)
            events = store.events(0, 100_000)
    rep = replay(events)
    assert rep.problems == []
    assert rep.events == len(events)


def _apply(store: Store, clock: Clock, sids: list[str], paths: list[str], read: dict[int, list[int]],
           act: tuple[Any, ...]) -> None:
    kind = act[0]
    if kind == "wait":
        clock.shift(act[1])
        return
    who = act[1]
    sid = sids[who]
    try:
        if kind == "claim":
            store.lease_claim(sid, paths[act[2]], ttl_s=act[4], mode=act[3])
        elif kind == "renew":
            store.lease_renew(sid, paths[act[2]])
        elif kind == "release":
            store.lease_release(sid, paths[act[2]])
        elif kind == "send":
            store.msg_send(sid, "*", subject="s")
        elif kind == "recv":
            read[who] += [m.id for m in store.msg_recv(sid).messages]
        elif kind == "ack" and read[who]:
            store.msg_ack(sid, read[who].pop(0))
        elif kind == "leave":
            store.room_leave(sid)
            sids[who] = store.room_join(cwd=str(Path(paths[0]).parent), pid=None).session_id
            read[who] = []
    except LeaseNotHeld:
        pass
