"""The store's one source of time, injectable so tests and fault injection can move it."""

from __future__ import annotations

import time


class Clock:
    """Unix seconds. ``fixed`` pins the time (tests); ``shift`` jumps it either way (faults)."""

    def __init__(self, fixed: float | None = None) -> None:
        self._fixed = fixed
        self._offset = 0.0

    def now(self) -> float:
        base = time.time() if self._fixed is None else self._fixed
        return base + self._offset

    @property
    def fixed(self) -> bool:
        """Pinned by a test. An unfixed clock on PostgreSQL means the server's clock."""
        return self._fixed is not None

    def shift(self, seconds: float) -> None:
        """Jump the clock by ``seconds`` (negative jumps backward)."""
        self._offset += seconds


def iso(t: float) -> str:
    """A moment as every text and message shows it: ISO 8601 in UTC, to the second
    (``2026-12-03T13:20:00Z``). Structured answers keep Unix seconds for programs
    (docs/decisions.md, "Times")."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
