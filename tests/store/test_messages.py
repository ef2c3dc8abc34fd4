"""Messages and deliveries: the four selectors, history, the inbox block, expiry, acks,
what I sent, and delivery states that only move forward."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from agents_room.store import Clock, InvalidArgument, NotRecipient, Store, StoreError, UnknownSession

from .conftest import rows

# -- selectors --------------------------------------------------------------------------------


def test_star_reaches_everyone_sharing_a_room_except_the_sender(
    store: Store, repo: Path, other_repo: Path, join: Callable[..., str]
) -> None:
    me = join(repo, room="team")
    same_repo = join(repo)
    shared = join(other_repo, room="team")
    join(other_repo)  # shares no room with me
    assert store.msg_send(me, "*").recipients == sorted([same_repo, shared])


def test_a_session_id_reaches_that_session_even_outside_my_rooms(
    store: Store, repo: Path, other_repo: Path, join: Callable[..., str]
) -> None:
    me, far = join(repo), join(other_repo)
    assert store.msg_send(me, far).recipients == [far]


def test_an_unknown_session_id_selector_is_an_error_and_stores_nothing(
    store: Store, join: Callable[..., str], head: Callable[[], int]
) -> None:
    me = join()
    before = head()
    with pytest.raises(UnknownSession, match="possibly left"):
        store.msg_send(me, "0123456789abcdef")
    assert head() == before and store.msg_sent(me) == []


def test_a_tag_reaches_the_sessions_that_joined_with_it(store: Store, join: Callable[..., str]) -> None:
    me = join()
    tagged = join(tags=["db", "py"])
    join(tags=["js"])
    assert store.msg_send(me, "tag:db").recipients == [tagged]


@pytest.fixture
def holders(store: Store, repo: Path, other_repo: Path, join: Callable[..., str]) -> dict[str, str]:
    """Two holders of ``src/wire.go`` in two different repos sharing room ``team``, and a
    sender in the first repo (so its own cwd is *not* the anchor for the second holder)."""
    a = join(repo, room="team")
    b = join(other_repo, room="team")
    sender = join(repo, room="team")
    (repo / "src").mkdir()
    (other_repo / "src").mkdir()
    assert store.lease_claim(a, "src/wire.go").ok
    assert store.lease_claim(b, "src/wire.go").ok
    return {"a": a, "b": b, "sender": sender}


def test_file_matches_the_path_relative_to_each_holders_cwd(store: Store, holders: dict[str, str]) -> None:
    # "src/*" matches neither absolute path nor the base name: only the relative form.
    sent = store.msg_send(holders["sender"], "file:src/*")
    assert sent.recipients == sorted([holders["a"], holders["b"]])


def test_file_matches_the_bare_base_name(store: Store, holders: dict[str, str]) -> None:
    assert store.msg_send(holders["sender"], "file:wire.go").recipients == sorted([holders["a"], holders["b"]])


def test_file_matches_the_absolute_path(store: Store, holders: dict[str, str], other_repo: Path) -> None:
    sent = store.msg_send(holders["sender"], f"file:{other_repo}/src/wire.go")
    assert sent.recipients == [holders["b"]]


def test_file_glob_on_the_absolute_form(store: Store, holders: dict[str, str]) -> None:
    assert store.msg_send(holders["sender"], "file:*/alpha/src/*.go").recipients == [holders["a"]]


def test_file_match_is_case_sensitive(store: Store, holders: dict[str, str]) -> None:
    assert store.msg_send(holders["sender"], "file:WIRE.go").recipients == []


def test_file_ignores_an_expired_lease(store: Store, clock: Clock, holders: dict[str, str]) -> None:
    clock.shift(601)
    assert store.msg_send(holders["sender"], "file:wire.go").recipients == []


def test_file_ignores_a_released_lease(store: Store, holders: dict[str, str]) -> None:
    store.lease_release(holders["a"], "src/wire.go")
    assert store.msg_send(holders["sender"], "file:wire.go").recipients == [holders["b"]]


def test_the_sender_is_never_a_recipient_of_a_star(store: Store, join: Callable[..., str]) -> None:
    me = join()
    assert store.msg_send(me, "*").recipients == []


def test_the_sender_is_never_a_recipient_of_its_own_tag(store: Store, join: Callable[..., str]) -> None:
    me = join(tags=["db"])
    other = join(tags=["db"])
    assert store.msg_send(me, "tag:db").recipients == [other]


def test_the_sender_is_never_a_recipient_of_a_file_it_holds(store: Store, join: Callable[..., str]) -> None:
    me, other = join(), join()
    store.lease_claim(me, "a.txt", mode="shared")
    store.lease_claim(other, "a.txt", mode="shared")
    assert store.msg_send(me, "file:a.txt").recipients == [other]


def test_zero_recipients_is_not_an_error_but_carries_a_warning(store: Store, join: Callable[..., str]) -> None:
    me = join()
    sent = store.msg_send(me, "tag:nobody", body="anyone?")
    assert (sent.recipients, sent.message_id > 0) == ([], True)
    assert sent.warning is not None and "0 recipients" in sent.warning
    assert [m.id for m in store.msg_sent(me)] == [sent.message_id]


def test_a_send_with_recipients_has_no_warning(store: Store, join: Callable[..., str]) -> None:
    me, _ = join(), join()
    assert store.msg_send(me, "*").warning is None


@pytest.mark.parametrize("to", ["", "tag:", "file:", "file:" + "x" * 257, 5, None])
def test_a_malformed_selector_is_invalid_argument_naming_to(store: Store, join: Callable[..., str], to) -> None:
    me = join()
    with pytest.raises(InvalidArgument) as err:
        store.msg_send(me, to)
    assert err.value.field == "to"


def test_message_ids_increase(store: Store, join: Callable[..., str]) -> None:
    me = join()
    ids = [store.msg_send(me, "*").message_id for _ in range(3)]
    assert ids == sorted(ids) and len(set(ids)) == 3


def test_a_wake_recipient_without_a_wake_lever_starts_undeliverable(store: Store, join: Callable[..., str]) -> None:
    me, woke = join(), join(autonomy="wake")
    store.msg_send(me, woke)
    assert store.msg_sent(me)[0].states == {woke: "undeliverable"}


def test_a_wake_recipient_with_a_wake_lever_starts_stored(store: Store, join: Callable[..., str]) -> None:
    me, woke = join(), join(autonomy="wake", wake_lever="hook")
    store.msg_send(me, woke)
    assert store.msg_sent(me)[0].states == {woke: "stored"}


def test_an_undeliverable_message_can_still_be_received(store: Store, join: Callable[..., str]) -> None:
    me, woke = join(), join(autonomy="wake")
    mid = store.msg_send(me, woke).message_id
    assert [m.id for m in store.msg_recv(woke).messages] == [mid]


def test_reply_to_an_unknown_message_is_invalid_argument(store: Store, join: Callable[..., str]) -> None:
    me = join()
    with pytest.raises(InvalidArgument) as err:
        store.msg_send(me, "*", reply_to=999)
    assert err.value.field == "reply_to"


def test_reply_to_is_kept_on_the_message(store: Store, join: Callable[..., str]) -> None:
    a, b = join(), join()
    first = store.msg_send(a, b).message_id
    store.msg_send(b, a, reply_to=first)
    assert store.msg_recv(a).messages[0].reply_to == first


# -- history ----------------------------------------------------------------------------------


def test_history_of_a_shared_room_includes_messages_sent_before_one_joined(
    store: Store, repo: Path, other_repo: Path, join: Callable[..., str]
) -> None:
    a, _ = join(repo, room="team"), join(other_repo, room="team")
    mid = store.msg_send(a, "*", subject="decision").message_id
    late = join(other_repo, room="team")
    room, found = store.room_history(late, room="team")
    assert (room, [m.id for m in found]) == ("team", [mid])
    assert store.msg_recv(late).messages == []


def test_a_message_is_in_the_history_of_every_room_the_sender_was_in(
    store: Store, repo: Path, other_repo: Path, join: Callable[..., str]
) -> None:
    a = join(repo, room="team")
    mid = store.msg_send(a, "*").message_id
    assert [m.id for m in store.room_history(room="repo:alpha")[1]] == [mid]
    assert [m.id for m in store.room_history(room="team")[1]] == [mid]
    assert store.room_history(room="repo:beta")[1] == []


def test_history_defaults_to_the_callers_repo_room(store: Store, join: Callable[..., str]) -> None:
    a = join(room="team")
    assert store.room_history(a)[0] == "repo:alpha"


def test_history_returns_the_last_messages_oldest_first(store: Store, join: Callable[..., str]) -> None:
    a = join()
    ids = [store.msg_send(a, "*", subject=str(i)).message_id for i in range(5)]
    assert [m.id for m in store.room_history(a, limit=3)[1]] == ids[2:]


def test_history_never_marks_anything_read(store: Store, join: Callable[..., str], head: Callable[[], int]) -> None:
    a, b = join(), join()
    store.msg_send(a, b, body="hi")
    before = head()
    assert len(store.room_history(b)[1]) == 1
    assert (store.msg_unread(b), head()) == (1, before)
    assert len(store.msg_recv(b).messages) == 1


def test_history_without_room_or_session_is_invalid_argument(store: Store) -> None:
    with pytest.raises(InvalidArgument) as err:
        store.room_history()
    assert err.value.field == "room"


# -- receive ----------------------------------------------------------------------------------


def test_recv_returns_unread_messages_oldest_first(store: Store, join: Callable[..., str]) -> None:
    a, b = join(), join()
    ids = [store.msg_send(a, b, subject=f"s{i}").message_id for i in range(3)]
    got = store.msg_recv(b)
    assert ([m.id for m in got.messages], got.inbox) == (ids, None)


def test_recv_carries_sender_selector_subject_and_body(store: Store, join: Callable[..., str]) -> None:
    a, b = join(label="alice"), join(tags=["x"])
    store.msg_send(a, "tag:x", subject="hello", body="the body")
    (m,) = store.msg_recv(b).messages
    assert (m.sender, m.sender_label, m.to, m.subject, m.body) == (a, "alice", "tag:x", "hello", "the body")


def test_recv_marks_what_it_returns_read(store: Store, join: Callable[..., str]) -> None:
    a, b = join(), join()
    store.msg_send(a, b)
    store.msg_recv(b)
    assert store.msg_unread(b) == 0
    assert store.msg_recv(b).messages == []
    assert store.msg_sent(a)[0].states == {b: "read"}


def test_recv_honours_its_limit(store: Store, join: Callable[..., str]) -> None:
    a, b = join(), join()
    ids = [store.msg_send(a, b).message_id for _ in range(3)]
    assert [m.id for m in store.msg_recv(b, limit=2).messages] == ids[:2]
    assert store.msg_unread(b) == 1


def test_an_empty_recv_carries_the_inbox_block(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    a, b = join(), join(room="team")
    store.msg_send(a, b)
    sent_at = clock.now()
    clock.shift(10)
    store.msg_recv(b)
    got = store.msg_recv(b)
    assert got.messages == []
    assert got.inbox is not None
    assert (got.inbox.rooms, got.inbox.deliveries_total, got.inbox.deliveries_read, got.inbox.last_delivery_at) == (
        ["repo:alpha", "team"], 1, 1, sent_at)


def test_the_inbox_of_a_session_that_never_got_anything(store: Store, join: Callable[..., str]) -> None:
    inbox = store.msg_recv(join()).inbox
    assert inbox is not None
    assert (inbox.deliveries_total, inbox.deliveries_read, inbox.last_delivery_at) == (0, 0, None)


def test_recv_of_another_sessions_message_does_not_read_it(store: Store, join: Callable[..., str]) -> None:
    a, b, c = join(), join(), join()
    store.msg_send(a, b)
    assert store.msg_recv(c).messages == []
    assert store.msg_unread(b) == 1


# -- expiry -----------------------------------------------------------------------------------


def test_a_message_is_unread_until_its_ttl_passes(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    a, b = join(), join()
    store.msg_send(a, b, ttl_s=60)
    clock.shift(59)
    assert store.msg_unread(b) == 1


def test_an_expired_message_is_not_received(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    a, b = join(), join()
    store.msg_send(a, b, ttl_s=60)
    clock.shift(60)
    assert store.msg_unread(b) == 0
    assert store.msg_recv(b).messages == []


def test_the_sender_sees_an_unread_message_expire(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    a, b = join(), join()
    store.msg_send(a, b, ttl_s=60)
    clock.shift(61)
    (sent,) = store.msg_sent(a)
    assert (sent.states, sent.pending) == ({b: "expired"}, 0)


def test_a_read_message_does_not_expire(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    a, b = join(), join()
    store.msg_send(a, b, ttl_s=60)
    store.msg_recv(b)
    clock.shift(3600)
    store.msg_recv(b)
    assert store.msg_sent(a)[0].states == {b: "read"}


def test_a_message_without_ttl_never_expires(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    a, b = join(), join()
    store.msg_send(a, b)
    clock.shift(10 * 365 * 86400)
    assert store.msg_unread(b) == 1


# -- ack --------------------------------------------------------------------------------------


def test_ack_of_a_read_message_moves_it_to_acked(store: Store, join: Callable[..., str]) -> None:
    a, b = join(), join()
    mid = store.msg_send(a, b).message_id
    store.msg_recv(b)
    store.msg_ack(b, mid)
    assert store.msg_sent(a)[0].states == {b: "acked"}


def test_ack_of_a_message_sent_to_someone_else_is_not_recipient(store: Store, join: Callable[..., str]) -> None:
    a, b, c = join(), join(), join()
    mid = store.msg_send(a, b).message_id
    with pytest.raises(NotRecipient, match=str(mid)):
        store.msg_ack(c, mid)


def test_the_sender_cannot_ack_its_own_message(store: Store, join: Callable[..., str]) -> None:
    a, b = join(), join()
    mid = store.msg_send(a, b).message_id
    with pytest.raises(NotRecipient):
        store.msg_ack(a, mid)


def test_ack_of_a_message_that_does_not_exist_is_not_recipient(store: Store, join: Callable[..., str]) -> None:
    with pytest.raises(NotRecipient):
        store.msg_ack(join(), 424242)


def test_ack_before_reading_is_invalid_argument(store: Store, join: Callable[..., str]) -> None:
    a, b = join(), join()
    mid = store.msg_send(a, b).message_id
    with pytest.raises(InvalidArgument, match="not read yet") as err:
        store.msg_ack(b, mid)
    assert err.value.field == "message_id"


def test_ack_of_an_expired_message_is_invalid_argument(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    a, b = join(), join()
    mid = store.msg_send(a, b, ttl_s=5).message_id
    clock.shift(10)
    store.msg_recv(b)
    with pytest.raises(InvalidArgument, match="expired"):
        store.msg_ack(b, mid)


def test_ack_twice_is_harmless_and_appends_nothing(
    store: Store, join: Callable[..., str], head: Callable[[], int]
) -> None:
    a, b = join(), join()
    mid = store.msg_send(a, b).message_id
    store.msg_recv(b)
    store.msg_ack(b, mid)
    before = head()
    store.msg_ack(b, mid)
    assert head() == before
    assert store.msg_sent(a)[0].states == {b: "acked"}


# -- msg_sent ---------------------------------------------------------------------------------


def test_sent_lists_my_messages_newest_first_with_each_recipients_state(
    store: Store, join: Callable[..., str]
) -> None:
    a, b, c = join(), join(), join()
    first = store.msg_send(a, "*", subject="one").message_id
    store.msg_recv(b)
    second = store.msg_send(a, c, subject="two").message_id
    sent = store.msg_sent(a)
    assert [(s.id, s.subject, s.states, s.pending) for s in sent] == [
        (second, "two", {c: "stored"}, 1),
        (first, "one", {b: "read", c: "stored"}, 1),
    ]


def test_sent_names_recipients_that_left(store: Store, join: Callable[..., str]) -> None:
    a, b, c = join(), join(), join()
    store.msg_send(a, "*")
    store.room_leave(c)
    (sent,) = store.msg_sent(a)
    assert (sent.left, sent.states[c], sent.pending) == ([c], "expired", 1)


def test_sent_records_when_it_was_sent(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    a = join()
    clock.shift(42)
    store.msg_send(a, "*")
    assert store.msg_sent(a)[0].sent == clock.now()


def test_sent_honours_its_limit(store: Store, join: Callable[..., str]) -> None:
    a = join()
    ids = [store.msg_send(a, "*").message_id for _ in range(4)]
    assert [s.id for s in store.msg_sent(a, limit=2)] == ids[:1:-1]


# -- forward-only delivery states -------------------------------------------------------------


@pytest.fixture
def delivery(store: Store, join: Callable[..., str]) -> Callable[[str], tuple[str, int]]:
    """A delivery brought (forward) to ``state``: returns (recipient, message_id)."""

    def _make(state: str) -> tuple[str, int]:
        a, b = join(), join()
        mid = store.msg_send(a, b).message_id
        if state in ("read", "acked"):
            store.msg_recv(b)
        if state == "acked":
            store.msg_ack(b, mid)
        if state == "expired":
            store.room_leave(b)
        return b, mid

    return _make


def _state(store: Store, recipient: str, mid: int) -> str:
    return rows(store, "SELECT state FROM deliveries WHERE recipient = ? AND message_id = ?", (recipient, mid))[0][0]


@pytest.mark.sqlite_only  # a raw sqlite3 connection; on PostgreSQL the next test shows the trigger
@pytest.mark.parametrize(("start", "back"), [
    ("read", "stored"), ("read", "offered"), ("read", "accepted"), ("read", "undeliverable"),
    ("acked", "read"), ("acked", "stored"), ("expired", "stored"), ("expired", "read"),
])
def test_a_raw_update_moving_a_delivery_backward_is_refused_by_the_store(
    store: Store, delivery: Callable[[str], tuple[str, int]], start: str, back: str
) -> None:
    recipient, mid = delivery(start)
    assert _state(store, recipient, mid) == start
    with pytest.raises(sqlite3.IntegrityError, match="delivery_backward"):
        store.db.conn.execute(
            "UPDATE deliveries SET state = ? WHERE recipient = ? AND message_id = ?", (back, recipient, mid))
    assert _state(store, recipient, mid) == start


def test_a_backward_move_inside_a_store_transaction_is_a_store_error(
    store: Store, delivery: Callable[[str], tuple[str, int]]
) -> None:
    recipient, mid = delivery("acked")
    with pytest.raises(StoreError, match="delivery_backward"):
        with store.db.write() as tx:
            tx.execute("UPDATE deliveries SET state = 'stored' WHERE recipient = ? AND message_id = ?",
                       (recipient, mid))
    assert _state(store, recipient, mid) == "acked"


@pytest.mark.sqlite_only  # a raw sqlite3 connection
@pytest.mark.parametrize(("start", "forward"), [("stored", "offered"), ("stored", "undeliverable")])
def test_a_raw_update_moving_a_delivery_forward_is_allowed(
    store: Store, delivery: Callable[[str], tuple[str, int]], start: str, forward: str
) -> None:
    recipient, mid = delivery(start)
    store.db.conn.execute(
        "UPDATE deliveries SET state = ? WHERE recipient = ? AND message_id = ?", (forward, recipient, mid))
    assert _state(store, recipient, mid) == forward
