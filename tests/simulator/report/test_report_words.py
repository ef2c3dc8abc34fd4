"""Issue 17, the run report: one number of operations or the difference explained, `fail` and
`info` defined and the expected errors explained, the fault section's sentence adds up, plots
whose legend hides nothing and whose colours say what they mean, one compressed copy of the
history and a word on removing old runs. A real smoke run, then the writer on its data."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agents_room.store import Event
from sim.check.history import read
from sim.check.operation import Op
from sim.faults.report import info_settled
from sim.report import plots
from sim.report.terminal import print_summary
from sim.report.writer import _fault_lines, host_drivers, markdown
from sim.run.drivers import STORE_FACTORY_ENV
from sim.scenario.scenario import load

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("words") / "smoke-20261203T000000Z"
    env = {k: v for k, v in os.environ.items() if k != STORE_FACTORY_ENV}
    done = subprocess.run([sys.executable, "-m", "sim.cli", "run", str(ROOT / "scenarios" / "smoke.toml"), "--out",
                           str(out), "--duration", "2", "--agents", "3", "--no-live"], cwd=ROOT, text=True,
                          capture_output=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return out


@pytest.fixture
def data(run: Path) -> dict[str, Any]:
    return json.loads((run / "report.json").read_text())


@pytest.mark.slow
def test_the_history_is_kept_once_compressed_and_the_report_says_how_to_remove_runs(run: Path) -> None:
    assert not (run / "history").exists() and not (run / "history.jsonl").exists()
    merged = run / "history.jsonl.gz"
    records = read(merged)
    assert records and merged.read_bytes()[:2] == b"\x1f\x8b"
    plain = sum(len(json.dumps(r, separators=(",", ":"))) + 1 for r in records)
    assert merged.stat().st_size < plain / 4
    assert read(run / "history.jsonl") == records  # the old name still finds it
    text = (run / "report.md").read_text()
    assert re.search(r"This run's folder takes [\d.]+ MiB \(", text)
    assert f"remove old runs with `rm -r {run.parent}/smoke-*`" in text


@pytest.mark.slow
def test_the_headline_and_the_all_row_agree_or_the_difference_is_explained(data: dict[str, Any]) -> None:
    d = copy.deepcopy(data)
    d["all"]["count"] = d["run"]["ops"] + 99
    text = markdown(d)
    assert f"**all** counts 99 operations more than the headline's {d['run']['ops']:,}" in text
    assert "completed within the run's window" in text
    d["all"]["count"] = d["run"]["ops"]
    assert "operations more than the headline" not in markdown(d)


@pytest.mark.slow
def test_fail_and_info_are_defined_and_expected_errors_explained(data: dict[str, Any]) -> None:
    d = copy.deepcopy(data)
    row = next(r for r in d["operations"] if r["f"] == "msg_send")
    row["errors"], row["fail"] = {"unknown_session": 863}, 863
    text = markdown(d)
    assert "`fail`: a definite error" in text and "`info`: the outcome is unknown" in text
    assert "- msg_send `unknown_session`: sends to a session that had already left" in text
    assert "by design of the scenario" in text
    assert "store `shipped` (this checkout's own agents-room store)" in text


def test_each_hosts_driver_is_taken_from_the_scenario() -> None:
    assert host_drivers(load(ROOT / "scenarios" / "multi-host.toml")) == {"h0": "direct", "h1": "mcp", "h2": "http"}
    assert host_drivers(load(ROOT / "scenarios" / "two-hosts.toml")) == {"h0": "direct", "h1": "direct"}
    assert host_drivers(load(ROOT / "scenarios" / "smoke.toml")) == {}


@pytest.mark.slow
def test_the_first_line_names_each_hosts_driver(data: dict[str, Any]) -> None:
    from rich.console import Console

    assert data["run"]["drivers"] == {}  # no [hosts]: the one [run] driver
    assert "agents in 2 repos and 1 shared room, direct driver, store" in markdown(data).splitlines()[2]
    d = copy.deepcopy(data)
    d["run"]["drivers"] = {"h0": "direct", "h1": "mcp", "h2": "http"}
    first = markdown(d).splitlines()[2]
    assert (f"{d['run']['agents']} agents on 3 hosts in 2 repos and 1 shared room, drivers h0=direct h1=mcp h2=http, "
            "store") in first, first
    console = Console(record=True, width=200)
    print_summary(d, console)
    assert "agents in 2 repos and 1 shared room, drivers h0=direct h1=mcp h2=http, store" in console.export_text()


@pytest.mark.slow
def test_what_agents_wrote_reaches_the_terminal_as_escapes(data: dict[str, Any]) -> None:
    """A violation's message quotes what agents wrote (a subject, a label): its control
    characters are shown as escapes, never sent to the terminal (agents_room/visible.py)."""
    from rich.console import Console

    d = copy.deepcopy(data)
    d["verdict"] = "invalid"
    d["violations"] = [{"invariant": "read-your-writes", "message": "subject \x1b]0;pwned\x07\x9b31m\u202eevil"}]
    with open(os.devnull, "w") as sink:
        console = Console(record=True, width=200, file=sink)
        print_summary(d, console)
    text = console.export_text()
    assert "subject \\x1b]0;pwned\\x07\\x9b31m\\u202eevil" in text
    assert not {"\x1b", "\x07", "\x9b", "\u202e"} & set(text)


def test_the_fault_sentence_adds_up_to_every_info_op() -> None:
    def op(f: str, outcome: str) -> Op:
        return Op(0, "a00", "s", f, {}, None, outcome, None, None, 0.0, 1.0, 0, True)  # type: ignore[arg-type]

    ops = [op("lease_claim", "info")] * 97 + [op("room_who", "info"), op("lease_claim", "ok")]
    settled = info_settled(ops, {"lease_claim": {"found": 97, "not_found": 0, "unsettled": 0}})
    assert settled == {"found": 97, "not_found": 0, "unsettled": 0, "total": 98, "reads": {"room_who": 1}}
    [line] = [x for x in _fault_lines({"kinds": {}, "problems": [], "info_settled": settled}) if "info" in x]
    assert line.startswith("98 operations ended `info`")
    assert "97 of them change the store" in line and "97 took effect, 0 did not, 0 unsettled" in line
    assert "the other 1 are of kinds no event settles (room_who 1)" in line


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    kept: dict[str, Any] = {}

    def keep(fig: Any, out: Path, name: str) -> str:
        fig.tight_layout()
        fig.canvas.draw()
        kept[name] = fig
        return name

    monkeypatch.setattr(plots, "save", keep)
    return kept


def test_the_wal_legend_is_outside_the_plot(figures: dict[str, Any], tmp_path: Path) -> None:
    samples = [{"kind": "sample", "t": t / 2, "wal_bytes": 2**20 * (1 + t % 5), "agents_alive": 24} for t in range(40)]
    plots.wal_over_time(samples, tmp_path, [], 0, 20.0)
    fig = figures["wal.png"]
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    assert not legend.overlaps(ax.get_window_extent()), "the legend sits on the lines it names"


def test_the_lease_timeline_gives_each_session_its_own_colour(figures: dict[str, Any], tmp_path: Path) -> None:
    events, seq = [], 0
    for i in range(30):  # 30 sessions take turns on one hot path within the window
        sid = f"{i:016x}"
        for kind, at in (("lease_grant", 100.0 + i * 0.3), ("lease_release", 100.2 + i * 0.3)):
            seq += 1
            events.append(Event(seq, at, sid, kind, "/r/src/hot.py", {"mode": "exclusive", "expires_at": at + 60}))
    plots.lease_timeline(events, tmp_path, 100.0, 20.0)
    ax = figures["leases.png"].axes[0]
    colours = [tuple(c.get_facecolor()[0]) for c in ax.collections]
    assert len(colours) == 30 and len(set(colours)) == 30
    assert "one colour per session, 30 sessions" in ax.get_xlabel()


@pytest.mark.slow
def test_the_report_restates_the_setup_and_shows_one_throughput_figure(data: dict[str, Any]) -> None:
    """Issue 49: the headline says the setup (repos, shared rooms, agents); the run's throughput
    is one figure, the same in the headline, the **all** row, the expectation and the terminal;
    the wall-time phases include the run itself."""
    from rich.console import Console

    text = markdown(data)
    first = text.splitlines()[2]
    assert first.startswith("3 agents in 2 repos and 1 shared room, direct driver"), first
    figure = f"{data['run']['ops_per_s']:,.0f}"
    assert f"{figure} ops/s**" in first
    all_row = next(line for line in text.splitlines() if line.startswith("| **all** |"))
    assert all_row.split(" | ")[5] == figure, all_row
    assert data["all"]["per_s"] == data["run"]["ops_per_s"]
    throughput = [e for e in data["expect"] if e["name"] == "throughput"]
    assert all(e["actual"] == f"{figure} ops/s" for e in throughput)
    console = Console(record=True, width=200)
    print_summary(data, console)
    shown = console.export_text()
    assert "3 agents in 2 repos and 1 shared room" in shown
    assert re.search(rf"│ all\s.*│\s+{re.escape(figure)} │", shown), shown
    phases = next(line for line in text.splitlines() if line.startswith("Wall time by phase:"))
    assert re.search(r"startup [\d.]+ s, run [\d.]+ s, stop", phases) and phases.endswith(" s in all."), phases
    assert data["timings"]["run_s"] >= data["run"]["duration_s"] * 0.9


@pytest.mark.slow
def test_an_invariant_checked_zero_times_reads_not_exercised(data: dict[str, Any]) -> None:
    invariants = data["invariants"]["invariants"]
    assert invariants["wake"]["checked"] == 0  # smoke has no wake levers
    text = markdown(data)
    assert "| wake | not exercised (`scenarios/wake.toml` exercises it) | 0 | 0 |" in text
    assert all(f"| {name} | ok | {r['checked']:,} |" in text for name, r in invariants.items() if r["checked"])
    d = copy.deepcopy(data)
    d["invariants"]["invariants"]["drift-truth"]["checked"] = 0
    assert "| drift-truth | not exercised (`scenarios/smoke.toml` exercises it) | 0 | 0 |" in markdown(d)


@pytest.mark.slow
def test_the_refused_leaves_are_explained_with_the_share_the_draw_aims_at(data: dict[str, Any]) -> None:
    """shared-room: 256 of 578 room_leave_room refused. The workload means it: a leave names
    `nowhere` one time in (the agent's shared rooms + 1); the report says so, and the share."""
    d = copy.deepcopy(data)
    d["scenario"]["repos"] = [{"name": "api", "agents": 6, "rooms": ["platform", "product"]},
                              *({"name": n, "agents": 6, "rooms": ["platform"]} for n in ("web", "worker", "infra"))]
    rows = [r for r in d["operations"] if r["f"] != "room_leave_room"]
    d["operations"] = [*rows, {**rows[0], "f": "room_leave_room", "count": 578, "ok": 322, "fail": 256,
                               "errors": {"invalid_argument": 256}}]
    text = markdown(d)
    assert ("- room_leave_room `invalid_argument`: leaving a room the session was not in, by design: each leave "
            "names one of the agent's shared rooms or `nowhere`") in text
    assert "the draw names `nowhere` in 46% of the leaves here" in text and "and 44% were refused" in text
