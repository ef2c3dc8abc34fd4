"""Figures per simulated host (``[hosts]`` runs): throughput and latency, ``store_error`` /
``store_busy`` / ``info`` answers, the host faults and the recovery after each (from the
fault's end to the host's first ``ok`` answer), and the stale-holder writes of each host,
those made after a heal of its own partition apart; ``hosts.png`` draws each host's
throughput over time with the fault windows shaded.

Agent ``n`` runs on host ``n % count`` (``sim.hosts.cluster.Hosts.host_of``), so the history
and the scenario are all this needs. Every time here is the one monotonic clock all hosts
share (namespaces share the kernel's clock), so no host's records need moving.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from ..check.history import Record, pairs
from .stats import work_starts

DB_FAULTS = ("pg_kill", "pg_pause")


def host_of(agent: str, count: int) -> str:
    return f"h{int(agent[1:]) % count}"


def _pct(values: list[float], p: float) -> float:
    return float(np.percentile(values, p)) if values else 0.0


def compute(history: list[Record], scenario: Any, start_ns: int, end_ns: int, faults: list[dict[str, Any]],
            stale_writes: list[dict[str, Any]]) -> dict[str, Any]:
    """``report.json``'s ``hosts``: one entry per host, and the host faults with recovery."""
    count = scenario.hosts.count
    names = [f"h{i}" for i in range(count)]
    duration_s = max((end_ns - start_ns) / 1e9, 1e-9)
    work_from = work_starts(history)
    lat: dict[str, list[float]] = defaultdict(list)
    tally: dict[str, dict[str, int]] = {h: defaultdict(int) for h in names}
    ok_times: dict[str, list[int]] = defaultdict(list)
    done_at: dict[str, list[float]] = defaultdict(list)
    agents: dict[str, set[str]] = defaultdict(set)
    session_host: dict[str, str] = {}
    for inv, done in pairs(history):
        h = host_of(inv["agent"], count)
        agents[h].add(inv["agent"])
        if done.get("session"):
            session_host[done["session"]] = h
        if done["type"] == "ok":  # recovery counts any answer: a replacement's join, a drain's read
            ok_times[h].append(done["time"])
        if done.get("phase") == "drain" or inv["time"] < work_from.get(inv["agent"], math.inf):
            continue
        if not start_ns <= done["time"] <= end_ns:
            continue
        t = tally[h]
        t["ops"] += 1
        t[done["type"]] += 1
        if done["error"] in ("store_error", "store_busy"):
            t[done["error"]] += 1
        lat[h].append((done["time"] - inv.get("intended", inv["time"])) / 1e6)
        done_at[h].append((done["time"] - start_ns) / 1e9)
    wall_offset = _wall_offset(history)
    stale_by_host: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for w in stale_writes:
        stale_by_host[session_host.get(w.get("session", ""), "?")].append(w)
    episodes = []
    for f in faults:
        if f.get("fault") not in ("partition", "kill_host", *DB_FAULTS) or not f.get("end"):
            continue
        hit = [f["host"]] if f.get("host") else names
        recovery = {}
        for h in hit:
            after = [t for t in ok_times[h] if t >= f["end"]]  # (completion order: not sorted)
            recovery[h] = round((min(after) - f["end"]) / 1e6, 1) if after else None
        episodes.append({"fault": f["fault"], "hosts": hit, "from_s": round((f["time"] - start_ns) / 1e9, 2),
                         "to_s": round((f["end"] - start_ns) / 1e9, 2),
                         "held_s": round((f["end"] - f["time"]) / 1e9, 2), "recovery_ms": recovery,
                         **({"stale_holder": f["stale_holder"]} if "stale_holder" in f else {})})
    heals = {h: [f["end"] / 1e9 for f in faults if f.get("fault") == "partition" and f.get("host") == h
                 and f.get("end")] for h in names}
    rows = []
    for i, h in enumerate(names):
        t = tally[h]
        mine = stale_by_host.get(h, [])
        after_heal = [w for w in mine if heals[h] and wall_offset is not None
                      and w["wall"] - wall_offset >= min(heals[h])]
        rows.append({
            "host": h, "driver": scenario.hosts.driver(i, scenario.run.driver), "clock_skew_s": scenario.hosts.skew(i),
            "agents": len(agents[h]), "ops": t["ops"], "ok": t["ok"], "fail": t["fail"], "info": t["info"],
            "ops_per_s": round(t["ops"] / duration_s, 1), "p50_ms": round(_pct(lat[h], 50), 2),
            "p99_ms": round(_pct(lat[h], 99), 2), "max_ms": round(max(lat[h], default=0.0), 2),
            "store_error": t["store_error"], "store_busy": t["store_busy"],
            "stale_writes": len(mine), "stale_writes_after_heal": len(after_heal),
        })
    return {"count": count, "per_host": rows, "episodes": episodes,
            "series": {h: done_at[h] for h in names}}


