"""The run's report: ``report.json`` (for machines: the verdict, the per-operation table,
the invariant results, the scenario as run) and ``report.md`` (for people: the verdict and
every violation first, then the figures and the plots). The terminal summary of the same
data is ``terminal.py``."""

from __future__ import annotations

import datetime as dt
import json
import os
import traceback
from pathlib import Path
from typing import Any

from ..run.drivers import STORE_FACTORY_ENV
from . import fitted, hosts
from .checks import fault_lines as _fault_lines
from .checks import invariant_lines as _checks
from . import postgres as pgreport
from .stats import Expectation, Stats

MAX_LISTED = 50


def _violation_text(v: Any) -> dict[str, Any]:
    if isinstance(v, dict):
        return {"invariant": v.get("invariant", ""), "message": v.get("message", str(v)), **v}
    return {"invariant": getattr(v, "invariant", ""), "message": getattr(v, "message", str(v)),
            "details": getattr(v, "details", {})}


def _check_dict(check: Any) -> dict[str, Any]:
    if isinstance(check, dict):
        return check
    return check.to_dict() if hasattr(check, "to_dict") else {"verdict": getattr(check, "verdict", "unknown")}


def store_factory() -> str:
    """The store the agents opened, so a result can be traced to its backend: the
    ``module:callable`` of ``$SIM_STORE_FACTORY`` (agents inherit the runner's environment),
    or ``shipped``."""
    return os.environ.get(STORE_FACTORY_ENV, "").strip() or "shipped"


def cost(outcome: Any, figures: Stats, driver: str) -> dict[str, Any]:
    """What the harness costs next to the store, in CPU seconds from "go" to exit (start-up
    left out): the agent processes; the store's own work inside them (direct: CPU time
    inside store calls) or in the ``agents-room serve`` processes (mcp); the runner."""
    statuses = [a.status for a in outcome.agents if a.status]
    agents_cpu = sum(s.get("work_cpu_s", 0.0) for s in statuses)
    store_cpu = sum(s.get("store_work_cpu_s", 0.0) for s in statuses)
    ops = max(figures.ops + figures.drain_ops, 1)
    harness = agents_cpu - store_cpu if driver == "direct" else agents_cpu
    total = harness + store_cpu
    return {
        "driver": driver, "agents_reporting": len(statuses), "ops": ops,
        "agents_cpu_s": agents_cpu, "store_cpu_s": store_cpu, "harness_cpu_s": harness,
        "store_share": store_cpu / total if total else 0.0,
        "harness_us_per_op": harness / ops * 1e6, "store_us_per_op": store_cpu / ops * 1e6,
        "startup_cpu_s": sum(s.get("cpu_s", 0.0) - s.get("work_cpu_s", 0.0) for s in statuses),
        "runner_cpu_s": outcome.runner_cpu_s,
        "rss_kib_max": max((s.get("rss_kib", 0) for s in statuses), default=0),
    }


def _plot(draw: Any) -> str | None:
    """One plot; a plotting failure costs that picture, never the report."""
    try:
        return draw()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return None


def _draw(out: Path, figures: Stats, events: list[Any], samples: list[dict[str, Any]], faults: list[dict[str, Any]],
          outcome: Any) -> list[str | None]:
    """Every plot, each one's file name or ``None`` (nothing to draw, or it failed)."""
    from . import plots

    repo_of = {a.name: a.repo for a in outcome.agents}
    return [_plot(draw) for draw in (
        lambda: plots.latency_over_time(figures, out, faults, outcome.start_ns),
        lambda: plots.throughput_over_time(figures, out, faults, outcome.start_ns),
        lambda: plots.percentiles(figures, out),
        lambda: plots.ops_per_agent(figures, out, repo_of),
        lambda: plots.lease_timeline(events, out, outcome.wall_start, figures.duration_s, faults=faults,
                                      start_ns=outcome.start_ns),
        lambda: (plots.postgres_over_time if pgreport.answered(samples) else plots.wal_over_time)(
            samples, out, faults, outcome.start_ns, figures.duration_s),
    )]


