"""Opening the store file: permissions, WAL, refusing files that are not ours, forward-only
migrations under concurrency, and the bounded wait for the write lock."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

# The SQLite file, its pragmas, its WAL and its query planner.
pytestmark = pytest.mark.sqlite_only

from agents_room.store import Clock, Store, StoreBusy, StoreError
from agents_room.store.engines import SCHEMA_VERSION


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_open_creates_the_folder_0700(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "room.db"
    Store.open(path).close()
    assert _mode(path.parent) == 0o700


def test_open_creates_the_file_0600(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "room.db"
    Store.open(path).close()
    assert _mode(path) == 0o600


def test_wal_and_shm_files_are_private_too(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "room.db"
    with Store.open(path) as s:
        s.room_join(cwd=str(tmp_path), pid=None)
        assert _mode(Path(f"{path}-wal")) == 0o600
        assert _mode(Path(f"{path}-shm")) == 0o600


def test_open_leaves_an_existing_files_mode_alone(tmp_path: Path) -> None:
    path = tmp_path / "room.db"
    Store.open(path).close()
    os.chmod(path, 0o640)
    Store.open(path).close()
    assert _mode(path) == 0o640


def test_open_puts_the_file_in_wal_mode_as_another_connection_sees_it(tmp_path: Path) -> None:
    path = tmp_path / "room.db"
    Store.open(path).close()
    # The header's read/write version bytes are 2 only for a WAL database.
    assert path.read_bytes()[18:20] == b"\x02\x02"
    other = sqlite3.connect(path)
    try:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        other.close()


def test_health_reports_wal_version_and_a_clean_quick_check(store: Store) -> None:
    h = store.health()
    assert (h["journal_mode"], h["schema_version"], h["quick_check"], h["synchronous"]) == (
        "wal", SCHEMA_VERSION, "ok", "normal")


def test_a_file_that_is_not_sqlite_is_refused_naming_it_and_left_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    before = _digest(path)
    with pytest.raises(StoreError) as err:
        Store.open(path)
    assert str(path) in str(err.value)
    assert err.value.code == "store_error"
    assert _digest(path) == before
    assert sorted(os.listdir(tmp_path)) == ["notes.db"]


def test_a_file_with_foreign_tables_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT)")
    conn.execute("INSERT INTO accounts (owner) VALUES ('someone')")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not an agents-room store"):
        Store.open(path)
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert tables == ["accounts"]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    finally:
        conn.close()


def _corrupt_store(tmp_path: Path) -> Path:
    """A real store whose page 3 (an index of sessions) has a broken b-tree header."""
    path = tmp_path / "corrupt" / "room.db"
    with Store.open(path) as s:
        for i in range(3):
            s.room_join(cwd=str(tmp_path), pid=None, label=f"agent-{i}")
    page_size = 4096
    with open(path, "r+b") as fh:  # no connection is open here
        fh.seek(2 * page_size)
        fh.write(bytes([0x0D, 0xFF, 0xFF, 0x00, 0x50, 0x00, 0x10]))
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == page_size
        assert conn.execute("PRAGMA quick_check").fetchone()[0] != "ok"
    finally:
        conn.close()
    return path


def test_a_file_failing_quick_check_is_refused_naming_it(tmp_path: Path) -> None:
    path = _corrupt_store(tmp_path)
    with pytest.raises(StoreError, match="quick_check") as err:
        Store.open(path)
    assert str(path) in str(err.value)


def test_a_file_failing_quick_check_is_left_byte_identical(tmp_path: Path) -> None:
    path = _corrupt_store(tmp_path)
    before = _digest(path)
    with pytest.raises(StoreError):
        Store.open(path)
    assert _digest(path) == before


def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "room.db"
    Store.open(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer") as err:
        Store.open(path)
    assert str(path) in str(err.value)


def test_a_path_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "room.db").mkdir()
    with pytest.raises(StoreError, match="not a regular file"):
        Store.open(tmp_path / "room.db")


def test_reopening_keeps_the_data(tmp_path: Path) -> None:
    path = tmp_path / "room.db"
    with Store.open(path) as s:
        sid = s.room_join(cwd=str(tmp_path), pid=None, label="kept").session_id
    with Store.open(path) as s:
        assert [m.session_id for m in s.room_who()] == [sid]


# -- concurrent migration -------------------------------------------------------------------

_OPENER = """
import os, sys, time
from agents_room.store import Store
failed = False
for path in sys.argv[1:]:
    go = os.path.join(os.path.dirname(path), "go")
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.001)
    try:
        with Store.open(path, busy_timeout_s=10) as s:
            sid = s.room_join(cwd=os.path.dirname(path), pid=None).session_id
            print("ok", s.health()["schema_version"], sid, flush=True)
    except Exception as exc:
        print("error", type(exc).__name__, exc, flush=True)
        failed = True
