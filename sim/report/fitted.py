"""A fitted scenario's report section: the run's own traffic beside the figures it was fitted
to (``sim.fit.compare``), in ``report.md`` and on the terminal."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.4g}"


def _ratio(r: dict[str, Any]) -> str:
    return "-" if r["ratio"] is None else f"{r['ratio']:.2f}"


def lines(fit: dict[str, Any] | None) -> list[str]:
    if not fit:
        return []
    out = ["## Against the fitted traffic", "",
           f"Measured from the run's store over its {fit['window_s']:,.1f} s of work ({fit['calls']:,} calls counted), "
           "the way `sim fit` measured the original; per agent, so a `--scale` run should match it. Fan-out grows "
           "with the agents sharing a room.", "",
           "| figure | fitted | this run | run / fitted |", "|---|--:|--:|--:|"]
    for r in fit["rows"]:
        unit = f" {r['unit']}" if r["unit"] else ""
        out.append(f"| {r['figure']}{unit} | {_num(r['fitted'])} | {_num(r['run'])} | {_ratio(r)} |")
    return [*out, ""]


def print_table(fit: dict[str, Any] | None, console: Console) -> None:
    if not fit:
        return
    t = Table(title="against the fitted traffic (per agent)", title_justify="left")
    for col in ("figure", "fitted", "this run", "run / fitted"):
        t.add_column(col, justify="left" if col == "figure" else "right")
    for r in fit["rows"]:
        t.add_row(r["figure"] + (f" ({r['unit']})" if r["unit"] else ""), _num(r["fitted"]), _num(r["run"]), _ratio(r))
    console.print(t)
