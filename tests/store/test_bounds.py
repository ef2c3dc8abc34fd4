"""Every bound of contract §6: the value at the bound is accepted, the value past it is
refused with invalid_argument naming the field, and a refusal changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agents_room.store import InvalidArgument, Store


@dataclass(frozen=True)
class World:
    store: Store
    repo: Path
    me: str
    peer: str
    read_mid: int  # a message the peer sent me, which I have read


@pytest.fixture
def world(store: Store, repo: Path, join: Callable[..., str]) -> World:
    me, peer = join(), join()
    (repo / "f.txt").write_text("x")
    mid = store.msg_send(peer, me).message_id
    store.msg_recv(me)
    store.lease_claim(me, "f.txt")
    return World(store, repo, me, peer, mid)


Call = Callable[[World, Any], object]

# (id, the call taking the value under test, accepted values, refused values, field)
CASES: list[tuple[str, Call, list[Any], list[Any], str]] = [
    ("label", lambda w, v: w.store.room_join(cwd=str(w.repo), pid=None, label=v),
     ["x" * 64, "é" * 64], ["x" * 65, "", "  ", 7], "label"),
    ("tag count", lambda w, v: w.store.room_join(cwd=str(w.repo), pid=None, tags=v),
     [[f"t{i}" for i in range(16)], []], [[f"t{i}" for i in range(17)], "t1", {"t": 1}], "tags"),
    ("tag length", lambda w, v: w.store.room_join(cwd=str(w.repo), pid=None, tags=[v]),
     ["t" * 32], ["t" * 33, "", 5], "tags"),
    ("extra rooms", lambda w, v: w.store.room_join(cwd=str(w.repo), pid=None, extra_rooms=v),
     [[f"r{i}" for i in range(16)]], [[f"r{i}" for i in range(17)], "team"], "extra_rooms"),
    ("harness", lambda w, v: w.store.room_join(cwd=str(w.repo), pid=None, harness=v),
     ["h" * 64], ["h" * 65, ""], "harness"),
    ("harness key", lambda w, v: w.store.room_join(cwd=str(w.repo), pid=None, harness_key=v),
     ["2b50133e-4f0c-4d5e-9a57-0a1b2c3d4e5f"], ["2b50133e", "0123456789abcdef", 12], "harness_key"),
    ("autonomy", lambda w, v: w.store.room_join(cwd=str(w.repo), pid=None, autonomy=v),
     ["hold", "wake"], ["loud", "WAKE", 1], "autonomy"),
    ("subject", lambda w, v: w.store.msg_send(w.me, w.peer, subject=v),
     ["s" * 200, ""], ["s" * 201, b"bytes"], "subject"),
    ("body", lambda w, v: w.store.msg_send(w.me, w.peer, body=v),
     ["b" * 65_536, "é" * 32_768], ["b" * 65_537, "é" * 32_769, "nul\x00"], "body"),
    ("message ttl", lambda w, v: w.store.msg_send(w.me, w.peer, ttl_s=v),
     [1, 2_592_000], [0, 2_592_001, -1, "60", True, float("nan")], "ttl_s"),
    ("glob", lambda w, v: w.store.msg_send(w.me, f"file:{v}"),
     ["g" * 256], ["g" * 257], "to"),
    ("tag selector", lambda w, v: w.store.msg_send(w.me, f"tag:{v}"),
     ["t" * 32], ["t" * 33], "to"),
    ("recv limit", lambda w, v: w.store.msg_recv(w.me, limit=v), [1, 1000], [0, 1001, -1, "5"], "limit"),
    ("sent limit", lambda w, v: w.store.msg_sent(w.me, limit=v), [1, 1000], [0, 1001], "limit"),
    ("history limit", lambda w, v: w.store.room_history(w.me, limit=v), [1, 1000], [0, 1001], "limit"),
    ("lease ttl", lambda w, v: w.store.lease_claim(w.me, "g.txt", ttl_s=v), [1, 86_400], [0, 86_401], "ttl_s"),
    ("path bytes", lambda w, v: w.store.lease_claim(w.me, v, ttl_s=5),
     ["/" + "p" * 4095], ["/" + "p" * 4096, "/" + "é" * 2048], "path"),
    ("path made absolute", lambda w, v: w.store.lease_claim(w.me, v),
     [], ["p" * 4090], "path"),
    ("ack message id", lambda w, v: w.store.msg_ack(w.me, v), [], [0, -1, "abc", 1.5, True], "message_id"),
    ("reply_to", lambda w, v: w.store.msg_send(w.me, w.peer, reply_to=v), [], [0, "x"], "reply_to"),
]


def _flatten(which: int) -> list[Any]:
    return [pytest.param(call, value, field, id=f"{name}-{i}")
            for name, call, ok, bad, field in CASES for i, value in enumerate((ok, bad)[which])]


@pytest.mark.parametrize(("call", "value", "field"), _flatten(1))
def test_a_value_past_its_bound_is_refused_naming_the_field(
    world: World, head: Callable[[], int], call: Call, value: Any, field: str
) -> None:
    before = head()
    with pytest.raises(InvalidArgument) as err:
        call(world, value)
    assert err.value.field == field
    assert str(err.value).startswith(f"invalid_argument: {field}:")
    assert head() == before


@pytest.mark.parametrize(("call", "value", "field"), _flatten(0))
def test_a_value_at_its_bound_is_accepted(world: World, call: Call, value: Any, field: str) -> None:
    call(world, value)


def test_the_ack_message_id_bound_accepts_a_read_message(world: World) -> None:
    world.store.msg_ack(world.me, world.read_mid)


@pytest.mark.parametrize("op", ["lease_claim", "lease_renew", "lease_release", "lease_check", "note_read",
                                "drift_check"])
def test_a_path_with_a_nul_byte_is_refused(world: World, op: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        getattr(world.store, op)(world.me, "f.txt\x00")
    assert err.value.field == "path"


@pytest.mark.parametrize("op", ["lease_claim", "note_read"])
@pytest.mark.parametrize("value", ["", "   ", None, 3])
def test_an_empty_or_non_text_path_is_refused(world: World, op: str, value: Any) -> None:
    with pytest.raises(InvalidArgument) as err:
        getattr(world.store, op)(world.me, value)
    assert err.value.field == "path"
