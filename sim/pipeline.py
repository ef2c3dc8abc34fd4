"""``sim run``'s pipeline, end to end: run the agents (with the nemesis on the run's tick
when the scenario has ``[faults]``), put store times back on the host clock, check, count,
report. Each stage is a subpackage (the map is in ``sim/__init__.py``); this module only
hands one stage's output to the next.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .check import history as hist
from .run.layout import merge_history, read_events, read_samples, read_spellings, shown
from .run.runner import Outcome, RunAborted, Runner
from .scenario.scenario import Scenario

Tick = Callable[[Runner, int], None]  # called with the runner and time.monotonic_ns() as the run goes


@dataclass(frozen=True)
class Result:
    out: Path
    verdict: str  # valid, invalid, unknown
    exit_code: int
    report: dict[str, Any]


def _check(events: list[Any], records: list[hist.Record], integrity: str,
           spellings: dict[str, str] | None = None) -> tuple[str, Any]:
    """The checker's verdict (``spellings``: the run's spelled folders, judged as the files
    they name); a checker that cannot run makes the verdict unknown."""
    try:
        from .check.checker import check
    except ImportError as exc:
        return "unknown", {"verdict": "unknown", "violations": [], "reason": f"checker unavailable: {exc}"}
    try:
        result = check(events, records, integrity, spellings=spellings)
    except Exception as exc:  # noqa: BLE001 (a checker bug must not cost the run's report)
        traceback.print_exc()
        return "unknown", {"verdict": "unknown", "violations": [], "reason": f"the checker failed: {exc!r}"}
    return result.verdict, result


def _sessions_by_host(db: str) -> dict[str, int]:
    """How many sessions the store recorded on each host (its ``host`` column): each host's
    agents must have carried that host's id."""
    from agents_room.store import Store

    with Store.open(db) as store, store.db.read() as tx:
        return {str(host): int(n) for host, n in tx.all("SELECT host, count(*) FROM sessions GROUP BY host")}


