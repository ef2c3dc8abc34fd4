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
from pathlib import Path
from typing import Any

from .codex_config import codex
from .config_change import LOCAL, SERVER, SHARED, USER, Change, InstallError, Store, is_ours, read_text

HOOK_TIMEOUT_S = 10
# The asyncRewake Stop hook waits for mail; Claude Code kills a hook at its timeout, so the
# hook gives up a minute earlier and exits 0 on its own.
WAIT_TIMEOUT_S = 3600
# Our hook commands, as this version writes them and as earlier ones did.
HOOK_MARK = re.compile(r"[/\\]agents_room[/\\]hook_entry\.py\b|(^|[/\s'])agents-room'?\s+hook\b")


def plan(harness: str, scope: str | None, root: Path, home: Path, exe: str, hook: str, *,
         channel: bool = False, store: Store | None = None) -> list[Change]:
    """``exe`` runs the MCP server (``exe serve``): ``agents-room`` when that name on PATH is
    this installation, else an absolute path; ``hook`` is this installation's fast hook command,
    a shell line; ``store`` the AGENTS_ROOM_DB to write (None: the default, written nowhere).
    Files a team commits get only what works on any machine; machine-specific entries go to the
    harness's local files. Unchanged files that do not exist are left out."""
    if harness == "claude-code":
        changes = claude_code(scope or "project", root, home, exe, hook, channel, store)
    elif channel:
        raise InstallError("--channel is a Claude Code feature")
    elif harness == "codex":
        changes = codex(scope or "user", home, exe, store)
    elif harness == "gemini":
        changes = gemini(scope or "project", root, home, exe, hook, store)
    else:
        changes = cursor(scope or "project", root, home, exe, hook, store)
    return [c for c in changes if c.before is not None or c.changed]


# -- JSON files --------------------------------------------------------------------------------------


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


def _json_change(path: Path, edit: Any, audience: str = "") -> Change:
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
        if old is not None and not is_ours(old):
            raise InstallError(f"{path}: an MCP server named '{SERVER}' that is not agents-room is already there")
        servers[SERVER] = entry
        return [f"MCP server '{SERVER}' {'updated' if old else 'added'}"]

    return edit


# -- Claude Code ---------------------------------------------------------------------------------------


def claude_code(scope: str, root: Path, home: Path, exe: str, hook: str, channel: bool,
                store: Store | None) -> list[Change]:
    """Project scope: ``.mcp.json`` and ``.claude/settings.json`` are committed, so they get
    only portable entries (the server as ``agents-room`` on PATH; a store under ``~``). The
    hooks, which run this installation's interpreter by absolute path, go to
    ``.claude/settings.local.json``, which Claude Code reads and teams do not commit; hooks are
    never in both (Claude Code runs the hooks of every settings file: each event would run
    twice). When ``agents-room`` on PATH is not this installation, the server entry with its
    absolute path goes to Claude Code's local scope for the project (``~/.claude.json``,
    ``projects.<folder>.mcpServers``), which wins over ``.mcp.json``'s entry on this machine."""
    env = {"AGENTS_ROOM_WAKE_LEVER": "stop-hook"}
    if channel:
        env["AGENTS_ROOM_CHANNEL"] = "1"
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
    if scope == "user":
        servers, settings = home / ".claude.json", home / ".claude" / "settings.json"
        entry = {"type": "stdio", "command": exe, "args": ["serve"], "env": env}
        return [_json_change(servers, _server_edit(servers, entry), USER),
                _json_change(settings, _both(_claude_hooks_edit(settings, wanted), _env_edit(store)), USER)]

    servers, shared, local = root / ".mcp.json", root / ".claude" / "settings.json", root / ".claude" / "settings.local.json"
    portable = {"type": "stdio", "command": "agents-room", "args": ["serve"], "env": env}
    state = home / ".claude.json"
    mine = None if exe == "agents-room" else {**portable, "command": exe}
    return [
        _json_change(servers, _server_edit(servers, portable), SHARED),
        _json_change(shared, _both(_claude_hooks_edit(shared, {e: [] for e in wanted}),
                                   _env_edit(store if store and store.portable else None)), SHARED),
        _json_change(local, _both(_claude_hooks_edit(local, wanted), _approve_edit(local),
                                  _env_edit(store if store and not store.portable else None)), LOCAL),
        _json_change(state, _local_server_edit(state, str(root), mine),
                     "this machine only: Claude Code's local scope for this project, used instead of .mcp.json's "
                     "entry here because agents-room on PATH is not this installation"),
    ]


