"""A stateful test: Hypothesis drives the real store (pinned clock) and a small pure-Python
model of the protocol with the same random operations, and they must agree on every answer:
lease grants and denies, tokens, holders, recipients, what recv returns, unread counts,
acks, history and what a sender sees of its messages."""

from __future__ import annotations

import fnmatch
import os
import shutil
import tempfile
from dataclasses import dataclass, field

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    Bundle, RuleBasedStateMachine, initialize, invariant, multiple, precondition, rule, run_state_machine_as_test,
)

import pgcluster
import pytest

from agents_room.store import Clock, InvalidArgument, LeaseNotHeld, NotRecipient, Store, UnknownSession

KEYS = (None, "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222")
PATHS = ("a.txt", "src/b.txt", "/shared/c.txt")
GLOBS = ("a.txt", "*.txt", "src/*", "b.txt", "/shared/*", "*/alpha/*")
SHARED_ROOMS = ("team", "ops")
DEFAULT_LIMIT = 100


@dataclass
class MSession:
    sid: str
    cwd: str
    key: str | None
    rooms: set[str]
    tags: list[str]
    live: bool = True


@dataclass
class MLease:
    mode: str
    ttl: float
    expires_at: float


@dataclass
class MMessage:
    mid: int
    sender: str
    rooms: set[str]
    expires_at: float | None
    # recipient -> "unread" | "read" | "acked" | "expired"
    states: dict[str, str] = field(default_factory=dict)


