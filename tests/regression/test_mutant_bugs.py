"""Each broken store of ``tests/mutants/`` really has its bug, shown in one process with the
interleaving forced, next to the shipped store doing the right thing on the same steps. The
matrix (``test_mutants.py``) then shows the regression scenario finds the same bugs by itself.

Mutations rewrite functions of the store's modules in place: every test here first hands
those attributes to ``monkeypatch``, so they are restored afterwards."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

import pytest

from agents_room.store import Clock, Store, StoreBusy, leases, messages

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutants import deliveries as broken_deliveries  # noqa: E402
from mutants import leases as broken_leases  # noqa: E402


@pytest.fixture
def restore(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Whatever a mutant rewrites is put back after the test."""
    for module, name in ((leases, "sweep"), (leases, "claim"), (messages, "_peers"), (messages, "recv")):
        monkeypatch.setattr(module, name, getattr(module, name))
    monkeypatch.setattr(messages, "mark_read_through", None, raising=False)
    yield


def two(db: Path, repo: Path, make: Callable[..., Store] = Store.open, clock: Clock | None = None,
        ) -> tuple[Store, Store, str, str]:
    """Two stores (two connections) on one file, and a session joined through each."""
    a = make(db, clock=clock, busy_timeout_s=2.0) if clock else make(db, busy_timeout_s=2.0)
    b = Store.open(db, clock=clock or a.clock, busy_timeout_s=2.0)
    sa = a.room_join(cwd=str(repo), pid=None, extra_rooms=["crew"], label="a").session_id
    sb = b.room_join(cwd=str(repo), pid=None, extra_rooms=["crew"], label="b").session_id
    return a, b, sa, sb


def grants(store: Store, path: str) -> list[str]:
    return [e.session_id for e in store.events(0, 100_000) if e.kind == "lease_grant" and e.path == path]


# -- leases -------------------------------------------------------------------------------------


def test_check_then_act_grants_twice_when_a_claim_lands_between(tmp_path: Path, repo: Path) -> None:
    class Interleaved(broken_leases.CheckThenAct):
        between: Callable[[], object] | None = None

        def lease_check(self, session_id, path):  # type: ignore[no-untyped-def]
            state = super().lease_check(session_id, path)
            if self.between:
                step, self.between = self.between, None
                step()
            return state

    a, b, sa, sb = two(tmp_path / "room.db", repo, Interleaved.open)
    path = str(repo / "x.py")
    a.between = lambda: b.lease_claim(sb, path, 30)  # type: ignore[attr-defined]
    assert a.lease_claim(sa, path, 30).ok  # its check saw the path free, before b's claim
    assert grants(a, path) == [sb, sa]  # two exclusive grants, nothing released between
    assert {h.session_id for h in a.lease_check(sa, path).holders} == {sa, sb}


@pytest.mark.parametrize("retry", [True, False], ids=["statement-retry", "no-retry"])
def test_deferred_begin_retries_the_upgrade_on_a_stale_read(tmp_path: Path, repo: Path, restore: None,
                                                            monkeypatch: pytest.MonkeyPatch, retry: bool) -> None:
    if not retry:
        monkeypatch.setattr(broken_leases.DeferredDatabase, "attempts", 1)
    a, b, sa, sb = two(tmp_path / "room.db", repo, broken_leases.deferred_begin)
    path = str(repo / "x.py")
    pending = [lambda: b.lease_claim(sb, path, 30)]
    real = leases.sweep

    def sweep(tx):  # type: ignore[no-untyped-def]
        if pending:  # a has read the holders (free) and holds only a read snapshot: b commits now
            pending.pop()()
        return real(tx)

    monkeypatch.setattr(leases, "sweep", sweep)
    if not retry:  # the same read-first design, done right: the stale upgrade is refused
        with pytest.raises(StoreBusy):
            a.lease_claim(sa, path, 30)
        assert grants(a, path) == [sb]
        return
    assert a.lease_claim(sa, path, 30).ok  # its upgrade met b's commit, retried, never read again
    assert grants(a, path) == [sb, sa]
    assert {h.mode for h in a.lease_check(sa, path).holders} == {"exclusive"}
    assert len(a.lease_check(sa, path).holders) == 2


