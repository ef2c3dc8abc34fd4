"""What counting calls (store/callcounts.py) costs: the hook's news path with counting on and
off (``AGENTS_ROOM_COUNT_CALLS=0``), runs interleaved so both see the same machine; and a
shared-room run's throughput with counting on and off, runs interleaved in pairs (the same
scenario, seed and duration). Prints the figures as JSON.

The hook's news path is measured twice: as the harness runs it (a process per event, whose
start-up noise on a shared machine dwarfs a millisecond) and inside this process (the same
work from opening the database to closing it, ten times as many runs).

    python -m sim.bench.counting [--hook-runs 40] [--pairs 2] [--duration 10] [--agents 24]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from .hook import _FOREIGN_ENV, _timed, installed_command

ROOT = Path(__file__).resolve().parents[2]
SHARED_ROOM = ROOT / "scenarios" / "shared-room.toml"


def _two_sessions(folder: Path) -> tuple[Path, Path, str, str, str]:
    """A repo and a store in ``folder`` with the hooked session (by its harness key) and a peer:
    (repo, store file, key, the hooked session's id, the peer's id)."""
    from agents_room.store import Store

    repo = folder / "repo"
    (repo / ".git").mkdir(parents=True)
    db = folder / "store" / "room.db"
    key = str(uuid.uuid4())
    with Store.open(db) as store:
        me = store.room_join(cwd=str(repo), pid=None, label="hooked", harness_key=key).session_id
        peer = store.room_join(cwd=str(repo), pid=None, label="peer").session_id
    return repo, db, key, me, peer


def hook_news(folder: Path, runs: int) -> dict[str, Any]:
    """Wall ms of the hook's news path (one new message announced), counting on and off in turn."""
    from agents_room.store import Store

    repo, db, key, me, peer = _two_sessions(folder)
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV} | {"AGENTS_ROOM_DB": str(db)}
    hook = shlex.split(installed_command(repo))  # SessionStart: the plain Python command
    event = json.dumps({"session_id": key, "hook_event_name": "UserPromptSubmit", "cwd": str(repo), "prompt": "go"})
    walls: dict[str, list[float]] = {"on": [], "off": []}
    with Store.open(db) as store:
        for i in range(2 * runs):
            mode = ("on", "off")[i % 2] if i % 4 < 2 else ("off", "on")[i % 2]  # ABBA: no order bias
            store.msg_send(peer, me, subject=f"new {i}")
            wall, _, said = _timed(hook, event, env | {"AGENTS_ROOM_COUNT_CALLS": "1" if mode == "on" else "0"}, repo)
            if "additionalContext" not in said:
                raise RuntimeError(f"the hook did not announce the new message: {said[:200]!r}")
            walls[mode].append(wall)
        with store.db.read() as tx:  # the counts the "on" runs wrote: proof they counted, and only they
            counted = tx.scalar("SELECT coalesce(sum(n), 0) FROM call_counts WHERE tool = 'hook_news'")
    on, off = np.median(walls["on"]), np.median(walls["off"])
    return {"runs_each": runs, "on_median_ms": float(on), "off_median_ms": float(off),
            "on_p90_ms": float(np.percentile(walls["on"], 90)), "off_p90_ms": float(np.percentile(walls["off"], 90)),
            "added_ms": float(on - off), "hook_news_counted": int(counted)}


def news_in_process(folder: Path, runs: int) -> dict[str, Any]:
    """The hook's news path inside this process, from opening the database to closing it
    (``hook.respond``'s work without the interpreter's start, whose noise on a shared machine
    is larger than what counting adds): CPU and wall microseconds, counting on and off in turn."""
    import time

    from agents_room.harnesses.hook import respond
    from agents_room.store import Store

    repo, db, key, me, peer = _two_sessions(folder)
    data = {"session_id": key, "hook_event_name": "UserPromptSubmit"}
    took: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    before = os.environ.get("AGENTS_ROOM_COUNT_CALLS")
    try:
        with Store.open(db) as store:
            for i in range(2 * runs):
                mode = ("on", "off")[i % 2] if i % 4 < 2 else ("off", "on")[i % 2]
                store.msg_send(peer, me, subject=f"new {i}")
                os.environ["AGENTS_ROOM_COUNT_CALLS"] = "1" if mode == "on" else "0"
                t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                said = respond(data, str(db))
                took[mode].append(((time.perf_counter_ns() - t0) / 1e3, (time.thread_time_ns() - c0) / 1e3))
                if not said:
                    raise RuntimeError("the news path did not announce the new message")
    finally:
        os.environ.pop("AGENTS_ROOM_COUNT_CALLS", None)
        if before is not None:
            os.environ["AGENTS_ROOM_COUNT_CALLS"] = before
    med = {m: (float(np.median([w for w, _ in v])), float(np.median([c for _, c in v]))) for m, v in took.items()}
    return {"runs_each": runs, "on_wall_us": med["on"][0], "off_wall_us": med["off"][0], "on_cpu_us": med["on"][1],
            "off_cpu_us": med["off"][1], "added_cpu_us": med["on"][1] - med["off"][1]}


