"""``sim run SCENARIO --sweep agents=8,16,32,64``: the capacity sweep. One full ``sim run``
per value (each checked and reported in its own folder), then ``sweep.json`` and
``sweep.png``: p99 per operation and throughput against the swept value, and the knee.

The knee is the first point ``x_k`` (values in increasing order, ``s = x_k / x_{k-1}``) where

- throughput stops growing: ``T_k < 1.1 × T_{k-1}`` (more load, under 10% more completed
  operations per second), or
- p99 grows super-linearly: ``P_k / P_{k-1} > s`` (the p99 of all operations grew by more than
  the factor the load did);

``P`` is the p99 over every operation of the steady work: each agent's calls after its first
``room_who`` (the start-up joins, which wait for the agents' interpreters, and the burst of
first ``room_who`` calls on "go" aside; the final drain aside). No such point: no knee up to the largest
value. The runs default to the ``mcp`` driver (a real ``agents-room serve`` per agent over
stdio), as agents use the store; ``--driver direct`` sweeps the store alone.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..check.history import pairs, read
from ..report.stats import latency_ms
from ..scenario.scenario import Scenario, ScenarioError, parse, to_toml

THROUGHPUT_GAIN = 1.1
PLOT_MIN_CALLS = 50


def parse_sweep(text: str) -> tuple[str, list[float]]:
    """``KEY=V1,V2,...`` with numbers in increasing order."""
    key, sep, rest = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError(f"--sweep: expected KEY=V1,V2,... (e.g. agents=8,16,32), got {text!r}")
    try:
        values = [float(v) for v in rest.split(",") if v.strip()]
    except ValueError:
        raise ScenarioError(f"--sweep {key}: values must be numbers, got {rest!r}") from None
    if len(values) < 2 or any(b <= a for a, b in zip(values, values[1:])):
        raise ScenarioError(f"--sweep {key}: give two or more values in increasing order, got {rest!r}")
    return key, values


def at_point(base: Scenario, key: str, value: float) -> Scenario:
    """The scenario with ``key`` set to ``value``: ``agents`` (spread over the repos as
    ``--agents`` does), ``duration``, or a dotted scenario key such as
    ``workload.think.mean_ms``; checked like the file's own values."""
    if key == "agents":
        return base.with_overrides(agents=_whole(key, value))
    if key == "duration":
        return base.with_overrides(duration_s=value)
    if key == "hosts":  # [hosts] count (and with agents_per_host, the agents with it)
        return base.with_overrides(hosts=_whole(key, value))
    *tables, field = key.split(".")
    if not tables or tables[0] not in ("run", "workload", "open_loop"):
        raise ScenarioError(f"--sweep: unknown key {key!r}; agents, duration, hosts, or run.*, workload.*, "
                            "open_loop.* keys")

    def replaced(obj: Any, path: list[str]) -> Any:
        name = path[0]
        if not dataclasses.is_dataclass(obj) or name not in {f.name for f in dataclasses.fields(obj)}:
            raise ScenarioError(f"--sweep: unknown key {key!r}")
        current = getattr(obj, name)
        if len(path) > 1:
            return dataclasses.replace(obj, **{name: replaced(current, path[1:])})
        if isinstance(current, bool) or not isinstance(current, int | float):
            raise ScenarioError(f"--sweep: {key} is not a number in the scenario")
        return dataclasses.replace(obj, **{name: _whole(key, value) if isinstance(current, int) else value})

    changed = replaced(base, [*tables, field])
    return parse(to_toml(changed), base.name)  # checked like the file's own values


def _whole(key: str, value: float) -> int:
    if value != int(value):
        raise ScenarioError(f"--sweep {key}: {value:g} is not a whole number")
    return int(value)


