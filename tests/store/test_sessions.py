"""Sessions: join, rejoin by harness key, autonomy, leave, prune, and the unknown-id hints
of contract §2."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from agents_room.store import Clock, InvalidArgument, Store, UnknownSession

from .conftest import rows

KEY = str(uuid.uuid4())  # per test process: liveness scans every process of the machine


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def dead_pid() -> int:
    """The pid of a real process that has exited and been reaped."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _member(store: Store, sid: str):
    return next(m for m in store.room_who() if m.session_id == sid)


# -- join -------------------------------------------------------------------------------------


def test_join_returns_a_16_hex_session_id(store: Store, repo: Path) -> None:
    joined = store.room_join(cwd=str(repo), pid=None)
    assert re.fullmatch(r"[0-9a-f]{16}", joined.session_id)


def test_two_joins_without_a_key_are_two_sessions(join: Callable[..., str]) -> None:
    assert join() != join()


def test_join_enters_the_repo_room_and_the_rooms_named(store: Store, repo: Path) -> None:
    joined = store.room_join(cwd=str(repo), pid=None, room="team", extra_rooms=["ops", "team"])
    assert joined.rooms == ["ops", "repo:alpha", "team"]


def test_join_records_harness_cwd_pid_label_and_tags(store: Store, repo: Path, join: Callable[..., str]) -> None:
    sid = join(pid=os.getpid(), harness="codex", label="builder", tags=["py", "db"])
    m = _member(store, sid)
    assert (m.harness, m.cwd, m.pid, m.label, m.tags) == ("codex", str(repo), os.getpid(), "builder", ["py", "db"])


def test_join_without_a_harness_records_unknown(store: Store, join: Callable[..., str]) -> None:
    assert _member(store, join()).harness == "unknown"


def test_join_stores_the_harness_key_lowercase(store: Store, join: Callable[..., str]) -> None:
    sid = join(harness_key=KEY.upper())
    stored = rows(store, "SELECT harness_key FROM sessions WHERE id = ?", (sid,))[0][0]
    assert stored == KEY


def test_join_appends_a_join_event_with_its_rooms(store: Store, join: Callable[..., str]) -> None:
    sid = join(room="team")
    (event,) = store.events()
    assert (event.kind, event.session_id, event.payload["rooms"], event.payload["rejoin"]) == (
        "join", sid, ["repo:alpha", "team"], False)


# -- rejoin -----------------------------------------------------------------------------------


def test_rejoin_by_harness_key_keeps_the_session_id(store: Store, repo: Path) -> None:
    first = store.room_join(cwd=str(repo), pid=None, harness_key=KEY)
    again = store.room_join(cwd=str(repo), pid=None, harness_key=KEY)
    assert (again.session_id, again.rejoined) == (first.session_id, True)


def test_rejoin_without_harness_or_pid_keeps_the_stored_ones(store: Store, repo: Path) -> None:
    first = store.room_join(cwd=str(repo), pid=4242, harness="codex", harness_key=KEY).session_id
    store.room_join(cwd=str(repo), pid=None, harness_key=KEY)
    member = _member(store, first)
    assert (member.harness, member.pid) == ("codex", 4242)


def test_rejoin_matches_the_key_in_any_case(join: Callable[..., str]) -> None:
    assert join(harness_key=KEY) == join(harness_key=KEY.upper())


def test_rejoin_adds_rooms_and_keeps_the_old_ones(store: Store, repo: Path) -> None:
    store.room_join(cwd=str(repo), pid=None, harness_key=KEY, room="team")
    again = store.room_join(cwd=str(repo), pid=None, harness_key=KEY, room="ops")
    assert again.rooms == ["ops", "repo:alpha", "team"]


def test_rejoin_replaces_label_and_tags_when_given(store: Store, join: Callable[..., str]) -> None:
    sid = join(harness_key=KEY, label="old", tags=["a", "b"])
    join(harness_key=KEY, label="new", tags=["c"])
    m = _member(store, sid)
    assert (m.label, m.tags) == ("new", ["c"])


