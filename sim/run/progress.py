"""Live progress while a run goes: elapsed, operations done, errors, current throughput.

Counting is done by tailing the agents' history files (new bytes only, counting the
completion markers), so agents report nothing extra and the runner never parses JSON on
the hot path.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from ..scenario.scenario import Scenario

_MARKS = {"ok": b'"type":"ok"', "fail": b'"type":"fail"', "info": b'"type":"info"', "busy": b'"error":"store_busy"'}


class Progress:
    def __init__(self, folder: Path, scenario: Scenario, *, live: bool, console: Console | None = None) -> None:
        self.folder = folder
        self.scn = scenario
        self.console = console or Console(stderr=True)
        self.live_enabled = live and self.console.is_terminal
        self.offsets: dict[Path, int] = {}
        self.totals = dict.fromkeys(_MARKS, 0)
        self.last: tuple[float, int] | None = None
        self.rate = 0.0
        self.elapsed = 0.0
        self.what = ""
        self.ready = 0
        self._live: Live | None = None

    def poll(self) -> dict[str, int]:
        """Read what the agents appended since the last poll; the running totals."""
        for path in self.folder.glob("p*.jsonl"):
            start = self.offsets.get(path, 0)
            with open(path, "rb") as fh:
                fh.seek(start)
                chunk = fh.read()
            end = chunk.rfind(b"\n") + 1  # a line still being written waits for the next poll
            if end:
                for key, mark in _MARKS.items():
                    self.totals[key] += chunk.count(mark, 0, end)
                self.offsets[path] = start + end
        done = self.totals["ok"] + self.totals["fail"] + self.totals["info"]
        now = time.monotonic()
        if self.last is not None and now > self.last[0]:
            self.rate = (done - self.last[1]) / (now - self.last[0])
        self.last = (now, done)
        return {"ops": done, "ok": self.totals["ok"], "fail": self.totals["fail"], "info": self.totals["info"],
                "store_busy": self.totals["busy"]}

    def _table(self) -> Table:
        t = Table.grid(padding=(0, 2))
        done = self.totals["ok"] + self.totals["fail"] + self.totals["info"]
        t.add_row(f"[bold]{self.scn.name}[/]", self.what,
                  f"{self.elapsed:5.1f} / {self.scn.run.duration_s:g} s" if self.what == "running" else
                  f"{self.ready}/{self.scn.agents} ready" if self.what.startswith("starting") else "")
        t.add_row("ops", f"{done:,}", f"{self.rate:,.0f} ops/s now")
        t.add_row("errors", f"fail {self.totals['fail']:,}  info {self.totals['info']:,}",
                  f"store_busy {self.totals['busy']:,}")
        return t

    @contextlib.contextmanager
    def show(self) -> Iterator[None]:
        if not self.live_enabled:
            yield
            return
        with Live(self._table(), console=self.console, refresh_per_second=4, transient=True) as live:
            self._live = live
            try:
                yield
            finally:
                self._live = None

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._table())

    def phase(self, what: str) -> None:
        self.what = what
        if not self.live_enabled:
            self.console.print(f"[dim]{self.scn.name}: {what}[/]")
        self._refresh()

    def starting(self, ready: int) -> None:
        if ready != self.ready:
            self.ready = ready
            self._refresh()

    def update(self, sample: dict[str, Any], duration_s: float) -> None:
        self.elapsed = min(sample["t"], duration_s)
        self._refresh()
