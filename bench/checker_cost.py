"""What the checker costs: CPU seconds per 100,000 operations, and its share of a run's wall.

    .venv/bin/python bench/checker_cost.py OUT [--repeat 5]

``OUT`` is the folder of a finished ``sim run`` (its store and ``history.jsonl.gz``). The
whole check runs ``--repeat`` times on that run's events and history; the best CPU time
(``time.process_time``: wall time moves with the machine's load, CPU time much less) is
reported, with the oracle's part (its event replay and its judgement of the reads) timed
the same way, and the run's own ``timings.check_s`` against its wall (the work's
``duration_s`` and the timed phases around it) from report.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.check import oracle, oracle_reads, window  # noqa: E402
from sim.check.checker import check, load_events  # noqa: E402
from sim.check.crosscheck import crosscheck  # noqa: E402
from sim.check.operation import pair  # noqa: E402
from sim.run.layout import read_events  # noqa: E402


def best_cpu(fn, repeat: int) -> float:  # noqa: ANN001
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    db = next((args.out / "store").glob("*.db"), None)
    if db is None:
        print(f"{args.out}: no store/*.db: not the folder of a finished sim run", file=sys.stderr)
        return 2
    with gzip.open(args.out / "history.jsonl.gz", "rt") as fh:
        records = [json.loads(line) for line in fh]
    raw, integrity, _wal = read_events(str(db), 5.0)
    ops, _problems = pair(records)
    events = load_events(raw)

    def the_oracle() -> None:
        cross = crosscheck(ops, events, 0.01)
        orc = oracle.check_events(events, cross.owner, ops, 0.01)
        oracle_reads.check_ops(orc, ops, 0.01, window.Commits.of(events, cross.owner, 0.01))

    whole = best_cpu(lambda: check(raw, records, integrity), args.repeat)
    part = best_cpu(the_oracle, args.repeat) - best_cpu(lambda: crosscheck(ops, events, 0.01), args.repeat)
    report = json.loads((args.out / "report.json").read_text())
    timings = report.get("timings") or {}
    # the run's wall: its work (duration_s) and every timed phase around it
    wall = float((report.get("run") or {}).get("duration_s") or 0) + sum(
        v for v in timings.values() if isinstance(v, int | float))
    n = len(ops)
    print(f"{args.out}: {n} operations, {len(events)} events")
    print(f"the whole check: {whole:.3f} s of CPU (best of {args.repeat}), {whole / n * 1e5:.2f} s per 100,000 operations")
    print(f"of which the oracle: {part:.3f} s, {part / n * 1e5:.2f} s per 100,000 operations")
    if timings.get("check_s") and wall:
        print(f"in the run: check {timings['check_s']:.2f} s of its {wall:.1f} s of wall "
              f"({100 * timings['check_s'] / wall:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
