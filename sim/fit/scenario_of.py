"""A store's traffic (``traffic.measure``) as a scenario the simulator runs: the same agents
per repository (as counts), rooms and tags (as ranks), tool mix, think-time distribution,
lease TTLs and modes, sends per selector kind, message TTLs and sizes, autonomy levels and
churn; ``[fitted]`` keeps the measured figures per agent for the report to compare. The file
opens with what the fit could not see."""

from __future__ import annotations

import datetime
import math

from ..scenario.fitted import SELECTOR_KINDS, Fitted
from ..scenario.scenario import MIX_KEYS, Expect, OpenLoop, Repo, Run, Scenario, Workload, parse
from ..scenario.think import MAX_MS, Think, empirical_mean
from ..scenario.totoml import to_toml
from .distribution import quantile
from .traffic import Traffic

# Tools the mix names the same way; the rest are mapped in ``mix``.
_SAME = ("lease_renew", "lease_release", "msg_recv", "msg_ack", "note_read", "drift_check", "room_who",
         "msg_unread", "msg_sent", "room_history", "lease_check", "lease_list")


def mix(t: Traffic) -> dict[str, float]:
    """The mix weights (percent of the calls) that make the measured tool counts: sends split
    by selector kind, a leave then a join is churn, a room left then joined again is
    leave_room, a join that made no session is a rejoin, a holder's claim in the other mode
    is a mode change. ``hook_news`` has no simulated counterpart and is left out."""
    tools = t.tools
    weights = {k: float(tools.get(k, 0)) for k in _SAME}
    sends = sum(t.sends.values())
    for kind in SELECTOR_KINDS:
        share = t.sends.get(kind, 0) / sends if sends else (1.0 if kind == "broadcast" else 0.0)
        weights[f"send_{kind}"] = tools.get("msg_send", 0) * share
    weights["mode_change"] = float(min(t.mode_changes, tools.get("lease_claim", 0)))
    weights["lease_claim"] = tools.get("lease_claim", 0) - weights["mode_change"]
    weights["churn"] = float(tools.get("room_leave", 0))
    weights["leave_room"] = float(tools.get("room_leave_room", 0))
    weights["rejoin"] = float(max(0, tools.get("room_join", 0) - t.created - tools.get("room_leave_room", 0)))
    weights["set_cap"] = float(tools.get("room_set_autonomy_cap", 0))
    total = sum(weights.values()) or 1.0
    return {k: round(100 * weights[k] / total, 3) for k in MIX_KEYS if weights.get(k, 0) > 0}


def _levels(values: list[float], n: int, lo: int, hi: int) -> tuple[int, ...]:
    """``n`` values (each drawn equally often) with the sample's distribution, whole, in range:
    each the sample's own value at its rank, never one interpolated between two (a TTL is a
    choice an agent made: between asks of 2 and 5 s a level of 3 is nobody's)."""
    ordered = sorted(values)
    return tuple(min(hi, max(lo, round(ordered[min(len(ordered) - 1, int((i + 0.5) / n * len(ordered)))])))
                 for i in range(n))


def _think(t: Traffic) -> Think:
    quantiles, mean, _, _ = t.think()
    if not quantiles:
        return Think("fixed", 0.0)
    capped = tuple(round(min(MAX_MS, q), 3) for q in quantiles)
    return Think("empirical", empirical_mean(capped), capped)


def fitted(t: Traffic) -> Fitted:
    _, mean, cv, _ = t.think()
    calls = t.calls - t.tools.get("hook_news", 0)
    holds = t.holds
    return Fitted(
        window_s=round(t.window_s, 3), agents=round(t.agents, 3), sessions=t.sessions,
        calls_per_agent_s=round(calls / t.agent_s, 4) if t.agent_s else 0.0,
        think_mean_ms=round(mean, 3), think_cv=round(cv, 3),
        tools=tuple(sorted((k, round(n / t.calls, 4)) for k, n in t.tools.items() if n)) if t.calls else (),
        sends=tuple(sorted((k, round(n / sum(t.sends.values()), 4)) for k, n in t.sends.items())),
        fanout=tuple(sorted((k, round(v, 3)) for k, v in t.fanout.items())),
        hold_p50_s=None if not holds else round(quantile(holds, 0.5) or 0, 3),
        hold_p90_s=None if not holds else round(quantile(holds, 0.9) or 0, 3),
        session_p50_s=None if not t.lifetimes else round(quantile(t.lifetimes, 0.5) or 0, 3),
    )


