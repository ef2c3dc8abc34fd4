"""What counting calls (store/callcounts.py) costs: the hook's news path with counting on and
off (``AGENTS_ROOM_COUNT_CALLS=0``), runs interleaved so both see the same machine; and a
shared-room run's throughput with counting on and off, runs interleaved in pairs (the same
scenario, seed and duration). Prints the figures as JSON.

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


def hook_news(folder: Path, runs: int) -> dict[str, Any]:
    """Wall ms of the hook's news path (one new message announced), counting on and off in turn."""
    from agents_room.store import Store

    repo = folder / "repo"
    (repo / ".git").mkdir(parents=True)
    db = folder / "store" / "room.db"
    key = str(uuid.uuid4())
    with Store.open(db) as store:
        me = store.room_join(cwd=str(repo), pid=None, label="hooked", harness_key=key).session_id
        peer = store.room_join(cwd=str(repo), pid=None, label="peer").session_id
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV} | {"AGENTS_ROOM_DB": str(db)}
    hook = shlex.split(installed_command(repo))
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
    for i in range(pairs):
        for mode in ("on", "off") if i % 2 == 0 else ("off", "on"):
            report = sim_run(SHARED_ROOM, folder / f"{mode}-{i}", duration, agents,
                             base | {"AGENTS_ROOM_COUNT_CALLS": "1" if mode == "on" else "0"})
            if report["verdict"] != "valid":
                raise RuntimeError(f"run {mode}-{i} was {report['verdict']}")
            got[mode].append(report["run"]["ops_per_s"])
    on, off = float(np.mean(got["on"])), float(np.mean(got["off"]))
    return {"pairs": pairs, "duration_s": duration, "agents": agents or 24, "on_ops_per_s": got["on"],
            "off_ops_per_s": got["off"], "cost_percent": 100 * (off - on) / off}


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.bench.counting", description=__doc__.split("\n\n")[0])
    ap.add_argument("--hook-runs", type=int, default=40, help="hook runs with counting on, and as many off")
    ap.add_argument("--pairs", type=int, default=2, help="shared-room runs with counting on, and as many off")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of each shared-room run")
    ap.add_argument("--agents", type=int, help="agents of each shared-room run (default the scenario's 24)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="counting-bench-") as tmp:
        result = {"hook_news": hook_news(Path(tmp) / "hook", args.hook_runs),
                  "shared_room": throughput(Path(tmp), args.pairs, args.duration, args.agents),
                  "load_average": os.getloadavg()}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
