"""Codex: what ``agents-room install codex`` writes: ``[mcp_servers.room]`` in ``~/.codex/config.toml``,
and the hooks in ``~/.codex/hooks.json`` with their trust (:mod:`.codex_hooks`).

The standard library reads TOML but does not write it, so the file is edited by lines: the keys
install owns are set in place, every other byte stays as it was, and the result is read back
and compared with what was meant before anything is written. What install owns in the table:
``command``, ``args``, where the store is (``env.AGENTS_ROOM_DB`` when a store was named, else
the name ``AGENTS_ROOM_DB`` in ``env_vars``, so Codex passes the caller's own), and
``startup_timeout_sec`` only while it is missing. The user's keys (``tool_timeout_sec``, other
``env`` entries, other ``env_vars`` names) are kept. ``env`` is written as the sub-table
``[mcp_servers.room.env]``, so a user adds lines to it (``AGENTS_ROOM_WAKE_COMMAND``) without
declaring the key twice.

Codex's wake lever is its Stop hook, mid-turn: unread mail blocks the end of a turn and its
reason goes to the model. Nothing wakes an idle Codex but a configured command
(``AGENTS_ROOM_WAKE_COMMAND``, :class:`.wake.CommandLever`): its hooks run only inside a turn,
and an ``async`` hook's output waits for the next turn.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from . import codex_hooks
from .config_change import SERVER, USER, Change, InstallError, Store, is_ours, read_text
from .toml_lines import Document, toml_value

VARIABLE = "AGENTS_ROOM_DB"
STARTUP_TIMEOUT_S = 30  # the first start imports the MCP SDK (seconds); Codex's default is 10
TABLE = f"mcp_servers.{SERVER}"

NAME = "codex"
SCOPE = "user"
CHANNEL = False


def by_name(scope: str) -> bool:
    """Codex's file is this machine's own, read by a harness that may start without this
    shell's PATH: the server entry gets the absolute path."""
    return False


def notes(scope: str, *, dry_run: bool, on_path: bool) -> list[str]:
    return []


def plan(scope: str, root: Path, home: Path, exe: str, hook: str, *, channel: bool = False,
         store: Store | None = None) -> list[Change]:
    """The changes to ``~/.codex/config.toml`` and ``~/.codex/hooks.json``. InstallError (one
    line, the files untouched) for another scope, a file that is not TOML (or JSON), a ``room``
    server that is not ours, and a file whose ``mcp_servers`` is written inline (``mcp_servers
    = { ... }``: a table cannot be added to it)."""
    if scope != "user":
        raise InstallError("codex reads MCP servers from ~/.codex/config.toml only: use --scope user")
    folder = home / ".codex"
    hooks = codex_hooks.hooks_change(folder / "hooks.json", hook, store)
    trust = codex_hooks.trusted(hooks.path, hooks.after)
    return [_config(folder / "config.toml", exe, store, trust), hooks]


def _config(path: Path, exe: str, store: Store | None, trust: dict[str, str]) -> Change:
    """The change to config.toml: our server's table, and the trust of our hooks (``trust``:
    key -> hash)."""
    before = read_text(path)
    text = before or ""
    try:
        current = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path} is not valid TOML ({exc}); it was left as it is") from None
    servers = current.get("mcp_servers", {})
    if not isinstance(servers, dict):
        raise InstallError(f"{path}: mcp_servers is not a table; it was left as it is")
    old = servers.get(SERVER)
    if old is not None and not is_ours(old):
        raise InstallError(f"{path}: an MCP server named '{SERVER}' that is not agents-room is already there")
    doc = Document(text)
    if old is None and doc.defines_inline("mcp_servers"):
        raise InstallError(
            f"{path}: mcp_servers is written inline (mcp_servers = {{ ... }}), so [{TABLE}] cannot be added; "
            "write each server as its own [mcp_servers.<name>] table and run install again; it was left as it is")
    wanted, notes = _merged(old or {}, exe, store)
    if old == wanted:
        notes = []
    elif old is None:
        doc.append_table(TABLE, {k: v for k, v in wanted.items() if k != "env"},
                         {"env": wanted["env"]} if "env" in wanted else {})
        notes = [f"MCP server '{SERVER}' added"]
    else:
        _edit(doc, path, old, wanted)
        kept = sorted(set(old) - {"command", "args", "env_vars", "env", "startup_timeout_sec"})
        if kept:
            notes.append("kept " + ", ".join(kept))
    notes += codex_hooks.trust(doc, path, current, trust)
    after = doc.text()
    if after == text:
        return Change(path, before, text, (), USER)
    try:
        placed = tomllib.loads(after).get("mcp_servers", {}).get(SERVER)
        trusted = codex_hooks.placed(after, trust)
    except tomllib.TOMLDecodeError:
        placed, trusted = None, False
    if placed != wanted or not trusted:
        what = f"[{TABLE}]" if placed != wanted else "the hooks' trust ([hooks.state])"
        raise InstallError(f"{path}: could not place {what} safely (written in a form install does not edit); "
                           "edit it by hand; it was left as it is")
    return Change(path, before, after, tuple(notes), USER)


