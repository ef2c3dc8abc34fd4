"""Quantiles, mean and spread of think times and durations, from the call counts' gap
histogram (store/callcounts.py buckets) or from a plain sample."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from agents_room.store.callcounts import bucket_ms


def evenly(n: int) -> list[float]:
    """``n`` probabilities from 0 to 1, evenly spaced."""
    return [i / (n - 1) for i in range(n)]


def _inside(lo: float, hi: float, f: float) -> float:
    return lo * (hi / lo) ** f if lo > 0 else hi * f


def _bounds(b: int) -> tuple[float, float]:
    lo, hi = bucket_ms(b)
    return lo, hi


def histogram_quantiles(hist: Mapping[int, int], probs: Sequence[float]) -> list[float]:
    """Milliseconds at each probability, interpolated inside a bucket on a log scale (the
    buckets are a quarter octave wide, so that is within 19% of the truth)."""
    total = sum(hist.values())
    if not total:
        return []
    items = sorted((b, n) for b, n in hist.items() if n > 0)
    out = []
    for p in probs:
        want, seen = p * total, 0
        for b, n in items:
            if seen + n >= want or b == items[-1][0]:
                lo, hi = _bounds(b)
                out.append(_inside(lo, hi, min(1.0, max(0.0, (want - seen) / n))))
                break
            seen += n
    return out


def histogram_moments(hist: Mapping[int, int]) -> tuple[float, float]:
    """Mean (ms) and coefficient of variation of the gaps, each bucket at its geometric middle."""
    total = sum(hist.values())
    if not total:
        return 0.0, 0.0
    mids = {b: (math.sqrt(lo * hi) if lo > 0 else hi / 2) for b in hist for lo, hi in [_bounds(b)]}
    mean = sum(n * mids[b] for b, n in hist.items()) / total
    var = sum(n * (mids[b] - mean) ** 2 for b, n in hist.items()) / total
    return mean, (math.sqrt(var) / mean if mean > 0 else 0.0)


def lognormal(hist: Mapping[int, int]) -> tuple[float, float]:
    """The lognormal (mu, sigma of ln ms) with the histogram's log mean and log spread."""
    total = sum(n for b, n in hist.items() if b > 0)
    if not total:
        return 0.0, 0.0
    logs = {b: math.log(math.sqrt(lo * hi)) for b in hist if b > 0 for lo, hi in [_bounds(b)]}
    mu = sum(n * logs[b] for b, n in hist.items() if b > 0) / total
    var = sum(n * (logs[b] - mu) ** 2 for b, n in hist.items() if b > 0) / total
    return mu, math.sqrt(var)


def quantile(values: Sequence[float], p: float) -> float | None:
    """The ``p`` quantile of a sample (linear between order statistics); None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    x = p * (len(ordered) - 1)
    i = min(int(x), len(ordered) - 2) if len(ordered) > 1 else 0
    if len(ordered) == 1:
        return ordered[0]
    return ordered[i] + (ordered[i + 1] - ordered[i]) * (x - i)
