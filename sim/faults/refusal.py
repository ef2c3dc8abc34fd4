"""A store file damaged between two runs must be refused, untouched, by everything that opens
it: ``agents-room serve``, ``agents-room doctor`` and ``sim run --store``.

:func:`damage` makes the damaged copies (truncated to half its size; overwritten with random
bytes of the same size), :func:`try_commands` runs the three real commands on one and says,
for each, whether it refused with a message naming the file and left it byte for byte as it
was (no ``-wal`` or ``-shm`` beside it either). The ``agents-room`` command to run is
handed in (``sim.run.drivers.serve_command``: fault injection does not import the run).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # where ``python -m sim.cli`` runs from
TIMEOUT_S = 60


@dataclass(frozen=True)
class Refusal:
    damage: str
    command: str
    exit_code: int
    message: str  # the last line of its stderr
    names_file: bool
    unchanged: bool

    @property
    def ok(self) -> bool:
        return self.exit_code != 0 and self.names_file and self.unchanged

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def damage(db: Path, folder: Path, kinds: tuple[str, ...], rng: random.Random) -> list[tuple[str, Path]]:
    """One damaged copy of ``db`` per kind, each in its own folder under ``folder``."""
    data = db.read_bytes()
    out = []
    for kind in kinds:
        (folder / kind).mkdir(parents=True)
        path = folder / kind / "room.db"
        path.write_bytes(data[: len(data) // 2] if kind == "truncate" else rng.randbytes(len(data)))
        out.append((kind, path))
    return out


def _fingerprint(path: Path) -> tuple[str, tuple[str, ...]]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), tuple(sorted(os.listdir(path.parent)))


def try_commands(kind: str, path: Path, scenario_toml: Path, agents_room: str) -> list[Refusal]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTS_ROOM_")}
    commands = {
        "agents-room doctor": ([agents_room, "--db", str(path), "doctor"], env),
        "agents-room serve": ([agents_room, "serve"], {**env, "AGENTS_ROOM_DB": str(path)}),
        "sim run --store": ([sys.executable, "-m", "sim.cli", "run", str(scenario_toml), "--store", str(path),
                             "--out", str(path.parent / "sim-out"), "--no-live"], env),
    }
    out = []
    for name, (argv, cmd_env) in commands.items():
        before = _fingerprint(path)
        done = subprocess.run(argv, env=cmd_env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        lines = done.stderr.strip().splitlines() or [""]
        said = next((line for line in lines if str(path) in line), lines[-1])
        out.append(Refusal(kind, name, done.returncode, said[:300], str(path) in done.stderr,
                           _fingerprint(path) == before))
        shutil.rmtree(path.parent / "sim-out", ignore_errors=True)
    return out


def try_all(copies: list[tuple[str, Path]], scenario_toml: Path, agents_room: str) -> list[Refusal]:
    """:func:`try_commands` on every copy, the copies side by side (each copy's commands in
    turn, so a change to it is pinned on the command that made it)."""
    with ThreadPoolExecutor(max_workers=max(1, len(copies))) as pool:
        done = pool.map(lambda c: try_commands(c[0], c[1], scenario_toml, agents_room), copies)
    return [r for rs in done for r in rs]
