"""The forgetful agent's edit (``guarded_edit``): a write of a file through the harness's edit
guard, by an agent that never claims, as a model that never calls ``lease_claim`` edits.

The runner installs agents-room once per harness, ``agents-room install <harness> --scope
user --edits <[workload] edits>`` in a HOME of the run's own (``<out>/editguard/<harness>``),
and hands every agent the guard commands that install wrote for the harness's writer tool
(:func:`install`). An agent then edits as its harness would (:func:`ask`): the hook event the
harness sends before the tool runs (Claude Code's ``PreToolUse`` of ``Write``, Codex's
``PreToolUse`` of ``apply_patch``, Gemini CLI's ``BeforeTool`` of ``write_file``), as JSON on
the command's stdin through ``sh -c``, in the agent's working directory and environment (its
``AGENTS_ROOM_HARNESS_KEY`` is how the guard finds its session); and the file is written only
when the answer is not the harness's "deny". With ``--edits off`` the install has no guard
and every edit is written: the control.

Only the guard's own hooks of the event are run: the news hook beside them (its mail in the
model's context) is not what a guarded edit is about, and would double the cost of each.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from agents_room.harnesses.editguard_install import EVENTS, guard_marked, hooks_file

# The harnesses whose hook events an agent sends, in turn (agent k: FORMS[k % 3]), and the
# writer tool of each it edits with.
FORMS = ("claude-code", "codex", "gemini")
TOOL = {"claude-code": "Write", "codex": "apply_patch", "gemini": "write_file"}
# The holder a denial names (store/editclaim.py's ``denial``: "... is held <mode> by session <id>").
_HOLDER = re.compile(r" is held (exclusive|shared) by session ([^\s,()]+)")


def install(folder: Path, db: str, edits: str, agents_room: str) -> dict[str, list[str]]:
    """Install agents-room for each harness of :data:`FORMS` under ``folder`` (HOME and
    project of its own), the store ``db``, the guard as ``edits``; per harness, the guard
    commands its before-tool event runs for its writer tool (none with ``off``).
    RuntimeError with the installer's words if an install fails."""
    out: dict[str, list[str]] = {}
    for harness in FORMS:
        home = folder / harness
        project = home / "project"
        project.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTS_ROOM_", "CLAUDE", "CODEX", "GEMINI"))}
        env |= {"HOME": str(home), "AGENTS_ROOM_DB": db, "XDG_CONFIG_HOME": str(home / ".config")}
        command = [agents_room, "install", harness, "--scope", "user", "--dir", str(project), "--edits", edits]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=project, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        out[harness] = commands(harness, hooks_file(harness, "user", project, home))
    return out


def commands(harness: str, settings: Path | None) -> list[str]:
    """The guard's commands in ``settings`` (a harness's hooks file) that the harness runs
    before its writer tool: the hooks of every group of its before-tool event whose matcher
    matches the tool, that are the guard's."""
    if settings is None or not settings.exists():
        return []
    groups = (json.loads(settings.read_text()).get("hooks") or {}).get(EVENTS[harness][0]) or []
    return [h["command"] for g in groups if re.fullmatch(str(g.get("matcher") or ".*"), TOOL[harness])
            for h in g.get("hooks") or [] if guard_marked(h)]


def payload(harness: str, *, key: str, session: str, cwd: str, path: str, content: str, before: str) -> dict[str, Any]:
    """The hook event ``harness`` sends before writing ``content`` to ``path`` (``before``: what
    the file holds now, which a Codex patch replaces). Claude Code's ``session_id`` is the key
    its MCP server joined with (the agent's harness key); Codex and Gemini CLI send their own
    ``session``, which the store does not know (the guard then finds the agent by the
    environment's key)."""
    if harness == "claude-code":
        return {"session_id": key, "transcript_path": "", "cwd": cwd, "permission_mode": "default",
                "hook_event_name": "PreToolUse", "tool_name": "Write",
                "tool_input": {"file_path": path, "content": content}}
    relative = os.path.relpath(path, cwd)
    if harness == "codex":
        hunk = "".join(f"-{line}\n" for line in before.splitlines()) + "".join(f"+{line}\n" for line in content.splitlines())
        patch = f"*** Begin Patch\n*** Update File: {relative}\n@@\n{hunk}*** End Patch\n"
        return {"session_id": session, "cwd": cwd, "hook_event_name": "PreToolUse", "tool_name": "apply_patch",
                "tool_input": {"command": patch}}
    return {"session_id": session, "cwd": cwd, "hook_event_name": "BeforeTool", "tool_name": "write_file",
            "tool_input": {"file_path": relative, "content": content}}


