"""What the store's one write lock costs on PostgreSQL, and what the lease functions cost
without it (docs/decisions.md, "What one lock costs"). N processes of bare psycopg, each a
closed loop, every kind's window in turn, round after round; writes per second (the median
over rounds) and each over plain commits from as many processes in the same round.

    .venv/bin/python bench/pg_lock_designs.py [--procs 1,4,16] [--seconds 3] [--rounds 3]

Kinds (a claim+release pair counts two writes):
- ``plain``: one INSERT into ``events``, autocommit, ``synchronous_commit`` on: the baseline
  (``sim bench``'s ``plain-pg``, sim/bench/raw_pg.py).
- ``locked``: the same INSERT under the store's write lock, committed as the store commits
  (asynchronously in the lock, the flush after it): the ceiling of every write under it
  (``sim bench``'s ``locked-pg``).
- ``shipped``: claim+release pairs through the shipped functions (migrate_4.sql), sent as the
  store sends them (BEGIN, the function, COMMIT, the flush; one round trip).
- ``lean``: the shipped functions with the sweep run only once an index probe finds an
  expired lease, and a claim's caller look-up and touch in one UPDATE.
- ``try-sync``: the shipped functions committing synchronously in the lock when they found it
  free (``pg_try_advisory_xact_lock``); the flush after them then writes nothing.
- ``per-path``: the shipped functions with the one lock replaced by per-path advisory locks
  (exclusive on the path, shared on each directory above it, in key order), the token from a
  sequence, the sweep limited to the path, committed synchronously. A prototype of the
  locking only: the checker's one order by ``seq`` does not hold for it.

The variants are the store's own functions as the server holds them (``pg_get_functiondef``)
with snippets replaced (each must occur as written), created under other names in the
bench's own schema; nothing of the store changes.
Beside each rate, ``cpu_us/write``: the machine's CPU time per write over the window's steady
middle (/proc/stat), the median round's. On 2 cores a kind cannot pass 2 s / its CPU per write a
second, however it locks; read it on an otherwise quiet machine.
Each process claims fresh paths as its own session. A throwaway cluster (tests/pgcluster.py)
with ``fsync`` on. Compare ratios within one run; give the load beside any figure.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
KINDS = ("plain", "locked", "shipped", "lean", "try-sync", "per-path")
LOCK = "PERFORM pg_advisory_xact_lock(7018704367216558081), set_config('synchronous_commit', 'off', true);"
SWEEP = "WITH gone AS (\n        DELETE FROM leases WHERE expires_at <= o_now"
COVERING = ("ARRAY(SELECT left(p_path, i) FROM generate_series(1, length(p_path) - 1) i\n"
            "                      WHERE substr(p_path, i, 1) = '/') || p_path")
PATH_LOCKS = (f"PERFORM CASE WHEN k.own THEN pg_advisory_xact_lock(k.key) ELSE pg_advisory_xact_lock_shared(k.key) END\n"
              f"    FROM (SELECT hashtextextended(c, 0) AS key, bool_or(c = p_path) AS own\n"
              f"          FROM unnest({COVERING}) c GROUP BY 1 ORDER BY 1) k;")
CALLER = """SELECT s.cwd, s.label INTO o_cwd, o_label FROM sessions s WHERE s.id = p_session AND s.left_at IS NULL;
    IF NOT FOUND THEN
        o_outcome := 'unknown';
        RETURN;
    ELSIF p_cwd IS NOT NULL AND o_cwd <> p_cwd THEN
        o_outcome := 'cwd';
        RETURN;
    END IF;"""
TOUCH = "\n    UPDATE sessions SET last_seen = o_now WHERE id = p_session;"
CALLER_TOUCHED = """UPDATE sessions SET last_seen = o_now WHERE id = p_session AND left_at IS NULL AND (p_cwd IS NULL OR cwd = p_cwd)
    RETURNING cwd, label INTO o_cwd, o_label;
    IF NOT FOUND THEN
        SELECT s.cwd INTO o_cwd FROM sessions s WHERE s.id = p_session AND s.left_at IS NULL;
        o_outcome := CASE WHEN FOUND THEN 'cwd' ELSE 'unknown' END;
        RETURN;
    END IF;"""
TOKEN = "UPDATE counters SET value = value + 1 WHERE name = 'lease_token' RETURNING value INTO o_token;"


def _swap(text: str, old: str, new: str, times: int = 1) -> str:
    if text.count(old) != times:
        raise SystemExit(f"the shipped functions changed: {old[:60]!r} occurs {text.count(old)} times, not {times}")
    return text.replace(old, new)


def variants(conn: Any) -> dict[str, tuple[str, str]]:
    """kind -> (the function prefix, the SQL creating its claim and release functions), made
    from the store's functions on ``conn``'s schema."""
    claim, release = (conn.execute("SELECT pg_get_functiondef(%s::regproc)", (f"agents_room_lease_{op}",)).fetchone()[0]
                      for op in ("claim", "release"))
    both = f"{claim};\n{release};\n"
    # lean: the claim's caller looked up and touched in one statement (its checks between them
    # then run after the touch), and the sweep only when something expired
    lean = f"{_swap(_swap(claim, CALLER, CALLER_TOUCHED), TOUCH, '')};\n{release};\n"
    lean = _swap(lean, SWEEP, "IF (SELECT min(expires_at) FROM leases) <= o_now THEN\n    " + SWEEP, 2)
    lean = _swap(lean, "    FROM gone;\n", "    FROM gone;\n    END IF;\n", 2)
    try_sync = _swap(both, LOCK, f"IF NOT pg_try_advisory_xact_lock(7018704367216558081) THEN\n        {LOCK}\n"
                                 "    END IF;", 2)
    per_path = _swap(both, LOCK, PATH_LOCKS, 2)
    per_path = _swap(per_path, "DELETE FROM leases WHERE expires_at <= o_now",
                     "DELETE FROM leases WHERE path = p_path AND expires_at <= o_now", 2)
    per_path = _swap(per_path, TOKEN, "o_token := nextval('bench_lease_token');")
    per_path = "CREATE SEQUENCE bench_lease_token;\n" + per_path
    out = {"shipped": ("agents_room", "")}
    for kind, sql in {"lean": lean, "try-sync": try_sync, "per-path": per_path}.items():
        prefix = "bench_" + kind.replace("-", "_")
        out[kind] = (prefix, re.sub(r"FUNCTION (\S+\.)?agents_room_lease_", f"FUNCTION {prefix}_lease_", sql))
    return out


def install(conn: Any, a: str, b: str) -> dict[str, tuple[str, str]]:
    """Create the variants on ``conn``'s schema (a store's) and check each, with the shipped
    functions, on sessions ``a`` and ``b``; kind -> (prefix, SQL) as :func:`variants`."""
    made = variants(conn)
    for prefix, sql in made.values():
        if sql:
            conn.execute(sql)
        check(conn, prefix, a, b)
    return made


def check(conn: Any, prefix: str, a: str, b: str) -> None:
    """A variant must still be the rules: a grant, a denial of the same path to another
    session, a release; else its figures would be those of a function that does less."""
    path = f"/bench/check/{prefix}.py"
    said = [conn.execute(sql, args).fetchone()[0] for sql, args in (
        (f"SELECT o_outcome FROM {prefix}_lease_claim(%s, NULL, %s, 600, 'exclusive', NULL)", (a, path)),
        (f"SELECT o_outcome FROM {prefix}_lease_claim(%s, NULL, %s, 600, 'exclusive', NULL)", (b, path)),
        (f"SELECT o_outcome FROM {prefix}_lease_release(%s, NULL, %s, NULL)", (a, path)))]
    if said != ["granted", "denied", "released"]:
        raise SystemExit(f"{prefix}: answered {said}, not granted, denied, released")


def worker(url: str, kind: str, prefix: str, sid: str, seconds: float, go: float, out: mp.Queue) -> None:
    import psycopg

    from agents_room.store.postgres.database import BEGIN_WRITE, DURABLE
    from sim.bench.raw_pg import LockedPgRoom, PlainPgRoom

    # plain and locked are sim bench's own baseline and ceiling (plain-pg, locked-pg), written once there
    made = {"plain": PlainPgRoom, "locked": LockedPgRoom}.get(kind)
    bench = made(url) if made else None
    conn = bench.conn if bench else psycopg.connect(url, autocommit=True)
    binder = psycopg.ClientCursor(conn)
    flush = "" if kind == "per-path" else f"; {DURABLE}"  # per-path commits synchronously
    writes, n = 0, 0
    while time.time() < go:
        time.sleep(0.001)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        path = f"/bench/{os.getpid()}/{n}.py"
        n += 1
        if bench:
            bench.claim(sid, path, 0)
            writes += 1
        else:
            claim = binder.mogrify(f"SELECT * FROM {prefix}_lease_claim(%s, NULL, %s, 600, 'exclusive', NULL)", (sid, path))
            release = binder.mogrify(f"SELECT * FROM {prefix}_lease_release(%s, NULL, %s, NULL)", (sid, path))
            conn.execute(f"{BEGIN_WRITE}; {claim}; COMMIT{flush}")
            conn.execute(f"{BEGIN_WRITE}; {release}; COMMIT{flush}")
            writes += 2
    out.put(writes / seconds)
    conn.close()


def busy_seconds() -> float:
    """CPU time the whole machine has spent busy since boot (/proc/stat's first line: every
    field but idle and iowait), in seconds."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def window(url: str, kind: str, prefix: str, sids: list[str], seconds: float) -> tuple[float, float]:
    """Writes a second from ``sids``' processes, and the machine's CPU microseconds per write
    over the window's steady middle (from half a second after the start to half a second
    before the end: no process start-up or exit in it). Read the CPU on a quiet machine: it
    counts every process's."""
    out: mp.Queue = mp.Queue()
    go = time.time() + 0.5
    procs = [mp.Process(target=worker, args=(url, kind, prefix, sid, seconds, go, out)) for sid in sids]
    for p in procs:
        p.start()
    time.sleep(max(go + 0.5 - time.time(), 0))
    before, started = busy_seconds(), time.monotonic()
    time.sleep(max(seconds - 1.0, 0.1))
    cpu, steady = busy_seconds() - before, time.monotonic() - started  # the sleep may overrun: as long as it took
    total = sum(out.get(timeout=seconds + 60) for _ in procs)
    for p in procs:
        p.join()
    return total, cpu / (total * steady) * 1e6 if total else float("nan")


