"""One cell of ``sim bench``'s table: an operation of one kind of worker at one process count,
over the measured windows (sim/bench/bench.py runs the groups; sim/bench/report.py makes the
table, the ratios and the plot of the cells)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cell:
    """One operation of one kind at one process count, over the measured window."""

    kind: str
    op: str
    procs: int
    window_s: float
    count: int
    per_s: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    jain: float
    fewest: int
    most: int
    errors: dict[str, int]
    # CPU per completed call over the window: the worker processes' (raw, store: the whole
    # operation; serve, bare: the MCP client), and the server processes' (serve, bare).
    cpu_us_per_op: float
    server_cpu_us_per_op: float | None
    rss_kib: list[int] = field(default_factory=list)  # per server process (serve, bare)
    rounds_per_s: list[float] = field(default_factory=list)  # throughput of each window, in order


def cell_of(kind: str, op: str, procs: int, window_s: float, done: list[dict[str, Any]],
            rss: list[int]) -> Cell:
    import numpy as np  # here, not at import: `sim`'s every start-up builds the bench's parser

    from ..report.stats import jain

    per_proc = [len(d["lat_us"]) for d in done]
    lat = np.concatenate([np.asarray(d["lat_us"], dtype=float) for d in done]) / 1000 if done else np.zeros(0)
    errors: dict[str, int] = {}
    for d in done:
        for code, n in d["errors"].items():
            errors[code] = errors.get(code, 0) + n
    if lat.size:
        p50, p99, p999 = (float(x) for x in np.percentile(lat, [50, 99, 99.9]))
        top = float(lat.max())
    else:
        p50 = p99 = p999 = top = float("nan")
    calls = max(int(lat.size), 1)
    cpu = sum(d.get("cpu_s", 0.0) for d in done) / calls * 1e6
    server = sum(d.get("server_cpu_s", 0.0) for d in done) / calls * 1e6 if kind in ("serve", "bare") else None
    return Cell(kind, op, procs, window_s, int(lat.size), lat.size / window_s, p50, p99, p999, top,
                jain(per_proc), min(per_proc, default=0), max(per_proc, default=0), errors, cpu, server, rss)


def combine(kind: str, op: str, procs: int, window_s: float, rounds: list[tuple[list[dict[str, Any]], list[int]]]) -> Cell:
    """One cell from the rounds of a group: each worker's calls over all its windows."""
    done = [{"lat_us": [x for r in rounds for x in r[0][i]["lat_us"]],
             "errors": {k: sum(r[0][i]["errors"].get(k, 0) for r in rounds)
                        for k in {k for r in rounds for k in r[0][i]["errors"]}},
             "cpu_s": sum(r[0][i]["cpu_s"] for r in rounds), "server_cpu_s": sum(r[0][i]["server_cpu_s"] for r in rounds)}
            for i in range(procs)]
    cell = cell_of(kind, op, procs, window_s * len(rounds), done, rounds[-1][1])
    per_round = [sum(len(d["lat_us"]) for d in r[0]) / window_s for r in rounds]
    return dataclasses.replace(cell, rounds_per_s=per_round)