def _approve_edit(path: Path) -> Any:
    """Approve ``.mcp.json``'s ``room`` server on this machine (``enabledMcpjsonServers`` in the
    local settings): the person who ran install chose it, and Claude Code would otherwise keep
    it "Pending approval" until they accept it in a chat. A server they turned down
    (``disabledMcpjsonServers``), or an approval of every server, is left as it is."""

    def edit(data: dict[str, Any]) -> list[str]:
        if data.get("enableAllProjectMcpServers") is True or SERVER in (data.get("disabledMcpjsonServers") or []):
            return []
        enabled = data.setdefault("enabledMcpjsonServers", [])
        if not isinstance(enabled, list):
            raise InstallError(f"{path}: 'enabledMcpjsonServers' is not a list; it was left as it is")
        if SERVER in enabled:
            return []
        enabled.append(SERVER)
        return [f".mcp.json's '{SERVER}' server approved on this machine"]

    return edit


def _both(*edits: Any) -> Any:
    def edit(data: dict[str, Any]) -> list[str]:
        return [note for e in edits for note in e(data)]

    return edit


def _env_edit(store: Store | None) -> Any:
    """``env.AGENTS_ROOM_DB`` in a Claude Code settings file: Claude Code gives its ``env`` to
    the MCP servers and the hooks it starts, so both find the same store."""

    def edit(data: dict[str, Any]) -> list[str]:
        if store is None:
            return []
        env = _dict_at(data, "env", Path("settings"))
        if env.get("AGENTS_ROOM_DB") == store.value:
            return []
        env["AGENTS_ROOM_DB"] = store.value
        return [f"env AGENTS_ROOM_DB={_shown_store(store.value)}"]

    return edit


def _shown_store(value: str) -> str:
    from .store.location import redact

    return redact(value)


def _local_server_edit(path: Path, root: str, entry: dict[str, Any] | None) -> Any:
    """Claude Code's local scope: ``projects.<root>.mcpServers.room`` in ``~/.claude.json``.
    ``entry`` None removes an entry of ours left by an earlier install."""

    def edit(data: dict[str, Any]) -> list[str]:
        projects = data.get("projects")
        if entry is None:
            servers = projects.get(root, {}).get("mcpServers", {}) if isinstance(projects, dict) else {}
            if isinstance(servers, dict) and is_ours(servers.get(SERVER)):
                del servers[SERVER]
                return [f"local MCP server '{SERVER}' removed: agents-room on PATH is this installation"]
            return []
        project = _dict_at(_dict_at(data, "projects", path), root, path)
        return _server_edit(path, entry)(project)

    return edit


def _claude_hooks_edit(path: Path, wanted: dict[str, list[dict[str, Any]]]) -> Any:
    """Per event, one group ``{"matcher": "*", "hooks": [ours...]}``; our hooks found in other
    groups are removed (an old path, a hand edit), every other hook stays where it is. An
    event wanted with no hooks (``[]``) loses ours: they moved to another file."""

    def edit(data: dict[str, Any]) -> list[str]:
        if "hooks" not in data and not any(wanted.values()):
            return []
        hooks = _dict_at(data, "hooks", path)
        notes = []
        for event, ours in wanted.items():
            if event not in hooks and not ours:
                continue
            groups = hooks.setdefault(event, [])
            if not isinstance(groups, list):
                raise InstallError(f"{path}: hooks.{event} is not a list; it was left as it is")
            mine = [g for g in groups if isinstance(g, dict) and any(_marked(h) for h in g.get("hooks", []))]
            target = {"matcher": "*", "hooks": ours}
            if (ours and len(mine) == 1 and mine[0] == target) or (not ours and not mine):
                continue
            kept = []
            for g in groups:
                if g in mine:
                    rest = [h for h in g.get("hooks", []) if not _marked(h)]
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


