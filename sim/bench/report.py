"""``sim bench``'s results: the ratios (the result), the issue's targets with where each
stands, ``bench.json``, ``bench.png`` and the terminal tables."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import sqlite3
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

WRITE_OPS = ("lease_claim", "lease_release", "msg_send", "msg_recv")


def _find(cells: list[dict[str, Any]], kind: str, op: str, procs: int) -> dict[str, Any] | None:
    return next((c for c in cells if (c["kind"], c["op"], c["procs"]) == (kind, op, procs)), None)


def _median(xs: list[int]) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    mid = len(xs) // 2
    return float(xs[mid]) if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


RATIO_WORDS = {
    "store/raw": "throughput, store ÷ raw sqlite3 (median over rounds)",
    "store/raw CPU": "CPU per operation, store ÷ raw sqlite3 (above 1: the store costs more)",
    "serve/bare": "throughput, agents-room serve ÷ bare MCP server (median over rounds)",
    "serve/bare server CPU": "server CPU per call, agents-room serve ÷ bare MCP server",
    "serve/bare RSS": "RSS per server process, agents-room serve ÷ bare MCP server",
    "serve/store": "throughput, through stdio ÷ the store called directly",
}


def _round_ratio(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """The median over rounds of ``a``'s throughput ÷ ``b``'s, each pair of windows measured
    back to back: a burst of load from elsewhere hits one round, not the result."""
    pairs = [x / y for x, y in zip(a.get("rounds_per_s", []), b.get("rounds_per_s", []), strict=False) if y]
    if not pairs:
        return _div(a["per_s"], b["per_s"])
    pairs.sort()
    mid = len(pairs) // 2
    return pairs[mid] if len(pairs) % 2 else (pairs[mid - 1] + pairs[mid]) / 2


def ratios(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """store ÷ raw per operation and process count (throughput, CPU per operation); serve ÷
    bare (throughput, server CPU per call, RSS) and serve ÷ store (what the protocol costs)
    at each MCP agent count."""
    out = []
    for c in cells:
        if c["kind"] == "store":
            raw = _find(cells, "raw", c["op"], c["procs"])
            if raw:
                out.append({"ratio": "store/raw", "op": c["op"], "procs": c["procs"],
                            "value": _round_ratio(c, raw)})
                out.append({"ratio": "store/raw CPU", "op": c["op"], "procs": c["procs"],
                            "value": _div(c["cpu_us_per_op"], raw["cpu_us_per_op"])})
        if c["kind"] == "serve":
            bare = _find(cells, "bare", c["op"], c["procs"])
            if bare:
                out.append({"ratio": "serve/bare", "op": c["op"], "procs": c["procs"],
                            "value": _round_ratio(c, bare)})
                out.append({"ratio": "serve/bare server CPU", "op": c["op"], "procs": c["procs"],
                            "value": _div(c["server_cpu_us_per_op"], bare["server_cpu_us_per_op"])})
                out.append({"ratio": "serve/bare RSS", "op": c["op"], "procs": c["procs"],
                            "value": _div(_median(c["rss_kib"]), _median(bare["rss_kib"]))})
            store = _find(cells, "store", c["op"], c["procs"])
            if store:
                out.append({"ratio": "serve/store", "op": c["op"], "procs": c["procs"],
                            "value": _div(c["per_s"], store["per_s"])})
    return out


def _ratio(rs: list[dict[str, Any]], name: str, op: str, procs: int) -> float | None:
    return next((r["value"] for r in rs if (r["ratio"], r["op"], r["procs"]) == (name, op, procs)), None)


def _target(name: str, value: float | None, bound: float, at_least: bool, unit: str = "", note: str = "") -> dict[str, Any]:
    met = None if value is None or math.isnan(value) else (value >= bound if at_least else value <= bound)
    return {"target": name, "value": value, "bound": bound, "at_least": at_least, "unit": unit, "met": met,
            "note": note}


def _store_cell(cells: list[dict[str, Any]], op: str, procs: int) -> dict[str, Any] | None:
    return _find(cells, "store", op, procs)


def issue19(cells: list[dict[str, Any]], rs: list[dict[str, Any]], hook: dict[str, Any] | None,
            who: dict[str, Any] | None, upgrade: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The five targets of issue 19 (the second performance pass), each met, missed or not
    measured (``met`` None) by this run."""
    out = [_target("serve ÷ bare MCP server, claim+release pairs, 4 agents",
                   _ratio(rs, "serve/bare", "lease_pair", 4), 0.9, True, "×")]
    ratio16, cell16 = _ratio(rs, "store/raw", "lease_claim", 16), _store_cell(cells, "lease_claim", 16)
    if ratio16 is None or cell16 is None:
        out.append({**_target("16 writers, store lease_claim: ÷ raw, Jain, longest wait (one run)", None, 0.7, True),
                    "bound_shown": "≥ 0.7 × / ≥ 0.95 / ≤ 100 ms"})
    else:
        parts = (ratio16 >= 0.7, cell16["jain"] >= 0.95, cell16["max_ms"] <= 100)
        out.append({**_target("16 writers, store lease_claim: ÷ raw, Jain, longest wait (one run)", ratio16, 0.7,
                              True, "×"),
                    "met": all(parts), "shown": f"{ratio16:.2f} × / {cell16['jain']:.3f} / {cell16['max_ms']:.0f} ms",
                    "bound_shown": "≥ 0.7 × / ≥ 0.95 / ≤ 100 ms",
                    "note": "" if all(parts) else "missed: " + ", ".join(
                        name for name, ok in zip(("throughput", "Jain", "longest wait"), parts, strict=True) if not ok)})
    if hook and "news" in hook:
        news, quiet = hook["news"]["wall_median_ms"], hook["quiet"]["wall_median_ms"]
        out.append({**_target("the hook with news, wall from process start (median); the quiet path too", news, 50,
                              False, "ms"),
                    "met": news <= 50 and quiet <= 50, "shown": f"{news:.0f} ms / quiet {quiet:.0f} ms",
                    "note": f"python -c pass alone: {hook['python_c_pass']['wall_median_ms']:.0f} ms"})
    else:
        out.append(_target("the hook with news, wall from process start (median); the quiet path too", None, 50,
                           False, "ms"))
    if who:
        out.append(_target(f"room_who p99, {who['sessions']} sessions", who["p99_ms"], 20, False, "ms",
                           who.get("note", "")))
    else:
        out.append(_target("room_who p99, 64 sessions", None, 20, False, "ms",
                           "the pg-hosts stream's room_who bench (sim.bench.who) is not in this tree"))
    out.append({**_target("an admission side file of another layout: open, warn, busy handler", None, 0, True),
                "met": None if upgrade is None else upgrade["met"], "shown": "—" if upgrade is None else
                ("yes" if upgrade["met"] else "no"), "bound_shown": "falls back", "note": (upgrade or {}).get("note", "")})
    return out


