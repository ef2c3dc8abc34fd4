"""One clock for every process of a run, and store times put back on the host's clock.

The nemesis jumps the store's clock forward and backward (``[faults.clock_jump]``). A real
clock step reaches every process at one instant, so the offset lives in one small file that
every agent's store reads on each ``now()``: :class:`SharedClock`, an injectable
``agents_room.store.Clock`` whose ``shift`` writes that file. The nemesis shifts it while it
holds SQLite's write lock, right after the store's own sweep of expired leases at the old
time. Every transaction reads its time after taking the write lock, so each jump is one point
in commit order: events before it carry the old offset, events after it the new one. The
nemesis records that point as the first ``seq`` after the jump.

(The sweep first: without it a lease whose time ran out just before a backward jump, and that
nobody swept yet, would be live again afterwards by the store's rule. That is not a double
grant, but no single expiry on the host's clock describes it.)

The checker compares event times with the agents' wall clock (the host's), so :func:`retime`
moves every event's ``at``, and every lease expiry in the events and in the history, back
onto the host clock, exactly, from the recorded jumps. A lease's expiry on the host clock is
the first moment after its grant at which the shared clock reaches it: what the store and
its holder both go by.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agents_room.store import Clock

_OFFSET = struct.Struct("<d")


class SharedClock(Clock):
    """Unix seconds plus an offset kept in ``path`` (8 bytes, mapped shared), so a shift is
    seen by every process that maps the same file."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = str(path)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < _OFFSET.size:
                os.ftruncate(fd, _OFFSET.size)
            self._map = mmap.mmap(fd, _OFFSET.size)
        finally:
            os.close(fd)

    def offset(self) -> float:
        return _OFFSET.unpack_from(self._map, 0)[0]

    def now(self) -> float:
        return time.time() + self.offset()

    def shift(self, seconds: float) -> None:
        _OFFSET.pack_into(self._map, 0, self.offset() + seconds)


@dataclass(frozen=True)
class Jump:
    boundary_seq: int  # the first event seq after the jump
    wall: float  # the host time of the jump
    before: float  # offset before
    after: float  # offset after


def jump(store: Any, clock: SharedClock, seconds: float) -> Jump:
    """Jump ``clock`` (the one ``store`` and every agent's store read) by ``seconds`` inside a
    write transaction, after the store's own sweep of expired leases at the old time. Raises
    ``StoreBusy`` when the write lock is not had in time (nothing changed then)."""
    from agents_room.store import leases

    with store.db.write() as tx:
        leases.sweep(tx)
        last = tx.scalar("SELECT coalesce(max(seq), 0) FROM events")
        before, wall = clock.offset(), time.time()
        clock.shift(seconds)
    return Jump(last + 1, wall, before, before + seconds)


def jumps_from(faults: list[dict[str, Any]]) -> list[Jump]:
    """The clock jumps the nemesis recorded in ``samples.jsonl``."""
    out = [Jump(int(f["boundary_seq"]), float(f["wall"]), float(f["offset_before"]), float(f["offset_after"]))
           for f in faults if f.get("fault") == "clock_jump" and f.get("boundary_seq") is not None]
    return sorted(out, key=lambda j: j.boundary_seq)


class Timeline:
    """The offset as a step function of commit order and of host time."""

    def __init__(self, jumps: list[Jump]) -> None:
        self.seqs = [j.boundary_seq for j in jumps]
        self.starts = [float("-inf")] + [j.wall for j in jumps]
        self.offsets = [jumps[0].before if jumps else 0.0] + [j.after for j in jumps]

    def offset_at_seq(self, seq: int) -> float:
        return self.offsets[bisect.bisect_right(self.seqs, seq)]

    def expiry(self, expires_at: float, since: float) -> float:
        """The first host time at or after ``since`` when the shared clock reaches ``expires_at``."""
        k = max(0, bisect.bisect_right(self.starts, since) - 1)
        for i in range(k, len(self.offsets)):
            end = self.starts[i + 1] if i + 1 < len(self.starts) else float("inf")
            at = max(since, self.starts[i], expires_at - self.offsets[i])
            if at < end:
                return at
        return expires_at - self.offsets[-1]


def retime(events: list[Any], records: list[dict[str, Any]],
           jumps: list[Jump]) -> tuple[list[Any], list[dict[str, Any]]]:
    """Events and history records with every store time on the host clock. Records are
    copied only where they change; the history on disk keeps the store's own times."""
    if not jumps:
        return events, records
    line = Timeline(jumps)
    expiry: dict[int, float] = {}  # token -> host expiry
    out_events = []
    for ev in events:
        at = ev.at - line.offset_at_seq(ev.seq)
        # the store's own times are kept beside (``store_at``, ``store_expires_at``): a TTL is
        # a span of the store's clock, which the checker's oracle compares with the client's
        payload = {**ev.payload, "store_at": ev.at}
        if "expires_at" in payload and isinstance(payload.get("token"), int):
            token = payload["token"]
            if ev.kind in ("lease_grant", "lease_renew"):
                expiry[token] = line.expiry(float(payload["expires_at"]), at)
            if token in expiry:
                payload = {**payload, "expires_at": expiry[token], "store_expires_at": payload["expires_at"]}
        elif ev.kind == "send" and isinstance(payload.get("expires_at"), int | float):
            payload = {**payload, "expires_at": line.expiry(float(payload["expires_at"]), at),
                       "store_expires_at": payload["expires_at"]}
        out_events.append(replace(ev, at=at, payload=payload))
    out_records = []
    for r in records:
        value = r.get("value")
        if (r.get("type") == "ok" and r.get("f") in ("lease_claim", "lease_renew") and isinstance(value, dict)
                and value.get("token") in expiry):
            r = {**r, "value": {**value, "expires_at": expiry[value["token"]]}}
        out_records.append(r)
    return out_events, out_records
