"""The report's figures from a hand-made history: the start-up joins stay out of the
steady per-operation figures and are still counted, on their own row."""

from __future__ import annotations

from typing import Any

from sim.check.history import merge
from sim.report.stats import compute

MS = 1_000_000
START = 10_000 * MS  # the run's start_ns
END = START + 2_000 * MS


class Agent:
    """One agent's history, written an operation at a time."""

    def __init__(self, no: int) -> None:
        self.name, self.process, self.records = f"a{no:02d}", no, []

    def op(self, f: str, at_ms: float, took_ms: float, error: str | None = None, **extra: Any) -> None:
        t0 = START + int(at_ms * MS)
        done = "ok" if error is None else "fail"
        for type_, t in (("invoke", t0), (done, t0 + int(took_ms * MS))):
            self.records.append({"index": len(self.records), "time": t, "wall": t / 1e9, "process": self.process,
                                 "agent": self.name, "session": "s", "type": type_, "f": f, "value": {},
                                 "error": error if type_ != "invoke" else None, **extra})


def run_history() -> list[dict[str, Any]]:
    """Three agents whose start-up joins waited seconds; the work after ``go`` takes a few ms.
    Agents get ``go`` shortly before ``start_ns`` and work at once."""
    agents = [Agent(n) for n in range(3)]
    for n, a in enumerate(agents):
        a.op("room_join", -6_000, 4_000 + 500 * n)  # behind the other interpreters' start-up
        if n == 0:
            a.op("room_join", -1_500, 900, error="store_busy")  # a retried start-up join
            a.op("room_join", -500, 300)
        a.op("room_who", -90, 2)  # the call on "go", before start_ns
        a.op("lease_claim", -80, 3)
        a.op("room_join", 500, 4)  # a rejoin after leave_room: steady work
        a.op("lease_claim", 1_000, 5)
        a.op("msg_recv", 2_100, 1, phase="drain")
    return merge(a.records for a in agents)


def test_start_up_joins_stay_out_of_the_steady_figures() -> None:
    s = compute(run_history(), START, END, ["a00", "a01", "a02"])
    join = s.row("room_join")
    assert join is not None and join.count == 3 and join.max_ms == 4.0
    assert s.all_ops.count == 12 and s.all_ops.max_ms == 5.0
    assert sum(r.count for r in s.table) == s.all_ops.count
    assert s.ok == 12 and s.fail == 0 and s.store_busy == 0
    assert s.fairness.longest_wait_ms == 5.0
    assert max(v for lat in s.latencies_ms.values() for v in lat) == 5.0  # the percentile plot's data
    assert max(x for x in s.bins.max_ms if x is not None) <= 5.0


def test_start_up_joins_are_counted_on_their_own_row() -> None:
    s = compute(run_history(), START, END, ["a00", "a01", "a02"])
    assert s.startup.f == "start-up"
    assert (s.startup.count, s.startup.ok, s.startup.fail) == (5, 4, 1)
    assert s.startup.max_ms == 5_000.0 and s.startup.errors == {"store_busy": 1}
    assert s.drain_ops == 3
    assert "startup" in s.to_dict()


def test_an_agent_that_never_got_to_work_is_all_start_up() -> None:
    a = Agent(0)
    a.op("room_join", -3_000, 2_000)
    a.op("room_join", -500, 100)
    s = compute(merge([a.records]), START, END, ["a00"])
    assert s.startup.count == 2 and s.all_ops.count == 0 and s.table == []
