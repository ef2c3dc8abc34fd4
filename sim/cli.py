"""The ``sim`` command: ``sim run SCENARIO.toml`` (and room for ``sim bench``).

Exit codes follow Maelstrom: 0 valid (and every ``[expect]`` bound met), 1 invalid (or a
bound missed), 2 an invalid scenario or an unknown verdict.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from agents_room.parser import Parser, not_empty

from .scenario.arguments import new_folder, number, scenario_file
from .scenario.scenario import ScenarioError, load


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="sim", description="Hammer one agents-room store with many agent processes "
               "and prove what happened.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="run a scenario, check the history, write the report",
                         description="Run SCENARIO (a TOML file, see docs/simulator.md) against a fresh store.")
    run.add_argument("scenario", type=scenario_file, help="the scenario file, e.g. scenarios/shared-room.toml")
    run.add_argument("--out", type=new_folder, help="output folder (default reports/<scenario>-<UTC time>/); must not exist")
    run.add_argument("--duration", type=number(0.5, 86_400), metavar="S", help="seconds of work (overrides [run] duration_s)")
    run.add_argument("--agents", type=number(1, 512, whole=True), metavar="N", help="total agents, spread over the repos in proportion")
    run.add_argument("--seed", type=number(0, 2**63 - 1, whole=True), metavar="N", help="the workload seed (overrides [run] seed)")
    run.add_argument("--scale", type=number(1, 100, whole=True), metavar="N", help="N times each repo's agents "
                     "(after --agents), each behaving the same: a fitted scenario (sim fit) at N times its traffic")
    run.add_argument("--driver", choices=("direct", "mcp", "harness"), help="direct: the store in-process; mcp: a "
                     "real `agents-room serve` per agent over stdio; harness: a real harness CLI per agent "
                     "([[repos]] harnesses) whose scripted model plays the workload")
    run.add_argument("--edits", choices=("claim", "check", "off"), help="the edit guard a guarded_edit goes through "
                     "(overrides [workload] edits; off: none installed, the control)")
    run.add_argument("--no-live", action="store_true", help="no live progress display")
    run.add_argument("--no-plots", action="store_true", help="skip the PNG plots (seconds per run); report.json "
                     "and report.md are still written")
    run.add_argument("--sweep", type=not_empty, metavar="KEY=V1,V2,...", help="a capacity sweep: one run per value (e.g. "
                     "agents=8,16,32,64), then sweep.json, sweep.png and the knee; default driver mcp")
    run.add_argument("--store", metavar="PATH|URL", help="run against this store instead of a fresh one under --out: "
                     "a SQLite file (an earlier run's; created if absent) or a PostgreSQL database, "
                     "postgresql://user@host/db (its schema created if empty); a store that is not a healthy "
                     "agents-room store, or one live agents use, is refused and left as it was")
    run.add_argument("--dashboard", nargs="?", const="127.0.0.1:8766", metavar="HOST:PORT", help="serve agents-room's "
                     "read-only live dashboard of the run's store while the run goes (default 127.0.0.1:8766), and "
                     "print its URL")
    from .bench.bench import add_parser as add_bench
    from .fit.command import add_parser as add_fit

    add_bench(sub)
    add_fit(sub)
    return p


def run_command(args: argparse.Namespace, console: Any) -> int:
    from .pipeline import run_scenario
    from .run.layout import default_out

    if args.sweep:
        if args.store is not None and (refused := _refuse_store(args, _fault_kinds(args.scenario))):
            print(f"sim: refusing --store: {refused}", file=sys.stderr)
            return 2
        if args.scale is not None:  # a sweep's points are its own values; sweep agents= instead
            print("sim: --scale applies to single runs, not --sweep (sweep agents=... instead)", file=sys.stderr)
            return 2
        if args.no_plots:  # each point's plots are what the sweep's own figure is read beside
            print("sim: --no-plots applies to single runs, not --sweep", file=sys.stderr)
            return 2
        from .bench.sweep import command as sweep_command

        return sweep_command(args, console)
    try:
        scenario = load(args.scenario).with_overrides(
            duration_s=args.duration, agents=args.agents, seed=args.seed, driver=args.driver, scale=args.scale,
            edits=args.edits)
    except ScenarioError as exc:
        # Plain stderr, never wrapped: the message names a file and a key to fix.
        print(f"sim: invalid scenario: {exc}", file=sys.stderr)
        return 2
    if scenario.hosts is not None:
        from .hosts.cluster import refusal

        why = refusal() or ("--store: a [hosts] run makes its own PostgreSQL in a namespace" if args.store else None)
        if why:
            print(f"sim: {why}", file=sys.stderr)
            return 2
    out = args.out or default_out(scenario)
    if out.exists():
        print(f"sim: {out} already exists; pick another --out", file=sys.stderr)
        return 2
    if args.store is not None:
        refused = _refuse_store(args, scenario.faults.kinds() if scenario.faults else [])
        if refused:
            print(f"sim: refusing --store: {refused}", file=sys.stderr)
            return 2
    watch = None
    if args.dashboard:
        from agents_room.store import InvalidArgument

        try:
            watch = Dashboard(args.dashboard)
        except InvalidArgument as exc:  # the address's checks name it --http, agents-room's own flag
            print(f"sim: invalid_argument: --dashboard: {exc.text.partition(': ')[2]}", file=sys.stderr)
            return 2
    try:
        result = run_scenario(scenario, out, live=not args.no_live, console=console, store=args.store,
                              with_plots=not args.no_plots, on_tick=[watch.tick] if watch else [])
    finally:
        if watch:
            watch.stop()
    return result.exit_code


def _fault_kinds(path: Path) -> list[str]:
    """The scenario's fault kinds (none when it does not load: the sweep then says why)."""
    try:
        faults = load(path).faults
    except ScenarioError:
        return []
    return faults.kinds() if faults else []


