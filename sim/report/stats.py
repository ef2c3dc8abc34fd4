"""Figures from a run's history: per-operation counts and latency percentiles, fairness
across agents, the store's busy answers, and the same over time bins for the plots.

The per-operation figures are the steady work's. An agent's start-up joins (made before it
says ready, while other agents' interpreters are still starting) are counted in a row of
their own, and the final drain's reads apart: either would otherwise set the tail of
``room_join`` or ``msg_recv`` by something other than the workload.

Latency is completion minus invoke; in an open-loop run it is completion minus the
*intended* start, so a stalled store shows up as latency instead of hiding in the gaps
between operations (coordinated omission).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..check.history import Record, pairs
from ..run.workload import WRITE_OPS

PERCENTILES = (50, 90, 99, 99.9)


@dataclass(frozen=True)
class OpRow:
    f: str
    count: int
    ok: int
    fail: int
    info: int
    per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    errors: dict[str, int]


@dataclass(frozen=True)
class Fairness:
    ops_per_agent: dict[str, int]
    jain: float
    fewest: tuple[str, int]
    most: tuple[str, int]
    longest_wait_ms: float
    longest_wait: str  # which op, agent and when, in words


@dataclass(frozen=True)
class Bins:
    """Per time bin (seconds from the start): completions by operation, latency p50/p99/max
    over all operations, store_busy answers."""

    width_s: float
    starts: list[float]
    counts: dict[str, list[int]]
    p50_ms: list[float | None]
    p99_ms: list[float | None]
    max_ms: list[float | None]
    busy: list[int]


@dataclass(frozen=True)
class Stats:
    duration_s: float
    ops: int
    per_s: float
    ok: int
    fail: int
    info: int
    store_busy: int
    drain_ops: int
    table: list[OpRow]
    all_ops: OpRow
    startup: OpRow  # the start-up joins, out of ``table`` and ``all_ops``
    fairness: Fairness
    bins: Bins
    late: dict[str, Any] = field(default_factory=dict)  # open loop only
    latencies_ms: dict[str, list[float]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("latencies_ms")
        return d

    def row(self, f: str) -> OpRow | None:
        return self.all_ops if f == "all" else next((r for r in self.table if r.f == f), None)


def latency_ms(invoke: Record, done: Record) -> float:
    return (done["time"] - invoke.get("intended", invoke["time"])) / 1e6


def work_starts(history: list[Record]) -> dict[str, int]:
    """Each agent's first ``room_who`` invoke: the call it makes on "go". What an agent
    invoked before it are its start-up joins. Per agent rather than the run's ``start_ns``:
    agents get "go" shortly before ``start_ns`` and work at once; a replacement process
    started mid-run joins after its agent's start, under load, and counts as work."""
    first: dict[str, int] = {}
    for r in history:  # in time order
        if r["type"] == "invoke" and r["f"] == "room_who":
            first.setdefault(r["agent"], r["time"])
    return first


def _row(f: str, lat: np.ndarray, outcomes: Counter, errors: Counter, duration_s: float) -> OpRow:
    if lat.size:
        p50, p90, p99, p999 = (float(x) for x in np.percentile(lat, PERCENTILES))
        top = float(lat.max())
    else:
        p50 = p90 = p99 = p999 = top = 0.0
    count = int(lat.size)
    return OpRow(f, count, outcomes["ok"], outcomes["fail"], outcomes["info"], count / duration_s if duration_s else 0.0,
                 p50, p90, p99, p999, top, dict(errors.most_common()))


def jain(values: list[int]) -> float:
    """Jain's fairness index: 1 when every agent did the same, 1/n when one did everything."""
    x = np.asarray(values, dtype=float)
    if not x.size or not x.any():
        return 1.0
    return float(x.sum() ** 2 / (x.size * (x**2).sum()))


