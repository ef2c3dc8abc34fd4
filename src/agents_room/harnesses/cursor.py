"""Cursor: what ``agents-room install cursor`` writes, and how its agent is woken.

``.cursor/mcp.json`` and ``.cursor/hooks.json`` (or under ``~/.cursor`` with ``--scope
user``): one ``stop`` hook, which answers ``followup_message`` with the unread mail so the
agent goes on (``agents-room hook --format cursor``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config_change import (PORTABLE_NOTE, SHARED, USER, Change, InstallError, Store, committed_commands,
                            launcher_change, marked)
from .hook_line import line
from .json_files import dict_at, json_change, server_edit

NAME = "cursor"
SCOPE = "project"
CHANNEL = False


def by_name(scope: str) -> bool:
    return True


def notes(scope: str, *, dry_run: bool, on_path: bool) -> list[str]:
    return [PORTABLE_NOTE] if scope == "project" and not on_path else []



def plan(scope: str, root: Path, home: Path, exe: str, hook: str, *, channel: bool = False,
         store: Store | None = None) -> list[Change]:
    """Project scope: ``.cursor/`` is committed and Cursor has no local form of it, so the
    project files get portable commands (``agents-room`` on PATH; the hook does nothing where
    agents-room is not installed, :mod:`.hook_line`); ``--scope user`` writes this
    installation's paths under ``~/.cursor``."""
    base = root / ".cursor" if scope == "project" else home / ".cursor"
    servers, hooks_file = base / "mcp.json", base / "hooks.json"
    audience = SHARED if scope == "project" else USER
    committed = scope == "project"
    if committed:
        exe = committed_commands(store, ".cursor/")
    entry: dict[str, Any] = {"command": exe, "args": ["serve"]}
    if store:
        entry["env"] = {"AGENTS_ROOM_DB": store.value}  # hooks get no env of their own: the line exports it
    command = line(hook, committed=committed, store=store.value if store else None)
    ours = {"command": f"{command} --format cursor --event stop", "loop_limit": 3}

    def hooks_edit(data: dict[str, Any]) -> list[str]:
        data.setdefault("version", 1)
        hooks = dict_at(data, "hooks", hooks_file)
        stop = hooks.setdefault("stop", [])
        if not isinstance(stop, list):
            raise InstallError(f"{hooks_file}: hooks.stop is not a list; it was left as it is")
        mine = [h for h in stop if marked(h)]
        if mine == [ours]:
            return []
        hooks["stop"] = [h for h in stop if not marked(h)] + [ours]
        return [f"stop hook {'updated' if mine else 'added'}"]

    changes = [json_change(servers, server_edit(servers, entry), audience),
               json_change(hooks_file, hooks_edit, audience)]
    return [*changes, launcher_change(home)] if committed else changes