def test_rejoin_keeps_label_and_tags_when_not_given(store: Store, join: Callable[..., str]) -> None:
    sid = join(harness_key=KEY, label="kept", tags=["a"])
    join(harness_key=KEY)
    m = _member(store, sid)
    assert (m.label, m.tags) == ("kept", ["a"])


def test_rejoin_with_new_tags_changes_who_a_tag_selector_reaches(store: Store, join: Callable[..., str]) -> None:
    sender = join()
    join(harness_key=KEY, tags=["a"])
    join(harness_key=KEY, tags=["b"])
    assert store.msg_send(sender, "tag:a").recipients == []


def test_rejoin_records_the_new_cwd_and_pid(store: Store, repo: Path, other_repo: Path) -> None:
    sid = store.room_join(cwd=str(repo), pid=None, harness_key=KEY).session_id
    store.room_join(cwd=str(other_repo), pid=os.getpid(), harness_key=KEY)
    m = _member(store, sid)
    assert (m.cwd, m.pid) == (str(other_repo), os.getpid())


def test_the_key_of_a_session_that_left_starts_a_new_session(store: Store, repo: Path) -> None:
    first = store.room_join(cwd=str(repo), pid=None, harness_key=KEY).session_id
    store.room_leave(first)
    second = store.room_join(cwd=str(repo), pid=None, harness_key=KEY)
    assert second.session_id != first and not second.rejoined


# -- autonomy ---------------------------------------------------------------------------------


def test_a_new_session_defaults_to_notify(store: Store, repo: Path) -> None:
    assert store.room_join(cwd=str(repo), pid=None).autonomy == "notify"


def test_a_new_session_takes_the_level_it_asks_for(store: Store, repo: Path) -> None:
    assert store.room_join(cwd=str(repo), pid=None, autonomy="hold").autonomy == "hold"


def test_rejoin_without_autonomy_keeps_the_stored_level(store: Store, repo: Path) -> None:
    store.room_join(cwd=str(repo), pid=None, harness_key=KEY, autonomy="wake")
    again = store.room_join(cwd=str(repo), pid=None, harness_key=KEY)
    assert (again.autonomy, again.warning) == ("wake", None)


def test_rejoin_raises_autonomy(store: Store, repo: Path) -> None:
    store.room_join(cwd=str(repo), pid=None, harness_key=KEY)
    again = store.room_join(cwd=str(repo), pid=None, harness_key=KEY, autonomy="wake")
    assert (again.autonomy, again.warning) == ("wake", None)


def test_rejoin_refuses_to_lower_and_warns_naming_the_level_that_stayed(store: Store, repo: Path) -> None:
    store.room_join(cwd=str(repo), pid=None, harness_key=KEY, autonomy="wake")
    again = store.room_join(cwd=str(repo), pid=None, harness_key=KEY, autonomy="hold")
    assert again.autonomy == "wake"
    assert again.warning is not None and "stays wake" in again.warning


def test_rejoin_raise_is_clamped_by_the_lowest_cap_among_its_rooms(store: Store, repo: Path) -> None:
    store.room_join(cwd=str(repo), pid=None, harness_key=KEY, autonomy="hold", extra_rooms=["team", "ops"])
    store.room_set_autonomy_cap("wake", room="team")
    store.room_set_autonomy_cap("notify", room="ops")
    again = store.room_join(cwd=str(repo), pid=None, harness_key=KEY, autonomy="wake")
    assert again.autonomy == "notify"
    assert again.warning is not None and "ops" in again.warning and "notify" in again.warning


def test_a_new_session_asking_above_a_rooms_cap_is_clamped(store: Store, repo: Path) -> None:
    store.room_set_autonomy_cap("hold", room="team")
    joined = store.room_join(cwd=str(repo), pid=None, room="team", autonomy="wake")
    assert joined.autonomy == "hold" and joined.warning is not None