def compute(history: list[Record], start_ns: int, end_ns: int, agents: list[str], *,
            late_ms: float | None = None) -> Stats:
    """Figures over the operations that completed; start-up joins and drain-phase reads are
    counted apart."""
    duration_s = max((end_ns - start_ns) / 1e9, 1e-9)
    lat: dict[str, list[float]] = defaultdict(list)
    outcomes: dict[str, Counter] = defaultdict(Counter)
    errors: dict[str, Counter] = defaultdict(Counter)
    per_agent: Counter = Counter({a: 0 for a in agents})
    done_t: list[float] = []
    done_f: list[str] = []
    done_lat: list[float] = []
    busy_t: list[float] = []
    drain = 0
    startup_lat: list[float] = []
    startup_out: Counter = Counter()
    startup_err: Counter = Counter()
    work_from = work_starts(history)
    longest = (0.0, "none")
    late_n, scheduled, worst_late = 0, 0, 0.0
    for inv, done in pairs(history):
        if done.get("phase") == "drain":
            drain += 1
            continue
        f, ms = inv["f"], latency_ms(inv, done)
        if inv["time"] < work_from.get(inv["agent"], math.inf):  # an agent that never worked: all start-up
            startup_lat.append(ms)
            startup_out[done["type"]] += 1
            if done["error"]:
                startup_err[done["error"]] += 1
            continue
        lat[f].append(ms)
        outcomes[f][done["type"]] += 1
        if done["error"]:
            errors[f][done["error"]] += 1
        if done["error"] == "store_busy":
            busy_t.append((done["time"] - start_ns) / 1e9)
        if start_ns <= done["time"] <= end_ns:
            per_agent[inv["agent"]] += 1
        done_t.append((done["time"] - start_ns) / 1e9)
        done_f.append(f)
        done_lat.append(ms)
        if f in WRITE_OPS and ms > longest[0]:
            at = (inv["time"] - start_ns) / 1e9
            longest = (ms, f"{f} by {inv['agent']} at {at:+.2f} s ({done['type']}{', ' + done['error'] if done['error'] else ''})")
        if "intended" in inv:
            scheduled += 1
            behind = (inv["time"] - inv["intended"]) / 1e6
            worst_late = max(worst_late, behind)
            if late_ms is not None and behind > late_ms:
                late_n += 1
    table = [_row(f, np.asarray(v), outcomes[f], errors[f], duration_s) for f, v in sorted(lat.items())]
    every = np.asarray([x for v in lat.values() for x in v])
    all_out = sum(outcomes.values(), Counter())
    all_err = sum(errors.values(), Counter())
    all_row = _row("all", every, all_out, all_err, duration_s)
    counts = [per_agent[a] for a in agents]
    fair = Fairness(
        ops_per_agent=dict(per_agent), jain=jain(counts),
        fewest=min(per_agent.items(), key=lambda kv: kv[1]) if per_agent else ("", 0),
        most=max(per_agent.items(), key=lambda kv: kv[1]) if per_agent else ("", 0),
        longest_wait_ms=longest[0], longest_wait=longest[1],
    )
    in_window = sum(per_agent.values())
    # One throughput figure: **all**'s ops/s is the headline's (the operations completed within
    # the window, per second of it); its count keeps those that completed after (writer.py says so).
    all_row = dataclasses.replace(all_row, per_s=in_window / duration_s if duration_s else 0.0)
    late = {}
    if scheduled:
        late = {"scheduled": scheduled, "late": late_n, "late_fraction": late_n / scheduled,
                "late_ms": late_ms, "worst_ms": worst_late}
    return Stats(
        duration_s=duration_s, ops=in_window, per_s=in_window / duration_s, ok=all_out["ok"], fail=all_out["fail"],
        info=all_out["info"], store_busy=all_err["store_busy"], drain_ops=drain, table=table, all_ops=all_row,
        startup=_row("start-up", np.asarray(startup_lat), startup_out, startup_err, 0.0),
        fairness=fair, bins=_bins(done_t, done_f, done_lat, busy_t, duration_s), late=late,
        latencies_ms={f: v for f, v in lat.items()},
    )


