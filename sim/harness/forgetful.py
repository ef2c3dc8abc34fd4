"""The forgetful workload: real harness CLIs whose scripted models edit shared files with their
harness's own file tools and never call room_join nor lease_claim, as models do when nobody
reminds them. It counts **overlapping writes**: a write that landed on a file whose previous
landed write was another agent's, while that agent was still at work (every agent's turn is
held open until all are done, so every session lives for the whole run, and the edit guard's
lease outlives it): two agents writing one file while both believed they could. With the edit
guard (``--edits claim``) that count must be 0: the first writer of a file holds it, every
other agent's write of it is denied. With ``--edits off`` (the control) it is not: the check
can fail.

    .venv/bin/python -m sim.harness.forgetful [--edits claim|off] [--harnesses claude-code,codex,gemini]
                                              [--files 2] [--rounds 6] [--seed 46]

Prints a JSON report (writes tried, landed, denied, overlapping, per file and agent) and exits
1 when the run is invalid (an overlapping write, or a CLI that failed).

A write is Claude Code's ``Write`` (after the ``Read`` it requires), Gemini CLI's
``write_file``, Codex's ``apply_patch`` (model ``gpt-5.5``, which it offers the tool to):
landed when the tool's answer says it succeeded, and the file then holds the agent's line.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import clis
from .model import ScriptedModel
from .process import Turn
from .script import Native, Request, Say

HOME_ROOT = "/var/tmp"  # Codex refuses to make its helper binaries under /tmp
THINK_S = 0.2


@dataclass
class Write:
    agent: str
    harness: str
    file: str
    started: float
    ended: float = 0.0
    landed: bool = False
    denied: bool = False
    answer: str = ""


@dataclass
class Report:
    edits: str
    harnesses: list[str]
    tried: int = 0
    landed: int = 0
    denied: int = 0
    overlapping: int = 0
    overlaps: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    writes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.overlapping == 0 and not self.failures


def overlapping(writes: list[Write]) -> list[dict[str, Any]]:
    """Each landed write whose file's previous landed write was another agent's (every
    session is live for the whole run)."""
    out = []
    last: dict[str, Write] = {}
    for w in sorted((w for w in writes if w.landed), key=lambda w: w.ended):
        before = last.get(w.file)
        if before is not None and before.agent != w.agent:
            out.append({"file": w.file, "agent": w.agent, "after": before.agent, "at": round(w.ended, 3)})
        last[w.file] = w
    return out


class Forgetful:
    """One agent's model: ``rounds`` edits of files drawn from ``files``, nothing else."""

    def __init__(self, name: str, harness: str, project: Path, files: list[str], rounds: int, rng: random.Random,
                 writes: list[Write], lock: threading.Lock) -> None:
        self.name, self.harness, self.project, self.files = name, harness, project, files
        self.rounds, self.rng, self.writes, self.lock = rounds, rng, writes, lock
        self.done = 0
        self.agents, self.finished, self.all_done = 1, set(), threading.Event()  # shared: set by run
        self.pending: Write | None = None
        self.reading: str | None = None  # Claude Code: the file read before its Write

    def __call__(self, request: Request) -> Any:
        results = request.tool_results()
        if self.pending is not None:
            text = "\n".join(r.text for r in results)
            w, self.pending = self.pending, None
            w.ended, w.answer = time.time(), text[:300]
            low = text.lower()
            w.denied = "edit denied" in low
            w.landed = "success" in low and not w.denied and "blocked" not in low and \
                f"{self.name} " in (self.project / w.file).read_text()
            with self.lock:
                self.writes.append(w)
            self.done += 1
            time.sleep(THINK_S)
        if self.done >= self.rounds:
            # every session stays live until every agent is done: a write after another agent
            # ended would be no overlap, and the count would depend on the machine's speed
            with self.lock:
                self.finished.add(self.name)
                if len(self.finished) == self.agents:
                    self.all_done.set()
            self.all_done.wait(600)
            return Say("done")
        if self.harness == "claude-code" and self.reading is None:
            self.reading = self.rng.choice(self.files)
            return [Native("Read", {"file_path": str(self.project / self.reading)})]
        target = self.reading or self.rng.choice(self.files)
        self.reading = None
        line = f"{self.name} {self.done}\n"
        self.pending = Write(self.name, self.harness, target, time.time())
        if self.harness == "claude-code":
            return [Native("Write", {"file_path": str(self.project / target), "content": line})]
        if self.harness == "gemini":
            return [Native("write_file", {"file_path": target, "content": line})]
        current = (self.project / target).read_text().splitlines() or [""]
        hunk = "".join(f"-{x}\n" for x in current) + f"+{line}"
        return [Native("apply_patch", f"*** Begin Patch\n*** Update File: {target}\n@@\n{hunk}*** End Patch\n")]


