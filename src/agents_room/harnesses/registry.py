"""The harnesses ``agents-room install`` knows: one module each in this package.

A harness module says what install writes for it and how its agent is woken, through the
same few names: ``NAME`` (the install argument), ``SCOPE`` (the default ``--scope``),
``CHANNEL`` (whether ``--channel`` means anything there), ``by_name(scope)`` (may its server
entry run ``agents-room`` by name, or must it be this installation's absolute path),
``plan(scope, root, home, exe, hook, *, channel, store)`` (the :class:`Change` list, nothing
written) and ``notes(scope, *, dry_run, on_path)`` (what to tell the person afterwards).
Adding a harness is a new module and its line here.

Only names at import: the CLI builds install's parser from :data:`HARNESSES` on every start,
hooks included, so a harness module is imported when install runs for it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType

    from .config_change import Change, Store

# install's argument -> the module, in the order help lists them.
HARNESSES = {"claude-code": "claude_code", "codex": "codex", "gemini": "gemini", "cursor": "cursor"}


def harness(name: str) -> ModuleType:
    """The module of the harness ``name`` (one of :data:`HARNESSES`)."""
    import importlib

    return importlib.import_module(f"{__package__}.{HARNESSES[name]}")


def plan(name: str, scope: str | None, root: Path, home: Path, exe: str, hook: str, *,
         channel: bool = False, store: Store | None = None) -> list[Change]:
    """``exe`` runs the MCP server (``exe serve``): ``agents-room`` when that name on PATH is
    this installation, else an absolute path; ``hook`` is this installation's fast hook command,
    a shell line; ``store`` the AGENTS_ROOM_DB to write (None: the default, written nowhere).
    Files a team commits get only what works on any machine; machine-specific entries go to the
    harness's local files. Unchanged files that do not exist are left out."""
    from .config_change import InstallError

    module = harness(name)
    if channel and not module.CHANNEL:
        raise InstallError("--channel is a Claude Code feature")
    changes = module.plan(scope or module.SCOPE, root, home, exe, hook, channel=channel, store=store)
    return [c for c in changes if c.before is not None or c.changed]
