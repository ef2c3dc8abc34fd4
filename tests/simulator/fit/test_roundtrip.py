"""Fidelity of ``sim fit``, by a round trip with the direct driver: a known scenario is run, its
store fitted, and the fitted figures come back within stated tolerances of the scenario's own
(from the run's history: what the agents really did). The fitted scenario is then run, and
its report's side-by-side comparison holds the same tolerances (a second round trip).

Tolerances, and why:
- calls per agent per second within 20%: the counts are per minute, so the start-up joins and
  the final drain (a few calls per agent) fall in the window too;
- think time mean within 35% of the scenario's 20 ms, once what the machine added to each think
  is taken out: the gap a server sees also holds the agent's own work between calls (history,
  workload) and, on a loaded machine, the time it waited for a core; each call after a think
  records the think drawn (``think_ms``), so the history tells the two apart;
- each tool's share within 0.03 (absolute) of the history's;
- lease hold p50 within 35% of the history's (a hold ends at its release, or its expiry);
- broadcast fan-out within 10% of the 5 others every agent shares a room with.
The second round trip: rate and think mean within 35%, each net of what the second run's machine
added to its thinks (the fitted think already holds the first's), hold p50 within 50% counted in calls
(its ratio times the call rate's: a hold is a few calls long, so its median moves by whole
calls, and in seconds it stretches with every call a loaded machine slows), shares within 0.03 of what the fitted shares predict once
the second run's own final inbox drain is counted in (the store counts calls per minute, so
a run's measured traffic holds its drain: every generation adds its drain's msg_recv calls
to what it was fitted to, and the other tools' shares shrink by as much; on a loaded machine
the workload makes fewer calls and the drain's share grows: 0.044 more msg_recv was seen
when the drain was not counted in), fan-out within 15% (the run / fitted column of the report)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sim.check.history import pairs, read
from sim.cli import main
from sim.scenario.scenario import load

pytestmark = pytest.mark.slow

KNOWN = """
name = "known"
[run]
duration_s = 4
driver = "direct"
[[repos]]
name = "one"
agents = 3
files = 6
rooms = ["team"]
tags = ["alpha"]
[[repos]]
name = "two"
agents = 3
files = 6
rooms = ["team"]
tags = ["beta"]
[workload]
lease_ttl_s = [2, 5]
shared_fraction = 0.25
max_held = 2
hot_paths = 2
hot_fraction = 0.5
[workload.think]
kind = "exponential"
mean_ms = 20
[workload.mix]
lease_claim = 20
lease_release = 15
lease_renew = 5
send_broadcast = 6
send_session = 4
msg_recv = 14
msg_ack = 4
note_read = 8
drift_check = 6
room_who = 4
msg_unread = 6
lease_check = 6
"""
STORE_TOOLS = {"room_join", "room_who", "room_leave", "room_leave_room", "msg_send", "msg_recv", "msg_ack", "msg_unread",
               "msg_sent", "room_history", "lease_claim", "lease_renew", "lease_release", "lease_check", "lease_list",
               "note_read", "drift_check", "room_set_autonomy_cap"}


def truth(out: Path) -> tuple[Counter[str], list[float]]:
    """The store calls the agents made (history, every phase) and their lease hold times."""
    calls: Counter[str] = Counter()
    held: dict[tuple[str, str], list[float]] = {}  # -> [start, expires_at]
    holds = []
    for i, d in pairs(read(out / "history.jsonl.gz")):
        if i["f"] not in STORE_TOOLS:
            continue
        calls[i["f"]] += 1
        if d["type"] != "ok":
            continue
        key = (i["session"], i["value"].get("path"))
        if key in held and held[key][1] <= d["wall"]:  # expired before this call
            start, end = held.pop(key)
            holds.append(end - start)
        if i["f"] in ("lease_claim", "lease_renew") and (i["f"] == "lease_renew" or d["value"]["ok"]):
            held.setdefault(key, [d["wall"], 0.0])[1] = d["value"]["expires_at"]
        elif i["f"] == "lease_release" and key in held:
            holds.append(d["wall"] - held.pop(key)[0])
    return calls, holds


def sim_run(scenario: Path, out: Path) -> dict[str, Any]:
    """``sim run`` in a child (its agents' pipes are its own), and the report it wrote."""
    done = subprocess.run([sys.executable, "-m", "sim.cli", "run", str(scenario), "--out", str(out), "--no-live",
                           "--no-plots"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((out / "report.json").read_text())


def drain_share(out: Path) -> float:
    """The share of a run's store calls its final inbox drain made (history, ``phase = drain``)."""
    ops = [i for i, _ in pairs(read(out / "history.jsonl.gz")) if i["f"] in STORE_TOOLS]
    return sum(1 for i in ops if i.get("phase") == "drain") / len(ops)


def store_calls(out: Path) -> int:
    """How many store tools the run's agents called."""
    return sum(1 for i, _ in pairs(read(out / "history.jsonl.gz")) if i["f"] in STORE_TOOLS)


def overhead_ms(out: Path) -> float:
    """What the machine (and the workload's own waits) added to each think, on average: the gap
    before each call that followed a think (its invoke carries the think drawn, ``think_ms``),
    from the end of the agent's call before, minus that think. A loaded machine moves this, and
    the gaps a store sees with it; the think drawn it does not move."""
    last_end: dict[str, int] = {}
    extra = []
    for i, d in pairs(read(out / "history.jsonl.gz")):
        if "think_ms" in i and i["agent"] in last_end and i.get("phase") != "drain":
            extra.append((i["time"] - last_end[i["agent"]]) / 1e6 - i["think_ms"])
        last_end[i["agent"]] = d["time"]
    assert len(extra) > 100, len(extra)
    return sum(extra) / len(extra)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def near(got: float | None, want: float, rel: float) -> bool:
    return got is not None and abs(got - want) <= rel * want


def test_a_known_scenario_comes_back_from_its_store_and_again_from_the_fitted_one(tmp_path: Path) -> None:
    (tmp_path / "known.toml").write_text(KNOWN)
    first = sim_run(tmp_path / "known.toml", tmp_path / "first")
    start = first["run"]["wall_start"]
    path = tmp_path / "ours.toml"
    store = str(tmp_path / "first" / "store" / "room.db")
    assert main(["fit", store, "--since", str(start), "--until", str(start + 4), "--out", str(path)]) == 0
    scenario = load(path)
    f = scenario.fitted
    assert f is not None
    calls, holds = truth(tmp_path / "first")
    total = sum(calls.values())
    assert near(f.calls_per_agent_s, total / 6 / 4, 0.20), (f.calls_per_agent_s, total / 24)
    # The gap the store saw, less what the machine added to each think (from the run's own history):
    # the think the agents drew, as the store measured it, against the scenario's 20 ms.
    added = overhead_ms(tmp_path / "first")
    assert near(f.think_mean_ms - added, 20, 0.35), (f.think_mean_ms, added)
    shares = dict(f.tools)
    for tool in STORE_TOOLS:
        assert abs(shares.get(tool, 0) - calls[tool] / total) <= 0.03, (tool, shares.get(tool), calls[tool] / total)
    assert near(f.hold_p50_s, median(holds), 0.35), (f.hold_p50_s, median(holds))
    assert near(dict(f.fanout)["broadcast"], 5, 0.10) and dict(f.fanout)["session"] == 1
    assert set(scenario.workload.lease_ttl_s) == {2, 5} and scenario.workload.max_held == 2
    assert [(r.agents, r.rooms) for r in scenario.repos] == [(3, ("room-1",)), (3, ("room-1",))]

    second = sim_run(path, tmp_path / "second")
    rows = {r["figure"]: r for r in second["fit"]["rows"]}
    # The fitted think time is the gap the first run's store saw, which held what that machine
    # added (`added`). The second run's agents draw it and its machine adds its own again (1.362
    # times the fitted mean was seen on a loaded machine): compared net of the second run's own
    # addition, measured from its history, so only what load cannot move is compared: the think
    # drawn, the gaps the store counted, the calls made per second of an agent's own time.
    again = overhead_ms(tmp_path / "second")
    think = rows["think time mean"]
    assert 0.65 <= (think["run"] - again) / think["fitted"] <= 1.35, (think, again, added)
    rate = rows["calls per agent per second"]
    own_rate = 1 / (1 / rate["run"] - again / 1000)  # the calls per second, the machine's additions left out
    assert 0.65 <= own_rate / rate["fitted"] <= 1.35, (rate, again, own_rate)
    # A hold is a few calls long, so in seconds it stretches as far as a loaded machine slows the
    # calls (1.54 was seen beside the rest of the suite and two busy loops): it is compared in
    # calls, its ratio times the call rate's.
    calls_ratio = rows["calls per agent per second"]["ratio"]
    assert 0.5 <= rows["lease hold p50"]["ratio"] * calls_ratio <= 1.5, (rows["lease hold p50"], calls_ratio)
    drained = drain_share(tmp_path / "second")
    assert 0 < drained < 0.2, drained  # the drain made calls, and not most of them
    made = store_calls(tmp_path / "second")
    for figure, r in rows.items():
        if figure.startswith("share of "):
            # the workload's calls in the fitted proportions, and the drain's (all msg_recv) beside them.
            # A share of n calls drawn at random is off by sqrt(p(1-p)/n) at one standard error; a
            # loaded machine makes fewer calls in the run's seconds (0.038 off at 0.23 was seen), so
            # the bound is 4 standard errors of the calls this run made, never under 0.03.
            expected = r["fitted"] * (1 - drained) + (drained if figure == "share of msg_recv" else 0.0)
            bound = max(0.03, 4 * (expected * (1 - expected) / made) ** 0.5)
            assert abs(r["run"] - expected) <= bound, (r, drained, made, bound)
    assert 0.85 <= rows["fan-out of broadcast"]["ratio"] <= 1.15, rows["fan-out of broadcast"]
