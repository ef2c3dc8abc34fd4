"""Which tests are slow, by measurement: ``tests/slow.txt`` names each test (parameters folded)
that took at least ``THRESHOLD_S`` in one of its parametrizations (set-up, call and tear-down)
in a measured run of the rest; ``conftest.py`` marks them ``slow``, beside the tests marked by
hand (multi-process, end-to-end). ``pytest -m "not slow"`` is then the fast core a developer
runs while working (README, "Tests"); the README's plain command still runs everything.

Made again after tests change speed (new tests land unmarked, so in the fast core)::

    .venv/bin/pytest -n auto -m "not slow" --durations=0 -q > /tmp/durations.log
    .venv/bin/python tests/slowness.py /tmp/durations.log   # adds what crossed the threshold

The measurement is kept: each line of slow.txt carries the seconds it took and its header the
machine's load during the run that measured it.

The same seconds decide where the longest tests start under ``-n`` (``deal``, from the
scheduler in conftest.py): ``tests/durations.txt`` names each test (parameters kept) that took
long in a whole run, slow ones marked by hand among them (slow.txt never measures those).
Made again from a whole run::

    .venv/bin/pytest -n auto --durations=0 -q > /tmp/durations.log
    .venv/bin/python tests/slowness.py --whole /tmp/durations.log   # rewrites durations.txt
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

LIST = Path(__file__).with_name("slow.txt")
THRESHOLD_S = 0.5
WHOLE = Path(__file__).with_name("durations.txt")
WHOLE_THRESHOLD_S = 2.0  # durations.txt: the tests whose place in the order matters
DURATION = re.compile(r"\s*([0-9.]+)s (?:setup|call|teardown)\s+(\S+)")
WHOLE_ID = re.compile(r"\s*([0-9.]+)s (?:setup|call|teardown)\s+(.+?)\s*$")  # (a parameter's id may hold spaces)


def base(nodeid: str) -> str:
    """A test's id without its parameters: all of a test's parametrizations share its speed class."""
    return nodeid.split("[", 1)[0]


def listed(path: Path = LIST) -> set[str]:
    """The test ids slow.txt names (its first column; ``#`` starts a comment)."""
    if not path.exists():
        return set()
    return {line.split()[0] for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")}


def measured(log: str) -> dict[str, float]:
    """From a ``--durations=0`` report: each test id (parameters folded) and the longest any
    one of its parametrizations took, set-up and tear-down included."""
    per_node: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        if found := DURATION.match(line):
            per_node[found.group(2)] += float(found.group(1))
    longest: dict[str, float] = defaultdict(float)
    for nodeid, seconds in per_node.items():
        longest[base(nodeid)] = max(longest[base(nodeid)], seconds)
    return dict(longest)


def add(log_path: Path, path: Path = LIST) -> list[str]:
    """Append to slow.txt the tests of the log at or over the threshold that it does not name yet."""
    known = listed(path)
    new = sorted(test for test, seconds in measured(log_path.read_text()).items()
                 if seconds >= THRESHOLD_S and test not in known)
    seconds = measured(log_path.read_text())
    with path.open("a") as out:
        out.writelines(f"{test}  {seconds[test]:.2f}\n" for test in new)
    return new


def per_test(log: str) -> dict[str, float]:
    """From a ``--durations=0`` report: each test id, parameters kept, and its set-up, call and
    tear-down together."""
    seconds: dict[str, float] = defaultdict(float)
    for line in log.splitlines():
        if found := WHOLE_ID.match(line):
            seconds[found.group(2)] += float(found.group(1))
    return dict(seconds)


def write_whole(log_path: Path, path: Path = WHOLE) -> int:
    """Rewrite durations.txt from a whole run's report: the tests at or over WHOLE_THRESHOLD_S,
    longest first. Returns how many it names."""
    seconds = {t: s for t, s in per_test(log_path.read_text()).items() if s >= WHOLE_THRESHOLD_S}
    header = path.read_text().split("\n\n", 1)[0] if path.exists() else "# Tests of a whole run, longest first"
    path.write_text(header + "\n\n" + "".join(f"{t}  {s:.2f}\n" for t, s in
                                                sorted(seconds.items(), key=lambda ts: (-ts[1], ts[0]))))
    return len(seconds)


def expected(whole: Path = WHOLE) -> dict[str, float]:
    """Each test durations.txt names (parameters kept) and its seconds. (slow.txt's seconds
    are not used: parameters folded, one slow parametrization would stand for all of them.)"""
    found: dict[str, float] = {}
    if whole.exists():
        for line in whole.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                test, seconds = line.rsplit(None, 1)
                found[test] = float(seconds)
    return found


def deal(nodeids: list[str], workers: int, known: dict[str, float], whole: frozenset[str] = frozenset()) -> list[int]:
    """The order (indices of ``nodeids``) to hand pytest-xdist's ``worksteal`` scheduler, which
    first gives each of its ``workers`` a contiguous block of the order (``len(left) // workers
    left`` tests each, in turn) and later moves the end of a long queue to a worker that ran out.

    The measured tests are dealt longest first to the block with the fewest seconds so far that
    has room (longest processing time first), and each block runs them first, longest first;
    the other tests fill the blocks in their collection order (a module's tests stay together).
    A module named in ``whole`` (its tests share a module-scoped fixture: ``shared_modules``)
    is dealt as one, in its collection order, so that its fixture is made once. A long test
    then never starts last on a worker while the others have nothing left, and what a worker
    steals from another's end is the quick tests."""
    sizes, left = [], len(nodeids)
    for i in range(max(1, workers)):
        sizes.append(left // (max(1, workers) - i))
        left -= sizes[-1]
    module = [n.split("::", 1)[0] for n in nodeids]
    units: dict[str, list[int]] = {}  # a measured test alone, or its whole module
    for i, n in enumerate(nodeids):
        if module[i] in whole:
            units.setdefault(module[i], []).append(i)
        elif known.get(n, 0.0) > 0:
            units[n] = [i]
    seconds = {u: sum(known.get(nodeids[i], 0.0) for i in members) for u, members in units.items()}
    blocks: list[list[int]] = [[] for _ in sizes]
    load = [0.0] * len(sizes)
    dealt: set[int] = set()
    for u in sorted((u for u in units if seconds[u] > 0), key=lambda u: (-seconds[u], units[u][0])):
        room = [b for b in range(len(sizes)) if len(blocks[b]) + len(units[u]) <= sizes[b]]
        if room:  # (a unit no block has room for is left in its collection order, below)
            b = min(room, key=lambda b: (load[b], b))
            blocks[b] += units[u]
            load[b] += seconds[u]
            dealt.update(units[u])
    rest = iter(i for i in range(len(nodeids)) if i not in dealt)
    for b, size in enumerate(sizes):
        blocks[b] += [next(rest) for _ in range(size - len(blocks[b]))]
    return [i for block in blocks for i in block]


def shared_modules(nodeids: list[str], root: Path) -> frozenset[str]:
    """The test modules among ``nodeids`` that define a module- or class-scoped fixture (their
    tests share it: ``deal`` keeps them together)."""
    found = set()
    for path in {n.split("::", 1)[0] for n in nodeids}:
        try:
            text = (root / path).read_text()
        except OSError:
            continue
        if re.search(r"scope=[\"'](?:module|class)[\"']", text):
            found.add(path)
    return frozenset(found)


if __name__ == "__main__":
    if sys.argv[1] == "--whole":
        print(f"{write_whole(Path(sys.argv[2]))} tests named in {WHOLE}")
    else:
        added = add(Path(sys.argv[1]))
        print(f"{len(added)} tests added to {LIST}")