def _against_fitted(scenario: Scenario, db: str, wall_start: float) -> dict[str, Any] | None:
    """The run's own traffic beside the fitted figures (sim/fit/compare.py); None, with the
    reason on stderr, if the run's store cannot be measured."""
    from .fit.compare import compare
    from .fit.traffic import measure

    try:
        return compare(scenario.fitted, measure(db, wall_start, wall_start + scenario.run.duration_s))  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 (the comparison must not cost the run's report)
        traceback.print_exc()
        return None


def run_scenario(scenario: Scenario, out: Path, *, live: bool = True, console: Any = None,
                 store: str | Path | None = None, with_plots: bool = True, on_tick: Sequence[Tick] = ()) -> Result:
    """One run. With ``[hosts]``: the simulated hosts and their PostgreSQL first (their store),
    removed again at the end, whatever happens (sim/hosts/cluster.py)."""
    if scenario.hosts is None:
        return _run(scenario, out, live=live, console=console, store=store, with_plots=with_plots, on_tick=on_tick)
    from .hosts.cluster import Hosts

    with Hosts.create(scenario.hosts.count) as hosts:
        return _run(scenario, out, live=live, console=console, store=hosts.url, with_plots=with_plots,
                    on_tick=on_tick, hosts=hosts)


def _run(scenario: Scenario, out: Path, *, live: bool, console: Any, store: Path | str | None, with_plots: bool,
         on_tick: Sequence[Tick], hosts: Any = None) -> Result:
    from .faults import clock as faultclock
    from .report import terminal
    from .report import writer as report
    from .report import stats

    runner = Runner(scenario, out, live=live, store=store, hosts=hosts)
    runner.on_tick.extend(on_tick)  # e.g. sim run --dashboard
    nemesis = host_nemesis = None
    if scenario.faults.agent_kinds():
        from .faults.nemesis import Nemesis

        nemesis = Nemesis(runner)
    if scenario.faults.hosts:
        from .faults.hostnemesis import HostNemesis

        host_nemesis = HostNemesis(runner)
    aborted = None
    try:
        outcome = runner.execute()
    except RunAborted as exc:
        aborted, outcome = str(exc), None
    finally:
        if nemesis:
            nemesis.close()
        if host_nemesis:
            host_nemesis.close()
    records = merge_history(runner.layout)
    raw_events, integrity, wal = read_events(runner.layout.db, scenario.run.busy_timeout_s, after_seq=runner.layout.first_seq)
    samples = read_samples(runner.layout.samples)
    # Clock-jump faults: every store time back on the host clock the history is written in.
    events, check_records = faultclock.retime(raw_events, records, faultclock.jumps_from(
        [r for r in samples if r.get("kind") == "fault"]))
    if outcome is None:
        verdict, check = "unknown", {"verdict": "unknown", "violations": [], "reason": f"run aborted: {aborted}"}
        start_ns = min((r["time"] for r in records), default=0)
        end_ns = max((r["time"] for r in records), default=start_ns + 1)
        outcome = Outcome(start_ns, end_ns, runner.agents, False, time.time(), 0.0, [], runner.timings)
    else:
        mark = time.monotonic()
        verdict, check = _check(events, check_records, integrity, read_spellings(runner.layout))
        outcome.timings["check_s"] = time.monotonic() - mark
        if verdict == "valid" and not outcome.drained:
            verdict = "unknown"
    mark = time.monotonic()
    names = [a.name for a in runner.agents]
    figures = stats.compute(records, outcome.start_ns, outcome.end_ns, names,
                            late_ms=scenario.open_loop.late_ms if scenario.workload.mode == "open" else None)
    expectations = stats.expectations(scenario.expect, figures)
    fault_summary = None
    if nemesis:
        from .faults import report as faultreport
        from .run.drivers import serve_command

        fault_summary = faultreport.summarize(nemesis, check_records, check, runner.layout, serve_command)
        if fault_summary["problems"] and verdict != "invalid":
            verdict = "invalid"
    data = report.build(
        runner.layout.out, scenario=scenario, verdict=verdict, check=check, figures=figures,
        expectations=expectations, events=events, samples=samples, outcome=outcome, integrity=integrity,
        wal_final=wal, history_len=len(records), fault_summary=fault_summary, with_plots=with_plots,
    )
    if scenario.hosts is not None:  # per host: throughput, p99, errors, recovery after each heal
        from .report import hosts as hostreport

        stale = [dataclasses.asdict(w) for w in getattr(check, "stale_writes", ())]
        faults = [r for r in samples if r.get("kind") == "fault"]
        data["hosts"] = hostreport.compute(records, scenario, outcome.start_ns, outcome.end_ns, faults, stale)
        data["hosts"]["host_faults"] = host_nemesis.log if host_nemesis else []
        data["hosts"]["killed_sessions_pruned"] = host_nemesis.pruned if host_nemesis else {}
        data["hosts"]["sessions_by_host"] = _sessions_by_host(runner.layout.db)
        data["hosts"]["network"] = {"run_id": hosts.net.record.run_id, "subnet": hosts.net.record.subnet,
                                    "database": hosts.db.address, "netns": hosts.net.record.netns}
        if with_plots:
            data["plots"].append(hostreport.plot(data["hosts"], runner.layout.out, faults, outcome.start_ns,
                                                 scenario.run.duration_s))
    if scenario.run.driver == "harness":  # per harness: mail to the model, the hooks' calls, CPU and memory
        from .report import harness as harnessreport

        data["harnesses"] = harnessreport.compute(runner.layout.out, records, runner.layout.db_file)
    if scenario.fitted is not None and outcome.drained is not None:
        data["fit"] = _against_fitted(scenario, runner.layout.db, outcome.wall_start)
    outcome.timings["report_s"] = time.monotonic() - mark
    data["timings"] = outcome.timings
    # Which engine the run hammered, and where (a URL without its password).
    data["run"]["engine"], data["run"]["store"] = runner.layout.engine, shown(runner.layout.db)
    data["run"]["wall_start"] = outcome.wall_start  # the start signal, Unix seconds (sim fit --since)
    report.save(runner.layout.out, data)
    met = all(e.met for e in expectations)
    code = {"valid": 0 if met else 1, "invalid": 1}.get(verdict, 2)
    terminal.print_summary(data, console=console)  # with the per-host table after it, if any
    return Result(runner.layout.out, verdict, code, data)
