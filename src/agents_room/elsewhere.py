"""Other stores an agent on this machine may be on: the default file, and every
``AGENTS_ROOM_DB`` that the harness configurations ``agents-room install`` writes name. ``doctor``
lists them, so a person whose agents do not see each other can tell they are on different
stores. Read-only: nothing here opens a store or creates anything."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .store import StoreError
from .store.location import default_sqlite_path, redact, resolve

VARIABLE = "AGENTS_ROOM_DB"


@dataclass(frozen=True)
class Found:
    location: str  # as it may be shown (a URL without its password)
    where: str  # what names it
    exists: bool | None  # None: not a file (a URL), or refused
    problem: str | None = None  # the refusal, for a setting that names no usable store


def _configs(root: Path, home: Path) -> list[Path]:
    return [root / ".mcp.json", root / ".claude" / "settings.json", root / ".claude" / "settings.local.json",
            root / ".cursor" / "mcp.json", root / ".gemini" / "settings.json", home / ".claude.json",
            home / ".claude" / "settings.json", home / ".cursor" / "mcp.json", home / ".gemini" / "settings.json",
            home / ".codex" / "config.toml"]


def _settings_in(data: Any, root: Path) -> list[str]:
    """Every ``AGENTS_ROOM_DB`` value an agents-room entry of ``data`` sets: a settings file's
    ``env``, the ``room`` server's ``env`` (top level, and Claude Code's per-project local
    scope for ``root``)."""
    if not isinstance(data, dict):
        return []
    envs = [data.get("env")]
    for holder in (data, (data.get("projects") or {}).get(str(root)) if isinstance(data.get("projects"), dict) else None):
        servers = (holder or {}).get("mcpServers") or (holder or {}).get("mcp_servers") or {}
        if isinstance(servers, dict) and isinstance(servers.get("room"), dict):
            envs.append(servers["room"].get("env"))
    return [env[VARIABLE] for env in envs if isinstance(env, dict) and isinstance(env.get(VARIABLE), str)]


def configured(root: Path, home: Path) -> list[tuple[str, Path]]:
    """``(value, file)`` for every store setting in the harness configurations; a file that
    cannot be read or parsed is skipped (``install`` says what is wrong with it)."""
    out = []
    for path in _configs(root, home):
        try:
            text = path.read_text()
            data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        out += [(value, path) for value in _settings_in(data, root)]
    return out


def other_stores(current: str, root: Path, home: Path) -> list[Found]:
    """The default store and the configured ones, other than ``current`` (a location's target)."""
    seen = {current}
    found = []
    default = default_sqlite_path()
    candidates = [(str(default), "the default location")]
    candidates += [(value, f"{VARIABLE} in {path}") for value, path in configured(root, home)]
    for value, where in candidates:
        try:
            location = resolve(value, source="argument")
        except StoreError as exc:
            found.append(Found(redact(value), where, None, exc.text))
            continue
        if location.target in seen:
            continue
        seen.add(location.target)
        exists = location.path.exists() if location.engine == "sqlite" else None
        if exists is False and where == "the default location":
            continue  # no default store: nothing to confuse it with
        found.append(Found(str(location), where, exists))
    return found


def describe(f: Found) -> str:
    state = f.problem or ("exists" if f.exists else "no store there yet" if f.exists is False else "not a file")
    return f"{f.location} ({f.where}): {state}"
