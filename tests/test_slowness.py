"""The fast core's selection (tests/slowness.py, tests/slow.txt): a durations report is read
per test with its parameters folded, and every test slow.txt names still exists, so that a
renamed test does not slip back into the fast core unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import slowness

ROOT = Path(__file__).resolve().parent.parent

LOG = """
============================= slowest durations =============================
2.50s call     tests/a.py::test_slow[sqlite]
0.40s setup    tests/a.py::test_slow[postgresql]
0.30s call     tests/a.py::test_slow[postgresql]
0.20s call     tests/b.py::TestX::runTest
0.10s teardown tests/b.py::TestX::runTest
0.49s call     tests/b.py::test_just_under
(12 durations < 0.005s hidden.  Use -vv to show these durations.)
"""


def test_a_durations_report_gives_each_test_its_slowest_parametrization() -> None:
    assert slowness.measured(LOG) == pytest.approx({
        "tests/a.py::test_slow": 2.5, "tests/b.py::TestX::runTest": 0.3, "tests/b.py::test_just_under": 0.49})


def test_adding_from_a_report_appends_only_what_crossed_the_threshold_once(tmp_path: Path) -> None:
    listing, log = tmp_path / "slow.txt", tmp_path / "durations.log"
    listing.write_text("# header\ntests/b.py::TestX::runTest  9.00\n")
    log.write_text(LOG)
    assert slowness.add(log, listing) == ["tests/a.py::test_slow"]
    assert slowness.add(log, listing) == []
    assert slowness.listed(listing) == {"tests/b.py::TestX::runTest", "tests/a.py::test_slow"}


def test_every_listed_test_still_exists() -> None:
    listed = slowness.listed()
    assert len(listed) > 50
    for test in sorted(listed):
        path, *names = test.split("::")
        source = (ROOT / path).read_text() if (ROOT / path).exists() else ""
        assert source, f"tests/slow.txt names {test}, whose file is gone"
        assert re.search(rf"^\s*(?:(?:async )?(?:def|class) {re.escape(names[0])}\b|{re.escape(names[0])} = )", source, re.M), \
            f"tests/slow.txt names {test}, which is gone: remove it or name it as renamed"


def test_the_collection_marks_a_listed_test_slow_in_each_of_its_parametrizations() -> None:
    import conftest

    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid, self.marks = nodeid, []

        def add_marker(self, mark: pytest.MarkDecorator) -> None:
            self.marks.append(mark.name)

    listed = sorted(slowness.listed())[0]
    items = [Item(f"{listed}[sqlite]"), Item(listed), Item("tests/test_slowness.py::test_not_listed")]
    conftest.pytest_collection_modifyitems(None, items)  # type: ignore[arg-type]
    assert [item.marks for item in items] == [["slow"], ["slow"], []]
