"""The audit: every state change appends its event(s) in the same transaction, reads append
none, and an operation that fails appends none (nor keeps any of its other changes)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents_room.store import Clock, RoomError, Store

KEY = str(uuid.uuid4())  # per test process: liveness scans every process of the machine


@dataclass
class Room:
    store: Store
    clock: Clock
    repo: Path
    a: str
    b: str
    mid: int  # a's message to b, unread


@pytest.fixture
def room(store: Store, clock: Clock, repo: Path, join: Callable[..., str]) -> Room:
    a = join(room="team", harness_key=KEY)
    b = join(room="team", pid=99_999_999)
    mid = store.msg_send(a, b, subject="hello").message_id
    (repo / "f.txt").write_text("content")
    return Room(store, clock, repo, a, b, mid)


def _recv_then(act: Callable[[Room], object]) -> Callable[[Room], object]:
    def run(r: Room) -> object:
        r.store.msg_recv(r.b)
        return act(r)
    return run


def _claim_then(act: Callable[[Room], object], who: str = "a", ttl: int = 600) -> Callable[[Room], object]:
    def run(r: Room) -> object:
        r.store.lease_claim(getattr(r, who), "f.txt", ttl_s=ttl)
        return act(r)
    return run


def _nothing(r: Room) -> None:
    return None


def _expire_then(act: Callable[[Room], object]) -> Callable[[Room], object]:
    def run(r: Room) -> object:
        r.store.lease_claim(r.b, "f.txt", ttl_s=5)
        r.clock.shift(10)
        return act(r)
    return run


# (id, preparation, the operation, the kinds it must append in order)
CHANGES = [
    ("join", _nothing, lambda r: r.store.room_join(cwd=str(r.repo), pid=None), ["join"]),
    ("rejoin raising autonomy", _nothing,
     lambda r: r.store.room_join(cwd=str(r.repo), pid=None, harness_key=KEY, autonomy="wake"), ["autonomy", "join"]),
    ("leave with a lease and an unread message", _claim_then(_nothing, "b"),
     lambda r: r.store.room_leave(r.b), ["lease_release", "delivery", "leave"]),
    ("leave one room", _nothing, lambda r: r.store.room_leave_room(r.a, "team"), ["leave_room"]),
    ("cap lowering a member", lambda r: r.store.room_join(cwd=str(r.repo), pid=None, harness_key=KEY, autonomy="wake"),
     lambda r: r.store.room_set_autonomy_cap("notify", room="team"), ["cap", "autonomy"]),
    ("send", _nothing, lambda r: r.store.msg_send(r.a, "*"), ["send"]),
    ("send to nobody", _nothing, lambda r: r.store.msg_send(r.a, "tag:nobody"), ["send"]),
    ("recv", _nothing, lambda r: r.store.msg_recv(r.b), ["delivery"]),
    # The overdue message expires and the other one is read: one delivery event each.
    ("recv expiring an overdue message", lambda r: (r.store.msg_send(r.a, r.b, ttl_s=5), r.clock.shift(10)),
     lambda r: r.store.msg_recv(r.b), ["delivery", "delivery"]),
    ("ack", _recv_then(_nothing), lambda r: r.store.msg_ack(r.b, r.mid), ["delivery"]),
    ("claim", _nothing, lambda r: r.store.lease_claim(r.a, "f.txt"), ["lease_grant"]),
    ("claim sweeping an expired lease", _expire_then(_nothing), lambda r: r.store.lease_claim(r.a, "f.txt"),
     ["lease_expire", "lease_grant"]),
    ("re-claim", _claim_then(_nothing), lambda r: r.store.lease_claim(r.a, "f.txt"), ["lease_grant"]),
    ("renew", _claim_then(_nothing), lambda r: r.store.lease_renew(r.a, "f.txt"), ["lease_renew"]),
    ("release", _claim_then(_nothing), lambda r: r.store.lease_release(r.a, "f.txt"), ["lease_release"]),
    ("note_read", _nothing, lambda r: r.store.note_read(r.a, "f.txt"), ["note_read"]),
    ("prune", lambda r: r.clock.shift(3600), lambda r: r.store.prune(60), ["delivery", "leave"]),
]

# Reads (and refusals that are answers, such as a denied claim) append nothing.
READS = [
    ("who", lambda r: r.store.room_who(r.a)),
    ("unread", lambda r: r.store.msg_unread(r.b)),
    ("sent", lambda r: r.store.msg_sent(r.a)),
    ("history", lambda r: r.store.room_history(r.a, room="team")),
    ("lease_check", lambda r: r.store.lease_check(r.a, "f.txt")),
    ("lease_list", lambda r: r.store.lease_list(r.a)),
    ("drift_check", lambda r: r.store.drift_check(r.a, "f.txt")),
    ("empty recv", lambda r: r.store.msg_recv(r.a)),
    ("denied claim", lambda r: r.store.lease_claim(r.a, "f.txt")),
]

# Operations that fail after their transaction began (so a sweep or a touch may already have
# run inside it): every change must roll back with them.
FAILURES = [
    ("release not held", lambda r: r.store.lease_release(r.a, "f.txt")),
    ("renew not held", lambda r: r.store.lease_renew(r.a, "f.txt")),
    ("send with unknown reply_to", lambda r: r.store.msg_send(r.a, "*", reply_to=12345)),
    ("send to an unknown id", lambda r: r.store.msg_send(r.a, "0123456789abcdef")),
    ("ack not recipient", lambda r: r.store.msg_ack(r.a, r.mid)),
    ("ack not read", lambda r: r.store.msg_ack(r.b, r.mid)),
    ("leave a room one is not in", lambda r: r.store.room_leave_room(r.a, "elsewhere")),
    ("unknown session", lambda r: r.store.lease_claim("0123456789abcdef", "f.txt")),
]


def _seq(store: Store) -> int:
    return store.db.conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]


@pytest.mark.parametrize(("prepare", "act", "expected"), [pytest.param(p, a, e, id=i) for i, p, a, e in CHANGES])
def test_each_change_appends_its_events(room: Room, prepare, act, expected: list[str]) -> None:
    prepare(room)
    before = _seq(room.store)
    act(room)
    assert [e.kind for e in room.store.events(before)] == expected


@pytest.mark.parametrize(("prepare", "act", "expected"), [pytest.param(p, a, e, id=i) for i, p, a, e in CHANGES])
def test_each_changes_events_carry_the_time_of_its_transaction(room: Room, prepare, act, expected) -> None:
    prepare(room)
    room.clock.shift(7)
    before = _seq(room.store)
    act(room)
    assert {e.at for e in room.store.events(before)} == {room.clock.now()}


@pytest.mark.parametrize("act", [pytest.param(a, id=i) for i, a in READS])
def test_reads_append_nothing(room: Room, act) -> None:
    room.store.lease_claim(room.b, "f.txt")
    before = _seq(room.store)
    act(room)
    assert _seq(room.store) == before


@pytest.mark.parametrize("act", [pytest.param(a, id=i) for i, a in FAILURES])
def test_a_failing_operation_appends_nothing_and_changes_nothing(room: Room, act) -> None:
    # An expired lease of b's is waiting to be swept, and last_seen is stale: a failing write
    # would sweep and touch inside its transaction, then must roll both back.
    room.store.lease_claim(room.b, "f.txt", ttl_s=5)
    room.clock.shift(60)
    conn = room.store.db.conn
    snapshot = [conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()  # noqa: S608
                for t in ("events", "sessions", "leases", "deliveries", "messages", "memberships")]
    with pytest.raises(RoomError):
        act(room)
    assert [conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()  # noqa: S608
            for t in ("events", "sessions", "leases", "deliveries", "messages", "memberships")] == snapshot


def test_the_send_event_names_its_rooms_and_recipients(room: Room) -> None:
    before = _seq(room.store)
    mid = room.store.msg_send(room.a, "*").message_id
    (e,) = room.store.events(before)
    assert (e.session_id, e.payload) == (room.a, {
        "message_id": mid, "selector": "*", "subject": "", "rooms": ["repo:alpha", "team"],
        "recipients": {room.b: "stored"}, "ttl_s": None, "expires_at": None})
    timed = room.store.msg_send(room.a, "*", ttl_s=30)
    (e,) = room.store.events(_seq(room.store) - 1)
    assert e.payload["message_id"] == timed.message_id and e.payload["ttl_s"] == 30
    assert e.payload["expires_at"] == e.at + 30  # what the checker's oracle compares with the client's ttl_s


def test_the_delivery_event_records_each_items_previous_state(room: Room) -> None:
    before = _seq(room.store)
    room.store.msg_recv(room.b)
    (e,) = room.store.events(before)
    assert (e.session_id, e.payload) == (room.b, {"to": "read", "items": [[room.mid, "stored"]]})


def test_the_grant_event_carries_the_leases_token_and_expiry(room: Room) -> None:
    before = _seq(room.store)
    lease = room.store.lease_claim(room.a, "f.txt", ttl_s=30).lease
    (e,) = room.store.events(before)
    assert lease is not None
    assert (e.session_id, e.path, e.payload) == (room.a, lease.path, {
        "mode": "exclusive", "token": lease.token, "expires_at": lease.expires_at, "previous_mode": None})


def test_seq_is_strictly_increasing(room: Room) -> None:
    for _ in range(3):
        room.store.lease_claim(room.a, "f.txt")
    seqs = [e.seq for e in room.store.events()]
    assert seqs == sorted(set(seqs))


def test_events_can_be_read_after_a_seq_with_a_limit(room: Room) -> None:
    every = room.store.events()
    assert room.store.events(every[0].seq, limit=1) == every[1:2]


@pytest.mark.parametrize("sql", ["UPDATE events SET kind = 'x'", "DELETE FROM events"])
def test_the_audit_refuses_updates_and_deletes(room: Room, sql: str) -> None:
    before = room.store.events()
    with pytest.raises(RoomError, match="append-only"), room.store.db.write() as tx:
        tx.execute(sql)
    assert room.store.events() == before
