"""Liveness from a scan of real processes: a harness key in some process's environment
means alive; no pid recorded means unknown; a pid alone is checked as a pid."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agents_room.store import Clock, Store, liveness, recent_scan, scan_processes
from agents_room.store.liveness import SCAN_CACHE_S

from .conftest import carrying


@pytest.fixture
def key() -> str:
    return str(uuid.uuid4())


@pytest.fixture
def child(key: str) -> Iterator[subprocess.Popen]:
    """A real running process carrying ``key`` in its environment, as a harness's children do."""
    proc = carrying({**os.environ, "SOME_HARNESS_SESSION": key}, key)
    yield proc
    proc.kill()
    proc.wait()


def _stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


def test_a_process_carrying_the_key_makes_it_alive(child: subprocess.Popen, key: str) -> None:
    assert liveness(child.pid, key, scan_processes()) == "alive"


def test_once_that_process_exits_the_key_is_gone(child: subprocess.Popen, key: str) -> None:
    _stop(child)
    assert liveness(child.pid, key, scan_processes()) == "gone"


def test_the_key_decides_even_when_the_recorded_pid_is_dead(child: subprocess.Popen, key: str) -> None:
    # A harness keeps its key across MCP restarts; the pid recorded at join may be stale.
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert liveness(dead.pid, key, scan_processes()) == "alive"


def test_a_live_pid_without_its_key_in_any_environment_is_gone() -> None:
    assert liveness(os.getpid(), str(uuid.uuid4()), scan_processes()) == "gone"


def test_the_key_is_matched_whatever_its_case(key: str) -> None:
    proc = carrying({**os.environ, "X_KEY": key.upper()}, key)
    try:
        assert liveness(proc.pid, key, scan_processes()) == "alive"
    finally:
        _stop(proc)


def test_no_pid_recorded_is_unknown_even_with_a_live_key(child: subprocess.Popen, key: str) -> None:
    assert liveness(None, key, scan_processes()) == "unknown"


def test_a_running_pid_without_a_key_is_alive() -> None:
    proc = subprocess.Popen(["sleep", "60"])
    try:
        assert liveness(proc.pid, None, scan_processes()) == "alive"
    finally:
        _stop(proc)


def test_an_exited_pid_without_a_key_is_gone() -> None:
    proc = subprocess.Popen(["sleep", "60"])
    _stop(proc)
    assert liveness(proc.pid, None, scan_processes()) == "gone"


def test_a_proc_folder_that_cannot_be_read_gives_an_empty_scan(tmp_path: Path) -> None:
    scan = scan_processes(str(tmp_path / "no-proc"))
    assert (scan.pids, scan.keys) == (frozenset(), frozenset())


def test_room_who_follows_the_process_from_alive_to_gone(
    store: Store, repo: Path, child: subprocess.Popen, key: str
) -> None:
    store.room_join(cwd=str(repo), pid=child.pid, harness_key=key)
    assert store.room_who()[0].liveness == "alive"
    _stop(child)
    # room_who's scan may be up to SCAN_CACHE_S old: gone shows within that, not later.
    deadline = time.monotonic() + SCAN_CACHE_S + 0.5
    while store.room_who()[0].liveness != "gone":
        assert time.monotonic() < deadline, "still alive past the scan cache's age"
        time.sleep(0.05)


def _fake_proc(root: Path, pids: dict[int, str]) -> str:
    """A /proc-shaped folder: one ``<pid>/environ`` per process, carrying one key."""
    for pid, key in pids.items():
        (root / str(pid)).mkdir(parents=True, exist_ok=True)
        (root / str(pid) / "environ").write_bytes(f"HOME=/x\0SESSION={key}\0".encode())
    return str(root)


def test_recent_scan_is_shared_until_it_is_older_than_its_age(tmp_path: Path, key: str) -> None:
    proc = _fake_proc(tmp_path / "proc", {41: key})
    first = recent_scan(proc, max_age_s=0.3)
    assert first.keys == {key} and first.pids == {41}
    (tmp_path / "proc" / "41" / "environ").unlink()
    (tmp_path / "proc" / "41").rmdir()
    assert recent_scan(proc, max_age_s=0.3) is first  # the process exited, the cached scan still says so
    time.sleep(0.35)
    assert recent_scan(proc, max_age_s=0.3).pids == frozenset()


def test_prune_scans_afresh_while_room_who_may_answer_from_the_cache(
    store: Store, clock: Clock, child: subprocess.Popen, key: str, join: Callable[..., str]
) -> None:
    sid = join(pid=child.pid, harness_key=key)
    assert store.room_who()[0].liveness == "alive"  # a scan now cached
    clock.shift(3600)
    _stop(child)
    assert [s.id for s in store.prune(60)] == [sid]  # gone is proven by a scan taken after the exit


