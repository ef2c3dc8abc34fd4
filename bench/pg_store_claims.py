"""``lease_claim`` through the store on both engines, side by side in one run: N processes,
each claiming its own paths (a fresh grant or a re-claim, no denials), for a few seconds.
Throughput and latency percentiles per engine and process count.

    .venv/bin/python bench/pg_store_claims.py [--procs 1,4,16] [--seconds 3] [--fsync on|off]

SQLite: a file in a temporary folder. PostgreSQL: a throwaway cluster (tests/pgcluster.py),
``fsync`` as given (on: what a real server does), the server's default synchronous_commit.
Compare ratios within one run; give the load (uptime) beside any figure.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

_WORKER = r"""
import json, os, sys, time
from agents_room.store import Store
where, seconds, me, go = sys.argv[1:5]
store = Store.open(where, busy_timeout_s=30.0)
sid = store.room_join(cwd="/bench", pid=None, label=f"w{me}").session_id
lat, i = [], 0
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
end = time.monotonic() + float(seconds)
while time.monotonic() < end:
    t0 = time.perf_counter()
    store.lease_claim(sid, f"/bench/{me}/{i % 50}")
    lat.append(time.perf_counter() - t0)
    i += 1
print(json.dumps(lat), flush=True)
"""


def run(where: str, procs: int, seconds: float, go: Path) -> dict:
    from agents_room.store import Store

    Store.open(where).close()
    workers = [subprocess.Popen([sys.executable, "-c", _WORKER, where, str(seconds), str(i), str(go)],
                                stdout=subprocess.PIPE, text=True) for i in range(procs)]
    for w in workers:
        assert w.stdout is not None and w.stdout.readline().strip() == "ready"
    go.touch()
    lat = sorted(x for w in workers for x in json.loads(w.communicate()[0].strip().splitlines()[-1]))
    n = len(lat)
    return {"procs": procs, "claims_per_s": round(n / seconds), "p50_ms": round(lat[n // 2] * 1e3, 2),
            "p99_ms": round(lat[min(n - 1, int(n * 0.99))] * 1e3, 2)}


if __name__ == "__main__":
    import pgcluster

    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", default="1,4,16")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--fsync", default="on", choices=["on", "off"])
    args = ap.parse_args()
    cluster = pgcluster.start_cluster(fsync=args.fsync == "on")
    try:
        print(f"load: {os.getloadavg()}, PostgreSQL fsync={args.fsync}")
        with tempfile.TemporaryDirectory() as tmp:
            for n, procs in enumerate(int(p) for p in args.procs.split(",")):
                for engine in ("sqlite", "postgresql"):
                    where = (str(Path(tmp) / f"s{n}" / "room.db") if engine == "sqlite"
                             else pgcluster.new_schema(cluster))
                    print(json.dumps({"engine": engine, **run(where, procs, args.seconds, Path(tmp) / f"go-{engine}-{n}")}),
                          flush=True)
        print(f"load: {os.getloadavg()}")
    finally:
        cluster.stop()
