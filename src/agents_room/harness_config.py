"""What ``agents-room install`` writes into each harness's configuration, and how it merges.

Rules: entries that are not ours are never touched (other servers, other hooks, every other
setting); ours are recognised by name (the ``room`` server) or by command (the hook entry
``agents_room/hook_entry.py``, or ``agents-room hook`` as earlier versions wrote it) and
replaced in place when they differ; a file whose merge changes nothing keeps its own text, so
running twice changes nothing. A file that cannot be parsed is refused, never overwritten.
Nothing is written here: every function returns the :class:`Change` to make.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVER = "room"
HOOK_TIMEOUT_S = 10
# The asyncRewake Stop hook waits for mail; Claude Code kills a hook at its timeout, so the
# hook gives up a minute earlier and exits 0 on its own.
WAIT_TIMEOUT_S = 3600
# Our hook commands, as this version writes them and as earlier ones did.
HOOK_MARK = re.compile(r"[/\\]agents_room[/\\]hook_entry\.py\b|(^|[/\s'])agents-room'?\s+hook\b")


class InstallError(Exception):
    pass


@dataclass(frozen=True)
class Change:
    path: Path
    before: str | None  # None: the file does not exist yet
    after: str
    notes: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return self.before != self.after


def plan(harness: str, scope: str | None, root: Path, home: Path, exe: str, hook: str, *,
         channel: bool = False) -> list[Change]:
    """``exe`` runs the MCP server (``exe serve``); ``hook`` is the hook command, a shell line."""
    if harness == "claude-code":
        return claude_code(scope or "project", root, home, exe, hook, channel)
    if channel:
        raise InstallError("--channel is a Claude Code feature")
    if harness == "codex":
        return codex(scope or "user", home, exe)
    return cursor(scope or "project", root, home, exe, hook)


# -- JSON files --------------------------------------------------------------------------------------


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _load_json(path: Path, text: str | None) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InstallError(f"{path} is not valid JSON ({exc}); fix or move it, it was left as it is") from None
    if not isinstance(data, dict):
        raise InstallError(f"{path} does not hold a JSON object; it was left as it is")
    return data


def _json_change(path: Path, edit: Any) -> Change:
    """Apply ``edit(data) -> notes`` to the JSON object in ``path``. Unchanged data keeps the
    file's own text (and formatting)."""
    before = _read(path)
    data = _load_json(path, before)
    original = json.loads(json.dumps(data))
    notes = tuple(edit(data))
    if before is not None and data == original:
        return Change(path, before, before, ())
    return Change(path, before, json.dumps(data, indent=2) + "\n", notes)


