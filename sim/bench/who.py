"""``room_who``'s latency with many sessions (issue 19: p99 <= 20 ms with 64 sessions on a
loaded machine). Each session is a real process carrying its harness key in its environment,
recorded with its pid, as a harness's server records its agent; ``gone`` of them have exited
(their sessions stay until pruned: what room_who must call gone). One caller process times
``room_who()`` (every session of the store) ``calls`` times, ``gap_s`` apart, in one of two
ways:

- ``cold``: the process's caches (its scan, its proofs of alive) are emptied before each call, as in a fleet of servers
  each calling now and then (every call pays whatever liveness costs);
- ``warm``: one process calling in a loop (its caches, 1 s, shared between calls).

    python -m sim.bench.who [--sessions 64] [--gone 8] [--calls 200] [--store URL]

``measure(folder)`` is what ``sim bench`` reports against the target (cold, SQLite).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

_CALLER = r"""
import json, sys, time
from agents_room.store import Store
liveness = sys.modules["agents_room.store.liveness"]  # the module (the package exports a function of that name)
where, mode, calls, gap_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
store = Store.open(where)
lat, counts = [], {}
for _ in range(calls):
    if mode == "cold":
        liveness._recent.clear()
        getattr(liveness, "_proven", {}).clear()
    t0 = time.perf_counter()
    members = store.room_who()
    lat.append((time.perf_counter() - t0) * 1e3)
    for m in members:
        counts[m.liveness] = counts.get(m.liveness, 0) + 1
    time.sleep(gap_s)
print(json.dumps({"lat": lat, "counts": counts, "members": len(members)}))
"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def run(where: str, sessions: int = 64, gone: int = 8, calls: int = 200, gap_s: float = 0.02,
        mode: str = "cold", python: str = sys.executable, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Join ``sessions`` sessions of real processes into the store ``where``, end ``gone`` of
    them, and time room_who from a process of its own; the processes are ended after."""
    from agents_room.store import Store

    agents = []
    try:
        with Store.open(where) as store:
            for i in range(sessions):
                key = str(uuid.uuid4())
                proc = subprocess.Popen(["sleep", "600"], env={**os.environ, "SOME_HARNESS_SESSION": key})
                agents.append(proc)
                store.room_join(cwd=f"/bench/repo{i % 4}", pid=proc.pid, harness_key=key, label=f"a{i}")
        for proc in agents[:gone]:
            proc.kill()
            proc.wait()
        done = subprocess.run([python, "-c", _CALLER, where, mode, str(calls), str(gap_s)], capture_output=True,
                              text=True, timeout=600, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"room_who caller failed: {done.stderr.strip()[-400:]}")
        out = json.loads(done.stdout)
    finally:
        for proc in agents:
            proc.kill()
            proc.wait()
    lat = out["lat"]
    return {"sessions": out["members"], "mode": mode, "calls": calls, "p50_ms": round(_pct(lat, 0.5), 2),
            "p99_ms": round(_pct(lat, 0.99), 2), "max_ms": round(max(lat), 2),
            "liveness": {k: v // calls for k, v in sorted(out["counts"].items())}, "load": os.getloadavg()[0]}


def measure(folder: Path) -> dict[str, Any]:
    """What ``sim bench`` reports: cold calls with 64 sessions (8 gone) on SQLite."""
    folder.mkdir(parents=True, exist_ok=True)
    found = run(str(folder / "who.db"), calls=100)
    found["note"] = f"cold calls, {found['liveness']}, load {found['load']:.0f}"
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.bench.who", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--gone", type=int, default=8)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--gap-s", type=float, default=0.02)
    ap.add_argument("--modes", default="cold,warm")
    ap.add_argument("--store", help="a postgresql:// URL (default: a SQLite file in a temporary folder)")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter of the caller (another checkout's, to measure before a change)")
    args = ap.parse_args(argv)
    print(f"load before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for n, mode in enumerate(args.modes.split(",")):
            where = args.store or str(Path(tmp) / f"who{n}.db")
            print(json.dumps(run(where, args.sessions, args.gone, args.calls, args.gap_s, mode, args.python)),
                  flush=True)
    print(f"load after: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