def run(harnesses: list[str], *, edits: str = "claim", files: int = 2, rounds: int = 6, seed: int = 46,
        timeout_s: float = 300, keep: list[Path] | None = None) -> Report:
    """One forgetful run: an agent per entry of ``harnesses``, all in one repository and store."""
    report = Report(edits, harnesses)
    root = Path(tempfile.mkdtemp(prefix="forgetful-", dir=HOME_ROOT))
    writes: list[Write] = []
    lock = threading.Lock()
    turns: list[Turn] = []
    policies: list[Forgetful] = []
    try:
        project = root / "app"
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        names = [f"s{i}.py" for i in range(files)]
        for name in names:
            (project / name).write_text("start\n")
        db = str(root / "room.db")
        with ScriptedModel() as model:
            agents = []
            for i, harness in enumerate(harnesses):
                name = f"a{i:02d}"
                located = clis.locate(harness)  # type: ignore[arg-type]
                if located.problem:
                    raise RuntimeError(f"{name} ({harness}): {located.problem}")
                policy = Forgetful(name, harness, project, names, rounds, random.Random(seed * 100 + i), writes, lock)
                policies.append(policy)
                scripted = model.agent(name, policy)
                launch = clis.prepare(harness, located.path, root / f"home-{name}",  # type: ignore[arg-type]
                                      project, db, scripted.url, name=name, edits=edits)  # type: ignore[arg-type]
                if harness == "codex":
                    config = launch.home / ".codex" / "config.toml"
                    text = config.read_text()
                    config.write_text(text.replace(f'model = "{clis.CODEX_MODEL}"', 'model = "gpt-5.5"', 1))
                proxy = f"http://127.0.0.1:{model.port}"  # nothing but the model leaves the machine
                launch.env |= {"HTTPS_PROXY": proxy, "HTTP_PROXY": proxy, "NO_PROXY": "127.0.0.1,localhost"}
                agents.append((scripted, launch))
            finished: set[str] = set()
            all_done = threading.Event()
            for policy in policies:
                policy.agents, policy.finished, policy.all_done = len(policies), finished, all_done
            for _, launch in agents:
                turns.append(launch.start_turn("edit the shared files"))
            for (scripted, launch), turn in zip(agents, turns, strict=True):
                try:
                    code = turn.wait(timeout_s)
                except TimeoutError:
                    code = None
                if code != 0 or scripted.errors:
                    report.failures.append(f"{launch.name} ({launch.harness}): exit {code}; {scripted.errors}; "
                                           f"{turn.output()[-300:]}")
    finally:
        for policy in policies:
            policy.all_done.set()
        for turn in turns:
            turn.stop()
        if keep is None:
            shutil.rmtree(root, ignore_errors=True)
        else:
            keep.append(root)
    report.tried = len(writes)
    report.landed = sum(w.landed for w in writes)
    report.denied = sum(w.denied for w in writes)
    report.overlaps = overlapping(writes)
    report.overlapping = len(report.overlaps)
    report.writes = [asdict(w) for w in sorted(writes, key=lambda w: w.started)]
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim.harness.forgetful", description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", choices=["claim", "check", "off"], default="claim")
    parser.add_argument("--harnesses", default="claude-code,codex,gemini")
    parser.add_argument("--files", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seed", type=int, default=46)
    args = parser.parse_args(argv)
    report = run(args.harnesses.split(","), edits=args.edits, files=args.files, rounds=args.rounds, seed=args.seed)
    shown = {k: v for k, v in asdict(report).items() if k != "writes"}
    print(json.dumps({**shown, "valid": report.valid}, indent=2))
    return 0 if report.valid else 1


if __name__ == "__main__":
    sys.exit(main())