def _wall_offset(history: list[Record]) -> float | None:
    """Wall seconds at monotonic 0, from the records (which carry both)."""
    for r in history:
        if "wall" in r:
            return r["wall"] - r["time"] / 1e9
    return None


def lines(h: dict[str, Any] | None) -> list[str]:
    """The report.md section."""
    if not h:
        return []
    out = ["## Hosts", "", f"{h['count']} simulated hosts (network and PID namespaces), one PostgreSQL in a "
           "namespace of its own; agent n runs on host n % count.", "",
           "| host | driver | skew s | agents | ops | ok | fail | info | ops/s | p50 ms | p99 ms | max ms | "
           "store_error | store_busy | stale writes (after a heal) |",
           "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in h["per_host"]:
        out.append(f"| {r['host']} | {r['driver']} | {r['clock_skew_s']:g} | {r['agents']} | {r['ops']:,} | "
                   f"{r['ok']:,} | {r['fail']:,} | {r['info']:,} | {r['ops_per_s']:,.1f} | {r['p50_ms']:,.1f} | "
                   f"{r['p99_ms']:,.0f} | {r['max_ms']:,.0f} | {r['store_error']} | {r['store_busy']} | "
                   f"{r['stale_writes']} ({r['stale_writes_after_heal']}) |")
    out.append("")
    if h["episodes"]:
        out += ["Host faults, and the recovery of each host hit: from the fault's end (the heal, the restart, "
                "the SIGCONT) to that host's first `ok` answer.", "",
                "| fault | from s | to s | held s | recovery ms per host |", "|---|--:|--:|--:|---|"]
        for e in h["episodes"]:
            rec = ", ".join(f"{k}: {'none' if v is None else f'{v:,.0f}'}" for k, v in e["recovery_ms"].items())
            fault = e["fault"] + (f" (holder {e['stale_holder'] or 'none'} stopped before its edit, continued "
                                  "after the heal)" if "stale_holder" in e else "")
            out.append(f"| {fault} | {e['from_s']:.2f} | {e['to_s']:.2f} | {e['held_s']:.2f} | {rec} |")
        out.append("")
    out += ["Stale-holder writes (an edit with a token older than the latest grant to another session) are not "
            "violations: they are what fencing tokens are for; those after a heal were made by a host that was "
            "cut off while its lease ran out.", ""]
    return out


def plot(h: dict[str, Any], out: Path, faults: list[dict[str, Any]], start_ns: int, duration_s: float) -> str:
    from .plots import plt, save, shade_faults

    fig, ax = plt.subplots()
    width = max(duration_s / 60, 0.25)
    edges = np.arange(0, duration_s + width, width)
    for name, times in h["series"].items():
        counts, _ = np.histogram(times, bins=edges)
        ax.plot(edges[:-1] + width / 2, counts / width, lw=1.4, label=name)
    shade_faults(ax, [f for f in faults if f.get("end") or f.get("time")], start_ns, duration_s)
    for f in faults:
        if f.get("fault") == "partition" and f.get("end"):
            ax.text((f["time"] - start_ns) / 1e9, ax.get_ylim()[1] * 0.95, f"{f['host']} cut", fontsize=8)
    ax.set_xlabel("seconds from the start")
    ax.set_ylabel("operations completed per second")
    ax.set_title("Throughput per host (fault windows shaded)")
    ax.legend(loc="lower right", ncols=min(len(h["series"]) + 3, 8))
    return save(fig, out, "hosts.png")


def print_table(h: dict[str, Any] | None, console: Any) -> None:
    if not h:
        return
    from rich.table import Table

    t = Table(title="per host", title_justify="left")
    for col in ("host", "driver", "agents", "ops/s", "p99 ms", "info", "store_error", "store_busy", "stale"):
        t.add_column(col, justify="left" if col in ("host", "driver") else "right")
    for r in h["per_host"]:
        t.add_row(r["host"], r["driver"], str(r["agents"]), f"{r['ops_per_s']:,.1f}", f"{r['p99_ms']:,.0f}",
                  str(r["info"]), str(r["store_error"]), str(r["store_busy"]), str(r["stale_writes"]))
    console.print(t)
    for e in h["episodes"]:
        rec = ", ".join(f"{k} {'none' if v is None else f'{v:,.0f} ms'}" for k, v in e["recovery_ms"].items())
        console.print(f"{e['fault']} {e['from_s']:.1f}-{e['to_s']:.1f} s: recovery {rec}")
