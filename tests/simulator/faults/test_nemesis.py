"""The nemesis: the ``[faults]`` table parsed strictly, the shared clock and putting store times
back on the host clock, a real process stopped inside its write transaction (continued, or
killed), and the whole fault scenario end to end with a valid verdict and every kind of fault
exercised and counted."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agents_room.store import Store, StoreBusy
from sim.check.checker import check
from sim.check.replay import replay
from sim.faults.clock import Jump, SharedClock, Timeline, jump, retime
from sim.faults.control import RunControl
from sim.faults.nemesis import Nemesis
from sim.faults.reaper import process_state
from sim.run.runner import Runner
from sim.scenario.scenario import ScenarioError, load, parse, to_toml

ROOT = Path(__file__).resolve().parents[3]
FAULTS = ROOT / "scenarios" / "faults.toml"

BASE = """
name = "tiny"
[run]
duration_s = 10
busy_timeout_s = 0.5
[[repos]]
name = "alpha"
agents = 3
[workload.mix]
lease_claim = 1
edit = 1
"""


def refused(text: str) -> str:
    with pytest.raises(ScenarioError) as err:
        parse(text)
    return str(err.value)


# -- the [faults] table ------------------------------------------------------------------------------


def test_the_fault_scenario_plans_every_kind_and_round_trips() -> None:
    s = load(FAULTS)
    assert s.faults.kinds() == ["kill", "kill_in_write", "pause_holder", "pause_write", "disk_full", "clock_jump",
                                "garbage_store"]
    assert s.faults.clock_jumps_s == (4.0, -4.0) and s.faults.garbage_store == ("truncate", "garbage")
    assert s.faults.get("pause_write").hold_s > s.run.busy_timeout_s
    assert parse(to_toml(s), s.name) == s
    assert not parse(BASE).faults and parse(BASE).faults.kinds() == []


@pytest.mark.parametrize(("faults", "words"), [
    ("[faults.kill]\ncount = 2\nrate = 1\n", "[faults.kill] unknown key 'rate'"),
    ("[faults.kill]\ncount = 2\nrate_per_s = 1\n", "[faults.kill] count and rate_per_s: give one of them"),
    ("[faults.kill]\n", "[faults.kill] needs count (how many) or rate_per_s"),
    ("[faults.kill]\ncount = -1\n", "[faults.kill] count: must be an integer from 0 to 1000, got -1"),
    ("[faults.kill]\ncount = 1\nwindow_s = [5, 2]\n", "[faults.kill] window_s: from (5) must be before to (2)"),
    ("[faults.kill]\ncount = 1\nwindow_s = [1, 20]\n", "[faults.kill] window_s: ends at 20 s, after the run's 10 s"),
    ("[faults]\nwindow_s = [1]\n", "[faults] window_s: must be [from, to]"),
    ("[faults.pause_write]\ncount = 1\nhold_s = 0.3\n",
     "[faults.pause_write] hold_s: must exceed [run] busy_timeout_s"),
    ("[faults.pause_holder]\ncount = 1\nhold_s = 2\n", "[faults.pause_holder] unknown key 'hold_s'"),
    ("[faults.clock_jump]\njumps_s = [3, 0]\n",
     "[faults.clock_jump] jumps_s: needs at least one jump, none of them 0"),
    ("[faults.clock_jump]\njumps_s = [\"3\"]\n", "[faults.clock_jump] jumps_s: must hold numbers"),
    ("[faults.garbage_store]\ndamage = [\"flip\"]\n", "[faults.garbage_store] damage: a list of distinct values"),
    ("[faults.lightning]\ncount = 1\n", "[faults] unknown key 'lightning'"),
])
def test_a_mistake_in_faults_is_named(faults: str, words: str) -> None:
    assert words in refused(BASE + faults)


def test_faults_inside_the_agent_need_the_direct_driver() -> None:
    for kind in ("kill_in_write", "pause_write", "disk_full"):
        text = BASE.replace("busy_timeout_s = 0.5", "busy_timeout_s = 0.5\ndriver = \"mcp\"")
        assert f'[faults.{kind}] needs driver = "direct"' in refused(text + f"[faults.{kind}]\ncount = 1\n")
    s = parse(BASE + "[faults.clock_jump]\njumps_s = [2]\n")
    with pytest.raises(ScenarioError, match=r'\[faults.clock_jump\] needs driver = "direct"'):
        s.with_overrides(driver="mcp")
    with pytest.raises(ScenarioError, match=r"\[faults.kill\] window_s: ends at 8 s, after the run's 5 s"):
        parse(BASE + "[faults.kill]\ncount = 1\nwindow_s = [1, 8]\n").with_overrides(duration_s=5)
    parse(BASE.replace("busy_timeout_s = 0.5", "driver = \"mcp\"") + "[faults.kill]\ncount = 1\n")  # works through MCP


# -- the shared clock and host time -----------------------------------------------------------------


def test_the_runner_is_what_the_nemesis_acts_on(tmp_path: Path) -> None:
    """The runner satisfies RunControl, and a nemesis on it hooks into its tick and its
    agents' configuration (the nemesis itself imports nothing of sim/run)."""
    runner = Runner(load(FAULTS), tmp_path / "out", live=False)
    assert isinstance(runner, RunControl)
    missing = [m for m in ("spawn", "next_generation", "tell", "record_fault", "agents", "on_tick") if
               not hasattr(runner, m)]
    assert missing == []
    nemesis = Nemesis(runner)
    assert runner.on_tick == [nemesis.tick] and runner.agent_config["saboteur"] is True
    assert runner.agent_config["clock_file"] == str(runner.layout.out / "store" / "clock")
    nemesis.close()

    class NotARun:
        scn = runner.scn

    assert not isinstance(NotARun(), RunControl)


