"""The ``[hosts]`` table (agents on several simulated hosts, one PostgreSQL between them) and
the host faults of ``[faults]`` (``partition``, ``kill_host``, ``pg_kill``, ``pg_pause``).

``[hosts]``: ``count`` hosts; ``agents_per_host`` (optional) sets the run's agents to
``count * agents_per_host``, spread over the repositories as ``--agents`` does, else the
repositories' agents are dealt round the hosts (agent ``n`` on host ``n % count``);
``drivers`` gives each host its driver in turn (default: ``[run] driver`` for all; ``http``:
one ``agents-room serve --http`` per host and repository, with a token, as a team deploys it);
``clock_skew_s`` each host's clock offset in turn (what its agents judge their leases by; the
store goes by the database server's clock).

Host faults take ``count`` and ``window_s`` like the timed kinds; ``partition`` and
``pg_pause`` a ``hold_s`` (a partition's default: the longest lease TTL plus 2 s, so every
lease the cut-off host held runs out meanwhile), ``partition`` and ``kill_host`` a ``host``
(default: a random host each time); ``partition`` a ``stale_holder`` (default false): the
host's agents are armed to stop right before their next edit of a hot file under a live
lease, the host is cut once one has stopped (or after 4 s), and that agent is continued after
the heal: it makes the edit with its old token, a stale-holder write after the heal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .tables import ScenarioError, Table, number

HOST_KINDS = ("partition", "kill_host", "pg_kill", "pg_pause")
DRIVERS = ("direct", "mcp", "http")


@dataclass(frozen=True)
class Hosts:
    count: int = 2
    agents_per_host: int | None = None
    drivers: tuple[str, ...] = ()  # empty: [run] driver for every host
    clock_skew_s: tuple[float, ...] = ()  # empty: no skew

    def driver(self, host: int, default: str) -> str:
        return self.drivers[host % len(self.drivers)] if self.drivers else default

    def skew(self, host: int) -> float:
        return self.clock_skew_s[host % len(self.clock_skew_s)] if self.clock_skew_s else 0.0


@dataclass(frozen=True)
class HostFault:
    count: int = 1
    window_s: tuple[float, float] | None = None
    hold_s: float = 0.0  # partition: 0 = the longest lease TTL + 2 s; pg_pause: default 2
    host: int | None = None
    # partition: one of the host's agents stopped right before an edit under a live lease, the
    # host cut with it stopped, the agent continued after the heal: it edits with its old token
    stale_holder: bool = False


def read_hosts(t: Table) -> Hosts | None:
    """``[hosts]``; None when the scenario has none (one host, the default)."""
    if not t.data:
        return None
    drivers = tuple(t.take("drivers", [], kinds=(list,)))
    for d in drivers:
        if d not in DRIVERS:
            raise ScenarioError(f"[hosts] drivers: each must be one of {', '.join(DRIVERS)}, got {d!r}")
    skews = t.take("clock_skew_s", [], kinds=(list,))
    h = Hosts(
        count=t.integer("count", Hosts.count, 1, 64),
        agents_per_host=t.integer("agents_per_host", None, 1, 128),
        drivers=drivers,
        clock_skew_s=tuple(number("[hosts] clock_skew_s", v, -3600, 3600) if isinstance(v, int | float)
                           and not isinstance(v, bool) else _bad(v) for v in skews),
    )
    t.done()
    return h


def _bad(v: Any) -> float:
    raise ScenarioError(f"[hosts] clock_skew_s: must hold numbers of seconds, got {v!r}")


def read_host_faults(t: Table, window: Any) -> tuple[tuple[str, HostFault], ...]:
    """The host kinds of ``[faults]`` (popped from ``t``; the rest is faultplan's)."""
    out = []
    for kind in HOST_KINDS:
        if kind not in t.data:
            continue
        sub = t.sub(kind)
        hold_default = 2.0 if kind == "pg_pause" else 0.0
        f = HostFault(
            count=sub.integer("count", 1, 1, 100),
            window_s=window(sub, "window_s"),
            hold_s=sub.number("hold_s", hold_default, 0, 600) if kind in ("partition", "pg_pause") else 0.0,
            host=sub.integer("host", None, 0, 63) if kind in ("partition", "kill_host") else None,
            stale_holder=sub.take("stale_holder", False, kinds=(bool,)) if kind == "partition" else False,
        )
        sub.done()
        out.append((kind, f))
    return tuple(out)


def host_faults_to_dict(faults: tuple[tuple[str, HostFault], ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, f in faults:
        d: dict[str, Any] = {"count": f.count}
        if f.window_s:
            d["window_s"] = list(f.window_s)
        if kind in ("partition", "pg_pause"):
            d["hold_s"] = f.hold_s
        if f.host is not None:
            d["host"] = f.host
        if f.stale_holder:
            d["stale_holder"] = True
        out[kind] = d
    return out


def hosts_to_dict(h: Hosts | None) -> dict[str, Any] | None:
    if h is None:
        return None
    d: dict[str, Any] = {"count": h.count}
    if h.agents_per_host is not None:
        d["agents_per_host"] = h.agents_per_host
    if h.drivers:
        d["drivers"] = list(h.drivers)
    if h.clock_skew_s:
        d["clock_skew_s"] = list(h.clock_skew_s)
    return d


def check_hosts(h: Hosts | None, faults: tuple[tuple[str, HostFault], ...], other_kinds: list[str],
                duration_s: float) -> None:
    if faults and h is None:
        raise ScenarioError(f"[faults.{faults[0][0]}] needs a [hosts] table (it acts on simulated hosts)")
    if h is None:
        return
    for kind, f in faults:
        if f.host is not None and f.host >= h.count:
            raise ScenarioError(f"[faults.{kind}] host: {f.host} is not one of the {h.count} hosts (0..{h.count - 1})")
        if f.window_s and f.window_s[1] > duration_s:
            raise ScenarioError(f"[faults.{kind}] window_s: ends at {f.window_s[1]:g} s, after the run's "
                                f"{duration_s:g} s")
    inside = [k for k in other_kinds if k in ("kill_in_write", "pause_write", "disk_full", "clock_jump",
                                              "garbage_store")]
    if inside:
        raise ScenarioError(f"[faults.{inside[0]}] acts on a SQLite store file; a [hosts] run's store is PostgreSQL")