def targets(cells: list[dict[str, Any]], rs: list[dict[str, Any]], hook: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The first pass's targets that this run measured (value None: not measured)."""
    out = [
        _target("store lease_claim ÷ raw, 1 process", _ratio(rs, "store/raw", "lease_claim", 1), 0.8, True, "×"),
        _target("store lease_claim ÷ raw, 16 processes", _ratio(rs, "store/raw", "lease_claim", 16), 0.7, True, "×"),
        _target("serve ÷ bare MCP server, lease_claim, 4 agents", _ratio(rs, "serve/bare", "lease_claim", 4), 0.95,
                True, "×"),
    ]
    for n in (16, 64):
        writes = [c for c in cells if c["kind"] == "store" and c["procs"] == n and c["op"] in WRITE_OPS]
        worst = min(writes, key=lambda c: c["jain"]) if writes else None
        out.append(_target(f"Jain's index, store writes, {n} processes", worst["jain"] if worst else None, 0.95, True,
                           note=f"lowest: {worst['op']}" if worst else ""))
    writes16 = [c for c in cells if c["kind"] == "store" and c["procs"] == 16 and c["op"] in WRITE_OPS]
    slowest = max(writes16, key=lambda c: c["max_ms"]) if writes16 else None
    out.append(_target("longest wait, store writes, 16 processes", slowest["max_ms"] if slowest else None, 100, False,
                       "ms", f"in {slowest['op']}" if slowest else ""))
    out.append(_target("RSS serve ÷ bare MCP server, 4 agents", _ratio(rs, "serve/bare RSS", "lease_claim", 4), 1.1,
                       False, "×"))
    out.append(_target("the installed hook command, wall from process start (median, quiet)",
                       hook["quiet"]["wall_median_ms"] if hook else None, 50, False, "ms",
                       f"python -c pass alone: {hook['python_c_pass']['wall_median_ms']:.0f} ms" if hook else ""))
    return out


def build(opts: Any, cells: list[Any], hook: dict[str, Any] | None, *, started: float,
          load: tuple[tuple[float, ...], tuple[float, ...]], who: dict[str, Any] | None = None,
          upgrade: dict[str, Any] | None = None) -> dict[str, Any]:
    rows = [dataclasses.asdict(c) for c in cells]
    rs = ratios(rows)
    return {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version,
                    "platform": platform.platform(), "load_before": list(load[0]), "load_after": list(load[1])},
        "settings": {"procs": list(opts.procs), "mcp_procs": list(opts.mcp_procs), "seconds": opts.seconds,
                     "rounds": opts.rounds, "warmup": opts.warmup, "ops": list(opts.ops), "hook_runs": opts.hook_runs, "started": started},
        "cells": rows, "ratios": rs, "issue19": issue19(rows, rs, hook, who, upgrade),
        "targets": targets(rows, rs, hook), "hook": hook, "who": who, "upgrade": upgrade,
    }


def save(out: Path, data: dict[str, Any]) -> None:
    (out / "bench.json").write_text(json.dumps(_clean(data), indent=1, allow_nan=False) + "\n")
    plot(out / "bench.png", data)