def build(out: Path, *, scenario: Any, verdict: str, check: Any, figures: Stats, expectations: list[Expectation],
          events: list[Any], samples: list[dict[str, Any]], outcome: Any, integrity: str, wal_final: int,
          history_len: int, fault_summary: dict[str, Any] | None = None, with_plots: bool = True) -> dict[str, Any]:
    """The report's data; the plots are drawn unless ``with_plots`` is false (``--no-plots``:
    they take seconds per run, and matplotlib is then not even imported)."""
    check_d = _check_dict(check)
    violations = [_violation_text(v) for v in (getattr(check, "violations", None) or check_d.get("violations", []))]
    faults = [r for r in samples if r.get("kind") == "fault"]
    if fault_summary:  # a fault the system under test mishandled is a violation of its own
        violations += [{"invariant": "faults", "message": p} for p in fault_summary["problems"]]
    wal_max = max((r.get("wal_bytes", 0) for r in samples if r.get("kind") == "sample"), default=0)
    pngs = _draw(out, figures, events, samples, faults, outcome) if with_plots else []
    data = {
        "verdict": verdict,
        "name": scenario.name,
        "out": str(out),
        "started_at": dt.datetime.fromtimestamp(outcome.wall_start, dt.timezone.utc).isoformat(timespec="seconds"),
        "run": {"driver": scenario.run.driver, "drivers": host_drivers(scenario), "store_factory": store_factory(),
                "agents": scenario.agents,
                "duration_s": figures.duration_s,
                "ops": figures.ops, "ops_per_s": figures.per_s, "drain_ops": figures.drain_ops,
                "history_records": history_len, "events": len(events), "drained": outcome.drained,
                "notes": outcome.notes},
        "operations": [r.__dict__ for r in figures.table],
        "all": figures.all_ops.__dict__,
        "startup": figures.startup.__dict__,
        "fairness": figures.fairness.__dict__,
        "store_busy": figures.store_busy,
        "late": figures.late,
        "wal": {"max_bytes": wal_max, "final_bytes": wal_final},
        "postgres": pgreport.summary(samples),  # None on SQLite
        "integrity": integrity,
        "violations": violations,
        "invariants": check_d,
        "expect": [e.__dict__ for e in expectations],
        "expect_met": all(e.met for e in expectations),
        "cost": cost(outcome, figures, scenario.run.driver),
        "faults": faults,
        "fault_summary": fault_summary,
        "plots": [p for p in pngs if p],
        "plots_skipped": not with_plots,
        "scenario": scenario.to_dict(),
        "bins": figures.bins.__dict__,
        "disk": disk_use(out),
    }
    return data


def host_drivers(scenario: Any) -> dict[str, str]:
    """Each simulated host's driver (``[hosts] drivers``, else ``[run] driver``), by host name;
    empty without ``[hosts]``."""
    h = scenario.hosts
    return {f"h{i}": h.driver(i, scenario.run.driver) for i in range(h.count)} if h is not None else {}


def driver_words(run: dict[str, Any]) -> str:
    """``direct driver``, or with hosts each one's: ``drivers h0=direct h1=mcp h2=http``."""
    if run.get("drivers"):
        return "drivers " + " ".join(f"{h}={d}" for h, d in run["drivers"].items())
    return f"{run['driver']} driver"


def disk_use(out: Path) -> dict[str, int]:
    """Bytes of the run's folder by its top-level entries (the report itself, written after,
    is a few KiB)."""
    use: dict[str, int] = {}
    for entry in out.iterdir() if out.is_dir() else ():
        files = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file() and not p.is_symlink()]
        use[entry.name] = sum(p.stat().st_size for p in files)
    return dict(sorted(use.items(), key=lambda kv: -kv[1]))


def save(out: Path, data: dict[str, Any]) -> None:
    (out / "report.json").write_text(json.dumps(data, indent=1, default=str))
    (out / "report.md").write_text(markdown(data))


def ms_text(x: float) -> str:
    return f"{x:,.2f}" if x < 100 else f"{x:,.0f}"