def test_prune_spares_a_live_key_and_removes_it_once_gone(
    store: Store, clock: Clock, repo: Path, child: subprocess.Popen, key: str, join: Callable[..., str]
) -> None:
    sid = join(pid=child.pid, harness_key=key)
    clock.shift(3600)
    assert store.prune(60) == []
    _stop(child)
    assert [s.id for s in store.prune(60)] == [sid]


# -- the judge: a few reads for the common case, the whole scan only to prove gone --------------------

from agents_room.store.liveness import Judge  # noqa: E402


def test_a_key_carried_only_by_a_child_of_the_recorded_pid_is_alive(
    store: Store, repo: Path, key: str
) -> None:
    """A harness sets the key for what it spawns: the recorded pid (the harness) lacks it."""
    parent = subprocess.Popen(["sh", "-c", f"env SOME_HARNESS_SESSION={key} sleep 60 & wait"])
    try:
        deadline = time.monotonic() + 10
        while key not in Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text() + "".join(
                Path(f"/proc/{c}/environ").read_text(errors="replace")
                for c in Path(f"/proc/{parent.pid}/task/{parent.pid}/children").read_text().split()):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert key.encode() not in Path(f"/proc/{parent.pid}/environ").read_bytes()
        store.room_join(cwd=str(repo), pid=parent.pid, harness_key=key)
        assert [m.liveness for m in store.room_who()] == ["alive"]
    finally:
        parent.kill()
        parent.wait()


def _proc_with_child(root: Path, parent: int, child: int, key: str) -> str:
    (root / str(parent) / "task" / str(parent)).mkdir(parents=True)
    (root / str(parent) / "environ").write_bytes(b"HOME=/x\0")
    (root / str(parent) / "task" / str(parent) / "children").write_text(f"{child} ")
    (root / str(child)).mkdir()
    (root / str(child) / "environ").write_bytes(f"HOME=/x\0SESSION={key}\0".encode())
    return str(root)


def test_the_judge_proves_alive_from_the_pid_and_its_children_without_a_scan(tmp_path: Path, key: str) -> None:
    import sys

    module = sys.modules["agents_room.store.liveness"]
    proc = _proc_with_child(tmp_path / "proc", 500, 501, key)
    judge = Judge("here", 100.0, proc=proc)
    assert judge("s1", 500, key.upper(), "here", 50.0, None) == "alive"
    assert proc not in module._recent  # no scan was taken
    assert judge("s2", 500, str(uuid.uuid4()), "here", 50.0, None) == "gone"  # not carried: the scan proves it
    assert proc in module._recent and judge.proved_gone == [("s2", 50.0)]


def test_a_recorded_gone_verdict_stands_without_a_scan_until_the_next_call(tmp_path: Path, key: str) -> None:
    import sys

    module = sys.modules["agents_room.store.liveness"]
    proc = _fake_proc(tmp_path / "proc", {41: "other"})
    judge = Judge("here", 100.0, proc=proc)
    assert judge("s", 41, key, "here", 50.0, 60.0) == "gone"  # proven at 60, last call at 50
    assert proc not in module._recent and judge.proved_gone == []  # nothing new to record
    assert judge("s", 41, key, "here", 70.0, 60.0) == "gone"  # a call since: proven again by a scan
    assert proc in module._recent and judge.proved_gone == [("s", 70.0)]


def test_another_hosts_session_is_never_judged_by_this_hosts_processes(tmp_path: Path, key: str) -> None:
    proc = _fake_proc(tmp_path / "proc", {41: key})  # its key is right here
    judge = Judge("here", 1000.0, proc=proc)
    assert judge("s", 41, key, "there", 1000.0 - 10, None) == "alive"  # a recent call
    assert judge("s", 41, key, "there", 1000.0 - 500, None) == "unknown"  # quiet: not alive by our /proc
    assert judge("s", 41, key, None, 1000.0 - 500, None) == "unknown"  # host not recorded
    assert judge("s", 41, key, "there", 1000.0 - 500, 1000.0 - 400) == "gone"  # its host proved it
    assert judge("s", None, key, "here", 1000.0, None) == "unknown"  # no pid recorded


def test_a_fresh_judge_reuses_no_proof_a_long_lived_process_made_earlier(child: subprocess.Popen, key: str) -> None:
    """A server judges many edits over its life: once a harness exits, the next edit's judge
    (fresh, store/editclaim.py) says gone at once, where a shown liveness may lag by the
    cache's second."""
    pid = child.pid
    assert Judge("here", 100.0)("s", pid, key, "here", 50.0, None) == "alive"  # the proof, now cached
    _stop(child)  # (a judge that is not fresh may answer from that proof for SCAN_CACHE_S)
    assert Judge("here", 100.0, fresh=True)("s", pid, key, "here", 50.0, None) == "gone"
