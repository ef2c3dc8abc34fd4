"""The host nemesis: the faults of ``[faults]`` that act on simulated hosts and on their one
PostgreSQL (``sim/scenario/hosts.py`` reads them), carried out on the run's tick through
``RunControl.hosts`` (a ``sim.hosts.cluster.Hosts``):

- ``partition``: host ``i`` cut off the database (iptables DROP inside its namespace, both
  ways) for ``hold_s`` (default: the longest lease TTL plus 2 s, so every lease it held runs
  out meanwhile), then healed; with ``stale_holder``, the host's agents are armed first to stop
  right before their next edit of a hot file under a live lease (``sim/faults/saboteur.py``),
  the cut comes once one has stopped (or after ``ARM_S``), and that agent is continued after
  the heal: it edits with its old token, a stale-holder write after the heal, reported apart;
- ``kill_host``: every process of a host killed at once (its PID namespace's init dies), the
  host back with a fresh PID namespace and each of its agents replaced by a new process; the
  dead sessions pruned by ``agents-room prune`` run on that host (only its ``/proc`` proves
  them gone);
- ``pg_kill``: every process of the PostgreSQL server SIGKILLed, then the server started again
  (crash recovery): what was committed must still be there, the checker says so;
- ``pg_pause``: the server SIGSTOPped for ``hold_s``, then SIGCONT.

One episode at a time; each is a ``{"kind": "fault"}`` row of ``samples.jsonl`` (shaded on the
plots) with the host it hit, and an entry of :attr:`HostNemesis.log`. Whatever is still cut or
stopped at the run's end is healed or continued then, before the agents stop and drain.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .control import RunControl
from .reaper import children, process_state

PARTITION_MARGIN_S = 2.0  # a partition's default: the longest lease TTL plus this
ARM_S = 4.0  # a stale_holder partition: how long the host's agents may take to stop before an edit
PRUNE_GIVE_UP_S = 60  # a killed host's sessions are pruned within this, or the drain cannot be decided


@dataclass
class Due:
    at_ns: int
    kind: str
    hold_s: float
    host: int | None
    stale_holder: bool = False


class HostNemesis:
    def __init__(self, runner: RunControl) -> None:
        self.runner = runner
        self.hosts: Any = runner.hosts
        self.rng = random.Random(f"host-nemesis-{runner.scn.run.seed}")
        self.log: list[dict[str, Any]] = []
        self.pending: list[Due] = []
        self.active: tuple[Due, int, int, int] | None = None  # (what, host index, started, ends at)
        self.arming: tuple[Due, int, list[Any], int] | None = None  # stale_holder: (what, host, armed, cut by)
        self.holder: Any = None  # the agent stopped before its edit, cut off with the host until the heal
        self.armed: list[Any] = []
        self.planned = self.finished = False
        self._opened: Any = None
        self._prunes: list[threading.Thread] = []
        self.pruned: dict[str, bool] = {}  # harness key of a killed agent -> its session was pruned
        runner.on_tick.append(self.tick)

    def _store(self) -> Any:
        from agents_room.store import Store

        if self._opened is None:
            self._opened = Store.open(self.hosts.url, busy_timeout_s=self.runner.scn.run.busy_timeout_s)
        return self._opened

    def close(self) -> None:
        """Every prune done (the runner reads the events next), the store closed."""
        for t in self._prunes:
            t.join()
        if self._opened is not None:
            self._opened.close()

    def _plan(self, start_ns: int) -> None:
        scn = self.runner.scn
        lo, hi = scn.faults.window(scn.run.duration_s)
        for kind, f in scn.faults.hosts:
            a, b = f.window_s or (lo, hi)
            hold = f.hold_s or (scn.workload.longest_lease_s() + PARTITION_MARGIN_S if kind == "partition" else 0.0)
            for t in sorted(self.rng.uniform(a, b) for _ in range(f.count)):
                self.pending.append(Due(start_ns + int(t * 1e9), kind, hold, f.host, f.stale_holder))
        self.pending.sort(key=lambda d: d.at_ns)
        self.planned = True

    def _record(self, kind: str, start_ns: int, end_ns: int | None, **detail: Any) -> None:
        self.log.append({"fault": kind, "time": start_ns, "end": end_ns, **detail})
        self.runner.record_fault(kind, start_ns, end_ns, **detail)

    def tick(self, runner: RunControl, now_ns: int) -> None:
        if self.finished:
            return
        if now_ns >= runner.end_ns:
            self.finish(now_ns)
            return
        if not self.planned:
            self._plan(runner.start_ns)
        if self.arming is not None:
            self._cut_when_stopped(now_ns)
            return
        if self.active is not None:
            if now_ns < self.active[3]:
                return
            self._end(now_ns)
        due = [d for d in self.pending if d.at_ns <= now_ns]
        if due:
            self.pending.remove(due[0])
            self._begin(due[0], now_ns)
        for late in [d for d in self.pending if d.at_ns + int(d.hold_s * 1e9) >= runner.end_ns]:
            self.pending.remove(late)
            self.log.append({"fault": late.kind, "time": late.at_ns, "end": None, "missed": "no time left in the run"})

    def _begin(self, d: Due, now_ns: int) -> None:
        hosts = self.hosts
        i = d.host if d.host is not None else self.rng.randrange(len(hosts.hosts))
        if d.kind == "partition" and d.stale_holder:
            host = hosts.hosts[i]
            armed = [a for a in self.runner.agents if hosts.host_of(a.no) is host and a.state == "ready"
                     and not a.expected_exit and a.popen.poll() is None]
            deadline = now_ns + int(ARM_S * 1e9)
            self.runner.tell(f"fault stop-before-edit {deadline}", armed)
            self.arming = (d, i, armed, deadline)
        elif d.kind == "partition":
            hosts.net.partition(i)
            self.active = (d, i, now_ns, now_ns + int(d.hold_s * 1e9))
        elif d.kind == "pg_pause":
            hosts.db.pause()
            self.active = (d, -1, now_ns, now_ns + int(d.hold_s * 1e9))
        elif d.kind == "pg_kill":
            killed = hosts.db.kill()
            restart_s = hosts.db.start()
            self._record("pg_kill", now_ns, time.monotonic_ns(), processes=killed, restart_s=round(restart_s, 3))
        elif d.kind == "kill_host":
            self._kill_host(i, now_ns)

    def _cut_when_stopped(self, now_ns: int) -> None:
        """A stale_holder partition: the cut once one armed agent has stopped before its edit
        (the others disarmed), or at the arming's deadline without one."""
        assert self.arming is not None
        d, i, armed, deadline = self.arming
        stopped = [a for a in armed if process_state(_agent_pid(a)) in ("T", "t")]
        if not stopped and now_ns <= deadline + 100_000_000 and any(a.popen.poll() is None for a in armed):
            return
        self.runner.tell("fault disarm", armed)
        self.arming, self.armed = None, armed
        self.holder = stopped[0] if stopped else None
        self.hosts.net.partition(i)
        self.active = (d, i, now_ns, now_ns + int(d.hold_s * 1e9))

    def _continue_armed(self) -> None:
        """After the heal: the stopped holder (and any agent disarmed too late to keep it from
        stopping) continued; the holder makes its edit with the token it had."""
        for a in self.armed:
            pid = _agent_pid(a)
            if a.popen.poll() is None and process_state(pid) in ("T", "t"):
                # nsenter stops itself when its child stops (and continues it when continued):
                # both, or nsenter stays stopped and the agent's exit is never reaped.
                for stopped in (pid, a.popen.pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(stopped, signal.SIGCONT)
        self.armed = []

    def _end(self, now_ns: int) -> None:
        assert self.active is not None
        d, i, start, _ = self.active
        self.active = None
        if d.kind == "partition":
            self.hosts.net.heal(i)
            holder = {"stale_holder": self.holder.name if self.holder else None} if d.stale_holder else {}
            self._continue_armed()
            self.holder = None
            self._record("partition", start, now_ns, host=self.hosts.hosts[i].name, hold_s=d.hold_s, **holder)
        elif d.kind == "pg_pause":
            self.hosts.db.resume()
            self._record("pg_pause", start, now_ns, hold_s=d.hold_s)

    def _kill_host(self, i: int, now_ns: int) -> None:
        host = self.hosts.hosts[i]
        victims = [a for a in self.runner.agents if self.hosts.host_of(a.no) is host and a.popen.poll() is None
                   and not a.expected_exit]
        for a in victims:
            a.expected_exit = True
        killed = self.hosts.restart_host(host)
        for a in victims:
            a.popen.wait()
            self.runner.agents.append(self.runner.spawn(a.no, self.runner.next_generation(a.no)))
        keys = [a.harness_key for a in victims]
        thread = threading.Thread(target=self._prune_on, args=(host, keys), daemon=True)
        thread.start()
        self._prunes.append(thread)
        self._record("kill_host", now_ns, time.monotonic_ns(), host=host.name, processes=killed,
                     agents=[a.name for a in victims])

    def _prune_on(self, host: Any, keys: list[str]) -> None:
        """``agents-room prune`` run on the killed host itself, as its operator would, once the
        dead sessions have been quiet for the longest TTL (each lease they held has run out):
        only that host's ``/proc`` proves its sessions gone (another host's store keeps them,
        unknown). Repeated until none of ``keys`` has a live session, for at most a minute."""
        from agents_room.store import RoomError

        quiet = self.runner.scn.workload.longest_lease_s()
        exe = str(Path(sys.executable).with_name("agents-room"))
        env = {k: v for k, v in os.environ.items() if k not in ("AGENTS_ROOM_HARNESS_KEY", "AGENTS_ROOM_TOKEN")}
        env.update(AGENTS_ROOM_DB=self.hosts.url, AGENTS_ROOM_HOST_ID=host.name)
        time.sleep(quiet)
        deadline = time.monotonic() + PRUNE_GIVE_UP_S
        while time.monotonic() < deadline:
            subprocess.run(host.command([exe, "prune", "--quiet-s", str(quiet)]), env=env, capture_output=True,
                           timeout=60, check=False)
            try:
                with self._store().db.read() as tx:
                    left = sum(tx.scalar("SELECT count(*) FROM sessions WHERE harness_key = ? AND left_at IS NULL",
                                         (k,)) for k in keys)
            except RoomError:  # busy, or the database restarting: again
                left = -1
            if left == 0:
                self.pruned.update(dict.fromkeys(keys, True))
                return
            time.sleep(0.3)
        self.pruned.update(dict.fromkeys(keys, False))

    def finish(self, now_ns: int) -> None:
        """Heal, continue: the agents must reach the database to stop and drain."""
        if self.arming is not None:  # never cut: nobody stays armed or stopped
            self.runner.tell("fault disarm", self.arming[2])
            self.armed, self.arming = self.arming[2], None
            self._continue_armed()
        if self.active is not None:
            self._end(now_ns)
        for d in self.pending:
            self.log.append({"fault": d.kind, "time": d.at_ns, "end": None, "missed": "no time left in the run"})
        self.pending = []
        self.finished = True


def _agent_pid(a: Any) -> int:
    """The agent's own process (this namespace's number): the child ``nsenter`` forked into the
    host's PID namespace (``sim/hosts/pidns.py``), not ``nsenter`` itself."""
    kids = children(a.popen.pid)
    return kids[0] if kids else a.popen.pid
