"""The WAL stays bounded while readers never all let go of it at once (many agents)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import agents_room.store.sqlite.database as backend
from agents_room.store import Store

LIMIT = 256 * 1024


def _peak_wal(tmp_path: Path, limit: int, commits: int = 1500) -> int:
    """Largest WAL seen while one writer commits and two readers overlap their reads, so
    some reader is nearly always on the log (what SQLite's passive checkpoint cannot beat)."""
    writer = Store.open(tmp_path / f"{limit}.db")
    readers = [Store.open(tmp_path / f"{limit}.db") for _ in range(2)]
    sid = writer.room_join(cwd=str(tmp_path), pid=None).session_id
    done = threading.Event()

    def read(store: Store) -> None:
        while not done.is_set():
            store.lease_list(sid)

    threads = [threading.Thread(target=read, args=(r,)) for r in readers]
    for t in threads:
        t.start()
    peak = 0
    try:
        for n in range(commits):
            writer.lease_claim(sid, f"/tmp/p{n % 50}", ttl_s=1)
            peak = max(peak, writer.db.wal_bytes())
    finally:
        done.set()
        for t in threads:
            t.join()
        for s in (writer, *readers):
            s.close()
    return peak


@pytest.mark.slow
def test_the_wal_is_restarted_once_past_its_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend, "_WAL_CHECK_EVERY", 8)
    monkeypatch.setattr(backend, "WAL_LIMIT_BYTES", 1 << 60)
    unbounded = _peak_wal(tmp_path, 1 << 60)
    assert unbounded > 8 * LIMIT, "the workload did not make the WAL grow: the test proves nothing"
    monkeypatch.setattr(backend, "WAL_LIMIT_BYTES", LIMIT)
    bounded = _peak_wal(tmp_path, LIMIT)
    # The restart waits only briefly for readers and retries every few commits, so on a
    # loaded machine the WAL may overshoot the limit a little before a restart lands; it
    # must not grow with the work the way the unbounded WAL does.
    assert bounded < 16 * LIMIT and bounded * 4 < unbounded, (
        f"WAL reached {bounded} bytes with a limit of {LIMIT} (unbounded: {unbounded})")
