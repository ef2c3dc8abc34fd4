"""The checker's edit-guard invariant on hand-written runs of guarded edits (sim/check/guarded.py):
agents that never claim edit through the edit guard, which grants at the edit (EG1), denies
naming a holder in the way (EG2), and keeps two sessions' writes of one file apart (EG3)."""

from __future__ import annotations

from typing import Any

from test_checker import T0, X, Y, Run, violated

from agents_room.store.editclaim import EDIT_TTL_S
from sim.check.checker import Verdict


class Guarded(Run):
    """Two sessions A and B (joined, drained at the end) and their guarded edits."""

    def __init__(self) -> None:
        super().__init__()
        for p, s in ((0, "A"), (1, "B")):
            self.event(T0 + p * 0.01, s, "join", rooms=["repo:r"], autonomy="notify", harness_key=f"k{s}", rejoin=False)
            self.op(p, None, "room_join", {"harness_key": f"k{s}"}, T0 + p * 0.01 - 0.001, result={"session_id": s})

    def allowed(self, p: int, s: str, path: str, t: float, *, grant: bool = True, mode: str = "exclusive",
                ttl: float = EDIT_TTL_S, at_edit: bool = True, previous: str | None = None, **more: Any) -> None:
        """An edit the guard let through; ``grant``: its lease granted (else the read-only look)."""
        if grant:
            self.event(t + 0.001, s, "lease_grant", path, mode=mode, token=next(self.tokens), expires_at=t + 0.001 + ttl,
                       previous_mode=previous, **({"at_edit": True} if at_edit else {}))
        self.op(p, s, "guarded_edit", {"path": path}, t, result={"ok": True, "path": path, "hash": "h", **more})

    def denied(self, p: int, s: str, path: str, t: float, holder: str | None) -> None:
        self.op(p, s, "guarded_edit", {"path": path}, t,
                result={"ok": False, "path": path, "holder": holder, "mode": "exclusive", "reason": "denied"})

    def done(self) -> Verdict:
        self.recv(0, "A", T0 + 5, [])
        self.recv(1, "B", T0 + 5, [])
        return self.check()


def rules(v: Verdict) -> dict[str, int]:
    return {rule: r["violations"] for rule, r in v.rules.items()}


def test_the_guard_at_work_is_valid_and_counted() -> None:
    r = Guarded()
    r.allowed(0, "A", X, T0 + 0.1)
    r.denied(1, "B", X, T0 + 0.2, holder="A")
    r.allowed(1, "B", Y, T0 + 0.3)
    r.allowed(0, "A", X, T0 + 0.4, grant=False)  # renewed a moment ago: allowed on the read-only look
    r.allowed(0, "A", X, T0 + 0.5, previous="exclusive")  # renewed: a new grant at the edit
    r.denied(0, "A", Y, T0 + 0.6, holder="B")
    v = r.done()
    assert v.verdict == "valid", v.violations
    assert v.invariants["edit-guard"].checked >= 6
    assert {k: v.counts[k] for k in ("guarded_edits", "guarded_allowed", "guarded_denied", "guarded_unguarded",
                                     "overlapping_writes")} == \
        {"guarded_edits": 6, "guarded_allowed": 4, "guarded_denied": 2, "guarded_unguarded": 0, "overlapping_writes": 0}


def test_writes_without_a_guard_overlap_and_hold_no_lease() -> None:
    """The control (edits = "off"): every edit written, no lease taken."""
    r = Guarded()
    r.allowed(0, "A", X, T0 + 0.1, grant=False)
    r.allowed(1, "B", X, T0 + 0.2, grant=False)
    r.allowed(0, "A", X, T0 + 0.3, grant=False)
    r.allowed(1, "B", Y, T0 + 0.4, grant=False)
    v = r.done()
    assert v.verdict == "invalid" and violated(v) == {"edit-guard"}
    assert rules(v) == {"EG1": 4, "EG3": 2}  # B's write of X inside A's hold, then A's inside B's
    assert v.counts["overlapping_writes"] == 2
    first = next(x for x in v.violations if x.details["rule"] == "EG3")
    assert "a01" in first.message and "session A" in first.message and X in first.message


def test_a_guard_that_grants_both_sessions_is_caught_twice() -> None:
    """A broken guard grants B's edit while A holds the file: the model's lease-exclusive and the
    edit guard's overlap both see it."""
    r = Guarded()
    r.allowed(0, "A", X, T0 + 0.1)
    r.allowed(1, "B", X, T0 + 0.2)
    v = r.done()
    assert {"edit-guard", "lease-exclusive"} <= violated(v)
    assert rules(v).get("EG3") == 1 and "EG1" not in rules(v)


def test_a_leave_ends_the_hold_and_a_hold_ends_with_its_lease() -> None:
    r = Guarded()
    r.allowed(0, "A", X, T0 + 0.1)
    r.event(T0 + 0.201, "A", "lease_release", X, mode="exclusive", token=1, reason="leave")
    r.event(T0 + 0.201, "A", "leave", rooms=["repo:r"], released=[X])
    r.op(0, "A", "room_leave", {"session_id": "A"}, T0 + 0.2)
    r.allowed(1, "B", X, T0 + 0.3)  # A left: B may write it
    v = r.done()
    assert "edit-guard" not in violated(v), v.violations


def test_each_broken_rule_is_named() -> None:
    r = Guarded()
    r.allowed(0, "A", X, T0 + 0.1, mode="shared")  # EG1: an edit takes the file exclusive
    r.allowed(1, "B", Y, T0 + 0.2, ttl=30)  # EG1: for the guard's TTL
    r.allowed(1, "B", "/repo/src/z.py", T0 + 0.3, at_edit=False)  # EG1: marked at_edit (and so unexplained)
    r.denied(0, "A", "/repo/src/w.py", T0 + 0.4, holder="B")  # EG2: nobody held w.py
    r.denied(1, "B", X, T0 + 0.5, holder=None)  # EG2: a denial names its holder
    r.allowed(0, "A", Y, T0 + 0.6, grant=False, broken="store unreachable")  # EG1 (and EG3: B holds Y)
    v = r.done()
    assert rules(v) == {"EG1": 5, "EG2": 2, "EG3": 1}, v.rules
    assert v.counts["guarded_unguarded"] == 1
    text = " ".join(x.message for x in v.violations)
    assert "the guard said it is not working: store unreachable" in text and "naming holder B" in text


def test_a_write_that_failed_after_the_guard_granted_is_no_orphan_grant() -> None:
    """The guard granted, then the agent's write failed (``io_error``): the grant is the op's,
    nothing was written, and a denied edit still may not have a grant."""
    r = Guarded()
    r.event(T0 + 0.101, "A", "lease_grant", X, mode="exclusive", token=next(r.tokens), expires_at=T0 + 0.101 + EDIT_TTL_S,
            previous_mode=None, at_edit=True)
    r.op(0, "A", "guarded_edit", {"path": X}, T0 + 0.1, outcome="fail", error="io_error")
    assert r.done().verdict == "valid"
    r = Guarded()
    r.event(T0 + 0.101, "A", "lease_grant", X, mode="exclusive", token=next(r.tokens), expires_at=T0 + 0.101 + EDIT_TTL_S,
            previous_mode=None, at_edit=True)
    r.denied(0, "A", X, T0 + 0.1, holder="B")
    assert "history-events" in violated(r.done())
