"""A harness agent's HOME and process tree (sim/run/harnessdriver.py): what the run changes in
the CLI's settings as installed (the room server's start-up bound, Gemini CLI's loop detector,
a counting wrapper in front of every hook), the tree's CPU and memory, and ending what an
agent left running."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import tomllib
from pathlib import Path

from ..harness.process import descendants

# The CLIs' HOMEs: Codex refuses to make helper binaries under /tmp.
HOME_ROOT = "/var/tmp" if os.access("/var/tmp", os.W_OK) else tempfile.gettempdir()


def patient_codex(home: Path, startup_s: float) -> None:
    """Codex's wait for the room's server to start (install's ``startup_timeout_sec``), the
    run's start-up bound instead: a required server that starts late fails the whole turn."""
    config = home / ".codex" / "config.toml"
    text, n = re.subn(r"(?m)^startup_timeout_sec = \d+$", f"startup_timeout_sec = {int(startup_s)}", config.read_text())
    if n != 1:
        raise RuntimeError(f"{config}: expected one startup_timeout_sec of the room's server, found {n}")
    config.write_text(text)


def no_loop_detection(home: Path) -> None:
    """Gemini CLI stops a model that repeats one call with the same arguments (a drain's
    ``msg_recv`` until empty does): the workload's repeats are the run's, not a stuck model's."""
    settings = home / ".gemini" / "settings.json"
    known = json.loads(settings.read_text())
    known.setdefault("model", {})["disableLoopDetection"] = True
    settings.write_text(json.dumps(known, indent=2))


def count_hooks(home: Path, log: Path) -> int:
    """Put a counting wrapper in front of every installed hook command under ``home`` (the
    interpreter of ``<python> -I -S .../hook_entry.py``): each run appends a line to ``log``
    and then runs the hook as installed. Returns how many commands it wrapped."""
    wrapper = home / "hook-counted"
    pattern = re.compile(r"([^\s\"']+)( -I -S [^\s\"']*hook_entry\.py)")  # inside the file's own quotes
    wrapped = 0
    for path in [*home.rglob("*.json"), *home.rglob("*.toml")]:
        if path.is_relative_to(home / ".cache") or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        found = pattern.search(text)
        if not found:
            continue
        python = found.group(1)
        if not wrapper.exists():
            wrapper.write_text(f"#!/bin/sh\necho \"$(date +%s.%N) $*\" >> '{log}'\nexec '{python}' \"$@\"\n")
            wrapper.chmod(0o755)
        new, n = pattern.subn(lambda m: f"{wrapper}{m.group(2)}", text)
        (json.loads if path.suffix == ".json" else tomllib.loads)(new)  # still the file it was: else raise
        path.write_text(new)
        wrapped += n
        if path == home / ".codex" / "hooks.json":
            _retrust(path, text, new)
    return wrapped


def _retrust(hooks: Path, old: str, new: str) -> None:
    """Codex runs a hook only while config.toml holds the hash of its command as installed:
    the hashes of the wrapped commands in place of the installed ones."""
    from agents_room.harnesses.codex_hooks import trusted

    config = hooks.parent / "config.toml"
    text = config.read_text()
    before, after = trusted(hooks, old), trusted(hooks, new)
    for key, digest_ in before.items():
        if digest_ not in text:
            raise RuntimeError(f"{config}: no trust of {key} as installed to move to the wrapped hook")
        text = text.replace(digest_, after[key])
    config.write_text(text)


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants, with their reaped children's
    (``cutime``/``cstime``: the hooks that ran and exited)."""
    ticks = 0
    for p in [pid, *descendants(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` and its live descendants (the CLI, its MCP server, hooks)."""
    total = 0
    for p in [pid, *descendants(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def end_leftovers(folder: Path) -> list[str]:
    """End every CLI a killed agent left (its session: the CLI, its MCP server, its hooks) and
    remove its HOME; the agents that left one, by name (the runner calls this at a run's end)."""
    left = []
    for record in sorted(folder.glob("*.pid")) if folder.is_dir() else []:
        data = json.loads(record.read_text())
        members = session_members(int(data["pid"]))
        for pid in members:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        if members:
            left.append(record.stem)
        shutil.rmtree(data["home"], ignore_errors=True)
    return left


def session_members(sid: int) -> list[int]:
    """Every live process of session ``sid`` (a CLI started in a session of its own), and their
    descendants that made a session of their own."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                found.append(int(entry))
    return sorted(set(found) | {d for p in found for d in descendants(p)})
