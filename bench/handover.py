"""What one hand-over of the write lock costs the store's next writer, without the queue.

SQLite drops a connection's page cache whenever another connection has committed since its
last transaction. Four connections to one store, in one process and one thread (no
scheduling, no wake-ups, no admission: ``AGENTS_ROOM_FAIR_ADMISSION=0``), take turns at
``lease_claim`` (a new path each time, 1 s leases), ``K`` claims each before the next
connection's run. The CPU per claim against ``K`` is the cold cache's price per hand-over,
spread over a run of ``K``: what a slice of ``K`` turns pays for it.

    .venv/bin/python bench/handover.py [--claims 6000] [--rounds 3]

Each run uses its own store in a temporary folder (never ~/.agents-room).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agents_room.store import Store

RUNS = (0, 32, 7, 3, 1)  # claims per connection before the next one's turn; 0: never hand over


def cpu_per_claim(stores: list[Store], sessions: list[str], run: int, claims: int, start: int) -> float:
    c0 = time.process_time()
    done, conn = 0, 0
    while done < claims:
        for _ in range(min(run or claims, claims - done)):
            stores[conn].lease_claim(sessions[conn], path=f"src/w{conn}/c{start + done}.py", ttl_s=1)
            done += 1
        conn = (conn + 1) % len(stores)
    return (time.process_time() - c0) / claims * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--claims", type=int, default=6000, help="timed claims per run length and round (default 6000)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over every run length (default 3)")
    args = ap.parse_args()
    os.environ["AGENTS_ROOM_FAIR_ADMISSION"] = "0"  # read when a store is opened

    with tempfile.TemporaryDirectory(prefix="handover-bench-") as tmp:
        db = Path(tmp, "room.db")
        stores = [Store.open(db) for _ in range(4)]
        try:
            sessions = [s.room_join(cwd=tmp, pid=os.getpid(), label=f"w{i}").session_id for i, s in enumerate(stores)]
            cpu_per_claim(stores, sessions, 0, 500, 0)  # warm-up
            results: dict[int, list[float]] = {run: [] for run in RUNS}
            start = 500
            for _ in range(args.rounds):
                for run in RUNS:  # alternating, so a change in the machine's load touches all alike
                    results[run].append(cpu_per_claim(stores, sessions, run, args.claims, start))
                    start += args.claims
        finally:
            for s in stores:
                s.close()
    base = statistics.median(results[0])
    print(f"lease_claim, 4 connections in one thread ({os.cpu_count()} CPUs, Python {sys.version.split()[0]})")
    print(f"{'claims per hand-over':>21}{'CPU µs per claim':>18}{'over none':>11}{'per hand-over':>15}")
    for run in RUNS:
        cpu = statistics.median(results[run])
        per = "" if run == 0 else f"{(cpu - base) * run:13.0f} µs"
        print(f"{run or 'none':>21}{cpu:18.1f}{cpu - base:+11.1f}{per:>15}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