def _marked(hook: Any) -> bool:
    return isinstance(hook, dict) and bool(HOOK_MARK.search(str(hook.get("command", ""))))


# -- Gemini CLI ------------------------------------------------------------------------------------

GEMINI_HOOK_TIMEOUT_MS = HOOK_TIMEOUT_S * 1000  # Gemini CLI counts hook timeouts in milliseconds
GEMINI_TIMEOUT_MS = 60_000
# Gemini CLI's events and the Claude Code ones they match (hook_news.py answers both): the facts
# ride SessionStart, BeforeAgent (a prompt) and AfterTool as additionalContext; AfterAgent is
# the end of a turn, where {"decision": "block", "reason": ...} sends the reason as the next
# prompt, as Claude Code's Stop does (and stop_hook_active marks the repeat).
GEMINI_EVENTS = ("SessionStart", "BeforeAgent", "AfterTool", "AfterAgent")


def gemini(scope: str, root: Path, home: Path, exe: str, hook: str, store: Store | None) -> list[Change]:
    """``mcpServers.room`` and the hooks in Gemini CLI's ``settings.json``: the project's
    ``.gemini/settings.json`` (committed, and Gemini CLI has no local form of it: portable
    commands, like Cursor's), or ``~/.gemini/settings.json`` with ``--scope user`` (this
    installation's paths and the fast hook command). InstallError for a machine-specific store
    in a project."""
    import shlex

    path = (root if scope == "project" else home) / ".gemini" / "settings.json"
    if scope == "project":
        if store and not store.portable:
            raise InstallError(
                f"the store {_shown_store(store.value)} is machine-specific (outside your home folder, or a URL) and "
                ".gemini/settings.json is committed: install with --scope user, or use a store under ~")
        exe, hook = "agents-room", "agents-room hook"
    # `timeout` (ms) bounds a request, and the connection `gemini mcp list` waits for: 5 s without
    # it, less than the server's first start (it imports the MCP SDK) on a busy machine.
    entry: dict[str, Any] = {"command": exe, "args": ["serve"], "timeout": GEMINI_TIMEOUT_MS}
    if store:
        entry["env"] = {"AGENTS_ROOM_DB": store.value}
        hook = f"AGENTS_ROOM_DB={shlex.quote(store.value)} {hook}"  # the hooks' own environment is Gemini's
    ours = [{"type": "command", "name": "agents-room", "command": hook, "timeout": GEMINI_HOOK_TIMEOUT_MS}]
    edit = _both(_server_edit(path, entry), _claude_hooks_edit(path, {event: ours for event in GEMINI_EVENTS}))
    return [_json_change(path, edit, SHARED if scope == "project" else USER)]


# -- Cursor -----------------------------------------------------------------------------------------


def cursor(scope: str, root: Path, home: Path, exe: str, hook: str, store: Store | None) -> list[Change]:
    """Project scope: ``.cursor/`` is committed and Cursor has no local form of it, so the
    project files get portable commands (``agents-room`` on PATH); ``--scope user`` writes this
    installation's paths under ``~/.cursor``."""
    import shlex

    base = root / ".cursor" if scope == "project" else home / ".cursor"
    servers, hooks_file = base / "mcp.json", base / "hooks.json"
    audience = SHARED if scope == "project" else USER
    if scope == "project":
        if store and not store.portable:
            raise InstallError(
                f"the store {_shown_store(store.value)} is machine-specific (outside your home folder, or a URL) and "
                ".cursor/ is committed: install with --scope user, or use a store under ~")
        exe, hook = "agents-room", "agents-room hook"
    entry: dict[str, Any] = {"command": exe, "args": ["serve"]}
    prefix = ""
    if store:
        entry["env"] = {"AGENTS_ROOM_DB": store.value}
        prefix = f"AGENTS_ROOM_DB={shlex.quote(store.value)} "  # hooks get no env of their own
    ours = {"command": f"{prefix}{hook} --format cursor --event stop", "loop_limit": 3}

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

    return [_json_change(servers, _server_edit(servers, entry), audience),
            _json_change(hooks_file, hooks_edit, audience)]
