"""The checker's own coverage rule (sim/check/cover.py) and where it is used: the replay's
lease-exclusive across paths and note_read's holder, the oracle's file: recipients. The rule
is written apart from the store's (store/coverage.py); here the two are held to agree."""

from __future__ import annotations

import fnmatch
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agents_room.store import Event, coverage
from sim.check import cover
from sim.check.replay import replay

_component = st.text(alphabet="ap.0-", min_size=1, max_size=3).filter(lambda c: c not in {".", ".."})
_paths = st.lists(_component, min_size=0, max_size=3).map(lambda parts: "/" + "/".join(parts))
_leases = st.tuples(_paths, st.booleans()).map(lambda p: p[0].rstrip("/") + "/" if p[1] else p[0])
_globs = st.text(alphabet="ap/*?[]!.", min_size=0, max_size=7)


@given(_leases, _leases)
def test_the_checker_s_coverage_agrees_with_the_store_s(a: str, b: str) -> None:
    assert cover.covers(a, b) == coverage.covers(a, b)
    assert cover.contend(a, b) == coverage.overlaps(a, b)


@given(_leases)
def test_above_is_every_directory_over_a_path(path: str) -> None:
    assert sorted(cover.above(path)) == sorted(coverage.ancestors(path))


@given(_globs, _leases, st.sampled_from(["/", "/a", "/a/p"]))
def test_the_checker_s_file_rule_agrees_with_the_store_s(pattern: str, lease: str, cwd: str) -> None:
    assert cover.glob_reaches(pattern, lease, cwd) == coverage.glob_reaches(pattern, lease, cwd)


@given(_globs, _leases, st.text(alphabet="ap/.", max_size=5))
def test_a_glob_matching_a_path_beneath_names_the_directory(pattern: str, lease: str, rest: str) -> None:
    if cover.is_dir(lease) and fnmatch.fnmatchcase(lease + rest, pattern):
        assert cover.glob_names_beneath(pattern, lease)


def _ev(seq: int, kind: str, session: str, path: str, **payload: Any) -> Event:
    return Event(seq, float(seq), session, kind, path, payload)


def _grant(seq: int, session: str, path: str, mode: str = "exclusive") -> Event:
    return _ev(seq, "lease_grant", session, path, mode=mode, token=seq, expires_at=seq + 100.0, previous_mode=None)


def test_a_grant_over_or_beneath_another_s_live_lease_breaks_exclusion() -> None:
    for first, second in (("/r/src/", "/r/src/a.py"), ("/r/src/a.py", "/r/src/"), ("/r/", "/r/src/")):
        rep = replay([_grant(1, "A", first), _grant(2, "B", second)])
        assert [p.invariant for p in rep.problems] == ["lease-exclusive"], (first, second)
        assert rep.problems[0].details["other_path"] == first


def test_beside_shared_or_released_is_no_conflict() -> None:
    beside = replay([_grant(1, "A", "/r/src/"), _grant(2, "B", "/r/srcs.py"), _grant(3, "B", "/r/src")])
    shared = replay([_grant(1, "A", "/r/src/", "shared"), _grant(2, "B", "/r/src/a.py", "shared")])
    released = replay([_grant(1, "A", "/r/src/"),
                       _ev(2, "lease_release", "A", "/r/src/", mode="exclusive", token=1, reason="release"),
                       _grant(3, "B", "/r/src/a.py")])
    own = replay([_grant(1, "A", "/r/src/"), _grant(2, "A", "/r/src/a.py")])
    assert beside.problems == shared.problems == released.problems == own.problems == []


def test_a_read_under_another_s_directory_lease_records_the_holder() -> None:
    rep = replay([_grant(1, "A", "/r/src/"), _ev(2, "note_read", "B", "/r/src/a.py", hash="h"),
                  _ev(3, "note_read", "B", "/r/lib/a.py", hash="h")])
    assert rep.held_at_read == {2: "A", 3: None}
