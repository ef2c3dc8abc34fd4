"""The hook command's wall time from process start, as a harness runs it: spawn, the
interpreter's start-up, the hook's answer, exit. The command is the one ``agents-room install
claude-code`` writes (taken from its plan, reported as ``command``), run as the argv the
harness's shell would run. ``python -c pass`` and ``python -S -c pass`` are measured beside
it: the floor any Python hook has on this machine, with and without ``site``.

Two paths: *quiet* (a ``UserPromptSubmit`` of a session with nothing new, the common case:
one read-only probe) and *news* (one unannounced message: the store announces and marks
it). Each run's output is checked, so the figures are of the path they claim.

    python -m sim.bench.hook [--runs 50]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ..run.drivers import serve_command

_FOREIGN_ENV = ("AGENTS_ROOM_HARNESS_KEY", "CLAUDE_CODE_SESSION_ID", "CLAUDECODE", "CLAUDE_PROJECT_DIR",
                "CODEX_THREAD_ID", "AGENTS_ROOM_TOKEN")


def _timed(argv: list[str], stdin: str, env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Wall and CPU milliseconds of one run from spawn to exit, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter_ns()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, cwd=cwd, timeout=60)
    wall = (time.perf_counter_ns() - t0) / 1e6
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    if done.returncode != 0 or done.stderr.strip():
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[:300]}")
    return wall, cpu, done.stdout


def _summary(walls: list[float], cpus: list[float]) -> dict[str, Any]:
    w = np.asarray(walls)
    return {"runs": len(walls), "wall_median_ms": float(np.median(w)), "wall_p90_ms": float(np.percentile(w, 90)),
            "wall_min_ms": float(w.min()), "wall_max_ms": float(w.max()), "cpu_median_ms": float(np.median(cpus))}


def installed_command(folder: Path) -> str:
    """The ``UserPromptSubmit`` hook command ``agents-room install claude-code`` would write
    (its plan for a project in ``folder``; nothing is written)."""
    from agents_room.harnesses.install import hook_command
    from agents_room.harnesses.registry import plan

    [settings] = [c for c in plan("claude-code", "project", folder, folder, serve_command(), hook_command())
                  if c.path.name == "settings.local.json"]  # the hooks: this machine's paths, local settings
    [group] = json.loads(settings.after)["hooks"]["UserPromptSubmit"]
    [hook] = group["hooks"]
    return str(hook["command"])


def _floor(argv: list[str], runs: int, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu, _ = _timed(argv, "", env, cwd)
        walls.append(wall)
        cpus.append(cpu)
    return _summary(walls, cpus)


def measure(folder: Path, runs: int = 50) -> dict[str, Any]:
    from agents_room.store import Store

    folder.mkdir(parents=True, exist_ok=True)
    repo = folder / "repo"
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    db = folder / "store" / "room.db"
    key = str(uuid.uuid4())
    with Store.open(db) as store:
        me = store.room_join(cwd=str(repo), pid=None, label="hooked", harness_key=key).session_id
        peer = store.room_join(cwd=str(repo), pid=None, label="peer").session_id
        for i in range(200):  # some history, so the probe's lookups are not on empty tables
            store.msg_send(peer, me, subject=f"old {i}")
        store.hook_event(me, announce=True)
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}
    env["AGENTS_ROOM_DB"] = str(db)
    command = installed_command(repo)
    hook = shlex.split(command)
    event = json.dumps({"session_id": key, "hook_event_name": "UserPromptSubmit", "cwd": str(repo), "prompt": "go"})
    out: dict[str, Any] = {"command": command, "event": "UserPromptSubmit"}
    out["python_c_pass"] = _floor([sys.executable, "-c", "pass"], runs, env, repo)
    out["python_S_c_pass"] = _floor([sys.executable, "-S", "-c", "pass"], runs, env, repo)

    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu, said = _timed(hook, event, env, repo)
        if said.strip():
            raise RuntimeError(f"the quiet hook said something: {said[:200]}")
        walls.append(wall)
        cpus.append(cpu)
    out["quiet"] = _summary(walls, cpus)

    walls, cpus = [], []
    with Store.open(db) as store:
        for i in range(runs):
            store.msg_send(peer, me, subject=f"new {i}")  # untimed: one message to announce
            wall, cpu, said = _timed(hook, event, env, repo)
            if "additionalContext" not in said:
                raise RuntimeError(f"the hook did not announce the new message: {said[:200]!r}")
            walls.append(wall)
            cpus.append(cpu)
    out["news"] = _summary(walls, cpus)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.bench.hook", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50, help="runs of each (default 50)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hook-bench-") as tmp:
        result = measure(Path(tmp), args.runs)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
