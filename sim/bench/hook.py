"""What a hook run costs, CPU and wall from spawn to exit, as a harness runs it: each
harness's tool-call hook exactly as its install writes it (Claude Code's, Codex's, Gemini
CLI's project and user installs: reported as ``commands``), through the shell that harness
uses, with this process standing for the harness (the parent of the hook's shell and of a
real ``agents-room serve``, which keeps the quiet marker). ``sh -c true``, ``bash -c true``
and ``python -I -S -c pass`` are measured beside them: the floors.

Three paths: *quiet* (nothing new: the marker answers in the shell, no Python), *news* (one
unannounced message: the store announces and marks it), and *no_marker* (the server gone:
the Python probe, as every hook ran before; ``python_hook_quiet`` is the plain Python
command on that path). Each run's output is checked, so the figures are of the path they
claim.

    python -m sim.bench.hook [--runs 50]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from ..run.drivers import serve_command

_FOREIGN_ENV = ("AGENTS_ROOM_HARNESS_KEY", "CLAUDE_CODE_SESSION_ID", "CLAUDECODE", "CLAUDE_PROJECT_DIR",
                "CODEX_THREAD_ID", "AGENTS_ROOM_TOKEN")


def _timed(argv: list[str], stdin: str, env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Wall and CPU milliseconds of one run from spawn to exit, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter_ns()
    done = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, cwd=cwd, timeout=60)
    wall = (time.perf_counter_ns() - t0) / 1e6
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    if done.returncode != 0 or done.stderr.strip():
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[:300]}")
    return wall, cpu, done.stdout


def _summary(walls: list[float], cpus: list[float]) -> dict[str, Any]:
    w = np.asarray(walls)
    return {"runs": len(walls), "wall_median_ms": float(np.median(w)), "wall_p90_ms": float(np.percentile(w, 90)),
            "wall_min_ms": float(w.min()), "wall_max_ms": float(w.max()), "cpu_median_ms": float(np.median(cpus))}


def installed_command(folder: Path, event: str = "SessionStart") -> str:
    """The ``event`` hook command ``agents-room install claude-code`` would write (its plan
    for a project in ``folder``; nothing is written). SessionStart's is the plain Python
    command (a harness runs it as an argv through its shell: ``shlex.split`` reads it)."""
    from agents_room.harnesses.install import hook_command
    from agents_room.harnesses.registry import plan

    [settings] = [c for c in plan("claude-code", "project", folder, folder, serve_command(), hook_command())
                  if c.path.name == "settings.local.json"]  # the hooks: this machine's paths, local settings
    [group] = json.loads(settings.after)["hooks"][event]
    return str(group["hooks"][0]["command"])


# Each harness's installed hook of a tool call: (harness, scope, file, event, the shell that
# runs it: Claude Code /bin/sh, Codex and Gemini CLI bash).
INSTALLS = (("claude-code", "project", "settings.local.json", "PostToolUse", "/bin/sh"),
            ("codex", "user", "hooks.json", "PostToolUse", "/bin/bash"),
            ("gemini", "project", "settings.json", "AfterTool", "/bin/bash"),
            ("gemini", "user", "settings.json", "AfterTool", "/bin/bash"))


def tool_call_commands(repo: Path, home: Path) -> dict[str, tuple[str, str]]:
    """``harness/scope`` -> (shell, the command its install writes for a tool call's event),
    from each install's plan in ``repo`` and ``home``; the launcher a committed file runs is
    written under ``home``, as the install would."""
    from agents_room.harnesses.install import hook_command
    from agents_room.harnesses.registry import plan

    out = {}
    for harness, scope, name, event, shell in INSTALLS:
        changes = plan(harness, scope, repo, home, serve_command(), hook_command())
        for c in changes:
            if c.path.name == "hook" and c.path.parent.name == ".agents-room":
                c.path.parent.mkdir(parents=True, exist_ok=True)
                c.path.write_text(c.after)
        [hooks] = [c for c in changes if c.path.name == name]
        [group] = json.loads(hooks.after)["hooks"][event]
        out[f"{harness}/{scope}"] = (shell, str(group["hooks"][0]["command"]))
    return out


def _floor(argv: list[str], runs: int, env: dict[str, str], cwd: Path) -> dict[str, Any]:
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu, _ = _timed(argv, "", env, cwd)
        walls.append(wall)
        cpus.append(cpu)
    return _summary(walls, cpus)


def _runs(argv: list[str], event: str, env: dict[str, str], cwd: Path, runs: int, *, expect: str,
          before: Any = None) -> dict[str, Any]:
    walls, cpus = [], []
    for _ in range(runs):
        if before:
            before()
        wall, cpu, said = _timed(argv, event, env, cwd)
        if (expect == "" and said.strip()) or (expect and expect not in said):
            raise RuntimeError(f"{argv[-1][:80]}: expected {expect or 'nothing'!r}, got {said[:200]!r}")
        walls.append(wall)
        cpus.append(cpu)
    return _summary(walls, cpus)


def _wait_for(path: Path, present: bool, server: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while path.exists() != present:
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the quiet marker {path} is {'absent' if present else 'there'}")
        time.sleep(0.05)


def measure(folder: Path, runs: int = 50) -> dict[str, Any]:
    """Each harness's tool-call hook as installed, run through its shell with this process as
    the harness (the parent of the shell and of a real ``agents-room serve``): quiet with the
    server's marker (no Python), news (one message to announce), and quiet without a marker
    (the server gone: the Python probe, as every hook ran before)."""
    from agents_room.store import Store

    folder.mkdir(parents=True, exist_ok=True)
    home = folder / "home"
    repo = folder / "repo"
    (repo / ".git").mkdir(parents=True, exist_ok=True)
    home.mkdir()
    db = folder / "store" / "room.db"
    with Store.open(db) as store:
        me = store.room_join(cwd=str(repo), pid=os.getpid(), label="hooked", harness="claude-code").session_id
        peer = store.room_join(cwd=str(repo), pid=None, label="peer").session_id
        for i in range(200):  # some history, so the probe's lookups are not on empty tables
            store.msg_send(peer, me, subject=f"old {i}")
        store.hook_event(me, announce=True)
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}
    env |= {"AGENTS_ROOM_DB": str(db), "HOME": str(home)}
    commands = tool_call_commands(repo, home)
    event = json.dumps({"session_id": str(uuid.uuid4()), "hook_event_name": "PostToolUse", "cwd": str(repo)})
    out: dict[str, Any] = {"commands": {k: v[1] for k, v in commands.items()}, "runs": runs}
    out["python_c_pass"] = _floor([sys.executable, "-c", "pass"], runs, env, repo)
    out["python_S_c_pass"] = _floor([sys.executable, "-S", "-c", "pass"], runs, env, repo)
    out["sh_c_true"] = _floor(["/bin/sh", "-c", "true"], runs, env, repo)
    out["bash_c_true"] = _floor(["/bin/bash", "-c", "true"], runs, env, repo)
    out["python_I_S_c_pass"] = _floor([sys.executable, "-I", "-S", "-c", "pass"], runs, env, repo)
    plain = shlex.split(installed_command(repo))
    out["python_hook_quiet"] = _runs(plain, event, env, repo, runs, expect="")

    marker = db.parent / "quiet" / str(os.getpid())
    server = subprocess.Popen([*shlex.split(serve_command()), "serve"], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, env=env, cwd=repo)
    try:
        _wait_for(marker, True, server)
        with Store.open(db) as store:
            for name, (shell, command) in commands.items():
                argv = [shell, "-c", command]
                out[f"quiet/{name}"] = _runs(argv, event, env, repo, runs, expect="")
                n = iter(range(runs))
                out[f"news/{name}"] = _runs(argv, event, env, repo, runs, expect="additionalContext",
                                            before=lambda: store.msg_send(peer, me, subject=f"new {next(n)}"))
                _wait_for(marker, True, server)
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=60)
    _wait_for(marker, False, server)
    for name, (shell, command) in commands.items():
        out[f"no_marker/{name}"] = _runs([shell, "-c", command], event, env, repo, runs, expect="")
    # What `sim bench`'s report reads (sim/bench/report.py): Claude Code's tool-call hook.
    out["command"] = commands["claude-code/project"][1]
    out["quiet"], out["news"] = out["quiet/claude-code/project"], out["news/claude-code/project"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.bench.hook", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50, help="runs of each (default 50)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hook-bench-") as tmp:
        result = measure(Path(tmp), args.runs)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