def count_cost(rounds: int = 20, calls: int = 5000) -> dict[str, Any]:
    """CPU µs a counted call adds to its process: the two clock readings around it, noting it,
    and its share of the tally when the counts are written (best and median of ``rounds``)."""
    import time

    from agents_room.store.callcounts import CallCounts
    from agents_room.store.clock import Clock

    clock = Clock()
    counter = CallCounts(clock.now)
    took = []
    for _ in range(rounds):
        c0 = time.thread_time_ns()
        for _ in range(calls):
            t = time.monotonic()
            counter.count("lease_claim", "0123456789abcdef", "ok", t, time.monotonic())
        with counter._lock:
            counter._tally()
        took.append((time.thread_time_ns() - c0) / 1e3 / calls)
    took.sort()
    return {"best_us_per_call": took[0], "median_us_per_call": took[len(took) // 2]}


def calls_in_process(folder: Path, rounds: int, calls: int = 600) -> dict[str, Any]:
    """CPU µs per store call through the direct driver (the simulator's agents' server: it
    counts as ``agents-room serve`` does), a claim, an unread count and a release in turn, on
    two stores of this process, one counting and one not, rounds alternating; the best round
    of each (the one least disturbed by the machine's other work)."""
    import time

    from ..run.drivers import DirectDriver

    repo = folder / "repo"
    (repo / ".git").mkdir(parents=True)
    drivers = {}
    for mode in ("on", "off"):
        os.environ["AGENTS_ROOM_COUNT_CALLS"] = "1" if mode == "on" else "0"
        drivers[mode] = DirectDriver(str(folder / f"{mode}.db"), str(repo), 5.0)
    os.environ.pop("AGENTS_ROOM_COUNT_CALLS")
    best: dict[str, list[float]] = {"on": [], "off": []}
    try:
        sids = {m: d.call("room_join", {})["session_id"] for m, d in drivers.items()}
        for r in range(2 * rounds):
            mode = ("on", "off")[r % 2] if r % 4 < 2 else ("off", "on")[r % 2]
            d, sid = drivers[mode], sids[mode]
            c0 = time.thread_time_ns()
            for i in range(calls // 3):
                d.call("lease_claim", {"session_id": sid, "path": f"f{i % 7}.py", "ttl_s": 60})
                d.call("msg_unread", {"session_id": sid})
                d.call("lease_release", {"session_id": sid, "path": f"f{i % 7}.py"})
            best[mode].append((time.thread_time_ns() - c0) / 1e3 / calls)
    finally:
        for d in drivers.values():
            d.close()
    on, off = min(best["on"]), min(best["off"])
    return {"rounds_each": rounds, "calls_per_round": calls, "on_cpu_us_per_call": on, "off_cpu_us_per_call": off,
            "cost_percent": 100 * (on - off) / off}


def sim_run(scenario: Path, out: Path, duration: float, agents: int | None, env: dict[str, str],
            extra: tuple[str, ...] = ()) -> dict[str, Any]:
    argv = [sys.executable, "-m", "sim.cli", "run", str(scenario), "--out", str(out), "--duration", str(duration),
            "--no-live", "--no-plots", *extra]
    if agents:
        argv += ["--agents", str(agents)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"sim run failed ({done.returncode}): {done.stderr[-500:]}")
    return json.loads((out / "report.json").read_text())


def throughput(folder: Path, pairs: int, duration: float, agents: int | None) -> dict[str, Any]:
    """ops/s of shared-room runs, counting on and off, alternating (ABBA over pairs)."""
    base = {k: v for k, v in os.environ.items() if k != "AGENTS_ROOM_COUNT_CALLS"}
    got: dict[str, list[float]] = {"on": [], "off": []}
    cpu: dict[str, list[float]] = {"on": [], "off": []}  # the agents' CPU µs per operation, store and harness
    for i in range(pairs):
        for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):
            report = sim_run(SHARED_ROOM, folder / f"{mode}-{i}", duration, agents,
                             base | {"AGENTS_ROOM_COUNT_CALLS": "1" if mode == "on" else "0"})
            if report["verdict"] != "valid":
                raise RuntimeError(f"run {mode}-{i} was {report['verdict']}")
            got[mode].append(report["run"]["ops_per_s"])
            cpu[mode].append(report["cost"]["store_us_per_op"] + report["cost"]["harness_us_per_op"])
    on, off = float(np.mean(got["on"])), float(np.mean(got["off"]))
    cpu_on, cpu_off = float(np.median(cpu["on"])), float(np.median(cpu["off"]))
    # On a machine whose cores are busy with other work, ops/s swings by tens of percent from run
    # to run; the CPU an operation costs the agents moves far less, and a closed loop of agents
    # that share the cores runs at a rate inverse to it.
    return {"pairs": pairs, "duration_s": duration, "agents": agents or 24, "on_ops_per_s": got["on"],
            "off_ops_per_s": got["off"], "ops_cost_percent": 100 * (off - on) / off,
            "on_cpu_us_per_op": cpu["on"], "off_cpu_us_per_op": cpu["off"],
            "cpu_cost_percent": 100 * (cpu_on - cpu_off) / cpu_off}


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.bench.counting", description=__doc__.split("\n\n")[0])
    ap.add_argument("--hook-runs", type=int, default=40, help="hook runs with counting on, and as many off")
    ap.add_argument("--rounds", type=int, default=10, help="in-process rounds of store calls with counting on, "
                    "and as many off")
    ap.add_argument("--pairs", type=int, default=2, help="shared-room runs with counting on, and as many off")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of each shared-room run")
    ap.add_argument("--agents", type=int, help="agents of each shared-room run (default the scenario's 24)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="counting-bench-") as tmp:
        result = {"hook_news": hook_news(Path(tmp) / "hook", args.hook_runs),
                  "hook_news_in_process": news_in_process(Path(tmp) / "inproc", 10 * args.hook_runs),
                  "count_cost": count_cost(),
                  "store_calls_in_process": calls_in_process(Path(tmp) / "calls", args.rounds),
                  "shared_room": throughput(Path(tmp), args.pairs, args.duration, args.agents),
                  "load_average": os.getloadavg()}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
