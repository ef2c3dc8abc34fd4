"""Killing an agent for the nemesis: SIGKILL to the agent and its children, a replacement
process with a new harness key in its place, and the dead session pruned.

The prune is what ``agents-room prune --quiet-s <longest lease TTL>`` does: it waits until the
session has been quiet that long, so every lease it held has run out by itself (each was
granted or renewed by a call that touched the session), and the prune releases nothing early
that its dead holder could still believe it holds. Until the prune, the dead session's unread
mail would be undecidable for the checker (a recipient that neither drained nor left).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .control import AgentHandle, RunControl

PRUNE_GIVE_UP_S = 60


def process_state(pid: int) -> str:
    """The one-letter state of ``/proc/<pid>/stat`` (``T``: stopped), ``""`` if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def children(pid: int) -> list[int]:
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            out += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    except OSError:
        pass
    return out


class Reaper:
    def __init__(self, runner: RunControl, store: Callable[[], Any]) -> None:
        self.runner = runner
        self.store = store  # the nemesis's own store (its clock is the run's clock)
        self._keys: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def kill(self, proc: AgentHandle) -> AgentHandle:
        """SIGKILL ``proc`` (an mcp agent's server too, or it would keep the session alive);
        returns its replacement, already starting."""
        kids = children(proc.popen.pid)
        proc.expected_exit = True
        for pid in (proc.popen.pid, *kids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.popen.wait()
        replacement = self.runner.spawn(proc.no, self.runner.next_generation(proc.no))
        self.runner.agents.append(replacement)
        self.prune_later(proc.harness_key)
        return replacement

    def prune_later(self, harness_key: str) -> None:
        """Prune the session of a killed agent once it has been quiet for the longest TTL."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._prune_loop, daemon=True)
            self._thread.start()
        self._keys.put(harness_key)

    def _prune_loop(self) -> None:
        from agents_room.store import StoreBusy, StoreError

        quiet = self.runner.scn.workload.longest_lease_s()
        while (key := self._keys.get()) is not None:
            deadline = time.monotonic() + PRUNE_GIVE_UP_S
            while time.monotonic() < deadline:
                try:
                    store = self.store()
                    store.prune(quiet)
                    with store.db.read() as tx:
                        left = tx.scalar("SELECT count(*) FROM sessions WHERE harness_key = ? AND left_at IS NULL",
                                         (key,))
                    if not left:
                        break
                except (StoreBusy, StoreError):  # busy, or the database restarting (pg_kill): again
                    pass
                time.sleep(0.2)

    def finish(self) -> None:
        """Every prune done (the runner reads the events next)."""
        if self._thread is not None:
            self._keys.put(None)
            self._thread.join()
            self._thread = None