sys.exit(1 if failed else 0)
"""


def _open_concurrently(paths: list[Path], n: int) -> list[str]:
    """``n`` processes open each of ``paths`` in turn, all at once (a round per path; the
    interpreters start once). Returns every process's result lines."""
    procs = [
        subprocess.Popen([sys.executable, "-c", _OPENER, *map(str, paths)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(n)
    ]
    lines: list[str] = []
    try:
        for path in paths:
            for p in procs:
                assert p.stdout is not None
                while (line := p.stdout.readline().strip()) != "ready":
                    assert line, p.stderr.read() if p.stderr else ""
                    lines.append(line)
            (path.parent / "go").touch()
        for p in procs:
            out, _ = p.communicate(timeout=60)
            lines += [ln.strip() for ln in out.splitlines() if ln.strip()]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return lines


def _prepare(folder: Path, start: str) -> Path:
    folder.mkdir(mode=0o700)
    path = folder / "room.db"
    if start == "empty file":
        path.touch(mode=0o600)
    elif start == "version 0 database":
        # A real database file with a header and no tables (what an interrupted first open leaves).
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("VACUUM")
        conn.close()
    return path


@pytest.mark.slow
@pytest.mark.parametrize("start", ["absent", "empty file", "version 0 database"])
def test_several_processes_migrating_one_old_file_at_once_all_succeed(tmp_path: Path, start: str) -> None:
    n, rounds = 8, 3
    paths = [_prepare(tmp_path / f"store{r}", start) for r in range(rounds)]
    lines = _open_concurrently(paths, n)
    assert [ln for ln in lines if not ln.startswith("ok ")] == []
    assert len(lines) == n * rounds
    for path in paths:
        with Store.open(path) as s:
            assert s.integrity_check() == "ok"
            assert s.health()["schema_version"] == SCHEMA_VERSION
            assert [e.kind for e in s.events()] == ["join"] * n
            # Exactly one migration ran: the seeded rows exist once.
            assert s.db.conn.execute("SELECT count(*) FROM counters").fetchone()[0] == 1
            assert s.db.conn.execute("SELECT count(*) FROM delivery_transitions").fetchone()[0] == 12


# -- the bounded wait for the write lock ----------------------------------------------------


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    other.execute("BEGIN IMMEDIATE")
    return other


def test_a_write_waits_at_most_the_busy_timeout_then_raises_store_busy(tmp_path: Path) -> None:
    path = tmp_path / "room.db"
    with Store.open(path, clock=Clock(fixed=1_800_000_000.0), busy_timeout_s=0.3) as s:
        sid = s.room_join(cwd=str(tmp_path), pid=None).session_id
        other = _hold_write_lock(path)
        try:
            t0 = time.monotonic()
            with pytest.raises(StoreBusy) as err:
                s.lease_claim(sid, "a.txt")
            waited = time.monotonic() - t0
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert err.value.code == "store_busy" and err.value.definite
        assert 0.25 <= waited < 2.0


def test_a_busy_write_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "room.db"
    with Store.open(path, clock=Clock(fixed=1_800_000_000.0), busy_timeout_s=0.2) as s:
        sid = s.room_join(cwd=str(tmp_path), pid=None).session_id
        before = s.events()
        other = _hold_write_lock(path)
        try:
            with pytest.raises(StoreBusy):
                s.lease_claim(sid, "a.txt")
            with pytest.raises(StoreBusy):
                s.msg_send(sid, "*", body="hello")
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert s.events() == before
        assert s.lease_check(sid, "a.txt").free
        assert s.msg_sent(sid) == []


def test_the_store_writes_again_once_the_lock_is_released(tmp_path: Path) -> None:
    path = tmp_path / "room.db"
    with Store.open(path, busy_timeout_s=0.2) as s:
        sid = s.room_join(cwd=str(tmp_path), pid=None).session_id
        other = _hold_write_lock(path)
        with pytest.raises(StoreBusy):
            s.lease_claim(sid, "a.txt")
        other.execute("ROLLBACK")
        other.close()
        assert s.lease_claim(sid, "a.txt").ok


def test_reads_are_not_blocked_by_a_held_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "room.db"
    with Store.open(path, clock=Clock(fixed=1_800_000_000.0), busy_timeout_s=0.2) as s:
        sid = s.room_join(cwd=str(tmp_path), pid=None).session_id
        other = _hold_write_lock(path)
        try:
            assert s.msg_unread(sid) == 0
            assert s.lease_check(sid, "a.txt").free
        finally:
            other.execute("ROLLBACK")
            other.close()


def test_a_read_still_answers_when_recording_last_seen_finds_the_lock_taken(tmp_path: Path) -> None:
    path = tmp_path / "room.db"
    clock = Clock(fixed=1_800_000_000.0)
    with Store.open(path, clock=clock, busy_timeout_s=0.2) as s:
        a = s.room_join(cwd=str(tmp_path), pid=None).session_id
        b = s.room_join(cwd=str(tmp_path), pid=None).session_id
        s.msg_send(a, b)
        clock.shift(120)  # b's last_seen is stale: this read would also record it
        other = _hold_write_lock(path)
        try:
            assert s.msg_unread(b) == 1
        finally:
            other.execute("ROLLBACK")
            other.close()


_LOCK_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


@pytest.mark.parametrize("start", ["empty file", "version 0 database in rollback mode"])
def test_opening_a_new_store_waits_for_another_process_writing_it(tmp_path: Path, start: str) -> None:
    # Switching to WAL needs an exclusive lock that SQLite's busy handler does not wait for;
    # another process that is writing the file (e.g. migrating it) must be waited for, not
    # turned into an error.
    path = tmp_path / "room.db"
    if start == "empty file":
        path.touch(mode=0o600)
    else:
        sqlite3.connect(path).execute("VACUUM").connection.close()
    holder = subprocess.Popen([sys.executable, "-c", _LOCK_HOLDER, str(path), "0.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with Store.open(path, busy_timeout_s=5.0) as s:
            assert s.health()["journal_mode"] == "wal"
    finally:
        holder.communicate(timeout=10)
    assert holder.returncode == 0
