"""What the nemesis may see of a run and do to it: the narrow interface the runner hands it.

The nemesis and its reaper never import the runner (``sim/run/``): they act on whatever
satisfies :class:`RunControl`. The runner does (``tests/simulator/faults/test_nemesis.py`` holds
it to that), and the pipeline (``sim/pipeline.py``) hands the runner over as one. Anything
the nemesis needs of a run is added here first, so what fault injection can touch stays
listed in one place.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..scenario.scenario import Scenario


class AgentHandle(Protocol):
    """One agent process of the run, as the runner tracks it."""

    no: int  # the agent's number; its history files are p<no + n_agents * generation>.jsonl
    name: str  # aNN
    generation: int  # 0 for the first process, then one more per replacement
    harness_key: str  # its session's harness key (what the reaper prunes by)
    popen: subprocess.Popen[str]  # the process: its pid, stdin, exit
    state: str  # "ready" once it works (the runner's word for it)
    # Set before killing it on purpose: its exit is then not a failure, and it counts as
    # done in every wait of the runner.
    expected_exit: bool


class RunFolder(Protocol):
    """Where the run keeps its files (read-only for the nemesis)."""

    @property
    def out(self) -> Path: ...

    @property
    def db(self) -> str:
        """The store: a SQLite file's path, or a postgresql:// URL (file faults refuse the latter)."""
        ...

    @property
    def history(self) -> Path: ...


@runtime_checkable
class RunControl(Protocol):
    """The run, as fault injection sees it."""

    scn: Scenario  # the scenario as run: ``[faults]``, ``[run]``, the workload's lease TTLs
    layout: RunFolder
    # Every AgentHandle of the run, a replacement appended to it (``list[Any]``: the runner's
    # list holds its own class of handle).
    agents: list[Any]
    # Keys added to every agent's configuration before the agents start (the saboteur's
    # control lines, the shared clock file).
    agent_config: dict[str, Any]
    # Called at every sample, also while stopping and draining: ``hook(run, now_ns)``.
    on_tick: list[Callable[[Any, int], None]]
    # The simulated hosts (a ``sim.hosts.cluster.Hosts``) when the scenario has ``[hosts]``,
    # else None: the host nemesis partitions them, kills them, kills and pauses their database.
    hosts: Any
    start_ns: int  # the run's work window, monotonic ns (0 until the agents are told to go)
    end_ns: int

    def spawn(self, no: int, generation: int = 0, harness_key: str | None = None) -> Any:
        """Start agent ``no`` again as a new process (an AgentHandle), in the given generation."""
        ...

    def next_generation(self, no: int) -> int:
        """The first generation of agent ``no`` with no history file yet."""
        ...

    def tell(self, text: str, procs: list[Any] | None = None) -> None:
        """A line to the stdin of every agent, or of ``procs`` (``fault ...`` control lines)."""
        ...

    def record_fault(self, fault: str, start_ns: int, end_ns: int | None = None, **detail: Any) -> None:
        """A fault window or instant, as a ``{"kind": "fault"}`` row of ``samples.jsonl``."""
        ...