def _clean(data: Any) -> Any:
    """NaN (a cell with no completed call) as null: JSON has no NaN."""
    if isinstance(data, float) and math.isnan(data):
        return None
    if isinstance(data, dict):
        return {k: _clean(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_clean(v) for v in data]
    return data


def plot(path: Path, data: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = data["cells"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 5))
    styles = {"raw": ("-", "o"), "store": ("--", "s"), "serve": (":", "^"), "bare": ("-.", "v")}
    colors = dict(zip(("lease_claim", "lease_release", "msg_send", "msg_recv", "drift_check"),
                      ("C0", "C1", "C2", "C3", "C4"), strict=True))
    for kind, (line, marker) in styles.items():
        for op, color in colors.items():
            pts = sorted((c["procs"], c) for c in cells if c["kind"] == kind and c["op"] == op and c["count"])
            if not pts:
                continue
            x = [p for p, _ in pts]
            for ax, key in zip(axes, ("per_s", "p99_ms", "jain"), strict=True):
                ax.plot(x, [c[key] for _, c in pts], linestyle=line, marker=marker, color=color, label=f"{kind} {op}")
    for ax, title in zip(axes, ("throughput (ops/s)", "p99 latency (ms)", "Jain's index over processes"), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("processes")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_yscale("log")
    axes[1].set_yscale("log")
    axes[2].set_ylim(0, 1.02)
    axes[2].axhline(0.95, color="grey", linewidth=0.8)
    axes[0].legend(fontsize=7, ncol=2)
    m = data["machine"]
    fig.suptitle(f"sim bench: {m['cpus']} CPUs, Python {m['python']}, SQLite {m['sqlite']}, "
                 f"load {m['load_before'][0]:.1f} → {m['load_after'][0]:.1f}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _f(x: float | None, fmt: str) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def print_tables(data: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    rs = data["ratios"]
    t = Table(title="sim bench: per cell (absolute figures are context; the ratios are the result)")
    for name in ("kind", "op", "procs", "ops/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "Jain", "fewest/most",
                 "errors", "CPU µs/op", "server µs/op", "RSS MiB", "ratio"):
        t.add_column(name, justify="left" if name in ("kind", "op", "errors") else "right")
    for c in data["cells"]:
        ratio = ""
        if c["kind"] == "store":
            ratio = _f(_ratio(rs, "store/raw", c["op"], c["procs"]), ".2f")
            ratio = "" if ratio == "—" else f"{ratio} × raw"
        elif c["kind"] == "serve":
            value = _ratio(rs, "serve/bare", c["op"], c["procs"])
            ratio = f"{value:.2f} × bare" if value else f"{_f(_ratio(rs, 'serve/store', c['op'], c['procs']), '.2f')} × store"
        rss = _median(c["rss_kib"])
        t.add_row(c["kind"], c["op"], str(c["procs"]), _f(c["per_s"], ",.0f"), _f(c["p50_ms"], ".2f"),
                  _f(c["p99_ms"], ".2f"), _f(c["p999_ms"], ".1f"), _f(c["max_ms"], ".1f"), _f(c["jain"], ".3f"),
                  f"{c['fewest']:,}/{c['most']:,}", ", ".join(f"{k} {v}" for k, v in c["errors"].items()),
                  _f(c["cpu_us_per_op"], ",.0f"), _f(c["server_cpu_us_per_op"], ",.0f"),
                  _f(rss / 1024 if rss else None, ".1f"), ratio)
    console.print(t)
    rt = Table(title="ratios (the result)")
    for name in ("ratio", "op", "procs", "value"):
        rt.add_column(name, justify="right" if name in ("procs", "value") else "left")
    for r in rs:
        rt.add_row(RATIO_WORDS[r["ratio"]], r["op"], str(r["procs"]), _f(r["value"], ".3f"))
    console.print(rt)
    for title, key in (("the first pass's targets", "targets"), ("issue 19's targets", "issue19")):
        console.print(_target_table(title, data.get(key, [])))
    hook = data.get("hook")
    if hook:
        if hook.get("command"):
            console.print(f"hook command: {hook['command']}")
        for path in ("python_c_pass", "python_S_c_pass", "quiet", "news"):
            if path not in hook:
                continue
            h = hook[path]
            console.print(f"hook {path:<14} wall median {h['wall_median_ms']:6.1f} ms  p90 {h['wall_p90_ms']:6.1f} ms  "
                          f"min {h['wall_min_ms']:6.1f} ms  CPU median {h['cpu_median_ms']:6.1f} ms  ({h['runs']} runs)")


def _target_table(title: str, rows: list[dict[str, Any]]) -> Table:
    tt = Table(title=title)
    for name in ("target", "measured", "bound", "status", "note"):
        tt.add_column(name)
    for x in rows:
        status = {True: "[green]met[/green]", False: "[red]missed[/red]", None: "not measured"}[x["met"]]
        op = "≥" if x["at_least"] else "≤"
        unit = f" {x['unit']}" if x["unit"] else ""
        tt.add_row(x["target"], x.get("shown") or _f(x["value"], ".3g") + unit,
                   x.get("bound_shown") or f"{op} {x['bound']:g}{unit}", status, x["note"])
    return tt
