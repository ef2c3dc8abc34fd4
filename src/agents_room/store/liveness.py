"""Is a session's agent still running? One function, shared by ``room_who`` and ``prune``.

A harness keeps its key (a UUID) in the environment of every process it spawns, across
MCP restarts, which a pid does not survive. So liveness asks the running processes which
keys are in any process's environment.

The scan reads every process's environment (up to a second under load), so answers that
only show liveness (``room_who``, the dashboard) take :func:`recent_scan`, at most
``SCAN_CACHE_S`` old; ``prune``, which must prove a session gone, always scans afresh. A scan
taken before a session's last sign of life cannot prove it gone: :func:`recent_scan` with
``fresh_after`` scans again then (a session that just joined is never shown gone).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Literal

Liveness = Literal["alive", "gone", "unknown"]

# How stale a shown liveness may be: a process that exits shows as gone this much later.
SCAN_CACHE_S = 1.0


@dataclass(frozen=True)
class ProcessScan:
    """One look at the running processes: the pids, and every environment value that could
    be a harness key (UUID-shaped), lowercased."""

    pids: frozenset[int]
    keys: frozenset[str]
    taken_at: float = 0.0  # wall-clock seconds when the scan began


def _uuid_shaped(value: bytes) -> bool:
    return len(value) == 36 and value.count(b"-") == 4


def scan_processes(proc: str = "/proc") -> ProcessScan:
    """Read ``/proc/*/environ`` where this user may; processes that vanish or deny are
    skipped (a process we cannot read is not evidence of anything)."""
    pids: set[int] = set()
    keys: set[str] = set()
    taken_at = time.time()
    try:
        entries = os.listdir(proc)
    except OSError:
        return ProcessScan(frozenset(), frozenset(), taken_at)
    for entry in entries:
        if not entry.isdigit():
            continue
        pids.add(int(entry))
        try:
            with open(f"{proc}/{entry}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:
            continue
        for item in environ.split(b"\0"):
            _, sep, value = item.partition(b"=")
            if sep and _uuid_shaped(value):
                keys.add(value.decode("ascii", "replace").lower())
    return ProcessScan(frozenset(pids), frozenset(keys), taken_at)


_recent: dict[str, tuple[float, ProcessScan]] = {}
_recent_lock = threading.Lock()


def recent_scan(proc: str = "/proc", max_age_s: float = SCAN_CACHE_S, fresh_after: float | None = None) -> ProcessScan:
    """A scan at most ``max_age_s`` old (and begun after ``fresh_after``, wall clock, when
    given), shared by this process's threads: concurrent callers wait for one scan instead
    of each reading every environment."""
    with _recent_lock:
        taken = _recent.get(proc)
        if (taken is None or time.monotonic() - taken[0] >= max_age_s
                or (fresh_after is not None and taken[1].taken_at <= fresh_after)):
            taken = (time.monotonic(), scan_processes(proc))
            _recent[proc] = taken
        return taken[1]


def liveness(pid: int | None, harness_key: str | None, scan: ProcessScan) -> Liveness:
    """``unknown`` when no pid is recorded; else by the harness key when there is one
    (``alive`` if any process carries it); else by the pid."""
    if pid is None:
        return "unknown"
    if harness_key:
        return "alive" if harness_key.lower() in scan.keys else "gone"
    return "alive" if pid in scan.pids else "gone"


_ENVIRON_READ = 1 << 16
# Alive proofs of this process, (proc, pid, key) -> monotonic time: reused for SCAN_CACHE_S, as
# a scan is (a process that exits shows as gone at most this much later).
_proven: dict[tuple[str, int, str], float] = {}


def _environ(proc: str, pid: int | str) -> bytes:
    """A process's environment, lowercased; empty when it is gone or not ours to read. Raw
    ``os.open``/``os.read``: this runs once per session of a ``room_who``."""
    try:
        fd = os.open(f"{proc}/{pid}/environ", os.O_RDONLY)
    except OSError:
        return b""
    try:
        data = os.read(fd, _ENVIRON_READ)
        if len(data) == _ENVIRON_READ:  # rare: a larger environment, read to its end
            chunks = [data]
            while chunk := os.read(fd, _ENVIRON_READ):
                chunks.append(chunk)
            data = b"".join(chunks)
    except OSError:
        return b""
    finally:
        os.close(fd)
    return data.lower()


def _has_key(environ: bytes, key: bytes) -> bool:
    return (b"=" + key + b"\0") in environ or environ.endswith(b"=" + key)


def _carries(proc: str, pid: int, key: bytes) -> bool:
    """Does ``pid`` or one of its children carry ``key`` in its environment? A few small
    reads instead of the whole scan: enough to prove alive (never gone). The process itself
    first (one read), then its children (a harness sets the key for what it spawns)."""
    if _has_key(_environ(proc, pid), key):
        return True
    try:
        tasks = os.listdir(f"{proc}/{pid}/task")
    except OSError:
        return False  # gone (or not ours)
    for task in tasks:
        try:
            with open(f"{proc}/{pid}/task/{task}/children", "rb") as fh:
                children = fh.read().split()
        except OSError:
            continue
        if any(_has_key(_environ(proc, int(child)), key) for child in children):
            return True
    return False


class Judge:
    """Liveness as this host sees it, one session at a time, reading as little as it can.

    A session of another host (store/hosts.py) is judged from the store: ``gone`` when its
    own host proved it gone after its last call, ``alive`` after a recent call, else
    ``unknown``. A session of this host by its processes: no pid, ``unknown``; a pid without a
    key, whether that pid exists; a key carried by the recorded pid or one of its children,
    ``alive`` (a few reads); otherwise a scan of every process begun after the session's last
    call, unless this host already proved it gone since (``gone_at``), which stands until
    the session's next call. ``scan`` given: every local verdict comes from it (``prune``
    passes a fresh one). ``fresh``: no proof or scan this process made earlier is reused (a
    long-lived process deciding an edit: a harness that exited a moment ago is gone now). ``proved_gone`` collects the sessions a scan found gone whose
    verdict the store does not hold yet, for the caller to record."""

    def __init__(self, here: str, now: float, scan: ProcessScan | None = None, proc: str = "/proc",
                 *, fresh: bool = False) -> None:
        self.here, self.now, self.scan, self.proc, self.fresh = here, now, scan, proc, fresh
        self.proved_gone: list[tuple[str, float]] = []

    def __call__(self, session_id: str, pid: int | None, harness_key: str | None, host: str | None,
                 last_seen: float, gone_at: float | None) -> Liveness:
        if pid is None:
            return "unknown"
        if host != self.here:
            from .hosts import ALIVE_WITHIN_S

            if gone_at is not None and gone_at >= last_seen:
                return "gone"
            return "alive" if self.now - last_seen <= ALIVE_WITHIN_S else "unknown"
        if self.scan is not None:
            found = liveness(pid, harness_key, self.scan)
        elif not harness_key:
            found = "alive" if os.path.exists(f"{self.proc}/{pid}") else "gone"
        elif self._alive(pid, harness_key):
            return "alive"
        elif gone_at is not None and gone_at >= last_seen:
            return "gone"
        else:
            found = liveness(pid, harness_key, recent_scan(self.proc, 0.0 if self.fresh else SCAN_CACHE_S,
                                                            fresh_after=last_seen))
        if found == "gone" and (gone_at is None or gone_at < last_seen):
            self.proved_gone.append((session_id, last_seen))
        return found

    def _alive(self, pid: int, harness_key: str) -> bool:
        cached = (self.proc, pid, harness_key)
        at = None if self.fresh else _proven.get(cached)
        if at is not None and time.monotonic() - at < SCAN_CACHE_S:
            return True
        if not _carries(self.proc, pid, harness_key.lower().encode()):
            return False
        if len(_proven) > 4096:  # sessions come and go: forget the oldest proofs
            _proven.clear()
        _proven[cached] = time.monotonic()
        return True