@pytest.mark.parametrize("shipped", [False, True], ids=["lazy-lock", "shipped"])
def test_the_postgresql_twin_takes_the_write_lock_too_late(pg_url: str, repo: Path, restore: None,
                                                           monkeypatch: pytest.MonkeyPatch, shipped: bool) -> None:
    """PostgreSQL's deferred-begin (mutants/leases_pg.py): the advisory write lock at the first
    write. b's claim commits while a has read the holders and not yet written: a grants too.
    The shipped store holds the lock from BEGIN on: b waits for it and gives up (store_busy)."""
    a = Store.open(pg_url, busy_timeout_s=1.0) if shipped else broken_leases.deferred_begin(pg_url, busy_timeout_s=1.0)
    a.__class__ = broken_leases.DeferredBegin  # the same read-first claim either way; only the lock differs
    b = Store.open(pg_url, busy_timeout_s=1.0)
    sa = a.room_join(cwd=str(repo), pid=None, label="a").session_id
    sb = b.room_join(cwd=str(repo), pid=None, label="b").session_id
    path = str(repo / "x.py")
    pending = [lambda: b.lease_claim(sb, path, 30)]
    real = leases.sweep

    def sweep(tx):  # type: ignore[no-untyped-def]
        if pending:  # a has read the holders (free) and has not written yet: b claims now
            pending.pop()()
        return real(tx)

    monkeypatch.setattr(leases, "sweep", sweep)
    try:
        if shipped:
            with pytest.raises(StoreBusy):
                a.lease_claim(sa, path, 30)
            assert grants(a, path) == []  # neither: b timed out on the lock a held, a rolled back
            return
        assert a.lease_claim(sa, path, 30).ok
        assert grants(a, path) == [sb, sa]
        assert len(a.lease_check(sa, path).holders) == 2
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("shipped", [False, True], ids=["claim-unlocked", "shipped"])
def test_the_claim_function_without_the_write_lock_grants_twice(pg_url: str, repo: Path, shipped: bool) -> None:
    """PostgreSQL's claim function (store/postgres/migrate_4.sql) with its write lock dropped
    (mutants/leases_pg.py): a's claim has run on the server and not committed yet when b's
    arrives. b's finds no holder (a's lease is not visible), waits only for the token's row
    and grants when a commits: two exclusive holders. The shipped function waits for the write
    lock before it looks: it sees a's lease and denies."""
    import threading

    import psycopg

    from mutants import leases_pg

    b = Store.open(pg_url, busy_timeout_s=5.0)
    if not shipped:
        leases_pg.claim_without_lock(pg_url, busy_timeout_s=5.0).close()
    sa = b.room_join(cwd=str(repo), pid=None, label="a").session_id
    sb = b.room_join(cwd=str(repo), pid=None, label="b").session_id
    path = str(repo / "x.py")
    a = psycopg.connect(pg_url, autocommit=True)
    try:
        a.execute("BEGIN")
        a.execute("SELECT * FROM agents_room_lease_claim(%s, NULL, %s, 30, 'exclusive', NULL)", (sa, path))
        seen: list[int] = []
        committer = threading.Thread(target=_commit_once_waited_for, args=(pg_url, a, seen))
        committer.start()
        answer = b.lease_claim(sb, path, 30)
        committer.join()
        assert seen, "b's claim was never seen waiting on the server"
        holders = {h.session_id for h in b.lease_check(sb, path).holders}
        if shipped:
            assert not answer.ok and answer.holder is not None and answer.holder.session_id == sa
            assert holders == {sa}
        else:
            assert answer.ok and holders == {sa, sb}
    finally:
        a.close()
        b.close()


def _commit_once_waited_for(url: str, a: Any, seen: list[int]) -> None:
    """COMMIT ``a``'s transaction once another backend's claim function waits on a lock (the
    write lock, or the token's row without it), never on a timer: a loaded machine may take
    any time to send that claim."""
    import psycopg

    mine = a.info.backend_pid
    try:
        with psycopg.connect(url, autocommit=True) as watch:
            deadline = time.monotonic() + 60
            while not seen and time.monotonic() < deadline:
                seen += [r[0] for r in watch.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> %s "
                    "AND query LIKE %s", (mine, "%agents_room_lease_claim%")).fetchall()]
                time.sleep(0.01)
    finally:
        a.execute("COMMIT")


def test_early_expiry_sweeps_a_renewed_lease_at_its_first_term(tmp_path: Path, repo: Path, restore: None) -> None:
    def steps(db: Path) -> bool:
        clock = Clock(fixed=1_800_000_000.0)
        a, b, sa, sb = two(db, repo, clock=clock)
        path = str(repo / "x.py")
        assert a.lease_claim(sa, path, 2).ok
        clock.shift(1.5)
        assert a.lease_renew(sa, path, 1).expires_at == 1_800_000_002.5
        clock.shift(0.1)  # past acquired_at + the new ttl, before the renewed expiry
        return b.lease_claim(sb, path, 5).ok

    assert steps(tmp_path / "shipped.db") is False
    broken_leases.early_expiry(tmp_path / "broken.db", busy_timeout_s=2.0).close()
    assert steps(tmp_path / "broken.db") is True


