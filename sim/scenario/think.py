"""``[workload.think]``: how long an agent waits after an answer before its next call (closed
loop). ``exponential`` (mean), ``fixed`` (always mean_ms), ``zero``, or ``empirical``: a
distribution given by its quantiles (``quantiles_ms``, evenly spaced from the 0th to the 100th
percentile, e.g. what ``sim fit`` measured of real agents), drawn by inverse transform with
log-linear interpolation between neighbours (think times spread over orders of magnitude)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from .tables import ScenarioError, Table, number

ThinkKind = Literal["exponential", "fixed", "zero", "empirical"]
MAX_MS = 600_000.0


@dataclass(frozen=True)
class Think:
    kind: ThinkKind = "exponential"
    mean_ms: float = 20.0
    quantiles_ms: tuple[float, ...] = ()  # empirical: 2 to 101 values, ascending


def read_think(t: Table) -> Think:
    kind = t.choice("kind", Think.kind, ("exponential", "fixed", "zero", "empirical"))
    mean = t.number("mean_ms", Think.mean_ms, 0, MAX_MS)
    raw = t.take("quantiles_ms", [], kinds=(list,))
    t.done()
    where = f"[{t.where}] quantiles_ms"
    values = tuple(number(where, v, 0, MAX_MS) if isinstance(v, int | float) and not isinstance(v, bool) else
                   _bad(where, v) for v in raw)
    if kind == "empirical":
        if not 2 <= len(values) <= 101:
            raise ScenarioError(f"{where}: kind = \"empirical\" needs 2 to 101 quantiles, got {len(values)}")
        if any(b < a for a, b in zip(values, values[1:])):
            raise ScenarioError(f"{where}: must ascend (the 0th to the 100th percentile), got {list(values)}")
        mean = empirical_mean(values)
    elif values:
        raise ScenarioError(f"{where}: only for kind = \"empirical\", not {kind!r}")
    return Think(kind, mean, values)


def _bad(where: str, value: object) -> float:
    raise ScenarioError(f"{where}: {value!r} is not a number of milliseconds")


def between(lo: float, hi: float, f: float) -> float:
    """A point ``f`` (0..1) of the way from ``lo`` to ``hi``: geometric when both are above 0."""
    if lo > 0 and hi > 0:
        return lo * (hi / lo) ** f
    return lo + (hi - lo) * f


def draw_ms(quantiles: tuple[float, ...], u: float) -> float:
    """The think time at the ``u`` (0..1) point of the distribution the quantiles give."""
    x = u * (len(quantiles) - 1)
    i = min(int(x), len(quantiles) - 2)
    return between(quantiles[i], quantiles[i + 1], x - i)


def empirical_mean(quantiles: tuple[float, ...]) -> float:
    """The mean of :func:`draw_ms` over u, by a fine midpoint sum (exact enough for a report)."""
    steps = 2000
    return math.fsum(draw_ms(quantiles, (k + 0.5) / steps) for k in range(steps)) / steps