def knee(points: list[dict[str, Any]]) -> dict[str, Any]:
    """The first point where throughput stops growing or p99 grows super-linearly."""
    for prev, cur in zip(points, points[1:]):
        scale = cur["value"] / prev["value"]
        reasons = []
        if cur["ops_per_s"] < THROUGHPUT_GAIN * prev["ops_per_s"]:
            reasons.append(f"throughput {prev['ops_per_s']:.0f} → {cur['ops_per_s']:.0f} ops/s "
                           f"(under {THROUGHPUT_GAIN:g}× for {scale:g}× the load)")
        if prev["p99_ms"] and cur["p99_ms"] / prev["p99_ms"] > scale:
            reasons.append(f"p99 {prev['p99_ms']:.0f} → {cur['p99_ms']:.0f} ms "
                           f"({cur['p99_ms'] / prev['p99_ms']:.1f}× for {scale:g}× the load)")
        if reasons:
            return {"at": cur["value"], "last_good": prev["value"], "reasons": reasons}
    return {"at": None, "last_good": points[-1]["value"] if points else None,
            "reasons": [f"no knee up to {points[-1]['value']:g}" if points else "no points"]}


def work_latencies(out: Path) -> dict[str, list[float]]:
    """Latency (ms) per operation of the steady work: each agent's calls after its first
    ``room_who`` (what every agent does at once on "go"), drain aside. Stricter than the
    report's own tables, which set aside only the start-up joins: the burst of first
    ``room_who`` calls, all at one instant, is not the steady load a capacity point is about."""
    found: dict[str, list[float]] = {}
    working: set[str] = set()
    for inv, done in sorted(pairs(read(out / "history.jsonl.gz")), key=lambda pair: pair[0]["time"]):
        if inv["agent"] not in working:
            if inv["f"] == "room_who":
                working.add(inv["agent"])
            continue
        if done.get("phase") != "drain":
            found.setdefault(inv["f"], []).append(latency_ms(inv, done))
    return found


def summary(value: float, report: dict[str, Any]) -> dict[str, Any]:
    """One point: the run's throughput and fairness, and p99 over the work (start-up aside)."""
    lat = work_latencies(Path(report["out"]))
    every = [x for v in lat.values() for x in v]
    return {
        "value": value, "agents": report["run"]["agents"], "verdict": report["verdict"], "out": report["out"],
        "ops_per_s": report["run"]["ops_per_s"],
        "p50_ms": float(np.percentile(every, 50)) if every else math.nan,
        "p99_ms": float(np.percentile(every, 99)) if every else math.nan,
        "p99_by_op": {f: float(np.percentile(v, 99)) for f, v in sorted(lat.items())},
        "count_by_op": {f: len(v) for f, v in sorted(lat.items())},
        "jain": report["fairness"]["jain"], "longest_wait_ms": report["fairness"]["longest_wait_ms"],
        "store_busy": report["store_busy"],
    }


