"""The longest write-lock hold one hostile ``msg_send`` can cause: a ``file:`` glob of the
longest length allowed (bounds.GLOB_MAX), built to keep every unit of the glob alive, sent
against live directory leases with the longest paths allowed (about 4 KB), on both engines.

    .venv/bin/python bench/selector_cost.py [--leases 1,5,50] [--repeat 5] [--rule bounded|automaton]

The selector is matched against a read snapshot of the live leases before ``msg_send``'s
write transaction, and inside it only against leases taken since (store/messages.py). The
bench times both the whole call and the write transaction (from the moment the lock is held
to its commit: the time every other writer waits; target: at most 50 ms). Each glob is sent
``--repeat`` times; the longest per glob and lease count is printed, with the load.
``--rule automaton`` puts back the earlier rule (the glob run over the path as an automaton,
tests/store/test_selector_cost.py keeps it as the reference) and the matching inside the
transaction, to show what they cost.
SQLite: a file in a temporary folder; PostgreSQL: a throwaway cluster (tests/pgcluster.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from agents_room.store import Store, coverage, messages  # noqa: E402
from agents_room.store.bounds import GLOB_MAX  # noqa: E402

HOSTILE = {
    "stars": "*x" * 127 + "Q",
    "stars-and-any": "*?" * 127 + "Q",
    "negated-sets": "*[!Q]" * 51 + "Q",
    "sets": "[x]*" * 63 + "Q",
    "backtracking": "*x*" + "?" * 250 + "Q",
}


def long_directory(base: str, n: int) -> str:
    """A directory path of about 4 KB (the path bound is 4096 bytes), different per ``n``."""
    return f"{base}/d{n}/" + "/".join(["x" * 200] * 19) + "/"


def main() -> None:
    import pgcluster

    ap = argparse.ArgumentParser()
    ap.add_argument("--leases", default="1,5,50")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rule", default="bounded", choices=["bounded", "automaton"])
    args = ap.parse_args()
    assert all(len(g) <= GLOB_MAX for g in HOSTILE.values())
    if args.rule == "automaton":
        from store.test_selector_cost import nfa_reaches_beneath

        coverage.glob_reaches_beneath = nfa_reaches_beneath
        messages.match_outside = lambda read, to: None
    cluster = pgcluster.start_cluster(fsync=False)
    worst = 0.0
    try:
        print(f"load: {os.getloadavg()}, rule: {args.rule}", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            for n, count in enumerate(int(x) for x in args.leases.split(",")):
                for engine in ("sqlite", "postgresql"):
                    where = str(Path(tmp) / f"s{n}" / "room.db") if engine == "sqlite" else pgcluster.new_schema(cluster)
                    with Store.open(where, busy_timeout_s=30.0) as store:
                        holds: list[float] = []
                        write = store.db.write

                        @contextlib.contextmanager
                        def timed(write=write, holds=holds):  # noqa: ANN001, ANN202
                            with write() as tx:
                                start = time.perf_counter()
                                yield tx
                            holds.append(time.perf_counter() - start)

                        store.db.write = timed
                        sender = store.room_join(cwd=tmp, pid=None, label="sender").session_id
                        for i in range(count):
                            holder = store.room_join(cwd=tmp, pid=None, label=f"h{i}").session_id
                            assert store.lease_claim(holder, long_directory(tmp, i)).ok
                        for name, glob in HOSTILE.items():
                            times = []
                            holds.clear()
                            for _ in range(args.repeat):
                                start = time.perf_counter()
                                sent = store.msg_send(sender, "file:" + glob)
                                times.append(time.perf_counter() - start)
                            worst = max(worst, *holds)
                            print(json.dumps({"engine": engine, "leases": count, "glob": name,
                                              "recipients": len(sent.recipients),
                                              "call_max_ms": round(max(times) * 1000, 2),
                                              "lock_max_ms": round(max(holds) * 1000, 2),
                                              "lock_median_ms": round(sorted(holds)[len(holds) // 2] * 1000, 2)}),
                                  flush=True)
        print(f"load: {os.getloadavg()}; longest write transaction of a msg_send: {worst * 1000:.1f} ms")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
