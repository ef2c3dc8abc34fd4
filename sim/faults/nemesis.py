"""The nemesis: the run's fault injector, driven by the scenario's ``[faults]`` table.

It acts on the run only through :class:`~sim.faults.control.RunControl` (the runner, handed
over by ``sim/pipeline.py``), on its tick. Real signals and real limits, at planned moments
of the run (``sim/scenario/faultplan.py``):

- ``kill``: SIGKILL a random agent (and its children); a replacement process with a new
  harness key takes its place, and the dead session is pruned as an operator would;
- ``kill_in_write``: the agent is armed to stop itself inside its next write transaction
  (``sim/faults/saboteur.py``); once ``/proc`` shows it stopped, SIGKILL: it dies holding SQLite's
  write lock with its changes uncommitted;
- ``pause_holder``: the agent stops itself right before an edit of a hot path under a live
  lease; it stays stopped past the lease's time (the longest TTL plus ``extra_s``), then
  SIGCONT: it edits with its old token, a stale-holder write if someone was granted meanwhile;
- ``pause_write``: stopped inside a write transaction for ``hold_s`` (more than the bounded
  wait), then SIGCONT: everyone else gets ``store_busy`` meanwhile and carries on;
- ``disk_full``: ``RLIMIT_FSIZE`` of one agent lowered (``prlimit``) to the WAL's size for
  ``hold_s`` while a read transaction pins the WAL, so its next commit fails with EFBIG;
- ``clock_jump``: the shared store clock jumps (``sim/faults/clock.py``) inside a write
  transaction, so the jump is one point in commit order.

One episode (a stop, a limit) runs at a time, so each fault's effect is its own; kills
happen whenever due, never to the agent of the running episode. Every fault is a
``{"kind": "fault"}`` row in ``samples.jsonl`` (shaded on the plots) and an entry of
:attr:`Nemesis.log`, from which ``sim/faults/report.py`` writes the report's fault section.
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..scenario.faultplan import Faults, Planned, schedule
from .clock import SharedClock, jump
from .control import AgentHandle, RunControl
from .reaper import Reaper, process_state

ARM_S = {"kill_in_write": 3.0, "pause_write": 3.0, "pause_holder": 6.0}  # how long an armed stop may take
ATTEMPTS = 3  # an armed stop that never came is tried again with another agent
END_MARGIN_S = 0.5  # every episode is over this long before the run's end


@dataclass
class Episode:
    planned: Planned
    proc: AgentHandle | None  # the victim, once known
    deadline_ns: int  # armed: give up after; stopped/limited: act at
    stopped_ns: int = 0
    detail: dict[str, Any] = field(default_factory=dict)
    armed: list[AgentHandle] = field(default_factory=list)  # agents told to stop themselves


class Nemesis:
    def __init__(self, runner: RunControl) -> None:
        self.runner = runner
        self.plan: Faults = runner.scn.faults
        self.rng = random.Random(f"nemesis-{runner.scn.run.seed}")
        self.log: list[dict[str, Any]] = []
        self.pending: list[Planned] = []
        self.episode: Episode | None = None
        self.watch: list[tuple[AgentHandle, int]] = []  # disarmed agents that could still stop, until when
        self.planned = False
        self.finished = False
        self.jumped: list[tuple[int, float]] = []  # (when, shift)
        self._store: Any = None
        self._pin: Any = None
        self.reaper = Reaper(runner, self.store)
        self._clock: SharedClock | None = None
        runner.agent_config["saboteur"] = True
        if self.plan.clock_jumps_s:  # the file is made by whoever maps it first, offset 0
            runner.agent_config["clock_file"] = str(runner.layout.out / "store" / "clock")
        runner.on_tick.append(self.tick)

    # -- planning ----------------------------------------------------------------------------------

    def _plan(self, start_ns: int) -> None:
        self.pending = schedule(self.plan, self.runner.scn.run.duration_s, start_ns, self.rng)
        self.planned = True

    def _victim(self) -> AgentHandle | None:
        """A random working agent, never the one the running episode is about."""
        e = self.episode
        busy = {a.popen.pid for a in ([e.proc] if e.proc else e.armed if len(e.armed) == 1 else [])} if e else set()
        pool = [a for a in self.runner.agents if a.state == "ready" and not a.expected_exit
                and a.popen.poll() is None and a.popen.pid not in busy]
        return self.rng.choice(pool) if pool else None

    def _record(self, kind: str, start_ns: int, end_ns: int | None = None, **detail: Any) -> None:
        row = {"fault": kind, "time": start_ns, "end": end_ns, **detail}
        self.log.append(row)
        self.runner.record_fault(kind, start_ns, end_ns, **detail)

    def _miss(self, p: Planned, why: str) -> None:
        self.log.append({"fault": p.kind, "time": p.at_ns, "end": None, "missed": why})

    # -- the tick ------------------------------------------------------------------------------------

    def tick(self, runner: RunControl, now_ns: int) -> None:
        if self.finished:
            return
        if now_ns >= runner.end_ns:
            self.finish()
            return
        if not self.planned:
            self._plan(runner.start_ns)
        self._release_stray(now_ns)
        if self.episode is not None:
            self._step(now_ns)
        last_ns = runner.end_ns - int(END_MARGIN_S * 1e9)
        for p in [p for p in self.pending if p.at_ns <= now_ns]:
            if p.at_ns > now_ns:  # put off while this loop ran
                continue
            if p.kind == "kill":
                self.pending.remove(p)
                self._kill(p, now_ns)
            elif p.kind == "clock_jump" and not self._jump_blocked():
                if self._jump(p, now_ns):
                    self.pending.remove(p)
                    self._space_jumps(now_ns)
            elif self.episode is None:
                self.pending.remove(p)
                self._start(p, now_ns, last_ns)

    def _jump_blocked(self) -> bool:
        """A jump waits while a writer may be stopped holding the write lock (it would wait
        too), and while a paused holder's time is being waited out (a backward jump would
        stretch its lease past the pause)."""
        e = self.episode
        return e is not None and (e.planned.kind == "pause_write"
                                  or (e.planned.kind == "pause_holder" and e.stopped_ns > 0))

    def _space_jumps(self, now_ns: int) -> None:
        """Delayed jumps keep their planned spacing: each clock offset lasts a while."""
        n = len(self.plan.clock_jumps_s)
        a, b = self.plan.clock_window_s or self.plan.window(self.runner.scn.run.duration_s)
        gap = int((b - a) / (n + 1) * 1e9)
        for p in self.pending:
            if p.kind == "clock_jump":
                p.at_ns = max(p.at_ns, now_ns + gap)
                now_ns = p.at_ns
        self.pending.sort(key=lambda p: p.at_ns)

    def _start(self, p: Planned, now_ns: int, last_ns: int) -> None:
        proc = self._victim()
        if proc is None:
            self._miss(p, "no agent to pick")
            return
        if p.kind == "disk_full":
            hold_ns = int(self.plan.get("disk_full").hold_s * 1e9)  # type: ignore[union-attr]
            if now_ns + hold_ns > last_ns:
                self._miss(p, "too late in the run")
                return
            try:
                self.episode = Episode(p, proc, now_ns + hold_ns, now_ns, self._limit(proc))
            except ProcessLookupError:
                self._pin.db.conn.execute("COMMIT")
                self._miss(p, f"{proc.name} exited first")
            return
        deadline = min(now_ns + int(ARM_S[p.kind] * 1e9), last_ns - self._hold_ns(p.kind))
        if deadline <= now_ns:
            self._miss(p, "too late in the run")
            return
        # A write comes at once; an edit of a hot path under a lease may take long for any one
        # agent: every agent is armed, the first to stop is the victim, the others disarmed.
        armed = [proc] if p.kind != "pause_holder" else [
            a for a in self.runner.agents if a.state == "ready" and not a.expected_exit and a.popen.poll() is None]
        what = "stop-before-edit" if p.kind == "pause_holder" else "stop-in-write"
        # Disarmed earlier, re-armed now (lines arrive in order): a stop from now on is this one.
        self.watch = [(a, until) for a, until in self.watch if a not in armed]
        self.runner.tell(f"fault {what} {deadline}", armed)
        self.episode = Episode(p, None, deadline, armed=armed)

    def _hold_ns(self, kind: str) -> int:
        spec = self.plan.get(kind)
        if kind == "pause_holder":
            # Past the lease's time: the longest TTL, and longer while a lease granted before a
            # backward clock jump may still be live (it lives that much longer).
            ttl_ns = int(self.runner.scn.workload.longest_lease_s() * 1e9)
            now = time.monotonic_ns()
            stretch = max([0] + [min(int(-j * 1e9), at + int(-j * 1e9) + ttl_ns - now)
                                 for at, j in self.jumped if j < 0])
            return ttl_ns + stretch + int(spec.hold_s * 1e9)  # type: ignore[union-attr]
        return int(spec.hold_s * 1e9) if spec else 0

    def _step(self, now_ns: int) -> None:
        e = self.episode
        assert e is not None
        kind = e.planned.kind
        if kind == "disk_full":
            if now_ns >= e.deadline_ns:
                self._unlimit(e)
            return
        if not e.stopped_ns:
            stopped = [a for a in e.armed if process_state(a.popen.pid) in ("T", "t")]
            if stopped:
                e.proc, e.stopped_ns = stopped[0], now_ns
                others = [a for a in e.armed if a is not e.proc]
                self.runner.tell("fault disarm", others)
                self.watch += [(a, e.deadline_ns) for a in others]
                self._release_stray(now_ns)
                if kind == "kill_in_write":
                    self._kill_proc(e.proc, now_ns, "kill_in_write")
                    self.episode = None
                else:
                    e.deadline_ns = now_ns + self._hold_ns(kind)
            elif now_ns > e.deadline_ns + 100_000_000 or all(a.popen.poll() is not None for a in e.armed):
                # The armed moment never came in time (and cannot come after the deadline).
                self.runner.tell("fault disarm", e.armed)
                self.episode = None
                if e.planned.attempt < ATTEMPTS:
                    self.pending.insert(0, Planned(now_ns, kind, e.planned.value, e.planned.attempt + 1))
                else:
                    self._miss(e.planned, "no agent reached the moment in time")
            return
        if now_ns >= e.deadline_ns:
            self._continue(e, now_ns)

    def _release_stray(self, now_ns: int) -> None:
        """An agent disarmed too late to keep it from stopping: continue it at once."""
        keep = []
        for a, until in self.watch:
            if a.popen.poll() is None and process_state(a.popen.pid) in ("T", "t"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(a.popen.pid, signal.SIGCONT)
            if now_ns <= until + 200_000_000:
                keep.append((a, until))
        self.watch = keep

    def _continue(self, e: Episode, now_ns: int) -> None:
        assert e.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(e.proc.popen.pid, signal.SIGCONT)
        self._record(e.planned.kind, e.stopped_ns, now_ns, agent=e.proc.name, pid=e.proc.popen.pid,
                     wall=time.time() - (now_ns - e.stopped_ns) / 1e9, wall_end=time.time())
        self.episode = None

    # -- kills -------------------------------------------------------------------------------------

    def _kill(self, p: Planned, now_ns: int) -> None:
        proc = self._victim()
        if proc is None:
            self._miss(p, "no agent to pick")
            return
        self._kill_proc(proc, now_ns, "kill")

    def _kill_proc(self, proc: AgentHandle, now_ns: int, kind: str) -> None:
        replacement = self.reaper.kill(proc)
        self._record(kind, now_ns, None, agent=proc.name, pid=proc.popen.pid, generation=proc.generation,
                     replacement_generation=replacement.generation, wall=time.time())

    # -- the store, the clock, the disk ---------------------------------------------------------------

    @property
    def clock(self) -> SharedClock | None:
        path = self.runner.agent_config.get("clock_file")
        if self._clock is None and path:
            self._clock = SharedClock(path)
        return self._clock

    def store(self) -> Any:
        if self._store is None:
            from agents_room.store import Store

            self._store = Store.open(self.runner.layout.db, clock=self.clock,
                                     busy_timeout_s=self.runner.scn.run.busy_timeout_s, verify=False)
        return self._store

    def _jump(self, p: Planned, now_ns: int) -> bool:
        """Shift the shared clock inside a write transaction, after the store's own sweep at
        the old time. ``False`` (try again next tick) if the write lock was busy."""
        from agents_room.store import StoreBusy

        assert self.clock is not None
        try:
            done = jump(self.store(), self.clock, p.value)
        except StoreBusy:
            return False
        self.jumped.append((now_ns, p.value))
        self._record("clock_jump", now_ns, None, shift_s=p.value, offset_before=done.before, offset_after=done.after,
                     boundary_seq=done.boundary_seq, wall=done.wall)
        return True

    def _limit(self, proc: AgentHandle) -> dict[str, Any]:
        """Pin the WAL with a read transaction (so it is never restarted: its end only moves
        on), then cap the agent's file size above every file the agent appends to but the
        WAL (its history, its log; and the ``-shm`` it may grow): its next commit, appended
        at the WAL's end, fails once that end is past the cap."""
        from agents_room.store import Store

        if self._pin is None:
            self._pin = Store.open(self.runner.layout.db, busy_timeout_s=self.runner.scn.run.busy_timeout_s,
                                   verify=False)
        self._pin.db.conn.execute("BEGIN")
        self._pin.db.conn.execute("SELECT max(seq) FROM events").fetchone()
        layout, n = self.runner.layout, self.runner.scn.agents
        own = [p.stat().st_size for p in layout.history.glob("p*.jsonl") if (int(p.stem[1:]) - proc.no) % n == 0]
        own += [p.stat().st_size for p in (layout.out / "logs").glob(f"{proc.name}.g*.log")]
        shm = Path(f"{layout.db}-shm")
        own.append(shm.stat().st_size if shm.exists() else 0)  # stat, never open: see store/sqlite/database.py
        wal = self._pin.db.wal_bytes()
        cap = max(1 << 20, max(own) + 256 * 1024)
        original = resource.prlimit(proc.popen.pid, resource.RLIMIT_FSIZE)
        resource.prlimit(proc.popen.pid, resource.RLIMIT_FSIZE, (cap, original[1]))
        return {"cap_bytes": cap, "wal_bytes": wal, "original": original, "wall": time.time()}

    def _unlimit(self, e: Episode) -> None:
        try:
            resource.prlimit(e.proc.popen.pid, resource.RLIMIT_FSIZE, e.detail["original"])
        except ProcessLookupError:
            pass
        self._pin.db.conn.execute("COMMIT")
        self._record("disk_full", e.stopped_ns, time.monotonic_ns(), agent=e.proc.name, pid=e.proc.popen.pid,
                     cap_bytes=e.detail["cap_bytes"], wall=e.detail["wall"], wall_end=time.time())
        self.episode = None

    # -- the end --------------------------------------------------------------------------------------

    def finish(self) -> None:
        """At the run's end (and on an abort): nothing left stopped, limited or pinned; the
        prunes done; what never happened is listed as missed."""
        if self.finished:
            return
        self.finished = True
        e = self.episode
        if e is not None:
            if e.planned.kind == "disk_full":
                self._unlimit(e)
            elif e.stopped_ns:
                self._continue(e, time.monotonic_ns())
            else:
                self.runner.tell("fault disarm", e.armed)
                self._miss(e.planned, "the run ended first")
        for p in self.pending:
            self._miss(p, "the run ended first")
        self.pending = []
        for a in self.runner.agents:  # nothing may stay stopped, whoever stopped it
            if a.popen.poll() is None and process_state(a.popen.pid) in ("T", "t"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(a.popen.pid, signal.SIGCONT)
        self.reaper.finish()

    def close(self) -> None:
        self.finish()
        for s in (self._pin, self._store):
            if s is not None:
                s.close()
        self._pin = self._store = None
