"""Gemini CLI: what ``agents-room install gemini`` writes, and how its agent is woken.

``mcpServers.room`` and the hooks in ``.gemini/settings.json`` (or ``~/.gemini/settings.json``
with ``--scope user``). AfterAgent is its wake lever mid-turn: it blocks the end of a turn
with the unread mail as the reason, as Claude Code's Stop hook does. Gemini CLI has no lever
for an idle session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config_change import (HOOK_TIMEOUT_S, PORTABLE_NOTE, SHARED, USER, Change, Store, committed_commands,
                            launcher_change)
from .hook_line import line
from .json_files import both, event_hooks_edit, json_change, server_edit

NAME = "gemini"
SCOPE = "project"
CHANNEL = False


def by_name(scope: str) -> bool:
    """The project's settings are committed (``agents-room`` by name); the user settings are this
    machine's own, read by a harness that may start without this shell's PATH."""
    return scope != "user"


def notes(scope: str, *, dry_run: bool, on_path: bool) -> list[str]:
    said = []
    if scope == "project" and not on_path:
        said.append(PORTABLE_NOTE)
    if not dry_run:
        said.append("Gemini CLI runs a project's MCP servers and hooks only in a trusted folder: trust it when gemini "
                    "asks (or list it in ~/.gemini/trustedFolders.json).")
    return said


GEMINI_HOOK_TIMEOUT_MS = HOOK_TIMEOUT_S * 1000  # Gemini CLI counts hook timeouts in milliseconds
GEMINI_TIMEOUT_MS = 60_000
# Gemini CLI's events and the Claude Code ones they match (hook_news.py answers both): the facts
# ride SessionStart, BeforeAgent (a prompt) and AfterTool as additionalContext; AfterAgent is
# the end of a turn, where {"decision": "block", "reason": ...} sends the reason as the next
# prompt, as Claude Code's Stop does (and stop_hook_active marks the repeat).
GEMINI_EVENTS = ("SessionStart", "BeforeAgent", "AfterTool", "AfterAgent")
# The event of every tool call, whose hook exits at once when there is no news. A prompt's hook
# (BeforeAgent) always runs: it marks the turn's start, which the terminal wake lever reads
# before it types into an idle pane (harnesses/turns.py).
QUIET_EVENTS = frozenset({"AfterTool"})


def plan(scope: str, root: Path, home: Path, exe: str, hook: str, *, channel: bool = False,
         store: Store | None = None) -> list[Change]:
    """``mcpServers.room`` and the hooks in Gemini CLI's ``settings.json``: the project's
    ``.gemini/settings.json`` (committed, and Gemini CLI has no local form of it: portable
    commands, like Cursor's, that do nothing where agents-room is not installed, and the
    launcher they run on this machine, :func:`.config_change.launcher_change`), or
    ``~/.gemini/settings.json`` with ``--scope user`` (this installation's paths and the fast
    hook command). AfterTool, which comes with every tool call, passes the quiet test first (:mod:`.hook_line`). InstallError for a machine-specific store in a
    project."""
    path = (root if scope == "project" else home) / ".gemini" / "settings.json"
    committed = scope == "project"
    if committed:
        exe = committed_commands(store, ".gemini/settings.json")
    # `timeout` (ms) bounds a request, and the connection `gemini mcp list` waits for: 5 s without
    # it, less than the server's first start (it imports the MCP SDK) on a busy machine.
    entry: dict[str, Any] = {"command": exe, "args": ["serve"], "timeout": GEMINI_TIMEOUT_MS}
    if store:
        entry["env"] = {"AGENTS_ROOM_DB": store.value}  # the hooks' own environment is Gemini's: the line exports it

    def ours(event: str) -> list[dict[str, Any]]:
        command = line(hook, committed=committed, store=store.value if store else None, quiet=event in QUIET_EVENTS)
        return [{"type": "command", "name": "agents-room", "command": command, "timeout": GEMINI_HOOK_TIMEOUT_MS}]

    edit = both(server_edit(path, entry), event_hooks_edit(path, {event: ours(event) for event in GEMINI_EVENTS}))
    changes = [json_change(path, edit, SHARED if committed else USER)]
    return [*changes, launcher_change(home)] if committed else changes