class StoreMachine(RuleBasedStateMachine):
    sessions = Bundle("sessions")
    messages = Bundle("messages")

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="agents-room-model-")
        self.cwds = {}
        for name in ("alpha", "beta"):
            self.cwds[name] = os.path.join(self.tmp, name)
            os.mkdir(self.cwds[name])
        self.clock = Clock(fixed=1_800_000_000.0)
        self.store = Store.open(self.store_location(), clock=self.clock, busy_timeout_s=2.0)
        self.model: dict[str, MSession] = {}
        self.leases: dict[str, dict[str, MLease]] = {}  # path -> holder -> lease
        self.msgs: dict[int, MMessage] = {}
        self.next_mid = 1
        self.next_token = 1

    def store_location(self) -> str:
        return os.path.join(self.tmp, "store", "room.db")

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- model helpers ------------------------------------------------------------------------

    @property
    def now(self) -> float:
        return self.clock.now()

    def live(self, sid: str) -> bool:
        return self.model[sid].live

    def peers(self, sid: str) -> set[str]:
        mine = self.model[sid].rooms
        return {s.sid for s in self.model.values() if s.live and s.sid != sid and s.rooms & mine}

    def sweep(self) -> None:
        for holders in self.leases.values():
            for sid in [s for s, lease in holders.items() if lease.expires_at <= self.now]:
                del holders[sid]

    def live_leases(self) -> dict[str, dict[str, MLease]]:
        return {p: {s: lease for s, lease in h.items() if lease.expires_at > self.now} for p, h in self.leases.items()}

    def abspath(self, sid: str, path: str) -> str:
        return os.path.abspath(os.path.join(self.model[sid].cwd, path))

    def unread(self, sid: str) -> list[int]:
        """Unread and unexpired, oldest first."""
        return sorted(m.mid for m in self.msgs.values() if m.states.get(sid) == "unread"
                      and (m.expires_at is None or m.expires_at > self.now))

    # -- sessions -----------------------------------------------------------------------------

    @initialize(target=sessions)
    def three_sessions_sharing_a_room(self):
        # Most rules need live sessions: start every run with three, in two repos and one room.
        return multiple(self.join("alpha", ["team"], None, None), self.join("alpha", [], ["y"], None),
                        self.join("beta", ["team"], ["x"], None))

    @rule(target=sessions, cwd=st.sampled_from(("alpha", "beta")),
          rooms=st.lists(st.sampled_from(SHARED_ROOMS), unique=True, max_size=2),
          tags=st.none() | st.lists(st.sampled_from(("x", "y")), unique=True, max_size=2),
          key=st.sampled_from(KEYS))
    def join(self, cwd: str, rooms: list[str], tags: list[str] | None, key: str | None) -> str:
        joined = self.store.room_join(cwd=self.cwds[cwd], pid=None, extra_rooms=rooms, tags=tags, harness_key=key)
        existing = next((s for s in self.model.values() if s.live and key and s.key == key), None)
        wanted = {f"repo:{cwd}", *rooms}
        if existing is None:
            assert joined.session_id not in self.model and not joined.rejoined
            self.model[joined.session_id] = MSession(joined.session_id, self.cwds[cwd], key, wanted, tags or [])
        else:
            assert (joined.session_id, joined.rejoined) == (existing.sid, True)
            existing.rooms |= wanted
            existing.cwd = self.cwds[cwd]
            if tags is not None:
                existing.tags = tags
        assert joined.rooms == sorted(self.model[joined.session_id].rooms)
        return joined.session_id

    @rule(sid=sessions)
    def leave(self, sid: str) -> None:
        if not self.live(sid):
            try:
                self.store.room_leave(sid)
            except UnknownSession:
                return
            raise AssertionError("leaving twice must be unknown_session")
        self.store.room_leave(sid)
        s = self.model[sid]
        s.live, s.rooms = False, set()
        for holders in self.leases.values():
            holders.pop(sid, None)
        for m in self.msgs.values():
            if m.states.get(sid) == "unread":
                m.states[sid] = "expired"

    # -- messages -----------------------------------------------------------------------------

    @rule(target=messages, sender=sessions, kind=st.sampled_from(("*", "id", "tag", "file")), other=sessions,
          tag=st.sampled_from(("x", "y")), glob=st.sampled_from(GLOBS), ttl=st.sampled_from((None, 10, 100)))
    def send(self, sender: str, kind: str, other: str, tag: str, glob: str, ttl: int | None):
        to = {"*": "*", "id": other, "tag": f"tag:{tag}", "file": f"file:{glob}"}[kind]
        if not self.live(sender) or (kind == "id" and not self.live(other)):
            try:
                self.store.msg_send(sender, to, ttl_s=ttl)
            except UnknownSession:
                return multiple()
            raise AssertionError("a send by or to a session that left must be unknown_session")
        sent = self.store.msg_send(sender, to, ttl_s=ttl)
        peers = self.peers(sender)
        if kind == "*":
            expected = peers
        elif kind == "id":
            expected = {other}
        elif kind == "tag":
            expected = {p for p in peers if tag in self.model[p].tags}
        else:
            expected = {
                holder for path, holders in self.live_leases().items() for holder in holders
                if holder in peers and any(fnmatch.fnmatchcase(form, glob) for form in (
                    path, os.path.relpath(path, self.model[holder].cwd), os.path.basename(path)))
            }
        assert sent.message_id == self.next_mid
        assert sent.recipients == sorted(expected)
        assert (sent.warning is None) == bool(expected)
        self.next_mid += 1
        self.msgs[sent.message_id] = MMessage(
            sent.message_id, sender, set(self.model[sender].rooms), None if ttl is None else self.now + ttl,
            {r: "unread" for r in expected})
        return sent.message_id

    @rule(sid=sessions, limit=st.sampled_from((None, 1, 2)))
    def recv(self, sid: str, limit: int | None) -> None:
        if not self.live(sid):
            try:
                self.store.msg_recv(sid, limit)
            except UnknownSession:
                return
            raise AssertionError("recv by a session that left must be unknown_session")
        got = self.store.msg_recv(sid, limit)
        for m in self.msgs.values():
            if m.states.get(sid) == "unread" and m.expires_at is not None and m.expires_at <= self.now:
                m.states[sid] = "expired"
        expected = self.unread(sid)[: limit or DEFAULT_LIMIT]
        assert [m.id for m in got.messages] == expected
        for mid in expected:
            self.msgs[mid].states[sid] = "read"
        if expected:
            assert got.inbox is None
        else:
            assert got.inbox is not None
            mine = [m.states[sid] for m in self.msgs.values() if sid in m.states]
            assert (got.inbox.rooms, got.inbox.deliveries_total, got.inbox.deliveries_read) == (
                sorted(self.model[sid].rooms), len(mine), sum(s in ("read", "acked") for s in mine))

    @rule(sid=sessions, mid=messages)
    def ack(self, sid: str, mid: int) -> None:
        state = self.msgs[mid].states.get(sid)
        if not self.live(sid):
            expected_error: type[Exception] | None = UnknownSession
        elif state is None:
            expected_error = NotRecipient
        elif state in ("unread", "expired"):
            expected_error = InvalidArgument
        else:
            expected_error = None
        try:
            self.store.msg_ack(sid, mid)
        except (UnknownSession, NotRecipient, InvalidArgument) as exc:
            assert type(exc) is expected_error, (exc, expected_error)
            return
        assert expected_error is None
        self.msgs[mid].states[sid] = "acked"

    @rule(room=st.sampled_from(("team", "ops", "repo:alpha", "repo:beta")))
    def history(self, room: str) -> None:
        _, found = self.store.room_history(room=room, limit=1000)
        assert [m.id for m in found] == sorted(m.mid for m in self.msgs.values() if room in m.rooms)

    @rule(sid=sessions)
    def sent(self, sid: str) -> None:
        if not self.live(sid):
            return
        shown = {s.id: s.states for s in self.store.msg_sent(sid, limit=1000)}

        def view(m: MMessage, state: str) -> str:
            if state == "unread":
                return "expired" if m.expires_at is not None and m.expires_at <= self.now else "stored"
            return state

        assert shown == {m.mid: {r: view(m, st_) for r, st_ in m.states.items()}
                         for m in self.msgs.values() if m.sender == sid}

    # -- leases -------------------------------------------------------------------------------

    @rule(sid=sessions, path=st.sampled_from(PATHS), mode=st.sampled_from(("exclusive", "shared")),
          ttl=st.sampled_from((1, 5, 60)))
    def claim(self, sid: str, path: str, mode: str, ttl: int) -> None:
        self._claim(sid, path, mode, ttl)

    @precondition(lambda self: any(self.live_leases().values()))
    @rule(data=st.data(), mode=st.sampled_from(("exclusive", "shared")), ttl=st.sampled_from((1, 5, 60)))
    def contend(self, data: st.DataObject, mode: str, ttl: int) -> None:
        """Another live session claims a path someone holds now (same absolute path)."""
        # Insertion order, not sorted: session ids are random, and a draw must pick the same
        # session when Hypothesis replays the example.
        path = data.draw(st.sampled_from([p for p, h in self.live_leases().items() if h]))
        sid = data.draw(st.sampled_from([s.sid for s in self.model.values() if s.live]))
        self._claim(sid, path, mode, ttl)

    def _claim(self, sid: str, path: str, mode: str, ttl: int) -> None:
        if not self.live(sid):
            try:
                self.store.lease_claim(sid, path, ttl_s=ttl, mode=mode)
            except UnknownSession:
                return
            raise AssertionError("a claim by a session that left must be unknown_session")
        got = self.store.lease_claim(sid, path, ttl_s=ttl, mode=mode)
        self.sweep()
        full = self.abspath(sid, path)
        holders = self.leases.setdefault(full, {})
        others = {s: lease for s, lease in holders.items() if s != sid}
        in_the_way = set(others) if mode == "exclusive" else {s for s, lease in others.items()
                                                             if lease.mode == "exclusive"}
        assert got.ok == (not in_the_way), (got, in_the_way)
        if in_the_way:
            assert got.holder is not None and got.holder.session_id in in_the_way
            assert got.lease is None
            return
        assert got.lease is not None
        assert (got.lease.path, got.lease.token, got.lease.mode, got.lease.expires_at) == (
            full, self.next_token, mode, self.now + ttl)
        self.next_token += 1
        holders[sid] = MLease(mode, ttl, self.now + ttl)

    @rule(sid=sessions, path=st.sampled_from(PATHS), ttl=st.sampled_from((None, 2, 30)))
    def renew(self, sid: str, path: str, ttl: int | None) -> None:
        if not self.live(sid):
            return
        self.sweep()
        mine = self.leases.get(self.abspath(sid, path), {}).get(sid)
        try:
            got = self.store.lease_renew(sid, path, ttl_s=ttl)
        except LeaseNotHeld:
            assert mine is None
            return
        assert mine is not None
        mine.ttl = mine.ttl if ttl is None else ttl
        mine.expires_at = self.now + mine.ttl
        assert (got.token, got.expires_at, got.mode) == (self.next_token, mine.expires_at, mine.mode)
        self.next_token += 1

    @rule(sid=sessions, path=st.sampled_from(PATHS))
    def release(self, sid: str, path: str) -> None:
        if not self.live(sid):
            return
        self.sweep()
        holders = self.leases.get(self.abspath(sid, path), {})
        try:
            self.store.lease_release(sid, path)
        except LeaseNotHeld as exc:
            assert sid not in holders
            assert sorted(exc.data["holders"]) == sorted(holders)
            return
        assert sid in holders
        del holders[sid]

    # -- time ---------------------------------------------------------------------------------

    @rule(seconds=st.sampled_from((0.5, 1, 4, 10, 59, 61)))
    def advance(self, seconds: float) -> None:
        self.clock.shift(seconds)

    @precondition(lambda self: any(self.live_leases().values()))
    @rule(data=st.data())
    def advance_to_an_expiry(self, data: st.DataObject) -> None:
        """Move the clock to exactly when a live lease or message expires: the boundaries."""
        moments = {lease.expires_at for h in self.live_leases().values() for lease in h.values()}
        moments |= {m.expires_at for m in self.msgs.values() if m.expires_at and m.expires_at > self.now}
        self.clock.shift(data.draw(st.sampled_from(sorted(moments))) - self.now)

    # -- invariants ---------------------------------------------------------------------------

    @precondition(lambda self: any(s.live for s in self.model.values()))
    @invariant()
    def holders_agree(self) -> None:
        anyone = next(s.sid for s in self.model.values() if s.live)
        shown = {(v.path, v.session_id, v.mode, v.expires_at, v.mine) for v in self.store.lease_list(anyone)}
        expected = {(p, s, lease.mode, lease.expires_at, s == anyone)
                    for p, holders in self.live_leases().items() for s, lease in holders.items()}
        assert shown == expected

    @invariant()
    def unread_counts_agree(self) -> None:
        for s in self.model.values():
            if s.live:
                assert self.store.msg_unread(s.sid) == len(self.unread(s.sid)), s.sid


StoreMachine.TestCase.settings = settings(
    # The "ci" profile asks for 200 examples; a store per example and ~40 steps each keeps
    # this near 30 s there.
    max_examples=min(settings.default.max_examples, 100),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestStoreAgainstModel = StoreMachine.TestCase


class PostgresStoreMachine(StoreMachine):
    """The same machine on PostgreSQL: a fresh schema of the test process's cluster per example."""

    cluster = None

    def store_location(self) -> str:
        return pgcluster.new_schema(self.cluster)


@pytest.mark.slow
@pytest.mark.postgres_only
def test_store_against_model_on_postgresql(pg_cluster) -> None:
    # Half SQLite's examples: every write commits to a server that syncs its log (fsync=on),
    # so an example costs about twice as much.
    PostgresStoreMachine.cluster = pg_cluster
    run_state_machine_as_test(PostgresStoreMachine, settings=settings(
        StoreMachine.TestCase.settings, max_examples=min(settings.default.max_examples, 50)))
