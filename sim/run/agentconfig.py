"""What one fake agent is told: its configuration file, written by the runner
(``sim/run/runner.py``) and read by the agent process (``sim/run/agent.py``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Config:
    agent: str
    agent_no: int
    n_agents: int
    generation: int
    cwd: str
    files: list[str]
    hot: int
    rooms: list[str]
    tags: list[str]
    all_tags: list[str]
    harness_key: str
    db: str
    history_dir: str
    scenario: str
    env: dict[str, str] = field(default_factory=dict)
    clock_file: str | None = None  # the run's shared store clock (clock-jump faults), direct driver only
    saboteur: bool = False  # fault injection may arm self-stops inside write transactions
    host: str | None = None  # the simulated host it runs on ([hosts]), whose driver may differ
    driver: str | None = None  # its host's driver; None: [run] driver
    http_url: str | None = None  # the http driver: its host's agents-room serve --http for its repo
    autonomy: str | None = None  # the level it joins at (its repo's); None: drawn with rejoin, else the default
    wake_lever: bool = False  # it joins with the simulator's wake lever (drivers.SIM_LEVER)
    keeper: bool = False  # it never lets a lease go, renewing instead (sim/run/keeper.py; [[repos]] keepers)
    harness: str | None = None  # the harness driver: the CLI that makes its calls (claude-code, codex, gemini)
    # guarded edits: per harness, the edit guard's commands its install wrote (sim/run/editguard.py;
    # empty lists with ``[workload] edits = "off"``); None: the mix has no guarded_edit
    edit_guard: dict[str, list[str]] | None = None

    @classmethod
    def load(cls, path: str) -> Config:
        return cls(**json.loads(Path(path).read_text()))
