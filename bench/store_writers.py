"""The store's write admission under many writers: busy handler, strict queue, slices.

N fresh interpreters each open the store and call ``lease_claim`` (a new path each time, 1 s
leases) in a closed loop for a few seconds, all starting at one instant. Once per mode:

- ``busy``: ``AGENTS_ROOM_FAIR_ADMISSION=0``, SQLite's busy handler alone orders writers;
- ``strict``: the admission queue with no slices (``borrow_max=0``): one turn per hand-over;
- ``fixed``: slices of one length, 2 ms (up to 32 borrowed turns), as shipped before the
  adaptive slice;
- ``slices``: the store as shipped (a slice's length adapts to how many wait).

Prints, per mode and process count: claims/s, CPU per claim (all workers), Jain's index over
the per-process counts, fewest/most, and the longest single call. Modes alternate by rounds,
so a change in the machine's load touches them alike; compare within one run.

    .venv/bin/python bench/store_writers.py [--procs 16,64] [--seconds 3] [--rounds 2]
                                            [--modes busy,strict,fixed,slices]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("busy", "strict", "fixed", "slices")


def work(mode: str, db: str, seconds: float, start: float) -> None:
    """One worker: open, join, one untimed claim, wait for ``start`` (wall clock), loop."""
    from agents_room.store import Store
    from agents_room.store.sqlite.admission import WriteAdmission

    store = Store.open(db)
    if mode == "strict":  # the same queue without slices (a bench-only swap of the store's own)
        store.db._admission.close()
        store.db._admission = WriteAdmission(store.db.path, store.db.busy_timeout_s, borrow_max=0)
    elif mode == "fixed":  # the slice of the first pass: one length whoever waits
        store.db._admission.close()
        store.db._admission = WriteAdmission(store.db.path, store.db.busy_timeout_s, borrow_max=32, slice_s=0.002,
                                             slice_min_s=0.002)
    folder = os.path.dirname(db)
    sid = store.room_join(cwd=folder, pid=os.getpid(), label="w").session_id
    store.lease_claim(sid, f"warm-{os.getpid()}.py", ttl_s=1)
    time.sleep(max(start - time.time(), 0))
    n, longest, end = 0, 0.0, start + seconds
    cpu0 = time.process_time()
    while time.time() < end:
        t0 = time.monotonic()
        store.lease_claim(sid, f"p{os.getpid()}-{n}.py", ttl_s=1)
        longest = max(longest, time.monotonic() - t0)
        n += 1
    print(json.dumps({"n": n, "cpu_s": time.process_time() - cpu0, "longest_s": longest}))


def run(mode: str, procs: int, seconds: float) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        db = str(Path(folder) / "room.db")
        env = dict(os.environ, AGENTS_ROOM_DB=db, AGENTS_ROOM_FAIR_ADMISSION="0" if mode == "busy" else "1")
        start = time.time() + 2 + procs * 0.1  # every interpreter started and joined by then
        workers = [subprocess.Popen([sys.executable, __file__, "--work", mode, db, str(seconds), str(start)],
                                    stdout=subprocess.PIPE, env=env) for _ in range(procs)]
        results = [json.loads(w.communicate()[0]) for w in workers]
    counts = [r["n"] for r in results]
    total = sum(counts)
    return {"mode": mode, "procs": procs, "per_s": total / seconds,
            "cpu_us": sum(r["cpu_s"] for r in results) / max(total, 1) * 1e6,
            "jain": total ** 2 / (len(counts) * sum(c * c for c in counts)) if total else 0.0,
            "fewest": min(counts), "most": max(counts), "longest_ms": max(r["longest_s"] for r in results) * 1e3,
            "load": os.getloadavg()[0]}


def main() -> int:
    if sys.argv[1:2] == ["--work"]:
        work(sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", default="16,64", help="process counts (default 16,64)")
    ap.add_argument("--seconds", type=float, default=3.0, help="measured seconds per run (default 3)")
    ap.add_argument("--rounds", type=int, default=2, help="runs per mode and count, alternating (default 2)")
    ap.add_argument("--modes", default=",".join(MODES), help=f"of {', '.join(MODES)} (default all)")
    args = ap.parse_args()
    modes = args.modes.split(",")
    if bad := set(modes) - set(MODES):
        ap.error(f"--modes: unknown {', '.join(sorted(bad))}; choose from {', '.join(MODES)}")
    print(f"{'mode':<8}{'procs':>6}{'claims/s':>10}{'CPU µs':>8}{'Jain':>7}{'fewest/most':>14}{'longest ms':>12}{'load':>6}")
    for procs in (int(p) for p in args.procs.split(",")):
        for _ in range(args.rounds):
            for mode in modes:
                r = run(mode, procs, args.seconds)
                print(f"{mode:<8}{procs:>6}{r['per_s']:>10,.0f}{r['cpu_us']:>8.0f}{r['jain']:>7.3f}"
                      f"{r['fewest']:>7}/{r['most']:<6}{r['longest_ms']:>12.0f}{r['load']:>6.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