def test_a_shift_of_the_shared_clock_is_seen_by_every_mapping(tmp_path: Path) -> None:
    a, b = SharedClock(tmp_path / "clock"), SharedClock(tmp_path / "clock")
    assert a.offset() == b.offset() == 0.0 and abs(a.now() - time.time()) < 0.5
    a.shift(30)
    b.shift(-4.5)
    assert a.offset() == b.offset() == 25.5 and abs(b.now() - time.time() - 25.5) < 0.5


def test_the_timeline_gives_the_first_moment_the_clock_reaches_an_expiry() -> None:
    line = Timeline([Jump(10, 1000.0, 0.0, 5.0), Jump(20, 1010.0, 5.0, -3.0)])
    assert [line.offset_at_seq(s) for s in (1, 9, 10, 19, 20, 99)] == [0.0, 0.0, 5.0, 5.0, -3.0, -3.0]
    assert line.expiry(999.0, 990.0) == 999.0  # before any jump
    assert line.expiry(1003.0, 998.0) == 1000.0  # the forward jump passes it at once
    assert line.expiry(1012.0, 1002.0) == 1007.0  # reached during the forward offset
    assert line.expiry(1016.0, 1002.0) == 1019.0  # not reached before the backward jump: 3 s late after it


def test_a_backward_jump_never_grants_twice_and_retime_puts_events_on_host_time(tmp_path: Path, repo: Path) -> None:
    clock = SharedClock(tmp_path / "clock")
    with Store.open(tmp_path / "room.db", clock=clock) as store:
        a = store.room_join(cwd=str(repo), pid=os.getpid(), label="a").session_id
        b = store.room_join(cwd=str(repo), pid=os.getpid(), label="b").session_id
        path = str(repo / "x.py")
        granted = store.lease_claim(a, path, ttl_s=2)
        back = jump(store, clock, -30)
        # Host time moves on past the lease's time, the store's clock is 30 s behind: still held.
        assert not store.lease_claim(b, path, ttl_s=2).ok
        store.msg_send(b, "*", subject="written 30 s in the store's past")
        forward = jump(store, clock, +33)  # now 3 s ahead: past the lease's time
        late = store.lease_claim(b, path, ttl_s=2)
        assert late.ok and late.lease.token > granted.lease.token
        events = store.events()
    moved, _ = retime(events, [], [back, forward])
    host = [e.at for e in moved]
    assert host == sorted(host) and abs(host[-1] - time.time()) < 5  # monotone, and on the host clock
    assert [e.at for e in events] != sorted(e.at for e in events)  # the store's own times went backward
    grant_a = next(e for e in moved if e.kind == "lease_grant" and e.session_id == a)
    # Live through the backward jump, expired by the forward one: at that instant on the host clock.
    assert grant_a.payload["expires_at"] == forward.wall
    assert not replay(moved).problems


