"""Codex's part of ``agents-room install``: ``[mcp_servers.room]`` in ``~/.codex/config.toml``,
written by hand (the standard library reads TOML but does not write it), every other byte of
the file kept. The merge rules are :mod:`agents_room.harness_config`'s;
it imports this module."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from .config_change import SERVER, USER, Change, InstallError, Store, is_ours, read_text
from .tomltext import toml_value


def codex(scope: str, home: Path, exe: str, store: Store | None = None) -> list[Change]:
    """``[mcp_servers.room]`` in ``~/.codex/config.toml``, written by hand: the table is
    appended, or its own lines replaced; every other byte of the file stays as it was."""
    if scope != "user":
        raise InstallError("codex reads MCP servers from ~/.codex/config.toml only: use --scope user")
    path = home / ".codex" / "config.toml"
    before = read_text(path)
    try:
        current = tomllib.loads(before or "")
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path} is not valid TOML ({exc}); it was left as it is") from None
    entry: dict[str, Any] = {"command": exe, "args": ["serve"], "env_vars": ["AGENTS_ROOM_DB"], "startup_timeout_sec": 30}
    if store:
        entry["env"] = {"AGENTS_ROOM_DB": store.value}
    old = current.get("mcp_servers", {}).get(SERVER)
    if old == entry:
        return [Change(path, before, before or "", (), USER)]
    if old is not None and not is_ours(old):
        raise InstallError(f"{path}: an MCP server named '{SERVER}' that is not agents-room is already there")
    table = _toml_table(f"mcp_servers.{SERVER}", entry)
    text = before or ""
    if old is None:
        after = text + ("\n" if text and not text.endswith("\n") else "") + ("\n" if text.strip() else "") + table
    else:
        after = _replace_toml_table(path, text, f"mcp_servers.{SERVER}", table)
    if tomllib.loads(after).get("mcp_servers", {}).get(SERVER) != entry:
        raise InstallError(f"{path}: could not place [mcp_servers.{SERVER}] safely; edit it by hand")
    return [Change(path, before, after, (f"MCP server '{SERVER}' {'updated' if old else 'added'}",), USER)]


def _toml_table(name: str, entry: dict[str, Any]) -> str:
    return f"[{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in entry.items())


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