def fit(t: Traffic, name: str = "fitted") -> Scenario:
    if not t.groups or t.agent_s <= 0:
        raise ValueError("no session was live in that stretch of time: nothing to fit")
    repos = tuple(Repo(
        name=f"repo-{i}", agents=min(512, max(1, round(g.agents))), files=min(10_000, g.files),
        rooms=tuple(f"room-{r}" for r in g.rooms), tags=tuple(f"tag-{x}" for x in g.tags), autonomy=g.autonomy,
    ) for i, g in enumerate(t.groups, 1))
    hot = sorted(g.hot_share for g in t.groups)[len(t.groups) // 2]
    files = sorted(g.files for g in t.groups)[len(t.groups) // 2]
    # pick_path takes a hot path with hot_fraction, else any path (hot ones too): undo the latter.
    uniform = hot[0] / files if files else 0.0
    hot_fraction = max(0.0, min(1.0, (hot[1] - uniform) / (1 - uniform))) if hot[0] and uniform < 1 else 0.0
    ttls = _levels(t.lease_ttls, 10, 1, 86_400) if t.lease_ttls else (600,)
    mttl = t.message_ttls
    workload = Workload(
        mode="closed", hot_paths=hot[0], hot_fraction=round(hot_fraction, 3), lease_ttl_s=ttls,
        shared_fraction=round(t.shared_grants, 3), max_held=min(100, max(1, t.max_held)),
        body_bytes=min(65_536, round(t.body_bytes)),
        message_ttl_s=_levels(mttl, 10, 0, 2_592_000) if any(mttl) else (), think=_think(t),
        mix=tuple(mix(t).items()) or (("room_who", 1.0),),
    )
    run = Run(duration_s=round(min(600.0, max(1.0, t.window_s)), 1))
    words = f"Fitted by sim fit to {t.sessions} sessions over {t.window_s:,.0f} s of a store's traffic."
    return Scenario(name, run, repos, workload, OpenLoop(), Expect(), words, fitted=fitted(t))


def _when(x: float) -> str:
    return datetime.datetime.fromtimestamp(x, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def unseen(t: Traffic) -> list[str]:
    """What the fitted scenario cannot reproduce or the store could not show, in words."""
    notes = ["Names are never written: repositories, rooms and tags are ranks (repo-1 is the busiest); "
             "paths are a count per repository; labels, subjects and bodies are left out (body size kept)."]
    if not t.counted:
        notes.append("No call counts in this window (a store from before schema 3, or counting off): the mix holds "
                     "writes only, from the events; reads (room_who, lease_check, msg_unread, ...) were not seen, "
                     "and the think time is the gap between writes, not between calls.")
    elif t.minutes_without_counts:
        notes.append(f"{t.minutes_without_counts} minute(s) with events had no call counts (a process killed "
                     "before its next write loses what it counted since; reads before counting existed): the "
                     "rate is low by what those minutes held.")
    if t.tools.get("hook_news"):
        per = 60 * t.tools["hook_news"] / max(t.agent_s, 1e-9)
        notes.append(f"Hook news reads: {per:.2f} per agent per minute; the simulator runs no hooks, so they are "
                     "not in the mix. Quiet hook probes (nothing new) open no store and are never counted.")
    if t.no_session_calls:
        notes.append(f"{t.no_session_calls} calls named no valid session (bad ids, room_who without one): in the "
                     "mix, not in any agent's think time.")
    notes.append("File edits are not store calls: the mix's edit weight is 0 (an edit shows only as the claim "
                 "around it).")
    if t.wake_levers:
        notes.append(f"{t.wake_levers} session(s) had a wake lever; wakes are not reproduced.")
    return notes


def render(t: Traffic, s: Scenario) -> str:
    """The TOML file: a comment block (the window, the figures behind the fit, what it could
    not see), then the scenario, which ``parse`` reads back to ``s``."""
    quantiles, mean, cv, (mu, sigma) = t.think()
    lines = [f"# {s.name}: fitted by `sim fit` to {_when(t.since)} .. {_when(t.until)} ({t.window_s:,.0f} s)",
             f"# {t.sessions} sessions ({t.created} started in the window), {t.agents:.2f} live at once on average, "
             f"{t.calls:,} calls counted ({', '.join(f'{k} {n:,}' for k, n in sorted(t.outcomes.items()))})",
             f"# think time ({'every call' if t.gaps_from == 'counts' else 'between writes'}): mean {mean:.1f} ms, "
             f"cv {cv:.2f}, lognormal mu {mu:.3f} sigma {sigma:.3f} (ln ms); p50 "
             f"{quantiles[50] if quantiles else 0:.1f} ms, p90 {quantiles[90] if quantiles else 0:.1f} ms",
             f"# sessions ended by leave: {t.leaves}; session lifetime p50 "
             f"{quantile(t.lifetimes, 0.5) or 0:,.1f} s; autonomy levels {dict(sorted(t.levels.items()))}",
             "#", "# What this file could not see or does not reproduce:"]
    for note in unseen(t):
        lines.append("# - " + note)
    lines.append("")
    text = "\n".join(lines) + "\n" + to_toml(s).split("\n", 1)[1]
    assert parse(text, s.name) == s, "the fitted scenario must read back as written"  # noqa: S101
    return text


def seconds_of(text: str, what: str) -> float:
    """A time given as Unix seconds or ISO 8601 (UTC unless it says otherwise)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{what}: {text!r} is neither Unix seconds nor an ISO 8601 time (2026-12-04T12:00:00Z)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    if not math.isfinite(when.timestamp()):
        raise ValueError(f"{what}: {text!r} is out of range")
    return when.timestamp()