def test_a_rejoin_raise_appends_an_autonomy_event(store: Store, repo: Path) -> None:
    sid = store.room_join(cwd=str(repo), pid=None, harness_key=KEY).session_id
    store.room_join(cwd=str(repo), pid=None, harness_key=KEY, autonomy="wake")
    (event,) = [e for e in store.events() if e.kind == "autonomy"]
    assert (event.session_id, event.payload) == (sid, {"from": "notify", "to": "wake", "reason": "rejoin"})


# -- unknown ids (contract §2) ----------------------------------------------------------------


def test_a_harness_key_passed_as_session_id_names_its_session(store: Store, join: Callable[..., str]) -> None:
    sid = join(harness_key=KEY)
    with pytest.raises(UnknownSession, match=f"harness key of session {sid}"):
        store.msg_recv(KEY)


def test_an_upper_case_harness_key_is_recognised(store: Store, join: Callable[..., str]) -> None:
    sid = join(harness_key=KEY)
    with pytest.raises(UnknownSession, match=f"harness key of session {sid}"):
        store.msg_unread(KEY.upper())


def test_a_prefix_of_four_or_more_hex_names_the_matching_session(store: Store, join: Callable[..., str]) -> None:
    sid = join()
    with pytest.raises(UnknownSession, match=sid):
        store.msg_unread(sid[:6])


def test_a_label_names_its_session(store: Store, join: Callable[..., str]) -> None:
    sid = join(label="reviewer")
    with pytest.raises(UnknownSession, match=f"label of session {sid}"):
        store.lease_list("reviewer")


def test_a_session_that_left_is_reported_with_the_time_it_left(
    store: Store, clock: Clock, join: Callable[..., str]
) -> None:
    sid = join()
    clock.shift(90)
    store.room_leave(sid)
    with pytest.raises(UnknownSession, match=f"session {sid} left at {_iso(clock.now())}"):
        store.msg_recv(sid)


def test_a_well_formed_id_that_names_nothing_names_the_store(store: Store) -> None:
    with pytest.raises(UnknownSession) as err:
        store.msg_recv("0123456789abcdef")
    assert store.path in str(err.value)
    assert "possibly left, or from another store" in str(err.value)


def test_an_unknown_uuid_is_called_a_harness_key_nobody_has(store: Store) -> None:
    with pytest.raises(UnknownSession, match="looks like a harness key, but no session"):
        store.msg_recv("9d3c2b1a-0f9e-4d8c-b7a6-5f4e3d2c1b0a")


def test_a_malformed_id_says_what_a_session_id_looks_like(store: Store) -> None:
    with pytest.raises(UnknownSession, match="not a session id"):
        store.msg_recv("hello there")


def test_a_session_id_that_is_not_a_string_is_invalid_argument(store: Store) -> None:
    with pytest.raises(InvalidArgument) as err:
        store.msg_recv(1234)
    assert err.value.field == "session_id"


@pytest.mark.parametrize("call", [
    lambda s, sid: s.msg_unread(sid),
    lambda s, sid: s.msg_recv(sid),
    lambda s, sid: s.msg_sent(sid),
    lambda s, sid: s.lease_list(sid),
    lambda s, sid: s.lease_check(sid, "x"),
    lambda s, sid: s.room_who(sid),
    lambda s, sid: s.room_history(sid),
    lambda s, sid: s.drift_check(sid, "x"),
], ids=["msg_unread", "msg_recv", "msg_sent", "lease_list", "lease_check", "room_who", "room_history",
        "drift_check"])
def test_a_read_with_an_unknown_id_is_an_error_not_an_empty_answer(store: Store, call) -> None:
    with pytest.raises(UnknownSession):
        call(store, uuid.uuid4().hex[:16])


# -- last_seen --------------------------------------------------------------------------------


