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
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

LIST = Path(__file__).with_name("slow.txt")
THRESHOLD_S = 0.5
DURATION = re.compile(r"\s*([0-9.]+)s (?:setup|call|teardown)\s+(\S+)")


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


if __name__ == "__main__":
    added = add(Path(sys.argv[1]))
    print(f"{len(added)} tests added to {LIST}")
