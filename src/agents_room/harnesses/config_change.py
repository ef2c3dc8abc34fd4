"""What every harness's part of ``agents-room install`` shares: the :class:`Change` to make to
one file, the store location to write, who a file is for, and how our server entry and our
hooks are known. Nothing here writes a file."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SERVER = "room"
# Every hook a harness runs for us gets this long (seconds) before the harness gives up on it.
HOOK_TIMEOUT_S = 10
# Our hook commands, as this version writes them and as earlier ones did: the hook entry kept
# at ``agents_room/hook_entry.py`` (earlier installs wrote that path into users' files), or
# ``agents-room hook``.
HOOK_MARK = re.compile(r"[/\\]agents_room[/\\]hook_entry\.py\b|(^|[/\s'])agents-room'?\s+hook\b")

# Who a file is for, as install's output says it.
SHARED = "shared: commit it; it works on any machine where agents-room is on PATH"
LOCAL = "this machine only: paths of this installation; keep it out of git"
USER = "this machine only: your user settings"


class InstallError(Exception):
    pass


@dataclass(frozen=True)
class Store:
    """The store location install writes: ``value`` as written (``~/...`` when under the home
    folder, so it means the same on every teammate's machine), ``portable`` when it may go
    into a file a team commits (a path elsewhere may not exist there; a URL may carry a
    password)."""

    value: str
    portable: bool


@dataclass(frozen=True)
class Change:
    path: Path
    before: str | None  # None: the file does not exist yet
    after: str
    notes: tuple[str, ...]
    audience: str = ""

    @property
    def changed(self) -> bool:
        return self.before != self.after


def read_text(path: Path) -> str | None:
    """The file's text; None when it does not exist."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def is_ours(entry: Any) -> bool:
    """An MCP server entry that runs agents-room (by whatever path)."""
    return isinstance(entry, dict) and Path(str(entry.get("command", ""))).name == "agents-room"


def marked(hook: Any) -> bool:
    """A hook entry whose command is ours (:data:`HOOK_MARK`)."""
    return isinstance(hook, dict) and bool(HOOK_MARK.search(str(hook.get("command", ""))))


def shown_store(value: str) -> str:
    """The store as install's output and errors show it (a URL's password hidden)."""
    from ..store.location import redact

    return redact(value)


def committed_commands(store: Store | None, committed: str) -> str:
    """The server command of a project file a team commits (``committed``): the
    ``agents-room`` on each teammate's PATH (its hooks: :func:`.hook_line.portable`).
    InstallError for a machine-specific store, which would not mean the same there."""
    if store and not store.portable:
        raise InstallError(
            f"the store {shown_store(store.value)} is machine-specific (outside your home folder, or a URL) and "
            f"{committed} is committed: install with --scope user, or use a store under ~")
    return "agents-room"


# After installing a project file that runs ``agents-room`` by name, when that name on PATH is
# not this installation.
PORTABLE_NOTE = ("note: the project file runs `agents-room` by name, and that is not this installation on PATH "
                 "here: put it on PATH (README), or install with --scope user")


def launcher_change(home: Path) -> Change:
    """``~/.agents-room/hook``, the launcher a committed project file's hook runs on this
    machine (:func:`.hook_line.launcher_text`): written by the install of a committed file."""
    from .hook_line import LAUNCHER, launcher_text

    path = home / LAUNCHER
    before = read_text(path)
    after = launcher_text()
    notes = ("this installation's hook, for the project files a team commits",) if before != after else ()
    return Change(path, before, after, notes, "this machine only: the hook the committed files run here")
