"""The ``[faults]`` table of a scenario: which faults the nemesis injects, how often and when.

Parsed as strictly as the rest of the scenario: an unknown key, a wrong type or a value out of
range is a :class:`ScenarioError` naming ``[faults.<kind>]`` and the key. ``docs/simulator.md``
documents every key; ``sim/faults/nemesis.py`` carries the plan out.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal

from .hosts import HostFault, host_faults_to_dict, read_host_faults
from .tables import ScenarioError, Table, number

Kind = Literal["kill", "kill_in_write", "pause_holder", "pause_write", "disk_full", "clock_jump", "garbage_store"]
# Kinds injected at random moments of the run (count or rate), in report order.
TIMED: tuple[Kind, ...] = ("kill", "kill_in_write", "pause_holder", "pause_write", "disk_full")
KINDS: tuple[Kind, ...] = (*TIMED, "clock_jump", "garbage_store")
# Kinds that act inside the agent's own store (a self-stop inside its transaction, its
# clock, its file size limit): the direct driver only.
DIRECT_ONLY = frozenset({"kill_in_write", "pause_write", "disk_full", "clock_jump"})
DAMAGE = ("truncate", "garbage")
# The kind-specific duration key and its meaning, for kinds that have one.
HOLD_KEYS = {"pause_holder": "extra_s", "pause_write": "hold_s", "disk_full": "hold_s"}
HOLD_DEFAULT = {"pause_holder": 1.0, "pause_write": 2.0, "disk_full": 1.5}


@dataclass(frozen=True)
class Timed:
    """One kind injected at random moments: ``count`` of them at uniform random times, or
    Poisson arrivals at ``rate_per_s``, inside ``window_s`` (seconds from the start signal)."""

    count: int = 0
    rate_per_s: float = 0.0
    window_s: tuple[float, float] | None = None  # None: the [faults] window
    hold_s: float = 0.0  # pause_write, disk_full: how long; pause_holder: beyond the longest TTL


@dataclass(frozen=True)
class Faults:
    window_s: tuple[float, float] | None = None  # None: from 10% to 85% of the run
    timed: tuple[tuple[str, Timed], ...] = ()
    clock_jumps_s: tuple[float, ...] = ()
    clock_window_s: tuple[float, float] | None = None  # None: the [faults] window
    garbage_store: tuple[str, ...] = ()
    hosts: tuple[tuple[str, HostFault], ...] = ()  # partition, kill_host, pg_kill, pg_pause (sim/scenario/hosts.py)

    def __bool__(self) -> bool:
        return bool(self.timed or self.clock_jumps_s or self.garbage_store or self.hosts)

    def kinds(self) -> list[str]:
        """The kinds this plan injects, in report order."""
        out = [k for k, _ in self.timed]
        out += (["clock_jump"] if self.clock_jumps_s else []) + (["garbage_store"] if self.garbage_store else [])
        return out + [k for k, _ in self.hosts]

    def agent_kinds(self) -> bool:
        """Whether any fault acts on agents or the store file (the agent nemesis's part)."""
        return bool(self.timed or self.clock_jumps_s or self.garbage_store)

    def get(self, kind: str) -> Timed | None:
        return dict(self.timed).get(kind)

    def window(self, duration_s: float) -> tuple[float, float]:
        return self.window_s or (0.1 * duration_s, 0.85 * duration_s)


def _window(t: Table, key: str) -> tuple[float, float] | None:
    value = t.take(key, None, kinds=(list,))
    if value is None:
        return None
    if len(value) != 2:
        raise ScenarioError(f"[{t.where}] {key}: must be [from, to] in seconds from the start, got {value!r}")
    lo, hi = (number(f"[{t.where}] {key}", v, 0, 86_400) if isinstance(v, int | float) and not isinstance(v, bool)
              else _not_number(t, key, v) for v in value)
    if lo >= hi:
        raise ScenarioError(f"[{t.where}] {key}: from ({lo:g}) must be before to ({hi:g})")
    return lo, hi


def _not_number(t: Table, key: str, v: Any) -> float:
    raise ScenarioError(f"[{t.where}] {key}: must hold numbers, got {v!r}")


def _timed(t: Table, kind: str) -> Timed:
    count = t.integer("count", 0, 0, 1000)
    rate = t.number("rate_per_s", 0.0, 0, 100)
    if count and rate:
        raise ScenarioError(f"[{t.where}] count and rate_per_s: give one of them, not both")
    if not count and not rate:
        raise ScenarioError(f"[{t.where}] needs count (how many) or rate_per_s (how often)")
    hold = t.number(HOLD_KEYS[kind], HOLD_DEFAULT[kind], 0.05, 600) if kind in HOLD_KEYS else 0.0
    return Timed(count, rate, _window(t, "window_s"), hold)


def read(t: Table) -> Faults:
    """``[faults]``; an absent table is no faults at all."""
    window = _window(t, "window_s")
    timed = []
    for kind in TIMED:
        if kind in t.data:
            sub = t.sub(kind)
            timed.append((kind, _timed(sub, kind)))
            sub.done()
    jumps: tuple[float, ...] = ()
    clock_window = None
    if "clock_jump" in t.data:
        sub = t.sub("clock_jump")
        raw = sub.take("jumps_s", ..., kinds=(list,))
        jumps = tuple(number(f"[{sub.where}] jumps_s", v, -3600, 3600) if isinstance(v, int | float)
                      and not isinstance(v, bool) else _not_number(sub, "jumps_s", v) for v in raw)
        if not jumps or any(j == 0 for j in jumps):
            raise ScenarioError(f"[{sub.where}] jumps_s: needs at least one jump, none of them 0, got {raw!r}")
        clock_window = _window(sub, "window_s")
        sub.done()
    damage: tuple[str, ...] = ()
    if "garbage_store" in t.data:
        sub = t.sub("garbage_store")
        damage = tuple(sub.take("damage", list(DAMAGE), kinds=(list,)))
        if not damage or len(set(damage)) != len(damage) or any(d not in DAMAGE for d in damage):
            raise ScenarioError(f"[{sub.where}] damage: a list of distinct values among {', '.join(DAMAGE)}, "
                                f"got {list(damage)!r}")
        sub.done()
    host_faults = read_host_faults(t, _window)
    t.done()
    return Faults(window, tuple(timed), jumps, clock_window, damage, host_faults)


def check_fit(faults: Faults, *, duration_s: float, driver: str, busy_timeout_s: float) -> None:
    """What depends on ``[run]``: windows inside the run, the driver, the bounded wait."""
    if not faults:
        return
    for kind in faults.kinds():
        if kind in DIRECT_ONLY and driver != "direct":
            raise ScenarioError(f"[faults.{kind}] needs driver = \"direct\" (it acts inside the agent's own store), "
                                f"not {driver!r}")
    windows = [("faults", faults.window_s), ("faults.clock_jump", faults.clock_window_s)]
    windows += [(f"faults.{k}", s.window_s) for k, s in faults.timed]
    for where, w in windows:
        if w is not None and w[1] > duration_s:
            raise ScenarioError(f"[{where}] window_s: ends at {w[1]:g} s, after the run's {duration_s:g} s")
    pause = faults.get("pause_write")
    if pause is not None and pause.hold_s <= busy_timeout_s:
        raise ScenarioError(f"[faults.pause_write] hold_s: must exceed [run] busy_timeout_s ({busy_timeout_s:g}), "
                            f"or no writer ever waits it out; got {pause.hold_s:g}")


def to_dict(faults: Faults) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if faults.window_s:
        out["window_s"] = list(faults.window_s)
    for kind, spec in faults.timed:
        d: dict[str, Any] = {"count": spec.count} if spec.count else {"rate_per_s": spec.rate_per_s}
        if spec.window_s:
            d["window_s"] = list(spec.window_s)
        if kind in HOLD_KEYS:
            d[HOLD_KEYS[kind]] = spec.hold_s
        out[kind] = d
    if faults.clock_jumps_s:
        out["clock_jump"] = {"jumps_s": list(faults.clock_jumps_s)}
        if faults.clock_window_s:
            out["clock_jump"]["window_s"] = list(faults.clock_window_s)
    if faults.garbage_store:
        out["garbage_store"] = {"damage": list(faults.garbage_store)}
    out.update(host_faults_to_dict(faults.hosts))
    return out


@dataclass
class Planned:
    """One fault the nemesis is to inject, at a monotonic time."""

    at_ns: int
    kind: str
    value: float = 0.0  # clock_jump: the shift
    attempt: int = 1


def schedule(faults: Faults, duration_s: float, start_ns: int, rng: random.Random) -> list[Planned]:
    """When each fault is due: a timed kind's ``count`` at uniform random moments of its
    window, or Poisson arrivals at its ``rate_per_s``; the clock jumps evenly spaced over
    their window, in order."""
    lo, hi = faults.window(duration_s)
    out = []
    for kind, spec in faults.timed:
        a, b = spec.window_s or (lo, hi)
        if spec.count:
            times = sorted(rng.uniform(a, b) for _ in range(spec.count))
        else:
            times, t = [], a
            while (t := t + rng.expovariate(spec.rate_per_s)) < b:
                times.append(t)
        out += [Planned(start_ns + int(t * 1e9), kind) for t in times]
    n = len(faults.clock_jumps_s)
    a, b = faults.clock_window_s or (lo, hi)
    for i, jump in enumerate(faults.clock_jumps_s):
        out.append(Planned(start_ns + int((a + (i + 1) * (b - a) / (n + 1)) * 1e9), "clock_jump", jump))
    return sorted(out, key=lambda p: p.at_ns)
