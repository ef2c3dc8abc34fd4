"""A run's own traffic, measured from its store the way ``sim fit`` measured the original
(``traffic.measure``), beside the figures the scenario was fitted to (``[fitted]``): per
agent, so a run at ``--scale N`` is compared with the same per-agent behaviour. Fan-out is
per message: it grows with the agents who share a room, which is what scaling does."""

from __future__ import annotations

from typing import Any

from ..scenario.fitted import Fitted
from .scenario_of import fitted
from .traffic import Traffic


def _row(figure: str, was: float | None, now: float | None, unit: str = "") -> dict[str, Any]:
    ratio = None if not was or now is None else now / was
    return {"figure": figure, "fitted": was, "run": now, "ratio": ratio, "unit": unit}


def compare(f: Fitted, run: Traffic) -> dict[str, Any]:
    """Rows of figure, fitted value, the run's value and their ratio (run / fitted)."""
    mine = fitted(run)
    rows = [
        _row("agents live at once (all, not per agent)", f.agents, mine.agents),
        _row("calls per agent per second", f.calls_per_agent_s, mine.calls_per_agent_s),
        _row("think time mean", f.think_mean_ms, mine.think_mean_ms, "ms"),
        _row("think time cv", f.think_cv, mine.think_cv),
        _row("lease hold p50", f.hold_p50_s, mine.hold_p50_s, "s"),
        _row("lease hold p90", f.hold_p90_s, mine.hold_p90_s, "s"),
    ]
    tools, now = dict(f.tools), dict(mine.tools)
    rows += [_row(f"share of {tool}", tools.get(tool, 0.0), now.get(tool, 0.0))
             for tool in sorted(set(tools) | set(now))]
    sends, sends_now = dict(f.sends), dict(mine.sends)
    rows += [_row(f"sends to {kind}", sends.get(kind, 0.0), sends_now.get(kind, 0.0))
             for kind in sorted(set(sends) | set(sends_now))]
    fan, fan_now = dict(f.fanout), dict(mine.fanout)
    rows += [_row(f"fan-out of {kind}", fan.get(kind), fan_now.get(kind), "recipients")
             for kind in sorted(set(fan) | set(fan_now))]
    return {"window_s": mine.window_s, "calls": run.calls, "rows": rows}
