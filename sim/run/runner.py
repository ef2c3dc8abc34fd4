"""The run of ``sim run``: set up real repositories and a fresh store, spawn the agents,
watch them, stop them, drain them (``sim/pipeline.py`` then checks and reports). Fault
injection plugs in through :attr:`Runner.on_tick` and sees the runner only as
``sim.faults.control.RunControl``.

The output folder is laid out as ``docs/history.md`` says. The runner never opens the store
while agents run (it only ``stat``s its WAL); the pipeline reads the events once they have
exited.
"""

from __future__ import annotations

import json
import os
import queue
import resource
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..faults.clock import SharedClock
from ..scenario.scenario import Scenario
from . import editguard
from .drivers import serve_command
from .layout import Layout, file_names, inner_file, move_src, prepare, store_location
from .mounts import MountSpace, MountsUnavailable, targets
from .progress import Progress

# Harness variables of whoever runs the simulator: an agent must carry only its own key.
_FOREIGN_ENV = ("AGENTS_ROOM_HARNESS_KEY", "CLAUDE_CODE_SESSION_ID", "CLAUDECODE", "CLAUDE_PROJECT_DIR",
                "CODEX_THREAD_ID", "AGENTS_ROOM_TOKEN")


# What a harness agent takes beyond its start-up bound to install agents-room for its CLI.
HARNESS_GRACE_S = 30.0


class RunAborted(RuntimeError):
    """The run could not be carried out (an agent failed to start, a timeout): no verdict."""


@dataclass
class AgentProc:
    no: int
    name: str
    repo: str
    generation: int
    harness_key: str
    popen: subprocess.Popen
    state: str = "starting"  # starting, ready, stopped, drained, error, exited
    session: str | None = None
    status: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    # Set by whoever kills it on purpose (fault injection): its exit is then not a failure,
    # and it counts as done in every wait.
    expected_exit: bool = False
    moved_at: float = 0.0  # monotonic time of its last line (ready, stopped, draining ...): it moves
    spawned_at: float = field(default_factory=time.monotonic)


# -- the run -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the run phase leaves for checking and reporting."""

    start_ns: int
    end_ns: int
    agents: list[AgentProc]
    drained: bool
    wall_start: float
    runner_cpu_s: float
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # wall seconds per phase