def _merged(old: dict[str, Any], exe: str, store: Store | None) -> tuple[dict[str, Any], list[str]]:
    """The table as it should be: ``old`` with install's keys set; and what changed, in words."""
    new = dict(old)
    notes: list[str] = []
    for key, value in (("command", exe), ("args", ["serve"])):
        if new.get(key) != value:
            new[key] = value
            notes.append(f"{key} = {toml_value(value)}")
    env = dict(new["env"]) if isinstance(new.get("env"), dict) else {}
    names = [n for n in new.get("env_vars") or [] if n != VARIABLE] if isinstance(new.get("env_vars"), list) else []
    if store:
        # One source for the variable: a value in env wins over env_vars anyway, and naming it
        # in both says two things.
        if env.get(VARIABLE) != store.value:
            notes.append(f"env {VARIABLE} = {toml_value(store.value)}")
        env[VARIABLE] = store.value
    else:
        if env.pop(VARIABLE, None) is not None:
            notes.append(f"env {VARIABLE} removed (the store is the default: Codex passes your own {VARIABLE})")
        names.append(VARIABLE)
    if names:
        new["env_vars"] = names
    else:
        new.pop("env_vars", None)
    if new.get("env_vars") != old.get("env_vars"):
        notes.append(f"env_vars = {toml_value(names)}")
    if env:
        new["env"] = env
    else:
        new.pop("env", None)
    if "startup_timeout_sec" not in new:
        new["startup_timeout_sec"] = STARTUP_TIMEOUT_S
        notes.append(f"startup_timeout_sec = {STARTUP_TIMEOUT_S}")
    return new, notes


def _edit(doc: Document, path: Path, old: dict[str, Any], wanted: dict[str, Any]) -> str:
    """Set, in the existing table's own lines, each key whose value changed."""
    if not doc.has_table(TABLE):
        raise InstallError(f"{path}: [{TABLE}] is written inline, not as a table; edit it by hand")
    for key in ("command", "args", "env_vars", "startup_timeout_sec"):
        if old.get(key) != wanted.get(key):
            doc.set_key(TABLE, key, wanted.get(key))
    old_env, new_env = old.get("env") or {}, wanted.get("env") or {}
    if old_env != new_env:
        if doc.has_table(f"{TABLE}.env"):
            doc.set_key(f"{TABLE}.env", VARIABLE, new_env.get(VARIABLE))
            doc.drop_if_empty(f"{TABLE}.env")
        elif doc.has_key(TABLE, "env"):  # an inline table: written again, the user's entries with ours
            doc.set_key(TABLE, "env", new_env or None)
        elif any(re.match(r"env\s*\.", k) for k in doc.keys(TABLE)):  # dotted keys: env.NAME = ...
            doc.set_key(TABLE, f"env.{VARIABLE}", new_env.get(VARIABLE))
        else:
            doc.add_subtable(TABLE, "env", new_env)
    return doc.text()
