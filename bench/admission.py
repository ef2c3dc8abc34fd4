"""Fair admission against SQLite's default busy handler, side by side, in one run.

N real processes (1, 4, 16, 64) each run a closed loop of lease-like write transactions on
one WAL database (synchronous=NORMAL) for a few seconds:

    BEGIN IMMEDIATE; DELETE expired rows; SELECT the holder of a random path among 8;
    INSERT OR REPLACE; COMMIT

once with (a) the default busy handler (``sqlite3.connect(timeout=5)``) and once with (b)
:class:`agents_room.store.sqlite.admission.WriteAdmission` around each transaction (the busy
handler stays as the backstop). With admission, SQLite's auto-checkpoint is off and one
writer in every 500 turns runs a PASSIVE checkpoint after its turn: the auto-checkpoint
runs inside COMMIT, so inside the turn, and the whole queue would wait for its fsyncs
(mode ``admission-ckpt-in-turn`` shows that cost; ``admission-strict`` is FIFO without
borrowed turns).

Prints, per setting: commits/s, p50/p99/p99.9 latency (from asking for the lock to COMMIT),
the longest wait for the lock, Jain's fairness index over the per-process commit counts,
the fewest/most commits of one process, and the load average around the run.

    .venv/bin/python bench/admission.py [--procs 1,4,16,64] [--seconds 3] [--rounds 2]
                                        [--modes default,admission] [--json out.json]

Absolute figures move from run to run and machine to machine (and with whatever else the
machine runs: see the load column); compare the modes of one run, interleaved by rounds.
Each worker is a fresh interpreter (never a fork of one holding a connection).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

from agents_room.store.sqlite.admission import WriteAdmission
from agents_room.store.errors import StoreBusy

PATHS = [f"src/file_{i}.py" for i in range(8)]
# mode: (WriteAdmission keyword arguments, or None for none; WAL checkpoint outside the turn)
MODES: dict[str, tuple[dict | None, bool]] = {
    "default": (None, False),
    "admission": ({}, True),
    "admission-strict": ({"borrow_max": 0}, True),  # strict FIFO: no borrowed turns
    "admission-ckpt-in-turn": ({}, False),  # SQLite's auto-checkpoint, inside the turn
}
CHECKPOINT_TURNS = 500  # one PASSIVE checkpoint every this many turns (~1000 WAL pages here)
LEASE_S = 0.002  # short leases, so the DELETE of expired rows has work to do


def _connect(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(db), timeout=5.0, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _prepare(db: Path) -> None:
    conn = _connect(db)
    conn.execute("CREATE TABLE IF NOT EXISTS leases (path TEXT PRIMARY KEY, holder TEXT NOT NULL, expires REAL NOT NULL)")
    conn.close()


def work(mode: str, db: Path, out: Path, seconds: float, timeout_s: float) -> None:
    """One worker: say ready, wait for the start time on stdin, loop, write raw figures."""
    options, checkpoint_outside = MODES[mode]
    conn = _connect(db)
    admission = None if options is None else WriteAdmission(db, timeout_s, **options)
    if checkpoint_outside:
        # SQLite's auto-checkpoint runs inside COMMIT, so inside the turn: the whole queue
        # would wait for its fsyncs. One writer in CHECKPOINT_TURNS runs it after its turn.
        conn.execute("PRAGMA wal_autocheckpoint=0")
    me = f"p{os.getpid()}"
    rng = random.Random(os.getpid())
    waits, lats = array("q"), array("q")
    busy = 0
    print("ready", flush=True)
    start_at = float(sys.stdin.readline())
    while time.monotonic() < start_at:
        time.sleep(0.0005)
    end = start_at + seconds
    clock = time.perf_counter_ns
    while time.monotonic() < end:
        path = rng.choice(PATHS)
        t0 = clock()
        try:
            if admission is None:
                conn.execute("BEGIN IMMEDIATE")
                t1 = clock()
                _transact(conn, me, path)
            else:
                with admission.turn():
                    conn.execute("BEGIN IMMEDIATE")
                    t1 = clock()
                    _transact(conn, me, path)
                if checkpoint_outside and admission.ticket % CHECKPOINT_TURNS == 0:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except (sqlite3.OperationalError, StoreBusy):
            busy += 1
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            continue
        t2 = clock()
        waits.append(t1 - t0)
        lats.append(t2 - t0)
    if admission is not None:
        admission.close()
    conn.close()
    with open(out, "wb") as f:
        f.write(json.dumps({"n": len(lats), "busy": busy}).encode() + b"\n")
        waits.tofile(f)
        lats.tofile(f)


def _transact(conn: sqlite3.Connection, me: str, path: str) -> None:
    now = time.time()
    conn.execute("DELETE FROM leases WHERE expires < ?", (now,))
    conn.execute("SELECT holder FROM leases WHERE path = ?", (path,)).fetchone()
    conn.execute("INSERT OR REPLACE INTO leases (path, holder, expires) VALUES (?, ?, ?)", (path, me, now + LEASE_S))
    conn.execute("COMMIT")


def _read(out: Path) -> tuple[dict, Any, Any]:
    import numpy as np  # the parent only: workers start faster without it

    with open(out, "rb") as f:
        meta = json.loads(f.readline())
        raw = np.frombuffer(f.read(), dtype=np.int64)
    n = meta["n"]
    return meta, raw[:n], raw[n:]


def run(mode: str, procs: int, seconds: float, timeout_s: float, folder: Path) -> dict:
    """Spawn ``procs`` workers on a fresh database, start them together, gather figures."""
    for old in folder.iterdir():
        old.unlink()
    db = folder / "bench.db"
    _prepare(db)
    outs = [folder / f"worker-{i}.bin" for i in range(procs)]
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", mode, str(db), str(out), str(seconds), str(timeout_s)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        for out in outs
    ]
    for w in workers:
        if w.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
            raise SystemExit(f"worker {w.pid} failed to start")
    start_at = time.monotonic() + 0.2
    for w in workers:
        w.stdin.write(f"{start_at}\n")  # type: ignore[union-attr]
        w.stdin.flush()  # type: ignore[union-attr]
    for w in workers:
        if w.wait() != 0:
            raise SystemExit(f"worker {w.pid} exited with {w.returncode}")
    load = os.getloadavg()[0]
    counts, waits, lats, busy = [], [], [], 0
    for out in outs:
        meta, w_ns, l_ns = _read(out)
        counts.append(meta["n"])
        busy += meta["busy"]
        waits.append(w_ns)
        lats.append(l_ns)
    import numpy as np

    return {"counts": counts, "lat_ms": np.concatenate(lats) / 1e6, "wait_ms": np.concatenate(waits) / 1e6,
            "busy": busy, "seconds": seconds, "load": load}


def summarise(mode: str, procs: int, rounds: list[dict]) -> dict:
    """One row from the rounds of one setting: throughput and Jain's index averaged over
    rounds, latencies pooled, extremes over all rounds."""
    import numpy as np

    lat = np.concatenate([r["lat_ms"] for r in rounds])
    counts = [np.array(r["counts"], dtype=float) for r in rounds]
    return {
        "mode": mode,
        "procs": procs,
        "rounds": len(rounds),
        "commits_per_s": float(np.mean([c.sum() / r["seconds"] for c, r in zip(counts, rounds)])),
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "p999_ms": float(np.percentile(lat, 99.9)),
        "max_wait_ms": float(max(r["wait_ms"].max() for r in rounds)),
        "jain": float(np.mean([c.sum() ** 2 / (len(c) * (c**2).sum()) for c in counts])),
        "fewest": int(min(c.min() for c in counts)),
        "most": int(max(c.max() for c in counts)),
        "busy": sum(r["busy"] for r in rounds),
        "load": float(np.mean([r["load"] for r in rounds])),
    }


def _print(rows: list[dict]) -> None:
    head = f"{'mode':<22} {'procs':>5} {'commits/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} " \
           f"{'max wait ms':>11} {'Jain':>6} {'fewest/most':>15} {'busy':>5} {'load':>5}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['mode']:<22} {r['procs']:>5} {r['commits_per_s']:>10,.0f} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} "
              f"{r['p999_ms']:>9.2f} {r['max_wait_ms']:>11.1f} {r['jain']:>6.3f} "
              f"{str(r['fewest']) + '/' + str(r['most']):>15} {r['busy']:>5} {r['load']:>5.1f}")
    by = {(r["mode"], r["procs"]): r for r in rows}
    for procs in sorted({r["procs"] for r in rows}):
        base = by.get(("default", procs))
        for mode in list(MODES)[1:]:
            if base and (mode, procs) in by:
                ratio = by[(mode, procs)]["commits_per_s"] / base["commits_per_s"]
                print(f"procs={procs}: {mode}/default throughput = {ratio:.2f}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        mode, db, out, seconds, timeout_s = argv[1:6]
        work(mode, Path(db), Path(out), float(seconds), float(timeout_s))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", default="1,4,16,64", help="process counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of each run")
    parser.add_argument("--rounds", type=int, default=1,
                        help="runs per setting, the modes interleaved (evens out a noisy machine)")
    parser.add_argument("--modes", default="default,admission",
                        help=f"some of: {', '.join(MODES)} (admission: the module's defaults, checkpoints outside the turn)")
    parser.add_argument("--timeout", type=float, default=5.0, help="admission timeout_s")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    for mode in modes:
        if mode not in MODES:
            parser.error(f"--modes: unknown mode {mode!r} (one of {', '.join(MODES)})")
    rows = []
    with tempfile.TemporaryDirectory(prefix="admission-bench-") as tmp:
        for procs in (int(p) for p in args.procs.split(",")):
            runs: dict[str, list[dict]] = {mode: [] for mode in modes}
            for _ in range(args.rounds):
                for mode in modes:
                    runs[mode].append(run(mode, procs, args.seconds, args.timeout, Path(tmp)))
            rows.extend(summarise(mode, procs, runs[mode]) for mode in modes)
    _print(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
