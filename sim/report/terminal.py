"""The run's summary on the terminal: the per-operation table, fairness, what missed or was
violated, the verdict and where the report is; with ``[hosts]``, the per-host table after it
(``hosts.print_table``). The same data as ``report.md`` (``writer.py``), shorter."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agents_room.visible import visible  # a violation's message quotes what agents wrote

from . import fitted, harness, hosts
from . import postgres as pgreport
from .writer import driver_words, ms_text, ops_per_s, setup_words


def print_summary(d: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    run = d["run"]
    t = Table(title=f"{d['name']}: {run['agents']} agents{setup_words(d.get('scenario') or {})}, {driver_words(run)}, "
                    f"store {run['store_factory']}, {run['duration_s']:.0f} s",
              title_justify="left")
    for col in ("operation", "count", "ok", "fail", "info", "ops/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms"):
        t.add_column(col, justify="left" if col == "operation" else "right")
    for r in [*d["operations"], {**d["all"], "f": "all"}, d["startup"]]:
        start_up = r["f"] == "start-up"
        t.add_row(r["f"], f"{r['count']:,}", f"{r['ok']:,}", f"{r['fail']:,}", f"{r['info']:,}",
                  "-" if start_up else ops_per_s(run) if r["f"] == "all" else f"{r['per_s']:,.0f}", ms_text(r["p50_ms"]), ms_text(r["p99_ms"]),
                  ms_text(r["p999_ms"]), ms_text(r["max_ms"]),
                  style="bold" if r["f"] == "all" else "dim" if start_up else None)
    console.print(t)
    fair = d["fairness"]
    console.print(f"fairness: Jain {fair['jain']:.3f}, fewest {fair['fewest'][1]:,}, most {fair['most'][1]:,}, "
                  f"longest write wait {ms_text(fair['longest_wait_ms'])} ms; store_busy {d['store_busy']:,}; "
                  + (pgreport.line(d["postgres"]) if d.get("postgres") else
                     f"WAL max {d['wal']['max_bytes'] / 2**20:.1f} MiB"))
    for e in d["expect"]:
        if not e["met"]:
            console.print(f"[red]expectation missed[/]: {escape(e['name'])} {escape(visible(e['actual']))} (required {escape(e['bound'])})")
    for v in d["violations"][:10]:
        console.print(f"[red]{escape(str(v['invariant']))}[/]: {escape(visible(v['message']))}")
    if d["verdict"] == "unknown":
        inv = d["invariants"]
        for why in dict.fromkeys([inv.get("reason"), *(inv.get("unknown_because") or []), *d["run"]["notes"]]):
            if why:
                console.print(f"[yellow]unknown[/]: {escape(visible(why))}")
    color = {"valid": "green", "invalid": "red", "unknown": "yellow"}[d["verdict"]]
    if d["plots_skipped"]:
        console.print("plots: skipped (--no-plots)")
    console.print(f"verdict: [bold {color}]{d['verdict']}[/]   report: {escape(d['out'])}/report.md")
    hosts.print_table(d.get("hosts"), console)
    harness.print_table(d.get("harnesses"), console)
    fitted.print_table(d.get("fit"), console)
