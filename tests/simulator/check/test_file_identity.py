"""The checker judges files, not spellings: a run whose agents reach one repository through two
paths (``[[repos]] spellings``: a symlink to the folder above it) records the spelled folders in
``spellings.json``, and the checker puts every path in its real spelling before judging. Known
good and known bad hand-written histories, each checked with and without the run's spellings:
a checker blind to them misses a double grant through the link, and calls a store that keys by
file a liar."""

from __future__ import annotations

import pytest

from sim.check.checker import check
from sim.check.identity import Spellings
from test_checker import T0, Run, violated
from test_oracle import Run as OracleRun
from test_oracle import drain

REAL, LINK = "/w/repos", "/w/spelled/1"
SPELLINGS = {LINK: REAL}
X_REAL, X_LINK = f"{REAL}/core/src/x.py", f"{LINK}/core/src/x.py"


def test_a_path_is_respelled_by_whole_components_and_the_longest_folder_first() -> None:
    names = Spellings({LINK: REAL, "/w/spelled/1/core/deep": "/elsewhere/deep", "/w/a/": "/w/b/"})
    assert names.path(X_LINK) == X_REAL
    assert names.path(f"{LINK}/core/") == f"{REAL}/core/"  # a directory lease keeps its "/"
    assert names.path(LINK) == REAL
    assert names.path("/w/spelled/1/core/deep/y.py") == "/elsewhere/deep/y.py"
    assert names.path("/w/spelled/10/core/x.py") == "/w/spelled/10/core/x.py"  # another folder, not a prefix
    assert names.path("/w/a/x.py") == "/w/b/x.py"
    assert names.path("src/x.py") == "src/x.py"  # relative: the store makes it absolute against the cwd
    assert names.path(None) is None
    assert names.selector(f"file:{X_LINK}") == f"file:{X_REAL}"
    assert names.selector(f"file:{LINK}/core/src/*.py") == f"file:{REAL}/core/src/*.py"
    assert names.selector("file:x.py") == "file:x.py" and names.selector("*") == "*"
    assert not Spellings({}) and not Spellings({REAL: REAL})  # nothing spelled two ways: nothing to do


def test_spelled_folders_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="spellings: 'spelled/1' -> '/w/repos': both folders must be absolute"):
        Spellings({"spelled/1": REAL})


def double_grant_through_the_link() -> Run:
    """A store keyed by spelling: A holds x.py exclusive by its real path, B is granted it
    exclusive through the link while A's lease is live."""
    r = Run()
    r.event(T0, "A", "join", rooms=["repo:core"], autonomy="notify", harness_key="ka", rejoin=False, cwd=f"{REAL}/core")
    r.op(0, None, "room_join", {"harness_key": "ka"}, T0 - 0.001, result={"session_id": "A"})
    r.event(T0 + 0.010, "B", "join", rooms=["repo:core"], autonomy="notify", harness_key="kb", rejoin=False,
            cwd=f"{LINK}/core")
    r.op(1, None, "room_join", {"harness_key": "kb"}, T0 + 0.009, result={"session_id": "B"})
    ta = r.claim(0, "A", X_REAL, T0 + 0.1)
    tb = r.claim(1, "B", X_LINK, T0 + 0.2)
    r.release(0, "A", X_REAL, T0 + 0.5, ta)
    r.release(1, "B", X_LINK, T0 + 0.6, tb)
    return r


def test_two_exclusive_grants_of_one_file_through_two_spellings_are_caught_by_replay_and_black_box() -> None:
    r = double_grant_through_the_link()
    v = check(r.events, r.records, "ok", spellings=SPELLINGS)
    assert v.verdict == "invalid"
    assert violated(v) == {"lease-exclusive", "lease-windows"}
    first = next(x for x in v.violations if x.invariant == "lease-exclusive")
    assert first.message.startswith(f"{X_REAL}: session B was granted exclusive")
    assert "while session A held it exclusive" in first.message
    # Blind to the spellings, the two leases look like two files: the bug goes unseen.
    assert check(r.events, r.records, "ok").verdict == "valid"


def test_a_grant_through_the_link_beneath_a_directory_held_by_its_real_path() -> None:
    r = Run()
    ta = r.claim(0, "A", f"{REAL}/core/src/", T0 + 0.1)
    r.claim(1, "B", X_LINK, T0 + 0.2)
    r.release(0, "A", f"{REAL}/core/src/", T0 + 0.5, ta)
    v = check(r.events, r.records, "ok", spellings=SPELLINGS)
    assert "lease-exclusive" in violated(v)
    assert any(f"beneath {REAL}/core/src/" in x.message for x in v.violations if x.invariant == "lease-exclusive")
    assert "lease-exclusive" not in violated(check(r.events, r.records, "ok"))


def one_file_by_two_spellings() -> Run:
    """A store that keys by file: its events name the real path whichever spelling the agent
    sent; B, asking through the link, is denied while A holds it, then granted after."""
    r = Run()
    ta = r.claim(0, "A", X_REAL, T0 + 0.1)
    r.deny(1, "B", X_LINK, T0 + 0.2, holder="A")
    r.release(0, "A", X_REAL, T0 + 0.3, ta)
    tb = r.token = next(r.tokens)
    r.event(T0 + 0.401, "B", "lease_grant", X_REAL, mode="exclusive", token=tb, expires_at=T0 + 10.401,
            previous_mode=None)
    r.op(1, "B", "lease_claim", {"path": X_LINK, "mode": "exclusive", "ttl_s": 10}, T0 + 0.4,
         result={"ok": True, "token": tb, "mode": "exclusive", "expires_at": T0 + 10.401, "holder": "B"})
    r.op(1, "B", "edit", {"path": X_LINK, "token": tb}, T0 + 0.5, result={"path": X_LINK, "token": tb, "hash": "h1"})
    r.op(1, "B", "lease_list", {}, T0 + 0.6, result={"leases": [[X_REAL, "B", "exclusive", True]]})
    r.event(T0 + 0.701, "B", "lease_release", X_REAL, mode="exclusive", token=tb, reason="release")
    r.op(1, "B", "lease_release", {"path": X_LINK}, T0 + 0.7)
    return r


def test_one_file_claimed_by_two_spellings_in_turn_is_valid() -> None:
    r = one_file_by_two_spellings()
    v = check(r.events, r.records, "ok", spellings=SPELLINGS)
    assert v.verdict == "valid", v.violations
    assert v.invariants["lease-windows"].checked == 2 and v.invariants["history-events"].checked >= 4
    # Blind to the spellings, B's claim through the link has no event of its path: the
    # checker would blame a store that did right.
    assert "history-events" in violated(check(r.events, r.records, "ok"))


def test_a_file_selector_through_the_link_reaches_the_holder_of_the_real_path() -> None:
    r = OracleRun()
    r.join("A", ["repo:core"], cwd=f"{REAL}/core")
    r.join("B", ["repo:core"], cwd=f"{LINK}/core")
    r.claim("A", X_REAL)
    m = r.send("B", f"file:{X_LINK}", ["A"])
    r.recv("A", [m])
    r.records[-1]["value"]["to"] = [f"file:{X_LINK}"]  # the target as its sender wrote it
    drain(r, "A", "B")
    v = check(r.events, r.records, "ok", spellings=SPELLINGS)
    assert v.verdict == "valid", v.violations
    assert v.invariants["selectors"].checked > 0
    # Blind to the spellings, the model resolves the link's path to nobody.
    assert "selectors" in violated(check(r.events, r.records, "ok"))