def test_retime_makes_a_run_with_a_jump_checkable(tmp_path: Path, repo: Path) -> None:
    """The same history and events: on the store's jumped times the op windows do not hold
    their events; on host times every check passes."""
    clock = SharedClock(tmp_path / "clock")
    history: list[dict] = []

    def op(store: Store, f: str, args: dict, session: str | None, call) -> dict:
        n = len(history)
        base = {"process": 0, "agent": "a00", "session": session, "f": f, "error": None}
        history.append({**base, "index": n, "time": time.monotonic_ns(), "wall": time.time(), "type": "invoke",
                        "value": args})
        value = call()
        history.append({**base, "index": n + 1, "time": time.monotonic_ns(), "wall": time.time(), "type": "ok",
                        "value": value})
        return value

    with Store.open(tmp_path / "room.db", clock=clock) as store:
        jumps = [jump(store, clock, 20)]
        j = op(store, "room_join", {"harness_key": None}, None, lambda: {
            "session_id": store.room_join(cwd=str(repo), pid=os.getpid()).session_id, "rooms": [],
            "autonomy": "notify"})
        sid = j["session_id"]
        path = str(repo / "x.py")

        def claim() -> dict:
            c = store.lease_claim(sid, path, ttl_s=5)
            return {"ok": True, "token": c.lease.token, "mode": "exclusive", "expires_at": c.lease.expires_at,
                    "holder": None}

        op(store, "lease_claim", {"path": path, "mode": "exclusive", "ttl_s": 5}, sid, claim)
        jumps.append(jump(store, clock, -20))
        op(store, "lease_release", {"path": path}, sid, lambda: store.lease_release(sid, path) or {})
        events = store.events()
        integrity = store.integrity_check()
    assert check(events, history, integrity).verdict == "invalid"
    events2, history2 = retime(events, history, jumps)
    verdict = check(events2, history2, integrity)
    assert verdict.verdict == "valid", verdict.violations
    assert history2[3]["value"]["expires_at"] == pytest.approx(history[3]["value"]["expires_at"] - 20)


# -- a real process stopped inside its write transaction --------------------------------------------

CHILD = """
import os, sys, time
from agents_room.store import Store
from sim.faults.saboteur import Saboteur
store = Store.open(sys.argv[1], busy_timeout_s=0.3)
sid = store.room_join(cwd=sys.argv[2], pid=os.getpid(), label="stopper").session_id
saboteur = Saboteur(())
saboteur.install(store)
saboteur.arm("stop-in-write", time.monotonic_ns() + 30 * 10**9)
print(sid, flush=True)
store.lease_claim(sid, sys.argv[2] + "/x.py", ttl_s=60)
print("committed", flush=True)
"""


@contextmanager
def stopped_child(db: Path, repo: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A real process that joined, then stopped itself inside its lease_claim's transaction."""
    with subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(repo)], cwd=ROOT, stdout=subprocess.PIPE,
                          text=True) as child:
        try:
            assert child.stdout is not None
            sid = child.stdout.readline().strip()
            deadline = time.monotonic() + 20
            while process_state(child.pid) != "T":
                assert time.monotonic() < deadline and child.poll() is None, "the child never stopped itself"
                time.sleep(0.01)
            yield child, sid
        finally:
            child.kill()


@pytest.mark.slow
def test_a_writer_stopped_in_its_transaction_makes_others_busy_for_the_bounded_wait_only(
        tmp_path: Path, repo: Path) -> None:
    db = tmp_path / "room.db"
    Store.open(db).close()
    with stopped_child(db, repo) as (child, stopper), Store.open(db, busy_timeout_s=0.3) as store:
        start = time.monotonic()
        with pytest.raises(StoreBusy, match="nothing was changed"):  # the join waits on the stopped writer
            store.room_join(cwd=str(repo), pid=os.getpid(), label="other")
        assert time.monotonic() - start < 10.0  # the bounded 0.3 s wait, not the pause (which never ends)
        assert [m.label for m in store.room_who()] == ["stopper"]  # readers are never blocked
        os.kill(child.pid, signal.SIGCONT)
        assert child.stdout.readline().strip() == "committed" and child.wait(20) == 0
        other = store.room_join(cwd=str(repo), pid=os.getpid(), label="other").session_id
        denied = store.lease_claim(other, str(repo / "x.py"), ttl_s=5)
        assert not denied.ok and denied.holder.session_id == stopper  # the stopped claim committed on waking
        assert store.integrity_check() == "ok"


@pytest.mark.slow
def test_a_writer_killed_in_its_transaction_leaves_nothing_half_written(tmp_path: Path, repo: Path) -> None:
    db = tmp_path / "room.db"
    Store.open(db).close()
    with stopped_child(db, repo) as (child, stopper):
        os.kill(child.pid, signal.SIGKILL)
        child.wait(20)
    with Store.open(db, busy_timeout_s=0.3) as store:
        other = store.room_join(cwd=str(repo), pid=os.getpid(), label="other").session_id
        assert store.lease_claim(other, str(repo / "x.py"), ttl_s=5).ok  # the dead claim never happened
        assert not [e for e in store.events() if e.kind == "lease_grant" and e.session_id == stopper]
        assert store.integrity_check() == "ok"


