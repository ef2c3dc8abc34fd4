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
    whole = {slowness.base(t) for t in slowness.expected()}
    assert len(whole) > 20
    for test in sorted(listed | whole):
        path, *names = test.split("::")
        source = (ROOT / path).read_text() if (ROOT / path).exists() else ""
        assert source, f"tests/slow.txt or durations.txt names {test}, whose file is gone"
        assert re.search(rf"^\s*(?:(?:async )?(?:def|class) {re.escape(names[0])}\b|{re.escape(names[0])} = )", source, re.M), \
            f"tests/slow.txt or durations.txt names {test}, which is gone: remove it or name it as renamed"


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


def first_blocks(order: list[int], workers: int) -> list[list[int]]:
    """What xdist's worksteal scheduler first hands each worker: contiguous blocks of the order,
    ``len(left) // workers left`` tests each."""
    blocks, left = [], list(order)
    for i in range(workers):
        size = len(left) // (workers - i)
        blocks.append(left[:size])
        del left[:size]
    return blocks


def test_the_longest_tests_are_dealt_first_and_evenly_over_the_workers_first_blocks() -> None:
    ids = [f"tests/m{i // 5}.py::test_{i}" for i in range(40)]  # 8 modules of 5 tests
    known = {ids[3]: 30.0, ids[4]: 29.0, ids[10]: 20.0, ids[11]: 12.0, ids[12]: 9.0, ids[39]: 8.0, ids[38]: 1.0,
             ids[20]: 0.0}
    order = slowness.deal(ids, 4, known)
    assert sorted(order) == list(range(40))
    blocks = first_blocks(order, 4)
    assert [len(b) for b in blocks] == [10, 10, 10, 10]
    # longest processing time first: 30 | 29 | 20 | 12, then 9 to the 12's block, 8 to the 20's, 1 to the 12's
    assert [[i for i in b if known.get(ids[i])] for b in blocks] == [[3], [4], [10, 39], [11, 12, 38]]
    for block in blocks:  # each worker starts with its measured tests, the others in collection order after them
        measured = [i for i in block if known.get(ids[i])]
        assert block[:len(measured)] == measured
        rest = block[len(measured):]
        assert rest == sorted(rest)
    assert [i for b in blocks for i in b if not known.get(ids[i])] == [i for i in range(40) if not known.get(ids[i])]


def test_dealing_works_for_any_count_of_workers_and_tests() -> None:
    ids = [f"t{i}" for i in range(7)]
    known = {t: float(i) for i, t in enumerate(ids)}
    for workers in (1, 2, 3, 7, 9):
        order = slowness.deal(ids, workers, known)
        assert sorted(order) == list(range(7)), workers
    assert slowness.deal(ids, 1, known) == [6, 5, 4, 3, 2, 1, 0]
    assert slowness.deal([], 4, {}) == []
    assert first_blocks(slowness.deal(ids, 2, known), 2) == [[6, 3, 2], [5, 4, 1, 0]]


def test_a_whole_runs_report_becomes_durations_txt_longest_first(tmp_path: Path) -> None:
    listing, log = tmp_path / "durations.txt", tmp_path / "durations.log"
    listing.write_text("# header\n# kept\n\nold::test 1.0\n")
    log.write_text(LOG.replace("0.40s setup", "1.90s setup") + "3.00s call     tests/c.py::test_spaced[run --out x]  \n")
    assert slowness.write_whole(log, listing) == 3
    assert listing.read_text() == ("# header\n# kept\n\ntests/c.py::test_spaced[run --out x]  3.00\n"
                                   "tests/a.py::test_slow[sqlite]  2.50\ntests/a.py::test_slow[postgresql]  2.20\n")
    assert slowness.expected(listing) == {"tests/c.py::test_spaced[run --out x]": 3.0,
                                          "tests/a.py::test_slow[sqlite]": 2.5, "tests/a.py::test_slow[postgresql]": 2.2}


def test_a_module_sharing_a_module_fixture_is_dealt_whole_in_its_order() -> None:
    ids = [f"tests/m{i // 4}.py::test_{i}" for i in range(16)]  # 4 modules of 4 tests
    known = {ids[5]: 10.0, ids[6]: 3.0, ids[0]: 8.0, ids[12]: 1.0}
    order = slowness.deal(ids, 2, known, frozenset({"tests/m1.py"}))
    blocks = first_blocks(order, 2)
    # m1 (13 s in all) first, whole and in its order, on one worker; 8 s and 1 s on the other
    assert blocks[0][:4] == [4, 5, 6, 7] and blocks[1][:2] == [0, 12]
    assert sorted(order) == list(range(16))
    # a unit no block has room for stays in its collection order
    big = [f"tests/big.py::test_{i}" for i in range(6)] + ["tests/small.py::test_a", "tests/small.py::test_b"]
    assert slowness.deal(big, 2, {big[2]: 10.0, big[7]: 1.0}, frozenset({"tests/big.py"})) == [7, 0, 1, 2, 3, 4, 5, 6]


def test_the_modules_with_a_shared_fixture_are_found_in_their_source() -> None:
    ids = ["tests/simulator/report/test_report_words.py::test_x", "tests/test_slowness.py::test_y",
           "tests/gone.py::test_z"]
    assert slowness.shared_modules(ids, ROOT) == {"tests/simulator/report/test_report_words.py"}