def _dict_at(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise InstallError(f"{path}: '{key}' is not an object; it was left as it is")
    return value


def _server_edit(path: Path, entry: dict[str, Any]) -> Any:
    def edit(data: dict[str, Any]) -> list[str]:
        servers = _dict_at(data, "mcpServers", path)
        old = servers.get(SERVER)
        if old == entry:
            return []
        if old is not None and not _is_ours(old):
            raise InstallError(f"{path}: an MCP server named '{SERVER}' that is not agents-room is already there")
        servers[SERVER] = entry
        return [f"MCP server '{SERVER}' {'updated' if old else 'added'}"]

    return edit


def _is_ours(entry: Any) -> bool:
    return isinstance(entry, dict) and Path(str(entry.get("command", ""))).name == "agents-room"


# -- Claude Code ---------------------------------------------------------------------------------------


def claude_code(scope: str, root: Path, home: Path, exe: str, hook: str, channel: bool) -> list[Change]:
    env = {"AGENTS_ROOM_WAKE_LEVER": "stop-hook"}
    if channel:
        env["AGENTS_ROOM_CHANNEL"] = "1"
    entry = {"type": "stdio", "command": exe, "args": ["serve"], "env": env}
    if scope == "project":
        servers, settings = root / ".mcp.json", root / ".claude" / "settings.json"
    else:
        servers, settings = home / ".claude.json", home / ".claude" / "settings.json"
    wanted = {
        "SessionStart": [{"type": "command", "command": hook, "timeout": HOOK_TIMEOUT_S}],
        "UserPromptSubmit": [{"type": "command", "command": hook, "timeout": HOOK_TIMEOUT_S}],
        "PostToolUse": [{"type": "command", "command": hook, "timeout": HOOK_TIMEOUT_S}],
        "Stop": [
            {"type": "command", "command": hook, "timeout": HOOK_TIMEOUT_S},
            {"type": "command", "command": f"{hook} --wait --timeout {WAIT_TIMEOUT_S - 60}",
             "timeout": WAIT_TIMEOUT_S, "asyncRewake": True},
        ],
    }
    return [_json_change(servers, _server_edit(servers, entry)), _json_change(settings, _claude_hooks_edit(settings, wanted))]


def _claude_hooks_edit(path: Path, wanted: dict[str, list[dict[str, Any]]]) -> Any:
    """Per event, one group ``{"matcher": "*", "hooks": [ours...]}``; our hooks found in other
    groups are removed (an old path, a hand edit), every other hook stays where it is."""

    def edit(data: dict[str, Any]) -> list[str]:
        hooks = _dict_at(data, "hooks", path)
        notes = []
        for event, ours in wanted.items():
            groups = hooks.setdefault(event, [])
            if not isinstance(groups, list):
                raise InstallError(f"{path}: hooks.{event} is not a list; it was left as it is")
            mine = [g for g in groups if isinstance(g, dict) and any(_marked(h) for h in g.get("hooks", []))]
            target = {"matcher": "*", "hooks": ours}
            if len(mine) == 1 and mine[0] == target:
                continue
            kept = []
            for g in groups:
                if g in mine:
                    rest = [h for h in g.get("hooks", []) if not _marked(h)]
                    if rest:
                        kept.append({**g, "hooks": rest})
                else:
                    kept.append(g)
            hooks[event] = [*kept, target]
            notes.append(f"{event} hook {'updated' if mine else 'added'}")
        return notes

    return edit


def _marked(hook: Any) -> bool:
    return isinstance(hook, dict) and bool(HOOK_MARK.search(str(hook.get("command", ""))))


# -- Cursor -----------------------------------------------------------------------------------------


def cursor(scope: str, root: Path, home: Path, exe: str, hook: str) -> list[Change]:
    base = root / ".cursor" if scope == "project" else home / ".cursor"
    servers, hooks_file = base / "mcp.json", base / "hooks.json"
    entry = {"command": exe, "args": ["serve"]}
    ours = {"command": f"{hook} --format cursor --event stop", "loop_limit": 3}

    def hooks_edit(data: dict[str, Any]) -> list[str]:
        data.setdefault("version", 1)
        hooks = _dict_at(data, "hooks", hooks_file)
        stop = hooks.setdefault("stop", [])
        if not isinstance(stop, list):
            raise InstallError(f"{hooks_file}: hooks.stop is not a list; it was left as it is")
        mine = [h for h in stop if _marked(h)]
        if mine == [ours]:
            return []
        hooks["stop"] = [h for h in stop if not _marked(h)] + [ours]
        return [f"stop hook {'updated' if mine else 'added'}"]

    return [_json_change(servers, _server_edit(servers, entry)), _json_change(hooks_file, hooks_edit)]


# -- Codex ------------------------------------------------------------------------------------------


def codex(scope: str, home: Path, exe: str) -> list[Change]:
    """``[mcp_servers.room]`` in ``~/.codex/config.toml``, written by hand: the table is
    appended, or its own lines replaced; every other byte of the file stays as it was."""
    if scope != "user":
        raise InstallError("codex reads MCP servers from ~/.codex/config.toml only: use --scope user")
    path = home / ".codex" / "config.toml"
    before = _read(path)
    try:
        current = tomllib.loads(before or "")
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path} is not valid TOML ({exc}); it was left as it is") from None
    entry = {"command": exe, "args": ["serve"], "env_vars": ["AGENTS_ROOM_DB"], "startup_timeout_sec": 30}
    old = current.get("mcp_servers", {}).get(SERVER)
    if old == entry:
        return [Change(path, before, before or "", ())]
    if old is not None and not _is_ours(old):
        raise InstallError(f"{path}: an MCP server named '{SERVER}' that is not agents-room is already there")
    table = _toml_table(f"mcp_servers.{SERVER}", entry)
    text = before or ""
    if old is None:
        after = text + ("\n" if text and not text.endswith("\n") else "") + ("\n" if text.strip() else "") + table
    else:
        after = _replace_toml_table(path, text, f"mcp_servers.{SERVER}", table)
    if tomllib.loads(after).get("mcp_servers", {}).get(SERVER) != entry:
        raise InstallError(f"{path}: could not place [mcp_servers.{SERVER}] safely; edit it by hand")
    return [Change(path, before, after, (f"MCP server '{SERVER}' {'updated' if old else 'added'}",))]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _toml_table(name: str, entry: dict[str, Any]) -> str:
    return f"[{name}]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in entry.items())


def _replace_toml_table(path: Path, text: str, name: str, table: str) -> str:
    """Replace the lines of ``[name]`` and its sub-tables with ``table``."""
    lines = text.splitlines(keepends=True)
    header = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    start = end = None
    for i, line in enumerate(lines):
        m = header.match(line)
        if not m:
            continue
        key = m.group(1).replace(" ", "")
        if start is None and key == name:
            start = i
        elif start is not None and not key.startswith(name + "."):
            end = i
            break
    if start is None:
        raise InstallError(f"{path}: [{name}] is defined inline, not as a table; edit it by hand")
    end = len(lines) if end is None else end
    tail = "".join(lines[end:])
    return "".join(lines[:start]) + table + ("\n" if tail else "") + tail
