"""A claim's cost at 10 and at 10,000 live leases, on both engines: the holder checks are
index lookups (the IN list of leases covering the path, the range beneath a directory), so
the cost must not grow with the number of live leases.

    .venv/bin/python bench/directory_claims.py [--live 10,10000] [--claims 400] [--fsync on|off]

For each engine and each count of live leases, a fresh store is filled (through the store's
own claims, by 20 sessions) with that many live leases: files spread over 9 directories,
and one directory lease in every 50 leases. One session then times, in one process, claims
of four kinds (each ``--claims`` times, interleaved):

    file-free       a file beneath no lease (granted)
    file-under-dir  a file beneath a live directory lease of another session (denied)
    dir-free        a directory with nothing live beneath or above it (granted)
    dir-over-files  a directory over live file leases of others (denied)

and prints the median and p99 per kind. SQLite: a file in a temporary folder. PostgreSQL: a
throwaway cluster (tests/pgcluster.py). Compare the two counts within one run; give the
load (printed) beside any figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from agents_room.store import Store  # noqa: E402

KINDS = ("file-free", "file-under-dir", "dir-free", "dir-over-files")


def fill(store: Store, live: int) -> list[str]:
    """``live`` live leases held by 20 sessions; returns the directories leased."""
    holders = [store.room_join(cwd="/bench", pid=None, label=f"h{i}").session_id for i in range(20)]
    dirs = []
    for i in range(live):
        sid = holders[i % len(holders)]
        if i % 50 == 0:
            path = f"/bench/leased/d{i}/"
            dirs.append(path)
        else:
            path = f"/bench/src/m{i % 9}/f{i}.py"
        assert store.lease_claim(sid, path, ttl_s=86400).ok, path
    return dirs


def measure(store: Store, claims: int, dirs: list[str]) -> dict[str, list[float]]:
    me = store.room_join(cwd="/bench", pid=None, label="timed").session_id
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    for i in range(claims):
        cases = {
            "file-free": (f"/bench/free/p{i}/x.py", True),
            "file-under-dir": (f"{dirs[i % len(dirs)]}sub/x{i}.py", False),
            "dir-free": (f"/bench/fresh/d{i}/", True),
            "dir-over-files": (f"/bench/src/m{i % 9}/", False),
        }
        for kind, (path, granted) in cases.items():
            t0 = time.perf_counter()
            c = store.lease_claim(me, path, ttl_s=86400)
            times[kind].append(time.perf_counter() - t0)
            assert c.ok == granted, (kind, path, c.reason)
    return times


def summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"p50_ms": round(xs[len(xs) // 2] * 1e3, 3), "p99_ms": round(xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1e3, 3)}


def main() -> None:
    import pgcluster

    ap = argparse.ArgumentParser()
    ap.add_argument("--live", default="10,10000")
    ap.add_argument("--claims", type=int, default=400)
    ap.add_argument("--fsync", default="off", choices=["on", "off"])
    args = ap.parse_args()
    cluster = pgcluster.start_cluster(fsync=args.fsync == "on")
    try:
        print(f"load: {os.getloadavg()}, PostgreSQL fsync={args.fsync}", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            for n, live in enumerate(int(x) for x in args.live.split(",")):
                for engine in ("sqlite", "postgresql"):
                    where = str(Path(tmp) / f"s{n}" / "room.db") if engine == "sqlite" else pgcluster.new_schema(cluster)
                    with Store.open(where, busy_timeout_s=30.0) as store:
                        dirs = fill(store, live)
                        times = measure(store, args.claims, dirs)
                    for kind in KINDS:
                        print(json.dumps({"engine": engine, "live": live, "kind": kind, **summary(times[kind])}),
                              flush=True)
        print(f"load: {os.getloadavg()}")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
