"""The agent's side of fault injection: the moments only the agent itself can choose.

The runner decides *whether* a fault happens and delivers the signals; but "inside a write
transaction" and "right before an edit, holding the lease" are moments the runner cannot see
from outside. So the runner arms a one-shot self-stop with a control line on the agent's
stdin, and the agent, on reaching that moment, sends itself a real ``SIGSTOP``; the runner
sees the stopped state in ``/proc`` and then continues it (``SIGCONT``) or kills it
(``SIGKILL``). Every arm carries a deadline (monotonic ns) after which the agent no longer
stops: nobody would be watching to continue it.

Control lines (``fault <what> <deadline_ns>``):

- ``stop-in-write``: stop inside the next write transaction, after its statements, before
  its COMMIT: SQLite's write lock is held and the changes are not yet committed;
- ``stop-before-edit``: stop right before the next edit of a hot path, after deciding to
  make it under a live lease; on waking, make that edit with the token it had.

The stdin reader runs in its own thread, so a control line arrives while the agent works;
the runner's other lines (``go``, ``drain``) are handed to the main thread in order.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any, TextIO


class Saboteur:
    def __init__(self, hot_paths: tuple[str, ...]) -> None:
        self.hot_paths = frozenset(hot_paths)
        self._until: dict[str, int] = {}  # armed moment -> deadline (monotonic ns)
        self._lock = threading.Lock()

    def arm(self, what: str, deadline_ns: int) -> None:
        if what not in ("stop-in-write", "stop-before-edit"):
            raise ValueError(f"unknown fault control {what!r}")
        with self._lock:
            self._until[what] = deadline_ns

    def disarm(self) -> None:
        with self._lock:
            self._until.clear()

    def _take(self, what: str) -> bool:
        """Is ``what`` armed and still in time? Disarms it (one shot)."""
        with self._lock:
            deadline = self._until.pop(what, 0)
        return time.monotonic_ns() < deadline

    @staticmethod
    def _stop() -> None:
        os.kill(os.getpid(), signal.SIGSTOP)  # the whole process stops here until SIGCONT

    def before_edit(self, path: str) -> None:
        if path in self.hot_paths and self._until.get("stop-before-edit") and self._take("stop-before-edit"):
            self._stop()

    def install(self, store: Any) -> None:
        """Wrap the store's write transactions so an armed ``stop-in-write`` stops there. A
        store without SQLite's ``db.write`` (another backend) is left alone."""
        db = getattr(store, "db", None)
        original = getattr(db, "write", None)
        if original is None:
            return

        @contextlib.contextmanager
        def write() -> Iterator[Any]:
            with original() as tx:
                yield tx
                if self._until.get("stop-in-write") and self._take("stop-in-write"):
                    self._stop()

        db.write = write


class Control:
    """The agent's stdin: ``fault ...`` lines go to the saboteur as they arrive, every other
    line waits for :meth:`line`."""

    def __init__(self, stream: TextIO, saboteur: Saboteur) -> None:
        self.saboteur = saboteur
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: TextIO) -> None:
        for raw in stream:
            words = raw.split()
            if words[:1] == ["fault"]:
                if words[1:2] == ["disarm"]:
                    self.saboteur.disarm()
                elif len(words) == 3:
                    self.saboteur.arm(words[1], int(words[2]))
                continue
            self._lines.put(raw)
        self._lines.put(None)

    def line(self) -> list[str]:
        raw = self._lines.get()
        if raw is None:
            raise SystemExit(3)  # the runner is gone
        return raw.split()
