"""Is a session's agent still running? One function, shared by ``room_who`` and ``prune``.

A harness keeps its key (a UUID) in the environment of every process it spawns, across
MCP restarts, which a pid does not survive. So liveness asks the running processes which
keys are in any process's environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

Liveness = Literal["alive", "gone", "unknown"]


@dataclass(frozen=True)
class ProcessScan:
    """One look at the running processes: the pids, and every environment value that could
    be a harness key (UUID-shaped), lowercased."""

    pids: frozenset[int]
    keys: frozenset[str]


def _uuid_shaped(value: bytes) -> bool:
    return len(value) == 36 and value.count(b"-") == 4


def scan_processes(proc: str = "/proc") -> ProcessScan:
    """Read ``/proc/*/environ`` where this user may; processes that vanish or deny are
    skipped (a process we cannot read is not evidence of anything)."""
    pids: set[int] = set()
    keys: set[str] = set()
    try:
        entries = os.listdir(proc)
    except OSError:
        return ProcessScan(frozenset(), frozenset())
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
    return ProcessScan(frozenset(pids), frozenset(keys))


def liveness(pid: int | None, harness_key: str | None, scan: ProcessScan) -> Liveness:
    """``unknown`` when no pid is recorded; else by the harness key when there is one
    (``alive`` if any process carries it); else by the pid."""
    if pid is None:
        return "unknown"
    if harness_key:
        return "alive" if harness_key.lower() in scan.keys else "gone"
    return "alive" if pid in scan.pids else "gone"