def _refuse_store(args: argparse.Namespace, faults: list[str]) -> str | None:
    """Why ``--store`` cannot be used (one line), else None; ``args.store`` becomes the
    location every process of the run opens (a path made absolute, or the URL)."""
    from agents_room.store import StoreError

    from .run.layout import check_store, store_location

    if not str(args.store).strip():
        return "--store is empty; give a store file's path or a postgresql:// URL"
    try:
        args.store = store_location(args.store)
    except StoreError as exc:
        return exc.text
    return check_store(args.store, faults)


class Dashboard:
    """``--dashboard``: agents-room's dashboard of the run's store, served from a thread of
    this process from the run's first tick (the store exists by then) until the run ends."""

    def __init__(self, where: str) -> None:
        from agents_room.server.http import check_exposure, parse_address

        self.token = os.environ.get("AGENTS_ROOM_TOKEN") or None
        self.address = parse_address(where)
        check_exposure(self.address, self.token)
        self.store: Any = None
        self.running: Any = None

    def tick(self, runner: Any, now_ns: int) -> None:
        if self.store is not None:
            return
        from agents_room.dashboard.web import Running, banner
        from agents_room.store import RoomError, Store

        self.store = Store.open(runner.layout.db, create=False)
        try:
            self.running = Running(self.store, self.address, self.token)
        except RoomError as exc:  # the port is taken, say: the run goes on without it
            print(f"sim: no dashboard: {exc}", file=sys.stderr, flush=True)
            return
        print(f"sim: dashboard of the run at {banner(self.address, self.token)}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self.running:
            self.running.stop()
        if self.store is not None:
            self.store.close()


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # a bad option (said in one line) or --help: the code, as a return
        return exc.code if isinstance(exc.code, int) else 2
    from rich.console import Console  # only now: a refused command line says so at once

    console = Console()
    if not console.is_terminal:  # a log or a pipe: wide enough for the summary table
        console = Console(width=120)
    if args.command == "run":
        return run_command(args, console)
    if args.command == "fit":
        from .fit.command import command as fit_command

        return fit_command(args)
    if args.command == "bench":
        from .bench.bench import command as bench_command

        return bench_command(args, console)
    return 2


if __name__ == "__main__":
    sys.exit(main())
