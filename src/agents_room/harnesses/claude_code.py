"""Claude Code: what ``agents-room install claude-code`` writes, and how its agent is woken.

The MCP server entry (``.mcp.json``, or ``~/.claude.json`` with ``--scope user``) and the hooks
(``.claude/settings.local.json``, or ``~/.claude/settings.json``): SessionStart,
UserPromptSubmit and PostToolUse carry the news as context, Stop blocks the end of a turn
while mail is unannounced (:mod:`.hook`), and a second Stop hook with ``asyncRewake`` waits
for mail and wakes the idle chat (:mod:`.hook_wait`; the lever :class:`.wake.StopHookLever`).
``--channel`` turns on the other lever, the Claude Code channel the server itself speaks
(:mod:`.channel`), which Claude Code loads when started with
``--dangerously-load-development-channels server:room``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config_change import HOOK_TIMEOUT_S, LOCAL, SERVER, SHARED, USER, Change, InstallError, Store, is_ours, shown_store
from . import hook_line
from .json_files import both, dict_at, event_hooks_edit, json_change, server_edit

NAME = "claude-code"
SCOPE = "project"
CHANNEL = True  # the only harness with a channel lever
# The asyncRewake Stop hook waits for mail; Claude Code kills a hook at its timeout, so the
# hook gives up a minute earlier and exits 0 on its own.
WAIT_TIMEOUT_S = 3600


def by_name(scope: str) -> bool:
    """May the server entry run ``agents-room`` by name (the project's ``.mcp.json``, which a
    team commits)? The local scope gets this installation's path when the name is not it."""
    return True


def notes(scope: str, *, dry_run: bool, on_path: bool) -> list[str]:
    """What the person should know after the install."""
    if scope != "project":
        return []
    return ["Claude Code runs a project's MCP servers once they are approved: install approved 'room' on this "
            "machine (.claude/settings.local.json), unless you had turned it down there. A teammate with "
            "agents-room on PATH gets the server from .mcp.json as committed, and runs `agents-room install "
            "claude-code` once for the hooks and the approval."]


def plan(scope: str, root: Path, home: Path, exe: str, hook: str, *, channel: bool = False,
         store: Store | None = None) -> list[Change]:
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
    # UserPromptSubmit and PostToolUse come with every prompt and tool call: they pass the quiet
    # test first (:mod:`.hook_line`); the events that must answer run the hook itself. The
    # store rides the settings' ``env``, which Claude Code gives its hooks.
    quiet = hook_line.local(hook, quiet=True)
    wanted = {
        "SessionStart": [{"type": "command", "command": hook, "timeout": HOOK_TIMEOUT_S}],
        "UserPromptSubmit": [{"type": "command", "command": quiet, "timeout": HOOK_TIMEOUT_S}],
        "PostToolUse": [{"type": "command", "command": quiet, "timeout": HOOK_TIMEOUT_S}],
        "Stop": [
            {"type": "command", "command": hook, "timeout": HOOK_TIMEOUT_S},
            {"type": "command", "command": f"{hook} --wait --timeout {WAIT_TIMEOUT_S - 60}",
             "timeout": WAIT_TIMEOUT_S, "asyncRewake": True},
        ],
    }
    if scope == "user":
        servers, settings = home / ".claude.json", home / ".claude" / "settings.json"
        entry = {"type": "stdio", "command": exe, "args": ["serve"], "env": env}
        return [json_change(servers, server_edit(servers, entry), USER),
                json_change(settings, both(event_hooks_edit(settings, wanted), _env_edit(store)), USER)]

    servers, shared, local = root / ".mcp.json", root / ".claude" / "settings.json", root / ".claude" / "settings.local.json"
    portable = {"type": "stdio", "command": "agents-room", "args": ["serve"], "env": env}
    state = home / ".claude.json"
    mine = None if exe == "agents-room" else {**portable, "command": exe}
    return [
        json_change(servers, server_edit(servers, portable), SHARED),
        json_change(shared, both(event_hooks_edit(shared, {e: [] for e in wanted}),
                                   _env_edit(store if store and store.portable else None)), SHARED),
        json_change(local, both(event_hooks_edit(local, wanted), _approve_edit(local),
                                  _env_edit(store if store and not store.portable else None)), LOCAL),
        json_change(state, _localserver_edit(state, str(root), mine),
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


def _env_edit(store: Store | None) -> Any:
    """``env.AGENTS_ROOM_DB`` in a Claude Code settings file: Claude Code gives its ``env`` to
    the MCP servers and the hooks it starts, so both find the same store."""

    def edit(data: dict[str, Any]) -> list[str]:
        if store is None:
            return []
        env = dict_at(data, "env", Path("settings"))
        if env.get("AGENTS_ROOM_DB") == store.value:
            return []
        env["AGENTS_ROOM_DB"] = store.value
        return [f"env AGENTS_ROOM_DB={shown_store(store.value)}"]

    return edit


def _localserver_edit(path: Path, root: str, entry: dict[str, Any] | None) -> Any:
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
        project = dict_at(dict_at(data, "projects", path), root, path)
        return server_edit(path, entry)(project)

    return edit