class Runner:
    def __init__(self, scenario: Scenario, out: Path, *, live: bool = True, store: str | Path | None = None,
                 hosts: Any = None) -> None:
        self.scn = scenario
        # Agents run elsewhere: every path they get is absolute (a URL is left as it is).
        self.layout = Layout(Path(out).absolute(), store_location(store) if store else None)
        # sim.hosts.cluster.Hosts when the scenario has [hosts]: each agent runs on its host
        # (its network and PID namespaces), and the nemesis's host faults act through it.
        self.hosts = hosts
        self.live = live
        self.agents: list[AgentProc] = []
        self.lines: queue.Queue[tuple[AgentProc, str]] = queue.Queue()
        # Hooks run on every sampling tick, with the runner and the monotonic time: the place
        # where fault injection plugs in (and records its windows in samples.jsonl).
        self.on_tick: list[Callable[[Runner, int], None]] = []
        # [[repos]] move_src_at_s: each such repository's src/ moved once, that far into the run
        self._moves = {repo.name: int(repo.move_src_at_s * 1e9) for repo in scenario.repos if repo.move_src_at_s > 0}
        if self._moves:
            self.on_tick.append(Runner._move_src)
        self.agent_config: dict[str, Any] = {}  # more keys for every agent's config (fault injection)
        self.mounts: MountSpace | None = None  # the run's mount namespace ([[repos]] bind_mounts)
        self._samples = None
        self._pg: Any = None  # sim/run/pgsample.py's sampler, on PostgreSQL
        self.timings: dict[str, float] = {}
        self.start_ns = self.end_ns = 0

    # agents ------------------------------------------------------------------------------------

    def spawn(self, no: int, generation: int = 0, harness_key: str | None = None) -> AgentProc:
        """Start agent ``no`` (a new process; a replacement takes the next generation and a
        new harness key)."""
        n_total = self.scn.agents
        repo, files, hot, position = self._repo_of(no)
        key = harness_key or str(uuid.uuid4())
        name = f"a{no:02d}"
        repo_path = self.layout.repo_path(repo, position)  # maybe through a symlink ([[repos]] spellings)
        # PWD: the logical working directory a shell or harness passes on, spelled as the agent was given it.
        server_env = {"AGENTS_ROOM_DB": str(self.layout.db), "AGENTS_ROOM_HARNESS_KEY": key,
                      "AGENTS_ROOM_BUSY_TIMEOUT_S": str(self.scn.run.busy_timeout_s), "PWD": str(repo_path)}
        cfg = {
            "agent": name, "agent_no": no, "n_agents": n_total, "generation": generation, "cwd": str(repo_path),
            "files": [f"{repo_path}/{inner_file(f, repo, position)}" for f in files], "hot": hot, "rooms": list(repo.rooms),
            "tags": list(repo.tags), "all_tags": self.scn.tags, "harness_key": key, "db": str(self.layout.db),
            "autonomy": repo.autonomy, "wake_lever": repo.wake_lever, "keeper": position < repo.keepers,
            "history_dir": str(self.layout.history), "scenario": str(self.layout.out / "scenario.toml"),
            "env": server_env, **self.agent_config,
        }
        if self.scn.run.driver == "harness":  # a real CLI makes its calls: the repo's harness for it
            cfg["harness"] = repo.harness_of(position)
        cfg_path = self.layout.out / "agents" / f"{name}.g{generation}.json"
        cfg_path.write_text(json.dumps(cfg, indent=1))
        env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}
        env.update(server_env)  # the key is in the environment from exec on: /proc sees it
        env["PYTHONUNBUFFERED"] = "1"
        argv = [sys.executable, "-m", "sim.run.agent", str(cfg_path)]
        if self.mounts is not None:  # every agent sees the bind mounts: the bound agents' paths are files to all
            argv = self.mounts.command(argv, cwd=repo_path)
        if self.hosts is not None:  # on its simulated host, with that host's id
            host = self.hosts.host_of(no)
            argv = host.command(argv, cwd=repo_path)
            server_env["AGENTS_ROOM_HOST_ID"] = env["AGENTS_ROOM_HOST_ID"] = host.name
            cfg.update(host=host.name, driver=self.scn.hosts.driver(host.index, self.scn.run.driver))
            if cfg["driver"] == "http":  # the host's server for this repository: the agents share it
                repo_no = [r.name for r in self.scn.repos].index(repo.name)
                shared = {k: v for k, v in env.items() if k != "AGENTS_ROOM_HARNESS_KEY"}  # no agent's key
                server = self.hosts.http_server(host, repo_no, serve_command(), repo_path, shared,
                                                self.layout.out / "logs" / f"serve-{host.name}-{repo.name}.log")
                cfg["http_url"] = server.url
                cfg["env"] = server_env = {**server_env, "AGENTS_ROOM_TOKEN": self.hosts.token}
            if self.scn.hosts.skew(host.index):  # what its agents judge their leases by
                cfg["clock_file"] = str(self.layout.out / "store" / f"clock-{host.name}")
                if not Path(cfg["clock_file"]).exists():
                    SharedClock(cfg["clock_file"]).shift(self.scn.hosts.skew(host.index))
            cfg_path.write_text(json.dumps(cfg, indent=1))
        log = open(self.layout.out / "logs" / f"{name}.g{generation}.log", "wb")  # noqa: SIM115 (owned by the child)
        popen = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=repo_path, env=env, text=True, bufsize=1,
        )
        log.close()
        proc = AgentProc(no, name, repo.name, generation, key, popen)
        threading.Thread(target=self._read_lines, args=(proc,), daemon=True).start()
        return proc

    def next_generation(self, no: int) -> int:
        """The first generation of agent ``no`` with no history file yet: what a replacement
        process takes (the agent itself moves on to new generations after an ``info``)."""
        n, g = self.scn.agents, 0
        while (self.layout.history / f"p{no + n * g}.jsonl").exists():
            g += 1
        return g

    def _repo_of(self, no: int) -> tuple[Any, list[str], int, int]:
        """Agent ``no``'s repository, its files, how many are hot, and the agent's place among its agents."""
        first = 0
        for repo in self.scn.repos:
            if no < first + repo.agents:
                return repo, file_names(repo.files), min(self.scn.workload.hot_paths, repo.files), no - first
            first += repo.agents
        raise IndexError(no)

    def _read_lines(self, proc: AgentProc) -> None:
        assert proc.popen.stdout is not None
        for line in proc.popen.stdout:
            self.lines.put((proc, line.rstrip("\n")))
        self.lines.put((proc, "exited"))

    def _handle(self, proc: AgentProc, line: str) -> None:
        word, _, rest = line.partition(" ")
        proc.moved_at = time.monotonic()
        if word == "ready":
            proc.state, proc.session = "ready", rest
            if self.start_ns:  # a replacement started mid-run goes to work at once
                self.tell(f"go {self.start_ns} {self.end_ns}", [proc])
        elif word == "stopped":
            proc.state = "stopped"
        elif word == "drained":
            proc.state, proc.status = "drained", json.loads(rest)
        elif word == "error":
            proc.state, proc.error = "error", rest
        elif word == "exited" and proc.expected_exit:
            proc.state = "killed"
        elif word == "exited" and proc.state != "drained":
            proc.state = "exited"
            proc.error = proc.error or f"exited with code {proc.popen.wait()} (see logs/{proc.name}.g{proc.generation}.log)"

    def _wait_for(self, states: set[str], deadline: float, what: str, tick: Callable[[], None] | None = None,
                  stall_s: float | None = None) -> None:
        """Until every agent is in ``states``. Aborted past ``deadline``, unless something still
        moves: with ``stall_s``, an agent said something (ready, stopped, a drain's progress)
        within it; and a replacement still starting (a loaded machine starts a process slowly)
        has its own start-up time."""
        while any(a.state not in states and a.state != "killed" for a in self.agents):
            broken = [a for a in self.agents if a.state in ("error", "exited") and a.state not in states]
            if broken:
                raise RunAborted(f"{broken[0].name} {broken[0].state} while {what}: {broken[0].error}")
            # A harness agent's own wait for its CLI is bounded by startup_timeout_s once the CLI
            # is installed and started: the agent says what it waited for, given the time to.
            grace = HARNESS_GRACE_S if self.scn.run.driver == "harness" else 0.0
            limit = max([deadline, *(a.spawned_at + self.scn.run.startup_timeout_s + grace for a in self.agents
                                     if a.state == "starting" and a.popen.poll() is None)])
            if stall_s is not None:
                limit = max(limit, max(a.moved_at for a in self.agents) + stall_s)
            if time.monotonic() > limit:
                now = time.monotonic()
                late = [f"{a.name} ({a.state} {now - a.spawned_at:.0f} s after its start)" for a in self.agents
                        if a.state not in states and a.state != "killed"]
                raise RunAborted(f"timed out {what}, nothing moving: {', '.join(late[:8])}"
                                 f"{' ...' if len(late) > 8 else ''}")
            try:
                self._handle(*self.lines.get(timeout=0.1))
            except queue.Empty:
                pass
            if tick:
                tick()

    def tell(self, text: str, procs: list[AgentProc] | None = None) -> None:
        """A line to the agents' stdin (all, or ``procs``): ``go <start_ns> <end_ns>`` for a
        replacement started mid-run uses ``self.start_ns`` and ``self.end_ns``."""
        for a in self.agents if procs is None else procs:
            if a.popen.poll() is None:
                try:
                    assert a.popen.stdin is not None
                    a.popen.stdin.write(text + "\n")
                    a.popen.stdin.flush()
                except (BrokenPipeError, OSError):
                    pass

    # sampling ------------------------------------------------------------------------------------

    def sample(self, progress: Progress, now_ns: int, start_ns: int) -> dict[str, Any]:
        wal, db_file = 0, self.layout.db_file  # PostgreSQL: no WAL file of ours to watch
        if db_file is not None:
            try:
                wal = os.stat(f"{db_file}-wal").st_size
            except FileNotFoundError:
                pass
        alive = sum(1 for a in self.agents if a.popen.poll() is None)
        counts = progress.poll()
        row = {"kind": "sample", "time": now_ns, "t": (now_ns - start_ns) / 1e9, "wall": time.time(),
               "wal_bytes": wal, "agents_alive": alive, **counts, **(self._pg.latest() if self._pg else {})}
        self._write_sample(row)
        return row

    def _write_sample(self, row: dict[str, Any]) -> None:
        if self._samples is not None:
            self._samples.write(json.dumps(row, separators=(",", ":")) + "\n")
            self._samples.flush()

    def record_fault(self, fault: str, start_ns: int, end_ns: int | None = None, **detail: Any) -> None:
        """A fault window for the report's shading (written by fault injection)."""
        self._write_sample({"kind": "fault", "fault": fault, "time": start_ns, "end": end_ns, **detail})

    def _move_src(self, now: int) -> None:
        if not self.start_ns:
            return
        for name, at in list(self._moves.items()):
            if now - self.start_ns >= at:
                del self._moves[name]
                move_src(self.layout.repos / name)

    def _hooks(self) -> None:
        """The tick hooks, also while stopping and draining (fault injection winds down then)."""
        now = time.monotonic_ns()
        for hook in self.on_tick:
            hook(self, now)

    def execute(self) -> Outcome:
        scn, run = self.scn, self.scn.run
        t0 = time.monotonic()
        prepare(scn, self.layout)
        if scn.workload.weights().get("guarded_edit", 0) > 0:  # the edit guard each harness's install wrote
            self.agent_config["edit_guard"] = editguard.install(
                self.layout.out / "editguard", str(self.layout.db), scn.workload.edits,
                str(Path(sys.executable).parent / "agents-room"))
        bound = [r.name for r in scn.repos if r.bind_mounts]
        if bound:
            try:
                self.mounts = MountSpace.make(targets(self.layout.out, bound))
            except MountsUnavailable as exc:
                raise RunAborted(str(exc)) from None
            self.layout.mounted = self.mounts is not None
        self.timings = {"setup_s": time.monotonic() - t0}
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        self._samples = open(self.layout.samples, "w")  # noqa: SIM115 (closed below)
        if self.layout.engine == "postgresql":  # the database's figures, in place of a WAL file's size
            from .pgsample import PgSampler

            self._pg = PgSampler(self.layout.db, run.sample_interval_s)
        progress = Progress(self.layout.history, scn, live=self.live)
        try:
            self.agents = [self.spawn(no) for no in range(scn.agents)]
            with progress.show():
                progress.phase(f"starting {scn.agents} agents ({run.driver})")
                self._wait_for({"ready"}, time.monotonic() + run.startup_timeout_s, "starting",
                               tick=lambda: progress.starting(sum(a.state == "ready" for a in self.agents)))
                self.timings["startup_s"] = time.monotonic() - t0 - self.timings["setup_s"]
                start_ns = self.start_ns = time.monotonic_ns() + 100_000_000
                end_ns = self.end_ns = start_ns + int(run.duration_s * 1e9)
                wall_start = time.time() + 0.1
                self.tell(f"go {start_ns} {end_ns}")
                mark = time.monotonic()
                progress.phase("running")
                next_sample = start_ns
                while (now := time.monotonic_ns()) < end_ns:
                    if now >= next_sample:
                        row = self.sample(progress, now, start_ns)
                        progress.update(row, run.duration_s)
                        for hook in self.on_tick:
                            hook(self, now)
                        next_sample += int(run.sample_interval_s * 1e9)
                    self._drain_lines()
                    time.sleep(min(0.05, max(0.0, (min(next_sample, end_ns) - time.monotonic_ns()) / 1e9)))
                self.timings["run_s"] = time.monotonic() - mark  # the go signal's head start, then the window
                self.sample(progress, time.monotonic_ns(), start_ns)
                progress.phase("stopping")
                mark = time.monotonic()
                self._wait_for({"stopped"}, mark + run.op_timeout_s + 30, "stopping", tick=self._hooks,
                               stall_s=run.op_timeout_s + 30)
                self.timings["stop_s"] = time.monotonic() - mark
                progress.phase("draining inboxes")
                mark = time.monotonic()
                self.tell(f"drain {run.drain_timeout_s}")
                # Each agent gives up after drain_timeout_s without progress: wait while any moves.
                self._wait_for({"drained"}, mark + run.drain_timeout_s + 30, "draining", tick=self._hooks,
                               stall_s=run.drain_timeout_s + 30)
                self.timings["drain_s"] = time.monotonic() - mark
                self.sample(progress, time.monotonic_ns(), start_ns)
            mark = time.monotonic()
            for a in self.agents:
                a.popen.wait(timeout=30)
            self.timings["exit_s"] = time.monotonic() - mark
        finally:
            self._samples.close()
            if self.mounts is not None:
                self.mounts.close()
            if self._pg is not None:
                self._pg.stop()
            for a in self.agents:
                if a.popen.poll() is None:
                    a.popen.kill()
                    a.popen.wait()
            if run.driver == "harness":  # the CLIs of agents that did not end their own
                from .harnesshome import end_leftovers

                left = end_leftovers(self.layout.out / "harness")
                if left:
                    print(f"ended the CLIs agents left running: {', '.join(left)}", file=sys.stderr)
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        runner_cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
        live = [a for a in self.agents if a.state != "killed"]
        drained = all(a.status.get("drained") for a in live)
        notes = [f"{a.name}: inbox not drained: {a.status.get('why') or 'no reason given'}" for a in live
                 if not a.status.get("drained")]
        return Outcome(start_ns, end_ns, self.agents, drained, wall_start, runner_cpu, notes, self.timings)

    def _drain_lines(self) -> None:
        while True:
            try:
                proc, line = self.lines.get_nowait()
            except queue.Empty:
                return
            self._handle(proc, line)
            if proc.state in ("error", "exited"):
                raise RunAborted(f"{proc.name} {proc.state} during the run: {proc.error}")
