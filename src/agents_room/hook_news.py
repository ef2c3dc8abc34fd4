"""The hook's answer when its probe found news (``agents_room.hook.respond``): the store's
own hook rules (``store.news``) on the store's database, loaded without the rest of the store.
Imported only on that path; the quiet path never loads this module."""

from __future__ import annotations

import os
import sys

# Annotations only: this path imports no typing (nor dataclasses, pathlib: see news_modules).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Events whose hookSpecificOutput.additionalContext the harness adds to the turn: Claude
# Code's, and Gemini CLI's BeforeAgent (a prompt) and AfterTool.
CONTEXT_EVENTS = frozenset({"UserPromptSubmit", "PostToolUse", "SessionStart", "BeforeAgent", "AfterTool"})
# The end of a turn: "stop" is Cursor's; Gemini CLI's AfterAgent takes {"decision": "block"}
# as Claude Code's Stop does (the reason becomes the next prompt; stop_hook_active the repeat).
STOP_EVENTS = frozenset({"Stop", "SubagentStop", "stop", "AfterAgent"})


def answer(data: dict[str, Any], event: str, db: Any, rules: Any, keys: list[str],
            pids: list[int]) -> dict[str, Any] | None:
    """What the store's hook rules (``rules``: the module ``store.news``) say to ``event`` of
    the session these keys or pids belong to, on the store's database ``db``."""
    session = rules.hook_session(db, keys, pids)
    if session is None:
        return None
    if event in STOP_EVENTS:
        # stop_hook_active (Claude Code) and loop_count (Cursor) say this Stop ends a
        # continuation we caused: never block it again, so the agent cannot loop.
        repeat = data.get("stop_hook_active") is True or (data.get("loop_count") or 0) != 0
        blocks = session.autonomy != "hold" and not repeat
        told = rules.hook_event(db, session.id, tell=blocks)
        if not told:
            return None
        return {"decision": "block", "reason": rules.describe(told, session.id)}
    told = rules.hook_event(db, session.id, tell=event in CONTEXT_EVENTS)
    if not told:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": rules.describe(told, session.id)}}


def news_modules() -> tuple[Any, Any]:
    """The store's modules the news path runs on (``store.sqlite_open``: opening the database,
    with its transactions and the admission queue; ``store.news``: the hook's rules on rows),
    without the package's ``__init__``, which imports every module of the store (the
    dashboard's overview, leases, rooms, reads, ...) and their records: that import was most
    of the news path's time (see :func:`bare_store_modules`)."""
    return bare_store_modules("sqlite_open", "news")


def bare_store_modules(*names: str) -> tuple[Any, ...]:
    """The store's modules ``names`` (under ``agents_room.store``), loaded without the
    package's ``__init__``. None of the modules a hook loads this way defines a record (a
    dataclass): the import of ``dataclasses`` (with ``inspect``) and the building of each
    record's class cost more than a hook's queries. While they load, ``agents_room.store`` is
    a bare package (its folder only); then it and the modules loaded under it are forgotten
    (the caller keeps what it uses), so a later ``import agents_room.store`` loads the real
    package whole, with nothing half-made. In a process that has the store imported already,
    nothing changes."""
    if "agents_room.store" in sys.modules:
        return _load(names)
    import types

    bare = types.ModuleType("agents_room.store")
    bare.__path__ = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "store")]
    bare.__package__ = "agents_room.store"
    before = set(sys.modules)
    sys.modules["agents_room.store"] = bare
    try:
        return _load(names)
    finally:  # forget them all: a later import of the store loads it whole, on its own
        for name in set(sys.modules) - before:
            if name.startswith("agents_room.store"):
                del sys.modules[name]


def _load(names: tuple[str, ...]) -> tuple[Any, ...]:
    # __import__, not importlib.import_module: the import statement's own path, which
    # ``python -X importtime`` reports (the hooks' import tests read it), and no importlib.
    for name in names:
        __import__(f"agents_room.store.{name}")
    return tuple(sys.modules[f"agents_room.store.{name}"] for name in names)
