"""``sim fit`` on a shared-room run's store, then the fitted scenario at ``--scale 1, 4, 10``:
each point's ops/s, p99, verdict, and its calls per agent per second beside the fitted figure
(the report's comparison). Prints the figures as JSON; the fitted file is kept beside them.

    python -m sim.bench.fitscale [--agents 8] [--duration 10] [--scales 1,4,10] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..fit.command import command as fit_command
from .counting import SHARED_ROOM, sim_run


def point(report: dict[str, Any]) -> dict[str, Any]:
    rows = {r["figure"]: r for r in (report.get("fit") or {}).get("rows", [])}
    rate = rows.get("calls per agent per second", {})
    return {"agents": report["run"]["agents"], "ops_per_s": round(report["run"]["ops_per_s"], 1),
            "p99_ms": round(report["all"]["p99_ms"], 1), "verdict": report["verdict"],
            "calls_per_agent_s_fitted": rate.get("fitted"), "calls_per_agent_s_run": rate.get("run")}


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.bench.fitscale", description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", type=int, default=8, help="agents of the recorded shared-room run (default 8)")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of every run")
    ap.add_argument("--scales", default="1,4,10", help="the scales to run the fitted scenario at")
    ap.add_argument("--keep", type=Path, help="a folder to keep the runs and the fitted file in (must not exist)")
    args = ap.parse_args()
    scales = [int(x) for x in args.scales.split(",")]
    with tempfile.TemporaryDirectory(prefix="fitscale-bench-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=args.keep is None)
        env = dict(os.environ)
        recorded = sim_run(SHARED_ROOM, folder / "recorded", args.duration, args.agents, env)
        start = recorded["run"]["wall_start"]
        fitted = folder / "fitted.toml"
        t0 = time.monotonic()
        code = fit_command(argparse.Namespace(store=str(folder / "recorded" / "store" / "room.db"), since=str(start),
                                              until=str(start + args.duration), out=fitted))
        if code:
            return code
        result: dict[str, Any] = {"recorded": point(recorded), "fit_s": round(time.monotonic() - t0, 2),
                                  "fitted_file": fitted.read_text(), "scales": {}}
        for n in scales:
            report = sim_run(fitted, folder / f"scale-{n}", args.duration, None, env, ("--scale", str(n)))
            result["scales"][n] = point(report)
        result["load_average"] = os.getloadavg()
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
