"""Call counts (store/callcounts.py): counted in memory, added inside one of the process's own
write transactions (the first once a second has passed since the last), never a write of
their own for a read; kept when that write rolls back; flushed at a clean close. On both
engines."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from agents_room.store import Clock, InvalidArgument, Store, callcounts
from agents_room.store.callcounts import FLUSH_EVERY_S, WINDOW_S, bucket, bucket_ms, session_key

from .conftest import rows


def _counts(store: Store) -> list[tuple]:
    return rows(store, "SELECT session_id, tool, outcome, n FROM call_counts ORDER BY tool, outcome")


def test_a_read_is_counted_without_a_write_then_rides_the_next_write(store: Store, join: Callable[..., str]) -> None:
    me = join()
    assert store.calls is not None
    before = rows(store, "SELECT count(*) FROM events")[0][0]
    t = time.monotonic()
    store.msg_unread(me)
    store.calls.count("msg_unread", me, "ok", t, t + 0.001)
    store.calls.count("lease_check", me, "ok", t + 0.011, t + 0.012)
    # nothing written for the reads: no row, no event, no transaction of their own
    assert _counts(store) == []
    assert rows(store, "SELECT count(*) FROM events")[0][0] == before
    store.lease_claim(me, "a.py")  # a write of this process: the counts ride it
    assert _counts(store) == [(me, "lease_check", "ok", 1), (me, "msg_unread", "ok", 1)]
    # the gap from the end of one call to the start of the next: 10 ms, in its bucket
    gaps = rows(store, "SELECT session_id, bucket, n FROM call_gaps")
    assert gaps == [(me, bucket(10.0), 1)]
    low, high = bucket_ms(gaps[0][1])
    assert low <= 10.0 < high
    # counted once: the next write adds nothing already written
    store.lease_release(me, "a.py")
    assert _counts(store) == [(me, "lease_check", "ok", 1), (me, "msg_unread", "ok", 1)]


def test_counts_add_up_per_window_and_outcome(store: Store, join: Callable[..., str], clock: Clock,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    me = join()
    t = time.monotonic()
    for outcome in ("ok", "ok", "denied", "unknown_session"):
        store.calls.count("lease_claim", me, outcome, t, t)  # type: ignore[union-attr]
    store.lease_claim(me, "a.py")
    store.calls.count("lease_claim", me, "ok", t, t)  # type: ignore[union-attr]
    # The period read at each write, made long while the next write must fall inside it: on a
    # loaded machine a second can pass between two statements.
    monkeypatch.setattr(callcounts, "FLUSH_EVERY_S", 600.0)
    store.lease_release(me, "a.py")  # within the period of the last: it carries nothing
    assert _counts(store) == [(me, "lease_claim", "denied", 1), (me, "lease_claim", "ok", 2),
                              (me, "lease_claim", "unknown_session", 1)]
    monkeypatch.setattr(callcounts, "FLUSH_EVERY_S", FLUSH_EVERY_S)
    time.sleep(FLUSH_EVERY_S)
    store.lease_claim(me, "a.py")  # a period later: due again, added to the same row
    assert _counts(store) == [(me, "lease_claim", "denied", 1), (me, "lease_claim", "ok", 3),
                              (me, "lease_claim", "unknown_session", 1)]
    windows = {r[0] for r in rows(store, "SELECT window_start FROM call_counts")}
    assert windows == {int(clock.now() // WINDOW_S) * WINDOW_S}


def test_a_write_that_rolls_back_keeps_the_counts_for_the_next(store: Store, join: Callable[..., str]) -> None:
    me = join()
    t = time.monotonic()
    store.calls.count("room_who", me, "ok", t, t)  # type: ignore[union-attr]
    with pytest.raises(InvalidArgument):
        store.room_leave_room(me, "nowhere")  # refused inside its write transaction: rolled back
    assert _counts(store) == []
    store.lease_claim(me, "a.py")
    assert _counts(store) == [(me, "room_who", "ok", 1)]


def test_what_is_left_is_written_at_a_clean_close(location: str, clock: Clock, repo: object) -> None:
    with Store.open(location, clock=clock) as first:
        me = first.room_join(cwd=str(repo), pid=None).session_id
        t = time.monotonic()
        first.calls.count("msg_unread", me, "ok", t, t)  # type: ignore[union-attr]
    with Store.open(location, clock=clock) as again:
        assert _counts(again) == [(me, "msg_unread", "ok", 1)]


def test_counting_off_counts_nothing(location: str, clock: Clock, repo: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTS_ROOM_COUNT_CALLS", "0")
    with Store.open(location, clock=clock) as store:
        assert store.calls is None
        store.room_join(cwd=str(repo), pid=None)
        assert _counts(store) == []


def test_only_well_formed_session_ids_are_kept() -> None:
    assert session_key("0123456789abcdef") == "0123456789abcdef"
    for made_up in (None, 7, "0123456789ABCDEF", "my-secret-label!", "0123456789abcde", "2b50133e-0000"):
        assert session_key(made_up) == ""


def test_buckets_cover_every_gap_in_order() -> None:
    gaps = [0.0, 0.05, 0.1, 0.5, 1.0, 15.0, 999.0, 60_000.0, 1e12]
    found = [bucket(g) for g in gaps]
    assert found == sorted(found) and found[0] == 0 and found[-1] == 127
    for g in gaps[2:-1]:
        low, high = bucket_ms(bucket(g))
        assert low <= g < high


def test_a_session_id_of_any_json_shape_is_counted_as_none_and_the_write_goes_through(
        store: Store, join: Callable[..., str]) -> None:
    """A client may send a list or an object as ``session_id`` (the tool refuses it, the call
    is still counted): the count keeps no such value, and the write it rides commits."""
    me = join()
    assert store.calls is not None
    t = time.monotonic()
    for bad in ({"id": me}, [me], None, 7):
        store.calls.count("msg_unread", bad, "invalid_argument", t, t + 0.001)
    assert store.lease_claim(me, "a.py").ok  # the counts ride this write
    assert _counts(store) == [("", "msg_unread", "invalid_argument", 4)]