@dataclass(frozen=True)
class Answer:
    """What the guard answered one tool call: ``allowed`` (the tool runs); a denial's
    ``reason`` and the ``holder`` it names; ``broken``: the guard said it is not working (it
    fails open: the edit goes through, unguarded)."""

    allowed: bool
    reason: str = ""
    holder: str | None = None
    mode: str | None = None
    broken: str = ""


def ask(commands: list[str], event: dict[str, Any], *, cwd: str, timeout_s: float) -> Answer:
    """Run each guard command as the harness does (``sh -c``, the event on stdin); the first
    denial decides. A command that fails, times out or answers what no harness reads is a
    broken guard, which the harness would let the edit through past."""
    text = json.dumps(event)
    for command in commands:
        try:
            done = subprocess.run(["/bin/sh", "-c", command], input=text, capture_output=True, text=True,
                                  cwd=cwd, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return Answer(True, broken=f"timed out after {timeout_s:g} s")
        if done.returncode != 0:
            return Answer(True, broken=f"exit {done.returncode}: {done.stderr.strip()[-200:]}")
        answer = _read(done.stdout)
        if not answer.allowed or answer.broken:
            return answer
    return Answer(True)


def _read(stdout: str) -> Answer:
    if not stdout.strip():
        return Answer(True)
    try:
        data = json.loads(stdout)
    except ValueError:
        return Answer(True, broken=f"not JSON: {stdout.strip()[:200]}")
    specific = data.get("hookSpecificOutput") or {}
    if data.get("decision") == "deny" or specific.get("permissionDecision") == "deny":
        reason = str(data.get("reason") or specific.get("permissionDecisionReason") or "")
        named = _HOLDER.search(reason)
        return Answer(False, reason, named.group(2) if named else None, named.group(1) if named else None)
    if data.get("systemMessage"):
        return Answer(True, broken=str(data["systemMessage"])[:300])
    return Answer(True)


def edit(path: str, content: bytes, commands: list[str], harness: str, *, key: str, session: str, cwd: str,
         timeout_s: float, write: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """One guarded edit: ``harness``'s hook event for writing ``content`` to ``path`` sent to the
    guard's ``commands``, and ``write()`` (the agent's own atomic write) unless it denies. The
    answer is the op's result, ``ok`` either way: ``{"ok": False, "path", "harness", "holder",
    "mode", "reason"}`` for a denial, as a denied claim's; an allowed edit's ``{"ok": True,
    "path", "harness", "hash"}``, with
    ``broken`` when the guard said it is not working (it let the edit through unguarded). No
    commands (``--edits off``): written at once."""
    answer = Answer(True)
    if commands:
        try:
            with open(path) as fh:
                before = fh.read()
        except OSError:
            before = ""
        event = payload(harness, key=key, session=session, cwd=cwd, path=path, content=content.decode(), before=before)
        answer = ask(commands, event, cwd=cwd, timeout_s=timeout_s)
        if not answer.allowed:
            return {"ok": False, "path": path, "harness": harness, "holder": answer.holder, "mode": answer.mode,
                    "reason": answer.reason[:300]}
    done = write()
    return {"ok": True, "path": path, "harness": harness, "hash": done["hash"],
            **({"broken": answer.broken} if answer.broken else {})}


def agent_session() -> str:
    """A harness's own session id (Codex's thread, Gemini CLI's session): not the store's key."""
    return str(uuid.uuid4())