def main() -> None:
    import pgcluster
    import psycopg

    from agents_room.store import Store

    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", default="1,4,16")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    cluster = pgcluster.start_cluster(fsync=True)
    try:
        url = pgcluster.new_schema(cluster)
        store = Store.open(url)
        a, b = (store.room_join(cwd="/bench", pid=None, label=who).session_id for who in ("a", "b"))
        with psycopg.connect(url, autocommit=True) as conn:
            made = install(conn, a, b)
        print(f"load before: {os.getloadavg()}", flush=True)
        for procs in (int(p) for p in args.procs.split(",")):
            sids = [store.room_join(cwd="/bench", pid=None, label=f"w{i}").session_id for i in range(procs)]
            seen: dict[str, list[tuple[float, float]]] = {kind: [] for kind in KINDS}
            for _ in range(args.rounds):
                for kind in KINDS:
                    seen[kind].append(window(url, kind, made.get(kind, ("", ""))[0], sids, args.seconds))
            median = {kind: sorted(v)[len(v) // 2] for kind, v in seen.items()}  # by rate; its CPU with it
            print(json.dumps({"procs": procs, **{k: round(v[0]) for k, v in median.items()},
                              **{f"{k}/plain": round(v[0] / median["plain"][0], 2) for k, v in median.items() if k != "plain"},
                              **{f"{k} cpu_us/write": round(v[1]) for k, v in median.items()}}),
                  flush=True)
        print(f"load after: {os.getloadavg()}", flush=True)
        store.close()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
