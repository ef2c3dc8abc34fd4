"""The final drain waits while the inbox is being read and gives up only when nothing moves,
saying why. A real agent of the simulator on a real store; the loaded machine is a driver that
answers every call late and hands out one message per read (so a drain takes many reads)."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from agents_room.store import Store
from sim.run.agent import Agent, Config
from sim.run.drivers import OpError

ROOT = Path(__file__).resolve().parents[3]


class Loaded:
    """A machine where every call answers ``delay_s`` late; reads hand out one message."""

    def __init__(self, inner: Any, delay_s: float) -> None:
        self.inner, self.delay_s, self.name = inner, delay_s, inner.name

    def call(self, f: str, args: dict[str, Any]) -> dict[str, Any]:
        time.sleep(self.delay_s)
        return self.inner.call(f, {**args, "limit": 1} if f == "msg_recv" else args)

    def cpu_s(self) -> float:
        return 0.0

    def close(self) -> None:
        self.inner.close()


class Unanswering(Loaded):
    def call(self, f: str, args: dict[str, Any]) -> dict[str, Any]:
        time.sleep(self.delay_s)
        raise OpError("store_busy", "the write lock was not had in time")


def agent_on(tmp_path: Path) -> tuple[Agent, Path]:
    repo, db = tmp_path / "alpha", tmp_path / "room.db"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (tmp_path / "history").mkdir()
    cfg = Config(agent="a00", agent_no=0, n_agents=1, generation=0, cwd=str(repo), files=[str(repo / "f.py")], hot=0,
                 rooms=["team"], tags=[], all_tags=[], harness_key=str(uuid.uuid4()), db=str(db),
                 history_dir=str(tmp_path / "history"), scenario=str(ROOT / "scenarios" / "smoke.toml"), driver="direct")
    agent = Agent(cfg)
    assert agent.join()
    return agent, db


def test_a_slow_drain_that_keeps_moving_is_waited_for(tmp_path: Path, capsys: Any) -> None:
    agent, db = agent_on(tmp_path)
    with Store.open(db) as store:
        sender = store.room_join(cwd=str(tmp_path), pid=None, room="team", label="sender").session_id
        for i in range(8):
            store.msg_send(sender, agent.session, f"m{i}", "body")
    agent.driver = Loaded(agent.driver, 0.2)
    began = time.monotonic()
    drained, why = agent.drain(1.0)
    took = time.monotonic() - began
    agent.driver.close()
    assert (drained, why) == (True, "")
    assert took > 1.5  # longer than the drain may stall: a fixed deadline would have given up
    assert capsys.readouterr().out.splitlines()[-1] == "draining 8"  # what keeps the runner waiting


def test_a_drain_where_nothing_moves_gives_up_and_says_why(tmp_path: Path) -> None:
    agent, _ = agent_on(tmp_path)
    agent.driver = Unanswering(agent.driver, 0.05)
    began = time.monotonic()
    drained, why = agent.drain(0.5)
    agent.driver.close()
    assert drained is False and 0.5 <= time.monotonic() - began < 5
    assert why.startswith("nothing moved for 0.5 s: 0 messages read before, ") and "store_busy" in why, why


class Counting(Loaded):
    """Counts the calls it passes on."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner, 0.0)
        self.calls: list[str] = []

    def call(self, f: str, args: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(f)
        return self.inner.call(f, args)


def test_an_op_whose_wait_would_cross_the_runs_end_is_not_begun(tmp_path: Path) -> None:
    """A stale renewal waits for its lease to run out first: near the run's end it is not begun
    (its wait held every run's stop for seconds); with time left it waits, then renews."""
    from sim.run.workload import Op

    agent, _ = agent_on(tmp_path)
    path = agent.cfg.files[0]
    agent.perform(Op("lease_claim", {"path": path, "ttl_s": 1, "mode": "exclusive"}))
    assert path in agent.known.held
    agent.driver = counting = Counting(agent.driver)
    agent.end_ns = time.monotonic_ns() + 300_000_000  # 0.3 s left, the lease runs 1 s
    agent.perform(Op("lease_renew", {"path": path, "ttl_s": 1}, "stale"))
    assert counting.calls == [] and path in agent.known.held
    agent.end_ns = time.monotonic_ns() + 10_000_000_000
    agent.perform(Op("lease_renew", {"path": path, "ttl_s": 1}, "stale"))
    assert counting.calls == ["lease_renew"]
    agent.driver.close()
