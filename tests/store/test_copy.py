"""Copying a SQLite store into an empty PostgreSQL one: everything arrives with its ids, the
audit replays the same, ids, seqs and tokens go on from where they were, and a non-empty
target is refused untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents_room.store import Clock, Store, StoreError
from agents_room.store.copy import copy_store

from .conftest import checker_problems

pytestmark = pytest.mark.postgres_only


def _history(store: Store, repo: Path, clock: Clock) -> dict[str, str]:
    a = store.room_join(cwd=str(repo), pid=None, label="a", tags=["backend"], room="team").session_id
    b = store.room_join(cwd=str(repo), pid=None, label="b", autonomy="wake", room="team").session_id
    c = store.room_join(cwd=str(repo), pid=None, label="c").session_id
    store.room_set_autonomy_cap("notify", room="team")
    store.lease_claim(a, "a.txt", ttl_s=600)
    store.lease_claim(b, "b.txt", ttl_s=5, mode="shared")
    (repo / "a.txt").write_text("one\n")
    store.note_read(c, "a.txt")
    first = store.msg_send(a, "*", subject="hello", body="world").message_id
    store.msg_send(b, "tag:backend", subject="to the backend", ttl_s=60)
    store.msg_recv(b)
    store.msg_ack(b, first)
    clock.shift(10)
    store.lease_claim(c, "b.txt")  # sweeps b's expired lease
    store.room_leave(c)
    return {"a": a, "b": b, "c": c}


def test_a_sqlite_store_copied_into_postgresql_is_the_same_store(tmp_path: Path, pg_url: str, repo: Path,
                                                                 clock: Clock) -> None:
    with Store.open(tmp_path / "old" / "room.db", clock=clock) as old, Store.open(pg_url, clock=clock) as new:
        sids = _history(old, repo, clock)
        copied = copy_store(old, new)
        assert copied["events"] == len(old.events()) and copied["messages"] == 2 and copied["sessions"] == 3
        assert new.events() == old.events()
        assert checker_problems(new.events()) == []
        assert new.room_who(sids["a"]) == old.room_who(sids["a"])
        assert new.lease_list(sids["a"]) == old.lease_list(sids["a"])
        assert new.msg_sent(sids["a"]) == old.msg_sent(sids["a"])
        assert new.room_history(sids["a"], room="team") == old.room_history(sids["a"], room="team")
        assert new.drift_check(sids["a"], "a.txt") == old.drift_check(sids["a"], "a.txt")
        assert new.msg_recv(sids["a"]) == old.msg_recv(sids["a"])
        # Ids, seqs and tokens go on from where the old store was.
        assert new.msg_send(sids["b"], "*").message_id == old.msg_send(sids["b"], "*").message_id == 3
        assert new.lease_claim(sids["b"], "z.txt").lease.token == old.lease_claim(sids["b"], "z.txt").lease.token
        assert new.last_seq() == old.last_seq()


def test_a_target_that_holds_anything_is_refused_untouched(tmp_path: Path, pg_url: str, repo: Path,
                                                           clock: Clock) -> None:
    with Store.open(tmp_path / "old" / "room.db", clock=clock) as old, Store.open(pg_url, clock=clock) as new:
        _history(old, repo, clock)
        new.room_join(cwd=str(repo), pid=None, label="already here")
        before = new.events()
        with pytest.raises(StoreError, match="not empty"):
            copy_store(old, new)
        assert new.events() == before and new.health()["rows"]["sessions"] == 1
