"""A ``file:`` selector's matching runs inside ``msg_send``'s write transaction, once per live
lease: its cost is bounded by the glob's length plus the path's, not their product (a glob of
a few hundred characters against a long directory lease held the write lock for seconds).
bench/selector_cost.py gives the longest hold a hostile ``msg_send`` causes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents_room.store import Store, coverage
from agents_room.store.bounds import GLOB_MAX


def nfa_reaches_beneath(pattern: str, prefix: str) -> bool:
    """The earlier rule, kept as the reference: the glob run over ``prefix`` as an automaton
    of fnmatch's units, one character at a time (cost: the path's length times the glob's)."""
    from fnmatch import fnmatchcase

    tokens = coverage._glob_tokens(pattern)

    def closure(states: set[int]) -> set[int]:
        todo, seen = list(states), set(states)
        while todo:
            i = todo.pop()
            if i < len(tokens) and tokens[i] == "*" and i + 1 not in seen:
                seen.add(i + 1)
                todo.append(i + 1)
        return seen

    states = closure({0})
    for ch in prefix:
        step = {i if tokens[i] == "*" else i + 1 for i in states
                if i < len(tokens) and (tokens[i] == "*" or fnmatchcase(ch, tokens[i]))}
        if not step:
            return False
        states = closure(step)
    return True


@given(st.text(alphabet="ap/*?[]!.", max_size=10), st.text(alphabet="ap/.]![", max_size=10))
def test_the_bounded_rule_answers_as_the_automaton_did(pattern: str, prefix: str) -> None:
    assert coverage.glob_reaches_beneath(pattern, prefix) == nfa_reaches_beneath(pattern, prefix)


HOSTILE = ["*x" * 127 + "Q", "*?" * 127 + "Q", "*[!Q]" * 51 + "Q", "[x]*" * 63 + "Q"]


@pytest.mark.parametrize("glob", HOSTILE, ids=["stars", "stars-and-any", "negated-sets", "sets"])
def test_a_hostile_glob_against_a_long_directory_lease_costs_little_work(
        store: Store, join: Callable[..., str], repo: Path, glob: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The work is counted, not timed (a loaded machine times anything): every fnmatch call
    the selector makes. The earlier rule made about a million for one lease here."""
    assert len(glob) <= GLOB_MAX
    sender, holder = join(label="sender"), join(label="holder")
    long_dir = str(repo) + "/" + "/".join(["x" * 200] * 19) + "/"
    assert store.lease_claim(holder, long_dir).ok
    calls = 0
    real = coverage._fnmatchcase

    def counted(name: str, pattern: str) -> bool:
        nonlocal calls
        calls += 1
        return real(name, pattern)

    monkeypatch.setattr(coverage, "_fnmatchcase", counted)
    sent = store.msg_send(sender, "file:" + glob)
    assert sent.recipients == [holder]
    assert 0 < calls <= 2 * (6 + 2 * GLOB_MAX), calls  # two spellings, six whole forms, two prefixes


def test_the_glob_is_matched_outside_the_write_lock_and_a_newer_lease_inside(
        store: Store, join: Callable[..., str], repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The leases live at a read snapshot are matched before the write transaction begins;
    inside it, only a lease taken since (here: between the snapshot and the transaction) is."""
    import contextlib

    sender, early, late = join(label="sender"), join(label="early"), join(label="late")
    assert store.lease_claim(early, str(repo / "early") + "/").ok
    inside, seen = False, []
    real_fn, real_read, real_write = coverage._fnmatchcase, store.db.read, store.db.write

    def counted(name: str, pattern: str) -> bool:
        if inside:
            seen.append(name)
        return real_fn(name, pattern)

    @contextlib.contextmanager
    def read():  # noqa: ANN202
        with real_read() as tx:
            yield tx
        monkeypatch.setattr(store.db, "read", real_read)
        assert store.lease_claim(late, str(repo / "late") + "/").ok  # after the snapshot

    @contextlib.contextmanager
    def write():  # noqa: ANN202
        nonlocal inside
        with real_write() as tx:
            inside = True
            try:
                yield tx
            finally:
                inside = False

    monkeypatch.setattr(coverage, "_fnmatchcase", counted)
    monkeypatch.setattr(store.db, "read", read)
    monkeypatch.setattr(store.db, "write", write)
    sent = store.msg_send(sender, "file:*" + "?" * 40 + "*")
    assert sent.recipients == sorted([early, late])
    assert seen and all("late" in name or name == "?" or len(name) == 1 for name in seen), seen
    assert not [name for name in seen if "early" in name]


def test_leases_taken_faster_than_the_matching_start_the_send_again_then_make_it_busy(
        store: Store, join: Callable[..., str], repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More than LATE_MAX leases taken between the snapshot and the transaction: the send
    starts again from a new snapshot (nothing written meanwhile); when that keeps happening,
    ``store_busy`` after SNAPSHOTS tries and no message is stored. The work inside the lock
    stays bounded either way."""
    import contextlib

    from agents_room.store import StoreBusy
    from agents_room.store.messages import LATE_MAX, SNAPSHOTS

    sender, holder = join(label="sender"), join(label="holder")
    real_read, taken = store.db.read, [0]

    def burst() -> None:
        for _ in range(LATE_MAX + 1):
            assert store.lease_claim(holder, str(repo / "d" / f"f{taken[0]}.py")).ok
            taken[0] += 1

    @contextlib.contextmanager
    def read(bursts: list[int]):  # noqa: ANN202
        with real_read() as tx:
            yield tx
        if bursts[0] > 0:
            bursts[0] -= 1
            burst()

    once = [1]
    monkeypatch.setattr(store.db, "read", lambda: read(once))
    sent = store.msg_send(sender, "file:d/*")
    assert sent.recipients == [holder] and once == [0]
    before = store.msg_sent(sender)
    always = [SNAPSHOTS]
    monkeypatch.setattr(store.db, "read", lambda: read(always))
    with pytest.raises(StoreBusy, match="changed faster than the file: selector could be matched"):
        store.msg_send(sender, "file:d/*")
    assert store.msg_sent(sender) == before and always == [0]