def _bins(t: list[float], f: list[str], ms: list[float], busy_t: list[float], duration_s: float) -> Bins:
    """About 60 bins over the run; an empty bin's latencies are ``None`` (JSON null)."""
    width = max(0.25, round(duration_s / 60, 2))
    n = max(1, int(np.ceil(duration_s / width)))
    idx = np.floor(np.asarray(t, dtype=float) / width).astype(int)
    keep = (idx >= 0) & (idx < n)
    idx, names, lat = idx[keep], np.asarray(f, dtype=str)[keep], np.asarray(ms, dtype=float)[keep]
    counts = {name: np.bincount(idx[names == name], minlength=n).tolist() for name in sorted(set(names.tolist()))}
    order = np.argsort(idx, kind="stable")
    edges = np.searchsorted(idx[order], np.arange(n + 1))
    p50: list[float | None] = []
    p99: list[float | None] = []
    top: list[float | None] = []
    for b in range(n):
        chunk = lat[order[edges[b]:edges[b + 1]]]
        q50, q99, q100 = (float(x) for x in np.percentile(chunk, (50, 99, 100))) if chunk.size else (None,) * 3
        p50.append(q50)
        p99.append(q99)
        top.append(q100)
    bt = np.floor(np.asarray(busy_t, dtype=float) / width).astype(int)
    busy = np.bincount(bt[(bt >= 0) & (bt < n)], minlength=n).tolist()
    return Bins(width, [i * width for i in range(n)], counts, p50, p99, top, busy)


def lease_intervals(events: list[Any], paths: list[str]) -> dict[str, list[tuple[float, float, str, str, int]]]:
    """From the events: each lease on ``paths`` as (start, end, session, mode, grants), a
    re-claim or renewal extending the holder's interval. Open leases end at their expiry."""
    wanted = set(paths)
    open_: dict[tuple[str, str], list] = {}
    out: dict[str, list[tuple[float, float, str, str, int]]] = {p: [] for p in paths}
    for ev in events:
        if ev.path not in wanted:
            continue
        key = (ev.path, ev.session_id)
        if ev.kind in ("lease_grant", "lease_renew"):
            cur = open_.get(key)
            if cur is None:
                open_[key] = [ev.at, ev.payload.get("expires_at", ev.at), ev.payload.get("mode", "exclusive"), 1]
            else:
                cur[1] = ev.payload.get("expires_at", cur[1])
                cur[2] = ev.payload.get("mode", cur[2])
                cur[3] += 1
        elif ev.kind in ("lease_release", "lease_expire"):
            cur = open_.pop(key, None)
            if cur is not None:
                end = ev.payload.get("expires_at", ev.at) if ev.kind == "lease_expire" else ev.at
                out[ev.path].append((cur[0], end, ev.session_id, cur[2], cur[3]))
    for (path, sid), cur in open_.items():
        out[path].append((cur[0], cur[1], sid, cur[2], cur[3]))
    return out


def hottest_paths(events: list[Any], n: int) -> list[tuple[str, int]]:
    grants = Counter(ev.path for ev in events if ev.kind == "lease_grant")
    return grants.most_common(n)


@dataclass(frozen=True)
class Expectation:
    name: str
    bound: str
    actual: str
    met: bool


def expectations(expect: Any, s: Stats) -> list[Expectation]:
    """The scenario's ``[expect]`` bounds against the figures (zero violations is the
    verdict's business, not a bound here)."""
    out = []
    for f, bound in expect.p99_ms:
        row = s.row(f)
        if row is None or not row.count:
            out.append(Expectation(f"p99 {f}", f"<= {bound:g} ms", "no operations", False))
            continue
        out.append(Expectation(f"p99 {f}", f"<= {bound:g} ms", f"{row.p99_ms:.2f} ms", row.p99_ms <= bound))
    if expect.min_ops_per_s is not None:
        out.append(Expectation("throughput", f">= {expect.min_ops_per_s:g} ops/s", f"{s.per_s:,.0f} ops/s",
                               s.per_s >= expect.min_ops_per_s))
    if expect.min_jain is not None:
        out.append(Expectation("Jain's index", f">= {expect.min_jain:g}", f"{s.fairness.jain:.3f}",
                               s.fairness.jain >= expect.min_jain))
    if expect.max_late_fraction is not None:
        frac = s.late.get("late_fraction", 0.0)
        out.append(Expectation("late operations", f"<= {expect.max_late_fraction:.1%}", f"{frac:.2%}",
                               frac <= expect.max_late_fraction))
    if expect.max_store_busy_fraction is not None:
        frac = s.store_busy / s.all_ops.count if s.all_ops.count else 0.0
        out.append(Expectation("store_busy answers", f"<= {expect.max_store_busy_fraction:.1%}", f"{frac:.2%}",
                               frac <= expect.max_store_busy_fraction))
    return out