def _op_line(r: dict[str, Any], per_s: str | None = None) -> str:
    per_s = f"{r['per_s']:,.1f}" if per_s is None else per_s
    return (f"| {r['f']} | {r['count']:,} | {r['ok']:,} | {r['fail']:,} | {r['info']:,} | {per_s} | "
            + " | ".join(ms_text(r[k]) for k in ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")) + " |")


def markdown(d: dict[str, Any]) -> str:
    run, fair, c = d["run"], d["fairness"], d["cost"]
    mark = {"valid": "VALID", "invalid": "INVALID", "unknown": "UNKNOWN"}[d["verdict"]]
    lines = [f"# {d['name']}: {mark}", ""]
    on = f" on {len(run['drivers'])} hosts" if run.get("drivers") else ""
    lines.append(f"{run['agents']} agents{on}{setup_words(d.get('scenario') or {})}, {driver_words(run)}, "
                 f"{_store_words(run['store_factory'])}, {run['duration_s']:.1f} s from {d['started_at']}: "
                 f"**{run['ops']:,} operations completed within the run's window, {ops_per_s(run)} ops/s**, "
                 f"{d['store_busy']:,} `store_busy`, integrity_check `{d['integrity']}`.")
    lines.append("")
    if d["invariants"].get("counterexample"):
        lines += [f"**Counterexample**: {d['invariants']['counterexample']}", ""]
    if d["invariants"].get("rules"):
        lines += ["## Violated rules", "", "| rule | invariant | violations | first counterexample |", "|---|---|--:|---|"]
        for rule, r in d["invariants"]["rules"].items():
            first = r["first"].replace("|", "\\|")
            lines.append(f"| {rule} | {r['invariant']} | {r['violations']:,} | {first} |")
        lines.append("")
    if d["violations"]:
        lines.append(f"## Violations ({len(d['violations'])})")
        lines.append("")
        for v in d["violations"][:MAX_LISTED]:
            lines.append(f"- **{v['invariant']}**: {v['message']}")
        if len(d["violations"]) > MAX_LISTED:
            lines.append(f"- ... and {len(d['violations']) - MAX_LISTED} more in report.json")
    elif d["verdict"] == "valid":
        lines.append("No violations: every invariant of `docs/history.md` held.")
    else:
        reason = (d["invariants"].get("reason") or "; ".join(d["invariants"].get("unknown_because") or [])
                  or "; ".join(run["notes"]) or "see report.json")
        lines.append(f"No verdict could be reached: {reason}.")
    lines.append("")
    if d["expect"]:
        lines += ["## Expectations", "", "| bound | required | measured | |", "|---|---|---|---|"]
        lines += [f"| {e['name']} | {e['bound']} | {e['actual']} | {'met' if e['met'] else '**missed**'} |"
                  for e in d["expect"]]
        lines.append("")
    lines += _checks(d["invariants"])
    lines += _fault_lines(d.get("fault_summary"))
    lines += hosts.lines(d.get("hosts"))
    lines += fitted.lines(d.get("fit"))
    lines += ["## Operations", "",
              "| operation | count | ok | fail | info | ops/s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms |",
              "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    lines += [_op_line(r) for r in d["operations"]]
    lines.append(_op_line({**d["all"], "f": "**all**"}, per_s=ops_per_s(run)))
    lines.append(_op_line({**d["startup"], "f": "*start-up joins*"}, per_s="-"))
    lines.append("")
    lines.append("The start-up joins (each agent's joins before its first call on \"go\", made while the other "
                 "agents were still starting) are counted on their own line, out of the rows above and **all**.")
    after = d["all"]["count"] - run["ops"]
    if after:
        lines.append(f"**all** counts {after:,} operations more than the headline's {run['ops']:,}: they were in "
                     "flight when the window closed and completed after it, so their latencies count here and "
                     "their throughput does not.")
    lines.append("")
    lines.append("`ok`: the answer was a success (a denied lease claim is an `ok` answer). `fail`: a definite error, "
                 "one that guarantees the operation changed nothing (`invalid_argument`, `unknown_session`, "
                 "`lease_not_held`, `not_recipient`, `store_busy`). `info`: the outcome is unknown (the agent was "
                 "killed mid-call, a `store_error`, an answer lost); the checker settles each from the store's events.")
    lines.append("")
    errs = {r["f"]: r["errors"] for r in [*d["operations"], d["startup"]] if r["errors"]}
    if errs:
        lines.append("Errors by code: " + "; ".join(
            f"{f}: " + ", ".join(f"{k} {v:,}" for k, v in e.items()) for f, e in errs.items()) + ".")
        lines.append("")
        lines += [f"- {f} `{code}`: {ERROR_WHY[f, code]}{_share(d, f, code)}" for f, e in errs.items() for code in e
                  if (f, code) in ERROR_WHY]
        lines.append("")
    if d["late"]:
        late = d["late"]
        lines.append(f"Open loop: {late['late']:,} of {late['scheduled']:,} operations started more than "
                     f"{late['late_ms']:g} ms after their intended time ({late['late_fraction']:.2%}); "
                     f"the worst was {late['worst_ms']:,.0f} ms late. Latencies are from the intended start.")
        lines.append("")
    lines += ["## Fairness", "",
              f"Jain's index over operations per agent: **{fair['jain']:.3f}** (1 = perfectly even). "
              f"Fewest: {fair['fewest'][0]} with {fair['fewest'][1]:,}; most: {fair['most'][0]} with {fair['most'][1]:,}. "
              f"Longest wait for a write: **{ms_text(fair['longest_wait_ms'])} ms** ({fair['longest_wait']}).", "",
              *_img(d, "agents.png", "operations per agent")]
    store = (pgreport.words(d["postgres"]) if d.get("postgres") else
             f"WAL: largest {d['wal']['max_bytes'] / 2**20:.1f} MiB during the run, "
             f"{d['wal']['final_bytes'] / 2**20:.1f} MiB at the end.")
    lines += ["## Store", "", f"{store} {run['events']:,} events; {run['history_records']:,} history records; "
              f"{run['drain_ops']:,} reads in the final drain.", "",
              *(_img(d, "postgres.png", "PostgreSQL") if d.get("postgres") else _img(d, "wal.png", "WAL size"))]
    if d.get("harnesses"):  # the harness driver: real CLIs
        from .harness import markdown as harness_lines

        lines += harness_lines(d["harnesses"])
    lines += ["## What the harness costs", "", _cost_words(c), ""]
    lines += ["## Plots", "", *_img(d, "latency.png", "latency over time"),
              *_img(d, "throughput.png", "throughput over time"), *_img(d, "percentiles.png", "percentiles"),
              *_img(d, "leases.png", "lease timeline")]
    if d["plots_skipped"]:
        lines += ["Plots skipped (`--no-plots`): the series behind them are `bins` in `report.json`.", ""]
    elif d["faults"]:
        lines += [f"Fault windows are shaded in red ({len(d['faults'])} faults).", ""]
    if d.get("timings"):
        lines.append("Wall time by phase: " + ", ".join(f"{k.removesuffix('_s')} {v:.1f} s" for k, v in d["timings"].items())
                     + f"; {sum(d['timings'].values()):.1f} s in all.")
        lines.append("")
    lines += ["The scenario as run is `scenario.toml`; every figure above is in `report.json`."]
    if d.get("disk"):
        total = sum(d["disk"].values())
        top = ", ".join(f"`{name}` {n / 2**20:.1f} MiB" for name, n in list(d["disk"].items())[:4])
        lines += ["", f"This run's folder takes {total / 2**20:.1f} MiB ({top}). Each run is a folder of its own and "
                  f"nothing refers to it: remove old runs with `rm -r {_runs_glob(d)}`."]
    return "\n".join(lines) + "\n"


# Why the workload meets an error code, where the scenario's design makes it expected.
ERROR_WHY = {
    ("msg_send", "unknown_session"): "sends to a session that had already left: agents churn (leave and join "
    "again as a new session) by design of the scenario, and a peer still writes to the id it saw; the store "
    "refuses the send and changes nothing",
    ("lease_renew", "lease_not_held"): "renewals of a lease that had expired (and may have been taken) before "
    "the renewal came: the holder must claim it again",
    ("lease_release", "lease_not_held"): "releases of a lease that had already expired",
    ("msg_ack", "not_recipient"): "acks of a message that was never delivered to the acking session",
    ("msg_ack", "invalid_argument"): "acks of a message not read yet, or expired unread",
    ("room_leave_room", "invalid_argument"): "leaving a room the session was not in, by design: each leave names "
    "one of the agent's shared rooms or `nowhere` (a room no session is in) with equal chance, so the checker sees "
    "the refusal (SR3: refused only for a room the caller is not in) as well as the success",
}


def _share(d: dict[str, Any], f: str, code: str) -> str:
    """For the refusals the workload draws on purpose: the share it aims at beside the share refused."""
    if (f, code) != ("room_leave_room", "invalid_argument"):
        return ""
    repos = [r for r in (d.get("scenario") or {}).get("repos", []) if r.get("rooms")]
    agents = sum(r["agents"] for r in repos)
    row = next((r for r in d["operations"] if r["f"] == f), None)
    if not agents or not row or not row["count"]:
        return ""
    aimed = sum(r["agents"] / (len(r["rooms"]) + 1) for r in repos) / agents
    return (f"; the draw names `nowhere` in {aimed:.0%} of the leaves here (one in the agent's shared rooms + 1), and "
            f"{row['errors'].get(code, 0) / row['count']:.0%} were refused")


def ops_per_s(run: dict[str, Any]) -> str:
    """The run's one throughput figure, as the headline, the **all** row and the terminal show it."""
    return f"{run['ops_per_s']:,.0f}"


def setup_words(scenario: dict[str, Any]) -> str:
    """`` in 4 repos and 2 shared rooms`` (a leading space; empty without repos): the setup the
    headline restates."""
    repos = scenario.get("repos") or []
    rooms = sorted({room for r in repos for room in r.get("rooms") or []})
    if not repos:
        return ""
    return (f" in {len(repos)} repo{'' if len(repos) == 1 else 's'} and {len(rooms)} shared "
            f"room{'' if len(rooms) == 1 else 's'}")


def _runs_glob(d: dict[str, Any]) -> str:
    out = Path(d["out"])
    return f"{out.parent}/{d['name']}-*" if out.name.startswith(f"{d['name']}-") else str(out)


def _store_words(factory: str) -> str:
    if factory == "shipped":
        return "store `shipped` (this checkout's own agents-room store)"
    return f"store `{factory}` (from `$SIM_STORE_FACTORY`, not the shipped one)"


def _img(d: dict[str, Any], name: str, alt: str) -> list[str]:
    return [f"![{alt}]({name})", ""] if name in d["plots"] else []


def _cost_words(c: dict[str, Any]) -> str:
    if c["driver"] == "harness":
        return (f"The agent processes (workload, history, file edits, the scripted model) took "
                f"**{c['agents_cpu_s']:.1f} CPU s** from the start signal to exit; each CLI's own tree (the CLI, its "
                f"`agents-room serve`, its hooks) is under Real harnesses. The runner took {c['runner_cpu_s']:.1f} s.")
    where = ("inside store calls, in the agent processes" if c["driver"] == "direct"
             else "in the `agents-room serve` processes (store and MCP server)")
    client = "workload, history, file edits" if c["driver"] == "direct" else "workload, history, file edits, MCP client"
    return (f"From the start signal to exit: the store's work took **{c['store_cpu_s']:.1f} CPU s** {where}, "
            f"{c['store_us_per_op']:,.0f} µs per operation; the harness ({client}) took "
            f"**{c['harness_cpu_s']:.1f} CPU s**, {c['harness_us_per_op']:,.0f} µs per operation. The store's share of "
            f"the work is {c['store_share']:.0%}. Start-up (imports, joins{', servers' if c['driver'] == 'mcp' else ''}) "
            f"took another {c['startup_cpu_s']:.1f} s in the agents; the runner {c['runner_cpu_s']:.1f} s.")