def test_a_write_call_records_last_seen(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    sid = join()
    clock.shift(5)
    store.lease_claim(sid, "a.txt")
    assert _member(store, sid).last_seen == clock.now()


def test_a_read_call_records_a_stale_last_seen(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    sid = join()
    clock.shift(120)
    store.msg_unread(sid)
    assert _member(store, sid).last_seen == clock.now()


# -- leave ------------------------------------------------------------------------------------


def test_leave_leaves_every_room(store: Store, join: Callable[..., str]) -> None:
    sid = join(room="team")
    other = join(room="team")
    store.room_leave(sid)
    assert [m.session_id for m in store.room_who(room="team")] == [other]


def test_leave_releases_the_sessions_leases(store: Store, join: Callable[..., str]) -> None:
    sid, other = join(), join()
    store.lease_claim(sid, "a.txt")
    store.room_leave(sid)
    assert store.lease_claim(other, "a.txt").ok


def test_leave_expires_the_sessions_unread_deliveries(store: Store, join: Callable[..., str]) -> None:
    sender, sid = join(), join()
    mid = store.msg_send(sender, sid, body="hi").message_id
    store.room_leave(sid)
    (sent,) = store.msg_sent(sender)
    assert (sent.id, sent.states, sent.left) == (mid, {sid: "expired"}, [sid])


def test_leaving_twice_is_unknown_session(store: Store, join: Callable[..., str]) -> None:
    sid = join()
    store.room_leave(sid)
    with pytest.raises(UnknownSession, match="left at"):
        store.room_leave(sid)


# -- prune ------------------------------------------------------------------------------------


def test_prune_removes_a_session_that_is_quiet_and_gone(
    store: Store, clock: Clock, join: Callable[..., str], dead_pid: int
) -> None:
    sid = join(pid=dead_pid)
    clock.shift(600)
    assert [s.id for s in store.prune(300)] == [sid]


def test_prune_keeps_a_gone_session_that_is_not_quiet_yet(
    store: Store, clock: Clock, join: Callable[..., str], dead_pid: int
) -> None:
    join(pid=dead_pid)
    clock.shift(100)
    assert store.prune(300) == []


def test_prune_keeps_a_quiet_session_that_is_alive(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    join(pid=os.getpid())
    clock.shift(600)
    assert store.prune(300) == []


def test_prune_keeps_a_quiet_session_whose_liveness_is_unknown(
    store: Store, clock: Clock, join: Callable[..., str]
) -> None:
    join(pid=None)
    clock.shift(600)
    assert store.prune(300) == []


def test_prune_releases_leases_and_keeps_a_tombstone(
    store: Store, clock: Clock, join: Callable[..., str], dead_pid: int
) -> None:
    sid = join(pid=dead_pid)
    store.lease_claim(sid, "a.txt")
    clock.shift(600)
    store.prune(300)
    release = [e for e in store.events() if e.kind == "lease_release"]
    assert [(e.session_id, e.payload["reason"]) for e in release] == [(sid, "prune")]
    with pytest.raises(UnknownSession, match=f"session {sid} left at"):
        store.msg_unread(sid)


def test_prune_refuses_a_negative_quiet_time(store: Store) -> None:
    with pytest.raises(InvalidArgument) as err:
        store.prune(-1)
    assert err.value.field == "quiet_s"


def test_sessions_by_id_or_key_finds_the_id_and_every_session_of_the_key(store: Store, join: Callable[..., str]) -> None:
    """What a server asks to learn whether an id is its agent's (server/selves.py): the id's
    own session first, live or left, then every session of the harness key."""
    key = str(uuid.uuid4())
    old = join(harness_key=key)
    store.room_leave(old)
    new = join(harness_key=key)
    other = join(label="bob")
    found = store.sessions_by_id_or_key(other, key.upper())
    assert found[0].id == other and found[0].label == "bob"
    by_id = {s.id: s for s in found[1:]}
    assert set(by_id) == {new, old} and by_id[old].left_at is not None and by_id[new].harness_key == key
    assert [s.id for s in store.sessions_by_id_or_key(other, None)] == [other]
    assert store.sessions_by_id_or_key("0" * 16, None) == []