CHILD_OVER_LIMIT = """
import os, signal, sys
from agents_room.store import RoomError, Store
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # as every simulated agent does: EFBIG, not death
store = Store.open(sys.argv[1], busy_timeout_s=1)
sid = store.room_join(cwd=sys.argv[2], pid=os.getpid(), label="full").session_id
print(sid, flush=True)
for _ in range(2):
    sys.stdin.readline()
    try:
        print("granted" if store.lease_claim(sid, sys.argv[2] + "/x.py", ttl_s=60).ok else "denied", flush=True)
    except RoomError as exc:
        print(str(exc).replace(chr(10), " "), flush=True)
"""


@pytest.mark.slow
def test_a_writer_over_its_file_size_limit_gets_a_clear_store_error_and_nobody_else_does(
        tmp_path: Path, repo: Path) -> None:
    """What the disk_full fault does, alone: the WAL pinned by a reader, one process's
    RLIMIT_FSIZE set at the WAL's end (``prlimit``, from outside, as the nemesis does)."""
    db = tmp_path / "room.db"
    Store.open(db).close()
    with subprocess.Popen([sys.executable, "-c", CHILD_OVER_LIMIT, str(db), str(repo)], cwd=ROOT, text=True,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as child, \
            Store.open(db, busy_timeout_s=1) as pin, Store.open(db, busy_timeout_s=1) as other:
        assert child.stdin is not None and child.stdout is not None
        full = child.stdout.readline().strip()
        pin.db.conn.execute("BEGIN")
        pin.db.conn.execute("SELECT count(*) FROM events").fetchone()
        original = resource.prlimit(child.pid, resource.RLIMIT_FSIZE)
        resource.prlimit(child.pid, resource.RLIMIT_FSIZE, (pin.db.wal_bytes(), original[1]))
        child.stdin.write("go\n")
        child.stdin.flush()
        said = child.stdout.readline().strip()
        assert said.startswith(f"store_error: {db}: disk I/O error (SQLITE_IOERR_WRITE): the disk may be full"), said
        me = other.room_join(cwd=str(repo), pid=os.getpid(), label="other").session_id  # nobody else is affected
        assert other.lease_claim(me, str(repo / "y.py"), ttl_s=60).ok
        resource.prlimit(child.pid, resource.RLIMIT_FSIZE, original)
        pin.db.conn.execute("COMMIT")
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "granted"  # it carries on once there is room
        child.stdin.close()
        assert child.wait(20) == 0
        grants = [e for e in other.events() if e.kind == "lease_grant" and e.session_id == full]
        assert len(grants) == 1  # the failed claim left nothing behind
        assert other.integrity_check() == "ok"


# -- the fault scenario, end to end ----------------------------------------------------------------


@pytest.mark.slow
def test_the_fault_scenario_is_valid_with_every_fault_exercised(tmp_path: Path) -> None:
    out = tmp_path / "faults"
    done = subprocess.run([sys.executable, "-m", "sim.cli", "run", str(FAULTS), "--out", str(out), "--no-live",
                           "--no-plots"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    report = json.loads((out / "report.json").read_text())
    summary = report["fault_summary"]
    assert done.returncode == 0, (report["violations"][:5], summary, done.stderr[-2000:])
    assert report["verdict"] == "valid" and report["integrity"] == "ok" and report["run"]["drained"]
    inv = report["invariants"]
    assert all(r["status"] == "ok" for r in inv["invariants"].values())
    d = inv["deliveries"]
    assert d["lost"] == d["duplicated"] == d["unexpected"] == d["undrained"] == 0
    assert summary["problems"] == [] and summary["info_settled"]["unsettled"] == 0
    assert summary["info_settled"]["not_found"] + summary["info_settled"]["found"] >= 5  # the kills' ops, at least
    kinds = summary["kinds"]
    assert list(kinds) == load(FAULTS).faults.kinds()
    for kind, row in kinds.items():
        assert row["exercised"] and row["injected"] >= 1, (kind, row)
    assert kinds["kill"]["injected"] == 3 and kinds["kill_in_write"]["died_mid_operation"] == 2
    assert 1 <= kinds["pause_holder"]["stale_writes"] <= len(inv["stale_writes"])
    assert kinds["pause_write"]["store_busy"] >= 1 and kinds["pause_write"]["longest_wait_s"] < 2.0
    assert kinds["disk_full"]["store_errors"] >= 1 and kinds["disk_full"]["store_errors_others"] == 0
    refusals = kinds["garbage_store"]["refusals"]
    assert len(refusals) == 6 and all(r["ok"] for r in refusals)
    # Every fault is a row of samples.jsonl (shaded on the plots) and a line of the report.
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    shaded = {r["fault"] for r in rows if r["kind"] == "fault"}
    assert shaded == set(kinds) - {"garbage_store"}
    text = (out / "report.md").read_text()
    assert text.startswith("# faults: VALID") and "## Faults" in text
    assert all(f"| {kind} | {row['injected']} |" in text for kind, row in kinds.items())
