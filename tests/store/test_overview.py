"""Store.overview: what the dashboard shows, read in one transaction that never writes."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from agents_room.store import Clock, InvalidArgument, Store

KEY = str(uuid.uuid4())  # per test process: liveness scans every process of the machine


def test_members_rooms_and_unread_counts(store: Store, join: Callable[..., str]) -> None:
    a = join(label="alice", room="team:x", harness="codex", harness_key=KEY)
    b = join(label="bob", room="team:x")
    join(label="carol", room="ops")
    store.room_set_autonomy_cap("hold", room="ops")
    store.msg_send(a, b, subject="one")
    store.msg_send(a, b, subject="two")
    view = store.overview()
    assert [(r.name, r.members, r.cap) for r in view.rooms] == [("ops", 1, "hold"), ("repo:alpha", 3, None),
                                                                ("team:x", 2, None)]
    members = {m.label: m for m in view.members}
    assert (members["bob"].unread, members["alice"].unread) == (2, 0)
    assert members["alice"].rooms == ["repo:alpha", "team:x"] and members["alice"].harness == "codex"
    assert members["alice"].liveness == "unknown"  # no pid recorded
    assert sorted(m.label for m in store.overview("team:x").members) == ["alice", "bob"]


def test_a_harness_key_is_never_shown_whole(store: Store, join: Callable[..., str]) -> None:
    join(label="alice", harness_key=KEY)
    view = store.overview()
    assert view.members[0].key == KEY[:8] + "…"
    join_event = next(e for e in view.events if e.kind == "join")
    assert join_event.detail["harness_key"] == KEY[:8] + "…"
    assert KEY not in repr(view)


def test_live_leases_and_the_timeline_of_the_window(store: Store, clock: Clock, join: Callable[..., str],
                                                    repo: Path) -> None:
    a, b = join(label="alice"), join(label="bob")
    store.lease_claim(a, "old.py", ttl_s=30)
    clock.shift(400)  # old.py's whole life is before the 300 s window
    store.lease_claim(a, "a.py", ttl_s=60)
    clock.shift(10)
    store.lease_claim(b, "b.py", ttl_s=20, mode="shared")
    clock.shift(5)
    store.lease_release(b, "b.py")
    store.lease_claim(b, "c.py", ttl_s=5)
    clock.shift(6)  # c.py expired, not swept yet (nothing wrote since)
    store.lease_renew(a, "a.py", ttl_s=120)
    view = store.overview(window_s=300)
    assert [(x.path, x.label, x.mode, x.ttl_s) for x in view.leases] == [(str(repo / "a.py"), "alice", "exclusive", 120)]
    spans = {(s.path.rsplit("/", 1)[1], s.label): s for s in view.spans}
    assert set(spans) == {("a.py", "alice"), ("b.py", "bob"), ("c.py", "bob")}
    assert spans["a.py", "alice"].end is None and spans["a.py", "alice"].how == "live"
    assert spans["b.py", "bob"].how == "release" and spans["b.py", "bob"].end - spans["b.py", "bob"].start == 5
    assert spans["c.py", "bob"].how == "expire" and spans["c.py", "bob"].end == spans["c.py", "bob"].start + 5


def test_a_lease_held_since_before_the_window_starts_at_the_window(store: Store, clock: Clock,
                                                                   join: Callable[..., str]) -> None:
    a = join(label="alice")
    store.lease_claim(a, "long.py", ttl_s=3600)
    clock.shift(1000)
    view = store.overview(window_s=300)
    (span,) = view.spans
    assert span.start == view.now - 300 and span.end is None


def test_messages_with_each_recipients_delivery_state(store: Store, clock: Clock, join: Callable[..., str]) -> None:
    a, b, c = join(label="alice"), join(label="bob"), join(label="carol")
    sent = store.msg_send(a, "*", subject="<b>hi</b>", body="x" * 1000)
    store.msg_recv(b)
    store.msg_ack(b, sent.message_id)
    short = store.msg_send(a, c, subject="soon gone", ttl_s=5)
    clock.shift(10)
    view = store.overview()
    first, second = sorted(view.messages, key=lambda m: m.id)
    assert {d.label: d.state for d in first.deliveries} == {"bob": "acked", "carol": "stored"}
    assert first.subject == "<b>hi</b>" and first.body.endswith("…") and len(first.body) < 1000
    assert second.id == short.message_id and [d.state for d in second.deliveries] == ["expired"]


def test_events_newest_first_and_the_room_filter(store: Store, join: Callable[..., str]) -> None:
    a = join(label="alice", room="team:x")
    join(label="bob", room="ops")
    store.msg_send(a, "*", subject="team only")
    view = store.overview("team:x")
    assert [e.seq for e in view.events] == sorted((e.seq for e in view.events), reverse=True)
    assert {e.label for e in view.events} == {"alice"} and view.seq == store.last_seq()
    assert [m.subject for m in view.messages] == ["team only"]
    assert [m.subject for m in store.overview("ops").messages] == []
    with pytest.raises(InvalidArgument, match="room"):
        store.overview("no spaces allowed")


def test_overview_reads_while_another_connection_holds_the_write_lock(store: Store, join: Callable[..., str]) -> None:
    """Never the write lock: a writer holding it does not delay the overview, and the
    overview writes nothing (no sweep of the expired lease, no last_seen touch)."""
    a = join(label="alice")
    store.lease_claim(a, "a.py", ttl_s=1)
    store.clock.shift(5)
    before = store.events()
    holder = Store.open(store.location, clock=store.clock, busy_timeout_s=0.2, verify=False, create=False)
    try:
        with holder.db.write():  # the engine's write lock, held by another connection
            busy = Store.open(store.location, clock=store.clock, busy_timeout_s=0.2, verify=False, create=False)
            view = busy.overview()
            busy.close()
    finally:
        holder.close()
    assert [m.label for m in view.members] == ["alice"] and view.leases == []
    assert store.events() == before
