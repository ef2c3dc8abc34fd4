"""``[fitted]``: what ``sim fit`` measured of the traffic a scenario was fitted to, per agent,
so that ``sim run`` (at any ``--scale``) can put the run's own figures beside it. Numbers
only: a share per tool, per selector kind, the fan-out per kind, never a name."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .tables import ScenarioError, Table

_KEY = re.compile(r"[a-z][a-z0-9_]{0,39}")
SELECTOR_KINDS = ("broadcast", "session", "tag", "file")


@dataclass(frozen=True)
class Fitted:
    window_s: float  # the stretch of time fitted
    agents: float  # sessions live at once, on average
    sessions: int  # sessions seen in the window (churn makes more than agents)
    calls_per_agent_s: float  # counted calls per live agent per second
    think_mean_ms: float
    think_cv: float  # standard deviation over mean of the think time: 1 for exponential, more when bursty
    tools: tuple[tuple[str, float], ...]  # share of each tool among the calls
    sends: tuple[tuple[str, float], ...] = ()  # share of sends per selector kind
    fanout: tuple[tuple[str, float], ...] = ()  # mean recipients per send, per selector kind
    hold_p50_s: float | None = None  # lease hold times (grant to release or expiry)
    hold_p90_s: float | None = None
    session_p50_s: float | None = None  # session lifetimes (join to leave, else to its last call)


def _shares(t: Table, key: str, keys: tuple[str, ...] | None, hi: float) -> tuple[tuple[str, float], ...]:
    sub = t.sub(key)
    names = [k for k in sorted(sub.data) if keys is None or k in keys]
    for k in names:
        if not _KEY.fullmatch(k):
            raise ScenarioError(f"[{sub.where}] {k!r}: not a tool or selector kind name")
    out = tuple((k, sub.number(k, ..., 0, hi)) for k in names)
    sub.done()
    return out


def read_fitted(t: Table) -> Fitted:
    f = Fitted(
        window_s=t.number("window_s", ..., 0, 1e9),
        agents=t.number("agents", ..., 0, 1e6),
        sessions=t.integer("sessions", ..., 0, 10**9),
        calls_per_agent_s=t.number("calls_per_agent_s", ..., 0, 1e6),
        think_mean_ms=t.number("think_mean_ms", ..., 0, 1e9),
        think_cv=t.number("think_cv", ..., 0, 1e6),
        tools=_shares(t, "tools", None, 1),
        sends=_shares(t, "sends", SELECTOR_KINDS, 1),
        fanout=_shares(t, "fanout", SELECTOR_KINDS, 1e6),
        hold_p50_s=t.number("hold_p50_s", None, 0, 1e9),
        hold_p90_s=t.number("hold_p90_s", None, 0, 1e9),
        session_p50_s=t.number("session_p50_s", None, 0, 1e12),
    )
    t.done()
    return f


def fitted_to_toml(f: Fitted, table: Callable[[str, dict[str, Any]], list[str]]) -> list[str]:
    """The ``[fitted]`` tables, written with the scenario writer's ``table``."""
    plain = {k: v for k, v in vars(f).items() if not isinstance(v, tuple)}
    lines = table("[fitted]", plain)
    for key in ("tools", "sends", "fanout"):
        lines += ["", *table(f"[fitted.{key}]", dict(getattr(f, key)))]
    return lines