def test_early_expiry_on_postgresql_releases_by_one_rule_and_writes_whole_events(pg_url: str, repo: Path,
                                                                                 restore: None) -> None:
    """The same mutant on PostgreSQL rewrites the server functions' sweep and their look for
    the caller's lease alike: the release of a renewed lease past its first term is refused,
    as the rewritten Python rules refuse it, and every event written is whole JSON (with the
    look left to the shipped rule, the sweep took the lease from under the release, which then
    wrote a lease_release event of no mode)."""
    from agents_room.store import LeaseNotHeld

    clock = Clock(fixed=1_800_000_000.0)
    broken_leases.early_expiry(pg_url, busy_timeout_s=2.0).close()
    a = Store.open(pg_url, clock=clock, busy_timeout_s=2.0)
    try:
        sa = a.room_join(cwd=str(repo), pid=None, label="a").session_id
        path = str(repo / "x.py")
        assert a.lease_claim(sa, path, 2).ok
        clock.shift(1.5)
        assert a.lease_renew(sa, path, 1).expires_at == 1_800_000_002.5
        clock.shift(0.1)  # past acquired_at + the new ttl, before the renewed expiry
        with pytest.raises(LeaseNotHeld):
            a.lease_release(sa, path)
        kinds = [e.kind for e in a.events(0, 1000)]  # every payload parses
        assert kinds.count("lease_release") == 0 and kinds.count("lease_renew") == 1
    finally:
        a.close()


def test_a_shared_claim_beside_an_exclusive_holder(tmp_path: Path, repo: Path, restore: None) -> None:
    def steps(db: Path) -> bool:
        a, b, sa, sb = two(db, repo)
        path = str(repo / "x.py")
        assert a.lease_claim(sa, path, 30, "exclusive").ok
        return b.lease_claim(sb, path, 30, "shared").ok

    assert steps(tmp_path / "shipped.db") is False
    broken_leases.shared_ignores_exclusive(tmp_path / "broken.db", busy_timeout_s=2.0).close()
    assert steps(tmp_path / "broken.db") is True


# -- deliveries ---------------------------------------------------------------------------------


def test_a_broadcast_to_a_peer_of_two_rooms_is_delivered_twice(tmp_path: Path, repo: Path, restore: None) -> None:
    def steps(db: Path, make: Callable[..., Store]) -> list[int]:
        a, b, sa, sb = two(db, repo, make)  # a and b share the repo room and "crew"
        mid = a.msg_send(sa, "*", "hello", "x").message_id
        got = [m.id for m in b.msg_recv(sb).messages]
        assert set(got) == {mid}
        return got

    assert len(steps(tmp_path / "shipped.db", Store.open)) == 1
    assert len(steps(tmp_path / "broken.db", broken_deliveries.duplicate_delivery)) == 2


def test_a_message_arriving_between_read_and_mark_is_lost(tmp_path: Path, repo: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    b, a, sb, sa = two(tmp_path / "room.db", repo, broken_deliveries.recv_two_transactions)
    real = b.db.write
    sent: list[int] = []

    def write():  # type: ignore[no-untyped-def]
        sent.append(a.msg_send(sa, sb, "late", "x").message_id)  # lands after b's read, before its mark
        monkeypatch.setattr(b.db, "write", real)
        return real()

    monkeypatch.setattr(b.db, "write", write)
    assert b.msg_recv(sb).messages == []
    assert b.msg_recv(sb).messages == []  # never returned ...
    states = [e.payload for e in b.events(0, 100_000) if e.kind == "delivery" and e.session_id == sb]
    assert states == [{"to": "read", "items": [[sent[0], "stored"]]}]  # ... yet marked read


def test_recv_moves_an_acked_delivery_back_to_read(tmp_path: Path, repo: Path, restore: None) -> None:
    def steps(db: Path, make: Callable[..., Store]) -> list[dict]:
        a, b, sa, sb = two(db, repo, make)
        first = a.msg_send(sa, sb, "one", "x").message_id
        assert [m.id for m in b.msg_recv(sb).messages] == [first]
        b.msg_ack(sb, first)
        second = a.msg_send(sa, sb, "two", "x").message_id
        assert [m.id for m in b.msg_recv(sb).messages] == [second]
        return [e.payload for e in b.events(0, 100_000) if e.kind == "delivery"]

    assert steps(tmp_path / "shipped.db", Store.open)[-1]["items"] == [[2, "stored"]]
    broken = steps(tmp_path / "broken.db", broken_deliveries.backward_delivery)
    assert broken[-1]["items"] == [[1, "acked"], [2, "stored"]]  # acked → read: backward
    with Store.open(tmp_path / "broken.db") as store:
        assert store.db.conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE name = 'deliveries_forward_only'").fetchone()[0] == 0