def plot(path: Path, key: str, points: list[dict[str, Any]], found: dict[str, Any], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    x = [p["value"] for p in points]
    # A p99 of a few dozen calls is noise: only operations with PLOT_MIN_CALLS at every point.
    names = sorted(f for f in points[0]["p99_by_op"] if all(p["count_by_op"].get(f, 0) >= PLOT_MIN_CALLS for p in points))
    colors = plt.get_cmap("tab20").colors
    for i, f in enumerate(names):
        left.plot(x, [p["p99_by_op"][f] for p in points], marker="o", linewidth=1, color=colors[i % 20], label=f)
    left.plot(x, [p["p99_ms"] for p in points], marker="s", color="black", linewidth=2.5, label="all")
    right.plot(x, [p["ops_per_s"] for p in points], marker="s", color="black", linewidth=2, label="measured")
    right.plot(x, [points[0]["ops_per_s"] * v / x[0] for v in x], linestyle=":", color="grey", label="linear")
    for ax, name in ((left, "p99 latency (ms)"), (right, "throughput (ops/s)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(key)
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
        if found["at"] is not None:
            ax.axvline(found["at"], color="red", linestyle="--", linewidth=1, label=f"knee at {found['at']:g}")
    left.legend(fontsize=7, ncol=2)
    right.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run_sweep(base: Scenario, key: str, values: list[float], out: Path, *, live: bool, console: Any,
              store: str | None = None) -> int:
    """Every point's run, then the sweep's own report. Exit code: 1 if any run was invalid,
    2 if any was unknown (bounds missed at high load are what a sweep is for: not a failure)."""
    from rich.table import Table

    from ..pipeline import run_scenario

    scenarios = [at_point(base, key, v) for v in values]  # every point checked before any runs
    out.mkdir(parents=True)
    points = []
    for value, scenario in zip(values, scenarios, strict=True):
        console.print(f"[bold]sweep {key}={value:g}[/bold] ({scenario.agents} agents, {scenario.run.driver})")
        result = run_scenario(scenario, out / f"{key}-{value:g}", live=live, console=console, store=store)
        points.append(summary(value, result.report))
    found = knee(points)
    data = {"key": key, "values": values, "driver": base.run.driver, "scenario": base.name,
            "knee_rule": {"throughput_gain_below": THROUGHPUT_GAIN, "p99_growth_above": "the load's growth"},
            "points": points, "knee": found}
    (out / "sweep.json").write_text(json.dumps(data, indent=1) + "\n")
    plot(out / "sweep.png", key, points, found, f"{base.name}: sweep of {key} ({base.run.driver} driver)")
    table = Table(title=f"sweep of {key}: {base.name}, {base.run.driver} driver")
    extra = [] if key == "agents" else ["agents"]
    for name in (key, *extra, "verdict", "ops/s", "p50 ms", "p99 ms", "Jain", "longest wait ms", "store_busy"):
        table.add_column(name, justify="right")
    for p in points:
        table.add_row(f"{p['value']:g}", *[str(p["agents"])] * len(extra), p["verdict"], f"{p['ops_per_s']:,.0f}", f"{p['p50_ms']:.1f}",
                      f"{p['p99_ms']:.1f}", f"{p['jain']:.3f}", f"{p['longest_wait_ms']:.0f}", str(p["store_busy"]))
    console.print(table)
    per_op = Table(title=f"p99 (ms) per operation against {key}")
    per_op.add_column("operation")
    for p in points:
        per_op.add_column(f"{p['value']:g}", justify="right")
    for f in sorted({f for p in points for f in p["p99_by_op"]}):
        per_op.add_row(f, *[f"{p['p99_by_op'][f]:.1f}" if f in p["p99_by_op"] else "—" for p in points])
    console.print(per_op)
    words = f"knee at {key}={found['at']:g}" if found["at"] is not None else "no knee"
    console.print(f"{words}: {'; '.join(found['reasons'])}")
    console.print(f"wrote {out / 'sweep.json'} and {out / 'sweep.png'}")
    verdicts = {p["verdict"] for p in points}
    return 1 if "invalid" in verdicts else 2 if verdicts - {"valid"} else 0


def command(args: Any, console: Any) -> int:
    """``sim run ... --sweep``: the scenario's overrides, then the sweep."""
    import datetime as dt

    from ..scenario.scenario import load

    try:
        key, values = parse_sweep(args.sweep)
        base = load(args.scenario).with_overrides(duration_s=args.duration, seed=args.seed,
                                                  driver=args.driver or "mcp", edits=args.edits)
        if args.agents is not None and key != "agents":
            base = base.with_overrides(agents=args.agents)
    except ScenarioError as exc:
        print(f"sim: invalid scenario: {exc}", file=sys.stderr)
        return 2
    if base.hosts is not None:
        from ..hosts.cluster import refusal

        if why := refusal():
            print(f"sim: {why}", file=sys.stderr)
            return 2
    out = args.out or Path("reports") / f"{base.name}-sweep-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}"
    if out.exists():
        print(f"sim: {out} already exists; pick another --out", file=sys.stderr)
        return 2
    try:
        return run_sweep(base, key, values, out, live=not args.no_live, console=console, store=args.store)
    except ScenarioError as exc:
        print(f"sim: invalid scenario: {exc}", file=sys.stderr)
        return 2
