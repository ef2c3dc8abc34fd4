"""Which states a read may have seen: commit times bounded by the events' ``at`` and by the
completion of the ops that caused them (commits come in ``seq`` order)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from .operation import Op

@dataclass
class Commits:
    """When each event may have committed: no earlier than its ``at`` (the transaction's start)
    and no later than the completion of the op that caused it, or of any later event's op
    (commits come in seq order). A read's snapshot may fall anywhere in its window, so a state
    is possible for a read if it may have been committed and not yet replaced inside it."""

    seqs: list[int]
    earliest: list[float]  # prefix max of at
    latest: list[float]  # suffix min of the owning ops' completions
    cache: dict[int, tuple[list[float], list[float]]] = field(default_factory=dict)

    @classmethod
    def of(cls, events: list[Any], owner: dict[int, Op], slack: float) -> Commits:
        seqs = [e.seq for e in events]
        earliest, latest, top = [], [0.0] * len(events), float("-inf")
        for e in events:
            top = max(top, e.at)
            earliest.append(top)
        low = float("inf")
        for i in range(len(events) - 1, -1, -1):
            op = owner.get(events[i].seq)
            if op is not None and op.end is not None:
                low = min(low, op.end + slack)
            latest[i] = max(low, earliest[i])
        return cls(seqs, earliest, latest)

    def span(self, seq: int) -> tuple[float, float]:
        i = bisect.bisect_left(self.seqs, seq)
        return self.earliest[i], self.latest[i]


def window(timeline: list[tuple[int, Any]], lo: float, hi: float, empty: Any,
           commits: Commits) -> list[tuple[Any, float, float]]:
    """The states a timeline (``(seq, state)`` in seq order) may have shown a read whose
    snapshot fell in [lo, hi], each with the stretch of the window it may have held:
    ``(state, from, to)``. Before the first entry the state is ``empty``."""
    cached = commits.cache.get(id(timeline))
    if cached is None or len(cached[0]) != len(timeline):
        spans = [commits.span(seq) for seq, _ in timeline]
        cached = commits.cache[id(timeline)] = ([a for a, _ in spans], [b for _, b in spans])
    earliest, latest = cached
    i = bisect.bisect_left(latest, lo)  # entries before i surely committed before lo
    out = []
    state, start = (timeline[i - 1][1] if i else empty), lo
    while True:
        nxt_at = earliest[i] if i < len(timeline) else float("inf")
        nxt_latest = latest[i] if i < len(timeline) else float("inf")
        out.append((state, start, max(start, min(hi, nxt_latest))))
        if i >= len(timeline) or nxt_at > hi:
            return out
        state, start = timeline[i][1], max(lo, nxt_at)
        i += 1
