"""Rooms: the repo room from the git top-level, room names, leaving one room, who is here
(with liveness), and the operator's autonomy cap."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from agents_room.store import InvalidArgument, Store
from agents_room.store.rooms import git_toplevel


# -- the repo room ----------------------------------------------------------------------------


def test_the_repo_room_is_named_after_the_git_top_level(store: Store, repo: Path) -> None:
    assert store.room_join(cwd=str(repo), pid=None).rooms == ["repo:alpha"]


def test_a_subfolder_of_a_repo_joins_the_same_repo_room(store: Store, repo: Path) -> None:
    deep = repo / "src" / "pkg" / "deep"
    deep.mkdir(parents=True)
    assert store.room_join(cwd=str(deep), pid=None).rooms == ["repo:alpha"]


def test_a_folder_outside_git_is_its_own_repo_room(store: Store, tmp_path: Path) -> None:
    plain = tmp_path / "plain" / "notes"
    plain.mkdir(parents=True)
    assert git_toplevel(str(plain)) is None
    assert store.room_join(cwd=str(plain), pid=None).rooms == ["repo:notes"]


def test_a_nested_repo_is_named_after_the_innermost_top_level(
    store: Store, repo: Path, make_repo: Callable[[Path], Path]
) -> None:
    inner = make_repo(repo / "vendor" / "inner")
    (inner / "src").mkdir()
    assert store.room_join(cwd=str(inner / "src"), pid=None).rooms == ["repo:inner"]


def test_a_repo_name_is_folded_into_the_room_alphabet(
    store: Store, tmp_path: Path, make_repo: Callable[[Path], Path]
) -> None:
    odd = make_repo(tmp_path / "My Project!")
    assert store.room_join(cwd=str(odd), pid=None).rooms == ["repo:my-project"]


def test_two_repos_are_two_rooms(store: Store, repo: Path, other_repo: Path, join: Callable[..., str]) -> None:
    a, b = join(repo), join(other_repo)
    assert [m.session_id for m in store.room_who(a)] == [a]
    assert [m.session_id for m in store.room_who(b)] == [b]


# -- room names -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "team", "org/team:backend-1.2_x", "0", "x" * 64])
def test_room_names_in_the_alphabet_are_accepted(store: Store, repo: Path, name: str) -> None:
    assert name in store.room_join(cwd=str(repo), pid=None, room=name).rooms


@pytest.mark.parametrize("name", ["", "Team", "-team", ".team", "_team", "a b", "tëam", "x" * 65, "a\nb"])
def test_room_names_outside_the_alphabet_are_refused_naming_the_field(store: Store, repo: Path, name: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        store.room_join(cwd=str(repo), pid=None, room=name)
    assert err.value.field == "room"
    assert store.events() == []


def test_a_bad_extra_room_is_refused_naming_extra_rooms(store: Store, repo: Path) -> None:
    with pytest.raises(InvalidArgument) as err:
        store.room_join(cwd=str(repo), pid=None, extra_rooms=["ok", "Not Ok"])
    assert err.value.field == "extra_rooms"


# -- leave one room ---------------------------------------------------------------------------


def test_leave_room_keeps_the_other_rooms(store: Store, join: Callable[..., str]) -> None:
    sid = join(room="team", extra_rooms=["ops"])
    store.room_leave_room(sid, "team")
    (m,) = store.room_who()
    assert m.rooms == ["ops", "repo:alpha"]


def test_after_leave_room_a_broadcast_no_longer_reaches(store: Store, repo: Path, other_repo: Path,
                                                       join: Callable[..., str]) -> None:
    a, b = join(repo, room="team"), join(other_repo, room="team")
    store.room_leave_room(b, "team")
    assert store.msg_send(a, "*").recipients == []


def test_leave_room_of_a_room_one_is_not_in_is_invalid_argument(store: Store, join: Callable[..., str]) -> None:
    sid = join()
    with pytest.raises(InvalidArgument) as err:
        store.room_leave_room(sid, "elsewhere")
    assert err.value.field == "room" and "elsewhere" in str(err.value)


def test_leave_room_appends_an_event(store: Store, repo: Path) -> None:
    joined = store.room_join(cwd=str(repo), pid=None, room="team")
    store.room_leave_room(joined.session_id, "team")
    last = store.events()[-1]
    rest = [r for r in joined.rooms if r != "team"]  # the repo room: what remains, listed for the checker's oracle
    assert rest and (last.kind, last.session_id, last.payload) == ("leave_room", joined.session_id,
                                                                   {"room": "team", "rooms": rest})


# -- who --------------------------------------------------------------------------------------


def test_who_with_a_room_lists_that_rooms_members(store: Store, repo: Path, other_repo: Path,
                                                  join: Callable[..., str]) -> None:
    a = join(repo, room="team")
    join(repo)
    c = join(other_repo, room="team")
    assert sorted(m.session_id for m in store.room_who(room="team")) == sorted([a, c])


def test_who_with_a_session_lists_everyone_sharing_a_room_with_it(
    store: Store, repo: Path, other_repo: Path, join: Callable[..., str]
) -> None:
    a = join(repo, room="team")
    b = join(repo)
    c = join(other_repo, room="team")
    join(other_repo)
    assert sorted(m.session_id for m in store.room_who(a)) == sorted([a, b, c])


def test_who_with_nothing_lists_every_live_session(store: Store, repo: Path, other_repo: Path,
                                                   join: Callable[..., str]) -> None:
    a, b, c = join(repo), join(other_repo), join(other_repo)
    store.room_leave(b)
    assert sorted(m.session_id for m in store.room_who()) == sorted([a, c])


def test_who_reports_each_members_rooms(store: Store, join: Callable[..., str]) -> None:
    join(room="team", extra_rooms=["ops"])
    assert store.room_who()[0].rooms == ["ops", "repo:alpha", "team"]


def test_who_says_unknown_for_a_session_without_a_pid(store: Store, join: Callable[..., str]) -> None:
    join(pid=None)
    assert store.room_who()[0].liveness == "unknown"


def test_who_says_alive_for_a_running_pid(store: Store, join: Callable[..., str]) -> None:
    join(pid=os.getpid())
    assert store.room_who()[0].liveness == "alive"


def test_who_says_gone_for_a_key_no_process_carries(store: Store, join: Callable[..., str]) -> None:
    join(pid=os.getpid(), harness_key=str(uuid.uuid4()))
    assert store.room_who()[0].liveness == "gone"


# -- caps -------------------------------------------------------------------------------------


def test_set_cap_lowers_every_member_above_it(store: Store, repo: Path, other_repo: Path) -> None:
    woke = store.room_join(cwd=str(repo), pid=None, room="team", autonomy="wake").session_id
    held = store.room_join(cwd=str(repo), pid=None, room="team", autonomy="hold").session_id
    outside = store.room_join(cwd=str(other_repo), pid=None, autonomy="wake").session_id
    assert store.room_set_autonomy_cap("notify", room="team") == ("team", "notify")
    levels = {m.session_id: m.autonomy for m in store.room_who()}
    assert levels == {woke: "notify", held: "hold", outside: "wake"}


def test_set_cap_appends_an_autonomy_event_per_lowered_member(store: Store, repo: Path) -> None:
    sid = store.room_join(cwd=str(repo), pid=None, room="team", autonomy="wake").session_id
    store.room_join(cwd=str(repo), pid=None, room="team", autonomy="hold")
    store.room_set_autonomy_cap("notify", room="team")
    lowered = [(e.session_id, e.payload) for e in store.events() if e.kind == "autonomy"]
    assert lowered == [(sid, {"from": "wake", "to": "notify", "reason": "cap:team"})]


def test_raising_a_cap_does_not_raise_the_members(store: Store, repo: Path) -> None:
    store.room_join(cwd=str(repo), pid=None, room="team", autonomy="wake")
    store.room_set_autonomy_cap("hold", room="team")
    store.room_set_autonomy_cap("wake", room="team")
    assert store.room_who()[0].autonomy == "hold"


def test_set_cap_with_only_a_session_caps_its_repo_room(store: Store, repo: Path) -> None:
    sid = store.room_join(cwd=str(repo), pid=None, room="team", autonomy="wake").session_id
    assert store.room_set_autonomy_cap("hold", session_id=sid) == ("repo:alpha", "hold")
    assert store.room_who()[0].autonomy == "hold"


def test_set_cap_without_room_or_session_is_invalid_argument(store: Store) -> None:
    with pytest.raises(InvalidArgument) as err:
        store.room_set_autonomy_cap("hold")
    assert err.value.field == "room"


def test_set_cap_with_an_unknown_level_is_invalid_argument(store: Store) -> None:
    with pytest.raises(InvalidArgument) as err:
        store.room_set_autonomy_cap("loud", room="team")
    assert err.value.field == "autonomy"
