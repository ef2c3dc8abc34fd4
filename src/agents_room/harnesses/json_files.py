"""How install edits a harness's JSON configuration file (Claude Code, Gemini CLI, Cursor).

Rules: entries that are not ours are never touched (other servers, other hooks, every other
setting); ours are recognised by name (the ``room`` server) or by command (the hook entry
``agents_room/hook_entry.py``, or ``agents-room hook`` as earlier versions wrote it) and
replaced in place when they differ; a file whose merge changes nothing keeps its own text, so
running twice changes nothing. A file that cannot be parsed is refused, never overwritten.
Nothing is written here: every function returns the :class:`Change` to make, or an edit
``edit(data) -> notes`` that :func:`json_change` applies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .config_change import SERVER, Change, InstallError, is_ours, marked, read_text


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


def json_change(path: Path, edit: Any, audience: str = "") -> Change:
    """Apply ``edit(data) -> notes`` to the JSON object in ``path``. Unchanged data keeps the
    file's own text (and formatting); a file that does not exist and would hold nothing stays
    unwritten."""
    before = read_text(path)
    data = _load_json(path, before)
    original = json.loads(json.dumps(data))
    notes = tuple(edit(data))
    if data == original and (before is not None or not data):
        return Change(path, before, before or "", (), audience) if before is not None else Change(path, None, None, (), audience)  # type: ignore[arg-type]
    return Change(path, before, json.dumps(data, indent=2) + "\n", notes, audience)


def dict_at(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = data.setdefault(key, {})
    if not isinstance(value, dict):
        raise InstallError(f"{path}: '{key}' is not an object; it was left as it is")
    return value


def both(*edits: Any) -> Any:
    """One edit made of several, their notes in order."""

    def edit(data: dict[str, Any]) -> list[str]:
        return [note for e in edits for note in e(data)]

    return edit


def server_edit(path: Path, entry: dict[str, Any]) -> Any:
    """``mcpServers.room`` set to ``entry``; InstallError for a ``room`` server not ours."""

    def edit(data: dict[str, Any]) -> list[str]:
        servers = dict_at(data, "mcpServers", path)
        old = servers.get(SERVER)
        if old == entry:
            return []
        if old is not None and not is_ours(old):
            raise InstallError(f"{path}: an MCP server named '{SERVER}' that is not agents-room is already there")
        servers[SERVER] = entry
        return [f"MCP server '{SERVER}' {'updated' if old else 'added'}"]

    return edit


def event_hooks_edit(path: Path, wanted: dict[str, list[dict[str, Any]]]) -> Any:
    """``hooks.<event>`` as Claude Code writes them (Gemini CLI and Codex read the same form):
    per event, one group ``{"matcher": "*", "hooks": [ours...]}``; our hooks found in other
    groups are removed (an old path, a hand edit), every other hook stays where it is. An
    event wanted with no hooks (``[]``) loses ours: they moved to another file."""

    def edit(data: dict[str, Any]) -> list[str]:
        if "hooks" not in data and not any(wanted.values()):
            return []
        hooks = dict_at(data, "hooks", path)
        notes = []
        for event, ours in wanted.items():
            if event not in hooks and not ours:
                continue
            groups = hooks.setdefault(event, [])
            if not isinstance(groups, list):
                raise InstallError(f"{path}: hooks.{event} is not a list; it was left as it is")
            mine = [g for g in groups if isinstance(g, dict) and any(marked(h) for h in g.get("hooks", []))]
            target = {"matcher": "*", "hooks": ours}
            if (ours and len(mine) == 1 and mine[0] == target) or (not ours and not mine):
                continue
            kept = []
            for g in groups:
                if g in mine:
                    rest = [h for h in g.get("hooks", []) if not marked(h)]
                    if rest:
                        kept.append({**g, "hooks": rest})
                else:
                    kept.append(g)
            hooks[event] = [*kept, target] if ours else kept
            if not hooks[event]:
                del hooks[event]
            notes.append(f"{event} hook " + ("updated" if mine else "added") if ours
                         else f"{event} hook removed (hooks run this machine's paths: they are in the local settings)")
        if not hooks and notes:
            del data["hooks"]
        return notes

    return edit
